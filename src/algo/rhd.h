/* Recursive halving and doubling between virtual ranks (plan_fold), shared by the algorithms built on
 * them: AllReduce rhd, ReduceScatter rhd, AllGather rd and Reduce rabenseifner. Virtual block v is the
 * elements [rhd_elem(l, v), rhd_elem(l, v + 1)) of a buffer. */
#ifndef CHORUS_RHD_H
#define CHORUS_RHD_H

#include "algo/plan.h"
#include "algo/prims.h"

typedef struct rhd_layout {
    plan_fold_t fold; /* this rank's place in the fold */
    int root;         /* the fold is taken relative to it */
    int nranks;
    size_t count;     /* by_rank: elements per real block; otherwise the elements split into pv blocks */
    int by_rank;      /* virtual block v is the real blocks of the ranks v stands for (plan_fold_rel) */
    size_t elem;
} rhd_layout_t;

rhd_layout_t rhd_layout(const prims_t *p, int root, size_t count, int by_rank, size_t elem);
/* The first element of virtual block v (v = pv: the end of the buffer). */
size_t rhd_elem(const rhd_layout_t *l, int v);
/* The rank behind vrank v. */
int rhd_rank(const rhd_layout_t *l, int v);

/* log2 pv halving steps: this vrank ends with the reduction over every rank of its own virtual block,
 * in work. The first step reads the input from `first`; later ones read work (first may be work). */
chorus_result_t rhd_reduce_scatter(prims_t *p, const rhd_layout_t *l, const char *first, char *work,
                                   const prims_reduce_t *red);
/* log2 pv doubling steps: holding its own virtual block in work, every vrank ends with all of them. */
chorus_result_t rhd_allgather(prims_t *p, const rhd_layout_t *l, char *work);

#endif
