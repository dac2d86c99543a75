/*
 * Mesh AllToAll: each rank sends every other rank its block and receives theirs, all 2 (p - 1) messages
 * in flight at once (one two-rank tree of prims_trees per direction and peer), so that no step waits on
 * the slowest pair of the step before, as pairwise's do, and a link between hosts never idles between
 * steps. The own block is copied locally. In place (sendbuf == recvbuf) the input is first copied to
 * scratch.
 *
 * Steps: 1 (p - 1 concurrent messages each way per rank). Bytes sent per rank: (p - 1)/p * n (n = p *
 * count elements). Copied: n/p, the own block (in place: n, the scratch copy). Restrictions: none.
 * Priced as pairwise (the same messages; a rank's link serialises them).
 */
#include <stdlib.h>

#include "algo/algo.h"
#include "util/util.h"

chorus_result_t alltoall_mesh(prims_t *p, const coll_args_t *a)
{
    int rank = prims_rank(p), n = prims_nranks(p);
    size_t block = a->count * dtype_size(a->dtype);
    const char *send;
    char *recv = a->recvbuf;
    CHECK(alltoall_source(p, a, &send));
    /* Per peer, a tree rooted here that sends it its block and one rooted there that brings its block
     * here: each of this rank's lanes (a peer and a direction) carries one tree's messages, so the two
     * sides of a lane agree on their order whatever order the trees are listed in. */
    prims_tree_t *t = calloc(2 * (size_t)n, sizeof(*t));
    int *peers = malloc(sizeof(int) * (size_t)n);
    chorus_result_t res = CHORUS_ERR_NO_MEMORY;
    if (t && peers) {
        int k = 0;
        for (int j = 0; j < n; j++) {
            if (j == rank) continue;
            peers[j] = j;
            t[k] = (prims_tree_t){.parent = -1, .nchildren = 1, .children = &peers[j],
                                  .src = send + (size_t)j * block, .bytes = block};
            t[k + 1] = (prims_tree_t){.parent = j, .dst = recv + (size_t)j * block, .bytes = block};
            k += 2;
        }
        res = prims_trees(p, PRIMS_TREE_BROADCAST, t, k, NULL);
    }
    free(t);
    free(peers);
    return res;
}
