#include "algo/ring.h"

#include "util/util.h"

chorus_result_t ring_reduce_scatter(prims_t *p, const char *send, size_t count, const prims_reduce_t *red, int shift,
                                    ring_out_fn out, void *ctx)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    int right = ring_mod(rank + 1, n), left = ring_mod(rank - 1, n);
    size_t elem = red->elem;
    for (int s = 0; s < n - 1; s++) {
        int sblk = ring_mod(rank + shift - s, n), rblk = ring_mod(rank + shift - s - 1, n);
        size_t soff, scnt, roff, rcnt;
        prims_partition(count, n, sblk, &soff, &scnt);
        prims_partition(count, n, rblk, &roff, &rcnt);
        const char *src = s == 0 ? send + soff * elem : out(ctx, sblk, s - 1);
        CHECK(prims_sendrecv_reduce(p, right, src, scnt * elem, left, send + roff * elem, out(ctx, rblk, s),
                                    rcnt * elem, red));
    }
    return CHORUS_SUCCESS;
}

chorus_result_t ring_allgather(prims_t *p, char *buf, size_t count, size_t elem, int shift)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    int right = ring_mod(rank + 1, n), left = ring_mod(rank - 1, n);
    for (int s = 0; s < n - 1; s++) {
        size_t soff, scnt, roff, rcnt;
        prims_partition(count, n, ring_mod(rank + shift - s, n), &soff, &scnt);
        prims_partition(count, n, ring_mod(rank + shift - s - 1, n), &roff, &rcnt);
        CHECK(prims_sendrecv(p, right, buf + soff * elem, scnt * elem, left, buf + roff * elem, rcnt * elem));
    }
    return CHORUS_SUCCESS;
}

char *ring_out_inplace(void *ctx, int block, int step)
{
    (void)step;
    const ring_layout_t *l = ctx;
    size_t off, cnt;
    prims_partition(l->count, l->nranks, block, &off, &cnt);
    return l->base + off * l->elem;
}
