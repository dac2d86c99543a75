/* The progress engine's blocked wait, over real connections (a socket pair under the TCP transport): a
 * failure found while the run is blocked in poll() is reported by the step that owns the failed transfer
 * when it has one, and by the connection's index otherwise. */
#include <string.h>
#include <sys/socket.h>

#include "progress/progress.h"
#include "test.h"
#include "util/util.h"

typedef struct watch {
    transport_xfer_t *recv; /* the step's transfer; the step never drives its connection itself */
    int described;          /* the step reported the failure from its transfer */
} watch_t;

static chorus_result_t watch_step(void *arg, progress_status_t *status)
{
    watch_t *w = arg;
    *status = PROGRESS_IDLE;
    if (w->recv && w->recv->state == XFER_FAILED) {
        w->described = 1;
        return w->recv->err;
    }
    return CHORUS_SUCCESS;
}

static void make_pair(transport_conn_t **a, transport_conn_t **b)
{
    int sv[2];
    transport_options_t opt = {.chunk_bytes = 64 << 10};
    TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
    TEST_ASSERT(tcp_conn_open(sv[0], &opt, a) == CHORUS_SUCCESS, "open a");
    TEST_ASSERT(tcp_conn_open(sv[1], &opt, b) == CHORUS_SUCCESS, "open b");
}

/* The peer sends 32 bytes where 64 were posted: poll() wakes, the engine's progress finds the mismatch,
 * and the step, which holds the receive, must be the one to report it (with both lengths). */
static void test_mismatch_found_while_blocked(void)
{
    progress_engine_t pe;
    TEST_ASSERT(progress_engine_init(&pe, 0, 2) == CHORUS_SUCCESS, "engine");
    transport_conn_t *a, *b;
    make_pair(&a, &b);
    char in[64], out[32] = {0};
    transport_xfer_t recv = {.buf = in, .len = sizeof(in), .tag = 7};
    transport_xfer_t send = {.buf = out, .len = sizeof(out), .tag = 7};
    TEST_ASSERT(a->ops->post_recv(a, &recv) == CHORUS_SUCCESS, "post recv");
    TEST_ASSERT(b->ops->post_send(b, &send) == CHORUS_SUCCESS, "post send");
    for (int i = 0; i < 1000 && send.state == XFER_PENDING; i++) {
        int moved;
        (void)b->ops->progress(b, &moved);
    }
    TEST_ASSERT(send.state == XFER_DONE, "the 32 bytes went out (state %d)", send.state);
    watch_t w = {.recv = &recv};
    int failed = -2;
    transport_conn_t *conns[1] = {a};
    chorus_result_t res = progress_run(&pe, watch_step, &w, conns, 1, time_deadline_ms(5000), &failed);
    TEST_ASSERT(res == CHORUS_ERR_MISMATCH, "run: %s", chorus_result_name(res));
    TEST_ASSERT(w.described, "the step reported the failure from its receive");
    TEST_ASSERT(failed == -1, "no bare connection failure is reported (failed %d)", failed);
    TEST_ASSERT(recv.peer_len == sizeof(out), "the receive knows what arrived: %llu bytes",
                (unsigned long long)recv.peer_len);
    a->ops->close(a);
    b->ops->close(b);
    progress_engine_fini(&pe);
}

/* A connection the step does not use fails (its peer closed): the run names it by index. */
static void test_other_connection_fails(void)
{
    progress_engine_t pe;
    TEST_ASSERT(progress_engine_init(&pe, 0, 2) == CHORUS_SUCCESS, "engine");
    transport_conn_t *a, *b, *c, *d;
    make_pair(&a, &b);
    make_pair(&c, &d);
    d->ops->close(d);
    watch_t w = {0};
    int failed = -2;
    transport_conn_t *conns[2] = {a, c};
    chorus_result_t res = progress_run(&pe, watch_step, &w, conns, 2, time_deadline_ms(5000), &failed);
    TEST_ASSERT(res == CHORUS_ERR_REMOTE, "run: %s", chorus_result_name(res));
    TEST_ASSERT(failed == 1, "the closed connection is named (failed %d)", failed);
    TEST_ASSERT(!w.described, "the step had nothing to report");
    a->ops->close(a);
    b->ops->close(b);
    c->ops->close(c);
    progress_engine_fini(&pe);
}

int main(void)
{
    test_set_timeout(30);
    test_mismatch_found_while_blocked();
    test_other_connection_fails();
    return test_report();
}
