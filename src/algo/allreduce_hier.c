/*
 * Hierarchical AllReduce, for ranks on several hosts: each host reduces to its leader (its lowest rank)
 * along a pipelined chain of its own ranks (shared memory), the leaders run a ring AllReduce among
 * themselves (TCP between hosts), and each leader sends the result back down its host's chain.
 *
 * A flat ring crosses from host to host wherever neighbouring ranks sit on different hosts, and every
 * crossing carries 2 (p - 1)/p n each way; here only the leaders' ring crosses, with 2 (H - 1)/H n each
 * way on each host's link to the next: on 2 hosts of 2 ranks, n against 1.5 n.
 *
 * Steps: (L - 1) + (k - 1) chunk hops for each chain (L ranks on the largest host, k chunks of n), and
 * 2 (H - 1) ring steps among the H leaders. Bytes: 2 (H - 1)/H n between hosts per leader; n into and out
 * of each rank of a chain, twice (reduce, then broadcast), through shared memory. Reduction per rank: n
 * in the chain (the leader's last), (H - 1)/H n more at the leaders.
 * Restrictions: ranks on two hosts or more, some host with two ranks or more (ALGO_NEEDS_HOSTS).
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/hier.h"
#include "algo/ring.h"
#include "util/util.h"

chorus_result_t allreduce_hier(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    size_t bytes = a->count * red.elem;
    hier_t h;
    CHECK(hier_init(p, &h));
    int pos = h.pos, nlocal = h.nlocal;
    int up = pos + 1 < nlocal ? h.local[pos + 1] : -1, down = pos > 0 ? h.local[pos - 1] : -1;
    chorus_result_t res = CHORUS_SUCCESS;
    if (nlocal > 1)
        res = prims_chain_reduce(p, up, down, a->sendbuf, a->recvbuf, bytes, &red);
    else if (a->sendbuf != a->recvbuf)
        memcpy(a->recvbuf, a->sendbuf, bytes);
    if (res == CHORUS_SUCCESS && pos == 0) {
        ring_group_t g = {h.leaders, h.nhosts, h.host};
        ring_layout_t layout = {a->recvbuf, a->count, h.nhosts, red.elem};
        res = ring_reduce_scatter_in(p, &g, a->recvbuf, a->count, &red, 0, ring_out_inplace, &layout);
        size_t off, cnt;
        prims_partition(a->count, h.nhosts, plan_mod(h.host + 1, h.nhosts), &off, &cnt);
        if (res == CHORUS_SUCCESS) reduce_finish(layout.base + off * red.elem, cnt, a->dtype, a->op, h.nranks);
        if (res == CHORUS_SUCCESS) res = ring_allgather_in(p, &g, a->recvbuf, a->count, red.elem, 1);
    }
    if (res == CHORUS_SUCCESS && nlocal > 1) res = prims_chain_copy(p, down, up, a->recvbuf, a->recvbuf, bytes);
    hier_free(&h);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h), by level: the leaders' ring among the hosts,
 * and the two chains inside each host (a middle rank receives and sends at once, as an exchange; a chain
 * of two ranks is one way), whose reductions every rank makes. */
algo_cost_t allreduce_hier_cost(const algo_shape_t *s)
{
    double n = s->n, k = algo_pieces(n, s->chunk), h = CHORUS_MAX(s->hosts, 1), l = CHORUS_MAX(s->per_host, 1);
    double chains = l > 1 ? 2 * n : 0;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = 2 * (h - 1), .bytes = 2 * (h - 1) / h * n,
                         .reduced = (l > 1 ? n : 0) + (h - 1) / h * n,
                         .inside_steps = l > 1 ? 2 * (l - 1 + k - 1) : 0, .inside_bytes = l > 2 ? chains : 0,
                         .inside_oneway = l == 2 ? chains : 0};
}
