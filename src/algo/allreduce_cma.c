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
 * chorus_mem_alloc buffer its peers map and its slice is COPY_STREAM_MIN or more, it says so, and its
 * peers read its slice out of the mapping after a phase instead, a copy that streams past their caches
 * (process_vm_writev's does not: 2 ranks, 64 MiB, 8.7 ms against 11.8).
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

/* Peer q's len bytes at addr: in place where they are mapped (a chorus_mem_alloc buffer), else copied
 * into buf. */
static chorus_result_t peer_part(prims_t *p, int q, uint64_t addr, char *buf, size_t len, const char **part_p)
{
    const char *mapped = prims_direct_view(p, q, addr, len);
    if (mapped) {
        *part_p = mapped;
        return CHORUS_SUCCESS;
    }
    *part_p = buf;
    return prims_direct_read(p, q, addr, buf, len, 0);
}

/* This rank's slice of the result, cnt elements from element off, chunk by chunk: the p inputs' parts
 * (rank q's input at addrs[3 q], this rank's at own) combined in rank order into out, and each chunk, while
 * it is in cache, written into every peer's output (at addrs[3 q + 1]) unless push is 0. */
static chorus_result_t combine_slice(prims_t *p, const uint64_t *addrs, const char *own, char *out, size_t off,
                                     size_t cnt, const prims_reduce_t *red, int in_place, int push)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t chunk = prims_chunk_bytes(p) / red->elem;
    if (!chunk) chunk = 1;
    if (chunk > cnt) chunk = cnt;
    /* buf[0] and buf[1]: the peers' parts (two at once for the first combination); buf[2]: this rank's
     * own part, in place, where it is combined after the output was first written. */
    int need_own = in_place && rank >= 2;
    char *tmp;
    CHECK(prims_scratch(p, 0, chunk * red->elem * (size_t)(need_own ? 3 : 2), (void **)&tmp));
    char *buf[3] = {tmp, tmp + chunk * red->elem, tmp + 2 * chunk * red->elem};
    for (size_t done = 0; done < cnt; done += chunk) {
        size_t c = cnt - done < chunk ? cnt - done : chunk, at = (off + done) * red->elem, len = c * red->elem;
        const char *part[2];
        if (need_own) copy_bytes(buf[2], own + at, len);
        for (int q = 0; q < 2; q++) {
            if (q == rank)
                part[q] = own + at;
            else
                CHECK(peer_part(p, q, addrs[3 * q] + at, buf[q], len, &part[q]));
        }
        reduce_apply3(out + at, part[0], part[1], c, red->dtype, red->op);
        for (int q = 2; q < n; q++) {
            const char *x = need_own ? buf[2] : own + at;
            if (q != rank) CHECK(peer_part(p, q, addrs[3 * q] + at, buf[0], len, &x));
            reduce_apply(out + at, x, c, red->dtype, red->op);
        }
        reduce_finish(out + at, c, red->dtype, red->op, n);
        for (int i = 1; push && i < n; i++) {
            int q = (rank + i) % n;
            CHECK(prims_direct_write(p, q, addrs[3 * q + 1] + at, out + at, len));
        }
    }
    return CHORUS_SUCCESS;
}

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
    slot[2] = out != a->sendbuf && cnt * red.elem >= COPY_STREAM_MIN && prims_direct_in_shared_memory(out, bytes);
    prims_direct_publish(p, 3 * sizeof(*slot));
    CHECK(prims_direct_wait_all(p, &slots));
    int pulled = 0;
    for (int q = 0; q < n; q++) {
        memcpy(addrs + 3 * q, slots[q], 3 * sizeof(*addrs));
        pulled |= addrs[3 * q + 2] != 0;
    }

    if (cnt) CHECK(combine_slice(p, addrs, a->sendbuf, out, off, cnt, &red, a->sendbuf == out, !addrs[3 * rank + 2]));
    if (!pulled) return direct_empty_phase(p);
    CHECK(direct_empty_phase(p));
    for (int i = 1; i < n; i++) {
        int q = (rank + i) % n;
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
