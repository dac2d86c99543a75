#include "algo/rhd.h"

#include "util/util.h"

rhd_layout_t rhd_layout(const prims_t *p, int root, size_t count, int by_rank, size_t elem)
{
    rhd_layout_t l = {plan_fold(prims_rank(p), prims_nranks(p), root), root, prims_nranks(p), count, by_rank, elem};
    return l;
}

size_t rhd_elem(const rhd_layout_t *l, int v)
{
    if (l->by_rank) return (size_t)plan_fold_rel(v, l->fold.rem) * l->count;
    size_t off, cnt;
    prims_partition(l->count, l->fold.pv, v, &off, &cnt);
    return off;
}

int rhd_rank(const rhd_layout_t *l, int v) { return plan_fold_rank(v, l->nranks, l->root); }

/* One exchange of a halving or doubling step; reduce: whether the received blocks are combined. */
static chorus_result_t rhd_step(prims_t *p, const rhd_layout_t *l, const plan_rhd_step_t *st, const char *in,
                                char *work, const prims_reduce_t *red)
{
    size_t e = l->elem, so = rhd_elem(l, st->send_lo), ro = rhd_elem(l, st->recv_lo);
    size_t sbytes = (rhd_elem(l, st->send_lo + st->nblocks) - so) * e;
    size_t rbytes = (rhd_elem(l, st->recv_lo + st->nblocks) - ro) * e;
    int peer = rhd_rank(l, st->partner);
    if (!red) return prims_sendrecv(p, peer, work + so * e, sbytes, peer, work + ro * e, rbytes);
    return prims_sendrecv_reduce(p, peer, in + so * e, sbytes, peer, in + ro * e, work + ro * e, rbytes, red);
}

chorus_result_t rhd_reduce_scatter(prims_t *p, const rhd_layout_t *l, const char *first, char *work,
                                   const prims_reduce_t *red)
{
    for (int s = 0; s < plan_log2(l->fold.pv); s++) {
        plan_rhd_step_t st = plan_halving(l->fold.vrank, l->fold.pv, s);
        CHECK(rhd_step(p, l, &st, s == 0 ? first : work, work, red));
    }
    return CHORUS_SUCCESS;
}

chorus_result_t rhd_allgather(prims_t *p, const rhd_layout_t *l, char *work)
{
    for (int s = 0; s < plan_log2(l->fold.pv); s++) {
        plan_rhd_step_t st = plan_doubling(l->fold.vrank, s);
        CHECK(rhd_step(p, l, &st, work, work, NULL));
    }
    return CHORUS_SUCCESS;
}
