/* Compute/communication overlap with a stream, as data-parallel training does it: the gradients come out
 * bucket by bucket, and each bucket's AllReduce runs while the next bucket is computed.
 *
 *   serial      compute a bucket, then AllReduce it (no stream), bucket after bucket;
 *   overlapped  compute a bucket, queue its AllReduce on a stream, compute the next; synchronize at the end.
 *
 * The compute is a fixed amount of work (calibrated once to take about as long as one bucket's AllReduce
 * alone, where overlap has the most to hide), so that a slower compute shows as a longer step. Every
 * result is checked. Run with: chorusrun -n 2 ./overlap [BUCKETS] [BUCKET_BYTES] [STEPS]
 * Overlap pays where the communication waits on something other than this host's cores (a network link,
 * a peer); where it is the cores' own copying, compute and copies share them. */
#include <chorus/chorus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK_CHORUS(call, detail)                                                                                     \
    do {                                                                                                               \
        chorus_result_t r_ = (call);                                                                                   \
        if (r_ != CHORUS_SUCCESS) {                                                                                    \
            fprintf(stderr, "%s failed: %s: %s\n", #call, chorus_strerror(r_), detail);                                \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The "backward pass" of one bucket: `work` rounds of arithmetic over a small array that stays in cache,
 * then the gradient, rank + 1 in every element (so every sum is exact). */
static float scratch[4096];
static void spin(long work)
{
    for (long w = 0; w < work; w++)
        for (size_t i = 0; i < sizeof(scratch) / sizeof(scratch[0]); i++) scratch[i] = scratch[i] * 0.999f + 0.5f;
}

static void compute_bucket(float *grad, size_t count, long work, int rank)
{
    spin(work);
    for (size_t i = 0; i < count; i++) grad[i] = (float)(rank + 1);
}

/* Microseconds per round of spin: the best of 5 runs of at least 2 ms (ranks that outnumber the cores
 * are descheduled now and then; the best run is the undisturbed one). */
static double round_us(void)
{
    long work = 1;
    for (;;) {
        double best = 1e30;
        for (int k = 0; k < 5; k++) {
            double t0 = now_s();
            spin(work);
            double t = (now_s() - t0) * 1e6;
            best = t < best ? t : best;
        }
        if (best > 2000) return best / (double)work;
        work *= 2;
    }
}

/* The slowest rank's time, so that every rank reports the same. */
static double slowest(double t, chorus_comm_t comm)
{
    CHECK_CHORUS(chorus_allreduce(&t, &t, 1, chorus_float64, chorus_max, comm, NULL), chorus_comm_last_error(comm));
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int buckets = argc > 1 ? atoi(argv[1]) : 8, steps = argc > 3 ? atoi(argv[3]) : 9;
    size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : 4u << 20, count = bytes / sizeof(float);
    if (buckets < 1 || count < 1 || steps < 1) {
        fprintf(stderr, "usage: overlap [BUCKETS] [BUCKET_BYTES] [STEPS]\n");
        return 2;
    }
    chorus_comm_t comm = NULL;
    chorus_stream_t stream = NULL;
    CHECK_CHORUS(chorus_comm_init_from_env(&comm), chorus_comm_last_error(NULL));
    CHECK_CHORUS(chorus_stream_create(&stream), chorus_comm_last_error(NULL));
    int rank, nranks;
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &nranks);
    float *grads = malloc((size_t)buckets * count * sizeof(float));
    if (!grads) return 1;
    memset(grads, 0, (size_t)buckets * count * sizeof(float));

    /* One bucket's AllReduce alone (the second pass: the first touches the pages), then as much work as
     * takes that long (rank 0's calibration, shared). */
    double t0 = 0;
    for (int pass = 0; pass < 2; pass++) {
        t0 = now_s();
        for (int b = 0; b < buckets; b++)
            CHECK_CHORUS(
                chorus_allreduce(grads + b * count, grads + b * count, count, chorus_float32, chorus_sum, comm, NULL),
                chorus_comm_last_error(comm));
    }
    double comm_us = slowest(now_s() - t0, comm) / buckets * 1e6;
    /* The bucket's compute: writing the gradient, and as many rounds of spin as make up the rest. */
    t0 = now_s();
    compute_bucket(grads, count, 0, rank);
    double write_us = (now_s() - t0) * 1e6;
    double work_d = (comm_us - write_us) / round_us();
    CHECK_CHORUS(chorus_broadcast(&work_d, &work_d, 1, chorus_float64, 0, comm, NULL), chorus_comm_last_error(comm));
    long work = work_d < 1 ? 1 : (long)work_d;
    t0 = now_s();
    compute_bucket(grads, count, work, rank);
    double compute_us = slowest(now_s() - t0, comm) * 1e6;

    double times[2][64];
    size_t wrong = 0;
    const float want = (float)nranks * (float)(nranks + 1) / 2;
    if (steps > 64) steps = 64;
    for (int s = 0; s < steps; s++)
        for (int mode = 0; mode < 2; mode++) { /* serial and overlapped in turn, so that drift hits both */
            chorus_stream_t on = mode ? stream : NULL;
            t0 = now_s();
            for (int b = 0; b < buckets; b++) {
                float *g = grads + (size_t)b * count;
                compute_bucket(g, count, work, rank);
                CHECK_CHORUS(chorus_allreduce(g, g, count, chorus_float32, chorus_sum, comm, on),
                             chorus_comm_last_error(comm));
            }
            if (on) CHECK_CHORUS(chorus_stream_synchronize(stream), chorus_stream_last_error(stream));
            times[mode][s] = slowest(now_s() - t0, comm);
            for (size_t i = 0; i < (size_t)buckets * count; i++) wrong += grads[i] != want;
        }
    for (int mode = 0; mode < 2; mode++) qsort(times[mode], (size_t)steps, sizeof(double), cmp_double);
    double serial = times[0][steps / 2], overlapped = times[1][steps / 2];
    if (rank == 0) {
        double lo = comm_us < compute_us ? comm_us : compute_us, hi = comm_us + compute_us - lo;
        printf("# overlap: %d ranks, %d buckets of %zu bytes; alone, one bucket's allreduce %.0f us and its compute "
               "%.0f us:\n# serial would take %.2f ms per step, fully overlapped %.2f\n",
               nranks, buckets, count * sizeof(float), comm_us, compute_us, buckets * (comm_us + compute_us) * 1e-3,
               (buckets * hi + lo) * 1e-3);
        printf("serial      %9.2f ms per step (median of %d)\n", serial * 1e3, steps);
        printf("overlapped  %9.2f ms per step: %.2fx the serial speed\n", overlapped * 1e3, serial / overlapped);
        printf("results %s\n", wrong ? "WRONG" : "correct");
    }
    free(grads);
    CHECK_CHORUS(chorus_stream_destroy(stream), "");
    CHECK_CHORUS(chorus_comm_destroy(comm), "");
    return wrong ? 1 : 0;
}
