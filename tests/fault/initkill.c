/*
 * initkill: an LD_PRELOAD library that SIGKILLs the process that loads it at a chosen point of
 * chorus_comm_init, after the rendezvous: the victim of test_fault's "init" mode. It lives in the test
 * suite only; the library knows nothing of it. It finds the points from the outside, through calls the
 * library makes into the C library:
 *   - the library's own INFO log lines (the victim runs with CHORUS_LOG_LEVEL=INFO), which mark the steps
 *     of init: "table received" (rendezvous done), "mesh connected", "rank Q (...) via shm|tcp" (one per
 *     peer, in increasing rank order), "host arena" (the arena is agreed on, or agreed to be off: next
 *     come the single-copy check and the tuning step);
 *   - shm_open(), for the moment a segment exists that nobody has unlinked yet;
 *   - clock_gettime(), to move a kill on from a log line into the step that follows it: every wait of
 *     init reads the clock as it goes, so "+N" lands N clock reads later, inside the step.
 *
 *   INITKILL=POINT[+N]   table | mesh | peer:K | arena   SIGKILL right after that log line (peer:K: the
 *                                                        K-th peer's line), or N clock reads later
 *                        shm:K                           SIGKILL right after the K-th shm_open() returns
 *
 * A kill must come while the other ranks still need the victim, whatever the scheduling, or some of them
 * may rightly finish init first. Until the victim has voted on the host arena (right after its last
 * peer's line) every rank needs it: rank 0 waits for the vote and the others for rank 0's verdict. So a
 * count of clock reads still running at the last peer's line ends there. Later the tuning step needs rank
 * 0 and its partner (rank 1 on one host), the latter for 32 round trips of two clock reads each, so
 * arena+N with N up to 60 is for ranks 0 and 1 only; and over TCP, where the arena line comes after the
 * vote, the arena point as a whole is (run_fault.sh keeps to that).
 *
 * Without INITKILL it does nothing. A victim whose init returns was not killed: test_fault reports that,
 * so that a test never passes by killing nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static enum { P_NONE, P_LOG, P_SHM } point_kind = P_NONE;
static const char *point_text; /* the log line's mark */
static int point_k = 1;        /* which occurrence */
static long clocks_after = -1; /* clock reads to wait once the mark was seen; -1 while not seen */
static int seen;               /* occurrences so far */
static int peers = -1;         /* "via" lines so far, -1 when CHORUS_NRANKS is unknown */
static int last_peer;          /* how many there are: CHORUS_NRANKS - 1 */

static void die(void) { raise(SIGKILL); }

__attribute__((constructor)) static void initkill_setup(void)
{
    const char *spec = getenv("INITKILL");
    if (!spec || !*spec) return;
    char name[32];
    int k = 1;
    long plus = 0;
    const char *p = spec;
    size_t len = strcspn(p, ":+");
    if (len >= sizeof(name)) goto bad;
    memcpy(name, p, len);
    name[len] = 0;
    p += len;
    if (*p == ':') k = (int)strtol(p + 1, (char **)&p, 10);
    if (*p == '+') plus = strtol(p + 1, (char **)&p, 10);
    if (*p || k < 1 || plus < 0) goto bad;
    point_k = k;
    const char *n = getenv("CHORUS_NRANKS");
    if (n && atoi(n) > 1) {
        last_peer = atoi(n) - 1;
        peers = 0;
    }
    if (strcmp(name, "shm") == 0) {
        point_kind = P_SHM;
        return;
    }
    point_kind = P_LOG;
    clocks_after = -1 - plus; /* becomes plus once the mark is seen (see on_mark) */
    if (strcmp(name, "table") == 0)
        point_text = "table received";
    else if (strcmp(name, "mesh") == 0)
        point_text = "mesh connected";
    else if (strcmp(name, "peer") == 0)
        point_text = " via ";
    else if (strcmp(name, "arena") == 0)
        point_text = "host arena";
    else
        goto bad;
    return;
bad:
    fprintf(stderr, "initkill: bad INITKILL=%s (POINT[:K][+N]; POINT table, mesh, peer, arena or shm)\n", spec);
    _exit(2);
}

/* clocks_after: -1 - N while the mark is unseen, then N down to 0. */
static void on_mark(void)
{
    if (clocks_after >= 0 || ++seen < point_k) return;
    clocks_after = -1 - clocks_after;
    if (clocks_after == 0) die();
}

static void check_line(const char *line)
{
    if (point_kind != P_LOG || !strstr(line, " CHORUS ")) return;
    int via = strstr(line, " via shm") || strstr(line, " via tcp");
    if (via && peers >= 0) peers++;
    if (point_text[0] == ' ' ? via : !!strstr(line, point_text)) on_mark();
    /* The last peer's line is the latest moment a count may end (see above). */
    if (via && peers == last_peer && clocks_after > 0) die();
}

/* The library logs with fprintf(stderr, "%s\n", line); the compiler may also call the checking variant. */
static int log_vfprintf(FILE *f, const char *fmt, va_list ap)
{
    if (point_kind != P_LOG || f != stderr) return vfprintf(f, fmt, ap);
    char buf[2048];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    fputs(buf, f);
    fflush(f);
    check_line(buf);
    return n;
}

int fprintf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = log_vfprintf(f, fmt, ap);
    va_end(ap);
    return n;
}

int __fprintf_chk(FILE *f, int flag, const char *fmt, ...)
{
    (void)flag;
    va_list ap;
    va_start(ap, fmt);
    int n = log_vfprintf(f, fmt, ap);
    va_end(ap);
    return n;
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(clk, ts);
    if (clocks_after > 0 && --clocks_after == 0) die();
    return rc;
}

int shm_open(const char *name, int oflag, mode_t mode)
{
    static int (*real)(const char *, int, mode_t);
    if (!real) real = (int (*)(const char *, int, mode_t))dlsym(RTLD_NEXT, "shm_open");
    int fd = real(name, oflag, mode);
    if (point_kind == P_SHM && fd >= 0 && ++seen == point_k) die();
    return fd;
}
