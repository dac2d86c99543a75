/*
 * Dissemination Barrier: in round k (distance d = 2^k) rank r signals rank r + d and waits for rank r - d.
 * After ceil(log2 p) rounds every rank has heard, directly or transitively, from every other.
 *
 * Steps: ceil(log2 p). Bytes: a zero-length message per round. Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/plan.h"
#include "util/util.h"

chorus_result_t barrier_dissemination(prims_t *p, const coll_args_t *a)
{
    (void)a;
    int rank = prims_rank(p), n = prims_nranks(p);
    for (int d = 1; d < n; d *= 2) {
        int to, from;
        plan_dissemination(rank, n, d, &to, &from);
        CHECK(prims_sendrecv(p, to, NULL, 0, from, NULL, 0));
    }
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t barrier_dissemination_cost(const algo_shape_t *s)
{
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = algo_log2_ceil(s->p)};
}
