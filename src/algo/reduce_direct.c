/*
 * Direct Reduce, inside one host: the reduce-scatter half of two-shot AllReduce, then the root alone
 * copies the p combined slices. Per slot-sized chunk, phase 1: every rank copies its chunk into its arena
 * slot and combines its 1/p slice from all p slots into its next slot; phase 2: the root copies the slices
 * into its output.
 *
 * Steps: 2 synchronisations per chunk. Bytes per rank: n copied in, n read while combining, n/p written;
 * the root copies n out. Nothing crosses a connection. Restrictions: direct access (every rank on one
 * host, sharing the host arena).
 */
#include <string.h>

#include "algo/direct.h"
#include "util/util.h"

chorus_result_t reduce_direct(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    size_t per = direct_chunk_elems(p, 1, red.elem);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    for (size_t off = 0; off < a->count; off += per) {
        size_t cnt = CHORUS_MIN(per, a->count - off);
        CHECK(direct_reduce_scatter_chunk(p, in + off * red.elem, cnt, &red));
        if (prims_rank(p) == a->root) CHECK(direct_gather_slices(p, out + off * red.elem, cnt, red.elem));
    }
    return CHORUS_SUCCESS;
}
