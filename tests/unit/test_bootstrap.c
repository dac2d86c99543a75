/*
 * Bootstrap end to end. Ranks are forked processes; the root runs in the parent (started after the
 * fork, so no child inherits its thread) and the id reaches the children through shared memory. Each
 * rank runs bootstrap_init and bootstrap_connect_mesh and proves the mesh by exchanging a few bytes with
 * every peer. Also: rogue clients at the root and at a rank, a wrong secret, a fake root, a rank missing
 * at the root or in the mesh, no root at all, and conflicting claims.
 *
 * `test_bootstrap quick` runs one 2-rank case only (for valgrind).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "bootstrap/wire.h"
#include "platform/socket.h"
#include "test.h"
#include "util/util.h"

#define MAX_CHILDREN 12
#define MAX_RANKS 8
#define ID_SECRET_BYTE 40 /* inside the secret (see uniqueid.c) */

enum { PLAN_FULL, PLAN_INIT_ONLY, PLAN_MESH_ROGUES };

typedef struct plan {
    int rank, nranks, mode;
} plan_t;

typedef struct outcome {
    int finished;
    int res;
    int64_t ms; /* from bootstrap_init to the outcome */
    char err[1024];
} outcome_t;

typedef struct shared {
    chorus_unique_id_t id;
    outcome_t out[MAX_CHILDREN];
} shared_t;

static shared_t *shared;

typedef struct group {
    int n, base; /* children base .. base + n - 1 in shared->out */
    pid_t pid[MAX_CHILDREN];
    int go;      /* one byte per child releases it; closing without writing sends them home */
} group_t;

static bootstrap_options_t options(const char *family, int64_t connect_ms, int64_t handshake_ms)
{
    return (bootstrap_options_t){
        .connect_timeout_ms = connect_ms, .handshake_timeout_ms = handshake_ms, .ifname = "lo", .family = family};
}

static int raw_connect(const struct sockaddr_storage *addr)
{
    int fd = -1;
    if (sock_connect_start(addr, &fd) != 0) return -1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, 2000) != 1 || sock_connect_result(fd) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Milliseconds until the peer closes fd (whatever it sends first is read and dropped), or -1. */
static int64_t wait_eof(int fd, int timeout_ms)
{
    int64_t t0 = time_now_ns(), deadline = time_deadline_ms(timeout_ms);
    char buf[256];
    while (time_now_ns() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, time_left_ms(deadline, 1000)) != 1) continue;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return (time_now_ns() - t0) / 1000000;
    }
    return -1;
}

static int thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int threads = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "Threads: %d", &threads) == 1) break;
    if (f) fclose(f);
    return threads;
}

/* The threads the process has while no root runs: 1, or 2 under ThreadSanitizer, whose runtime starts a
 * thread of its own with the first thread the program starts. */
static int base_threads = 1;

static void *no_op(void *arg) { return arg; }

static void count_base_threads(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, no_op, NULL) == 0) pthread_join(t, NULL);
    base_threads = thread_count();
}

/* The root thread is the only other thread of this process: wait until it has ended. */
static int wait_root_gone(int timeout_ms)
{
    int64_t deadline = time_deadline_ms(timeout_ms);
    do {
        if (thread_count() == base_threads) return 1;
        usleep(10000);
    } while (time_now_ns() < deadline);
    return 0;
}

static chorus_result_t child_exchange(const plan_t *pl, const int *fds, char *err, size_t errlen)
{
    int64_t deadline = time_deadline_ms(5000);
    for (int p = 0; p < pl->nranks; p++) {
        int32_t msg[2] = {pl->rank, p};
        if (p == pl->rank ? fds[p] != -1 : fds[p] < 0 || sock_send_all(fds[p], msg, sizeof(msg), deadline) != 0) {
            snprintf(err, errlen, "bad fd or send for peer %d", p);
            return CHORUS_ERR_INTERNAL;
        }
    }
    for (int p = 0; p < pl->nranks; p++) {
        int32_t msg[2];
        if (p != pl->rank && (sock_recv_all(fds[p], msg, sizeof(msg), deadline) != 0 || msg[0] != p || msg[1] != pl->rank)) {
            snprintf(err, errlen, "wrong bytes from peer %d", p);
            return CHORUS_ERR_INTERNAL;
        }
    }
    return CHORUS_SUCCESS;
}

/* A silent connection and a garbage one to rank 0's peer listener, left open while the mesh builds. */
static void child_mesh_rogues(const bootstrap_t *bs, int rogue[2])
{
    rogue[0] = raw_connect(&bootstrap_peer(bs, 0)->addr);
    rogue[1] = raw_connect(&bootstrap_peer(bs, 0)->addr);
    static const char junk[] = "GET / HTTP/1.0\r\n\r\n and then some more bytes to fill a hello";
    if (rogue[1] >= 0) (void)!send(rogue[1], junk, sizeof(junk), MSG_NOSIGNAL);
}

static void child_main(const plan_t *pl, const bootstrap_options_t *opt, outcome_t *out)
{
    int64_t t0 = time_now_ns();
    bootstrap_t *bs = NULL;
    int fds[MAX_RANKS], rogue[2] = {-1, -1};
    for (int i = 0; i < MAX_RANKS; i++) fds[i] = -1;
    chorus_result_t res = bootstrap_init(&shared->id, pl->rank, pl->nranks, opt, &bs, out->err, sizeof(out->err));
    if (res == CHORUS_SUCCESS && bootstrap_peer(bs, pl->rank)->pid != getpid()) {
        res = CHORUS_ERR_INTERNAL;
        snprintf(out->err, sizeof(out->err), "the table has pid %d for this rank", bootstrap_peer(bs, pl->rank)->pid);
    }
    if (res == CHORUS_SUCCESS && pl->mode == PLAN_MESH_ROGUES) child_mesh_rogues(bs, rogue);
    if (res == CHORUS_SUCCESS && pl->mode != PLAN_INIT_ONLY) {
        res = bootstrap_connect_mesh(bs, fds, out->err, sizeof(out->err));
        if (res == CHORUS_SUCCESS) res = child_exchange(pl, fds, out->err, sizeof(out->err));
    }
    out->ms = (time_now_ns() - t0) / 1000000;
    out->res = res;
    out->finished = 1;
    for (int i = 0; i < MAX_RANKS; i++)
        if (fds[i] >= 0) close(fds[i]);
    for (int i = 0; i < 2; i++)
        if (rogue[i] >= 0) close(rogue[i]);
    bootstrap_close(bs);
}

static void group_spawn(group_t *g, int base, const plan_t *plans, int n, const bootstrap_options_t *opt)
{
    int pipefd[2];
    if (pipe(pipefd) != 0) abort();
    g->n = n;
    g->base = base;
    memset(&shared->out[base], 0, (size_t)n * sizeof(outcome_t));
    for (int i = 0; i < n; i++) {
        g->pid[i] = fork();
        if (g->pid[i] == 0) {
            char c;
            close(pipefd[1]);
            if (read(pipefd[0], &c, 1) != 1) _exit(3);
            close(pipefd[0]);
            child_main(&plans[i], opt, &shared->out[base + i]);
            _exit(0);
        }
    }
    close(pipefd[0]);
    g->go = pipefd[1];
}

static void group_go(group_t *g, const chorus_unique_id_t *id)
{
    if (id) shared->id = *id;
    for (int i = 0; id && i < g->n; i++) (void)!write(g->go, "g", 1);
    close(g->go);
}

/* Reap the group within timeout_ms (killing whoever hangs); returns how many exited cleanly. */
static int group_wait(group_t *g, int timeout_ms)
{
    int64_t deadline = time_deadline_ms(timeout_ms);
    int left = g->n, ok = 0;
    while (left > 0) {
        for (int i = 0; i < g->n; i++) {
            int st;
            if (g->pid[i] <= 0 || waitpid(g->pid[i], &st, WNOHANG) != g->pid[i]) continue;
            ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
            g->pid[i] = 0;
            left--;
        }
        if (left > 0 && time_now_ns() >= deadline) {
            for (int i = 0; i < g->n; i++) {
                if (g->pid[i] <= 0) continue;
                TEST_ASSERT(0, "child %d hung; killed", g->base + i);
                kill(g->pid[i], SIGKILL);
                waitpid(g->pid[i], NULL, 0);
                g->pid[i] = 0;
                left--;
            }
        }
        usleep(2000);
    }
    return ok;
}

static const outcome_t *outcome(const group_t *g, int i) { return &shared->out[g->base + i]; }

static void check_success(const group_t *g, const char *what)
{
    for (int i = 0; i < g->n; i++)
        TEST_ASSERT(outcome(g, i)->finished && outcome(g, i)->res == CHORUS_SUCCESS, "%s, child %d: %s: %s", what, i,
                    chorus_result_name(outcome(g, i)->res), outcome(g, i)->err);
}

static int start_root(const bootstrap_options_t *opt, group_t *g, chorus_unique_id_t *id, char *root, size_t len)
{
    char err[512];
    chorus_result_t res = bootstrap_root_start(opt, id, err, sizeof(err));
    TEST_ASSERT(res == CHORUS_SUCCESS, "root start: %s", err);
    if (res != CHORUS_SUCCESS) {
        group_go(g, NULL);
        group_wait(g, 5000);
        return 0;
    }
    struct sockaddr_storage addr;
    bootstrap_secret_t secret;
    bootstrap_id_parse(id, &addr, &secret);
    sock_addr_str(&addr, root, len);
    return 1;
}

static void test_mesh(const char *family, int n)
{
    plan_t plans[MAX_RANKS];
    for (int i = 0; i < n; i++) plans[i] = (plan_t){i, n, PLAN_FULL};
    bootstrap_options_t opt = options(family, 10000, 2000);
    group_t g;
    chorus_unique_id_t id;
    char root[SOCK_ADDR_STRLEN], what[64];
    group_spawn(&g, 0, plans, n, &opt);
    if (!start_root(&opt, &g, &id, root, sizeof(root))) return;
    group_go(&g, &id);
    snprintf(what, sizeof(what), "%s mesh of %d", family, n);
    TEST_ASSERT(group_wait(&g, 15000) == n, "%s: children failed", what);
    check_success(&g, what);
    TEST_ASSERT(wait_root_gone(5000), "%s: the root thread did not end", what);
}

/* A silent client, a garbage one, one that knows the tag but not the key, and a rank holding an id with
 * the wrong secret, all at the root while three real ranks (one of which sends rogues to rank 0's peer
 * listener) initialise. */
static void test_rogues(void)
{
    plan_t plans[] = {{0, 3, PLAN_FULL}, {1, 3, PLAN_FULL}, {2, 3, PLAN_MESH_ROGUES}};
    bootstrap_options_t opt = options("AF_INET", 10000, 300);
    group_t g;
    chorus_unique_id_t id;
    char root[SOCK_ADDR_STRLEN], err[1024];
    group_spawn(&g, 0, plans, 3, &opt);
    if (!start_root(&opt, &g, &id, root, sizeof(root))) return;
    struct sockaddr_storage addr;
    bootstrap_secret_t secret;
    bootstrap_id_parse(&id, &addr, &secret);

    int silent = raw_connect(&addr), garbage = raw_connect(&addr), forger = raw_connect(&addr);
    TEST_ASSERT(silent >= 0 && garbage >= 0 && forger >= 0, "rogue connects");
    static const char junk[64] = "\x01\x02 definitely not a Chorus hello";
    TEST_ASSERT(send(garbage, junk, sizeof(junk), MSG_NOSIGNAL) == sizeof(junk), "garbage sent");
    uint8_t msg[HANDSHAKE_MSG_MAX] = {0};
    wire_put32(msg, BOOTSTRAP_MAGIC);
    wire_put16(msg + 4, BOOTSTRAP_PROTOCOL_VERSION);
    wire_put64(msg + 8, secret.tag);
    int64_t deadline = time_deadline_ms(3000);
    TEST_ASSERT(sock_send_all(forger, msg, 32, deadline) == CHORUS_SUCCESS, "forged hello");
    TEST_ASSERT(sock_recv_all(forger, msg, 56, deadline) == CHORUS_SUCCESS && wire_get16(msg + 6) == 0,
                "the right tag gets a challenge");
    memset(msg, 0xab, 40);
    TEST_ASSERT(sock_send_all(forger, msg, 40, deadline) == CHORUS_SUCCESS, "forged proof");

    chorus_unique_id_t wrong = id;
    wrong.internal[ID_SECRET_BYTE] ^= 1;
    bootstrap_options_t quick = options("AF_INET", 3000, 300);
    bootstrap_t *bs = NULL;
    TEST_ASSERT(bootstrap_init(&wrong, 0, 3, &quick, &bs, err, sizeof(err)) == CHORUS_ERR_AUTH && !bs,
                "a wrong secret is refused");
    TEST_ASSERT(strstr(err, root) && strstr(err, "another communicator"), "message: %s", err);

    group_go(&g, &id);
    TEST_ASSERT(wait_eof(garbage, 3000) >= 0, "the garbage client is closed");
    TEST_ASSERT(wait_eof(forger, 3000) >= 0, "the forger is closed");
    TEST_ASSERT(wait_eof(silent, 3000) >= 0, "the silent client is closed");
    TEST_ASSERT(group_wait(&g, 15000) == 3, "children failed");
    check_success(&g, "rogues");
    close(silent);
    close(garbage);
    close(forger);
    TEST_ASSERT(wait_root_gone(5000), "the root thread did not end");
}

/* A listener that answers the hello with a challenge whose MAC is made up. */
static void test_fake_root(void)
{
    plan_t plans[] = {{0, 1, PLAN_FULL}};
    bootstrap_options_t opt = options("AF_INET", 3000, 1000);
    struct sockaddr_storage local, bound, peer;
    int lfd = -1, fd = -1;
    chorus_unique_id_t id;
    group_t g;
    TEST_ASSERT(sock_find_interface("lo", "AF_INET", &local, NULL, 0) == CHORUS_SUCCESS, "lo");
    TEST_ASSERT(sock_listen(&local, 4, &lfd, &bound, NULL, 0) == CHORUS_SUCCESS, "listen");
    TEST_ASSERT(bootstrap_id_make(&bound, &id) == CHORUS_SUCCESS, "id");
    group_spawn(&g, 0, plans, 1, &opt);
    group_go(&g, &id);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    TEST_ASSERT(poll(&p, 1, 3000) == 1 && sock_accept(lfd, &fd, &peer) == 0, "the rank dials the fake root");
    uint8_t msg[HANDSHAKE_MSG_MAX];
    int64_t deadline = time_deadline_ms(3000);
    TEST_ASSERT(sock_recv_all(fd, msg, 32, deadline) == CHORUS_SUCCESS, "hello");
    memset(msg, 0x5c, sizeof(msg));
    wire_put32(msg, BOOTSTRAP_MAGIC);
    wire_put16(msg + 4, BOOTSTRAP_PROTOCOL_VERSION);
    wire_put16(msg + 6, 0);
    TEST_ASSERT(sock_send_all(fd, msg, 56, deadline) == CHORUS_SUCCESS, "challenge");
    TEST_ASSERT(group_wait(&g, 5000) == 1, "child failed");
    TEST_ASSERT(outcome(&g, 0)->res == CHORUS_ERR_AUTH && strstr(outcome(&g, 0)->err, "prove"), "fake root: %s: %s",
                chorus_result_name(outcome(&g, 0)->res), outcome(&g, 0)->err);
    close(fd);
    close(lfd);
}

static void test_missing_at_root(void)
{
    plan_t plans[] = {{0, 3, PLAN_FULL}, {1, 3, PLAN_FULL}};
    bootstrap_options_t opt = options("AF_INET6", 1500, 300);
    group_t g;
    chorus_unique_id_t id;
    char root[SOCK_ADDR_STRLEN], expect[128];
    group_spawn(&g, 0, plans, 2, &opt);
    if (!start_root(&opt, &g, &id, root, sizeof(root))) return;
    struct sockaddr_storage addr;
    bootstrap_secret_t secret;
    bootstrap_id_parse(&id, &addr, &secret);
    int silent = raw_connect(&addr);
    group_go(&g, &id);
    int64_t closed_ms = wait_eof(silent, 3000);
    TEST_ASSERT(closed_ms >= 250 && closed_ms < 1200, "a silent client is closed after the handshake timeout: %lld ms",
                (long long)closed_ms);
    close(silent);
    TEST_ASSERT(group_wait(&g, 10000) == 2, "children failed");
    snprintf(expect, sizeof(expect), "rank 2 of 3 never reached the root at %s", root);
    for (int i = 0; i < 2; i++) {
        const outcome_t *o = outcome(&g, i);
        TEST_ASSERT(o->res == CHORUS_ERR_TIMEOUT && strstr(o->err, expect), "rank %d: %s: %s", i,
                    chorus_result_name(o->res), o->err);
        TEST_ASSERT(o->ms < 1500 + 500, "rank %d took %lld ms", i, (long long)o->ms);
    }
    TEST_ASSERT(wait_root_gone(5000), "the root thread did not end");
}

static void test_missing_in_mesh(void)
{
    plan_t plans[] = {{0, 3, PLAN_FULL}, {1, 3, PLAN_FULL}, {2, 3, PLAN_INIT_ONLY}};
    bootstrap_options_t opt = options("AF_INET", 1500, 300);
    group_t g;
    chorus_unique_id_t id;
    char root[SOCK_ADDR_STRLEN];
    group_spawn(&g, 0, plans, 3, &opt);
    if (!start_root(&opt, &g, &id, root, sizeof(root))) return;
    group_go(&g, &id);
    TEST_ASSERT(group_wait(&g, 10000) == 3, "children failed");
    TEST_ASSERT(outcome(&g, 2)->res == CHORUS_SUCCESS, "rank 2 init: %s", outcome(&g, 2)->err);
    for (int i = 0; i < 2; i++) {
        const outcome_t *o = outcome(&g, i);
        TEST_ASSERT(o->res == CHORUS_ERR_TIMEOUT && strstr(o->err, "no connection with rank 2 "), "rank %d: %s: %s", i,
                    chorus_result_name(o->res), o->err);
        TEST_ASSERT(o->ms < 1500 + 500, "rank %d took %lld ms", i, (long long)o->ms);
    }
    TEST_ASSERT(wait_root_gone(5000), "the root thread did not end");
}

static void test_root_absent(void)
{
    plan_t plans[] = {{0, 2, PLAN_FULL}, {1, 2, PLAN_FULL}};
    bootstrap_options_t opt = options("AF_INET", 1000, 300);
    struct sockaddr_storage local, bound;
    int lfd = -1;
    chorus_unique_id_t id;
    char root[SOCK_ADDR_STRLEN];
    group_t g;
    TEST_ASSERT(sock_find_interface("lo", "AF_INET", &local, NULL, 0) == CHORUS_SUCCESS, "lo");
    TEST_ASSERT(sock_listen(&local, 4, &lfd, &bound, NULL, 0) == CHORUS_SUCCESS, "listen");
    close(lfd); /* nobody listens there any more */
    TEST_ASSERT(bootstrap_id_make(&bound, &id) == CHORUS_SUCCESS, "id");
    sock_addr_str(&bound, root, sizeof(root));
    group_spawn(&g, 0, plans, 2, &opt);
    group_go(&g, &id);
    TEST_ASSERT(group_wait(&g, 10000) == 2, "children failed");
    for (int i = 0; i < 2; i++) {
        const outcome_t *o = outcome(&g, i);
        TEST_ASSERT(o->res == CHORUS_ERR_TIMEOUT && strstr(o->err, root) && strstr(o->err, "unreachable"),
                    "rank %d: %s: %s", i, chorus_result_name(o->res), o->err);
        TEST_ASSERT(o->ms >= 900 && o->ms < 1000 + 500, "rank %d took %lld ms", i, (long long)o->ms);
    }
}

/* Ranks 0 and 1 of 3 hold their places; then a second rank 1 and a rank that says nranks is 4 are
 * turned away; then rank 2 completes the communicator. */
static void test_claims(void)
{
    plan_t first[] = {{0, 3, PLAN_FULL}, {1, 3, PLAN_FULL}};
    plan_t bad[] = {{1, 3, PLAN_FULL}, {0, 4, PLAN_FULL}};
    plan_t last[] = {{2, 3, PLAN_FULL}};
    bootstrap_options_t opt = options("AF_INET", 8000, 1000);
    group_t g1, g2, g3;
    chorus_unique_id_t id;
    char root[SOCK_ADDR_STRLEN];
    group_spawn(&g1, 0, first, 2, &opt);
    group_spawn(&g2, 2, bad, 2, &opt);
    group_spawn(&g3, 4, last, 1, &opt);
    if (!start_root(&opt, &g1, &id, root, sizeof(root))) {
        group_go(&g2, NULL);
        group_go(&g3, NULL);
        group_wait(&g2, 5000);
        group_wait(&g3, 5000);
        return;
    }
    group_go(&g1, &id);
    usleep(500000);
    group_go(&g2, &id);
    TEST_ASSERT(group_wait(&g2, 5000) == 2, "children failed");
    TEST_ASSERT(outcome(&g2, 0)->res == CHORUS_ERR_INVALID_ARGUMENT && strstr(outcome(&g2, 0)->err, "rank 1 is claimed twice"),
                "duplicate: %s: %s", chorus_result_name(outcome(&g2, 0)->res), outcome(&g2, 0)->err);
    TEST_ASSERT(outcome(&g2, 1)->res == CHORUS_ERR_INVALID_ARGUMENT && strstr(outcome(&g2, 1)->err, "nranks is 4"),
                "disagreement: %s: %s", chorus_result_name(outcome(&g2, 1)->res), outcome(&g2, 1)->err);
    group_go(&g3, &id);
    TEST_ASSERT(group_wait(&g3, 10000) == 1 && group_wait(&g1, 10000) == 2, "children failed");
    check_success(&g1, "claims, first");
    check_success(&g3, "claims, last");
    TEST_ASSERT(wait_root_gone(5000), "the root thread did not end");
}

int main(int argc, char **argv)
{
    test_set_timeout(120);
    count_base_threads();
    shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return 1;
    if (argc > 1 && strcmp(argv[1], "quick") == 0) {
        test_mesh("AF_INET", 2);
    } else {
        static const int sizes[] = {1, 2, 3, 5, 8};
        for (size_t i = 0; i < CHORUS_ARRAY_SIZE(sizes); i++) test_mesh("AF_INET", sizes[i]);
        for (size_t i = 0; i < CHORUS_ARRAY_SIZE(sizes); i++) test_mesh("AF_INET6", sizes[i]);
        test_rogues();
        test_fake_root();
        test_missing_at_root();
        test_missing_in_mesh();
        test_root_absent();
        test_claims();
    }
    munmap(shared, sizeof(*shared));
    return test_report();
}
