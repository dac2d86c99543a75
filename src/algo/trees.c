#include "algo/trees.h"

#include <stdlib.h>

#include "algo/plan.h"

void trees_binomial(prims_tree_t *t, int *kids, int rank, int n, int root)
{
    int v = plan_mod(rank - root, n), parent = plan_binomial_parent(v);
    t->parent = parent < 0 ? -1 : plan_mod(parent + root, n);
    t->nchildren = plan_binomial_children(v, n, kids);
    for (int i = 0; i < t->nchildren; i++) kids[i] = plan_mod(kids[i] + root, n);
    t->children = kids;
}

void trees_dbt(prims_tree_t *t, int *kids, int rank, int n, int which)
{
    plan_dbt(rank, n, which, &t->parent, kids, &t->nchildren);
    t->children = kids;
}

prims_tree_t *trees_mesh(int rank, int n)
{
    prims_tree_t *t = calloc(1, (size_t)n * sizeof(*t) + (size_t)n * sizeof(int));
    if (!t) return NULL;
    int *kids = (int *)(t + n);
    for (int j = 0; j < n; j++) {
        t[j].parent = j == rank ? -1 : j;
        t[j].children = kids;
    }
    for (int r = 0; r < n; r++)
        if (r != rank) kids[t[rank].nchildren++] = r;
    return t;
}
