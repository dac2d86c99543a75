/*
 * Failures as users meet them, one rank of a real communicator under chorusrun:
 *   kill V   rank V SIGKILLs itself in the middle of a stream of large AllReduces; every survivor must get
 *            CHORUS_ERR_REMOTE naming rank V within 2 s, then destroy cleanly, leaking no descriptor,
 *            thread or shared-memory segment.
 *   stop V   rank V SIGSTOPs itself; with a short CHORUS_TIMEOUT every survivor gets CHORUS_ERR_TIMEOUT, and
 *            the ranks that wait on V directly name it.
 *   abort    rank 0 blocks in a receive that never completes; another thread aborts; the call must return
 *            CHORUS_ERR_ABORTED within 100 ms, a concurrent second abort is harmless, and every later call
 *            fails with CHORUS_ERR_ABORTED.
 *   init V LIMIT
 *            rank V is SIGKILLed inside chorus_comm_init, after the rendezvous (run_fault.sh preloads
 *            initkill.so into it, which picks the moment); every other rank's init must fail within LIMIT
 *            seconds with CHORUS_ERR_REMOTE or CHORUS_ERR_TIMEOUT and an error that names rank V, leaking
 *            no descriptor or thread (run_fault.sh checks /dev/shm once every rank has ended).
 * Each rank prints "rank R: ok" or what went wrong; the driver script checks every survivor's line.
 */
#include <chorus/chorus.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

static int rank, nranks;
static chorus_comm_t comm;

static int fail(const char *what)
{
    printf("rank %d: FAIL: %s\n", rank, what);
    fflush(stdout);
    return 1;
}

/* The victim records when it dies (CLOCK_MONOTONIC is shared by every process on the host). */
static void die_now(const char *stamp_file, int sig)
{
    FILE *f = fopen(stamp_file, "w");
    if (f) {
        fprintf(f, "%.6f\n", now_s());
        fclose(f);
    }
    raise(sig);
}

static double read_stamp(const char *stamp_file)
{
    double t = 0;
    FILE *f = fopen(stamp_file, "r");
    if (f) {
        if (fscanf(f, "%lf", &t) != 1) t = 0;
        fclose(f);
    }
    return t;
}

static int run_victim_mode(int victim, int sig, const char *stamp)
{
    size_t count = 4u << 20;
    float *buf = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
    srand((unsigned)(time(NULL) ^ (getpid() << 8)));
    int die_at = 2 + rand() % 4;
    for (int it = 0; it < 200; it++) {
        if (rank == victim && it == die_at) {
            usleep((useconds_t)(rand() % 20000)); /* land somewhere inside the next operation of the others */
            die_now(stamp, sig);
        }
        chorus_result_t r = chorus_allreduce(buf, buf, count, chorus_float32, chorus_sum, comm, NULL);
        if (r == CHORUS_SUCCESS) continue;
        double t_fail = now_s(), t_victim = read_stamp(stamp);
        const char *msg = chorus_comm_last_error(comm);
        char want[32];
        snprintf(want, sizeof(want), "rank %d ", victim);
        printf("rank %d: allreduce %d failed after %.3f s: %s: %s\n", rank, it, t_victim ? t_fail - t_victim : -1.0,
               chorus_result_name(r), msg);
        chorus_result_t expect = sig == SIGKILL ? CHORUS_ERR_REMOTE : CHORUS_ERR_TIMEOUT;
        if (r != expect) return fail("unexpected error code");
        if (sig == SIGKILL && !strstr(msg, want)) return fail("the error does not name the dead rank");
        if (sig == SIGSTOP && (rank == (victim + 1) % nranks) && !strstr(msg, want))
            return fail("the victim's ring neighbour does not name it");
        if (sig == SIGKILL && (!t_victim || t_fail - t_victim > 2.0)) return fail("took longer than 2 s");
        chorus_result_t again = chorus_barrier(comm, NULL);
        if (again != r) return fail("the error is not sticky");
        chorus_result_t async;
        if (chorus_comm_get_async_error(comm, &async) != CHORUS_SUCCESS || async != r)
            return fail("get_async_error does not report it");
        free(buf);
        return 0;
    }
    return fail("no operation failed although a rank died");
}

/* Whether msg names rank v: "rank 3 ..." or in a list of ranks ("ranks 1, 3-5"). */
static int names_rank(const char *msg, int v)
{
    for (const char *p = msg; (p = strstr(p, "rank")); p += 4) {
        if (p > msg && p[-1] != ' ' && p[-1] != '(') continue;
        const char *q = p + 4;
        int list = *q == 's';
        q += list;
        if (*q++ != ' ') continue;
        for (;;) {
            char *end;
            long a = strtol(q, &end, 10), b = a;
            if (end == q || *q < '0' || *q > '9') break;
            q = end;
            if (*q == '-' && q[1] >= '0' && q[1] <= '9') b = strtol(q + 1, (char **)&q, 10);
            if (v >= a && v <= b) return 1;
            if (!list || strncmp(q, ", ", 2) != 0) break;
            q += 2;
        }
    }
    return 0;
}

/* The ranks other than the victim: their init must fail, soon enough, naming the victim. */
static int run_init_mode(int victim, double limit_s, int fds0, int threads0)
{
    const char *env = getenv("CHORUS_RANK");
    rank = env ? atoi(env) : -1;
    double t0 = now_s();
    chorus_result_t r = chorus_comm_init_from_env(&comm);
    double took = now_s() - t0;
    if (r == CHORUS_SUCCESS) {
        chorus_comm_destroy(comm);
        return fail(rank == victim ? "the victim's init returned: its kill point (INITKILL) was never reached"
                                   : "init succeeded although a rank was killed during it");
    }
    const char *msg = chorus_comm_last_error(NULL);
    printf("rank %d: init failed after %.3f s: %s: %s\n", rank, took, chorus_result_name(r), msg);
    if (r != CHORUS_ERR_REMOTE && r != CHORUS_ERR_TIMEOUT) return fail("unexpected error code");
    if (!names_rank(msg, victim)) return fail("the error does not name the killed rank");
    if (took > limit_s) return fail("init took longer to fail than the connect timeout allows");
    if (count_entries("/proc/self/fd", "") != fds0) return fail("descriptors leaked");
    if (count_entries("/proc/self/task", "") != threads0) return fail("threads leaked");
    printf("rank %d: ok\n", rank);
    return 0;
}

static void *aborter(void *arg)
{
    double *t_abort = arg;
    usleep(300000);
    *t_abort = now_s();
    chorus_comm_abort(comm);
    return NULL;
}

static int run_abort_mode(void)
{
    if (rank != 0) {
        usleep(1500000); /* never sends: rank 0's receive can only end by abort */
        return 0;
    }
    double t_abort = 0;
    pthread_t th1, th2;
    pthread_create(&th1, NULL, aborter, &t_abort);
    pthread_create(&th2, NULL, aborter, &t_abort);
    float x[4];
    chorus_result_t r = chorus_recv(x, 4, chorus_float32, 1, comm, NULL);
    double t_ret = now_s();
    pthread_join(th1, NULL);
    pthread_join(th2, NULL);
    printf("rank 0: recv returned %s %.1f ms after abort: %s\n", chorus_result_name(r), (t_ret - t_abort) * 1e3,
           chorus_comm_last_error(comm));
    if (r != CHORUS_ERR_ABORTED) return fail("the blocked call did not return ABORTED");
    if (t_ret - t_abort > 0.1) return fail("the blocked call took more than 100 ms to return");
    if (chorus_barrier(comm, NULL) != CHORUS_ERR_ABORTED) return fail("a later call did not fail with ABORTED");
    return 0;
}

int main(int argc, char **argv)
{
    int init = argc == 4 && strcmp(argv[1], "init") == 0;
    if (argc < 2 || (!init && strcmp(argv[1], "abort") != 0 && argc != 4)) {
        fprintf(stderr, "usage: test_fault kill|stop VICTIM STAMPFILE | abort | init VICTIM LIMIT_SECONDS\n");
        return 2;
    }
    int fds0 = count_entries("/proc/self/fd", ""), threads0 = count_entries("/proc/self/task", "");
    if (init) return run_init_mode(atoi(argv[2]), atof(argv[3]), fds0, threads0);
    int shm0 = count_entries("/dev/shm", "chorus-");
    if (chorus_comm_init_from_env(&comm) != CHORUS_SUCCESS) {
        printf("init failed: %s\n", chorus_comm_last_error(NULL));
        return 1;
    }
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &nranks);
    int bad;
    if (strcmp(argv[1], "abort") == 0)
        bad = run_abort_mode();
    else
        bad = run_victim_mode(atoi(argv[2]), strcmp(argv[1], "kill") == 0 ? SIGKILL : SIGSTOP, argv[3]);
    if (chorus_comm_destroy(comm) != CHORUS_SUCCESS) bad |= fail("destroy failed");
    /* chorusrun's root thread lives in the launcher, not here: every descriptor, thread and segment is ours. */
    if (count_entries("/proc/self/fd", "") != fds0) bad |= fail("descriptors leaked");
    if (count_entries("/proc/self/task", "") != threads0) bad |= fail("threads leaked");
    if (count_entries("/dev/shm", "chorus-") > shm0) bad |= fail("shared-memory segments left in /dev/shm");
    if (!bad) printf("rank %d: ok\n", rank);
    return bad;
}
