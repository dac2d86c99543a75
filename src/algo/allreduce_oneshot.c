/*
 * One-shot AllReduce, inside one host: every rank copies its input into its arena slot, then combines all
 * p slots, in rank order, straight into its output. One phase per slot-sized chunk.
 *
 * Steps: 1 synchronisation per chunk (ceil(n / slot)). Bytes per rank: n copied in, p * n read while combining
 * (slots and a chunk of the output: in cache however large n is); nothing crosses a connection. Latency-optimal;
 * for small n. Restrictions: direct access (every rank on one host, sharing the host arena).
 */
#include "algo/direct.h"

chorus_result_t allreduce_oneshot(prims_t *p, const coll_args_t *a) { return direct_oneshot(p, a, 1); }

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_oneshot_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* n copied in; the p - 1 other slots read and combined into the output. */
    return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = algo_pieces(n, s->slot), .bytes = (p - 1.0) * n,
                         .copied = n, .reduced = (p - 1.0) * n, .slot_bytes = (p - 1.0) * n,
                         .slot_reduced = (p - 1.0) * n};
}
