/*
 * One-shot Reduce, inside one host: every rank copies its input into its arena slot; the root combines
 * all p slots, in rank order, into its output. One phase per slot-sized chunk; the others do not wait
 * for the root, beyond the arena's two slots.
 *
 * Steps: 1 synchronisation per chunk (ceil(n / slot)). Bytes: n copied in per rank, p * n read at the root (in
 * cache, as one-shot AllReduce's); nothing crosses a connection. Latency-optimal; for small n. Restrictions: direct
 * access (every rank on one host, sharing the host arena).
 */
#include "algo/direct.h"

chorus_result_t reduce_oneshot(prims_t *p, const coll_args_t *a) { return direct_oneshot(p, a, 0); }

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_oneshot_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = algo_pieces(n, s->slot), .bytes = (p - 1.0) * n,
                         .copied = n, .reduced = (p - 1.0) * n, .slot_bytes = (p - 1.0) * n,
                         .slot_reduced = (p - 1.0) * n};
}
