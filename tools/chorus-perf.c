/* chorus-perf: the nccl-tests-style benchmark over Chorus's public API. Run it under chorusrun:
 *     chorusrun -n 4 chorus-perf allreduce -b 8 -e 256M -f 4
 * The flags, rows and checks live in perf_common.c (shared with bench/mpi-perf); this file only maps
 * each call onto the API. */
#include <stdio.h>
#include <string.h>

#include "chorus/chorus.h"
#include "core/comm_info.h"
#include "perf_common.h"
#include "util/params.h"

typedef struct chorus_ctx {
    chorus_comm_t comm;
    int rank;
    int nranks;
} chorus_ctx_t;

static void report(chorus_comm_t comm, const char *what, chorus_result_t res)
{
    fprintf(stderr, "chorus-perf: %s failed: %s: %s%s%s\n", what, chorus_result_name(res), chorus_strerror(res),
            comm && *chorus_comm_last_error(comm) ? ": " : "", comm ? chorus_comm_last_error(comm) : "");
}

/* Blocking send and recv on a NULL stream: if every rank sent first, large messages would deadlock. Even
 * ranks send first and odd ranks receive first; with an odd nranks the last (even) rank's send to rank 0
 * completes once rank 0 has finished its own send and turns to receive. */
static chorus_result_t sendrecv(const chorus_ctx_t *x, const perf_call_t *c)
{
    int next = (x->rank + 1) % x->nranks, prev = (x->rank - 1 + x->nranks) % x->nranks;
    chorus_result_t res;
    if (x->rank % 2 == 0) {
        res = chorus_send(c->sendbuf, c->count, c->dtype, next, x->comm, NULL);
        if (res == CHORUS_SUCCESS) res = chorus_recv(c->recvbuf, c->count, c->dtype, prev, x->comm, NULL);
    } else {
        res = chorus_recv(c->recvbuf, c->count, c->dtype, prev, x->comm, NULL);
        if (res == CHORUS_SUCCESS) res = chorus_send(c->sendbuf, c->count, c->dtype, next, x->comm, NULL);
    }
    return res;
}

static int chorus_run(void *ctx, const perf_call_t *c)
{
    const chorus_ctx_t *x = ctx;
    chorus_result_t res;
    switch (c->coll) {
    case PERF_ALLREDUCE:
        res = chorus_allreduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, x->comm, NULL);
        break;
    case PERF_ALLGATHER: res = chorus_allgather(c->sendbuf, c->recvbuf, c->count, c->dtype, x->comm, NULL); break;
    case PERF_REDUCE_SCATTER:
        res = chorus_reduce_scatter(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, x->comm, NULL);
        break;
    case PERF_BROADCAST:
        res = chorus_broadcast(c->sendbuf, c->recvbuf, c->count, c->dtype, c->root, x->comm, NULL);
        break;
    case PERF_REDUCE:
        res = chorus_reduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->root, x->comm, NULL);
        break;
    case PERF_ALLTOALL: res = chorus_alltoall(c->sendbuf, c->recvbuf, c->count, c->dtype, x->comm, NULL); break;
    case PERF_SENDRECV: res = sendrecv(x, c); break;
    case PERF_BARRIER: res = chorus_barrier(x->comm, NULL); break;
    default: res = CHORUS_ERR_INVALID_ARGUMENT; break;
    }
    if (res == CHORUS_SUCCESS) return 0;
    report(x->comm, perf_coll_name(c->coll), res);
    return -1;
}

static int chorus_max_double(void *ctx, double *value)
{
    const chorus_ctx_t *x = ctx;
    chorus_result_t res = chorus_allreduce(value, value, 1, chorus_float64, chorus_max, x->comm, NULL);
    if (res == CHORUS_SUCCESS) return 0;
    report(x->comm, "allreduce of the time", res);
    return -1;
}

static int chorus_sum_int64(void *ctx, int64_t *value)
{
    const chorus_ctx_t *x = ctx;
    chorus_result_t res = chorus_allreduce(value, value, 1, chorus_int64, chorus_sum, x->comm, NULL);
    if (res == CHORUS_SUCCESS) return 0;
    report(x->comm, "allreduce of the error count", res);
    return -1;
}

static int print_params(void)
{
    chorus_params_t params;
    char err[256] = "";
    chorus_result_t res = params_load(&params, err, sizeof(err));
    if (res != CHORUS_SUCCESS) {
        fprintf(stderr, "chorus-perf: %s\n", *err ? err : chorus_strerror(res));
        return 1;
    }
    params_dump(&params, stdout);
    params_free(&params);
    return 0;
}

static const char extra_usage[] = "       chorus-perf --params      print every CHORUS_* knob and its value\n"
                                  "       chorus-perf --params-md   print docs/env.md (the knob table)\n";

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--params") == 0) return print_params();
    if (argc == 2 && strcmp(argv[1], "--params-md") == 0) {
        params_markdown(stdout);
        return 0;
    }
    perf_opts_t opts;
    int rc = perf_parse_args(argc, argv, extra_usage, &opts);
    if (rc != 0) return rc > 0 ? 0 : 2;

    chorus_ctx_t x;
    chorus_result_t res = chorus_comm_init_from_env(&x.comm);
    if (res != CHORUS_SUCCESS) {
        report(NULL, "chorus_comm_init_from_env (run under chorusrun)", res);
        return 1;
    }
    chorus_comm_rank(x.comm, &x.rank);
    chorus_comm_size(x.comm, &x.nranks);
    char layout[128], description[192];
    comm_describe(x.comm, layout, sizeof(layout));
    int version = chorus_version();
    snprintf(description, sizeof(description), "%s, Chorus %d.%d.%d", layout, version / 10000, version / 100 % 100,
             version % 100);
    perf_backend_t be = {
        .rank = x.rank,
        .nranks = x.nranks,
        .description = description,
        .ctx = &x,
        .run = chorus_run,
        .allreduce_max_double = chorus_max_double,
        .allreduce_sum_int64 = chorus_sum_int64,
    };
    rc = perf_main(&opts, &be);
    res = chorus_comm_destroy(x.comm);
    if (res != CHORUS_SUCCESS) {
        report(NULL, "chorus_comm_destroy", res);
        rc = 1;
    }
    return rc;
}
