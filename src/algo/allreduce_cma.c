/*
 * Single-copy AllReduce, inside one host: a reduce-scatter and an allgather straight between the ranks'
 * buffers (process_vm_readv and process_vm_writev), with nothing staged in the host arena. Every rank
 * publishes the addresses of its input and output. Rank r combines slice r of the result
 * (prims_partition) chunk by chunk: it reads each peer's part of the chunk out of that peer's input into
 * scratch, which stays in cache (or, where the peer's input is a chorus_mem_alloc buffer this rank has
 * mapped, takes the part where it lies), combines the p parts in rank order into its output, so that
 * every slice has the same bits on every rank, and writes the chunk, still in its cache, into every
 * peer's output. Then it says so, and returns once every peer has said so too.
 *
 * Writing each chunk out while it is in the writer's cache spares the peers what reading it back would
 * cost: lines another core has just written cross between the cores' caches, and on a Xeon virtual
 * machine process_vm_readv of 512 KiB that the peer had just rewritten ran at 12 GB/s, against 29 for
 * the same bytes left alone. The one exception: where a rank's output is out of place, is a
 * chorus_mem_alloc buffer its peers map and its slice is large enough to stream (prims_stream_whole), it
 * says so, and its peers read its slice out of the mapping after a phase instead, a copy that streams past
 * their caches (process_vm_writev's does not: 2 ranks, 64 MiB, 8.7 ms against 11.8).
 *
 * In place, rank r writes slice r of every output: its own (its input's slice r, which no peer reads)
 * and its peers' (their inputs' slice r, which only r reads, each chunk before it writes it); a rank
 * whose own part is not among the first two combined copies it to scratch before its output slice is
 * written. A slice read back is read only after every rank has said its combination is done.
 *
 * Steps: 2 synchronisations (3 where a slice is read back). Bytes per rank: (p-1)/p n read from the
 * peers' inputs and (p-1)/p n written into their outputs, one copy each (the arena's two-shot copies
 * everything twice); (p-1)/p n combined. Restrictions: direct access and single-copy reads.
 */
#include <string.h>

#include "algo/direct.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t allreduce_cma(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    char *out = a->recvbuf;
    /* addrs[3 q]: rank q's input, addrs[3 q + 1] its output, addrs[3 q + 2] whether its peers read its
     * slice out of its output (1) or it writes the slice into theirs (0). */
    uint64_t *slot, *addrs;
    const void *const *slots;
    size_t bytes = a->count * red.elem, off, cnt;
    prims_partition(a->count, n, rank, &off, &cnt);
    CHECK(prims_scratch(p, 1, 3 * (size_t)n * sizeof(*addrs), (void **)&addrs));
    CHECK(prims_direct_begin(p, (void **)&slot));
    slot[0] = prims_direct_share(p, a->sendbuf, bytes);
    slot[1] = prims_direct_share(p, out, bytes);
    slot[2] = out != a->sendbuf && prims_stream_whole(p, cnt * red.elem) && prims_direct_in_shared_memory(out, bytes);
    prims_direct_publish(p, 3 * sizeof(*slot));
    CHECK(prims_direct_wait_all(p, &slots));
    int pulled = 0;
    for (int q = 0; q < n; q++) {
        memcpy(addrs + 3 * q, slots[q], 3 * sizeof(*addrs));
        pulled |= addrs[3 * q + 2] != 0;
    }

    /* The output is not streamed (whole 0): with the chunks combined in scratch and copied into the
     * output past the cache, 2 and 4 ranks took 0.97 to 1.07 of the time from 4 to 256 MiB out of place
     * (medians of 5 and 3 alternating runs, Xeon virtual machine): the writes into the peers' outputs,
     * which do not stream, weigh more. */
    int to = addrs[3 * rank + 2] ? DIRECT_TO_NONE : DIRECT_TO_ALL;
    if (cnt)
        CHECK(direct_combine_peers(p, addrs, 3, off * red.elem, (const char *)a->sendbuf + off * red.elem,
                                   out + off * red.elem, cnt, &red, to, 0));
    if (!pulled) return direct_empty_phase(p);
    CHECK(direct_empty_phase(p));
    for (int i = 1; i < n; i++) {
        int q = direct_turn(rank, n, i);
        prims_partition(a->count, n, q, &off, &cnt);
        if (cnt && addrs[3 * q + 2])
            CHECK(prims_direct_read(p, q, addrs[3 * q + 1] + off * red.elem, out + off * red.elem, cnt * red.elem, 1));
    }
    return direct_empty_phase(p);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_cma_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_CMA, .steps = 2, .bytes = 2.0 * (p - 1) / p * n,
                         .reduced = (p - 1.0) / p * n};
}
