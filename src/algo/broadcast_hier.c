/*
 * Hierarchical Broadcast, for ranks on several hosts: a pipelined chain (as broadcast_chain) through the
 * ranks host by host: the root, the other ranks of its host, then every rank of each following host. It
 * crosses between hosts H - 1 times, so each host's link carries the message once each way; the flat
 * chain visits ranks in their order, and crosses at every hop where hosts' ranks are spread.
 *
 * Steps: p - 1 + k - 1 chunk hops (H - 1 of them between hosts). Bytes sent per rank: n (the tail none).
 * Priced as the flat chain: the model does not see where the hosts' ranks sit. Restrictions: ranks on
 * two hosts or more, some host with two ranks or more (ALGO_NEEDS_HOSTS).
 */
#include "algo/algo.h"
#include "algo/hier.h"
#include "util/util.h"

chorus_result_t broadcast_hier(prims_t *p, const coll_args_t *a)
{
    hier_t h;
    CHECK(hier_init(p, &h));
    int prev, next;
    hier_chain(&h, a->root, &prev, &next);
    hier_free(&h);
    return prims_chain_copy(p, prev, next, a->sendbuf, a->recvbuf, a->count * dtype_size(a->dtype));
}
