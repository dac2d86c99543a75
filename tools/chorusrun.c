/*
 * chorusrun: run N ranks of a program, joined into one communicator, on this host or across hosts.
 *
 *   chorusrun -n N [--grace SECONDS] [--] PROGRAM [ARGS...]
 *   chorusrun -H HOST[:SLOTS],... [-n N] [--agent COMMAND] [--grace SECONDS] [--] PROGRAM [ARGS...]
 *
 * chorusrun makes the unique id, which also starts the rendezvous root on a thread of this process, so it
 * must outlive the ranks' initialisation; it does, since it stays until every rank has ended. Each rank gets
 * CHORUS_RANK, CHORUS_NRANKS, CHORUS_LOCAL_RANK and CHORUS_UNIQUE_ID on top of the inherited environment,
 * and inherits stdin, stdout and stderr.
 *
 * Supervision. The first rank to fail (non-zero exit or death by a signal) is reported. The others get the
 * grace period to fail on their own, which is when they print the useful errors ("rank 2 closed its
 * connection"), then SIGTERM, then SIGKILL one second later. SIGINT and SIGTERM sent to chorusrun are passed
 * on to the ranks and start the same countdown. The exit status is the first failing rank's (128 + signal if
 * a signal killed it), or 0 when every rank exits 0.
 *
 * Ranks stay in chorusrun's process group, so the terminal's job control treats the run as one job: Ctrl-C
 * reaches every rank directly and Ctrl-Z stops them all. Each rank asks the kernel for SIGKILL should
 * chorusrun die, so not even `kill -9 chorusrun` leaves a rank behind.
 *
 * Across hosts (-H), as mpirun's rsh launcher does: ranks go to the hosts in the order given, SLOTS each
 * (default 1), and each is started as `AGENT HOST COMMAND` (AGENT default `ssh`), COMMAND being one line
 * for a POSIX shell (remote_command). The unique id holds the communicator's secret, so it travels on the
 * agent's standard input, never on a command line that other users of the host could read; the CHORUS_*
 * variables of chorusrun's environment are set in the command. That standard input also stops the rank:
 * a watcher in COMMAND waits for its end and then sends the rank SIGTERM, which needs no signal to cross
 * the agent (ssh passes none without a terminal); chorusrun closes it where it would send SIGTERM or
 * SIGINT, and it closes by itself when chorusrun dies. SIGKILL goes to the agent. The rendezvous root runs
 * in chorusrun, so every host must reach this one (CHORUS_SOCKET_IFNAME picks the interface).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chorus/chorus.h"
#include "util/util.h"

#define EXIT_USAGE 2
/* A rank that could not be started counts as failed with the shell's status for "command not found". */
#define EXIT_CANNOT_RUN 127
#define DEFAULT_GRACE_S 3.0
#define TERM_TO_KILL_NS 1000000000LL

typedef enum {
    PHASE_RUNNING, /* nothing went wrong yet */
    PHASE_GRACE,   /* a rank failed or chorusrun was signalled: the others may still end on their own */
    PHASE_TERM,    /* SIGTERM sent, SIGKILL at the deadline */
    PHASE_KILL     /* SIGKILL sent: only reaping is left */
} phase_t;

typedef struct launcher {
    int nranks;
    int64_t grace_ns;
    /* Across hosts (-H): each rank's host and local rank, the agent's words, and the write end of each
     * rank's agent's standard input (-1 once closed). hosts is NULL on one host. */
    char **hosts;
    int nslots; /* entries of hosts and local_ranks: every slot -H gives */
    int *local_ranks;
    char **agent;
    int *stdin_fds;
    pid_t *pids; /* by rank; 0 when never started or already reaped */
    int running; /* started and not yet reaped */
    phase_t phase;
    int64_t deadline; /* end of the current phase; INT64_MAX for none */
    int exit_code;    /* the first failing rank's; 0 while none failed */
} launcher_t;

static void usage(FILE *f)
{
    fprintf(f, "usage: chorusrun -n N [--grace SECONDS] [--] PROGRAM [ARGS...]\n"
               "       chorusrun -H HOST[:SLOTS],... [-n N] [--agent COMMAND] [--grace SECONDS] [--] PROGRAM [ARGS...]\n");
}

static void help(void)
{
    usage(stdout);
    printf("\n"
           "Run N ranks of PROGRAM (looked up in PATH) on this host, or across hosts. Each rank finds\n"
           "CHORUS_RANK, CHORUS_NRANKS, CHORUS_LOCAL_RANK and CHORUS_UNIQUE_ID in its environment, which\n"
           "is what chorus_comm_init_from_env() reads.\n"
           "\n"
           "  -n N               number of ranks (at least 1; with -H at most the slots, default all)\n"
           "  -H HOST[:SLOTS],...\n"
           "                     run the ranks on these hosts, SLOTS on each (default 1), in order; each\n"
           "                     rank is started as AGENT HOST COMMAND, in the directory of the same path,\n"
           "                     with chorusrun's CHORUS_* variables; every host must reach this one\n"
           "  --agent COMMAND    how to start a command on a host (default ssh); its words are split at\n"
           "                     spaces, and it must run COMMAND, a line for a POSIX shell, as ssh does\n"
           "  --grace SECONDS    after the first rank fails, how long the others may take to end on their\n"
           "                     own before they get SIGTERM, then SIGKILL one second later (default %g)\n"
           "  -h, --help         show this help\n"
           "  --version          show the version\n"
           "\n"
           "SIGINT and SIGTERM are passed on to the ranks. The exit status is the first failing rank's\n"
           "(128 + signal if it was killed by one), 0 if every rank succeeded, 2 for bad usage and 127 if\n"
           "PROGRAM cannot be run.\n",
           DEFAULT_GRACE_S);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "chorusrun: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return EXIT_USAGE;
}

/* Returns -1 when the command line is fine and chorusrun should go on, else the exit status. */
static int parse_args(int argc, char **argv, int *nranks_p, int64_t *grace_ns_p, int *prog_p, const char **hosts_p,
                      const char **agent_p)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"grace", required_argument, NULL, 'g'},
        {"hosts", required_argument, NULL, 'H'},
        {"agent", required_argument, NULL, 'a'},
        {NULL, 0, NULL, 0},
    };
    int nranks = 0;
    double grace_s = DEFAULT_GRACE_S;
    int c;
    char *end;

    /* '+' stops at PROGRAM, so that its own options are left alone; ':' lets us word the errors. */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hn:H:", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            help();
            return EXIT_SUCCESS;
        case 'V':
            printf("chorusrun (Chorus) %d.%d.%d\n", CHORUS_VERSION_MAJOR, CHORUS_VERSION_MINOR, CHORUS_VERSION_PATCH);
            return EXIT_SUCCESS;
        case 'n': {
            errno = 0;
            long n = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || n < 1 || n > INT_MAX)
                return usage_error("-n wants a number of ranks of at least 1, not '%s'", optarg);
            nranks = (int)n;
            break;
        }
        case 'H':
            *hosts_p = optarg;
            break;
        case 'a':
            if (!*optarg) return usage_error("%s", "--agent wants a command");
            *agent_p = optarg;
            break;
        case 'g':
            grace_s = strtod(optarg, &end);
            /* The upper bound keeps the nanosecond count in range; the negation also rejects NaN. */
            if (end == optarg || *end || !(grace_s >= 0 && grace_s <= 1e9))
                return usage_error("--grace wants a number of seconds of at least 0, not '%s'", optarg);
            break;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            /* optopt names an unknown short option, which may sit inside a group like -xh. */
            if (optopt) {
                char opt[3] = {'-', (char)optopt, '\0'};
                return usage_error("unknown option '%s'", opt);
            }
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (nranks == 0 && !*hosts_p) return usage_error("%s", "missing -n N, the number of ranks");
    if (optind >= argc) return usage_error("%s", "missing the PROGRAM to run");
    *nranks_p = nranks;
    *grace_ns_p = (int64_t)(grace_s * 1e9);
    *prog_p = optind;
    return -1;
}

/* The variables chorusrun sets replace inherited ones, so that a run started from inside a rank does not
 * hand its ranks two values. */
static int env_is_ours(const char *entry)
{
    static const char *const ours[] = {"CHORUS_RANK=", "CHORUS_NRANKS=", "CHORUS_LOCAL_RANK=", "CHORUS_UNIQUE_ID="};
    for (size_t i = 0; i < CHORUS_ARRAY_SIZE(ours); i++)
        if (strncmp(entry, ours[i], strlen(ours[i])) == 0) return 1;
    return 0;
}

/* The ranks' environment: the inherited one with `extra` appended. */
static char **env_make(char *const *extra, size_t nextra)
{
    size_t n = 0, kept = 0;
    while (environ[n]) n++;
    char **env = malloc((n + nextra + 1) * sizeof *env);
    if (!env) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!env_is_ours(environ[i])) env[kept++] = environ[i];
    memcpy(env + kept, extra, nextra * sizeof *extra);
    env[kept + nextra] = NULL;
    return env;
}

/*
 * Fork one rank and exec PROGRAM in it. Returns the pid, or -1 with errno set if no process could be made.
 * *exec_errno_p is 0 once PROGRAM runs, or why it could not: the child reports it through a close-on-exec
 * pipe, which closes without a word when the exec succeeds.
 */
static pid_t rank_spawn(char *const *argv, char *const *envp, int stdin_fd, const sigset_t *child_mask,
                        int *exec_errno_p)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* chorusrun has threads (the rendezvous root), so only async-signal-safe calls until exec. The
         * getppid() check closes the window in which chorusrun died before the death signal was armed. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(EXIT_CANNOT_RUN);
        if (stdin_fd >= 0 && dup2(stdin_fd, STDIN_FILENO) < 0) _exit(EXIT_CANNOT_RUN);
        sigprocmask(SIG_SETMASK, child_mask, NULL);
        execvpe(argv[0], argv, envp);
        int err = errno;
        (void)SYSCALL_RETRY(write(fds[1], &err, sizeof err));
        _exit(EXIT_CANNOT_RUN);
    }
    int fork_errno = errno;
    close(fds[1]);
    /* A write this small reaches a pipe whole, and the end of file of a successful exec leaves the 0. */
    *exec_errno_p = 0;
    if (pid > 0) (void)SYSCALL_RETRY(read(fds[0], exec_errno_p, sizeof *exec_errno_p));
    close(fds[0]);
    errno = fork_errno;
    return pid;
}

/* Across hosts, the end of a rank's standard input is what stops it (see the top of this file). */
static void stdin_close(launcher_t *l, int r)
{
    if (!l->stdin_fds || l->stdin_fds[r] < 0) return;
    close(l->stdin_fds[r]);
    l->stdin_fds[r] = -1;
}

static void signal_ranks(launcher_t *l, int sig)
{
    for (int r = 0; r < l->nranks; r++) {
        if (l->pids[r] <= 0) continue;
        if (l->hosts && sig != SIGKILL)
            stdin_close(l, r);
        else
            kill(l->pids[r], sig);
    }
}

/* "rank R (pid P)", or across hosts "rank R (host H, agent pid P)". */
static const char *rank_name(const launcher_t *l, int r, pid_t pid, char *buf, size_t len)
{
    if (l->hosts)
        snprintf(buf, len, "rank %d (host %s, agent pid %d)", r, l->hosts[r], (int)pid);
    else
        snprintf(buf, len, "rank %d (pid %d)", r, (int)pid);
    return buf;
}

static void begin_shutdown(launcher_t *l, int64_t delay_ns)
{
    if (l->phase != PHASE_RUNNING) return;
    l->phase = PHASE_GRACE;
    l->deadline = time_now_ns() + delay_ns;
}

static void reap(launcher_t *l)
{
    pid_t pid;
    int status;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int r = 0;
        while (r < l->nranks && l->pids[r] != pid) r++;
        if (r == l->nranks) continue;
        l->pids[r] = 0;
        l->running--;
        stdin_close(l, r);
        /* Only the first failure is reported: the later ones are usually its echo, and the ranks say why. */
        if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) || l->exit_code != 0) continue;
        char name[160];
        rank_name(l, r, pid, name, sizeof name);
        if (WIFSIGNALED(status)) {
            int sig = WTERMSIG(status);
            fprintf(stderr, "chorusrun: %s was killed by signal %d (%s)%s\n", name, sig, strsignal(sig),
                    WCOREDUMP(status) ? ", core dumped" : "");
            l->exit_code = 128 + sig;
        } else {
            fprintf(stderr, "chorusrun: %s exited with status %d\n", name, WEXITSTATUS(status));
            l->exit_code = WEXITSTATUS(status);
        }
        begin_shutdown(l, l->grace_ns);
    }
}

static void on_signal(launcher_t *l, const struct signalfd_siginfo *si)
{
    if (si->ssi_signo == SIGCHLD) {
        reap(l);
        return;
    }
    /* The terminal sends Ctrl-C to the whole foreground process group, ranks included: passing it on
     * would make each rank see it twice. */
    if (si->ssi_code != SI_KERNEL) signal_ranks(l, (int)si->ssi_signo);
    if (l->phase == PHASE_RUNNING)
        fprintf(stderr, "chorusrun: got signal %u (%s), stopping the ranks\n", si->ssi_signo,
                strsignal((int)si->ssi_signo));
    begin_shutdown(l, l->grace_ns);
}

static void on_deadline(launcher_t *l)
{
    if (l->phase == PHASE_GRACE) {
        fprintf(stderr, "chorusrun: sending SIGTERM to the %d rank%s still running\n", l->running,
                l->running == 1 ? "" : "s");
        signal_ranks(l, SIGTERM);
        l->phase = PHASE_TERM;
        l->deadline = time_now_ns() + TERM_TO_KILL_NS;
    } else if (l->phase == PHASE_TERM) {
        fprintf(stderr, "chorusrun: sending SIGKILL to the %d rank%s still running\n", l->running,
                l->running == 1 ? "" : "s");
        signal_ranks(l, SIGKILL);
        l->phase = PHASE_KILL;
        l->deadline = INT64_MAX;
    }
}

static int supervise(launcher_t *l, int sfd)
{
    while (l->running > 0) {
        struct pollfd pfd = {.fd = sfd, .events = POLLIN};
        int timeout = l->deadline == INT64_MAX ? -1 : time_left_ms(l->deadline, INT_MAX);
        if (SYSCALL_RETRY(poll(&pfd, 1, timeout)) < 0) {
            fprintf(stderr, "chorusrun: poll: %s\n", strerror(errno));
            signal_ranks(l, SIGKILL);
            return EXIT_FAILURE;
        }
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == sizeof si) on_signal(l, &si);
        if (l->running > 0 && time_now_ns() >= l->deadline) on_deadline(l);
    }
    return l->exit_code;
}

/* A rank that could not be started is the first failure; nothing useful can come from waiting for the
 * others, which would only wait for it, so they are stopped at once. */
static void launcher_free(launcher_t *l)
{
    for (int r = 0; r < l->nslots; r++) free(l->hosts[r]);
    for (int r = 0; l->stdin_fds && r < l->nranks; r++) stdin_close(l, r);
    free(l->hosts);
    free(l->local_ranks);
    if (l->agent) free(l->agent[0]);
    free(l->agent);
    free(l->stdin_fds);
    free(l->pids);
}

static void launch_failed(launcher_t *l, int exit_code)
{
    l->exit_code = exit_code;
    begin_shutdown(l, 0);
}

/* Start every rank; at the first one that cannot start, report it and start no more. */
static void launch(launcher_t *l, char *const *argv, const char *id_text, const sigset_t *child_mask)
{
    /* The environment points at these buffers; each rank is forked after they are rewritten for it. */
    char rank_var[32], nranks_var[32], local_var[32];
    char id_var[sizeof "CHORUS_UNIQUE_ID=" + CHORUS_UNIQUE_ID_STRING_BYTES];
    char *const ours[] = {rank_var, nranks_var, local_var, id_var};
    char **env = env_make(ours, CHORUS_ARRAY_SIZE(ours));
    if (!env) {
        fprintf(stderr, "chorusrun: out of memory\n");
        launch_failed(l, EXIT_FAILURE);
        return;
    }
    snprintf(nranks_var, sizeof nranks_var, "CHORUS_NRANKS=%d", l->nranks);
    snprintf(id_var, sizeof id_var, "CHORUS_UNIQUE_ID=%s", id_text);
    for (int r = 0; r < l->nranks; r++) {
        int exec_errno;
        snprintf(rank_var, sizeof rank_var, "CHORUS_RANK=%d", r);
        /* Every rank is on this host, so its local rank is its rank. */
        snprintf(local_var, sizeof local_var, "CHORUS_LOCAL_RANK=%d", r);
        pid_t pid = rank_spawn(argv, env, -1, child_mask, &exec_errno);
        if (pid < 0) {
            fprintf(stderr, "chorusrun: cannot start rank %d: %s\n", r, strerror(errno));
            launch_failed(l, EXIT_FAILURE);
            break;
        }
        if (exec_errno != 0) {
            /* The child is exiting already; reaping it here keeps it out of the shutdown messages. */
            (void)SYSCALL_RETRY(waitpid(pid, NULL, 0));
            fprintf(stderr, "chorusrun: cannot run '%s': %s\n", argv[0], strerror(exec_errno));
            launch_failed(l, EXIT_CANNOT_RUN);
            break;
        }
        l->pids[r] = pid;
        l->running++;
    }
    free(env);
}

/* ---- Across hosts ---- */

/* Slots by host name, then in order: each host's slots together, so that local ranks can be counted. */
static int slot_cmp(const void *a, const void *b, void *launcher)
{
    const launcher_t *l = launcher;
    int x = *(const int *)a, y = *(const int *)b, c = strcmp(l->hosts[x], l->hosts[y]);
    return c ? c : (x > y) - (x < y);
}

/* Each slot's local rank: how many slots of its host come before it (a host may be named more than once,
 * as in "a,b,a"). 0 if out of memory. */
static int slots_number(launcher_t *l)
{
    int *order = malloc((size_t)l->nslots * sizeof *order);
    if (!order) return 0;
    for (int i = 0; i < l->nslots; i++) order[i] = i;
    qsort_r(order, (size_t)l->nslots, sizeof *order, slot_cmp, l);
    for (int i = 0; i < l->nslots; i++)
        l->local_ranks[order[i]] =
            i > 0 && strcmp(l->hosts[order[i]], l->hosts[order[i - 1]]) == 0 ? l->local_ranks[order[i - 1]] + 1 : 0;
    free(order);
    return 1;
}

/* Each rank's host from "HOST[:SLOTS],...", SLOTS ranks to a host in the order given (all of them when
 * *nranks_p is 0, else the first *nranks_p, which must fit). Returns -1 when fine, else the exit status. */
static int hosts_parse(launcher_t *l, const char *text, int *nranks_p)
{
    char *copy = strdup(text), *save = NULL;
    int total = 0, cap = 0, rc = -1;
    if (!copy) return usage_error("%s", "out of memory");
    for (char *item = strtok_r(copy, ",", &save); item && rc < 0; item = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(item, ':'), *end;
        long slots = 1;
        if (colon) {
            *colon = 0;
            errno = 0;
            slots = strtol(colon + 1, &end, 10);
            if (errno || end == colon + 1 || *end || slots < 1 || slots > INT_MAX / 2 - total) {
                *colon = ':';
                rc = usage_error("-H wants HOST[:SLOTS] with SLOTS a number of at least 1, not '%s'", item);
                break;
            }
        }
        if (!*item) {
            rc = usage_error("%s", "-H has an empty host name");
            break;
        }
        for (long k = 0; k < slots && rc < 0; k++, total++) {
            if (total == cap) {
                cap = cap ? 2 * cap : 16;
                char **hosts = realloc(l->hosts, (size_t)cap * sizeof *hosts);
                int *locals = hosts ? realloc(l->local_ranks, (size_t)cap * sizeof *locals) : NULL;
                if (hosts) l->hosts = hosts;
                if (locals) l->local_ranks = locals;
                if (!hosts || !locals) {
                    rc = usage_error("%s", "out of memory");
                    break;
                }
            }
            l->hosts[total] = strdup(item);
            l->nslots = total + 1;
            if (!l->hosts[total]) {
                rc = usage_error("%s", "out of memory");
                break;
            }
        }
    }
    free(copy);
    if (rc >= 0) return rc;
    if (total == 0) return usage_error("%s", "-H names no host");
    if (!slots_number(l)) return usage_error("%s", "out of memory");
    if (*nranks_p > total) {
        char msg[96];
        snprintf(msg, sizeof msg, "-n %d is more ranks than the %d slots -H gives", *nranks_p, total);
        return usage_error("%s", msg);
    }
    if (*nranks_p == 0) *nranks_p = total;
    return -1;
}

/* The agent's words: the command split at spaces, room for HOST, COMMAND and the end. */
static char **agent_split(const char *command)
{
    while (*command == ' ') command++; /* so that the first word, if any, starts the copy argv[0] owns */
    size_t words = 0, len = strlen(command);
    for (size_t i = 0; i < len; i++)
        if (command[i] != ' ' && (i == 0 || command[i - 1] == ' ')) words++;
    char **argv = calloc(words + 3, sizeof *argv), *copy = strdup(command), *save = NULL;
    if (!argv || !copy) {
        free(argv);
        free(copy);
        return NULL;
    }
    size_t n = 0;
    for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) argv[n++] = w;
    if (!n) free(copy);
    return argv; /* argv[0] owns copy */
}

/* text in single quotes for a POSIX shell. */
static void shell_quote(FILE *f, const char *text)
{
    fputc('\'', f);
    for (const char *c = text; *c; c++)
        if (*c == '\'')
            fputs("'\\''", f);
        else
            fputc(*c, f);
    fputc('\'', f);
}

/* The line the agent runs for rank r on its host (see the top of this file): read the unique id from
 * standard input, set the rank's variables and chorusrun's CHORUS_* ones, run PROGRAM in the background
 * with fd 3 still on that input for a watcher that sends it SIGTERM at its end, and exit with its status
 * (128 + the signal's number where one ended it; the shell's "Terminated" notice is kept off stderr). One
 * line, run as `sh -c LINE` whatever the login shell. */
static char *remote_command(const launcher_t *l, int r, char *const *argv)
{
    char *script = NULL, *line = NULL, cwd[PATH_MAX];
    size_t len = 0;
    FILE *f = open_memstream(&script, &len);
    if (!f) return NULL;
    if (getcwd(cwd, sizeof cwd)) {
        fputs("cd ", f);
        shell_quote(f, cwd);
        fputs(" 2>/dev/null; ", f);
    }
    fprintf(f, "IFS= read -r CHORUS_UNIQUE_ID || exit 1; export CHORUS_UNIQUE_ID CHORUS_RANK=%d CHORUS_NRANKS=%d "
               "CHORUS_LOCAL_RANK=%d; ", r, l->nranks, l->local_ranks[r]);
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "CHORUS_", 7) != 0 || env_is_ours(*e) || !eq) continue;
        fprintf(f, "export %.*s=", (int)(eq - *e), *e);
        shell_quote(f, eq + 1);
        fputs("; ", f);
    }
    fputs("exec 3<&0; ", f);
    for (int i = 0; argv[i]; i++) {
        shell_quote(f, argv[i]);
        fputc(' ', f);
    }
    fputs("3<&- </dev/null & pid=$!; trap 'kill -TERM $pid 2>/dev/null' HUP INT TERM; "
          "{ read -r _ <&3; kill -TERM $pid; } 2>/dev/null & w=$!; "
          "wait $pid 2>/dev/null; st=$?; while kill -0 $pid 2>/dev/null; do wait $pid 2>/dev/null; st=$?; done; "
          "kill $w 2>/dev/null; exit $st",
          f);
    if (fclose(f) != 0) {
        free(script);
        return NULL;
    }
    f = open_memstream(&line, &len);
    if (f) {
        fputs("sh -c ", f);
        shell_quote(f, script);
        if (fclose(f) != 0) {
            free(line);
            line = NULL;
        }
    }
    free(script);
    return line;
}

/* Start every rank through the agent; at the first one that cannot start, report it and start no more. */
static void launch_remote(launcher_t *l, char *const *argv, const char *id_text, const sigset_t *child_mask)
{
    int n = 0;
    while (l->agent[n]) n++;
    for (int r = 0; r < l->nranks; r++) {
        char *line = remote_command(l, r, argv);
        int fds[2] = {-1, -1}, exec_errno = 0;
        /* A socket, not a pipe: a write to a rank gone already fails with EPIPE instead of a SIGPIPE. */
        if (!line || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
            fprintf(stderr, "chorusrun: cannot start rank %d: %s\n", r, line ? strerror(errno) : "out of memory");
            free(line);
            launch_failed(l, EXIT_FAILURE);
            return;
        }
        l->agent[n] = l->hosts[r];
        l->agent[n + 1] = line;
        pid_t pid = rank_spawn(l->agent, environ, fds[0], child_mask, &exec_errno);
        l->agent[n] = l->agent[n + 1] = NULL;
        free(line);
        close(fds[0]);
        if (pid < 0 || exec_errno != 0) {
            if (pid > 0) (void)SYSCALL_RETRY(waitpid(pid, NULL, 0));
            fprintf(stderr, "chorusrun: cannot run the agent '%s' for rank %d on %s: %s\n", l->agent[0], r,
                    l->hosts[r], strerror(pid < 0 ? errno : exec_errno));
            close(fds[1]);
            launch_failed(l, pid < 0 ? EXIT_FAILURE : EXIT_CANNOT_RUN);
            return;
        }
        /* The id and its newline fit in the pipe's buffer whole; a rank that ends before reading them
         * makes the write fail, which its exit status reports. */
        char msg[CHORUS_UNIQUE_ID_STRING_BYTES + 1];
        int len = snprintf(msg, sizeof msg, "%s\n", id_text);
        (void)!SYSCALL_RETRY(send(fds[1], msg, (size_t)len, MSG_NOSIGNAL));
        l->stdin_fds[r] = fds[1];
        l->pids[r] = pid;
        l->running++;
    }
}

/*
 * Route SIGCHLD, SIGINT and SIGTERM to a signalfd; *orig_p receives the mask the ranks should run with.
 * They must be blocked before the library starts the root thread, which inherits the mask: delivered to
 * that thread, SIGTERM would kill chorusrun and SIGCHLD would be discarded, instead of reaching the
 * signalfd. A SIGINT or SIGTERM inherited as ignored (nohup, `&` in a script) stays ignored, as it does in
 * the ranks, which inherit that too.
 */
static int signals_setup(sigset_t *orig_p)
{
    static const int forwarded[] = {SIGINT, SIGTERM};
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    /* Ignoring SIGCHLD would have the kernel reap the ranks before we learn how they ended. */
    signal(SIGCHLD, SIG_DFL);
    for (size_t i = 0; i < CHORUS_ARRAY_SIZE(forwarded); i++) {
        struct sigaction sa;
        if (sigaction(forwarded[i], NULL, &sa) == 0 && sa.sa_handler != SIG_IGN) sigaddset(&set, forwarded[i]);
    }
    if (sigprocmask(SIG_BLOCK, &set, orig_p) != 0) return -1;
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

int main(int argc, char **argv)
{
    launcher_t l = {.phase = PHASE_RUNNING, .deadline = INT64_MAX};
    int prog = 0;
    const char *hosts = NULL, *agent = "ssh";
    int rc = parse_args(argc, argv, &l.nranks, &l.grace_ns, &prog, &hosts, &agent);
    if (rc < 0 && hosts) rc = hosts_parse(&l, hosts, &l.nranks);
    if (rc < 0 && hosts && !(l.agent = agent_split(agent))) rc = usage_error("%s", "out of memory");
    if (rc < 0 && hosts && !l.agent[0]) rc = usage_error("%s", "--agent wants a command");
    if (rc >= 0) {
        launcher_free(&l);
        return rc;
    }

    sigset_t child_mask;
    int sfd = signals_setup(&child_mask);
    if (sfd < 0) {
        fprintf(stderr, "chorusrun: cannot set up signal handling: %s\n", strerror(errno));
        return EXIT_FAILURE;
    }

    l.pids = calloc((size_t)l.nranks, sizeof *l.pids);
    if (hosts && (l.stdin_fds = malloc((size_t)l.nranks * sizeof *l.stdin_fds)))
        for (int r = 0; r < l.nranks; r++) l.stdin_fds[r] = -1;
    if (!l.pids || (hosts && !l.stdin_fds)) {
        fprintf(stderr, "chorusrun: out of memory for %d ranks\n", l.nranks);
        rc = EXIT_FAILURE;
        goto out;
    }

    chorus_unique_id_t id;
    char id_text[CHORUS_UNIQUE_ID_STRING_BYTES];
    chorus_result_t res = chorus_get_unique_id(&id);
    if (res == CHORUS_SUCCESS) res = chorus_unique_id_to_string(&id, id_text, sizeof id_text);
    if (res != CHORUS_SUCCESS) {
        fprintf(stderr, "chorusrun: cannot create the unique id: %s (%s)\n", chorus_strerror(res),
                chorus_comm_last_error(NULL));
        rc = EXIT_FAILURE;
        goto out;
    }

    if (hosts)
        launch_remote(&l, argv + prog, id_text, &child_mask);
    else
        launch(&l, argv + prog, id_text, &child_mask);
    rc = supervise(&l, sfd);
out:
    launcher_free(&l);
    close(sfd);
    return rc;
}
