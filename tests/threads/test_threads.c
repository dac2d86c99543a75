/*
 * P ranks as threads of one process, through the public API only: the shape ThreadSanitizer can watch
 * (make test-tsan), and a useful test on its own.
 *
 * Thread 0 gets the unique id; every thread initialises its rank. Each communicator then runs every
 * collective (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, Barrier) and Send/Recv
 * between neighbours, at counts from 0 to above 256 KiB (several chunks, several arena slots and ring
 * wraps), in place and not, checked bit-exactly against small integers whose sums are exact.
 *   comm A   the default path: shared memory between pairs and the host arena (direct algorithms);
 *   comm B   CHORUS_TRANSPORT=tcp, created while A is alive. Knobs are read at init, so thread 0 sets
 *            the variable while every other thread waits at a barrier, and none reads the environment
 *            while it changes.
 * Meanwhile another thread dumps rank 1's flight recorder (chorus_comm_dump) every few milliseconds.
 * Then, on each communicator, rank 0 blocks in a call no peer answers (B: a receive over TCP; A: a
 * barrier) while two other threads abort it at the same moment: the call must return
 * CHORUS_ERR_ABORTED, and so must every later call, at once (before the aborters are even joined); a
 * third abort afterwards is harmless; then every rank destroys both communicators.
 * alarm() bounds the whole run, so a hang fails.
 *
 * Usage: test_threads [NRANKS] [SECONDS]   (defaults: 4 ranks, 120 s)
 */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "ranks.h"

static atomic_int failures, checks;

/* Sizes per rank's block, in int32 elements: none, one, odd, a few KiB, just over 256 KiB (the default
 * chunk and arena slot), and 1.2 MiB (several chunks, more than a 512 KiB shared-memory ring). */
static const size_t counts[] = {0, 1, 1037, 4099, 65537, 300007};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct rank_ctx {
    int rank;
    chorus_comm_t comm;
    const char *path; /* "shm" or "tcp", for messages */
} rank_ctx_t;

static int check(const rank_ctx_t *c, int ok, const char *what, size_t count, const char *detail)
{
    atomic_fetch_add(&checks, 1);
    if (ok) return 1;
    if (atomic_fetch_add(&failures, 1) < 30)
        fprintf(stderr, "rank %d (%s): %s count %zu: %s\n", c->rank, c->path, what, count, detail);
    return 0;
}

static int call_ok(const rank_ctx_t *c, chorus_result_t r, const char *what, size_t count)
{
    char detail[1200];
    snprintf(detail, sizeof(detail), "%s: %s", chorus_result_name(r), chorus_comm_last_error(c->comm));
    return check(c, r == CHORUS_SUCCESS, what, count, detail);
}

/* Rank r's element i: small integers of both signs, so every sum over 16 ranks is exact. */
static int32_t value(int r, size_t i) { return (int32_t)((i * 7 + (size_t)r * 13) % 1001) - 500; }

static void compare(const rank_ctx_t *c, const char *what, size_t count, const int32_t *got, const int32_t *want,
                    size_t n)
{
    char detail[160];
    check(c, ranks_wrong(got, want, n, detail, sizeof(detail)) == 0, what, count, detail);
}

static int32_t *alloc_ints(size_t n) { return malloc((n ? n : 1) * sizeof(int32_t)); }

static void run_allreduce(const rank_ctx_t *c, size_t n, int inplace)
{
    int32_t *in = alloc_ints(n), *out = alloc_ints(n), *want = alloc_ints(n);
    for (size_t i = 0; i < n; i++) {
        in[i] = value(c->rank, i);
        want[i] = 0;
        for (int r = 0; r < nranks; r++) want[i] += value(r, i);
    }
    if (inplace) memcpy(out, in, n * sizeof(int32_t));
    const char *what = inplace ? "allreduce in place" : "allreduce";
    if (call_ok(c, chorus_allreduce(inplace ? out : in, out, n, chorus_int32, chorus_sum, c->comm, NULL), what, n))
        compare(c, what, n, out, want, n);
    /* max as well: a second op through the same algorithms' reduction kernels. */
    for (size_t i = 0; i < n; i++) {
        want[i] = value(0, i);
        for (int r = 1; r < nranks; r++) want[i] = value(r, i) > want[i] ? value(r, i) : want[i];
    }
    if (call_ok(c, chorus_allreduce(in, out, n, chorus_int32, chorus_max, c->comm, NULL), "allreduce max", n))
        compare(c, "allreduce max", n, out, want, n);
    free(in);
    free(out);
    free(want);
}

static void run_allgather(const rank_ctx_t *c, size_t n, int inplace)
{
    size_t p = (size_t)nranks;
    int32_t *in = alloc_ints(n), *out = alloc_ints(n * p), *want = alloc_ints(n * p);
    for (size_t i = 0; i < n; i++) in[i] = value(c->rank, i);
    for (size_t i = 0; i < n * p; i++) want[i] = value((int)(i / n), i % n);
    int32_t *send = in;
    if (inplace) {
        send = out + (size_t)c->rank * n;
        memcpy(send, in, n * sizeof(int32_t));
    }
    const char *what = inplace ? "allgather in place" : "allgather";
    if (call_ok(c, chorus_allgather(send, out, n, chorus_int32, c->comm, NULL), what, n))
        compare(c, what, n, out, want, n * p);
    free(in);
    free(out);
    free(want);
}

static void run_reduce_scatter(const rank_ctx_t *c, size_t n, int inplace)
{
    size_t p = (size_t)nranks, r = (size_t)c->rank;
    int32_t *in = alloc_ints(n * p), *out = alloc_ints(n), *want = alloc_ints(n);
    for (size_t i = 0; i < n * p; i++) in[i] = value(c->rank, i);
    for (size_t i = 0; i < n; i++) {
        want[i] = 0;
        for (int q = 0; q < nranks; q++) want[i] += value(q, r * n + i);
    }
    int32_t *recv = inplace ? in + r * n : out;
    const char *what = inplace ? "reduce_scatter in place" : "reduce_scatter";
    if (call_ok(c, chorus_reduce_scatter(in, recv, n, chorus_int32, chorus_sum, c->comm, NULL), what, n))
        compare(c, what, n, recv, want, n);
    free(in);
    free(out);
    free(want);
}

static void run_broadcast(const rank_ctx_t *c, size_t n, int root)
{
    int32_t *buf = alloc_ints(n), *want = alloc_ints(n);
    for (size_t i = 0; i < n; i++) {
        want[i] = value(root, i);
        buf[i] = c->rank == root ? want[i] : -7;
    }
    if (call_ok(c, chorus_broadcast(buf, buf, n, chorus_int32, root, c->comm, NULL), "broadcast", n))
        compare(c, "broadcast", n, buf, want, n);
    free(buf);
    free(want);
}

static void run_reduce(const rank_ctx_t *c, size_t n, int root)
{
    int32_t *in = alloc_ints(n), *out = alloc_ints(n), *want = alloc_ints(n);
    for (size_t i = 0; i < n; i++) {
        in[i] = value(c->rank, i);
        out[i] = -9; /* a non-root's recvbuf must stay as it is */
        want[i] = c->rank == root ? 0 : -9;
        for (int r = 0; r < nranks && c->rank == root; r++) want[i] += value(r, i);
    }
    if (call_ok(c, chorus_reduce(in, out, n, chorus_int32, chorus_sum, root, c->comm, NULL), "reduce", n))
        compare(c, "reduce", n, out, want, n);
    free(in);
    free(out);
    free(want);
}

static void run_alltoall(const rank_ctx_t *c, size_t n)
{
    size_t p = (size_t)nranks, r = (size_t)c->rank;
    int32_t *in = alloc_ints(n * p), *out = alloc_ints(n * p), *want = alloc_ints(n * p);
    /* Element k of the block from s to d is value(s, d * n + k): every (sender, receiver, k) differs. */
    for (size_t i = 0; i < n * p; i++) in[i] = value(c->rank, i);
    for (size_t i = 0; i < n * p; i++) want[i] = value((int)(i / n), r * n + i % n);
    if (call_ok(c, chorus_alltoall(in, out, n, chorus_int32, c->comm, NULL), "alltoall", n))
        compare(c, "alltoall", n, out, want, n * p);
    free(in);
    free(out);
    free(want);
}

/* Around a ring: each rank sends to its right and receives from its left. Even ranks send first, odd
 * ones receive first, so a large send (which needs its receiver) always finds one. */
static void run_sendrecv(const rank_ctx_t *c, size_t n)
{
    if (nranks < 2) return;
    int right = (c->rank + 1) % nranks, left = (c->rank + nranks - 1) % nranks;
    int32_t *out = alloc_ints(n), *in = alloc_ints(n), *want = alloc_ints(n);
    for (size_t i = 0; i < n; i++) {
        out[i] = value(c->rank, i + 3);
        want[i] = value(left, i + 3);
        in[i] = 0;
    }
    for (int turn = 0; turn < 2; turn++) {
        if ((turn == 0) == (c->rank % 2 == 0))
            call_ok(c, chorus_send(out, n, chorus_int32, right, c->comm, NULL), "send", n);
        else if (call_ok(c, chorus_recv(in, n, chorus_int32, left, c->comm, NULL), "recv", n))
            compare(c, "recv", n, in, want, n);
    }
    free(out);
    free(in);
    free(want);
}

static void exercise(const rank_ctx_t *c)
{
    for (size_t k = 0; k < NCOUNTS; k++) {
        size_t n = counts[k];
        int inplace = (int)(k & 1), root = (int)(k % (size_t)nranks);
        run_allreduce(c, n, inplace);
        run_allgather(c, n, !inplace);
        run_reduce_scatter(c, n, inplace);
        run_broadcast(c, n, root);
        run_reduce(c, n, (root + 1) % nranks);
        run_alltoall(c, n);
        run_sendrecv(c, n);
        call_ok(c, chorus_barrier(c->comm, NULL), "barrier", 0);
    }
}

/* ---- Flight recorder dumps from another thread, while operations run ---- */

typedef struct dumper {
    chorus_comm_t comm;
    atomic_int stop;
    int dumps, failed;
    pthread_t thread;
} dumper_t;

static void *dumper_main(void *arg)
{
    dumper_t *d = arg;
    while (!atomic_load(&d->stop)) {
        d->failed += chorus_comm_dump(d->comm, "/dev/null") != CHORUS_SUCCESS;
        d->dumps++;
        usleep(3000);
    }
    return NULL;
}

static void dumper_start(dumper_t *d, chorus_comm_t comm)
{
    d->comm = comm;
    atomic_init(&d->stop, 0);
    d->dumps = d->failed = 0;
    pthread_create(&d->thread, NULL, dumper_main, d);
}

static void dumper_stop(const rank_ctx_t *c, dumper_t *d)
{
    atomic_store(&d->stop, 1);
    pthread_join(d->thread, NULL);
    char detail[64];
    snprintf(detail, sizeof(detail), "%d of %d dumps failed", d->failed, d->dumps);
    check(c, d->failed == 0, "chorus_comm_dump while operations run", 0, detail);
}

/* ---- Abort ---- */

typedef struct aborter {
    chorus_comm_t comm;
    pthread_barrier_t *start; /* both aborters leave it together: a concurrent double abort */
    double at;
    chorus_result_t res;
} aborter_t;

static void *aborter_main(void *arg)
{
    aborter_t *a = arg;
    usleep(200000); /* long enough for rank 0 to be blocked in its call */
    pthread_barrier_wait(a->start);
    a->at = now_s();
    a->res = chorus_comm_abort(a->comm);
    return NULL;
}

/* Rank 0 blocks in a call no peer answers (the peers wait at a barrier meanwhile) and two threads abort
 * it at once. */
static void abort_while_blocked(const rank_ctx_t *c, int use_recv)
{
    const char *what = use_recv ? "abort of a blocked recv" : "abort of a blocked barrier";
    if (c->rank != 0) {
        pthread_barrier_wait(&all_ranks);
        return;
    }
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    aborter_t ab[2] = {{c->comm, &start, 0, CHORUS_ERR_INTERNAL}, {c->comm, &start, 0, CHORUS_ERR_INTERNAL}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, aborter_main, &ab[i]);
    int32_t x[4] = {0};
    chorus_result_t r = use_recv ? chorus_recv(x, 4, chorus_int32, 1, c->comm, NULL)
                                 : chorus_barrier(c->comm, NULL);
    double returned = now_s();
    char detail[1200];
    snprintf(detail, sizeof(detail), "returned %s: %s", chorus_result_name(r), chorus_comm_last_error(c->comm));
    check(c, r == CHORUS_ERR_ABORTED, what, 4, detail);
    /* At once, while the aborters may still be finishing: the error is sticky and described. */
    r = chorus_allreduce(x, x, 4, chorus_int32, chorus_sum, c->comm, NULL);
    snprintf(detail, sizeof(detail), "a later allreduce returned %s: %s", chorus_result_name(r),
             chorus_comm_last_error(c->comm));
    check(c, r == CHORUS_ERR_ABORTED && strstr(chorus_comm_last_error(c->comm), "abort"), what, 4, detail);
    chorus_result_t async = CHORUS_SUCCESS;
    check(c, chorus_comm_get_async_error(c->comm, &async) == CHORUS_SUCCESS && async == CHORUS_ERR_ABORTED, what, 4,
          "get_async_error does not report ABORTED");
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    check(c, ab[0].res == CHORUS_SUCCESS && ab[1].res == CHORUS_SUCCESS, what, 4, "an abort failed");
    double first = ab[0].at < ab[1].at ? ab[0].at : ab[1].at;
    snprintf(detail, sizeof(detail), "the blocked call returned %.3f s after the abort", returned - first);
    /* After the abort (the call was blocked, not refused at its start), and soon after: generously, for
     * sanitizers and shared cores. */
    check(c, returned >= first && returned - first < 5.0, what, 4, detail);
    check(c, chorus_comm_abort(c->comm) == CHORUS_SUCCESS, what, 4, "a third abort failed");
    check(c, chorus_barrier(c->comm, NULL) == CHORUS_ERR_ABORTED, what, 4, "a later barrier did not fail with ABORTED");
    pthread_barrier_wait(&all_ranks);
}

/* ---- Ranks ---- */

static void *rank_main(void *arg)
{
    int rank = (int)(intptr_t)arg;
    rank_ctx_t a = {rank, ranks_init(rank, NULL, 0), "shm"};
    dumper_t dumper; /* rank 1's communicators are dumped while they work (rank 0 has the aborts) */
    if (rank == 1) dumper_start(&dumper, a.comm);
    exercise(&a);
    if (rank == 1) dumper_stop(&a, &dumper);
    rank_ctx_t b = {rank, ranks_init(rank, "tcp", 0), "tcp"};
    if (rank == 1) dumper_start(&dumper, b.comm);
    exercise(&b);
    if (rank == 1) dumper_stop(&b, &dumper);
    /* Both alive: one more round on each, interleaved. */
    run_allreduce(&a, counts[NCOUNTS - 1], 0);
    run_allreduce(&b, counts[2], 1);
    run_alltoall(&a, counts[3]);
    abort_while_blocked(&b, 1);
    abort_while_blocked(&a, 0);
    check(&b, chorus_comm_destroy(b.comm) == CHORUS_SUCCESS, "destroy", 0, "failed");
    check(&a, chorus_comm_destroy(a.comm) == CHORUS_SUCCESS, "destroy", 0, "failed");
    return NULL;
}

int main(int argc, char **argv)
{
    double t0 = now_s();
    if (ranks_run(argc, argv, 4, rank_main)) return 2;
    int bad = atomic_load(&failures);
    printf("test_threads: %d ranks as threads, %.1f s: %d passed, %d failed\n", nranks, now_s() - t0,
           atomic_load(&checks) - bad, bad);
    return bad ? 1 : 0;
}
