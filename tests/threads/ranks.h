/* Ranks as threads of one process: what test_threads and test_streams share. Each test defines
 * rank_main(rank) and calls ranks_run; ranks_init makes a communicator on every rank together. */
#ifndef CHORUS_TEST_RANKS_H
#define CHORUS_TEST_RANKS_H

#include <chorus/chorus.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_RANKS 16

static int nranks;
static chorus_unique_id_t ranks_id; /* written by rank 0 between two barriers */
static pthread_barrier_t all_ranks;

static void ranks_on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "timed out (hang?)\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(124);
}

/* A communicator of every rank over `transport` (CHORUS_TRANSPORT; NULL: the default), with an operation
 * timeout of timeout_ms (0: the default). Knobs are read at init, so rank 0 sets the variable while every
 * other rank waits at a barrier, and none reads the environment while it changes. */
static chorus_comm_t ranks_init(int rank, const char *transport, int64_t timeout_ms)
{
    if (rank == 0) {
        if (transport)
            setenv("CHORUS_TRANSPORT", transport, 1);
        else
            unsetenv("CHORUS_TRANSPORT");
        if (chorus_get_unique_id(&ranks_id) != CHORUS_SUCCESS) {
            fprintf(stderr, "get_unique_id failed: %s\n", chorus_comm_last_error(NULL));
            exit(1);
        }
    }
    pthread_barrier_wait(&all_ranks); /* the id and the environment are set: every rank may read them */
    chorus_config_t cfg = CHORUS_CONFIG_INITIALIZER;
    cfg.timeout_ms = timeout_ms;
    chorus_comm_t comm = NULL;
    if (chorus_comm_init_rank_config(&comm, nranks, ranks_id, rank, &cfg) != CHORUS_SUCCESS) {
        fprintf(stderr, "rank %d: init (%s) failed: %s\n", rank, transport ? transport : "default",
                chorus_comm_last_error(NULL));
        exit(1);
    }
    pthread_barrier_wait(&all_ranks); /* every init has read the environment */
    return comm;
}

/* How many of n elements differ from what was wanted; detail says so, with the first one. */
static size_t ranks_wrong(const int32_t *got, const int32_t *want, size_t n, char *detail, size_t len)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && !bad++) first = i;
    snprintf(detail, len, "%zu of %zu elements wrong, first at %zu (%d, expected %d)", bad, n, first,
             bad ? got[first] : 0, bad ? want[first] : 0);
    return bad;
}

/* Usage: PROGRAM [NRANKS] [SECONDS]: runs rank_main on NRANKS threads, the whole bounded by alarm().
 * Returns 0, or 2 on bad usage. */
static int ranks_run(int argc, char **argv, int default_ranks, void *(*rank_main)(void *))
{
    nranks = argc > 1 ? atoi(argv[1]) : default_ranks;
    unsigned seconds = argc > 2 ? (unsigned)atoi(argv[2]) : 120;
    if (nranks < 2 || nranks > MAX_RANKS) {
        fprintf(stderr, "usage: %s [NRANKS (2..%d)] [SECONDS]\n", argv[0], MAX_RANKS);
        return 2;
    }
    signal(SIGALRM, ranks_on_alarm);
    alarm(seconds);
    pthread_barrier_init(&all_ranks, NULL, (unsigned)nranks);
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < nranks; r++) pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
    for (int r = 0; r < nranks; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&all_ranks);
    return 0;
}

#endif
