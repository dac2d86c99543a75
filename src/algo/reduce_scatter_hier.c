/*
 * Hierarchical ReduceScatter, for ranks on several hosts: each host reduces the whole input to its leader
 * (its lowest rank) along a pipelined chain of its ranks (shared memory); the leaders then reduce-scatter
 * among themselves host by host (TCP between hosts: at step s, leader of host h sends its partial sums of
 * host h + s's blocks to that host's leader while it receives and adds in those of its own host's blocks
 * from host h - s); each leader ends with its host's blocks reduced over every rank and sends each of its
 * ranks its block.
 *
 * Each host's link carries (H - 1)/H n each way for H hosts of even size, where a ring's crossings carry
 * (p - 1)/p n (and more where hosts' ranks are spread).
 *
 * Steps: (L - 1) + (k - 1) chunk hops up the chain (L ranks on the largest host, k chunks of n), H - 1
 * exchanges, L - 1 sends from the leader. Bytes between hosts: (H - 1)/H n each way per leader. Copied
 * through shared memory: n into and out of each rank of a chain, two copies of each byte, and L/p n out of
 * the leader. Reduction per rank: n in the chain, (H - 1)/H n more at the leaders. Restrictions: ranks on
 * two hosts or more, some host with two ranks or more (ALGO_NEEDS_HOSTS). A host whose ranks are not
 * consecutive moves its blocks as several messages, one per run of consecutive ranks.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/hier.h"
#include "algo/plan.h"
#include "util/util.h"

/* Step s of the leaders' exchange: the partial sums of the blocks of the host s hosts on (from `sums`,
 * which holds every block) to its leader; those of this host's blocks from the leader s hosts back,
 * added to `mine` into acc (acc[b] = mine[b] + received). Run by run, as allgather_hier's exchange. */
static chorus_result_t reduce_scatter_hier_exchange(prims_t *p, const hier_t *h, int s, const char *sums,
                                                    const char *mine, char *acc, size_t block,
                                                    const prims_reduce_t *red)
{
    int to_host = plan_mod(h->host + s, h->nhosts);
    int to = h->leaders[to_host], from = h->leaders[plan_mod(h->host - s, h->nhosts)];
    int sat = 0, rat = 0, sf = 0, sc = 0, rf = 0, rc = 0;
    for (;;) {
        int sending = hier_run(h, to_host, &sat, &sf, &sc), receiving = hier_run(h, h->host, &rat, &rf, &rc);
        if (!sending && !receiving) return CHORUS_SUCCESS;
        size_t soff = (size_t)sf * block, roff = (size_t)rf * block;
        CHECK(prims_sendrecv_reduce(p, sending ? to : -1, sums + soff, sending ? (size_t)sc * block : 0,
                                    receiving ? from : -1, mine + roff, acc + roff,
                                    receiving ? (size_t)rc * block : 0, red));
    }
}

chorus_result_t reduce_scatter_hier(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    size_t block = a->count * red.elem;
    hier_t h;
    CHECK(hier_init(p, &h));
    size_t bytes = (size_t)h.nranks * block;
    int me = h.local[h.pos], up = h.pos + 1 < h.nlocal ? h.local[h.pos + 1] : -1;
    int down = h.pos > 0 ? h.local[h.pos - 1] : -1;
    /* The chain's partial sums and, at the leader, the whole host's then its blocks' full sums (slot 0 is
     * the staging of the reduction exchanges). */
    char *acc = NULL;
    chorus_result_t res = CHORUS_SUCCESS;
    if (up >= 0 || h.pos == 0) res = prims_scratch(p, 1, bytes ? bytes : 1, (void **)&acc);
    if (res == CHORUS_SUCCESS && h.nlocal > 1) res = prims_chain_reduce(p, up, down, a->sendbuf, acc, bytes, &red);
    if (res == CHORUS_SUCCESS && h.pos == 0) {
        /* What the host sums to: the chain's result, or this rank's input where it is alone on its host. */
        const char *sums = h.nlocal > 1 ? acc : a->sendbuf;
        for (int s = 1; s < h.nhosts && res == CHORUS_SUCCESS; s++)
            res = reduce_scatter_hier_exchange(p, &h, s, sums, s == 1 ? sums : acc, acc, block, &red);
        for (int i = 1; i < h.nlocal && res == CHORUS_SUCCESS; i++)
            res = prims_send(p, h.local[i], acc + (size_t)h.local[i] * block, block);
        if (res == CHORUS_SUCCESS) memmove(a->recvbuf, acc + (size_t)me * block, block);
    } else if (res == CHORUS_SUCCESS) {
        res = prims_recv(p, h.local[0], a->recvbuf, block);
    }
    if (res == CHORUS_SUCCESS) reduce_finish(a->recvbuf, a->count, a->dtype, a->op, h.nranks);
    hier_free(&h);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h), priced as allreduce_hier's: the chain's
 * bytes as the two copies a shared-memory connection makes of each byte, every step at the link's
 * latency. */
algo_cost_t reduce_scatter_hier_cost(const algo_shape_t *s)
{
    double n = s->n, k = algo_pieces(n, s->chunk), h = CHORUS_MAX(s->hosts, 1), l = CHORUS_MAX(s->per_host, 1);
    /* By level: the leaders' exchanges; inside each host the chain up (an exchange for a middle rank, one
     * way for a chain of two) and the leader's sends of its ranks' blocks. */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = h - 1, .bytes = (h - 1) / h * n,
                         .reduced = (l > 1 ? n : 0) + (h - 1) / h * n,
                         .inside_steps = l > 1 ? l - 1 + k - 1 + l - 1 : 0, .inside_bytes = l > 2 ? n : 0,
                         .inside_oneway = l > 1 ? (l == 2 ? n : 0) + (l - 1) / s->p * n : 0};
}
