/*
 * Bruck AllToAll, for small blocks: a local rotation puts rank r's block for rank r + j at position j;
 * at the step of distance d = 1, 2, 4, ... every position j with j & d is packed and sent to rank r + d,
 * and the same positions arrive from rank r - d. After ceil(log2 p) steps position j holds what rank r - j
 * sent to r, and a second rotation puts it in place.
 *
 * Steps: ceil(log2 p). Bytes sent per rank: about n/2 per step, so ~ n/2 * log2 p (n = p * count
 * elements), more than pairwise's (p - 1)/p * n for p > 4, in exchange for log p rather than p - 1
 * latencies; plus local copies of 2n and n/2 per step of packing. Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/plan.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t alltoall_bruck(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t block = a->count * dtype_size(a->dtype), half = (size_t)(n + 1) / 2 * block;
    char *tmp, *rpack;
    /* Slot 1: the rotated buffer, then the outgoing pack; slot 0: the incoming pack. */
    CHECK(prims_scratch(p, 1, block * (size_t)n + half, (void **)&tmp));
    CHECK(prims_scratch(p, 0, half, (void **)&rpack));
    char *spack = tmp + block * (size_t)n;
    const char *send = a->sendbuf;
    for (int j = 0; j < n; j++)
        copy_bytes(tmp + (size_t)j * block, send + (size_t)plan_mod(rank + j, n) * block, block);
    for (int d = 1; d < n; d *= 2) {
        int to, from;
        size_t len = 0;
        plan_bruck_alltoall(rank, n, d, &to, &from);
        for (int j = d; j < n; j++)
            if (j & d) {
                copy_bytes(spack + len, tmp + (size_t)j * block, block);
                len += block;
            }
        CHECK(prims_sendrecv(p, to, spack, len, from, rpack, len));
        len = 0;
        for (int j = d; j < n; j++)
            if (j & d) {
                copy_bytes(tmp + (size_t)j * block, rpack + len, block);
                len += block;
            }
    }
    char *recv = a->recvbuf;
    for (int j = 0; j < n; j++)
        prims_copy_out(p, recv + (size_t)plan_mod(rank - j, n) * block, tmp + (size_t)j * block, block,
                       block * (size_t)n);
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t alltoall_bruck_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    double lg = algo_log2_ceil(p);
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = lg, .bytes = n / 2 * lg, .copied = 2 * n + n / 2 * lg};
}
