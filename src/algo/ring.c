#include "algo/ring.h"

#include "util/util.h"

static int ring_member(const ring_group_t *g, int i) { return g->ranks ? g->ranks[i] : i; }

static ring_group_t ring_all(const prims_t *p) { return (ring_group_t){NULL, prims_nranks(p), prims_rank(p)}; }

chorus_result_t ring_reduce_scatter_in(prims_t *p, const ring_group_t *g, const char *send, size_t count,
                                       const prims_reduce_t *red, int shift, ring_out_fn out, void *ctx)
{
    int n = g->n;
    size_t elem = red->elem;
    for (int s = 0; s < n - 1; s++) {
        plan_ring_step_t st = plan_ring(g->me, n, shift, s);
        size_t soff, scnt, roff, rcnt;
        prims_partition(count, n, st.send_block, &soff, &scnt);
        prims_partition(count, n, st.recv_block, &roff, &rcnt);
        const char *src = s == 0 ? send + soff * elem : out(ctx, st.send_block, s - 1);
        CHECK(prims_sendrecv_reduce(p, ring_member(g, st.right), src, scnt * elem, ring_member(g, st.left),
                                    send + roff * elem, out(ctx, st.recv_block, s), rcnt * elem, red));
    }
    return CHORUS_SUCCESS;
}

chorus_result_t ring_allgather_in(prims_t *p, const ring_group_t *g, char *buf, size_t count, size_t elem, int shift)
{
    int n = g->n;
    for (int s = 0; s < n - 1; s++) {
        plan_ring_step_t st = plan_ring(g->me, n, shift, s);
        size_t soff, scnt, roff, rcnt;
        prims_partition(count, n, st.send_block, &soff, &scnt);
        prims_partition(count, n, st.recv_block, &roff, &rcnt);
        CHECK(prims_sendrecv(p, ring_member(g, st.right), buf + soff * elem, scnt * elem, ring_member(g, st.left),
                             buf + roff * elem, rcnt * elem));
    }
    return CHORUS_SUCCESS;
}

chorus_result_t ring_reduce_scatter(prims_t *p, const char *send, size_t count, const prims_reduce_t *red, int shift,
                                    ring_out_fn out, void *ctx)
{
    ring_group_t g = ring_all(p);
    return ring_reduce_scatter_in(p, &g, send, count, red, shift, out, ctx);
}

chorus_result_t ring_allgather(prims_t *p, char *buf, size_t count, size_t elem, int shift)
{
    ring_group_t g = ring_all(p);
    return ring_allgather_in(p, &g, buf, count, elem, shift);
}

char *ring_out_inplace(void *ctx, int block, int step)
{
    (void)step;
    const ring_layout_t *l = ctx;
    size_t off, cnt;
    prims_partition(l->count, l->nranks, block, &off, &cnt);
    return l->base + off * l->elem;
}
