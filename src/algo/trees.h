/* The trees of plan.h as prims_trees() takes them, seen from this rank. The caller fills in src, dst and
 * bytes. */
#ifndef CHORUS_TREES_H
#define CHORUS_TREES_H

#include "algo/prims.h"

/* The binomial tree rooted at root (plan_binomial_*); kids: room for 31 ranks. */
void trees_binomial(prims_tree_t *t, int *kids, int rank, int n, int root);
/* Tree `which` (0 or 1) of the double binary tree (plan_dbt); kids: room for 2 ranks. */
void trees_dbt(prims_tree_t *t, int *kids, int rank, int n, int which);
/* The n stars of the mesh algorithms: tree j is rooted at rank j, with every other rank as its child, in
 * rank order. One allocation, to free(); NULL if out of memory. */
prims_tree_t *trees_mesh(int rank, int n);

#endif
