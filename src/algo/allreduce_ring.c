/*
 * Ring AllReduce: a ring reduce-scatter followed by a ring allgather.
 *
 * The buffer is split into p blocks (sizes differ by at most one element). In the reduce-scatter, for
 * p - 1 steps each rank sends one block to its right neighbour while receiving another from its left
 * and reducing it, chunk by chunk as it lands; rank r ends owning the full reduction of block r + 1. In the
 * allgather, p - 1 more steps circulate the reduced blocks.
 *
 * Steps: 2(p - 1). Bytes sent per rank: 2 (p - 1)/p * n. Reduction work per rank: (p - 1)/p * n.
 * Restrictions: none (any p, any count; avg divides once, on the owned block).
 */
#include "algo/algo.h"
#include "algo/ring.h"
#include "util/util.h"

chorus_result_t allreduce_ring(prims_t *p, const coll_args_t *a)
{
    int n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    ring_layout_t layout = {a->recvbuf, a->count, n, red.elem};
    CHECK(ring_reduce_scatter(p, a->sendbuf, a->count, &red, 0, ring_out_inplace, &layout));
    size_t off, cnt;
    prims_partition(a->count, n, plan_mod(prims_rank(p) + 1, n), &off, &cnt);
    reduce_finish(layout.base + off * red.elem, cnt, a->dtype, a->op, n);
    return ring_allgather(p, a->recvbuf, a->count, red.elem, 1);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_ring_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = 2.0 * (p - 1), .bytes = 2.0 * (p - 1) / p * n,
                         .reduced = (p - 1.0) / p * n};
}
