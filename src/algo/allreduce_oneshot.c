/*
 * One-shot AllReduce, inside one host: every rank copies its input into its arena slot, then combines all
 * p slots, in rank order, straight into its output. One phase per slot-sized chunk.
 *
 * Steps: 1 synchronisation per chunk (ceil(n / slot)). Bytes per rank: n copied in, p * n read while
 * combining; nothing crosses a connection. Latency-optimal; for small n. Restrictions: direct access
 * (every rank on one host, sharing the host arena).
 */
#include "algo/direct.h"

chorus_result_t allreduce_oneshot(prims_t *p, const coll_args_t *a) { return direct_oneshot(p, a, 1); }
