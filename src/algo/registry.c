/* Every (collective, algorithm) pair, declared once. Selection is data: the first entry for a collective
 * serves it until the tuning layer chooses among several. */
#include "algo/algo.h"

#include <stddef.h>

static const algo_desc_t algo_table[] = {
    {COLL_ALLREDUCE, "ring", allreduce_ring},
    {COLL_ALLGATHER, "ring", allgather_ring},
    {COLL_REDUCE_SCATTER, "ring", reduce_scatter_ring},
    {COLL_BROADCAST, "chain", broadcast_chain},
    {COLL_REDUCE, "chain", reduce_chain},
    {COLL_ALLTOALL, "pairwise", alltoall_pairwise},
    {COLL_BARRIER, "dissemination", barrier_dissemination},
};

const char *coll_name(coll_kind_t coll)
{
    static const char *const names[COLL_COUNT] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                                  "reduce",    "alltoall",  "barrier"};
    return coll < COLL_COUNT ? names[coll] : "?";
}

const algo_desc_t *algo_select(const coll_args_t *a, int nranks)
{
    (void)nranks;
    for (size_t i = 0; i < sizeof(algo_table) / sizeof(algo_table[0]); i++)
        if (algo_table[i].coll == a->coll) return &algo_table[i];
    return NULL;
}
