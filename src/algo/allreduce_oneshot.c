/*
 * One-shot AllReduce, inside one host: every rank copies its input into its arena slot, then combines all
 * p slots, in rank order, straight into its output. One phase per slot-sized chunk.
 *
 * Steps: 1 synchronisation per chunk (ceil(n / slot)). Bytes per rank: n copied in, p * n read while
 * combining; nothing crosses a connection. Latency-optimal; for small n. Restrictions: direct access
 * (every rank on one host, sharing the host arena).
 */
#include <string.h>

#include "algo/direct.h"
#include "util/util.h"

chorus_result_t allreduce_oneshot(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    size_t per = direct_chunk_elems(p, 1, red.elem);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    for (size_t off = 0; off < a->count; off += per) {
        size_t cnt = CHORUS_MIN(per, a->count - off);
        const void *const *slots;
        CHECK(direct_put(p, in + off * red.elem, cnt * red.elem));
        CHECK(prims_direct_wait_all(p, &slots));
        direct_reduce(out + off * red.elem, slots, prims_nranks(p), 0, cnt, &red);
    }
    return CHORUS_SUCCESS;
}
