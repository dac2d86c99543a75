/*
 * THE transport conformance suite, written against transport/transport.h alone, so that every transport
 * (tcp, shm, ...) is held to the same contract by a few lines of test:
 *
 *     static int my_make_pair(const transport_options_t *opt, transport_conn_t **a_p, transport_conn_t **b_p);
 *     int main(void)
 *     {
 *         test_set_timeout(60);
 *         conformance_run(&(conformance_factory_t){.name = "my", .make_pair = my_make_pair});
 *         return test_report();
 *     }
 *
 * Cases: connect; small messages both ways; zero-length messages; 16 MiB both ways at once, then 64 MiB one
 * way (timed and printed), a thread driving the peer, the receiver's `done` watched to advance at most a
 * piece per progress() call over final data (transport_piece_bytes), and a 4-chunk message waiting whole
 * for its receiver still landing a chunk at a time; 1000 messages of mixed sizes posted at once and completed in
 * order; tag, length and check-byte mismatch (MISMATCH with peer_len/peer_tag/peer_check, sticky, and the
 * peer told what differed by the notice, while it waits to receive, while it sends, and while idle); a
 * close noticed while idle; messages sent before an orderly close (the goodbye last) still delivered,
 * even when received after the close was noticed; a farewell from abandon() failing a waiting peer with
 * its bytes; a close without the goodbye behind unread messages noticed while idle; the peer closing
 * mid-transfer; the peer process killed mid-transfer (REMOTE, not a
 * hang); close with transfers pending (run under valgrind to see it leak nothing).
 *
 * Every wait polls the descriptors poll_fd() names with a deadline and fails the check instead of hanging;
 * a transport that leaves out an event it needs fails that way too.
 */
#ifndef CHORUS_TRANSPORT_CONFORMANCE_H
#define CHORUS_TRANSPORT_CONFORMANCE_H

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "transport/transport.h"
#include "util/util.h"

typedef struct conformance_factory {
    const char *name;
    /* Make two connected ends in this process; 0 on success. Both ends must stay usable in a child
     * forked afterwards: the peer-death case drives one end from a child process and kills it. */
    int (*make_pair)(const transport_options_t *opt, transport_conn_t **a_p, transport_conn_t **b_p);
    /* In a forked child, release the end the parent keeps, with no effect the parent could observe.
     * NULL: the transport's close() already behaves so (as closing a socket's duplicate does). */
    void (*drop_inherited)(transport_conn_t *conn);
} conformance_factory_t;

/* One wait; generous because the suite must also pass under valgrind. */
#define CONF_WAIT_MS 20000

typedef int (*conf_cond_fn)(void *arg);

/* Progress every connection until cond(arg) holds, polling their descriptors while nothing moves.
 * Returns 0 when CONF_WAIT_MS passes first. */
static int conf_drive(transport_conn_t *const *conns, int n, conf_cond_fn cond, void *arg)
{
    int64_t deadline = time_deadline_ms(CONF_WAIT_MS);
    for (;;) {
        int moved_any = 0;
        for (int i = 0; i < n; i++) {
            int moved = 0;
            conns[i]->ops->progress(conns[i], &moved);
            moved_any |= moved;
        }
        if (cond(arg)) return 1;
        if (time_now_ns() >= deadline) return 0;
        if (moved_any) continue;
        struct pollfd pfd[4];
        nfds_t npfd = 0;
        for (int i = 0; i < n && npfd < CHORUS_ARRAY_SIZE(pfd); i++) {
            short events = 0;
            int fd = conns[i]->ops->poll_fd(conns[i], &events);
            if (fd >= 0) pfd[npfd++] = (struct pollfd){.fd = fd, .events = events};
        }
        /* A transport without a descriptor can only be polled by spinning. */
        poll(pfd, npfd, npfd ? time_left_ms(deadline, INT32_MAX) : 1);
    }
}

typedef struct conf_set {
    transport_xfer_t *xfers;
    int n;
} conf_set_t;

static int conf_settled(void *arg)
{
    conf_set_t *set = arg;
    for (int i = 0; i < set->n; i++)
        if (set->xfers[i].state == XFER_PENDING) return 0;
    return 1;
}

static int conf_never(void *arg)
{
    (void)arg;
    return 0;
}

/* Holds once progress() reports the connection failed. */
static int conf_conn_failed(void *arg)
{
    transport_conn_t *conn = arg;
    int moved;
    return conn->ops->progress(conn, &moved) != CHORUS_SUCCESS;
}

static int conf_wait(transport_conn_t *a, transport_conn_t *b, transport_xfer_t *xfers, int n)
{
    transport_conn_t *conns[2] = {a, b};
    conf_set_t set = {xfers, n};
    return conf_drive(conns, b ? 2 : 1, conf_settled, &set);
}

/* A thread that drives one end until its transfers settle, while the test drives the other. */
typedef struct conf_peer {
    transport_conn_t *conn;
    conf_set_t set;
    int ok;
    pthread_t thread;
} conf_peer_t;

static void *conf_peer_main(void *arg)
{
    conf_peer_t *peer = arg;
    peer->ok = conf_drive(&peer->conn, 1, conf_settled, &peer->set);
    return NULL;
}

static void conf_peer_start(conf_peer_t *peer, transport_conn_t *conn, transport_xfer_t *xfers, int n)
{
    *peer = (conf_peer_t){.conn = conn, .set = {xfers, n}};
    int rc = pthread_create(&peer->thread, NULL, conf_peer_main, peer);
    if (rc != 0) {
        fprintf(stderr, "pthread_create: %s\n", strerror(rc));
        exit(1);
    }
}

static int conf_peer_join(conf_peer_t *peer)
{
    pthread_join(peer->thread, NULL);
    return peer->ok;
}

/* Test data: byte `off` of stream `seed`, filled and checked a word at a time. */
static uint64_t conf_word(uint64_t seed, size_t k)
{
    return (seed << 40) ^ ((uint64_t)k * 0x9e3779b97f4a7c15ull);
}

static void conf_fill(void *buf, size_t len, uint64_t seed)
{
    size_t words = len / 8;
    for (size_t k = 0; k < words; k++) {
        uint64_t w = conf_word(seed, k);
        memcpy((char *)buf + 8 * k, &w, 8);
    }
    uint64_t w = conf_word(seed, words);
    memcpy((char *)buf + 8 * words, &w, len % 8);
}

static unsigned char conf_byte(uint64_t seed, size_t off)
{
    uint64_t w = conf_word(seed, off / 8);
    return ((const unsigned char *)&w)[off % 8];
}

/* Offset of the first wrong byte, or SIZE_MAX. */
static size_t conf_check(const void *buf, size_t len, uint64_t seed)
{
    for (size_t k = 0; 8 * k < len; k++) {
        uint64_t w = conf_word(seed, k);
        size_t n = CHORUS_MIN((size_t)8, len - 8 * k);
        if (memcmp((const char *)buf + 8 * k, &w, n) != 0)
            for (size_t i = 0; i < n; i++)
                if (((const unsigned char *)buf)[8 * k + i] != ((const unsigned char *)&w)[i]) return 8 * k + i;
    }
    return SIZE_MAX;
}

static transport_xfer_t conf_xfer(void *buf, size_t len, uint32_t tag)
{
    return (transport_xfer_t){.buf = buf, .len = len, .tag = tag};
}

static int conf_pair(const conformance_factory_t *f, size_t chunk_bytes, size_t socket_buffer,
                     transport_conn_t **a_p, transport_conn_t **b_p)
{
    transport_options_t opt = {.chunk_bytes = chunk_bytes, .socket_buffer = socket_buffer,
                               .socket_send_buffer = socket_buffer};
    int rc = f->make_pair(&opt, a_p, b_p);
    TEST_ASSERT(rc == 0, "%s: make_pair failed", f->name);
    return rc == 0;
}

#define CONF_EXPECT_DONE(x)                                                                                \
    TEST_ASSERT((x).state == XFER_DONE && (x).done == (x).len && (x).err == CHORUS_SUCCESS,                \
                "state %d done %zu of %zu err %d", (int)(x).state, (x).done, (x).len, (int)(x).err)
#define CONF_EXPECT_FAILED(x, code)                                                                        \
    TEST_ASSERT((x).state == XFER_FAILED && (x).err == (code), "state %d err %d, wanted FAILED %d",        \
                (int)(x).state, (int)(x).err, (int)(code))

static void conf_test_connect(const conformance_factory_t *f)
{
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 0, &a, &b)) return;
    TEST_ASSERT(a->ops->name && *a->ops->name, "transport has no name");
    transport_conn_t *ends[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        int moved = 1;
        TEST_ASSERT(ends[i]->ops->progress(ends[i], &moved) == CHORUS_SUCCESS, "idle progress failed");
        TEST_ASSERT(moved == 0, "idle progress moved bytes");
        short events = 0;
        int fd = ends[i]->ops->poll_fd(ends[i], &events);
        /* POLLIN even while idle, so that the peer's close is noticed. */
        TEST_ASSERT(fd < 0 || (events & POLLIN), "an idle end must poll for the peer's close");
        TEST_ASSERT(!(events & POLLOUT), "nothing to send, yet POLLOUT");
    }
    a->ops->close(a);
    b->ops->close(b);
}

static void conf_test_small(const conformance_factory_t *f)
{
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 0, &a, &b)) return;
    char ping[] = "ping", pong[] = "pong!", a_in[8] = {0}, b_in[8] = {0};
    transport_xfer_t x[4] = {conf_xfer(ping, 5, 1), conf_xfer(b_in, 5, 1), conf_xfer(pong, 6, 2),
                             conf_xfer(a_in, 6, 2)};
    TEST_ASSERT(a->ops->post_send(a, &x[0]) == CHORUS_SUCCESS, "post_send");
    TEST_ASSERT(b->ops->post_recv(b, &x[1]) == CHORUS_SUCCESS, "post_recv");
    TEST_ASSERT(b->ops->post_send(b, &x[2]) == CHORUS_SUCCESS, "post_send");
    TEST_ASSERT(a->ops->post_recv(a, &x[3]) == CHORUS_SUCCESS, "post_recv");
    TEST_ASSERT(conf_wait(a, b, x, 4), "small exchange timed out");
    for (int i = 0; i < 4; i++) CONF_EXPECT_DONE(x[i]);
    TEST_ASSERT(strcmp(b_in, "ping") == 0 && strcmp(a_in, "pong!") == 0, "got '%s' and '%s'", b_in, a_in);
    a->ops->close(a);
    b->ops->close(b);
}

static void conf_test_zero_length(const conformance_factory_t *f)
{
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 0, &a, &b)) return;
    char abc[] = "abc", in[4] = {0};
    transport_xfer_t x[8] = {conf_xfer(NULL, 0, 10), conf_xfer(abc, 3, 11), conf_xfer(NULL, 0, 12),
                             conf_xfer(NULL, 0, 13), conf_xfer(NULL, 0, 10), conf_xfer(in, 3, 11),
                             conf_xfer(NULL, 0, 12), conf_xfer(NULL, 0, 13)};
    for (int i = 0; i < 3; i++) a->ops->post_send(a, &x[i]);
    b->ops->post_send(b, &x[3]);
    for (int i = 4; i < 7; i++) b->ops->post_recv(b, &x[i]);
    a->ops->post_recv(a, &x[7]);
    TEST_ASSERT(conf_wait(a, b, x, 8), "zero-length exchange timed out");
    for (int i = 0; i < 8; i++) CONF_EXPECT_DONE(x[i]);
    TEST_ASSERT(memcmp(in, "abc", 3) == 0, "got '%.3s'", in);
    a->ops->close(a);
    b->ops->close(b);
}

/* While a large receive runs: done never goes back, buf[0, done) is already final, and the caller sees
 * it advance a piece at a time at most (transport_piece_bytes; conf_drive checks after every progress()
 * call). */
typedef struct conf_watch {
    conf_set_t set;
    transport_xfer_t *recv;
    uint64_t seed;
    size_t piece_bytes;
    size_t last_done;
    int steps;
    int bad;
    int leaps;
} conf_watch_t;

static int conf_watch_cond(void *arg)
{
    conf_watch_t *w = arg;
    size_t done = w->recv->done;
    if (done != w->last_done) {
        if (done < w->last_done) w->bad++;
        if (done > w->last_done + w->piece_bytes) w->leaps++;
        for (size_t off = done - CHORUS_MIN(done, (size_t)64); off < done; off++)
            if (((const unsigned char *)w->recv->buf)[off] != conf_byte(w->seed, off)) {
                w->bad++;
                break;
            }
        w->last_done = done;
        w->steps++;
    }
    return conf_settled(&w->set);
}

static void conf_test_large(const conformance_factory_t *f)
{
    const size_t big = 64u << 20, duplex = 16u << 20;
    transport_conn_t *a, *b;
    const size_t chunk = 256 << 10;
    if (!conf_pair(f, chunk, 4u << 20, &a, &b)) return;
    char *a_out = malloc(big), *b_in = malloc(big), *b_out = malloc(duplex), *a_in = malloc(duplex);
    TEST_ASSERT(a_out && b_in && b_out && a_in, "out of memory");
    if (!a_out || !b_in || !b_out || !a_in) goto out;
    conf_fill(a_out, big, 1);
    conf_fill(b_out, duplex, 2);
    /* Fault the receive buffer in, so that the timing below is the transport's. */
    memset(b_in, 0xee, big);

    /* Both ways at once, each side driven by its own thread. */
    transport_xfer_t ax[2] = {conf_xfer(a_out, duplex, 1), conf_xfer(a_in, duplex, 2)};
    transport_xfer_t bx[2] = {conf_xfer(b_out, duplex, 2), conf_xfer(b_in, duplex, 1)};
    a->ops->post_recv(a, &ax[1]);
    a->ops->post_send(a, &ax[0]);
    b->ops->post_send(b, &bx[0]);
    b->ops->post_recv(b, &bx[1]);
    conf_peer_t peer;
    conf_peer_start(&peer, b, bx, 2);
    TEST_ASSERT(conf_wait(a, NULL, ax, 2), "duplex transfer timed out");
    TEST_ASSERT(conf_peer_join(&peer), "duplex peer timed out");
    for (int i = 0; i < 2; i++) {
        CONF_EXPECT_DONE(ax[i]);
        CONF_EXPECT_DONE(bx[i]);
    }
    TEST_ASSERT(conf_check(a_in, duplex, 2) == SIZE_MAX, "duplex data b -> a differs");
    TEST_ASSERT(conf_check(b_in, duplex, 1) == SIZE_MAX, "duplex data a -> b differs");

    /* One way, twice: the second run reuses buffers the kernel has already copied to and from, which is
     * what collectives do (on some virtual machines the first kernel access to a page costs far more).
     * Timings are printed for information; performance is measured by benchmarks, never asserted. */
    double gbps[2] = {0, 0};
    int steps = 0;
    for (int run = 0; run < 2; run++) {
        memset(b_in, 0xee, big);
        transport_xfer_t send = conf_xfer(a_out, big, 0xabcd), recv = conf_xfer(b_in, big, 0xabcd);
        b->ops->post_recv(b, &recv);
        a->ops->post_send(a, &send);
        int64_t t0 = time_now_ns();
        conf_peer_start(&peer, a, &send, 1);
        conf_watch_t watch = {.set = {&recv, 1}, .recv = &recv, .seed = 1,
                              .piece_bytes = transport_piece_bytes(chunk, big)};
        TEST_ASSERT(conf_drive(&b, 1, conf_watch_cond, &watch), "64 MiB receive timed out");
        TEST_ASSERT(conf_peer_join(&peer), "64 MiB send timed out");
        gbps[run] = (double)big / (double)(time_now_ns() - t0);
        steps = watch.steps;
        CONF_EXPECT_DONE(send);
        CONF_EXPECT_DONE(recv);
        TEST_ASSERT(watch.bad == 0, "%d progress steps showed done going back or unfinished data below done",
                    watch.bad);
        TEST_ASSERT(watch.leaps == 0, "%d progress calls moved more than a piece", watch.leaps);
        size_t bad = conf_check(b_in, big, 1);
        TEST_ASSERT(bad == SIZE_MAX, "64 MiB message differs at byte %zu", bad);
    }
    printf("%s: 64 MiB one way: %.2f GB/s with fresh buffers, %.2f GB/s reused; receiver saw %d steps\n",
           f->name, gbps[0], gbps[1], steps);

    /* A message of four chunks, all of it waiting for the receiver (as much as the transport holds): an
     * eighth is less than a chunk, so the receiver must still see it land a chunk at a time. */
    {
        const size_t small = 4 * chunk;
        memset(b_in, 0xee, small);
        transport_xfer_t send = conf_xfer(a_out, small, 0xabce), recv = conf_xfer(b_in, small, 0xabce);
        b->ops->post_recv(b, &recv);
        a->ops->post_send(a, &send);
        conf_peer_start(&peer, a, &send, 1);
        usleep(20000);
        conf_watch_t watch = {.set = {&recv, 1}, .recv = &recv, .seed = 1,
                              .piece_bytes = transport_piece_bytes(chunk, small)};
        TEST_ASSERT(watch.piece_bytes == chunk, "a piece of %zu bytes is %zu bytes, not a chunk", small,
                    watch.piece_bytes);
        TEST_ASSERT(conf_drive(&b, 1, conf_watch_cond, &watch), "1 MiB receive timed out");
        TEST_ASSERT(conf_peer_join(&peer), "1 MiB send timed out");
        CONF_EXPECT_DONE(recv);
        TEST_ASSERT(watch.bad == 0 && watch.leaps == 0 && watch.steps >= 4,
                    "1 MiB receive: %d bad steps, %d calls moved more than a chunk, %d steps", watch.bad,
                    watch.leaps, watch.steps);
    }
out:
    free(a_out);
    free(b_in);
    free(b_out);
    free(a_in);
    a->ops->close(a);
    b->ops->close(b);
}

/* Message sizes for the ordering case: mostly small (zero included), every tenth a few chunks long. */
static size_t conf_order_size(int i)
{
    return i % 10 == 9 ? 20000 + (size_t)i * 37 : (size_t)i * 7919 % 1500;
}

typedef struct conf_order {
    conf_set_t set;
    int next; /* every receive before this one is DONE */
    int out_of_order;
} conf_order_t;

static int conf_order_cond(void *arg)
{
    conf_order_t *o = arg;
    while (o->next < o->set.n && o->set.xfers[o->next].state == XFER_DONE) o->next++;
    for (int i = o->next + 1; i < o->set.n && i < o->next + 64; i++)
        if (o->set.xfers[i].state != XFER_PENDING) o->out_of_order++;
    return conf_settled(&o->set);
}

static void conf_test_ordering(const conformance_factory_t *f)
{
    enum { N = 1000 };
    transport_conn_t *a, *b;
    /* A small odd chunk so that messages straddle chunk boundaries everywhere. */
    if (!conf_pair(f, 4093, 0, &a, &b)) return;
    size_t total = 0, off[N];
    for (int i = 0; i < N; i++) {
        off[i] = total;
        total += conf_order_size(i);
    }
    char *out = malloc(total), *in = malloc(total);
    transport_xfer_t *sx = calloc(N, sizeof(*sx)), *rx = calloc(N, sizeof(*rx));
    TEST_ASSERT(out && in && sx && rx, "out of memory");
    if (!out || !in || !sx || !rx) goto out;
    for (int i = 0; i < N; i++) {
        conf_fill(out + off[i], conf_order_size(i), (uint64_t)i);
        sx[i] = conf_xfer(out + off[i], conf_order_size(i), (uint32_t)i);
        rx[i] = conf_xfer(in + off[i], conf_order_size(i), (uint32_t)i);
        b->ops->post_send(b, &sx[i]);
        a->ops->post_recv(a, &rx[i]);
    }
    conf_peer_t peer;
    conf_peer_start(&peer, b, sx, N);
    conf_order_t order = {.set = {rx, N}};
    TEST_ASSERT(conf_drive(&a, 1, conf_order_cond, &order), "1000 messages timed out");
    TEST_ASSERT(conf_peer_join(&peer), "1000 sends timed out");
    TEST_ASSERT(order.out_of_order == 0, "%d receives completed before an earlier one", order.out_of_order);
    int wrong = 0;
    for (int i = 0; i < N; i++)
        if (rx[i].state != XFER_DONE || sx[i].state != XFER_DONE ||
            conf_check(in + off[i], conf_order_size(i), (uint64_t)i) != SIZE_MAX)
            wrong++;
    TEST_ASSERT(wrong == 0, "%d of %d messages wrong or incomplete", wrong, N);
out:
    free(out);
    free(in);
    free(sx);
    free(rx);
    a->ops->close(a);
    b->ops->close(b);
}

/* x failed with the peer's notice: it had posted `posted` and got `sent` from this side. */
static void conf_expect_notice(const transport_xfer_t *x, const transport_xfer_t *posted, const transport_xfer_t *sent)
{
    TEST_ASSERT(x->peer_found, "no notice from the peer");
    TEST_ASSERT(x->peer_len == posted->len && x->peer_tag == posted->tag &&
                    memcmp(x->peer_check, posted->check, sizeof(x->check)) == 0,
                "notice: the peer posted %llu bytes tag %u, wanted %zu tag %u (or the check bytes differ)",
                (unsigned long long)x->peer_len, x->peer_tag, posted->len, posted->tag);
    TEST_ASSERT(x->own_len == sent->len && x->own_tag == sent->tag &&
                    memcmp(x->own_check, sent->check, sizeof(x->check)) == 0,
                "notice: the peer got %llu bytes tag %u, wanted %zu tag %u (or the check bytes differ)",
                (unsigned long long)x->own_len, x->own_tag, sent->len, sent->tag);
}

/* a receives `rlen` bytes tagged `rtag` after one good message; b sends `slen` bytes tagged `stag`; with
 * `check`, the sizes and tags agree but the sender's check bytes differ. */
static void conf_mismatch_case(const conformance_factory_t *f, size_t rlen, uint32_t rtag, size_t slen,
                               uint32_t stag, int check)
{
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 0, &a, &b)) return;
    char good[64], good_in[64], out[256], in[256];
    conf_fill(good, sizeof(good), 5);
    memset(out, 'x', sizeof(out));
    transport_xfer_t sx[2] = {conf_xfer(good, sizeof(good), 1), conf_xfer(out, slen, stag)};
    transport_xfer_t rx[3] = {conf_xfer(good_in, sizeof(good_in), 1), conf_xfer(in, rlen, rtag),
                              conf_xfer(in, 8, 3)};
    if (check) memset(sx[1].check, 0x5a, sizeof(sx[1].check));
    for (int i = 0; i < 2; i++) b->ops->post_send(b, &sx[i]);
    for (int i = 0; i < 3; i++) a->ops->post_recv(a, &rx[i]);
    TEST_ASSERT(conf_wait(a, b, rx, 3), "mismatch not reported");
    CONF_EXPECT_DONE(rx[0]);
    TEST_ASSERT(conf_check(good_in, sizeof(good_in), 5) == SIZE_MAX, "message before the mismatch differs");
    CONF_EXPECT_FAILED(rx[1], CHORUS_ERR_MISMATCH);
    TEST_ASSERT(rx[1].peer_len == slen && rx[1].peer_tag == stag, "peer_len %llu peer_tag %u, wanted %zu %u",
                (unsigned long long)rx[1].peer_len, rx[1].peer_tag, slen, stag);
    TEST_ASSERT(memcmp(rx[1].peer_check, sx[1].check, sizeof(sx[1].check)) == 0, "peer_check is not the sender's");
    TEST_ASSERT(rx[1].done == 0, "a mismatched receive claims %zu final bytes", rx[1].done);
    CONF_EXPECT_FAILED(rx[2], CHORUS_ERR_MISMATCH);
    int moved;
    TEST_ASSERT(a->ops->progress(a, &moved) == CHORUS_ERR_MISMATCH, "the mismatch must stick");
    transport_xfer_t late = conf_xfer(in, 8, 4);
    TEST_ASSERT(a->ops->post_send(a, &late) == CHORUS_ERR_MISMATCH, "a post after the mismatch must fail");
    CONF_EXPECT_FAILED(late, CHORUS_ERR_MISMATCH);
    /* The peer learns the connection is gone instead of waiting for an answer, and from the notice what
     * differed: what a had posted, and what it got from b instead. */
    transport_xfer_t answer = conf_xfer(in, 8, 9);
    b->ops->post_recv(b, &answer);
    TEST_ASSERT(conf_wait(b, NULL, &answer, 1), "the peer never learnt of the failed connection");
    CONF_EXPECT_FAILED(answer, CHORUS_ERR_MISMATCH);
    conf_expect_notice(&answer, &rx[1], &sx[1]);
    a->ops->close(a);
    b->ops->close(b);
}

/* A sender that only sends learns of the mismatch its message caused, whether its send is still under way
 * (a message larger than the socket buffer or ring) or long done (the connection idle): the connection
 * fails with MISMATCH, and the notice (what the receiver had posted, what it got) comes with its pending
 * transfers and with any posted later. */
static void conf_test_mismatch_sender(const conformance_factory_t *f, size_t len, int idle)
{
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 64 << 10, &a, &b)) return;
    char *out = calloc(1, len), *in = calloc(1, len);
    transport_xfer_t s = conf_xfer(out, len, 7), r = conf_xfer(in, len, 7);
    memset(s.check, 0x11, sizeof(s.check));
    memset(r.check, 0x22, sizeof(r.check));
    TEST_ASSERT(b->ops->post_send(b, &s) == CHORUS_SUCCESS, "post_send");
    if (idle) TEST_ASSERT(conf_wait(b, NULL, &s, 1) && s.state == XFER_DONE, "a small send did not complete");
    TEST_ASSERT(a->ops->post_recv(a, &r) == CHORUS_SUCCESS, "post_recv");
    TEST_ASSERT(conf_wait(a, b, &r, 1), "mismatch not reported");
    CONF_EXPECT_FAILED(r, CHORUS_ERR_MISMATCH);
    TEST_ASSERT(conf_drive(&b, 1, conf_conn_failed, b), "the sender never learnt of the mismatch (%s)",
                idle ? "idle" : "sending");
    int moved;
    TEST_ASSERT(b->ops->progress(b, &moved) == CHORUS_ERR_MISMATCH, "the sender's connection failed otherwise");
    if (!idle) {
        CONF_EXPECT_FAILED(s, CHORUS_ERR_MISMATCH);
        conf_expect_notice(&s, &r, &s);
    }
    transport_xfer_t late = conf_xfer(in, 8, 3);
    TEST_ASSERT(b->ops->post_send(b, &late) == CHORUS_ERR_MISMATCH, "a post after the notice must fail");
    CONF_EXPECT_FAILED(late, CHORUS_ERR_MISMATCH);
    conf_expect_notice(&late, &r, &s);
    free(out);
    free(in);
    a->ops->close(a);
    b->ops->close(b);
}

static void conf_test_mismatch(const conformance_factory_t *f)
{
    conf_test_mismatch_sender(f, 64, 1);
    conf_test_mismatch_sender(f, 8 << 20, 0);
    conf_mismatch_case(f, 100, 8, 100, 7, 0); /* tag */
    conf_mismatch_case(f, 100, 7, 200, 7, 0); /* the sender's message is longer */
    conf_mismatch_case(f, 200, 7, 50, 7, 0);  /* the sender's message is shorter */
    conf_mismatch_case(f, 0, 7, 0, 8, 0);     /* tag, without payload */
    conf_mismatch_case(f, 100, 7, 100, 7, 1); /* check bytes */
    conf_mismatch_case(f, 0, 7, 0, 7, 1);     /* check bytes, without payload */
}

static void conf_test_idle_close(const conformance_factory_t *f)
{
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 0, &a, &b)) return;
    b->ops->close(b);
    TEST_ASSERT(conf_drive(&a, 1, conf_conn_failed, a), "an idle end never noticed the peer's close");
    int moved;
    TEST_ASSERT(a->ops->progress(a, &moved) == CHORUS_ERR_REMOTE, "wanted REMOTE after the peer's close");
    char buf[8];
    transport_xfer_t late = conf_xfer(buf, 8, 1);
    TEST_ASSERT(a->ops->post_recv(a, &late) == CHORUS_ERR_REMOTE, "a post after the close must fail");
    CONF_EXPECT_FAILED(late, CHORUS_ERR_REMOTE);
    a->ops->close(a);
}

/* abandon(): posted transfers are given back untouched while the peer keeps sending, the peer is not
 * disturbed, and the peer's eventual close is still reported. */
static void conf_test_abandon(const conformance_factory_t *f)
{
    transport_conn_t *a, *b;
    if (!conf_pair(f, 4096, 0, &a, &b)) return;
    static char out[1 << 20], in[1 << 20];
    memset(out, 0x5a, sizeof(out));
    memset(in, 0, sizeof(in));
    transport_xfer_t r = conf_xfer(in, sizeof(in), 7), s = conf_xfer(out, sizeof(out), 7);
    TEST_ASSERT(a->ops->post_recv(a, &r) == CHORUS_SUCCESS, "post_recv");
    a->ops->abandon(a, NULL);
    TEST_ASSERT(b->ops->post_send(b, &s) == CHORUS_SUCCESS, "post_send");
    for (int i = 0; i < 200 && s.state == XFER_PENDING; i++) {
        int moved;
        TEST_ASSERT(a->ops->progress(a, &moved) == CHORUS_SUCCESS, "abandoned end failed while the peer lives");
        b->ops->progress(b, &moved);
        usleep(1000);
    }
    TEST_ASSERT(r.state == XFER_PENDING && r.done == 0 && in[0] == 0 && in[sizeof(in) - 1] == 0,
                "an abandoned receive was written to");
    b->ops->close(b);
    TEST_ASSERT(conf_drive(&a, 1, conf_conn_failed, a), "an abandoned end never noticed the peer's close");
    a->ops->close(a);
}

/* abandon() with a farewell: a peer waiting to receive (asleep in poll) fails at once with REMOTE and
 * the farewell's bytes, after the messages sent before it; so does a transfer it posts later. */
static void conf_test_farewell(const conformance_factory_t *f)
{
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 0, &a, &b)) return;
    char msg[100], in[100], next_in[8], late_in[8];
    uint8_t words[TRANSPORT_NOTICE_BYTES];
    conf_fill(msg, sizeof(msg), 11);
    conf_fill(words, sizeof(words), 12);
    transport_xfer_t s = conf_xfer(msg, sizeof(msg), 1), r[2] = {conf_xfer(in, sizeof(in), 1),
                                                                    conf_xfer(next_in, 8, 2)};
    TEST_ASSERT(a->ops->post_send(a, &s) == CHORUS_SUCCESS, "post_send");
    TEST_ASSERT(conf_wait(a, NULL, &s, 1), "send did not complete");
    for (int i = 0; i < 2; i++) b->ops->post_recv(b, &r[i]);
    conf_peer_t peer;
    conf_peer_start(&peer, b, r, 2);
    usleep(20000); /* let b go to sleep */
    a->ops->abandon(a, words);
    TEST_ASSERT(conf_peer_join(&peer), "the peer never learnt of the farewell");
    CONF_EXPECT_DONE(r[0]);
    TEST_ASSERT(conf_check(in, sizeof(in), 11) == SIZE_MAX, "the message before the farewell differs");
    CONF_EXPECT_FAILED(r[1], CHORUS_ERR_REMOTE);
    TEST_ASSERT(r[1].peer_farewell && memcmp(r[1].farewell, words, sizeof(words)) == 0,
                "the farewell's bytes did not come with the failure");
    transport_xfer_t late = conf_xfer(late_in, 8, 3);
    TEST_ASSERT(b->ops->post_recv(b, &late) == CHORUS_ERR_REMOTE, "a post after the farewell must fail");
    TEST_ASSERT(late.peer_farewell && memcmp(late.farewell, words, sizeof(words)) == 0,
                "a later transfer did not get the farewell's bytes");
    a->ops->close(a);
    b->ops->close(b);
}

/* What the peer sent before it closed in good order (its goodbye last) is still delivered, as the last
 * message of a collective must be when its sender goes on to destroy its communicator; only what comes
 * after fails, with REMOTE. */
static void conf_test_close_after_send(const conformance_factory_t *f)
{
    enum { N = 3, LEN = 1000 };
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 0, &a, &b)) return;
    char out[N][LEN], in[N][LEN], late_in[8];
    transport_xfer_t sx[N + 1], rx[N + 1];
    for (int i = 0; i < N; i++) {
        conf_fill(out[i], LEN, 20 + (uint64_t)i);
        sx[i] = conf_xfer(out[i], LEN, (uint32_t)i);
        b->ops->post_send(b, &sx[i]);
    }
    sx[N] = conf_xfer(NULL, 0, TRANSPORT_TAG_GOODBYE);
    b->ops->post_send(b, &sx[N]);
    TEST_ASSERT(conf_wait(b, NULL, sx, N + 1), "sends never left before the close");
    b->ops->close(b);
    /* Let a idle a while first, so that it may notice the close before anything is posted. */
    for (int turn = 0; turn < 3; turn++) {
        int moved;
        TEST_ASSERT(a->ops->progress(a, &moved) == CHORUS_SUCCESS,
                    "unread messages ending with the goodbye, yet the connection failed");
        short events = 0;
        int fd = a->ops->poll_fd(a, &events);
        struct pollfd pfd = {.fd = fd, .events = events};
        poll(&pfd, fd >= 0, 20);
    }
    for (int i = 0; i < N; i++) {
        rx[i] = conf_xfer(in[i], LEN, (uint32_t)i);
        a->ops->post_recv(a, &rx[i]);
    }
    rx[N] = conf_xfer(late_in, sizeof(late_in), N);
    a->ops->post_recv(a, &rx[N]);
    TEST_ASSERT(conf_wait(a, NULL, rx, N + 1), "receives after the peer's close hung");
    for (int i = 0; i < N; i++) {
        CONF_EXPECT_DONE(rx[i]);
        TEST_ASSERT(conf_check(in[i], LEN, 20 + (uint64_t)i) == SIZE_MAX, "message %d sent before the close differs", i);
    }
    CONF_EXPECT_FAILED(rx[N], CHORUS_ERR_REMOTE);
    a->ops->close(a);
}

/* A peer that sent ahead and then closed without its goodbye crashed: the idle end fails at once, with
 * nothing posted, instead of hiding the crash behind messages nobody has asked for yet (a rank busy with
 * another peer would otherwise not learn of it until it got that far). */
static void conf_test_close_behind_unread(const conformance_factory_t *f)
{
    enum { N = 3, LEN = 1000 };
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 0, &a, &b)) return;
    char out[N][LEN];
    transport_xfer_t sx[N];
    for (int i = 0; i < N; i++) {
        conf_fill(out[i], LEN, 30 + (uint64_t)i);
        sx[i] = conf_xfer(out[i], LEN, (uint32_t)i);
        b->ops->post_send(b, &sx[i]);
    }
    TEST_ASSERT(conf_wait(b, NULL, sx, N), "sends never left before the close");
    /* Let a see the unread bytes first, as a rank busy elsewhere would. */
    int moved;
    TEST_ASSERT(a->ops->progress(a, &moved) == CHORUS_SUCCESS, "the peer is still there");
    b->ops->close(b);
    TEST_ASSERT(conf_drive(&a, 1, conf_conn_failed, a), "an idle end never noticed a close behind unread messages");
    TEST_ASSERT(a->ops->progress(a, &moved) == CHORUS_ERR_REMOTE, "wanted REMOTE after a close without goodbye");
    a->ops->close(a);
}

typedef struct conf_started {
    transport_xfer_t *xfers;
    int n;
} conf_started_t;

/* Holds once every transfer has moved some bytes. */
static int conf_started_cond(void *arg)
{
    conf_started_t *s = arg;
    for (int i = 0; i < s->n; i++)
        if (s->xfers[i].done == 0) return 0;
    return 1;
}

static void conf_test_close_mid_transfer(const conformance_factory_t *f)
{
    const size_t len = 16u << 20;
    transport_conn_t *a, *b;
    /* Small socket buffers so the message cannot sit wholly in flight when b goes. */
    if (!conf_pair(f, 64 << 10, 256 << 10, &a, &b)) return;
    char *out = calloc(1, len), *in = malloc(len);
    TEST_ASSERT(out && in, "out of memory");
    if (!out || !in) goto out;
    transport_xfer_t send = conf_xfer(out, len, 1), recv = conf_xfer(in, len, 1);
    b->ops->post_send(b, &send);
    a->ops->post_recv(a, &recv);
    transport_conn_t *both[2] = {a, b};
    conf_started_t started = {&recv, 1};
    TEST_ASSERT(conf_drive(both, 2, conf_started_cond, &started), "transfer never started");
    TEST_ASSERT(recv.state == XFER_PENDING, "16 MiB arrived before the close: the case proves nothing");
    b->ops->close(b);
    b = NULL;
    TEST_ASSERT(conf_wait(a, NULL, &recv, 1), "receiver hung after the sender closed");
    CONF_EXPECT_FAILED(recv, CHORUS_ERR_REMOTE);
    TEST_ASSERT(recv.done < len, "done %zu of %zu", recv.done, len);
    transport_xfer_t late = conf_xfer(out, 8, 2);
    TEST_ASSERT(a->ops->post_send(a, &late) == CHORUS_ERR_REMOTE, "a post after the close must fail");
    CONF_EXPECT_FAILED(late, CHORUS_ERR_REMOTE);
out:
    free(out);
    free(in);
    a->ops->close(a);
    if (b) b->ops->close(b);
}

static void conf_drop_inherited(const conformance_factory_t *f, transport_conn_t *conn)
{
    if (f->drop_inherited)
        f->drop_inherited(conn);
    else
        conn->ops->close(conn);
}

static void conf_test_peer_killed(const conformance_factory_t *f)
{
    const size_t len = 32u << 20;
    transport_conn_t *a, *b;
    if (!conf_pair(f, 256 << 10, 256 << 10, &a, &b)) return;
    char *out = calloc(1, len), *in = malloc(len);
    TEST_ASSERT(out && in, "out of memory");
    if (!out || !in) goto out;
    fflush(NULL);
    pid_t pid = fork();
    TEST_ASSERT(pid >= 0, "fork failed");
    if (pid < 0) goto out;
    if (pid == 0) {
        /* The child: b's owner, sending and receiving until it is killed (or, as a guard, times out). */
        alarm(CONF_WAIT_MS / 1000 + 10);
        conf_drop_inherited(f, a);
        transport_xfer_t x[2] = {conf_xfer(out, len, 1), conf_xfer(in, len, 2)};
        b->ops->post_send(b, &x[0]);
        b->ops->post_recv(b, &x[1]);
        conf_drive(&b, 1, conf_never, NULL);
        _exit(0);
    }
    conf_drop_inherited(f, b);
    b = NULL;
    transport_xfer_t x[2] = {conf_xfer(in, len, 1), conf_xfer(out, len, 2)};
    a->ops->post_recv(a, &x[0]);
    a->ops->post_send(a, &x[1]);
    conf_started_t started = {x, 2};
    TEST_ASSERT(conf_drive(&a, 1, conf_started_cond, &started), "transfer with the child never started");
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    TEST_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status 0x%x", status);
    TEST_ASSERT(conf_wait(a, NULL, x, 2), "transfers hung after the peer was killed");
    CONF_EXPECT_FAILED(x[0], CHORUS_ERR_REMOTE);
    CONF_EXPECT_FAILED(x[1], CHORUS_ERR_REMOTE);
out:
    free(out);
    free(in);
    a->ops->close(a);
    if (b) b->ops->close(b);
}

static void conf_test_close_pending(const conformance_factory_t *f)
{
    const size_t len = 1u << 20;
    transport_conn_t *a, *b;
    /* Small socket buffers so that not everything posted fits in flight. */
    if (!conf_pair(f, 64 << 10, 256 << 10, &a, &b)) return;
    char *mem = calloc(9, len);
    TEST_ASSERT(mem, "out of memory");
    /* a: four sends and two receives; b: two sends and one receive, so bytes are in flight both ways. */
    transport_xfer_t ax[6], bx[3];
    for (int i = 0; mem && i < 4; i++) {
        ax[i] = conf_xfer(mem + (size_t)i * len, len, (uint32_t)i);
        a->ops->post_send(a, &ax[i]);
    }
    for (int i = 0; mem && i < 2; i++) {
        ax[4 + i] = conf_xfer(mem + (size_t)(4 + i) * len, len, (uint32_t)i);
        a->ops->post_recv(a, &ax[4 + i]);
        bx[i] = conf_xfer(mem + 6 * len, len, (uint32_t)i);
        b->ops->post_send(b, &bx[i]);
    }
    if (mem) {
        bx[2] = conf_xfer(mem + 8 * len, len, 0);
        b->ops->post_recv(b, &bx[2]);
        transport_conn_t *both[2] = {a, b};
        conf_started_t started = {ax + 4, 1};
        TEST_ASSERT(conf_drive(both, 2, conf_started_cond, &started), "transfers never started");
        TEST_ASSERT(ax[3].state == XFER_PENDING, "nothing left pending");
    }
    a->ops->close(a);
    b->ops->close(b);
    /* Abandoned transfers are the caller's again, left as they were. */
    TEST_ASSERT(!mem || ax[3].state == XFER_PENDING, "an abandoned transfer changed state");
    free(mem);
}

static inline void conformance_run(const conformance_factory_t *f)
{
    conf_test_connect(f);
    conf_test_small(f);
    conf_test_zero_length(f);
    conf_test_large(f);
    conf_test_ordering(f);
    conf_test_mismatch(f);
    conf_test_idle_close(f);
    conf_test_close_after_send(f);
    conf_test_close_behind_unread(f);
    conf_test_close_mid_transfer(f);
    conf_test_peer_killed(f);
    conf_test_close_pending(f);
    conf_test_abandon(f);
    conf_test_farewell(f);
}

#endif
