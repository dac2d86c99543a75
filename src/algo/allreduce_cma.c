/*
 * Single-copy AllReduce, inside one host: a reduce-scatter and an allgather straight between the ranks'
 * buffers (process_vm_readv), with nothing staged in the host arena. Every rank publishes the addresses
 * of its input and output. Phase 1: rank r combines slice r of the result (prims_partition) chunk by
 * chunk: it reads each peer's part of the chunk out of that peer's input into scratch, which stays in
 * cache (or, where the peer's input is a chorus_mem_alloc buffer this rank has mapped, takes the part
 * where it lies), and combines the p parts in rank order into its output, so that every slice has the
 * same bits on every rank; then it says so. Phase 2: it reads every other rank's slice out of that rank's output
 * into its own, says so, and returns once every peer has read its slice too.
 *
 * In place, rank r's output slice r overwrites only input that no peer reads (they read slices q != r in
 * phase 1, and the output's other slices only after every rank has said phase 1 is done); a rank whose
 * own part is not among the first two combined copies it to scratch before its output slice is written.
 *
 * Steps: 3 synchronisations. Bytes per rank: (p-1)/p n read from the peers' inputs and (p-1)/p n from
 * their outputs, one copy each (the arena's two-shot copies everything twice); (p-1)/p n combined.
 * Restrictions: direct access and single-copy reads.
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
 * (rank q's input at addrs[2 q], this rank's at own) combined in rank order into out. */
static chorus_result_t combine_slice(prims_t *p, const uint64_t *addrs, const char *own, char *out, size_t off,
                                     size_t cnt, const prims_reduce_t *red, int in_place)
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
                CHECK(peer_part(p, q, addrs[2 * q] + at, buf[q], len, &part[q]));
        }
        reduce_apply3(out + at, part[0], part[1], c, red->dtype, red->op);
        for (int q = 2; q < n; q++) {
            const char *x = need_own ? buf[2] : own + at;
            if (q != rank) CHECK(peer_part(p, q, addrs[2 * q] + at, buf[0], len, &x));
            reduce_apply(out + at, x, c, red->dtype, red->op);
        }
        reduce_finish(out + at, c, red->dtype, red->op, n);
    }
    return CHORUS_SUCCESS;
}

chorus_result_t allreduce_cma(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    char *out = a->recvbuf;
    uint64_t *slot, *addrs; /* addrs[2 q]: rank q's input, addrs[2 q + 1] its output */
    const void *const *slots;
    CHECK(prims_scratch(p, 1, 2 * (size_t)n * sizeof(*addrs), (void **)&addrs));
    CHECK(prims_direct_begin(p, (void **)&slot));
    size_t bytes = a->count * red.elem;
    slot[0] = prims_direct_share(p, a->sendbuf, bytes);
    slot[1] = prims_direct_share(p, out, bytes);
    prims_direct_publish(p, 2 * sizeof(*slot));
    CHECK(prims_direct_wait_all(p, &slots));
    for (int q = 0; q < n; q++) memcpy(addrs + 2 * q, slots[q], 2 * sizeof(*addrs));

    size_t off, cnt;
    prims_partition(a->count, n, rank, &off, &cnt);
    if (cnt) CHECK(combine_slice(p, addrs, a->sendbuf, out, off, cnt, &red, a->sendbuf == out));
    CHECK(direct_empty_phase(p));

    for (int i = 1; i < n; i++) {
        int q = (rank + i) % n;
        prims_partition(a->count, n, q, &off, &cnt);
        if (cnt)
            CHECK(prims_direct_read(p, q, addrs[2 * q + 1] + off * red.elem, out + off * red.elem, cnt * red.elem, 1));
    }
    return direct_empty_phase(p);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_cma_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_CMA, .steps = 3, .bytes = 2.0 * (p - 1) / p * n,
                         .reduced = (p - 1.0) / p * n};
}
