/*
 * Direct AllGather, inside one host: per slot-sized chunk of its block, every rank copies the chunk into
 * its arena slot, then copies every other rank's chunk into its place in the output, and its own straight
 * from its input (not at all in place): the input and the output are the user's buffers, placed alike,
 * where the slot is page-aligned and a copy between different offsets is the slower one (util/copy.h).
 * Copies into the output stream past the cache where it is too large for it (prims_stream_whole).
 *
 * Steps: 1 synchronisation per chunk (ceil(n / (p slot))). Bytes per rank: n/p copied in, n copied out;
 * nothing crosses a connection. Restrictions: direct access (every rank on one host, sharing the host
 * arena).
 */
#include "algo/direct.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t allgather_direct(prims_t *p, const coll_args_t *a)
{
    size_t elem = dtype_size(a->dtype), per = direct_chunk_elems(p, 1, elem);
    int rank = prims_rank(p);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    /* Nothing reads the output back, in place either (only the own block was read, and stays). */
    size_t whole = prims_stream_whole(p, a->count * elem * (size_t)prims_nranks(p));
    for (size_t off = 0; off < a->count; off += per) {
        size_t bytes = CHORUS_MIN(per, a->count - off) * elem;
        const void *const *slots;
        CHECK(direct_put(p, in + off * elem, bytes));
        CHECK(prims_direct_wait_all(p, &slots));
        for (int i = 0; i < prims_nranks(p); i++) {
            int q = direct_turn(rank, prims_nranks(p), i);
            char *dst = out + ((size_t)q * a->count + off) * elem;
            if (q != rank)
                copy_out_part(dst, slots[q], bytes, whole);
            else if (dst != in + off * elem)
                copy_out_part(dst, in + off * elem, bytes, whole);
        }
    }
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allgather_direct_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = algo_pieces(n, p * s->slot), .bytes = (p - 1.0) / p * n,
                         .copied = 2 * n / p, .streamed = algo_streamed_part(s, n / p, n)};
}
