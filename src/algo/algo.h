/*
 * The algorithm registry: every (collective, algorithm) pair with its restrictions, declared once in
 * registry.c. Callers see algorithms only through this table.
 */
#ifndef CHORUS_ALGO_H
#define CHORUS_ALGO_H

#include "algo/prims.h"

typedef enum {
    COLL_ALLREDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_ALLTOALL,
    COLL_BARRIER,
    COLL_COUNT
} coll_kind_t;

/* One collective call, after argument checks. count is in elements: the whole buffer for allreduce,
 * broadcast and reduce; per rank for allgather (sendcount), reduce_scatter (recvcount) and alltoall
 * (elements exchanged with each peer). */
typedef struct coll_args {
    coll_kind_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    chorus_datatype_t dtype;
    chorus_redop_t op;
    int root;
} coll_args_t;

typedef chorus_result_t (*algo_run_fn)(prims_t *p, const coll_args_t *a);

typedef struct algo_desc {
    coll_kind_t coll;
    const char *name;
    algo_run_fn run;
} algo_desc_t;

const char *coll_name(coll_kind_t coll);
/* The algorithm that serves this call. */
const algo_desc_t *algo_select(const coll_args_t *a, int nranks);

/* The prims_reduce_t for a call. */
static inline prims_reduce_t algo_reduction(const coll_args_t *a)
{
    prims_reduce_t r = {a->dtype, a->op, dtype_size(a->dtype)};
    return r;
}

/* Algorithms (one file each). */
chorus_result_t allreduce_ring(prims_t *p, const coll_args_t *a);
chorus_result_t allgather_ring(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_scatter_ring(prims_t *p, const coll_args_t *a);
chorus_result_t broadcast_chain(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_chain(prims_t *p, const coll_args_t *a);
chorus_result_t alltoall_pairwise(prims_t *p, const coll_args_t *a);
chorus_result_t barrier_dissemination(prims_t *p, const coll_args_t *a);

#endif
