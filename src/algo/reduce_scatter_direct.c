/*
 * Direct ReduceScatter, inside one host: per chunk, every rank copies the chunk of each of its p input
 * blocks but its own into its arena slot (the slot holds p pieces; nobody else reads its own), then
 * combines piece `rank` of the p - 1 other slots and its own block's piece, read from its input, into its
 * output: its own piece first, then the others in turn (direct_turn). In place the output is that block,
 * and the combine reads each of its elements before it writes it.
 *
 * Steps: 1 synchronisation per chunk (ceil(n / slot)). Bytes per rank: (p-1)/p n copied in, n
 * read while combining, n/p written (in cache, as one-shot AllReduce's); nothing crosses a connection.
 * Restrictions: direct access (every rank on one host, sharing the host arena).
 */
#include <string.h>

#include "algo/direct.h"
#include "util/util.h"

chorus_result_t reduce_scatter_direct(prims_t *p, const coll_args_t *a)
{
    int n = prims_nranks(p), rank = prims_rank(p);
    prims_reduce_t red = algo_reduction(a);
    size_t elem = red.elem, per = direct_chunk_elems(p, n, elem);
    const char *own = (const char *)a->sendbuf + (size_t)rank * a->count * elem;
    for (size_t off = 0; off < a->count; off += per) {
        size_t cnt = CHORUS_MIN(per, a->count - off);
        const void *const *slots;
        CHECK(direct_put_pieces(p, a->sendbuf, a->count, off, cnt, elem, rank));
        CHECK(prims_direct_wait_all(p, &slots));
        direct_reduce_own((char *)a->recvbuf + off * elem, slots, n, (size_t)rank * cnt * elem, cnt, rank,
                          own + off * elem, &red);
    }
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_scatter_direct_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = algo_pieces(n, s->slot), .bytes = (p - 1.0) / p * n,
                         .copied = (p - 1.0) / p * n, .reduced = (p - 1.0) / p * n, .slot_bytes = (p - 1.0) / p * n,
                         .slot_reduced = (p - 1.0) / p * n};
}
