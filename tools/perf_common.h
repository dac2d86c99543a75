/* The benchmark driver shared by chorus-perf and bench/mpi-perf: nccl-tests flags and columns, inputs whose
 * reductions are exact in any order, bit-exact checks, bus bandwidth. A library plugs in through
 * perf_backend_t, so both programs measure and print exactly the same way. */
#ifndef CHORUS_PERF_COMMON_H
#define CHORUS_PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "chorus/chorus.h"

typedef enum perf_coll {
    PERF_ALLREDUCE,
    PERF_ALLGATHER,
    PERF_REDUCE_SCATTER,
    PERF_BROADCAST,
    PERF_REDUCE,
    PERF_ALLTOALL,
    PERF_SENDRECV,
    PERF_BARRIER,
    PERF_NUM_COLLS
} perf_coll_t;

typedef struct perf_opts {
    perf_coll_t coll;
    int64_t min_bytes;
    int64_t max_bytes;
    int factor;
    int iters;
    int warmup;
    int check;
    int root;
    int ndtypes;
    chorus_datatype_t dtypes[chorus_num_datatypes];
    int nops;
    chorus_redop_t ops[chorus_num_ops];
    const char *algo; /* -a: the algorithm to force, "all", or NULL; the backend applies it */
    int offset;       /* -O: bytes past a page boundary where both buffers start */
    int alloc;        /* -R: 1, buffers from the backend's mem_alloc */
    int blocking;     /* -z: 1, each call completes before it returns; 0, calls are queued (a stream) and
                       * waited for after the timed loop, as nccl-tests does by default */
} perf_opts_t;

/* One call as the Chorus API spells it: count is per rank for allgather (sendcount), reduce_scatter
 * (recvcount) and alltoall (count per peer); in place follows the API's layouts (perf_common.c). */
typedef struct perf_call {
    perf_coll_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    chorus_datatype_t dtype;
    chorus_redop_t op;
    int root;
    int in_place; /* Chorus sees it in the pointers; MPI needs MPI_IN_PLACE */
} perf_call_t;

typedef struct perf_backend {
    int rank;
    int nranks;
    /* For the header, e.g. "hosts 1, transport tcp, Chorus 0.1.0". */
    const char *description;
    void *ctx;
    /* Why the backend cannot run this dtype (with this op when has_op), or NULL if it can; a NULL
     * function runs everything. */
    const char *(*unsupported)(chorus_datatype_t dtype, chorus_redop_t op, int has_op);
    /* Each returns 0 on success; on failure it has already printed why. */
    int (*run)(void *ctx, const perf_call_t *call);
    int (*allreduce_max_double)(void *ctx, double *value);
    /* Optional: the algorithm the call runs and the model's predicted time in microseconds (NaN: none),
     * printed beside the measured time. */
    const char *(*predict)(void *ctx, const perf_call_t *call, double *us_p);
    int (*allreduce_sum_int64)(void *ctx, int64_t *value);
    /* With -z 0: wait for every call run has queued (0 on success; on failure it has printed why). A
     * backend without it runs blocking calls only. */
    int (*sync)(void *ctx);
    /* Optional, for -R 1: the library's allocator for communication memory (0 on success). */
    int (*mem_alloc)(void *ctx, size_t bytes, void **ptr_p);
    void (*mem_free)(void *ctx, void *ptr);
} perf_backend_t;

/* Parses "COLLECTIVE [flags]". Returns 0 to run, 1 if help was printed, -1 on a usage error (printed).
 * extra_usage, if not NULL, is appended to the usage text (the program's own options). */
int perf_parse_args(int argc, char **argv, const char *extra_usage, perf_opts_t *opts);

/* Runs every size x dtype x op of opts; rank 0 prints. Returns the exit status: 0 if every call succeeded
 * and every checked value was right. */
int perf_main(const perf_opts_t *opts, const perf_backend_t *backend);

/* The name the collective is spelled with on the command line. */
const char *perf_coll_name(perf_coll_t coll);

#endif
