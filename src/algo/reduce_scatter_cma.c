/*
 * Single-copy ReduceScatter, inside one host: the reduce-scatter half of the single-copy AllReduce
 * (allreduce_cma.c), straight between the ranks' buffers, with nothing staged in the host arena. Every
 * rank publishes the address of its input; rank r reads block r of each peer's input chunk by chunk
 * (process_vm_readv into scratch, which stays in cache, or in place where the peer's input is a
 * chorus_mem_alloc buffer this rank has mapped) and combines the p blocks in rank order into its
 * output (direct_combine_peers), an output of RS_CMA_STREAM_MIN or more streamed past the cache. Then it
 * says so, and returns once every peer has said so too (until then they may still read its input). In
 * place the output is block r of the rank's own input, which no peer reads.
 *
 * Steps: 2 synchronisations. Bytes per rank: (p-1)/p n read from the peers' inputs, one copy each (the
 * arena's direct ReduceScatter copies the input into its slots and reads the slots: two); (p-1)/p n
 * combined. Restrictions: direct access and single-copy reads.
 */
#include <string.h>

#include "algo/direct.h"
#include "util/util.h"

/* Outputs from here stream (direct_combine_peers). Measured on the Xeon virtual machine, medians of 3 to 5
 * alternating runs, streamed against plain stores: on 2 ranks 1.18 and 1.16 of the time with outputs of
 * 4 and 8 MiB, 0.93, 0.87 and 0.86 with 16, 32 and 128 MiB; on 4 ranks 1.07 with 4 MiB, 0.98 and 0.97
 * with 16 and 64 MiB (an output below it stays in the large last-level cache that machine has). */
#define RS_CMA_STREAM_MIN (16u << 20)

chorus_result_t reduce_scatter_cma(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    size_t block = a->count * red.elem;
    uint64_t *slot, *addrs;
    const void *const *slots;
    CHECK(prims_scratch(p, 1, (size_t)n * sizeof(*addrs), (void **)&addrs));
    CHECK(prims_direct_begin(p, (void **)&slot));
    slot[0] = prims_direct_share(p, a->sendbuf, block * (size_t)n);
    prims_direct_publish(p, sizeof(*slot));
    CHECK(prims_direct_wait_all(p, &slots));
    for (int q = 0; q < n; q++) memcpy(addrs + q, slots[q], sizeof(*addrs));
    if (a->count) {
        size_t at = (size_t)rank * block;
        CHECK(direct_combine_peers(p, addrs, 1, at, (const char *)a->sendbuf + at, a->recvbuf, a->count, &red,
                                   DIRECT_TO_NONE, block >= RS_CMA_STREAM_MIN ? block : 0));
    }
    return direct_empty_phase(p);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_scatter_cma_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_CMA, .steps = 2, .bytes = (p - 1.0) / p * n, .reduced = (p - 1.0) / p * n};
}
