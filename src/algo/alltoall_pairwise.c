/*
 * Pairwise AllToAll: in step s (1 <= s < p) rank r sends its block for rank r + s and receives the block
 * from rank r - s, so every step is a permutation and no rank receives from two peers at once. The own
 * block is copied locally. In place (sendbuf == recvbuf) the input is first copied to scratch.
 *
 * Steps: p - 1. Bytes sent per rank: (p - 1)/p * n (n = p * count elements). Copied: n/p, the own block
 * (in place: n, the scratch copy). Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/plan.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t alltoall_source(prims_t *p, const coll_args_t *a, const char **send_p)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t block = a->count * dtype_size(a->dtype);
    *send_p = a->sendbuf;
    if (a->sendbuf == a->recvbuf) {
        void *copy;
        CHECK(prims_scratch(p, 1, block * (size_t)n, &copy));
        copy_bytes(copy, a->sendbuf, block * (size_t)n);
        *send_p = copy;
    } else {
        prims_copy_out(p, (char *)a->recvbuf + (size_t)rank * block, (const char *)a->sendbuf + (size_t)rank * block,
                       block, block * (size_t)n);
    }
    return CHORUS_SUCCESS;
}

chorus_result_t alltoall_pairwise(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t block = a->count * dtype_size(a->dtype);
    const char *send;
    char *recv = a->recvbuf;
    CHECK(alltoall_source(p, a, &send));
    for (int s = 1; s < n; s++) {
        int to, from;
        plan_pairwise(rank, n, s, &to, &from);
        CHECK(prims_sendrecv(p, to, send + (size_t)to * block, block, from, recv + (size_t)from * block, block));
    }
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t alltoall_pairwise_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The own block's copy streams where the output is large for the cache (prims_copy_out). */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = p - 1.0, .bytes = (p - 1.0) / p * n, .copied = n / p,
                         .streamed = algo_streamed_part(s, n / p, n)};
}
