/*
 * Direct AllToAll, inside one host: per chunk, every rank copies the chunk of each of its p send blocks
 * into its arena slot (the slot holds p pieces), then copies piece `rank` of every rank's slot into that
 * rank's block of its output.
 *
 * Steps: 1 synchronisation per chunk (ceil(n / slot)). Bytes per rank: n copied in, n copied out; nothing
 * crosses a connection. In place works: a chunk is copied in before any of it is overwritten.
 * Restrictions: direct access (every rank on one host, sharing the host arena).
 */
#include <string.h>

#include "algo/direct.h"
#include "util/util.h"

chorus_result_t alltoall_direct(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t elem = dtype_size(a->dtype), per = direct_chunk_elems(p, n, elem);
    char *out = a->recvbuf;
    for (size_t off = 0; off < a->count; off += per) {
        size_t piece = CHORUS_MIN(per, a->count - off) * elem;
        const void *const *slots;
        CHECK(direct_put_pieces(p, a->sendbuf, a->count, off, piece / elem, elem));
        CHECK(prims_direct_wait_all(p, &slots));
        for (int q = 0; q < n; q++)
            memcpy(out + ((size_t)q * a->count + off) * elem, (const char *)slots[q] + (size_t)rank * piece, piece);
    }
    return CHORUS_SUCCESS;
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t alltoall_direct_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    return (algo_cost_t){ALGO_LINK_ARENA, algo_pieces(n, s->slot), (p - 1.0) / p * n, n + n / p, 0};
}
