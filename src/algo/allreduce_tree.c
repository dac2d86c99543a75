/*
 * Pipelined binary-tree AllReduce: a reduce up the in-order binary tree of plan_btree (rank 0 is the
 * root) followed by a broadcast back down, both chunk by chunk in one pass, so that chunk i travels down
 * while chunk i+1 is still being reduced on its way up.
 *
 * Steps: 2 h + k - 1 chunk hops, h = ceil(log2 p) the tree's height, k the number of chunks. Bytes sent
 * per rank: n up (the root: none) and n down to each child (at most 2), so at most 3n (2 ranks: n, 3
 * ranks: 2n). Reduction per rank: n per child. Time ~ (2h + k - 1)(alpha + 3 n/(k beta)). Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/trees.h"

chorus_result_t allreduce_tree(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    int kids[2];
    prims_tree_t t;
    trees_dbt(&t, kids, prims_rank(p), prims_nranks(p), 0); /* tree 0 of the pair is plan_btree itself */
    t.src = a->sendbuf;
    t.dst = a->recvbuf;
    t.bytes = a->count * red.elem;
    return prims_trees(p, PRIMS_TREE_ALLREDUCE, &t, 1, &red);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_tree_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The busiest rank's links, each way: a parent and two children from 4 ranks on, 2 with 3 ranks (rank 2
     * has one child), 1 with 2 (the root and its one child); the two children only from 4 ranks on. */
    double h = algo_log2_ceil(p), k = algo_pieces(n, s->chunk), links = p >= 4 ? 3 : p - 1, kids = p >= 4 ? 2 : 1;
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = 2 * h + k - 1, .bytes = (2 * h + k - 1) * links * n / k,
                         .reduced = kids * n};
}
