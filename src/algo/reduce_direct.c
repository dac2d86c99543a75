/*
 * Direct Reduce, inside one host: the reduce-scatter half of two-shot AllReduce, then the root alone
 * copies the p combined slices. Per slot-sized chunk, phase 1: every rank copies its chunk into its arena
 * slot, but for its own 1/p slice, and combines that slice from the other p - 1 slots and its input into
 * its next slot; phase 2: the root copies the slices into its output.
 *
 * Steps: 2 synchronisations per chunk. Bytes per rank: (p-1)/p n copied in, n read while combining, n/p written
 * (slot to slot: in cache however large n is); the root copies n out (out of place, streamed past the
 * cache where it is too large for it: prims_stream_whole). Nothing crosses a connection.
 * Restrictions: direct access (every rank on one host, sharing the host arena).
 */
#include "algo/direct.h"

chorus_result_t reduce_direct(prims_t *p, const coll_args_t *a) { return direct_twoshot(p, a, 0); }

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t reduce_direct_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* Copied: (p-1)/p n in, the n/p combined, and the root's n out. */
    return (algo_cost_t){.link = ALGO_LINK_ARENA, .steps = 2 * algo_pieces(n, s->slot),
                         .bytes = 2.0 * (p - 1) / p * n, .copied = (p - 1.0) / p * n + n / p + n,
                         .reduced = (p - 1.0) / p * n,
                         .slot_bytes = (p - 1.0) / p * n, .slot_reduced = (p - 1.0) / p * n,
                         .streamed = algo_streamed(s, n)};
}
