/*
 * Bruck AllGather, for any p: rank r keeps a buffer whose position j holds the block of rank r + j. It
 * starts with its own block at position 0; at the step of distance d = 1, 2, 4, ... it sends its first
 * min(d, p - d) blocks to rank r - d and receives as many from rank r + d into positions d, d + 1, ...
 * A final local rotation puts every block at its rank's place.
 *
 * Steps: ceil(log2 p). Bytes sent per rank: (p - 1)/p * n (n = the gathered buffer, p * sendcount
 * elements), plus a local copy of n. Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/plan.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t allgather_bruck(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t block = a->count * dtype_size(a->dtype);
    char *tmp;
    CHECK(prims_scratch(p, 1, block * (size_t)n, (void **)&tmp));
    copy_bytes(tmp, a->sendbuf, block);
    for (int d = 1; d < n; d *= 2) {
        int to, from, nblocks;
        plan_bruck_allgather(rank, n, d, &to, &from, &nblocks);
        CHECK(prims_sendrecv(p, to, tmp, (size_t)nblocks * block, from, tmp + (size_t)d * block,
                             (size_t)nblocks * block));
    }
    size_t head = (size_t)(n - rank) * block; /* positions 0 .. n - rank - 1: ranks rank .. n - 1 */
    prims_copy_out(p, (char *)a->recvbuf + (size_t)rank * block, tmp, head, block * (size_t)n);
    prims_copy_out(p, a->recvbuf, tmp + head, (size_t)rank * block, block * (size_t)n);
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allgather_bruck_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = algo_log2_ceil(p), .bytes = (p - 1.0) / p * n,
                         .copied = n};
}
