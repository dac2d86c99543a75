/*
 * The flight recorder, one rank of a real communicator under chorusrun (run_recorder.sh drives it and
 * checks chorus-trace's reading of the dumps):
 *   skip DIR     a few collectives, then every rank but 2 calls an AllReduce that rank 2 skips: rank 2
 *                goes on to a receive from rank 3, which never sends to it. With CHORUS_TIMEOUT=2s every
 *                rank times out, and each must find its own dump (reason=timeout) in DIR.
 *   diverge DIR K  rank 1 calls AllReduce #K with a different count; once the communicator has failed,
 *                every rank writes its dump into DIR with chorus_comm_dump().
 *   api DIR      eight operations of all kinds with CHORUS_RECORDER_SIZE=5: chorus_comm_dump() writes a
 *                header and the last five; SIGUSR1 (CHORUS_DUMP_ON_SIGNAL=1) writes the same dump into
 *                CHORUS_DUMP_DIR; destroy stops the helper thread and restores SIGUSR1's action. A dump to an
 *                unwritable path fails naming it, on this thread and on another, each seeing its own.
 * Each rank prints "rank R: ok" or what went wrong.
 */
#include <chorus/chorus.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COUNT 8

static int rank, nranks;
static chorus_comm_t comm;
static float buf[3 * COUNT];

static int fail(const char *what)
{
    printf("rank %d: FAIL: %s (%s)\n", rank, what, chorus_comm_last_error(comm));
    fflush(stdout);
    return 1;
}

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Lines of a dump, and whether the first is a header with the given reason and every other an operation. */
static int check_dump(const char *path, const char *reason, int *lines_p)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024], want[64];
    int n = 0, ok = 1;
    snprintf(want, sizeof(want), " reason=%s ", reason);
    while (fgets(line, sizeof(line), f)) {
        if (n == 0) ok &= strncmp(line, "chorus-dump ", 12) == 0 && strstr(line, want) != NULL;
        else ok &= strncmp(line, "op=", 3) == 0;
        n++;
    }
    fclose(f);
    *lines_p = n;
    return ok ? 0 : -1;
}

/* Where this rank's automatic dumps go (docs/recorder.md). */
static void auto_path(const char *dir, char *path, size_t len)
{
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(path, len, "%s/chorus-dump.%s.%d.rank%d.txt", dir, host, (int)getpid(), rank);
}

static chorus_result_t allreduce(size_t count)
{
    return chorus_allreduce(buf, buf, count, chorus_float32, chorus_sum, comm, NULL);
}

static int run_skip(const char *dir)
{
    if (nranks < 4) return fail("skip needs 4 ranks");
    for (int i = 0; i < 3; i++)
        if (allreduce(COUNT) != CHORUS_SUCCESS) return fail("a warm-up allreduce failed");
    if (chorus_broadcast(buf, buf, COUNT, chorus_float32, 1, comm, NULL) != CHORUS_SUCCESS)
        return fail("the broadcast failed");
    chorus_result_t r = rank == 2 ? chorus_recv(buf, COUNT, chorus_float32, 3, comm, NULL) : allreduce(COUNT);
    if (r != CHORUS_ERR_TIMEOUT) return fail("the stuck call did not time out");
    char path[512];
    int lines;
    auto_path(dir, path, sizeof(path));
    if (check_dump(path, "timeout", &lines) != 0) return fail("no timeout dump, or a malformed one");
    if (lines != 1 + 5) return fail("the dump does not hold every operation");
    return 0;
}

static int run_diverge(const char *dir, int k)
{
    chorus_result_t r = CHORUS_SUCCESS;
    for (int i = 0; i < k + 3 && r == CHORUS_SUCCESS; i++) r = allreduce(rank == 1 && i == k ? COUNT + 4 : COUNT);
    if (r == CHORUS_SUCCESS) return fail("the mismatched allreduce went unnoticed");
    char path[512];
    snprintf(path, sizeof(path), "%s/chorus-dump.api.rank%d.txt", dir, rank);
    if (chorus_comm_dump(comm, path) != CHORUS_SUCCESS) return fail("chorus_comm_dump failed");
    return 0;
}

/* On a thread of its own: a dump that fails, and the error text this thread then sees (arg). */
static void *dump_elsewhere(void *arg)
{
    if (chorus_comm_dump(comm, "/nonexistent/dir/other.txt") == CHORUS_ERR_SYSTEM)
        snprintf(arg, 256, "%s", chorus_comm_last_error(comm));
    return NULL;
}

static int run_api(const char *dir)
{
    int peer_to = (rank + 1) % nranks, peer_from = (rank + nranks - 1) % nranks;
    for (int i = 0; i < 3; i++)
        if (allreduce(COUNT) != CHORUS_SUCCESS) return fail("an allreduce failed");
    int bad = chorus_broadcast(buf, buf, COUNT, chorus_float32, 1, comm, NULL) != CHORUS_SUCCESS;
    bad |= chorus_allgather(buf, buf + COUNT, 1, chorus_float32, comm, NULL) != CHORUS_SUCCESS;
    bad |= chorus_barrier(comm, NULL) != CHORUS_SUCCESS;
    bad |= chorus_send(buf, 2, chorus_float32, peer_to, comm, NULL) != CHORUS_SUCCESS;
    bad |= chorus_recv(buf, 2, chorus_float32, peer_from, comm, NULL) != CHORUS_SUCCESS;
    if (bad) return fail("an operation failed");
    char path[512];
    int lines;
    snprintf(path, sizeof(path), "%s/chorus-dump.api.rank%d.txt", dir, rank);
    if (chorus_comm_dump(comm, path) != CHORUS_SUCCESS) return fail("chorus_comm_dump failed");
    if (check_dump(path, "api", &lines) != 0 || lines != 1 + 5) return fail("the API dump is not a header and 5 lines");
    if (chorus_comm_dump(comm, "/nonexistent/dir/dump.txt") != CHORUS_ERR_SYSTEM)
        return fail("an unwritable path did not fail");
    if (!strstr(chorus_comm_last_error(comm), "cannot write /nonexistent/dir/dump.txt"))
        return fail("the failed dump's error does not name the path");
    /* A dump failing on another thread keeps its error to that thread: last_error belongs to this one. */
    pthread_t t;
    char other[256] = "";
    if (pthread_create(&t, NULL, dump_elsewhere, other) != 0 || pthread_join(t, NULL) != 0)
        return fail("no dumping thread");
    if (!strstr(other, "cannot write /nonexistent/dir/other.txt"))
        return fail("the other thread did not see its own dump's error");
    if (strstr(chorus_comm_last_error(comm), "other.txt")) return fail("another thread's dump error showed here");
    if (chorus_comm_dump(NULL, NULL) != CHORUS_ERR_INVALID_ARGUMENT) return fail("a NULL comm was accepted");
    /* SIGUSR1: the helper thread writes the dump into CHORUS_DUMP_DIR; poll for it, bounded. */
    char auto_dump[512];
    auto_path(dir, auto_dump, sizeof(auto_dump));
    raise(SIGUSR1);
    for (int i = 0; i < 200 && access(auto_dump, F_OK) != 0; i++) usleep(10000);
    if (check_dump(auto_dump, "signal", &lines) != 0 || lines != 1 + 5) return fail("no SIGUSR1 dump");
    if (chorus_allreduce(buf, buf, COUNT, chorus_float32, chorus_sum, comm, NULL) != CHORUS_SUCCESS)
        return fail("an allreduce after the dumps failed");
    return strstr(chorus_comm_last_error(comm), "cannot write") ? fail("the dump's error outlived the next call") : 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_recorder skip DIR | diverge DIR K | api DIR\n");
        return 2;
    }
    int threads0 = count_threads();
    if (chorus_comm_init_from_env(&comm) != CHORUS_SUCCESS) {
        printf("init failed: %s\n", chorus_comm_last_error(NULL));
        return 1;
    }
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &nranks);
    int bad;
    if (strcmp(argv[1], "skip") == 0)
        bad = run_skip(argv[2]);
    else if (strcmp(argv[1], "diverge") == 0 && argc > 3)
        bad = run_diverge(argv[2], atoi(argv[3]));
    else
        bad = run_api(argv[2]);
    if (chorus_comm_destroy(comm) != CHORUS_SUCCESS) bad |= fail("destroy failed");
    comm = NULL;
    struct sigaction sa;
    if (sigaction(SIGUSR1, NULL, &sa) != 0 || sa.sa_handler != SIG_DFL) bad |= fail("SIGUSR1's action not restored");
    if (count_threads() != threads0) bad |= fail("the dump thread outlived the communicator");
    if (!bad) printf("rank %d: ok\n", rank);
    return bad;
}
