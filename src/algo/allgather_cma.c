/*
 * Single-copy AllGather, inside one host: every rank publishes the address of its block; each copies every
 * peer's block straight out of the peer's memory into its output (process_vm_readv), starting with its
 * right neighbour so that readers spread over the blocks; then it says so, and returns once every peer
 * has read its block too.
 *
 * Steps: 2 synchronisations. Bytes per rank: (p-1)/p n read from the peers, one copy each (the arena
 * path copies twice). Restrictions: direct access and single-copy reads.
 */
#include "algo/direct.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t allgather_cma(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t bytes = a->count * dtype_size(a->dtype);
    char *out = a->recvbuf;
    uint64_t *slot;
    const void *const *slots;
    CHECK(prims_direct_begin(p, (void **)&slot));
    slot[0] = prims_direct_share(p, a->sendbuf, bytes);
    prims_direct_publish(p, sizeof(*slot));
    if (out + (size_t)rank * bytes != a->sendbuf) copy_out(out + (size_t)rank * bytes, a->sendbuf, bytes);
    CHECK(prims_direct_wait_all(p, &slots));
    for (int i = 1; i < n; i++) {
        int q = (rank + i) % n;
        CHECK(prims_direct_read(p, q, *(const uint64_t *)slots[q], out + (size_t)q * bytes, bytes, 1));
    }
    return direct_empty_phase(p);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allgather_cma_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The own block's copy streams from COPY_STREAM_MIN (copy_out). */
    return (algo_cost_t){.link = ALGO_LINK_CMA, .steps = 2, .bytes = (p - 1.0) / p * n, .copied = n / p,
                         .streamed = algo_streamed(n / p)};
}
