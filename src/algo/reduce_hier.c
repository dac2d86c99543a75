/*
 * Hierarchical Reduce, for ranks on several hosts: a pipelined reduction chain (as reduce_chain) through
 * the ranks host by host, ending at the root: broadcast_hier's chain walked backwards, so it crosses
 * between hosts H - 1 times.
 *
 * Steps: p - 1 + k - 1 chunk hops (H - 1 of them between hosts). Bytes sent per rank: n (the root none).
 * Reduction work per rank: n. Priced as the flat chain (the model does not see where the hosts' ranks
 * sit). Restrictions: ranks on two hosts or more, some host with two ranks or more (ALGO_NEEDS_HOSTS).
 */
#include "algo/algo.h"
#include "algo/hier.h"
#include "util/util.h"

chorus_result_t reduce_hier(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    size_t bytes = a->count * red.elem;
    hier_t h;
    CHECK(hier_init(p, &h));
    int prev, next, n = h.nranks;
    hier_chain(&h, a->root, &next, &prev); /* backwards: from the far end to the root */
    hier_free(&h);
    void *dst = a->recvbuf;
    if (next >= 0 && prev >= 0) CHECK(prims_scratch(p, 1, bytes ? bytes : 1, &dst));
    CHECK(prims_chain_reduce(p, prev, next, a->sendbuf, dst, bytes, &red));
    if (next < 0) reduce_finish(a->recvbuf, a->count, a->dtype, a->op, n);
    return CHORUS_SUCCESS;
}
