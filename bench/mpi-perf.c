/* mpi-perf: chorus-perf's twin over MPI, for side-by-side runs (bench/compare). Same flags, rows and checks
 * through the shared driver; only the calls differ. Built once per installed MPI (mpi-perf-openmpi,
 * mpi-perf-mpich), each to be started by that MPI's own mpirun. MPI errors stay fatal (the default error
 * handler), which aborts the whole job instead of leaving the other ranks waiting in a collective. */
#include <ctype.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/reduce.h"
#include "perf_common.h"

typedef struct mpi_ctx {
    int rank;
    int nranks;
    void *scratch; /* see copy_reduce_in_place */
    size_t scratch_bytes;
} mpi_ctx_t;

/* MPICH 4.0.2 crashes in MPI_Reduce with MPI_IN_PLACE at a root other than 0 from about 4 KB up (any rank
 * count); there the root reduces from a copy of its buffer instead, so that row's in-place time includes
 * one memcpy. */
#ifdef MPICH_VERSION
static const int copy_reduce_in_place = 1;
#else
static const int copy_reduce_in_place = 0;
#endif

static MPI_Datatype mpi_dtype(chorus_datatype_t dt)
{
    switch (dt) {
    case chorus_int8: return MPI_INT8_T;
    case chorus_uint8: return MPI_UINT8_T;
    case chorus_int32: return MPI_INT32_T;
    case chorus_uint32: return MPI_UINT32_T;
    case chorus_int64: return MPI_INT64_T;
    case chorus_uint64: return MPI_UINT64_T;
    /* Only moved, never reduced (see mpi_unsupported): any 2-byte type carries the bits. */
    case chorus_float16:
    case chorus_bfloat16: return MPI_UINT16_T;
    case chorus_float32: return MPI_FLOAT;
    case chorus_float64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(chorus_redop_t op)
{
    switch (op) {
    case chorus_sum: return MPI_SUM;
    case chorus_prod: return MPI_PROD;
    case chorus_max: return MPI_MAX;
    case chorus_min: return MPI_MIN;
    default: return MPI_OP_NULL;
    }
}

static const char *mpi_unsupported(chorus_datatype_t dt, chorus_redop_t op, int has_op)
{
    if (!has_op) return NULL;
    if (dt == chorus_float16 || dt == chorus_bfloat16) return "MPI has no native half-precision reduction";
    if (op == chorus_avg) return "MPI has no avg";
#ifdef MPICH_VERSION
    /* Seen with MPICH 4.0.2: MPI_MAX of 100 and 200 in MPI_UINT8_T gives 100. */
    if (dt == chorus_uint8 && (op == chorus_max || op == chorus_min)) return "MPICH compares MPI_UINT8_T as signed";
#endif
    return NULL;
}

static int mpi_run(void *ctx, const perf_call_t *c)
{
    mpi_ctx_t *x = ctx;
    if (c->count > INT_MAX) {
        fprintf(stderr, "mpi-perf: %zu elements exceed MPI's int count\n", c->count);
        return -1;
    }
    int n = (int)c->count;
    MPI_Datatype dt = mpi_dtype(c->dtype);
    MPI_Op op = mpi_op(c->op);
    size_t block = c->count * dtype_size(c->dtype);
    const void *send = c->in_place ? MPI_IN_PLACE : c->sendbuf;
    switch (c->coll) {
    case PERF_ALLREDUCE: MPI_Allreduce(send, c->recvbuf, n, dt, op, MPI_COMM_WORLD); break;
    case PERF_ALLGATHER: MPI_Allgather(send, n, dt, c->recvbuf, n, dt, MPI_COMM_WORLD); break;
    case PERF_REDUCE_SCATTER:
        if (!c->in_place) {
            MPI_Reduce_scatter_block(c->sendbuf, c->recvbuf, n, dt, op, MPI_COMM_WORLD);
            break;
        }
        /* MPI leaves an in-place result at the start of the buffer; Chorus's layout has it in the
         * rank's own block. */
        MPI_Reduce_scatter_block(MPI_IN_PLACE, (void *)c->sendbuf, n, dt, op, MPI_COMM_WORLD);
        memmove(c->recvbuf, c->sendbuf, block);
        break;
    case PERF_BROADCAST:
        /* Out of place the root's recvbuf gets the data too, as in Chorus. */
        if (!c->in_place && x->rank == c->root) memcpy(c->recvbuf, c->sendbuf, block);
        MPI_Bcast(c->recvbuf, n, dt, c->root, MPI_COMM_WORLD);
        break;
    case PERF_REDUCE:
        if (x->rank != c->root) {
            MPI_Reduce(c->sendbuf, NULL, n, dt, op, c->root, MPI_COMM_WORLD);
        } else if (c->in_place && c->root != 0 && copy_reduce_in_place) {
            if (block > x->scratch_bytes) {
                free(x->scratch);
                x->scratch_bytes = 0;
                if (!(x->scratch = malloc(block))) {
                    fprintf(stderr, "mpi-perf: cannot allocate %zu bytes\n", block);
                    return -1;
                }
                x->scratch_bytes = block;
            }
            memcpy(x->scratch, c->recvbuf, block);
            MPI_Reduce(x->scratch, c->recvbuf, n, dt, op, c->root, MPI_COMM_WORLD);
        } else {
            MPI_Reduce(send, c->recvbuf, n, dt, op, c->root, MPI_COMM_WORLD);
        }
        break;
    case PERF_ALLTOALL: MPI_Alltoall(send, n, dt, c->recvbuf, n, dt, MPI_COMM_WORLD); break;
    case PERF_SENDRECV:
        MPI_Sendrecv(c->sendbuf, n, dt, (x->rank + 1) % x->nranks, 0, c->recvbuf, n, dt,
                     (x->rank - 1 + x->nranks) % x->nranks, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    case PERF_BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
    default: return -1;
    }
    return 0;
}

static int mpi_max_double(void *ctx, double *value)
{
    (void)ctx;
    MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return 0;
}

static int mpi_sum_int64(void *ctx, int64_t *value)
{
    (void)ctx;
    MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return 0;
}

/* Collapses each run of blanks into one space, in place: MPICH's version reads "MPICH Version:\t4.0.2". */
static void squeeze_blanks(char *s)
{
    char *out = s;
    for (const char *in = s; *in; in++) {
        int blank = isspace((unsigned char)*in);
        if (blank && (out == s || out[-1] == ' ')) continue;
        *out++ = blank ? ' ' : *in;
    }
    *out = 0;
}

/* "hosts 2, Open MPI v4.1.4": hosts are counted as shared-memory domains. */
static void mpi_describe(char *buf, size_t len)
{
    MPI_Comm local;
    int local_rank, leader, hosts;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    leader = local_rank == 0;
    MPI_Allreduce(&leader, &hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int version_len;
    MPI_Get_library_version(version, &version_len);
    version[strcspn(version, ",\n")] = 0;
    squeeze_blanks(version);
    snprintf(buf, len, "hosts %d, %s", hosts, version);
}

static int mpi_alloc(void *ctx, size_t bytes, void **ptr_p)
{
    (void)ctx;
    return MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, ptr_p) != MPI_SUCCESS;
}

static void mpi_free(void *ctx, void *ptr)
{
    (void)ctx;
    MPI_Free_mem(ptr);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    perf_opts_t opts;
    int rc = perf_parse_args(argc, argv, NULL, &opts);
    if (rc != 0) {
        MPI_Finalize();
        return rc > 0 ? 0 : 2;
    }
    mpi_ctx_t x = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &x.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x.nranks);
    char description[MPI_MAX_LIBRARY_VERSION_STRING + 32];
    mpi_describe(description, sizeof(description));
    perf_backend_t be = {
        .rank = x.rank,
        .nranks = x.nranks,
        .description = description,
        .ctx = &x,
        .unsupported = mpi_unsupported,
        .run = mpi_run,
        .allreduce_max_double = mpi_max_double,
        .allreduce_sum_int64 = mpi_sum_int64,
        .mem_alloc = mpi_alloc,
        .mem_free = mpi_free,
    };
    rc = perf_main(&opts, &be);
    free(x.scratch);
    MPI_Finalize();
    return rc;
}
