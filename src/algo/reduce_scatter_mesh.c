/*
 * Mesh ReduceScatter: each rank sends block j of its input directly to rank j, all p - 1 messages at
 * once, and reduces the p - 1 copies of its own block as they land (in rank order, chunk by chunk).
 *
 * Steps: 1 (p - 1 concurrent messages per rank). Bytes sent per rank: (p - 1)/p * n (n = the whole
 * input, p * recvcount elements). Reduction per rank: (p - 1)/p * n. Restrictions: none.
 */
#include <stdlib.h>

#include "algo/algo.h"
#include "algo/trees.h"

chorus_result_t reduce_scatter_mesh(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    size_t block = a->count * red.elem;
    prims_tree_t *t = trees_mesh(rank, n);
    if (!t) return CHORUS_ERR_NO_MEMORY;
    for (int j = 0; j < n; j++) {
        t[j].src = (const char *)a->sendbuf + (size_t)j * block;
        t[j].bytes = block;
    }
    t[rank].dst = a->recvbuf;
    chorus_result_t res = prims_trees(p, PRIMS_TREE_REDUCE, t, n, &red);
    free(t);
    if (res == CHORUS_SUCCESS) reduce_finish(a->recvbuf, a->count, a->dtype, a->op, n);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_scatter_mesh_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* A rank's link serialises its p - 1 messages. */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = p - 1.0, .bytes = (p - 1.0) / p * n,
                         .reduced = (p - 1.0) / p * n};
}
