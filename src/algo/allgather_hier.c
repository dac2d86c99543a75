/*
 * Hierarchical AllGather, for ranks on several hosts: each host's ranks send their blocks to its leader
 * (its lowest rank) through shared memory, the leaders exchange their hosts' blocks pairwise (TCP between
 * hosts: at step s, leader of host h sends to host h + s and receives from host h - s), and each leader
 * passes the whole result down a pipelined chain of its host's ranks.
 *
 * A flat ring sends (p - 1)/p n out of every rank, and each crossing between hosts carries it; here only
 * the leaders send between hosts, each its host's blocks to every other host: (H - 1)/H n out of each
 * host for H hosts of even size, against (p - 1)/p n for a ring over hosts of consecutive ranks, and
 * (L - 1) times more where each host's ranks are spread (every ring hop crosses).
 *
 * Steps: (L - 1) receives at the leader, H - 1 exchanges, (L - 1) + (k - 1) chunk hops down the chain (L
 * ranks on the largest host, k chunks of n). Bytes between hosts: (H - 1)/H n each way per leader. Copied
 * through shared memory: n into and out of each rank of a chain, and (L - 1)/p n into the leader, two
 * copies of each byte. Restrictions: ranks on two hosts or more, some host with two ranks or more
 * (ALGO_NEEDS_HOSTS). A host whose ranks are not consecutive sends its blocks as several messages, one per
 * run of consecutive ranks.
 */
#include "algo/algo.h"
#include "algo/hier.h"
#include "algo/plan.h"
#include "util/copy.h"
#include "util/util.h"

/* Step s of the leaders' exchange: this host's blocks to the leader s hosts on, the blocks of the host s
 * hosts back from its leader, run by run (a host of consecutive ranks is one run). */
static chorus_result_t allgather_hier_exchange(prims_t *p, const hier_t *h, int s, char *out, size_t block)
{
    int from_host = plan_mod(h->host - s, h->nhosts);
    int to = h->leaders[plan_mod(h->host + s, h->nhosts)], from = h->leaders[from_host];
    int sat = 0, rat = 0, sf, sc, rf, rc;
    for (;;) {
        int sending = hier_run(h, h->host, &sat, &sf, &sc), receiving = hier_run(h, from_host, &rat, &rf, &rc);
        if (sending && receiving)
            CHECK(prims_sendrecv(p, to, out + (size_t)sf * block, (size_t)sc * block, from, out + (size_t)rf * block,
                                 (size_t)rc * block));
        else if (sending)
            CHECK(prims_send(p, to, out + (size_t)sf * block, (size_t)sc * block));
        else if (receiving)
            CHECK(prims_recv(p, from, out + (size_t)rf * block, (size_t)rc * block));
        else
            return CHORUS_SUCCESS;
    }
}

chorus_result_t allgather_hier(prims_t *p, const coll_args_t *a)
{
    size_t block = a->count * dtype_size(a->dtype);
    char *out = a->recvbuf;
    hier_t h;
    CHECK(hier_init(p, &h));
    int me = h.local[h.pos];
    chorus_result_t res = CHORUS_SUCCESS;
    if (h.pos > 0) {
        res = prims_send(p, h.local[0], a->sendbuf, block);
    } else {
        if (a->sendbuf != out + (size_t)me * block)
            prims_copy_out(p, out + (size_t)me * block, a->sendbuf, block, block * (size_t)prims_nranks(p));
        for (int i = 1; i < h.nlocal && res == CHORUS_SUCCESS; i++)
            res = prims_recv(p, h.local[i], out + (size_t)h.local[i] * block, block);
        for (int s = 1; s < h.nhosts && res == CHORUS_SUCCESS; s++) res = allgather_hier_exchange(p, &h, s, out, block);
    }
    if (res == CHORUS_SUCCESS && h.nlocal > 1) {
        int up = h.pos + 1 < h.nlocal ? h.local[h.pos + 1] : -1, down = h.pos > 0 ? h.local[h.pos - 1] : -1;
        res = prims_chain_copy(p, down, up, out, out, (size_t)h.nranks * block);
    }
    hier_free(&h);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h); the chain's and the gather's bytes priced
 * as the two copies a shared-memory connection makes of each byte, every step at the link's latency. */
algo_cost_t allgather_hier_cost(const algo_shape_t *s)
{
    double n = s->n, k = algo_pieces(n, s->chunk), h = CHORUS_MAX(s->hosts, 1), l = CHORUS_MAX(s->per_host, 1);
    /* By level: the leaders' exchanges; inside each host the gather into the leader (one way) and the chain
     * down (an exchange for a middle rank, one way for a chain of two). */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = h - 1, .bytes = (h - 1) / h * n, .copied = n / s->p,
                         .streamed = algo_streamed_part(s, n / s->p, n),
                         .inside_steps = l > 1 ? (l - 1) + (l - 1 + k - 1) : 0, .inside_bytes = l > 2 ? n : 0,
                         .inside_oneway = (l - 1) / s->p * n + (l == 2 ? n : 0)};
}
