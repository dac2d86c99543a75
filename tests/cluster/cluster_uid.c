/*
 * cluster_uid: make a unique id for ranks started elsewhere, and keep its rendezvous root alive.
 *
 *   cluster_uid [TIMEOUT_SECONDS]
 *
 * Prints the id (chorus_unique_id_to_string) as one line on stdout, then stays until stdin reaches end of
 * file or TIMEOUT_SECONDS (default 300) pass, whichever comes first. chorus_get_unique_id() runs the root on
 * a thread of this process, so the process must outlive the ranks' initialisation: the launcher keeps
 * stdin open until its ranks have ended and closes it then. The timeout bounds a launcher that dies
 * without closing it. The root listens on the interface CHORUS_SOCKET_IFNAME selects, as for any rank.
 *
 * Exit status: 0 after end of file or the timeout, 1 if no id could be made, 2 for bad usage.
 */
#include <chorus/chorus.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_S 300.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Returns when stdin reaches end of file (or fails) or when `timeout_s` have passed. */
static void wait_for_eof(double timeout_s)
{
    double deadline = now_s() + timeout_s;
    char buf[256];

    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) return;
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        int n = poll(&pfd, 1, (int)(left * 1000.0) + 1); /* the timeout is at most 1e6 s: fits an int of ms */
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return;
        if (n == 0) continue;
        ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return; /* end of file, or stdin is unusable: either way nobody will close it later */
    }
}

int main(int argc, char **argv)
{
    double timeout_s = DEFAULT_TIMEOUT_S;
    if (argc > 2) {
        fprintf(stderr, "usage: cluster_uid [TIMEOUT_SECONDS]\n");
        return 2;
    }
    if (argc == 2) {
        char *end;
        timeout_s = strtod(argv[1], &end);
        if (end == argv[1] || *end || !(timeout_s > 0 && timeout_s <= 1e6)) {
            fprintf(stderr, "cluster_uid: the timeout wants a number of seconds above 0, not '%s'\n", argv[1]);
            return 2;
        }
    }

    chorus_unique_id_t id;
    char text[CHORUS_UNIQUE_ID_STRING_BYTES];
    chorus_result_t res = chorus_get_unique_id(&id);
    if (res == CHORUS_SUCCESS) res = chorus_unique_id_to_string(&id, text, sizeof text);
    if (res != CHORUS_SUCCESS) {
        fprintf(stderr, "cluster_uid: cannot make a unique id: %s: %s\n", chorus_strerror(res),
                chorus_comm_last_error(NULL));
        return 1;
    }
    if (printf("%s\n", text) < 0 || fflush(stdout) != 0) {
        fprintf(stderr, "cluster_uid: cannot write the id to stdout\n");
        return 1;
    }
    wait_for_eof(timeout_s);
    return 0;
}
