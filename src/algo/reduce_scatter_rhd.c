/*
 * Recursive-halving ReduceScatter. Ranks fold onto pv, the largest power of two <= p, as in AllReduce
 * rhd: the odd rank of each of the first rem = p - pv pairs hands its whole input to the even one. The
 * pv remaining ranks halve their range of blocks log2 pv times, each step sending the half the partner
 * keeps and reducing the half kept, so that each ends with the blocks of the ranks it stands for (its
 * own, and its partner's in a pair), fully reduced; an even rank of a pair then sends its partner's block.
 *
 * Steps: log2 pv (+ 2 if p is not a power of two). Bytes sent per rank: (pv - 1)/pv * n (n = the whole
 * input, p * recvcount elements), plus n from the odd rank of a pair and n/p back to it. Reduction per
 * rank: (pv - 1)/pv * n (+ n at the even rank of a pair). Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/rhd.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t reduce_scatter_rhd(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    rhd_layout_t l = rhd_layout(p, 0, a->count, 1, red.elem);
    size_t block = a->count * red.elem, total = block * (size_t)n;
    if (l.fold.vrank < 0) {
        CHECK(prims_sendrecv_reduce(p, l.fold.partner, a->sendbuf, total, -1, NULL, NULL, 0, &red));
        CHECK(prims_recv(p, l.fold.partner, a->recvbuf, block));
    } else {
        /* recvbuf holds one block and may lie inside sendbuf (in place): the halving works in scratch. */
        void *work;
        const char *first = a->sendbuf;
        CHECK(prims_scratch(p, 1, total, &work));
        if (l.fold.partner >= 0) {
            CHECK(prims_sendrecv_reduce(p, -1, NULL, 0, l.fold.partner, a->sendbuf, work, total, &red));
            first = work;
        }
        CHECK(rhd_reduce_scatter(p, &l, first, work, &red));
        if (l.fold.partner >= 0)
            CHECK(prims_send(p, l.fold.partner, (char *)work + (size_t)l.fold.partner * block, block));
        copy_bytes(a->recvbuf, (char *)work + (size_t)rank * block, block);
    }
    reduce_finish(a->recvbuf, a->count, a->dtype, a->op, n);
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_scatter_rhd_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    int pv = algo_pow2_floor(p), odd = pv != p;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = algo_log2_ceil(pv) + 2 * odd,
                         .bytes = (pv - 1.0) / pv * n + odd * (n + n / p),
                         .reduced = (pv - 1.0) / pv * n + odd * n};
}
