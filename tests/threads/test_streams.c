/*
 * Streams, with P ranks as threads of one process (public API only, so ThreadSanitizer watches the stream
 * threads, the callers and the communicators' turns together: make test-tsan).
 *
 * On a shared-memory communicator and on a TCP one:
 *   queued     every collective, a half-precision AllReduce and Send/Recv queued on one stream, checked
 *              bit-exactly after one synchronize;
 *   order      an in-place AllReduce queued on one stream, an AllGather of its output on another and an
 *              AllReduce without a stream run in the order they were issued (any other order gives other
 *              values, and under TSan a race);
 *   async      rank 0's queued AllReduce is still in progress while the other ranks have not called theirs
 *              (they wait on rank 0 at a barrier of the test's own), and completes once they do.
 * Then: bad arguments on a queued call fail it at once with the detail on the caller's thread; a queued
 * receive nobody answers fails with TIMEOUT at synchronize, named in chorus_stream_last_error, and the
 * barrier queued after it still runs and fails at once; an abort ends queued operations; destroying a
 * stream or a communicator waits for the operations queued on it. alarm() bounds the run.
 *
 * Usage: test_streams [NRANKS] [SECONDS]   (defaults: 3 ranks, 120 s)
 */
#include <stdatomic.h>
#include <string.h>

#include "ranks.h"

static atomic_int failures, checks;

static int check(int rank, const char *path, int ok, const char *what, const char *detail)
{
    atomic_fetch_add(&checks, 1);
    if (ok) return 1;
    if (atomic_fetch_add(&failures, 1) < 30) fprintf(stderr, "rank %d (%s): %s: %s\n", rank, path, what, detail);
    return 0;
}

typedef struct rank_ctx {
    int rank;
    chorus_comm_t comm;
    const char *path;
} rank_ctx_t;

static int expect(const rank_ctx_t *c, chorus_result_t got, chorus_result_t want, const char *what, const char *detail)
{
    char text[1400];
    snprintf(text, sizeof(text), "returned %s, expected %s: %s", chorus_result_name(got), chorus_result_name(want),
             detail);
    return check(c->rank, c->path, got == want, what, text);
}

/* The call first, then its detail (a detail read before a call queued it could be overwritten meanwhile). */
#define EXPECT_CALL(c, call, want, what)                                                                               \
    ({                                                                                                                 \
        chorus_result_t r_ = (call);                                                                                   \
        expect(c, r_, want, what, chorus_comm_last_error((c)->comm));                                                  \
    })
#define EXPECT_STREAM(c, s, call, want, what)                                                                          \
    ({                                                                                                                 \
        chorus_result_t r_ = (call);                                                                                   \
        expect(c, r_, want, what, chorus_stream_last_error(s));                                                        \
    })

/* Small integers of both signs: every sum over the ranks is exact, also in float16. */
static int32_t value(int r, size_t i) { return (int32_t)((i * 7 + (size_t)r * 13) % 61) - 30; }

static void compare(const rank_ctx_t *c, const char *what, const int32_t *got, const int32_t *want, size_t n)
{
    char detail[160];
    check(c->rank, c->path, ranks_wrong(got, want, n, detail, sizeof(detail)) == 0, what, detail);
}

static chorus_stream_t new_stream(const rank_ctx_t *c)
{
    chorus_stream_t s = NULL;
    if (!check(c->rank, c->path, chorus_stream_create(&s) == CHORUS_SUCCESS, "stream_create",
               chorus_comm_last_error(NULL)))
        exit(1);
    return s;
}

/* ---- Every operation queued on one stream ---- */

typedef struct bufs {
    size_t n; /* elements per rank's block */
    int32_t *in, *ar, *ag, *rs, *bc, *rd, *a2a, *p2p;
    uint16_t *half;
} bufs_t;

static void queued(const rank_ctx_t *c, chorus_stream_t s, size_t n)
{
    size_t p = (size_t)nranks;
    int right = (c->rank + 1) % nranks, left = (c->rank + nranks - 1) % nranks;
    bufs_t b = {.n = n};
    b.in = malloc(n * p * sizeof(int32_t));
    int32_t **outs[] = {&b.ar, &b.ag, &b.rs, &b.bc, &b.rd, &b.a2a, &b.p2p};
    for (size_t k = 0; k < sizeof(outs) / sizeof(outs[0]); k++) *outs[k] = calloc(n * p, sizeof(int32_t));
    b.half = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n * p; i++) b.in[i] = value(c->rank, i);
    for (size_t i = 0; i < n; i++) { /* float16 of small integers: sign, exponent and mantissa by hand */
        int32_t v = value(c->rank, i);
        uint16_t sign = v < 0 ? 0x8000 : 0, mag = (uint16_t)(v < 0 ? -v : v), h = 0;
        if (mag) {
            int e = 31 - __builtin_clz(mag);
            h = (uint16_t)((e + 15) << 10 | ((mag << (10 - e)) & 0x3ff));
        }
        b.half[i] = sign | h;
    }
    chorus_comm_t m = c->comm;
    chorus_result_t r[9];
    r[0] = chorus_allreduce(b.in, b.ar, n, chorus_int32, chorus_sum, m, s);
    r[1] = chorus_allgather(b.in, b.ag, n, chorus_int32, m, s);
    r[2] = chorus_reduce_scatter(b.in, b.rs, n, chorus_int32, chorus_sum, m, s);
    r[3] = chorus_broadcast(b.in, b.bc, n, chorus_int32, 1 % nranks, m, s);
    r[4] = chorus_reduce(b.in, b.rd, n, chorus_int32, chorus_max, 0, m, s);
    r[5] = chorus_alltoall(b.in, b.a2a, n, chorus_int32, m, s);
    r[6] = chorus_allreduce(b.half, b.half, n, chorus_float16, chorus_sum, m, s);
    if (c->rank % 2 == 0) { /* even ranks send first, odd ones receive first: no cycle of large sends */
        r[7] = chorus_send(b.in, n, chorus_int32, right, m, s);
        r[8] = chorus_recv(b.p2p, n, chorus_int32, left, m, s);
    } else {
        r[7] = chorus_recv(b.p2p, n, chorus_int32, left, m, s);
        r[8] = chorus_send(b.in, n, chorus_int32, right, m, s);
    }
    for (int k = 0; k < 9; k++) EXPECT_CALL(c, r[k], CHORUS_SUCCESS, "queueing");
    if (!EXPECT_STREAM(c, s, chorus_stream_synchronize(s), CHORUS_SUCCESS, "synchronize")) exit(1);

    int32_t *want = malloc(n * p * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        want[i] = 0;
        for (int q = 0; q < nranks; q++) want[i] += value(q, i);
    }
    compare(c, "queued allreduce", b.ar, want, n);
    size_t bad16 = 0;
    for (size_t i = 0; i < n; i++) {
        int h = b.half[i] & 0x7fff, e = (h >> 10) - 15;
        int32_t mag = h ? (int32_t)((0x400 | (h & 0x3ff)) >> (10 - e)) : 0;
        bad16 += (b.half[i] & 0x8000 ? -mag : mag) != want[i];
    }
    check(c->rank, c->path, bad16 == 0, "queued float16 allreduce", "wrong elements");
    for (size_t i = 0; i < n * p; i++) want[i] = value((int)(i / n), i % n);
    compare(c, "queued allgather", b.ag, want, n * p);
    for (size_t i = 0; i < n; i++) {
        want[i] = 0;
        for (int q = 0; q < nranks; q++) want[i] += value(q, (size_t)c->rank * n + i);
    }
    compare(c, "queued reduce_scatter", b.rs, want, n);
    for (size_t i = 0; i < n; i++) want[i] = value(1 % nranks, i);
    compare(c, "queued broadcast", b.bc, want, n);
    if (c->rank == 0) {
        for (size_t i = 0; i < n; i++) {
            want[i] = value(0, i);
            for (int q = 1; q < nranks; q++) want[i] = value(q, i) > want[i] ? value(q, i) : want[i];
        }
        compare(c, "queued reduce", b.rd, want, n);
    }
    for (size_t i = 0; i < n * p; i++) want[i] = value((int)(i / n), (size_t)c->rank * n + i % n);
    compare(c, "queued alltoall", b.a2a, want, n * p);
    for (size_t i = 0; i < n; i++) want[i] = value(left, i);
    compare(c, "queued send/recv", b.p2p, want, n);
    free(want);
    free(b.in);
    free(b.half);
    for (size_t k = 0; k < sizeof(outs) / sizeof(outs[0]); k++) free(*outs[k]);
}

/* ---- Order of issue across streams and calls without one ---- */

static void order(const rank_ctx_t *c, chorus_stream_t s1, chorus_stream_t s2)
{
    enum { N = 4099 };
    int32_t *x = malloc(N * sizeof(int32_t)), *y = malloc((size_t)nranks * sizeof(int32_t));
    for (size_t i = 0; i < N; i++) x[i] = c->rank + 1;
    int32_t sum = nranks * (nranks + 1) / 2;
    EXPECT_CALL(c, chorus_allreduce(x, x, N, chorus_int32, chorus_sum, c->comm, s1), CHORUS_SUCCESS, "order: queue 1");
    EXPECT_CALL(c, chorus_allgather(x, y, 1, chorus_int32, c->comm, s2), CHORUS_SUCCESS, "order: queue 2");
    EXPECT_CALL(c, chorus_allreduce(x, x, N, chorus_int32, chorus_sum, c->comm, NULL), CHORUS_SUCCESS,
                "order: the call without a stream");
    /* The call without a stream ran last, so both queued ones are done: y may be read before synchronizing. */
    int32_t *want = malloc(N * sizeof(int32_t));
    for (int r = 0; r < nranks; r++) want[r] = sum;
    compare(c, "order: the allgather queued on a second stream saw the first stream's allreduce", y, want,
            (size_t)nranks);
    for (size_t i = 0; i < N; i++) want[i] = sum * nranks;
    compare(c, "order: the allreduce without a stream came after both", x, want, N);
    EXPECT_STREAM(c, s1, chorus_stream_synchronize(s1), CHORUS_SUCCESS, "order: synchronize 1");
    EXPECT_STREAM(c, s2, chorus_stream_synchronize(s2), CHORUS_SUCCESS, "order: synchronize 2");
    free(x);
    free(y);
    free(want);
}

/* ---- A queued call runs while its caller goes on ---- */

static void async(const rank_ctx_t *c, chorus_stream_t s)
{
    enum { N = 1000 };
    int32_t x[N], want[N];
    for (int i = 0; i < N; i++) {
        x[i] = value(c->rank, (size_t)i);
        want[i] = 0;
        for (int q = 0; q < nranks; q++) want[i] += value(q, (size_t)i);
    }
    if (c->rank == 0) {
        EXPECT_CALL(c, chorus_allreduce(x, x, N, chorus_int32, chorus_sum, c->comm, s), CHORUS_SUCCESS, "async: queue");
        usleep(20000);
        /* No peer has called its allreduce yet: they are all waiting at the barrier below. */
        expect(c, chorus_stream_query(s), CHORUS_IN_PROGRESS, "async: query before the peers call", "");
        pthread_barrier_wait(&all_ranks);
        EXPECT_STREAM(c, s, chorus_stream_synchronize(s), CHORUS_SUCCESS, "async: synchronize");
        expect(c, chorus_stream_query(s), CHORUS_SUCCESS, "async: query after synchronize", "");
    } else {
        pthread_barrier_wait(&all_ranks);
        EXPECT_CALL(c, chorus_allreduce(x, x, N, chorus_int32, chorus_sum, c->comm, NULL), CHORUS_SUCCESS,
                    "async: the peers' allreduce");
    }
    compare(c, "async: allreduce", x, want, N);
}

/* ---- Failures ---- */

static void bad_arguments(const rank_ctx_t *c, chorus_stream_t s)
{
    int32_t x[4] = {0};
    uint64_t zeros[8] = {0};
    expect(c, chorus_allreduce(NULL, x, 4, chorus_int32, chorus_sum, c->comm, s), CHORUS_ERR_INVALID_ARGUMENT,
           "a queued call with a NULL sendbuf", "");
    check(c->rank, c->path, strstr(chorus_comm_last_error(c->comm), "sendbuf") != NULL, "its detail names sendbuf",
          chorus_comm_last_error(c->comm));
    expect(c, chorus_barrier(c->comm, (chorus_stream_t)zeros), CHORUS_ERR_INVALID_ARGUMENT, "a bogus stream", "");
    check(c->rank, c->path, strstr(chorus_comm_last_error(c->comm), "stream") != NULL, "its detail names the stream",
          chorus_comm_last_error(c->comm));
    expect(c, chorus_stream_synchronize(NULL), CHORUS_ERR_INVALID_ARGUMENT, "synchronize(NULL)", "");
    check(c->rank, c->path, strstr(chorus_comm_last_error(NULL), "stream") != NULL, "its detail names the stream",
          chorus_comm_last_error(NULL));
    EXPECT_STREAM(c, s, chorus_stream_query(s), CHORUS_SUCCESS, "the stream after refused calls");
}

/* Rank 0 queues a receive from rank 1, which never sends, and a barrier after it, on a communicator with a
 * short timeout; the other ranks wait meanwhile, then everyone destroys it. */
static void timeout_queued(int rank, chorus_stream_t s)
{
    rank_ctx_t c = {rank, ranks_init(rank, NULL, 300), "shm, 300 ms timeout"};
    if (rank == 0) {
        int32_t x[4];
        expect(&c, chorus_recv(x, 4, chorus_int32, 1, c.comm, s), CHORUS_SUCCESS, "timeout: queue the recv", "");
        expect(&c, chorus_barrier(c.comm, s), CHORUS_SUCCESS, "timeout: queue a barrier after it", "");
        EXPECT_STREAM(&c, s, chorus_stream_synchronize(s), CHORUS_ERR_TIMEOUT, "timeout: synchronize");
        const char *e = chorus_stream_last_error(s);
        check(rank, c.path, strstr(e, "recv queued on rank 0") && strstr(e, "rank 1"),
              "timeout: the detail names the call and the peer", e);
        EXPECT_STREAM(&c, s, chorus_stream_synchronize(s), CHORUS_SUCCESS,
                      "timeout: a second synchronize (reported once)");
        chorus_result_t async = CHORUS_SUCCESS;
        chorus_comm_get_async_error(c.comm, &async);
        expect(&c, async, CHORUS_ERR_TIMEOUT, "timeout: the communicator's sticky error", "");
    }
    pthread_barrier_wait(&all_ranks);
    chorus_comm_destroy(c.comm);
}

/* Rank 0 queues barriers no peer joins, then aborts the communicator. */
static void abort_queued(int rank, chorus_stream_t s)
{
    rank_ctx_t c = {rank, ranks_init(rank, NULL, 0), "shm"};
    if (rank == 0) {
        for (int i = 0; i < 3; i++) expect(&c, chorus_barrier(c.comm, s), CHORUS_SUCCESS, "abort: queue a barrier", "");
        usleep(50000);
        expect(&c, chorus_stream_query(s), CHORUS_IN_PROGRESS, "abort: query before the abort", "");
        expect(&c, chorus_comm_abort(c.comm), CHORUS_SUCCESS, "abort", "");
        EXPECT_STREAM(&c, s, chorus_stream_synchronize(s), CHORUS_ERR_ABORTED, "abort: synchronize");
    }
    pthread_barrier_wait(&all_ranks);
    chorus_comm_destroy(c.comm);
}

/* Destroying a stream, then a communicator, with an operation still queued on each. */
static void destroy_pending(const rank_ctx_t *c, chorus_stream_t s)
{
    enum { N = 70000 };
    int32_t *x = malloc(N * sizeof(int32_t)), *y = malloc(N * sizeof(int32_t)), *want = malloc(N * sizeof(int32_t));
    for (size_t i = 0; i < N; i++) {
        x[i] = y[i] = value(c->rank, i);
        want[i] = 0;
        for (int q = 0; q < nranks; q++) want[i] += value(q, i);
    }
    chorus_stream_t t = new_stream(c);
    expect(c, chorus_allreduce(x, x, N, chorus_int32, chorus_sum, c->comm, t), CHORUS_SUCCESS, "destroy: queue", "");
    expect(c, chorus_stream_destroy(t), CHORUS_SUCCESS, "destroy a stream with a call queued", "");
    compare(c, "destroy: the stream's call ran", x, want, N);
    expect(c, chorus_allreduce(y, y, N, chorus_int32, chorus_sum, c->comm, s), CHORUS_SUCCESS, "destroy: queue", "");
    expect(c, chorus_comm_destroy(c->comm), CHORUS_SUCCESS, "destroy a communicator with a call queued", "");
    EXPECT_STREAM(c, s, chorus_stream_synchronize(s), CHORUS_SUCCESS, "destroy: synchronize");
    compare(c, "destroy: the communicator's call ran", y, want, N);
    free(x);
    free(y);
    free(want);
}

static void exercise(const rank_ctx_t *c, chorus_stream_t s1, chorus_stream_t s2)
{
    static const size_t counts[] = {1, 1037, 65537, 300007};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) queued(c, s1, counts[k]);
    order(c, s1, s2);
    async(c, s2);
}

static void *rank_main(void *arg)
{
    int rank = (int)(intptr_t)arg;
    rank_ctx_t probe = {rank, NULL, "streams"};
    chorus_stream_t s1 = new_stream(&probe), s2 = new_stream(&probe);
    rank_ctx_t a = {rank, ranks_init(rank, NULL, 0), "shm"};
    exercise(&a, s1, s2);
    rank_ctx_t b = {rank, ranks_init(rank, "tcp", 0), "tcp"};
    exercise(&b, s1, s2);
    bad_arguments(&a, s1);
    timeout_queued(rank, s1);
    abort_queued(rank, s2);
    destroy_pending(&b, s1);
    destroy_pending(&a, s2);
    expect(&probe, chorus_stream_destroy(s1), CHORUS_SUCCESS, "stream_destroy", "");
    expect(&probe, chorus_stream_destroy(s2), CHORUS_SUCCESS, "stream_destroy", "");
    return NULL;
}

int main(int argc, char **argv)
{
    if (ranks_run(argc, argv, 3, rank_main)) return 2;
    int bad = atomic_load(&failures);
    printf("test_streams: %d ranks as threads: %d passed, %d failed\n", nranks, atomic_load(&checks) - bad, bad);
    return bad ? 1 : 0;
}
