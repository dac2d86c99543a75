/*
 * Ring AllGather: every rank places its block at its own offset, then for p - 1 steps sends the block it
 * got last to its right neighbour while receiving the next from its left.
 *
 * Steps: p - 1. Bytes sent per rank: (p - 1)/p * n (n = the gathered buffer, p * sendcount elements).
 * Copied: n/p (its own block, out of place). Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/ring.h"
#include "util/copy.h"

chorus_result_t allgather_ring(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t elem = dtype_size(a->dtype), block = a->count * elem;
    char *own = (char *)a->recvbuf + (size_t)rank * block;
    /* Streamed although the ring's first step sends it: blocks that large (copy.h) are read back from
     * memory either way, and over TCP 2 ranks' AllGather of 64 MiB took 32.5 ms against 34.0 with plain
     * stores (medians of 5 alternating runs). */
    if (a->sendbuf != own) copy_out(own, a->sendbuf, block);
    return ring_allgather(p, a->recvbuf, a->count * (size_t)n, elem, 0);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allgather_ring_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The own block's copy streams where the output is large for the cache (prims_copy_out). */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = p - 1.0, .bytes = (p - 1.0) / p * n, .copied = n / p,
                         .streamed = algo_streamed_part(s, n / p, n)};
}
