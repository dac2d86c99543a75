/*
 * Rabenseifner AllReduce: a recursive-halving reduce-scatter followed by a recursive-doubling allgather.
 *
 * With pv the largest power of two <= p and rem = p - pv, the first 2 rem ranks pair up first: the odd
 * rank of each pair sends its whole input to the even one, which reduces it and takes part alone. The pv
 * remaining ranks then halve: at step s each exchanges with the rank pv/2^(s+1) away, sending the half of
 * its current range the partner keeps and reducing the half it keeps, until each owns 1/pv of the buffer
 * fully reduced. Doubling retraces the steps to spread the blocks, and each even rank of a pair finally
 * sends the result to its odd partner.
 *
 * Steps: 2 log2 pv (+ 2 if p is not a power of two). Bytes sent per rank: 2 (pv - 1)/pv * n, plus n for
 * each rank of a pair. Reduction per rank: (pv - 1)/pv * n (+ n at the even rank of a pair).
 * Restrictions: none (any p, any count; avg divides once, on the owned block).
 */
#include "algo/algo.h"
#include "algo/rhd.h"
#include "util/util.h"

chorus_result_t allreduce_rhd(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    rhd_layout_t l = rhd_layout(p, 0, a->count, 0, red.elem);
    size_t bytes = a->count * red.elem;
    const char *first = a->sendbuf;
    char *buf = a->recvbuf;
    if (l.fold.vrank < 0) {
        CHECK(prims_sendrecv_reduce(p, l.fold.partner, a->sendbuf, bytes, -1, NULL, NULL, 0, &red));
        return prims_recv(p, l.fold.partner, buf, bytes);
    }
    if (l.fold.partner >= 0) {
        CHECK(prims_sendrecv_reduce(p, -1, NULL, 0, l.fold.partner, a->sendbuf, buf, bytes, &red));
        first = buf;
    }
    CHECK(rhd_reduce_scatter(p, &l, first, buf, &red));
    size_t lo = rhd_elem(&l, l.fold.vrank);
    reduce_finish(buf + lo * red.elem, rhd_elem(&l, l.fold.vrank + 1) - lo, a->dtype, a->op, prims_nranks(p));
    CHECK(rhd_allgather(p, &l, buf));
    if (l.fold.partner >= 0) CHECK(prims_send(p, l.fold.partner, buf, bytes));
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_rhd_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    int pv = algo_pow2_floor(p), odd = pv != p;
    double lg = algo_log2_ceil(pv);
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = 2 * lg + 2 * odd,
                         .bytes = 2.0 * (pv - 1) / pv * n + 2.0 * odd * n,
                         .reduced = (pv - 1.0) / pv * n + odd * n};
}
