/*
 * Direct Broadcast, inside one host: per slot-sized chunk, the root copies the chunk into its arena slot
 * and every other rank copies it out; the two slots alternate, so the root fills the next chunk while
 * the others read this one. Out of place, the root copies each chunk to its own output after publishing
 * it, from its input rather than from the slot the others are reading. Copies into an output too large
 * for the host's cache stream past it (copy_out_part, prims_stream_whole): 2 ranks took 0.74 to 0.95 of
 * the time from 1 to 64 MiB, 4 ranks 0.62 to 0.94 from 4 MiB on a Xeon virtual machine (docs/design.md,
 * Copies).
 *
 * Up to PRIMS_DIRECT_INLINE_BYTES the data travels in the phase's stamp (prims_direct_begin_inline),
 * and the root does not wait for the readers of its earlier broadcasts: it runs up to the arena's ring
 * of stamps ahead of them, as a sender of small messages does. Where ranks outnumber the cores that is
 * what makes a tiny broadcast cheap: each rank, when it runs, handles every call its root has published
 * meanwhile, where a phase that meets every peer costs a context switch per call (8 ranks on 2 cores, 8
 * bytes, runs of 1000 calls: 0.43 us a call, against 9 with every phase met and 1.5 for the chain).
 *
 * Steps: 1 synchronisation per chunk (ceil(n / slot)). Bytes: n copied in at the root (and n to its
 * output out of place), n copied out at every other rank; nothing crosses a connection. Restrictions:
 * direct access (every rank on one host, sharing the host arena).
 */
#include <string.h>

#include "algo/direct.h"
#include "util/copy.h"
#include "util/util.h"

/* Small data in the phase's stamp, the root running ahead. */
static chorus_result_t broadcast_inline(prims_t *p, const coll_args_t *a, size_t bytes)
{
    CHECK(prims_direct_begin_inline(p));
    if (prims_rank(p) == a->root) {
        prims_direct_publish_inline(p, a->sendbuf, bytes);
        if (a->sendbuf != a->recvbuf) memcpy(a->recvbuf, a->sendbuf, bytes);
        return CHORUS_SUCCESS;
    }
    const void *theirs;
    prims_direct_publish_inline(p, NULL, 0);
    CHECK(prims_direct_wait(p, a->root, &theirs));
    memcpy(a->recvbuf, theirs, bytes);
    return CHORUS_SUCCESS;
}

chorus_result_t broadcast_direct(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p);
    size_t elem = dtype_size(a->dtype), per = direct_chunk_elems(p, 1, elem);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    size_t whole = a->count * elem;
    if (whole <= PRIMS_DIRECT_INLINE_BYTES) return broadcast_inline(p, a, whole);
    size_t stream = prims_stream_whole(p, whole);
    for (size_t off = 0; off < a->count; off += per) {
        size_t bytes = CHORUS_MIN(per, a->count - off) * elem;
        void *slot;
        const void *theirs;
        CHECK(prims_direct_begin_placed(p, rank == a->root ? bytes : 0, &slot));
        if (rank == a->root) prims_copy_slot(p, slot, in + off * elem, bytes);
        prims_direct_publish(p, rank == a->root ? bytes : 0);
        if (rank == a->root) {
            if (in != out) copy_out_part(out + off * elem, in + off * elem, bytes, stream);
            continue;
        }
        CHECK(prims_direct_wait(p, a->root, &theirs));
        copy_out_part(out + off * elem, theirs, bytes, stream);
    }
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t broadcast_direct_cost(const algo_shape_t *s)
{
    double n = s->n;
    /* Two paths run side by side, each on its core: the readers' (the first chunk's copy in, then n
     * read) and the root's (2 n copied: in, and out of place out). The call takes the longer; with
     * the root's copies at about the arena's read rate, the root's, twice the readers' (2 ranks on an
     * AMD EPYC virtual machine: 1 to 64 MiB measured 1.8 to 2.2 times the readers' path alone). Where the
     * ranks outnumber the cores, the cores do the whole host's work, whoever's path it is on: the root's
     * 2 n copied and the others' (p - 1) n read, as an average per rank (s multiplies it back). */
    int p = s->p;
    if (s->shared) return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = algo_pieces(n, s->slot),
                                        .bytes = (p - 1.0) / p * n, .copied = 2 * n / p};
    return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = algo_pieces(n, s->slot), .bytes = n,
                         .copied = CHORUS_MIN(n, s->slot), .beside_copied = 2 * n};
}
