/*
 * Two-shot AllReduce, inside one host: a reduce-scatter and an allgather through the arena. Per chunk,
 * phase 1: every rank copies the chunk of its input into its slot, but for its own 1/p slice of it, which
 * nobody else reads; each rank then combines that slice of the chunk from the other p - 1 slots and its
 * input (in rank order) into its next slot. Phase 2: every rank copies the p combined slices into its
 * output.
 *
 * Steps: 2 synchronisations per slot-sized chunk. Bytes per rank: (p-1)/p n copied in, n read while combining,
 * n/p written (slot to slot: in cache however large n is), n copied out (out of place, streamed past the
 * cache where it is too large for it: prims_stream_whole); nothing crosses a connection.
 * Restrictions: direct access (every rank on one host, sharing the host arena).
 */
#include "algo/direct.h"

chorus_result_t allreduce_twoshot(prims_t *p, const coll_args_t *a) { return direct_twoshot(p, a, 1); }

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_twoshot_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* (p-1)/p n in; the other slots' parts of this rank's 1/p read and combined into its next slot (slot to
     * slot); the other ranks' results read, and its own copied, out to the output. */
    return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = 2 * algo_pieces(n, s->slot),
                         .bytes = 2.0 * (p - 1) / p * n, .copied = n, .reduced = (p - 1.0) / p * n,
                         .slot_bytes = (p - 1.0) / p * n, .slot_reduced = (p - 1.0) / p * n,
                         .streamed = algo_streamed_part(s, n / p, n)};
}
