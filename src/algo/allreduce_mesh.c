/*
 * Mesh AllReduce: every rank owns 1/p of the buffer. Each rank sends every other rank that rank's block
 * directly and reduces the p - 1 copies of its own block as they land (in rank order), then sends the
 * result directly to every other rank. All p - 1 exchanges of a phase are in flight at once, chunk by
 * chunk, and the second phase starts on a chunk as soon as the first has finished it.
 *
 * Steps: 2 (each of p - 1 concurrent messages per rank). Bytes sent per rank: 2 (p - 1)/p * n. Reduction
 * per rank: (p - 1)/p * n. Time ~ 2 (p - 1)(alpha + n/(p beta)) when a rank's link serialises its
 * messages, 2 (alpha + n/(p beta)) on a full-bisection network. Restrictions: none.
 */
#include <stdlib.h>

#include "algo/algo.h"
#include "algo/trees.h"

chorus_result_t allreduce_mesh(prims_t *p, const coll_args_t *a)
{
    int n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    prims_tree_t *t = trees_mesh(prims_rank(p), n);
    if (!t) return CHORUS_ERR_NO_MEMORY;
    for (int j = 0; j < n; j++) {
        size_t off, cnt;
        prims_partition(a->count, n, j, &off, &cnt);
        t[j].src = (const char *)a->sendbuf + off * red.elem;
        t[j].dst = (char *)a->recvbuf + off * red.elem;
        t[j].bytes = cnt * red.elem;
    }
    chorus_result_t res = prims_trees(p, PRIMS_TREE_ALLREDUCE, t, n, &red);
    free(t);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_mesh_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* A rank's link serialises its p - 1 messages per phase. */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = 2.0 * (p - 1), .bytes = 2.0 * (p - 1) / p * n,
                         .reduced = (p - 1.0) / p * n};
}
