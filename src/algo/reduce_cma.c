/*
 * Single-copy Reduce, inside one host: the single-copy AllReduce (allreduce_cma.c) with its results
 * written into the root's output only, nothing staged in the host arena. Every rank publishes the
 * address of its input (the root also that of its output); rank r combines slice r (prims_partition)
 * chunk by chunk from the p inputs (process_vm_readv into scratch, or in place where a peer's input is
 * a chorus_mem_alloc buffer this rank has mapped), in rank order, and writes each combined chunk, while
 * it is in its cache, into the root's output (process_vm_writev); the root combines its own slice
 * straight into its output (direct_combine_peers). Then each says so, and returns once every peer has
 * said so too. In place at the root, rank r writes slice r of the root's buffer, which only r reads,
 * each chunk after reading it.
 *
 * Steps: 2 synchronisations. Bytes per rank: (p-1)/p n read from the peers' inputs and n/p written into
 * the root's output, one copy each (the direct Reduce copies everything into the arena's slots, reads
 * the slots and has the root copy the result out); (p-1)/p n combined. Restrictions: direct access and
 * single-copy reads.
 */
#include <string.h>

#include "algo/direct.h"
#include "util/util.h"

chorus_result_t reduce_cma(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p), root = a->root;
    prims_reduce_t red = algo_reduction(a);
    size_t bytes = a->count * red.elem, off, cnt;
    /* addrs[2 q]: rank q's input, addrs[2 q + 1] its output (the root's only). */
    uint64_t *slot, *addrs;
    const void *const *slots;
    prims_partition(a->count, n, rank, &off, &cnt);
    CHECK(prims_scratch(p, 1, 2 * (size_t)n * sizeof(*addrs), (void **)&addrs));
    CHECK(prims_direct_begin(p, (void **)&slot));
    slot[0] = prims_direct_share(p, a->sendbuf, bytes);
    slot[1] = rank == root ? (uint64_t)(uintptr_t)a->recvbuf : 0;
    prims_direct_publish(p, 2 * sizeof(*slot));
    CHECK(prims_direct_wait_all(p, &slots));
    for (int q = 0; q < n; q++) memcpy(addrs + 2 * q, slots[q], 2 * sizeof(*addrs));
    if (cnt) {
        size_t at = off * red.elem;
        CHECK(direct_combine_peers(p, addrs, 2, at, (const char *)a->sendbuf + at,
                                   rank == root ? (char *)a->recvbuf + at : NULL, cnt, &red,
                                   rank == root ? DIRECT_TO_NONE : root, 0));
    }
    return direct_empty_phase(p);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_cma_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_CMA, .steps = 2, .bytes = (p - 1.0) / p * n + n / p,
                         .reduced = (p - 1.0) / p * n};
}
