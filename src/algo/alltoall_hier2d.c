/*
 * Two-dimensional AllToAll, for H hosts of L ranks each (rank (k, i): the i-th rank of host k): a block
 * for another host first moves inside its host to the rank of the destination's local index, which then
 * sends it across with the other blocks of its host for that destination, so that every message between
 * hosts carries L blocks and every rank takes part (where hier's leader carries all of its host's
 * traffic).
 *
 * Phase 1, inside each host, pairwise over the local index: rank (h, i) sends rank (h, j) its blocks for
 * (k, j), every host k (its own host's one is delivered there), and gathers from each rank of its host
 * those for (k, i). Phase 2, between hosts, pairwise over the hosts: rank (h, i) sends rank (k, i) the L
 * blocks its host's ranks have for it and receives from (k', i) the blocks of host k''s ranks for itself,
 * straight into its output where host k''s ranks are consecutive.
 *
 * Steps: L - 1 inside a host, H - 1 between hosts. Bytes between hosts: (H - 1)/H n per rank, in messages
 * of n/H. Inside a host: (L - 1)/L n per rank through shared memory, two copies of each byte. Copied:
 * packing, (L - 1)/L n for phase 1 and (H - 1)/H n for phase 2, and the own column and the host's own
 * blocks, n/L + n/H. Restrictions: as many ranks on every host, two or more, on two hosts or more
 * (ALGO_NEEDS_EVEN_HOSTS). Scratch: n, and H + 2 L blocks.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/hier.h"
#include "algo/plan.h"
#include "util/util.h"

/* Rank (k, i). */
static int hier2d_rank(const hier_t *h, int k, int i) { return h->order[h->start[k] + i]; }

/* Whether host k's ranks are consecutive, so that their blocks are one run in rank order. */
static int hier2d_consecutive(const hier_t *h, int k)
{
    return hier2d_rank(h, k, h->nlocal - 1) - hier2d_rank(h, k, 0) == h->nlocal - 1;
}

chorus_result_t alltoall_hier2d(prims_t *p, const coll_args_t *a)
{
    size_t block = a->count * dtype_size(a->dtype);
    const char *send = a->sendbuf;
    char *recv = a->recvbuf;
    hier_t h;
    CHECK(hier_init(p, &h));
    int H = h.nhosts, L = h.nlocal, hm = h.host, im = h.pos;
    for (int k = 0; k < H; k++)
        if (h.start[k + 1] - h.start[k] != L) { /* the registry offers it only where every host has L ranks */
            hier_free(&h);
            return CHORUS_ERR_INTERNAL;
        }
    /* gather[i][k]: from (hm, i) for (k, im); pack: a message's blocks (H for phase 1, L for phase 2); stage:
     * phase 2's received blocks where the sending host's ranks are not consecutive. */
    char *gather, *pack;
    chorus_result_t res = prims_scratch(p, 1, (size_t)L * (size_t)H * block + 1, (void **)&gather);
    if (res == CHORUS_SUCCESS) res = prims_scratch(p, 0, (size_t)(H + 2 * L) * block + 1, (void **)&pack);
    if (res != CHORUS_SUCCESS) goto out;
    char *stage = pack + (size_t)CHORUS_MAX(H, L) * block;
    for (int k = 0; k < H; k++)
        memcpy(gather + ((size_t)im * H + k) * block, send + (size_t)hier2d_rank(&h, k, im) * block, block);
    for (int s = 1; s < L && res == CHORUS_SUCCESS; s++) {
        int jt = (im + s) % L, jf = plan_mod(im - s, L);
        for (int k = 0; k < H; k++)
            memcpy(pack + (size_t)k * block, send + (size_t)hier2d_rank(&h, k, jt) * block, block);
        res = prims_sendrecv(p, hier2d_rank(&h, hm, jt), pack, (size_t)H * block, hier2d_rank(&h, hm, jf),
                             gather + (size_t)jf * H * block, (size_t)H * block);
    }
    if (res != CHORUS_SUCCESS) goto out;
    /* The whole input has been read: the output may be written (in place too). */
    for (int i = 0; i < L; i++)
        memcpy(recv + (size_t)hier2d_rank(&h, hm, i) * block, gather + ((size_t)i * H + hm) * block, block);
    for (int s = 1; s < H && res == CHORUS_SUCCESS; s++) {
        int kt = plan_mod(hm + s, H), kf = plan_mod(hm - s, H);
        for (int i = 0; i < L; i++) memcpy(pack + (size_t)i * block, gather + ((size_t)i * H + kt) * block, block);
        int direct = hier2d_consecutive(&h, kf);
        char *into = direct ? recv + (size_t)hier2d_rank(&h, kf, 0) * block : stage;
        res = prims_sendrecv(p, hier2d_rank(&h, kt, im), pack, (size_t)L * block, hier2d_rank(&h, kf, im), into,
                             (size_t)L * block);
        for (int i = 0; i < L && !direct && res == CHORUS_SUCCESS; i++)
            memcpy(recv + (size_t)hier2d_rank(&h, kf, i) * block, stage + (size_t)i * block, block);
    }
out:
    hier_free(&h);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h): phase 1's bytes priced as the two copies a
 * shared-memory connection makes of each byte, every step at the link's latency. */
algo_cost_t alltoall_hier2d_cost(const algo_shape_t *s)
{
    double n = s->n, l = CHORUS_MAX(s->per_host, 1), h = CHORUS_MAX(s->hosts, 1);
    /* By level: every rank works in both (no leaders). */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = h - 1, .bytes = (h - 1) / h * n,
                         .copied = (l - 1) / l * n + n / l + n / h + (h - 1) / h * n, .inside_steps = l - 1,
                         .inside_bytes = (l - 1) / l * n};
}
