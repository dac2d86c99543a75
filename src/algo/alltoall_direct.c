/*
 * Direct AllToAll, inside one host: per chunk, every rank copies the chunk of each of its p - 1 send blocks
 * meant for the others into its arena slot (the slot holds p pieces), then copies piece `rank` of every
 * other rank's slot into that rank's block of its output; its own block goes straight from its send
 * buffer to its output. Out of place, copies into the output stream past the cache where it is too
 * large for it (prims_stream_whole).
 *
 * Steps: 1 synchronisation per chunk (ceil(n / slot)). Bytes per rank: (p-1)/p n copied in, (p-1)/p n
 * copied out of the peers' slots, n/p copied locally; nothing crosses a connection. In place works: a
 * chunk is copied in before any of it is overwritten, and the own block stays where it is.
 * Restrictions: direct access (every rank on one host, sharing the host arena).
 */
#include "algo/direct.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t alltoall_direct(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t elem = dtype_size(a->dtype), per = direct_chunk_elems(p, n, elem);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    /* In place, each chunk of the output was read into the slot just before: in cache, not streamed. */
    size_t whole = in != out ? prims_stream_whole(p, a->count * elem * (size_t)n) : 0;
    for (size_t off = 0; off < a->count; off += per) {
        size_t piece = CHORUS_MIN(per, a->count - off) * elem, own = ((size_t)rank * a->count + off) * elem;
        const void *const *slots;
        CHECK(direct_put_pieces(p, in, a->count, off, piece / elem, elem, rank));
        if (in != out) copy_out_part(out + own, in + own, piece, whole);
        CHECK(prims_direct_wait_all(p, &slots));
        for (int i = 1; i < n; i++) {
            int q = direct_turn(rank, n, i);
            copy_out_part(out + ((size_t)q * a->count + off) * elem, (const char *)slots[q] + (size_t)rank * piece,
                          piece, whole);
        }
    }
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t alltoall_direct_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = algo_pieces(n, s->slot), .bytes = (p - 1.0) / p * n,
                         .copied = n, .streamed = algo_streamed_part(s, n / p, n)};
}
