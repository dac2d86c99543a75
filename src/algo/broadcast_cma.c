/*
 * Single-copy Broadcast, inside one host: the root publishes the address of its data; every other rank
 * copies it straight out of the root's memory into its output (process_vm_readv); then every rank says so,
 * and the root returns once all have read.
 *
 * Steps: 2 synchronisations. Bytes: n read by every other rank from the root, one copy each (the arena
 * path copies twice). Copied: n at the root out of place, while the others read (off their path).
 * Restrictions: direct access and single-copy reads.
 */
#include "algo/direct.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t broadcast_cma(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p);
    size_t bytes = a->count * dtype_size(a->dtype);
    uint64_t *slot;
    const void *theirs;
    CHECK(prims_direct_begin(p, (void **)&slot));
    slot[0] = rank == a->root ? prims_direct_share(p, a->sendbuf, bytes) : 0;
    prims_direct_publish(p, sizeof(*slot));
    if (rank == a->root) {
        if (a->sendbuf != a->recvbuf) prims_copy_out(p, a->recvbuf, a->sendbuf, bytes, bytes);
    } else {
        CHECK(prims_direct_wait(p, a->root, &theirs));
        CHECK(prims_direct_read(p, a->root, *(const uint64_t *)theirs, a->recvbuf, bytes, 1));
    }
    return direct_empty_phase(p);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t broadcast_cma_cost(const algo_shape_t *s)
{
    double n = s->n;
    /* The readers' reads, and beside them the root's copy of n to its own output. Of the p - 1 readers of
     * the root's buffer one finds it at rest and the others in the cache after it: per reader n / (p - 1)
     * read as the single-copy AllToAll reads (algo_cost_t.read), the rest at the single-copy rate. */
    return (algo_cost_t){.link = ALGO_LINK_CMA, .steps = 2, .bytes = n, .read = s->p > 1 ? n / (s->p - 1) : 0,
                         .beside_copied = n};
}
