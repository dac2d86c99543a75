/* chorus-perf: the nccl-tests-style benchmark over Chorus's public API. Run it under chorusrun:
 *     chorusrun -n 4 chorus-perf allreduce -b 8 -e 256M -f 4 [-a rhd | -a all]
 * The flags, rows and checks live in perf_common.c (shared with bench/mpi-perf); this file maps each
 * call onto the API and applies -a through CHORUS_ALGO. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "chorus/chorus.h"
#include "core/comm_info.h"
#include "perf_common.h"
#include "util/params.h"

typedef struct chorus_ctx {
    chorus_comm_t comm;
    chorus_stream_t stream; /* -z 0: the calls are queued here; NULL: blocking */
    int rank;
    int nranks;
    int shared; /* -R 1: the buffers are chorus_mem_alloc's */
} chorus_ctx_t;

static void report(chorus_comm_t comm, const char *what, chorus_result_t res)
{
    const char *detail = chorus_comm_last_error(comm); /* NULL: why an init failed */
    fprintf(stderr, "chorus-perf: %s failed: %s: %s%s%s\n", what, chorus_result_name(res), chorus_strerror(res),
            *detail ? ": " : "", detail);
}

/* A send and a recv, run in order (blocking, or one after the other on the stream): if every rank sent
 * first, large messages would deadlock. Even ranks send first and odd ranks receive first; with an odd
 * nranks the last (even) rank's send to rank 0 completes once rank 0 has finished its own send and turns
 * to receive. */
static chorus_result_t sendrecv(const chorus_ctx_t *x, const perf_call_t *c)
{
    int next = (x->rank + 1) % x->nranks, prev = (x->rank - 1 + x->nranks) % x->nranks;
    chorus_result_t res;
    if (x->rank % 2 == 0) {
        res = chorus_send(c->sendbuf, c->count, c->dtype, next, x->comm, x->stream);
        if (res == CHORUS_SUCCESS) res = chorus_recv(c->recvbuf, c->count, c->dtype, prev, x->comm, x->stream);
    } else {
        res = chorus_recv(c->recvbuf, c->count, c->dtype, prev, x->comm, x->stream);
        if (res == CHORUS_SUCCESS) res = chorus_send(c->sendbuf, c->count, c->dtype, next, x->comm, x->stream);
    }
    return res;
}

static int chorus_run(void *ctx, const perf_call_t *c)
{
    const chorus_ctx_t *x = ctx;
    chorus_result_t res;
    switch (c->coll) {
    case PERF_ALLREDUCE:
        res = chorus_allreduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, x->comm, x->stream);
        break;
    case PERF_ALLGATHER: res = chorus_allgather(c->sendbuf, c->recvbuf, c->count, c->dtype, x->comm, x->stream); break;
    case PERF_REDUCE_SCATTER:
        res = chorus_reduce_scatter(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, x->comm, x->stream);
        break;
    case PERF_BROADCAST:
        res = chorus_broadcast(c->sendbuf, c->recvbuf, c->count, c->dtype, c->root, x->comm, x->stream);
        break;
    case PERF_REDUCE:
        res = chorus_reduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->root, x->comm, x->stream);
        break;
    case PERF_ALLTOALL: res = chorus_alltoall(c->sendbuf, c->recvbuf, c->count, c->dtype, x->comm, x->stream); break;
    case PERF_SENDRECV: res = sendrecv(x, c); break;
    case PERF_BARRIER: res = chorus_barrier(x->comm, x->stream); break;
    default: res = CHORUS_ERR_INVALID_ARGUMENT; break;
    }
    if (res == CHORUS_SUCCESS) return 0;
    report(x->comm, perf_coll_name(c->coll), res);
    return -1;
}

static int chorus_sync(void *ctx)
{
    const chorus_ctx_t *x = ctx;
    chorus_result_t res = chorus_stream_synchronize(x->stream);
    if (res == CHORUS_SUCCESS) return 0;
    fprintf(stderr, "chorus-perf: stream_synchronize failed: %s: %s\n", chorus_result_name(res),
            chorus_stream_last_error(x->stream));
    return -1;
}

/* The cost model's column: the collective as the library counts it (send/recv has no model). */
static const char *chorus_predict(void *ctx, const perf_call_t *c, double *us_p)
{
    static const int kinds[PERF_NUM_COLLS] = {
        [PERF_ALLREDUCE] = COLL_ALLREDUCE, [PERF_ALLGATHER] = COLL_ALLGATHER, [PERF_REDUCE_SCATTER] = COLL_REDUCE_SCATTER,
        [PERF_BROADCAST] = COLL_BROADCAST, [PERF_REDUCE] = COLL_REDUCE,       [PERF_ALLTOALL] = COLL_ALLTOALL,
        [PERF_SENDRECV] = -1,              [PERF_BARRIER] = COLL_BARRIER,
    };
    const chorus_ctx_t *x = ctx;
    double s = NAN;
    const char *algo =
        comm_model_predict(x->comm, kinds[c->coll], c->count, c->dtype, c->op, c->root, c->sendbuf == c->recvbuf,
                           x->shared, &s);
    *us_p = s * 1e6;
    return algo;
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

/* -a: the algorithms to run, one block each. */
static int algo_names(const perf_opts_t *o, const char **names, int max)
{
    if (strcmp(o->algo, "all") != 0) {
        names[0] = o->algo;
        return 1;
    }
    size_t n;
    const algo_desc_t *t = algo_registry(&n);
    int k = 0;
    for (size_t i = 0; i < n && k < max; i++)
        if (strcmp(coll_name(t[i].coll), perf_coll_name(o->coll)) == 0) names[k++] = t[i].name;
    return k;
}

/* NULL if the communicator can run the named algorithm of -a all, else what the algorithm needs (one it
 * cannot run would fall back to another, and its block would measure that one under the wrong name). */
static const char *algo_needs_here(const perf_opts_t *o, const char *name, chorus_comm_t comm)
{
    size_t n;
    const algo_desc_t *t = algo_registry(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(coll_name(t[i].coll), perf_coll_name(o->coll)) == 0 && strcmp(t[i].name, name) == 0)
            return algo_supported(&t[i], comm_algo_caps(comm)) ? NULL : algo_needs_text(&t[i]);
    return NULL;
}

/* CHORUS_ALGO is read when a communicator is made, so each algorithm gets its own. */
static void force_algo(perf_coll_t coll, const char *name)
{
    char value[256];
    snprintf(value, sizeof(value), "%s:%s", perf_coll_name(coll), name);
    setenv("CHORUS_ALGO", value, 1);
}

/* A new communicator over the same ranks, its unique id sent from rank 0 through the current one. */
static chorus_result_t comm_again(chorus_ctx_t *x)
{
    chorus_unique_id_t id;
    chorus_comm_t next;
    chorus_result_t res = x->rank == 0 ? chorus_get_unique_id(&id) : CHORUS_SUCCESS;
    if (res != CHORUS_SUCCESS) {
        report(NULL, "chorus_get_unique_id", res);
        return res;
    }
    res = chorus_broadcast(&id, &id, sizeof(id), chorus_uint8, 0, x->comm, NULL);
    if (res != CHORUS_SUCCESS) {
        report(x->comm, "broadcast of the unique id", res);
        return res;
    }
    res = chorus_comm_init_rank(&next, x->nranks, id, x->rank);
    if (res != CHORUS_SUCCESS) {
        report(NULL, "chorus_comm_init_rank", res);
        return res;
    }
    res = chorus_comm_destroy(x->comm);
    x->comm = next;
    if (res != CHORUS_SUCCESS) report(NULL, "chorus_comm_destroy", res);
    return res;
}

static int chorus_alloc(void *ctx, size_t bytes, void **ptr_p)
{
    (void)ctx;
    chorus_result_t res = chorus_mem_alloc(ptr_p, bytes);
    if (res != CHORUS_SUCCESS) fprintf(stderr, "chorus_mem_alloc: %s\n", chorus_comm_last_error(NULL));
    return res != CHORUS_SUCCESS;
}

static void chorus_free(void *ctx, void *ptr)
{
    (void)ctx;
    (void)chorus_mem_free(ptr);
}

static int run(const perf_opts_t *opts, chorus_ctx_t *x)
{
    char layout[128], description[192];
    comm_describe(x->comm, layout, sizeof(layout));
    int version = chorus_version();
    snprintf(description, sizeof(description), "%s, Chorus %d.%d.%d", layout, version / 10000, version / 100 % 100,
             version % 100);
    x->shared = opts->alloc;
    perf_backend_t be = {
        .rank = x->rank,
        .nranks = x->nranks,
        .description = description,
        .ctx = x,
        .run = chorus_run,
        .allreduce_max_double = chorus_max_double,
        .allreduce_sum_int64 = chorus_sum_int64,
        .predict = chorus_predict,
        .sync = chorus_sync,
        .mem_alloc = chorus_alloc,
        .mem_free = chorus_free,
    };
    return perf_main(opts, &be);
}

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
    const char *names[64] = {NULL};
    int nnames = opts.algo ? algo_names(&opts, names, 64) : 1;
    if (nnames == 0) {
        fprintf(stderr, "chorus-perf: %s has no algorithms to choose among\n", perf_coll_name(opts.coll));
        return 2;
    }
    if (names[0]) force_algo(opts.coll, names[0]);

    chorus_ctx_t x = {NULL};
    chorus_result_t res = opts.blocking ? CHORUS_SUCCESS : chorus_stream_create(&x.stream);
    if (res != CHORUS_SUCCESS) {
        report(NULL, "chorus_stream_create", res);
        return 1;
    }
    res = chorus_comm_init_from_env(&x.comm);
    if (res != CHORUS_SUCCESS) {
        report(NULL, "chorus_comm_init_from_env (run under chorusrun)", res);
        return 1;
    }
    chorus_comm_rank(x.comm, &x.rank);
    chorus_comm_size(x.comm, &x.nranks);
    for (int i = 0; rc == 0 && i < nnames; i++) {
        /* The communicator of another algorithm tells (the layout is the same); skipping before making
         * a new one keeps the next one's set-up broadcast off an algorithm this one cannot run. */
        const char *needs = names[i] && nnames > 1 ? algo_needs_here(&opts, names[i], x.comm) : NULL;
        if (needs) {
            if (x.rank == 0)
                printf("# %s algorithm %s: skipped, it needs %s\n#\n", perf_coll_name(opts.coll), names[i], needs);
            continue;
        }
        if (i > 0) {
            force_algo(opts.coll, names[i]);
            if (comm_again(&x) != CHORUS_SUCCESS) {
                rc = 1;
                break;
            }
        }
        if (names[i] && x.rank == 0) printf("# %s algorithm %s\n", perf_coll_name(opts.coll), names[i]);
        rc = run(&opts, &x);
    }
    res = chorus_comm_destroy(x.comm);
    if (res != CHORUS_SUCCESS) {
        report(NULL, "chorus_comm_destroy", res);
        rc = 1;
    }
    if (x.stream && chorus_stream_destroy(x.stream) != CHORUS_SUCCESS) rc = 1; /* its failures were reported */
    return rc;
}
