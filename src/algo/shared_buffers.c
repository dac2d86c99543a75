/*
 * Buffers from chorus_mem_alloc (docs/algorithms.md, "Buffers from chorus_mem_alloc"): where every rank's
 * buffers lie in such memory, the single-copy algorithms read them out of mappings with plain copies and
 * beat the arena's algorithms, which copy everything twice, at every size from 64 KiB on 2 and 4 ranks.
 * Whether they do is each rank's own knowledge, and ranks must run the same algorithm, so from
 * ALGO_SHARED_MIN up, where selection chose another algorithm that the single-copy one could replace,
 * the ranks first agree in one phase (a barrier's latency: 0.3 us on 2 ranks, 2.6 on 4 here, against
 * calls of 30 us and more) and switch together only if every one says yes. A communicator of up to
 * ALGO_SHARED_SEEN_RANKS ranks on which they once all said yes agrees from ALGO_SHARED_SEEN_MIN up from
 * then on: its calls there take 6 to 30 us, and the switch saves more than the phase costs (on 8 ranks,
 * where the phase costs 7.5 us, it did not at 64 and 256 KiB); one that never uses such buffers never
 * pays for a phase on calls that short. Every rank sees the same answers, so every rank moves its
 * threshold at the same call.
 * The phase is also a barrier: without it a rank can start its next call in the arena's other slot while
 * its peers still read its last one, and with it 2 ranks' direct calls of 1 MiB took 1.2 to 6 times as
 * long on an AMD EPYC virtual machine (docs/algorithms.md). So until the ranks have once all said yes,
 * they ask only at some of the calls where they could switch (algo_shared_ask).
 */
#include "algo/algo.h"

#include "util/log.h"
#include "util/util.h"

/* Whether this rank's buffers that the single-copy algorithm of a's collective publishes (see its file)
 * lie in chorus_mem_alloc memory. */
static int shares_own_buffers(const coll_args_t *a, int rank, int nranks)
{
    size_t bytes = a->count * dtype_size(a->dtype);
    switch (a->coll) {
    case COLL_ALLREDUCE:
        return prims_direct_in_shared_memory(a->sendbuf, bytes) && prims_direct_in_shared_memory(a->recvbuf, bytes);
    case COLL_ALLGATHER:
    case COLL_REDUCE: return prims_direct_in_shared_memory(a->sendbuf, bytes);
    case COLL_BROADCAST: return rank != a->root || prims_direct_in_shared_memory(a->sendbuf, bytes);
    case COLL_REDUCE_SCATTER:
    case COLL_ALLTOALL: return prims_direct_in_shared_memory(a->sendbuf, bytes * (size_t)nranks);
    default: return 0;
    }
}

size_t algo_shared_min(int nranks, int seen)
{
    return seen && nranks <= ALGO_SHARED_SEEN_RANKS ? ALGO_SHARED_SEEN_MIN : ALGO_SHARED_MIN;
}

const algo_desc_t *algo_shared_twin(const coll_args_t *a, int nranks, const algo_caps_t *caps,
                                    const algo_config_t *cfg, const algo_desc_t *chosen, size_t min_bytes)
{
    /* An AllToAll in place stages its input in scratch first, and the peers read the scratch. */
    if (chosen->needs & ALGO_NEEDS_SINGLE_COPY || algo_call_bytes(a, nranks) < min_bytes ||
        (a->coll == COLL_ALLTOALL && a->sendbuf == a->recvbuf))
        return NULL;
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    for (size_t i = 0; i < count; i++)
        if (table[i].coll == a->coll && table[i].needs & ALGO_NEEDS_SINGLE_COPY && algo_config_allows(cfg, &table[i]) &&
            algo_supported(&table[i], caps))
            return &table[i];
    return NULL;
}

int algo_shared_ask(uint64_t call)
{
    return call < ALGO_SHARED_ASK_EVERY ? (call & (call - 1)) == 0 : call % ALGO_SHARED_ASK_EVERY == 0;
}

chorus_result_t algo_for_shared_buffers(prims_t *p, const coll_args_t *a, const algo_caps_t *caps,
                                        const algo_config_t *cfg, algo_shared_state_t *st, const algo_desc_t **algo_p)
{
    int nranks = prims_nranks(p);
    const algo_desc_t *twin =
        algo_shared_twin(a, nranks, caps, cfg, *algo_p, algo_shared_min(nranks, st->seen));
    if (!twin) return CHORUS_SUCCESS;
    if (!st->seen && !algo_shared_ask(st->eligible++)) return CHORUS_SUCCESS;
    int all;
    CHECK(prims_direct_agree(p, shares_own_buffers(a, prims_rank(p), nranks), &all));
    LOG_DEBUG(LOG_SUB_TUNING, "%s of %zu bytes: %s", coll_name(a->coll), algo_call_bytes(a, nranks),
              all ? "every rank's buffers from chorus_mem_alloc, single copy" : "not every rank's buffers from "
              "chorus_mem_alloc, as selected");
    if (all) {
        *algo_p = twin;
        st->seen = 1;
    }
    return CHORUS_SUCCESS;
}
