/*
 * Binomial-tree Broadcast: relative to the root, rank v receives from v with its lowest set bit cleared
 * and forwards to v + 2^k for each 2^k below that bit, largest subtree first. The message moves chunk by
 * chunk, each chunk forwarded as soon as it lands.
 *
 * Steps: ceil(log2 p) + k - 1 chunk hops for k chunks (one message per child at a time). Bytes sent per
 * rank: n per child (the root: ceil(log2 p) n; leaves, half the ranks: none). Time ~ ceil(log2 p)
 * (alpha + n/beta) unpipelined. Copied: n at the root out of place, before it sends. Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/trees.h"
#include "util/copy.h"

chorus_result_t broadcast_binomial(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), kids[32];
    size_t bytes = a->count * dtype_size(a->dtype);
    prims_tree_t t;
    trees_binomial(&t, kids, rank, prims_nranks(p), a->root);
    if (rank == a->root && a->sendbuf != a->recvbuf) copy_bytes(a->recvbuf, a->sendbuf, bytes);
    t.src = a->recvbuf;
    t.dst = a->recvbuf;
    t.bytes = bytes;
    return prims_trees(p, PRIMS_TREE_BROADCAST, &t, 1, NULL);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t broadcast_binomial_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The root sends n to each of its ceil(log2 p) children in turn, one message per chunk, and receives
     * nothing: one way. */
    double lg = algo_log2_ceil(p);
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = lg * algo_pieces(n, s->chunk), .copied = n,
                         .oneway = lg * n};
}
