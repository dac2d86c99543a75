/*
 * The shared-memory transport against the transport conformance suite (each pair: a loopback TCP
 * connection as the doorbell and a fresh segment name), once with a ring of the suggested default size and
 * once with a one-page ring that every large message must stream through. Then its own cases: set-up
 * leaves nothing behind; refusals (name taken, a segment swapped under the opener, seen by either side,
 * no room) leave the doorbell clean for the TCP transport; the doorbell wakes a sleeper and never piles up;
 * a set-up ends at once when a watched connection (another rank's) closes.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "transport_conformance.h"

#define SHM_TEST_TIMEOUT_MS 20000

static size_t shm_test_ring_bytes = 1u << 20;

static void shm_test_name(char *name, size_t len)
{
    static int seq;
    snprintf(name, len, "/chorus-test-%d-%d", (int)getpid(), seq++);
}

static int shm_test_tcp_pair(int fds[2])
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t addr_len = sizeof(addr);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    fds[1] = -1;
    if (lfd >= 0 && fds[0] >= 0 && bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen(lfd, 1) == 0 &&
        getsockname(lfd, (struct sockaddr *)&addr, &addr_len) == 0 &&
        connect(fds[0], (struct sockaddr *)&addr, sizeof(addr)) == 0)
        fds[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    close(lfd);
    if (fds[1] >= 0) return 0;
    close(fds[0]);
    return -1;
}

/* One side of a set-up; the creator runs in a thread, since each side waits for the other. */
typedef struct shm_test_side {
    int fd;
    const char *name;
    int creator;
    transport_options_t opt;
    transport_conn_t *conn;
    chorus_result_t res;
    char err[256];
    pthread_t thread;
} shm_test_side_t;

static void *shm_test_open_main(void *arg)
{
    shm_test_side_t *s = arg;
    s->res = shm_conn_open(s->fd, s->name, s->creator, &s->opt, &s->conn, s->err, sizeof(s->err));
    return NULL;
}

static void shm_test_sides(shm_test_side_t side[2], const int fds[2], const char *name, const transport_options_t *opt)
{
    for (int i = 0; i < 2; i++) {
        side[i] = (shm_test_side_t){.fd = fds[i], .name = name, .creator = i == 0, .opt = *opt};
        side[i].opt.shm_setup_timeout_ms = SHM_TEST_TIMEOUT_MS;
        if (side[i].opt.shm_ring_bytes == 0) side[i].opt.shm_ring_bytes = shm_test_ring_bytes;
    }
}

static void shm_test_creator_start(shm_test_side_t *creator)
{
    if (pthread_create(&creator->thread, NULL, shm_test_open_main, creator) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
    }
}

static void shm_test_open_both(shm_test_side_t side[2])
{
    shm_test_creator_start(&side[0]);
    shm_test_open_main(&side[1]);
    pthread_join(side[0].thread, NULL);
}

static int shm_test_make_pair(const transport_options_t *opt, transport_conn_t **a_p, transport_conn_t **b_p)
{
    int fds[2];
    if (shm_test_tcp_pair(fds) != 0) return -1;
    char name[64];
    shm_test_name(name, sizeof(name));
    shm_test_side_t side[2];
    shm_test_sides(side, fds, name, opt);
    shm_test_open_both(side);
    if (side[0].res == CHORUS_SUCCESS && side[1].res == CHORUS_SUCCESS) {
        *a_p = side[0].conn;
        *b_p = side[1].conn;
        return 0;
    }
    for (int i = 0; i < 2; i++) {
        fprintf(stderr, "shm set-up side %d: %s: %s\n", i, chorus_result_name(side[i].res), side[i].err);
        if (side[i].res == CHORUS_SUCCESS)
            side[i].conn->ops->close(side[i].conn);
        else
            close(fds[i]);
    }
    return -1;
}

static int shm_test_name_exists(const char *name)
{
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

static void shm_test_gone_after_setup(void)
{
    int fds[2];
    TEST_ASSERT(shm_test_tcp_pair(fds) == 0, "loopback pair");
    char name[64];
    shm_test_name(name, sizeof(name));
    shm_test_side_t side[2];
    shm_test_sides(side, fds, name, &(transport_options_t){.chunk_bytes = 1 << 16});
    shm_test_open_both(side);
    TEST_ASSERT(side[0].res == CHORUS_SUCCESS && side[1].res == CHORUS_SUCCESS, "set-up: %s / %s", side[0].err,
                side[1].err);
    TEST_ASSERT(!shm_test_name_exists(name), "segment %s still exists after set-up", name);
    for (int i = 0; i < 2; i++)
        if (side[i].res == CHORUS_SUCCESS) side[i].conn->ops->close(side[i].conn);
}

/* After a refusal both descriptors must carry TCP traffic: a stray set-up byte would break its framing. */
static void shm_test_tcp_after(const int fds[2], const char *what)
{
    transport_options_t opt = {.chunk_bytes = 1 << 16};
    transport_conn_t *a, *b;
    if (tcp_conn_open(fds[0], &opt, &a) != CHORUS_SUCCESS) {
        TEST_ASSERT(0, "%s: tcp_conn_open failed", what);
        close(fds[1]);
        return;
    }
    if (tcp_conn_open(fds[1], &opt, &b) != CHORUS_SUCCESS) {
        TEST_ASSERT(0, "%s: tcp_conn_open failed", what);
        a->ops->close(a);
        return;
    }
    char hello[] = "hello", world[] = "world", a_in[6] = {0}, b_in[6] = {0};
    transport_xfer_t x[4] = {conf_xfer(hello, 6, 1), conf_xfer(b_in, 6, 1), conf_xfer(world, 6, 2),
                             conf_xfer(a_in, 6, 2)};
    a->ops->post_send(a, &x[0]);
    b->ops->post_recv(b, &x[1]);
    b->ops->post_send(b, &x[2]);
    a->ops->post_recv(a, &x[3]);
    TEST_ASSERT(conf_wait(a, b, x, 4), "%s: TCP exchange after the refusal timed out", what);
    for (int i = 0; i < 4; i++) CONF_EXPECT_DONE(x[i]);
    TEST_ASSERT(strcmp(b_in, "hello") == 0 && strcmp(a_in, "world") == 0, "%s: TCP got '%s' and '%s'", what, b_in,
                a_in);
    a->ops->close(a);
    b->ops->close(b);
}

/* Both sides refused, each saying why; the creator's reason contains `creator_says`. */
static void shm_test_expect_refusal(const shm_test_side_t side[2], const char *creator_says, const char *what)
{
    for (int i = 0; i < 2; i++) {
        TEST_ASSERT(side[i].res == CHORUS_ERR_NOT_SUPPORTED, "%s: side %d: %s (%s), wanted NOT_SUPPORTED", what, i,
                    chorus_result_name(side[i].res), side[i].err);
        if (side[i].res == CHORUS_SUCCESS) side[i].conn->ops->close(side[i].conn);
    }
    TEST_ASSERT(strstr(side[0].err, creator_says), "%s: creator says '%s'", what, side[0].err);
    TEST_ASSERT(strstr(side[1].err, "the peer"), "%s: opener says '%s'", what, side[1].err);
}

static void shm_test_name_taken(void)
{
    int fds[2];
    TEST_ASSERT(shm_test_tcp_pair(fds) == 0, "loopback pair");
    char name[64];
    shm_test_name(name, sizeof(name));
    int squat = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    TEST_ASSERT(squat >= 0, "cannot create %s", name);
    shm_test_side_t side[2];
    shm_test_sides(side, fds, name, &(transport_options_t){.chunk_bytes = 1 << 16});
    shm_test_open_both(side);
    shm_test_expect_refusal(side, "already exists", "name taken");
    TEST_ASSERT(shm_test_name_exists(name), "the set-up removed a segment it did not make");
    shm_unlink(name);
    close(squat);
    shm_test_tcp_after(fds, "name taken");
}

/*
 * Swap the segment for an impostor of the same size between the creator's offer and the opener's open:
 * blank, the opener sees the token differ; a copy (token included), the creator sees that the opener's
 * token never reached its own mapping.
 */
static void shm_test_swapped(int copy)
{
    const char *what = copy ? "copied impostor" : "blank impostor";
    int fds[2];
    TEST_ASSERT(shm_test_tcp_pair(fds) == 0, "loopback pair");
    char name[64];
    shm_test_name(name, sizeof(name));
    shm_test_side_t side[2];
    shm_test_sides(side, fds, name, &(transport_options_t){.chunk_bytes = 1 << 16, .shm_ring_bytes = 4096});
    shm_test_creator_start(&side[0]);
    struct pollfd pfd = {.fd = fds[1], .events = POLLIN};
    TEST_ASSERT(poll(&pfd, 1, SHM_TEST_TIMEOUT_MS) == 1, "%s: no offer", what);
    int orig = shm_open(name, O_RDWR, 0), fake = -1;
    struct stat st = {0};
    TEST_ASSERT(orig >= 0 && fstat(orig, &st) == 0, "%s: cannot open the creator's segment", what);
    shm_unlink(name);
    fake = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    TEST_ASSERT(fake >= 0 && ftruncate(fake, st.st_size) == 0, "%s: cannot make the impostor", what);
    if (copy && orig >= 0 && fake >= 0) {
        void *from = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, orig, 0);
        TEST_ASSERT(from != MAP_FAILED && pwrite(fake, from, (size_t)st.st_size, 0) == st.st_size, "%s: copy", what);
        if (from != MAP_FAILED) munmap(from, (size_t)st.st_size);
    }
    close(orig);
    close(fake);
    shm_test_open_main(&side[1]);
    pthread_join(side[0].thread, NULL);
    shm_test_expect_refusal(side, copy ? "do not share" : "token differs", what);
    if (!copy) TEST_ASSERT(strstr(side[1].err, "token differs"), "%s: opener says '%s'", what, side[1].err);
    TEST_ASSERT(!shm_test_name_exists(name), "%s: %s left behind", what, name);
    shm_unlink(name);
    shm_test_tcp_after(fds, what);
}

/* A ring larger than all of /dev/shm: refused at once, with the sizes in the reason, nothing allocated. */
static void shm_test_no_room(void)
{
    char name[64];
    shm_test_name(name, sizeof(name));
    int probe = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    struct statvfs vfs;
    int known = probe >= 0 && fstatvfs(probe, &vfs) == 0 && vfs.f_blocks > 0;
    if (probe >= 0) {
        close(probe);
        shm_unlink(name);
    }
    if (!known) {
        printf("shm: /dev/shm has no size limit, the no-room case is skipped\n");
        return;
    }
    int fds[2];
    TEST_ASSERT(shm_test_tcp_pair(fds) == 0, "loopback pair");
    shm_test_side_t side[2];
    transport_options_t opt = {.chunk_bytes = 1 << 16, .shm_ring_bytes = (size_t)vfs.f_blocks * vfs.f_frsize};
    shm_test_sides(side, fds, name, &opt);
    shm_test_open_both(side);
    shm_test_expect_refusal(side, "MiB needed", "no room");
    TEST_ASSERT(!shm_test_name_exists(name), "no room: %s left behind", name);
    shm_test_tcp_after(fds, "no room");
}

static int shm_test_ready(int fd, short events)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    return fd >= 0 && poll(&pfd, 1, 0) == 1;
}

/* The two orders of "a prepares to sleep" and "b publishes", stepped by hand in one thread. */
static void shm_test_wakeup(void)
{
    transport_conn_t *a, *b;
    if (shm_test_make_pair(&(transport_options_t){.chunk_bytes = 1 << 16}, &a, &b) != 0) {
        TEST_ASSERT(0, "make_pair");
        return;
    }
    char in[4], out[4] = "abc";
    int moved;
    for (int publish_first = 0; publish_first < 2; publish_first++) {
        transport_xfer_t recv = conf_xfer(in, 4, 1), send = conf_xfer(out, 4, 1);
        a->ops->post_recv(a, &recv);
        a->ops->progress(a, &moved);
        short events = 0;
        int fd = a->ops->poll_fd(a, &events);
        TEST_ASSERT(!shm_test_ready(fd, events), "a sleeper with nothing to do would not sleep");
        b->ops->post_send(b, &send);
        if (publish_first) {
            /* Back from that sleep; b publishes before the next one is prepared. */
            a->ops->progress(a, &moved);
            b->ops->progress(b, &moved);
            fd = a->ops->poll_fd(a, &events);
            TEST_ASSERT(shm_test_ready(fd, events), "data published before the sleep, yet poll() would block");
        } else {
            b->ops->progress(b, &moved);
            TEST_ASSERT(shm_test_ready(fd, events), "the doorbell did not wake the sleeper");
        }
        TEST_ASSERT(conf_wait(a, b, &recv, 1), "receive after the wake-up");
        CONF_EXPECT_DONE(recv);
        CONF_EXPECT_DONE(send);
    }
    a->ops->close(a);
    b->ops->close(b);
}

typedef struct shm_test_pinger {
    transport_conn_t *conn;
    int rounds;
    int first; /* sends before it receives */
    int ok;
} shm_test_pinger_t;

static void *shm_test_ping_main(void *arg)
{
    shm_test_pinger_t *p = arg;
    uint32_t word = 0, in = 0;
    p->ok = 1;
    for (int i = 0; i < p->rounds && p->ok; i++)
        for (int half = 0; half < 2 && p->ok; half++) {
            int sending = half == (p->first ? 0 : 1);
            word = (uint32_t)i;
            transport_xfer_t x = conf_xfer(sending ? (void *)&word : (void *)&in, 4, (uint32_t)i);
            if (sending)
                p->conn->ops->post_send(p->conn, &x);
            else
                p->conn->ops->post_recv(p->conn, &x);
            p->ok = conf_wait(p->conn, NULL, &x, 1) && x.state == XFER_DONE && (sending || in == (uint32_t)i);
        }
    return NULL;
}

/* Ping-pong with both ends sleeping at every wait: all arrives, and the doorbells hold at most a byte each. */
static void shm_test_doorbell_drained(void)
{
    int fds[2];
    TEST_ASSERT(shm_test_tcp_pair(fds) == 0, "loopback pair");
    char name[64];
    shm_test_name(name, sizeof(name));
    shm_test_side_t side[2];
    shm_test_sides(side, fds, name, &(transport_options_t){.chunk_bytes = 1 << 16});
    shm_test_open_both(side);
    if (side[0].res != CHORUS_SUCCESS || side[1].res != CHORUS_SUCCESS) {
        TEST_ASSERT(0, "set-up: %s / %s", side[0].err, side[1].err);
        return;
    }
    shm_test_pinger_t p[2] = {{side[0].conn, 2000, 1, 0}, {side[1].conn, 2000, 0, 0}};
    pthread_t thread;
    pthread_create(&thread, NULL, shm_test_ping_main, &p[0]);
    shm_test_ping_main(&p[1]);
    pthread_join(thread, NULL);
    TEST_ASSERT(p[0].ok && p[1].ok, "ping-pong failed");
    for (int i = 0; i < 2; i++) {
        int pending = -1;
        ioctl(fds[i], FIONREAD, &pending);
        TEST_ASSERT(pending >= 0 && pending <= 1, "doorbell %d holds %d bytes", i, pending);
        side[i].conn->ops->close(side[i].conn);
    }
}

static void *shm_test_close_later(void *arg)
{
    usleep(100000);
    close(*(int *)arg);
    return NULL;
}

/* A set-up whose peer never answers ends as soon as a watched connection closes (another rank died), with
 * REMOTE and that connection's index, long before its timeout; the doorbell and its segment are left as
 * they were (the opener made nothing), and the creator that did make one unlinks it when its peer gives up. */
static void shm_test_watch(void)
{
    int bell[2], other[2];
    if (shm_test_tcp_pair(bell) != 0 || shm_test_tcp_pair(other) != 0) {
        TEST_ASSERT(0, "loopback pairs");
        return;
    }
    char name[64];
    shm_test_name(name, sizeof(name));
    int watch[3] = {-1, other[0], bell[1]}, closed = -2;
    transport_options_t opt = {.chunk_bytes = 1 << 16, .shm_ring_bytes = shm_test_ring_bytes,
                               .shm_setup_timeout_ms = SHM_TEST_TIMEOUT_MS, .watch_fds = watch, .nwatch = 3,
                               .watch_closed = &closed};
    /* Bytes waiting on a watched connection are not a close. */
    TEST_ASSERT(send(other[1], "x", 1, 0) == 1, "send");
    transport_conn_t *conn = NULL;
    char err[256] = "";
    pthread_t thread;
    pthread_create(&thread, NULL, shm_test_close_later, &other[1]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    chorus_result_t res = shm_conn_open(bell[1], name, 0, &opt, &conn, err, sizeof(err));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(thread, NULL);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    TEST_ASSERT(res == CHORUS_ERR_REMOTE && closed == 1, "opener: %s, watched index %d: %s", chorus_result_name(res),
                closed, err);
    TEST_ASSERT(took >= 0.09 && took < 5, "the opener gave up after %.3f s (the watched close came after 0.1 s)", took);
    /* The creator's peer gives up (closes): it unlinks the segment it made. */
    shm_test_side_t creator = {.fd = bell[0], .name = name, .creator = 1, .opt = opt};
    creator.opt.watch_fds = NULL;
    creator.opt.nwatch = 0;
    shm_test_creator_start(&creator);
    usleep(100000);
    close(bell[1]);
    pthread_join(creator.thread, NULL);
    TEST_ASSERT(creator.res == CHORUS_ERR_REMOTE, "creator: %s: %s", chorus_result_name(creator.res), creator.err);
    TEST_ASSERT(!shm_test_name_exists(name), "segment %s left after the opener gave up", name);
    close(bell[0]);
    close(other[0]);
}

int main(void)
{
    test_set_timeout(120);
    conformance_run(&(conformance_factory_t){.name = "shm", .make_pair = shm_test_make_pair});
    shm_test_ring_bytes = 4096;
    conformance_run(&(conformance_factory_t){.name = "shm-one-page-ring", .make_pair = shm_test_make_pair});
    shm_test_ring_bytes = 1u << 20;
    shm_test_gone_after_setup();
    shm_test_name_taken();
    shm_test_swapped(0);
    shm_test_swapped(1);
    shm_test_no_room();
    shm_test_wakeup();
    shm_test_doorbell_drained();
    shm_test_watch();
    return test_report();
}
