/*
 * Rabenseifner Reduce: a recursive-halving reduce-scatter, then a binomial gather of the reduced blocks
 * to the root. Ranks are taken relative to the root and fold onto pv, the largest power of two <= p, as
 * in AllReduce rhd (the root always takes part); after the halving each of the pv ranks owns 1/pv of the
 * buffer fully reduced, and the gather collects the blocks along a binomial tree, each rank passing up
 * the contiguous run of blocks of its subtree.
 *
 * Steps: 2 log2 pv (+ 1 if p is not a power of two). Bytes sent per rank: (pv - 1)/pv * n in the halving,
 * at most (pv - 1)/pv * n in the gather (the root sends none), n from the odd rank of a pair. Reduction per
 * rank: (pv - 1)/pv * n (+ n at the even rank of a pair). Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/rhd.h"
#include "util/util.h"

chorus_result_t reduce_rabenseifner(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    rhd_layout_t l = rhd_layout(p, a->root, a->count, 0, red.elem);
    size_t bytes = a->count * red.elem;
    if (l.fold.vrank < 0) return prims_sendrecv_reduce(p, l.fold.partner, a->sendbuf, bytes, -1, NULL, NULL, 0, &red);
    void *work = a->recvbuf; /* only the root has a receive buffer */
    if (prims_rank(p) != a->root) CHECK(prims_scratch(p, 1, bytes, &work));
    const char *first = a->sendbuf;
    if (l.fold.partner >= 0) {
        CHECK(prims_sendrecv_reduce(p, -1, NULL, 0, l.fold.partner, a->sendbuf, work, bytes, &red));
        first = work;
    }
    CHECK(rhd_reduce_scatter(p, &l, first, work, &red));
    int v = l.fold.vrank, pv = l.fold.pv, kids[32], nkids = plan_binomial_children(v, pv, kids);
    for (int i = nkids - 1; i >= 0; i--) { /* the smallest subtree is ready first */
        size_t lo = rhd_elem(&l, kids[i]), hi = rhd_elem(&l, kids[i] + plan_binomial_size(kids[i], pv));
        CHECK(prims_recv(p, rhd_rank(&l, kids[i]), (char *)work + lo * red.elem, (hi - lo) * red.elem));
    }
    if (v == 0) {
        reduce_finish(work, a->count, a->dtype, a->op, prims_nranks(p));
        return CHORUS_SUCCESS;
    }
    size_t lo = rhd_elem(&l, v), hi = rhd_elem(&l, v + plan_binomial_size(v, pv));
    return prims_send(p, rhd_rank(&l, plan_binomial_parent(v)), (char *)work + lo * red.elem, (hi - lo) * red.elem);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_rabenseifner_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    int pv = algo_pow2_floor(p), odd = pv != p;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = 2 * algo_log2_ceil(pv) + odd,
                         .bytes = 2.0 * (pv - 1) / pv * n + odd * n, .reduced = (pv - 1.0) / pv * n + odd * n};
}
