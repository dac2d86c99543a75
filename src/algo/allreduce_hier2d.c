/*
 * Two-dimensional hierarchical AllReduce, for H hosts of L ranks each: a ring reduce-scatter among each
 * host's ranks (shared memory) leaves local rank i with its host's sum of block i of L; then the H ranks
 * of local index i, one per host, run a ring AllReduce of that block among themselves (TCP between
 * hosts), L such rings at once; a ring allgather among each host's ranks spreads the blocks back.
 *
 * hier (allreduce_hier.c) sends everything between hosts through each host's leader, which reduces and
 * forwards the whole buffer along chains of its ranks; here every rank carries 1/L of the traffic between
 * hosts, in L connections side by side, and each rank reduces and copies 1/L of the buffer per step
 * inside its host. Each host's link carries the same bytes as with hier, 2 (H - 1)/H n each way.
 *
 * Steps: 2 (L - 1) inside hosts, 2 (H - 1) between them. Bytes per rank: 2 (L - 1)/L n inside its host,
 * 2 (H - 1)/H n/L between hosts. Reduction per rank: (L - 1)/L n + (H - 1)/H n/L.
 * Restrictions: ranks on two hosts or more, every host with the same number of them, two or more
 * (ALGO_NEEDS_EVEN_HOSTS).
 */
#include <stdlib.h>

#include "algo/algo.h"
#include "algo/hier.h"
#include "algo/plan.h"
#include "algo/ring.h"
#include "util/util.h"

chorus_result_t allreduce_hier2d(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    hier_t h;
    CHECK(hier_init(p, &h));
    int nl = h.nlocal, nh = h.nhosts, even = 1;
    for (int k = 0; k < nh; k++) even &= h.start[k + 1] - h.start[k] == nl;
    /* The ranks of this rank's local index on every host, by host: its ring between hosts (the registry
     * offers this algorithm only where every host has nl ranks). */
    int *across = even ? malloc(sizeof(int) * (size_t)nh) : NULL;
    if (!across) {
        hier_free(&h);
        return even ? CHORUS_ERR_NO_MEMORY : CHORUS_ERR_INTERNAL;
    }
    for (int k = 0; k < nh; k++) across[k] = h.order[h.start[k] + h.pos];
    ring_group_t local = {h.local, nl, h.pos}, cross = {across, nh, h.host};
    ring_layout_t all = {a->recvbuf, a->count, nl, red.elem};
    chorus_result_t res = ring_reduce_scatter_in(p, &local, a->sendbuf, a->count, &red, 0, ring_out_inplace, &all);
    /* This rank's block of the host's sum: block pos + 1 of the L, as the ring leaves it. */
    size_t off, cnt;
    prims_partition(a->count, nl, plan_mod(h.pos + 1, nl), &off, &cnt);
    char *block = (char *)a->recvbuf + off * red.elem;
    ring_layout_t part = {block, cnt, nh, red.elem};
    if (res == CHORUS_SUCCESS) res = ring_reduce_scatter_in(p, &cross, block, cnt, &red, 0, ring_out_inplace, &part);
    if (res == CHORUS_SUCCESS) {
        size_t soff, scnt;
        prims_partition(cnt, nh, plan_mod(h.host + 1, nh), &soff, &scnt);
        reduce_finish(block + soff * red.elem, scnt, a->dtype, a->op, h.nranks);
        res = ring_allgather_in(p, &cross, block, cnt, red.elem, 1);
    }
    if (res == CHORUS_SUCCESS) res = ring_allgather_in(p, &local, a->recvbuf, a->count, red.elem, 1);
    free(across);
    hier_free(&h);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h): the steps inside hosts and between them
 * at the link's latency, the bytes inside hosts as the two copies a shared-memory connection makes of
 * each byte. */
algo_cost_t allreduce_hier2d_cost(const algo_shape_t *s)
{
    double n = s->n, h = CHORUS_MAX(s->hosts, 1), l = CHORUS_MAX(s->per_host, 1);
    /* By level: every rank works in both (no leaders). */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = 2 * (h - 1), .bytes = 2 * (h - 1) / h * n / l,
                         .reduced = (l - 1) / l * n + (h - 1) / h * n / l, .inside_steps = 2 * (l - 1),
                         .inside_bytes = 2 * (l - 1) / l * n};
}
