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
    int rank = prims_rank(p), n = prims_nranks(p);
    prims_reduce_t red = algo_reduction(a);
    size_t elem = red.elem, per = direct_chunk_elems(p, 1, elem);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    for (size_t off = 0; off < a->count; off += per) {
        size_t cnt = CHORUS_MIN(per, a->count - off), soff, scnt;
        void *slot;
        const void *const *slots;
        CHECK(prims_direct_begin(p, &slot));
        memcpy(slot, in + off * elem, cnt * elem);
        prims_direct_publish(p, cnt * elem);
        CHECK(prims_direct_wait_all(p, &slots));
        prims_partition(cnt, n, rank, &soff, &scnt);
        CHECK(prims_direct_begin(p, &slot)); /* slots stays valid: only a wait replaces it */
        if (scnt) direct_reduce(slot, slots, n, soff * elem, scnt, &red);
        prims_direct_publish(p, scnt * elem);
        if (rank != a->root) continue;
        CHECK(prims_direct_wait_all(p, &slots));
        for (int q = 0; q < n; q++) {
            prims_partition(cnt, n, q, &soff, &scnt);
            memcpy(out + (off + soff) * elem, slots[q], scnt * elem);
        }
    }
    return CHORUS_SUCCESS;
}
