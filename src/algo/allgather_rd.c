/*
 * Recursive-doubling AllGather. Ranks fold onto pv, the largest power of two <= p: the odd rank of each
 * of the first rem = p - pv pairs gives its block to the even one, which takes part for both. At step s
 * each of the pv ranks exchanges everything it has with the rank 2^s away, doubling what it holds; each
 * even rank of a pair finally sends the whole buffer to its partner.
 *
 * Steps: log2 pv (+ 2 if p is not a power of two). Bytes sent per rank: (pv - 1)/pv * n (n = the gathered
 * buffer, p * sendcount elements), plus n from the even rank of a pair to its partner. Copied: n/p
 * (its own block, out of place). Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/rhd.h"
#include "util/copy.h"
#include "util/util.h"

chorus_result_t allgather_rd(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t elem = dtype_size(a->dtype), block = a->count * elem, total = block * (size_t)n;
    rhd_layout_t l = rhd_layout(p, 0, a->count, 1, elem);
    char *buf = a->recvbuf, *own = buf + (size_t)rank * block;
    if (a->sendbuf != own) copy_bytes(own, a->sendbuf, block);
    if (l.fold.vrank < 0) {
        CHECK(prims_send(p, l.fold.partner, own, block));
        return prims_recv(p, l.fold.partner, buf, total);
    }
    if (l.fold.partner >= 0) CHECK(prims_recv(p, l.fold.partner, buf + (size_t)l.fold.partner * block, block));
    CHECK(rhd_allgather(p, &l, buf));
    if (l.fold.partner >= 0) CHECK(prims_send(p, l.fold.partner, buf, total));
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allgather_rd_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    int pv = algo_pow2_floor(p), odd = pv != p;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = algo_log2_ceil(pv) + 2 * odd,
                         .bytes = (pv - 1.0) / pv * n + odd * (n + n / p), .copied = n / p};
}
