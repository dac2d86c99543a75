/*
 * Pipelined chain Reduce: ranks form a chain ending at the root (root+1, root+2, ..., root); the head
 * sends its data in chunks, and every other rank combines each received chunk with its own and forwards
 * the partial result while the next chunk is on its way in. The root finishes (avg divides once).
 *
 * Steps: p - 1 + k - 1 chunk hops for k chunks. Bytes sent per rank: n (the root sends none). Reduction
 * work per rank: n. Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/plan.h"
#include "util/util.h"

chorus_result_t reduce_chain(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    size_t bytes = a->count * red.elem;
    int prev, next;
    plan_chain(rank, n, a->root + 1, &prev, &next); /* the root is last */
    void *dst = a->recvbuf;
    if (next >= 0 && prev >= 0) CHECK(prims_scratch(p, 1, bytes ? bytes : 1, &dst));
    CHECK(prims_chain_reduce(p, prev, next, a->sendbuf, dst, bytes, &red));
    if (next < 0) reduce_finish(a->recvbuf, a->count, a->dtype, a->op, n);
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_chain_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    double k = algo_pieces(n, s->chunk);
    /* Middle ranks receive and send at once (an exchange's load); with 2 ranks there are none. */
    double hops = (p - 1 + k - 1) * n / k;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = p - 1 + k - 1, .bytes = p > 2 ? hops : 0, .reduced = n,
                         .oneway = p > 2 ? 0 : hops};
}
