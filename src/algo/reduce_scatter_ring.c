/*
 * Ring ReduceScatter: p - 1 ring steps; at each, a rank sends one block of partial sums to its right
 * neighbour while receiving and reducing another from its left, chunk by chunk as it lands. The rotation
 * is chosen so rank r's last step completes block r, straight into recvbuf; intermediate partial sums
 * alternate between two scratch blocks.
 *
 * Steps: p - 1. Bytes sent per rank: (p - 1)/p * n (n = the whole input, p * recvcount elements).
 * Reduction work per rank: (p - 1)/p * n. Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/ring.h"
#include "util/util.h"

typedef struct rs_ring_ctx {
    char *recv;
    char *acc[2];
    int last_step;
} rs_ring_ctx_t;

static char *reduce_scatter_ring_out(void *ctx, int block, int step)
{
    (void)block;
    rs_ring_ctx_t *c = ctx;
    return step == c->last_step ? c->recv : c->acc[step & 1];
}

chorus_result_t reduce_scatter_ring(prims_t *p, const coll_args_t *a)
{
    int n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    size_t block_bytes = a->count * red.elem;
    rs_ring_ctx_t ctx = {.recv = a->recvbuf, .last_step = n - 2};
    /* Slot 0 is the receive staging of prims_sendrecv_reduce; the two partial-sum blocks share slot 1. */
    void *acc;
    CHECK(prims_scratch(p, 1, 2 * block_bytes, &acc));
    ctx.acc[0] = acc;
    ctx.acc[1] = (char *)acc + block_bytes;
    CHECK(ring_reduce_scatter(p, a->sendbuf, a->count * (size_t)n, &red, -1, reduce_scatter_ring_out, &ctx));
    reduce_finish(a->recvbuf, a->count, a->dtype, a->op, n);
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_scatter_ring_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = p - 1.0, .bytes = (p - 1.0) / p * n,
                         .reduced = (p - 1.0) / p * n};
}
