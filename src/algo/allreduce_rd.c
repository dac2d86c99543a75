/*
 * Recursive-doubling AllReduce, for small messages: at step s every rank exchanges its whole partial
 * result with the (virtual) rank 2^s away and reduces what arrives into it, so that after log2 pv steps
 * every rank holds the full reduction. With pv the largest power of two <= p and rem = p - pv, the first
 * 2 rem ranks pair up first, as in rhd: the odd rank of each pair sends its input to the even one, which
 * reduces it, takes part alone, and finally sends it the result. Against rhd it takes half the steps
 * (2 ranks: one exchange instead of two) for log2 pv n bytes instead of 2 n.
 *
 * Steps: log2 pv (+ 2 if p is not a power of two). Bytes sent per rank: log2 pv n, plus n for each rank
 * of a pair. Reduction per rank: log2 pv n (+ n at the even rank of a pair). Copied: n when the result
 * ends in scratch (an odd number of reductions). Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/rhd.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t allreduce_rd(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    rhd_layout_t l = rhd_layout(p, 0, a->count, 0, red.elem);
    size_t bytes = a->count * red.elem;
    if (l.fold.vrank < 0) {
        CHECK(prims_sendrecv_reduce(p, l.fold.partner, a->sendbuf, bytes, -1, NULL, NULL, 0, &red));
        return prims_recv(p, l.fold.partner, a->recvbuf, bytes);
    }
    /* The partial result alternates between scratch and recvbuf: a step sends one and reduces into the
     * other, so that nothing is written while it is being sent (in place too). */
    char *bufs[2];
    CHECK(prims_scratch(p, 1, bytes ? bytes : 1, (void **)&bufs[0]));
    bufs[1] = a->recvbuf;
    const char *cur = a->sendbuf;
    int k = 0;
    if (l.fold.partner >= 0) {
        CHECK(prims_sendrecv_reduce(p, -1, NULL, 0, l.fold.partner, cur, bufs[k % 2], bytes, &red));
        cur = bufs[k++ % 2];
    }
    for (int d = 1; d < l.fold.pv; d <<= 1, k++) {
        int peer = rhd_rank(&l, l.fold.vrank ^ d);
        CHECK(prims_sendrecv_reduce(p, peer, cur, bytes, peer, cur, bufs[k % 2], bytes, &red));
        cur = bufs[k % 2];
    }
    if (cur != a->recvbuf) copy_bytes(a->recvbuf, cur, bytes);
    reduce_finish(a->recvbuf, a->count, a->dtype, a->op, prims_nranks(p));
    if (l.fold.partner >= 0) CHECK(prims_send(p, l.fold.partner, a->recvbuf, bytes));
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_rd_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    int pv = algo_pow2_floor(p), odd = pv != p;
    double lg = algo_log2_ceil(pv);
    int reductions = (int)lg + odd;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = lg + 2 * odd, .bytes = lg * n + 2.0 * odd * n,
                         .copied = reductions % 2 ? n : 0, .reduced = lg * n + odd * n};
}
