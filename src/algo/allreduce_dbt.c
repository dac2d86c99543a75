/*
 * Double-binary-tree AllReduce: the buffer is cut in two halves, and each half is reduced up and
 * broadcast back down its own binary tree (plan_dbt), chunk by chunk, both trees at once. The second tree
 * is the first mirrored or shifted so that a rank that forwards in one tree is a leaf in the other: every
 * rank then sends about as much as in a single tree but carries half the data per tree, and the links a
 * single tree leaves idle (from its leaves) work for the other.
 *
 * Steps: 2 h + k/2 - 1 chunk hops, h = ceil(log2 p) the trees' height, k the number of chunks of n.
 * Bytes sent per rank: n/2 up in each tree where it is not the root, plus n/2 down per child; an inner
 * rank of one tree (2 children) and leaf of the other sends 2n. Reduction per rank: n/2 per child.
 * Restrictions: none.
 */
#include "algo/algo.h"
#include "algo/trees.h"

chorus_result_t allreduce_dbt(prims_t *p, const coll_args_t *a)
{
    prims_reduce_t red = algo_reduction(a);
    int kids[2][2];
    prims_tree_t t[2];
    for (int i = 0; i < 2; i++) {
        size_t off, cnt;
        prims_partition(a->count, 2, i, &off, &cnt);
        trees_dbt(&t[i], kids[i], prims_rank(p), prims_nranks(p), i);
        t[i].src = (const char *)a->sendbuf + off * red.elem;
        t[i].dst = (char *)a->recvbuf + off * red.elem;
        t[i].bytes = cnt * red.elem;
    }
    return prims_trees(p, PRIMS_TREE_ALLREDUCE, t, 2, &red);
}

/* The terms of the comment above, for the cost model (algo.h). */
algo_cost_t allreduce_dbt_cost(const algo_shape_t *s)
{
    int p = s->p;
    double n = s->n;
    /* The seed's analysis (two trees, each level moving n/2 per tree, in sequence), which does not credit
     * the pipelining: for large n the busiest rank's 2n bounds the real time. */
    double h = algo_log2_ceil(p);
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = 2 * h, .bytes = h * n, .reduced = n};
}
