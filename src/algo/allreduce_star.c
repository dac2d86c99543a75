/*
 * Star AllReduce, the baseline: every rank sends its whole buffer to rank 0, which reduces the copies (in
 * rank order, chunk by chunk as they land) and sends the result back to every rank.
 *
 * Steps: 2. Bytes: rank 0 receives and sends (p - 1) n; every other rank sends n. Reduction at rank 0:
 * (p - 1) n. Time ~ 2 (p - 1)(alpha + n/beta) at rank 0's link. Restrictions: none.
 */
#include <stdlib.h>

#include "algo/algo.h"
#include "algo/trees.h"

chorus_result_t allreduce_star(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    prims_tree_t *t = trees_mesh(prims_rank(p), prims_nranks(p));
    if (!t) return CHORUS_ERR_NO_MEMORY;
    t[0].src = a->sendbuf; /* the star rooted at rank 0 */
    t[0].dst = a->recvbuf;
    t[0].bytes = a->count * red.elem;
    chorus_result_t res = prims_trees(p, PRIMS_TREE_ALLREDUCE, t, 1, &red);
    free(t);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_star_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* Rank 0 receives, then sends: one way at a time. */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = 2.0 * (p - 1), .reduced = (p - 1.0) * n,
                         .oneway = 2.0 * (p - 1) * n};
}
