/*
 * Ring AllToAll: only neighbours talk. At step s (1 <= s < p) rank r sends its right neighbour the blocks
 * rank r - s + 1 addressed to ranks r + 1 .. r + p - s, and receives from its left neighbour the blocks of
 * rank r - s for ranks r .. r + p - s - 1: the first is its own, the rest go on at the next step.
 *
 * Steps: p - 1. Bytes sent per rank: (p - 1)/2 * n (n = p * count elements): store and forward costs a
 * factor p/2 over pairwise, for a ring-shaped topology. Copied: (2p - 1)/p * n: the first bundle
 * ((p - 1)/p * n), the own block and each step's block for this rank. Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/plan.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t alltoall_ring(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t block = a->count * dtype_size(a->dtype), span = block * (size_t)(n - 1);
    const char *send = a->sendbuf;
    char *recv = a->recvbuf, *bundle[2];
    CHECK(prims_scratch(p, 1, 2 * span, (void **)&bundle[0]));
    bundle[1] = bundle[0] + span;
    /* The first bundle: this rank's blocks for r + 1, ..., r + p - 1, read before recvbuf (maybe sendbuf)
     * is written. */
    for (int i = 0; i < n - 1; i++)
        copy_bytes(bundle[0] + (size_t)i * block, send + (size_t)plan_mod(rank + 1 + i, n) * block, block);
    if (send != recv)
        prims_copy_out(p, recv + (size_t)rank * block, send + (size_t)rank * block, block, block * (size_t)n);
    const char *out = bundle[0];
    for (int s = 1; s < n; s++) {
        int to, from, src, nblocks;
        plan_ring_alltoall(rank, n, s, &to, &from, &src, &nblocks);
        char *in = bundle[s % 2];
        CHECK(prims_sendrecv(p, to, out, (size_t)nblocks * block, from, in, (size_t)nblocks * block));
        copy_bytes(recv + (size_t)src * block, in, block);
        out = in + block;
    }
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t alltoall_ring_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = p - 1.0, .bytes = (p - 1.0) / 2 * n,
                         .copied = (2.0 * p - 1) / p * n, .streamed = algo_streamed_part(s, n / p, n)};
}
