/*
 * Binomial-tree Reduce: the mirror of binomial Broadcast. Each rank combines its input with its
 * children's partial results (chunk by chunk, in child order, as they land) and passes the result to its
 * parent; the root finishes (avg divides once).
 *
 * Steps: ceil(log2 p) + k - 1 chunk hops for k chunks. Bytes sent per rank: n (the root: none). Reduction
 * per rank: n per child (the root: ceil(log2 p) n). Time ~ ceil(log2 p)(alpha + n/beta + n gamma)
 * unpipelined. Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/trees.h"
#include "util/util.h"

chorus_result_t reduce_binomial(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), kids[32];
    prims_reduce_t red = algo_reduction(a);
    size_t bytes = a->count * red.elem;
    prims_tree_t t;
    trees_binomial(&t, kids, rank, prims_nranks(p), a->root);
    t.src = a->sendbuf;
    t.dst = a->recvbuf; /* only the root has a receive buffer; inner ranks combine in scratch */
    if (t.parent >= 0 && t.nchildren) CHECK(prims_scratch(p, 1, bytes, &t.dst));
    t.bytes = bytes;
    CHECK(prims_trees(p, PRIMS_TREE_REDUCE, &t, 1, &red));
    if (t.parent < 0) reduce_finish(a->recvbuf, a->count, a->dtype, a->op, prims_nranks(p));
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_binomial_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The root receives and combines n from each of its ceil(log2 p) children in turn, and sends nothing:
     * one way. */
    double lg = algo_log2_ceil(p);
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = lg * algo_pieces(n, s->chunk), .reduced = lg * n,
                         .oneway = lg * n};
}
