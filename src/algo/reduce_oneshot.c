/*
 * One-shot Reduce, inside one host: every rank copies its input into its arena slot; the root combines
 * all p slots, in rank order, into its output. One phase per slot-sized chunk; the others do not wait
 * for the root, beyond the arena's two slots.
 *
 * Steps: 1 synchronisation per chunk (ceil(n / slot)). Bytes: n copied in per rank, p * n read at the
 * root; nothing crosses a connection. Latency-optimal; for small n. Restrictions: direct access (every
 * rank on one host, sharing the host arena).
 */
#include <string.h>

#include "algo/direct.h"
#include "util/util.h"

chorus_result_t reduce_oneshot(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    size_t per = direct_chunk_elems(p, 1, red.elem);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    for (size_t off = 0; off < a->count; off += per) {
        size_t cnt = CHORUS_MIN(per, a->count - off);
        const void *const *slots;
        CHECK(direct_put(p, in + off * red.elem, cnt * red.elem));
        if (prims_rank(p) != a->root) continue;
        CHECK(prims_direct_wait_all(p, &slots));
        direct_reduce(out + off * red.elem, slots, prims_nranks(p), 0, cnt, &red);
    }
    return CHORUS_SUCCESS;
}
