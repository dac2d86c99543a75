/*
 * Single-copy AllToAll, inside one host: every rank publishes the address of its send buffer; each copies
 * its block out of every peer's buffer straight into its output (process_vm_readv), starting with its
 * right neighbour; then it says so, and returns once every peer has read from it too. In place, the send
 * buffer is first copied to scratch, which the peers read instead, since the output overwrites it.
 *
 * Steps: 2 synchronisations. Bytes per rank: (p-1)/p n read from the peers, one copy each, out of their
 * buffers into this rank's output (priced at the rate of such reads, not of single-copy writes from the
 * cache), (+ n in place).
 * Restrictions: direct access and single-copy reads.
 */
#include "algo/direct.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t alltoall_cma(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t bytes = a->count * dtype_size(a->dtype);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    if (in == out) {
        void *copy;
        CHECK(prims_scratch(p, 0, bytes * (size_t)n, &copy));
        copy_bytes(copy, in, bytes * (size_t)n);
        in = copy;
    }
    uint64_t *slot;
    const void *const *slots;
    CHECK(prims_direct_begin(p, (void **)&slot));
    slot[0] = prims_direct_share(p, in, bytes * (size_t)n);
    prims_direct_publish(p, sizeof(*slot));
    /* In place the output was just read into scratch and sits in the cache: no streaming past it. */
    if (in == a->sendbuf)
        prims_copy_out(p, out + (size_t)rank * bytes, in + (size_t)rank * bytes, bytes, bytes * (size_t)n);
    else
        copy_bytes(out + (size_t)rank * bytes, in + (size_t)rank * bytes, bytes);
    CHECK(prims_direct_wait_all(p, &slots));
    for (int i = 1; i < n; i++) {
        int q = direct_turn(rank, n, i);
        CHECK(prims_direct_read(p, q, *(const uint64_t *)slots[q] + (uint64_t)rank * bytes, out + (size_t)q * bytes,
                                bytes, 1));
    }
    return direct_empty_phase(p);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t alltoall_cma_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The own block's copy streams where the output is large for the cache (prims_copy_out). */
    return (algo_cost_t){.link = ALGO_LINK_CMA, .steps = 2, .bytes = (p - 1.0) / p * n, .read = (p - 1.0) / p * n,
                         .copied = n / p, .streamed = algo_streamed_part(s, n / p, n)};
}
