/*
 * Direct Barrier, inside one host: every rank publishes a phase in the arena and waits until every other
 * rank has published it.
 *
 * Steps: 1 synchronisation. Bytes: none. Restrictions: direct access (every rank on one host, sharing
 * the host arena).
 */
#include "algo/direct.h"
#include "util/util.h"

chorus_result_t barrier_direct(prims_t *p, const coll_args_t *a)
{
    (void)a;
    return direct_empty_phase(p);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t barrier_direct_cost(const algo_shape_t *s)
{
    (void)s;
    return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = 1};
}
