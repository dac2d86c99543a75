/*
 * Single-copy AllGather, inside one host: every rank publishes the addresses of its block and its output,
 * then writes its block into every peer's output (process_vm_writev), a chunk at a time, right after it
 * copied the chunk into its own output: the chunk is read from memory once and written p times out of
 * the cache, where each rank reading its peers' blocks (process_vm_readv) reads every block from memory
 * (2 ranks on a Xeon virtual machine, out of place: 4 MiB in 0.27 ms against 0.34, 16 MiB in 1.2 ms
 * against 1.4). It starts with its right neighbour, so that writers spread over the outputs; then it
 * says so, and returns once every peer has said so too. A block that goes to one place only (2 ranks
 * in place) gains nothing from that, and a block in chorus_mem_alloc memory is read out of the peers'
 * mappings of it with plain copies: there each peer reads the block.
 *
 * Steps: 2 synchronisations. Bytes per rank: (p-1)/p n moved between the ranks, one copy each (the arena
 * path copies twice). Restrictions: direct access and single-copy reads.
 */
#include "algo/direct.h"
#include "util/copy.h"
#include "util/util.h"

/* This rank's block (at src) into every peer's output, chunk by chunk, and into its own where it is not
 * there already: a chunk is read once and then written out p times from the cache. */
static chorus_result_t push_block(prims_t *p, const char *src, size_t bytes, char *own, const void *const *slots)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t chunk = prims_chunk_bytes(p), at = (size_t)rank * bytes;
    if (!chunk) chunk = bytes;
    for (size_t done = 0; done < bytes; done += chunk) {
        size_t len = CHORUS_MIN(chunk, bytes - done);
        if (own) copy_out_part(own + done, src + done, len, prims_stream_whole(p, bytes * (size_t)n));
        for (int i = 1; i < n; i++) {
            int q = direct_turn(rank, n, i);
            const uint64_t *peer = slots[q];
            CHECK(prims_direct_write(p, q, peer[1] + at + done, src + done, len));
        }
    }
    return CHORUS_SUCCESS;
}

chorus_result_t allgather_cma(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t bytes = a->count * dtype_size(a->dtype);
    char *out = a->recvbuf, *own = out + (size_t)rank * bytes;
    uint64_t *slot; /* the input's address, the output's, and whether this rank pushes its block */
    const void *const *slots;
    /* Pushed where the block goes to two places or more (a rank's own block in place, to one peer, is a
     * plain single copy either way), and where peers cannot map it. */
    int push = (own != a->sendbuf || n > 2) && !prims_direct_in_shared_memory(a->sendbuf, bytes);
    CHECK(prims_direct_begin(p, (void **)&slot));
    slot[0] = prims_direct_share(p, a->sendbuf, bytes);
    slot[1] = (uint64_t)(uintptr_t)out; /* written with process_vm_writev only, never mapped */
    slot[2] = (uint64_t)push;
    prims_direct_publish(p, 3 * sizeof(*slot));
    /* The own block's copy while the peers arrive, unless it is to bring a chunk into cache for its writes
     * (a block of one chunk stays there meanwhile). */
    int copied = own == a->sendbuf || !push || bytes <= prims_chunk_bytes(p);
    if (own != a->sendbuf && copied) prims_copy_out(p, own, a->sendbuf, bytes, bytes * (size_t)n);
    CHECK(prims_direct_wait_all(p, &slots));
    if (push) CHECK(push_block(p, a->sendbuf, bytes, copied ? NULL : own, slots));
    for (int i = 1; i < n; i++) {
        int q = direct_turn(rank, n, i);
        const uint64_t *peer = slots[q];
        if (!peer[2]) CHECK(prims_direct_read(p, q, peer[0], out + (size_t)q * bytes, bytes, 1));
    }
    return direct_empty_phase(p);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allgather_cma_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The own block's copy streams where the output is large for the cache (prims_copy_out). */
    return (algo_cost_t){.link = ALGO_LINK_CMA, .steps = 2, .bytes = (p - 1.0) / p * n, .copied = n / p,
                         .streamed = algo_streamed_part(s, n / p, n)};
}
