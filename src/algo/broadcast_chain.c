/*
 * Pipelined chain Broadcast: ranks form a chain starting at the root (root, root+1, ...); the message
 * moves in chunks, and each rank forwards chunk i to its successor as soon as it lands, while chunk i+1
 * is on its way in.
 *
 * Steps: p - 1 + k - 1 chunk hops in flight for k chunks. Bytes sent per rank: n (the tail sends none).
 * Time ~ (p - 1 + k - 1)(alpha + n/(k beta)). Copied: n at the root out of place, a chunk at a time
 * while its link keeps it waiting. Restrictions: none.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/plan.h"

chorus_result_t broadcast_chain(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t bytes = a->count * dtype_size(a->dtype);
    int prev, next;
    plan_chain(rank, n, a->root, &prev, &next);
    return prims_chain_copy(p, prev, next, a->sendbuf, a->recvbuf, bytes);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t broadcast_chain_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    double k = algo_pieces(n, s->chunk);
    /* Middle ranks receive and send at once (an exchange's load); with 2 ranks there are none. Where the
     * ranks outnumber the cores, the cores do the whole host's work, as an average per rank (s multiplies
     * it back): the root only sends and the last rank only receives, half an exchange each, so p - 1
     * exchanges' worth over p ranks, and the root's copy over p. Over TCP on a 2-core Xeon virtual machine
     * the middle ranks' load alone priced the 4-rank chain at 1.25 to 1.8 times its measured time from 1
     * MiB (docs/tuning.md, "The TCP send buffer"). */
    double hops = (p - 1 + k - 1) * n / k;
    if (p > 2 && s->shared)
        return (algo_cost_t){.link = ALGO_LINK_NET, .steps = p - 1 + k - 1, .bytes = (p - 1.0) / p * hops,
                             .copied = n / p};
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = p - 1 + k - 1, .bytes = p > 2 ? hops : 0, .copied = n,
                         .oneway = p > 2 ? 0 : hops};
}
