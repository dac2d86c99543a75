/*
 * Mesh AllGather: each rank sends its block directly to every other rank and receives theirs, all
 * 2 (p - 1) messages in flight at once.
 *
 * Steps: 1 (p - 1 concurrent messages per rank). Bytes sent per rank: (p - 1)/p * n (n = the gathered
 * buffer, p * sendcount elements). Copied: n/p (its own block, out of place). Restrictions: none.
 */
#include <stdlib.h>

#include "algo/algo.h"
#include "algo/trees.h"
#include "util/copy.h"

chorus_result_t allgather_mesh(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t block = a->count * dtype_size(a->dtype);
    char *own = (char *)a->recvbuf + (size_t)rank * block;
    if (a->sendbuf != own) copy_bytes(own, a->sendbuf, block);
    prims_tree_t *t = trees_mesh(rank, n);
    if (!t) return CHORUS_ERR_NO_MEMORY;
    for (int j = 0; j < n; j++) {
        t[j].src = own;
        t[j].dst = (char *)a->recvbuf + (size_t)j * block;
        t[j].bytes = block;
    }
    chorus_result_t res = prims_trees(p, PRIMS_TREE_BROADCAST, t, n, NULL);
    free(t);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allgather_mesh_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* A rank's link serialises its p - 1 messages. */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = p - 1.0, .bytes = (p - 1.0) / p * n, .copied = n / p};
}
