/*
 * Scatter-allgather Broadcast (van de Geijn), for large messages: the buffer is cut into p blocks; the
 * root scatters them down a binomial tree (relative rank v receives, in one message, the contiguous
 * blocks of its subtree and passes each child the blocks of the child's subtree), so that rank v holds
 * block v; a ring allgather then gives every rank every block.
 *
 * Steps: ceil(log2 p) + p - 1. Bytes sent per rank: at most (p - 1)/p * n in the scatter (the root) and
 * (p - 1)/p * n in the allgather, about 2n in total against n for the chain; but the time is bound by
 * ~2 (p - 1)/p * n/beta rather than the root's n/beta per level of a tree. Copied: n at the root out of
 * place, before it sends. Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/ring.h"
#include "util/copy.h"
#include "util/util.h"

/* Bytes of blocks [lo, hi) of the p-block partition, and where they start. */
static size_t blocks_span(size_t count, int n, size_t elem, int lo, int hi, size_t *off_p)
{
    size_t off, cnt, end;
    prims_partition(count, n, lo, &off, &cnt);
    prims_partition(count, n, hi, &end, &cnt);
    *off_p = off * elem;
    return (end - off) * elem;
}

chorus_result_t broadcast_scatter_allgather(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p), v = plan_mod(rank - a->root, n), kids[32];
    size_t elem = dtype_size(a->dtype), off, len;
    char *buf = a->recvbuf;
    if (rank == a->root && a->sendbuf != a->recvbuf) copy_bytes(buf, a->sendbuf, a->count * elem);
    if (v) {
        len = blocks_span(a->count, n, elem, v, v + plan_binomial_size(v, n), &off);
        CHECK(prims_recv(p, plan_mod(plan_binomial_parent(v) + a->root, n), buf + off, len));
    }
    int nkids = plan_binomial_children(v, n, kids);
    for (int i = 0; i < nkids; i++) {
        len = blocks_span(a->count, n, elem, kids[i], kids[i] + plan_binomial_size(kids[i], n), &off);
        CHECK(prims_send(p, plan_mod(kids[i] + a->root, n), buf + off, len));
    }
    return ring_allgather(p, buf, a->count, elem, -a->root);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t broadcast_scatter_allgather_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The scatter's root only sends; the allgather's ring steps are exchanges. */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = algo_log2_ceil(p) + p - 1, .bytes = (p - 1.0) / p * n,
                         .copied = n, .oneway = (p - 1.0) / p * n};
}
