/*
 * Two-shot AllReduce, inside one host: a reduce-scatter and an allgather through the arena. Per chunk,
 * phase 1: every rank copies the chunk of its input into its slot; each rank then combines its 1/p slice
 * of the chunk from all p slots (in rank order) into its next slot. Phase 2: every rank copies the p
 * combined slices into its output.
 *
 * Steps: 2 synchronisations per slot-sized chunk. Bytes per rank: n copied in, n read while combining,
 * n/p written, n copied out; nothing crosses a connection. Restrictions: direct access (every rank on
 * one host, sharing the host arena).
 */
#include <string.h>

#include "algo/direct.h"
#include "util/util.h"

chorus_result_t allreduce_twoshot(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    size_t per = direct_chunk_elems(p, 1, red.elem);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    for (size_t off = 0; off < a->count; off += per) {
        size_t cnt = CHORUS_MIN(per, a->count - off);
        CHECK(direct_reduce_scatter_chunk(p, in + off * red.elem, cnt, &red));
        CHECK(direct_gather_slices(p, out + off * red.elem, cnt, red.elem));
    }
    return CHORUS_SUCCESS;
}
