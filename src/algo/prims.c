/* Primitives over the transports: each builds a set of transfers, then lets the progress engine drive a
 * step function that advances the connections involved and does the per-chunk work (reduce, forward). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/prims_impl.h"
#include "util/log.h"
#include "util/util.h"

int prims_rank(const prims_t *p) { return p->rank; }
int prims_nranks(const prims_t *p) { return p->nranks; }
size_t prims_chunk_bytes(const prims_t *p) { return p->chunk_bytes; }

chorus_result_t prims_scratch(prims_t *p, int slot, size_t bytes, void **buf_p)
{
    if (bytes > p->scratch_bytes[slot]) {
        free(p->scratch[slot]);
        p->scratch[slot] = NULL;
        p->scratch_bytes[slot] = 0;
        if (posix_memalign(&p->scratch[slot], 64, bytes) != 0) {
            snprintf(p->err, p->errlen, "%s: cannot allocate %zu bytes of scratch memory", p->op_name, bytes);
            return CHORUS_ERR_NO_MEMORY;
        }
        p->scratch_bytes[slot] = bytes;
    }
    *buf_p = p->scratch[slot];
    return CHORUS_SUCCESS;
}

void prims_fini(prims_t *p)
{
    for (int i = 0; i < 2; i++) {
        free(p->scratch[i]);
        p->scratch[i] = NULL;
        p->scratch_bytes[i] = 0;
    }
}

/* An exchange: the transfers of one primitive call with at most one sending and one receiving peer. */
typedef struct exch {
    prims_t *p;
    int send_peer, recv_peer;
    transport_conn_t *conns[2];
    int nconns;
    transport_xfer_t *sends, *recvs;
    int nsends, nrecvs;
    int sends_posted;  /* sends are posted in order, possibly as their data becomes ready */
    int sends_ready;   /* how many sends may be posted now */
    int recvs_handled; /* receives whose data was consumed (reduced or forwarded) */
    size_t recv_consumed; /* bytes of recvs[recvs_handled] already consumed (streamed reduction) */
    /* Streamed reduction of a single receive: dst = local OP received, chunk by chunk. */
    const prims_reduce_t *red;
    const char *local;
    char *dst;
    /* Per-chunk hook of the chain primitives, called when receive i completes. */
    chorus_result_t (*on_chunk)(struct exch *e, int i);
    char *chain_buf;
} exch_t;

static const char *prims_host(const prims_t *p, int peer) { return p->hosts ? p->hosts[peer] : "?"; }

/* Describe a failed transfer from `peer` in the communicator's error buffer. */
static chorus_result_t prims_fail_xfer(prims_t *p, int peer, const transport_xfer_t *x, int sending)
{
    if (x->err == CHORUS_ERR_MISMATCH) {
        snprintf(p->err, p->errlen,
                 "%s #%llu: rank %d (%s) sent a message of %llu bytes with tag %#x where %zu bytes with tag %#x "
                 "were expected: the ranks called different operations or sizes",
                 p->op_name, (unsigned long long)p->op_seq, peer, prims_host(p, peer),
                 (unsigned long long)x->peer_len, x->peer_tag, x->len, x->tag);
    } else {
        snprintf(p->err, p->errlen, "%s #%llu: connection to rank %d (%s) failed while %s (%s): the peer exited, "
                 "crashed or closed the communicator",
                 p->op_name, (unsigned long long)p->op_seq, peer, prims_host(p, peer),
                 sending ? "sending" : "receiving", x->sys_errno ? strerror(x->sys_errno) : "connection closed");
    }
    LOG_WARN(LOG_SUB_NET, "%s", p->err);
    return x->err;
}

static chorus_result_t exch_post_ready_sends(exch_t *e)
{
    transport_conn_t *c = e->p->conns[e->send_peer];
    while (e->sends_posted < e->sends_ready) {
        transport_xfer_t *x = &e->sends[e->sends_posted++];
        if (c->ops->post_send(c, x) != CHORUS_SUCCESS) return prims_fail_xfer(e->p, e->send_peer, x, 1);
    }
    return CHORUS_SUCCESS;
}

/* Reduce whatever complete elements of the current receive have landed but are not reduced yet. */
static void exch_stream_reduce(exch_t *e, const transport_xfer_t *x)
{
    size_t chunk = e->p->chunk_bytes;
    size_t upto = x->state == XFER_DONE ? x->len : x->done / chunk * chunk;
    upto -= upto % e->red->elem;
    if (upto <= e->recv_consumed) return;
    size_t from = e->recv_consumed;
    reduce_apply3(e->dst + from, e->local + from, (const char *)x->buf + from, (upto - from) / e->red->elem,
                  e->red->dtype, e->red->op);
    e->recv_consumed = upto;
}

static chorus_result_t exch_step(void *arg, progress_status_t *status)
{
    exch_t *e = arg;
    int moved = 0;
    for (int i = 0; i < e->nconns; i++) {
        int m = 0;
        (void)e->conns[i]->ops->progress(e->conns[i], &m); /* failures surface in the transfers */
        moved |= m;
    }
    for (int i = 0; i < e->nsends; i++)
        if (e->sends[i].state == XFER_FAILED) return prims_fail_xfer(e->p, e->send_peer, &e->sends[i], 1);
    while (e->recvs_handled < e->nrecvs) {
        transport_xfer_t *x = &e->recvs[e->recvs_handled];
        if (x->state == XFER_FAILED) return prims_fail_xfer(e->p, e->recv_peer, x, 0);
        if (e->red && !e->on_chunk) exch_stream_reduce(e, x);
        if (x->state != XFER_DONE) break;
        if (e->on_chunk) CHECK(e->on_chunk(e, e->recvs_handled));
        e->recvs_handled++;
        e->recv_consumed = 0;
        moved = 1;
    }
    if (e->sends_posted < e->sends_ready) {
        CHECK(exch_post_ready_sends(e));
        moved = 1;
    }
    int done = e->recvs_handled == e->nrecvs && e->sends_posted == e->nsends;
    for (int i = 0; done && i < e->nsends; i++) done = e->sends[i].state == XFER_DONE;
    *status = done ? PROGRESS_DONE : moved ? PROGRESS_MOVED : PROGRESS_IDLE;
    return CHORUS_SUCCESS;
}

/* Name the peer a timed-out or aborted exchange was waiting on. */
static chorus_result_t exch_fail_wait(exch_t *e, chorus_result_t res)
{
    prims_t *p = e->p;
    int peer = e->recvs_handled < e->nrecvs ? e->recv_peer : e->send_peer;
    if (res == CHORUS_ERR_TIMEOUT)
        snprintf(p->err, p->errlen, "%s #%llu: timed out waiting for rank %d (%s) to %s; it may be stuck, or have "
                 "called a different operation (raise CHORUS_TIMEOUT if it is just slow)",
                 p->op_name, (unsigned long long)p->op_seq, peer, prims_host(p, peer),
                 peer == e->recv_peer && e->recvs_handled < e->nrecvs ? "send" : "receive");
    else if (res == CHORUS_ERR_ABORTED)
        snprintf(p->err, p->errlen, "%s #%llu: the communicator was aborted", p->op_name, (unsigned long long)p->op_seq);
    if (res == CHORUS_ERR_TIMEOUT) LOG_WARN(LOG_SUB_NET, "%s", p->err);
    return res;
}

static chorus_result_t exch_run(exch_t *e)
{
    prims_t *p = e->p;
    if ((e->nsends && (e->send_peer < 0 || e->send_peer >= p->nranks || e->send_peer == p->rank)) ||
        (e->nrecvs && (e->recv_peer < 0 || e->recv_peer >= p->nranks || e->recv_peer == p->rank))) {
        snprintf(p->err, p->errlen, "%s: internal error: bad peer (send %d, recv %d, rank %d)", p->op_name,
                 e->send_peer, e->recv_peer, p->rank);
        return CHORUS_ERR_INTERNAL;
    }
    if (e->nrecvs) {
        transport_conn_t *c = p->conns[e->recv_peer];
        e->conns[e->nconns++] = c;
        for (int i = 0; i < e->nrecvs; i++)
            if (c->ops->post_recv(c, &e->recvs[i]) != CHORUS_SUCCESS)
                return prims_fail_xfer(p, e->recv_peer, &e->recvs[i], 0);
    }
    if (e->nsends) {
        if (!e->nrecvs || e->send_peer != e->recv_peer) e->conns[e->nconns++] = p->conns[e->send_peer];
        CHECK(exch_post_ready_sends(e));
    }
    chorus_result_t res = progress_run(p->engine, exch_step, e, e->conns, e->nconns, p->deadline_ns);
    if (res == CHORUS_ERR_TIMEOUT || res == CHORUS_ERR_ABORTED) return exch_fail_wait(e, res);
    return res;
}

static void xfer_init(transport_xfer_t *x, const void *buf, size_t len, uint32_t tag)
{
    memset(x, 0, sizeof(*x));
    x->buf = (void *)buf;
    x->len = len;
    x->tag = tag;
}

chorus_result_t prims_sendrecv(prims_t *p, int send_peer, const void *sbuf, size_t sbytes, int recv_peer, void *rbuf,
                               size_t rbytes)
{
    transport_xfer_t s, r;
    xfer_init(&s, sbuf, sbytes, p->tag);
    xfer_init(&r, rbuf, rbytes, p->tag);
    exch_t e = {.p = p, .send_peer = send_peer, .recv_peer = recv_peer, .sends = &s, .recvs = &r,
                .nsends = send_peer >= 0, .nrecvs = recv_peer >= 0, .sends_ready = send_peer >= 0};
    return exch_run(&e);
}

chorus_result_t prims_send(prims_t *p, int peer, const void *buf, size_t bytes)
{
    return prims_sendrecv(p, peer, buf, bytes, -1, NULL, 0);
}

chorus_result_t prims_recv(prims_t *p, int peer, void *buf, size_t bytes)
{
    return prims_sendrecv(p, -1, NULL, 0, peer, buf, bytes);
}

chorus_result_t prims_sendrecv_reduce(prims_t *p, int send_peer, const void *sbuf, size_t sbytes, int recv_peer,
                                      const void *local, void *dst, size_t rbytes, const prims_reduce_t *red)
{
    void *tmp;
    CHECK(prims_scratch(p, 0, rbytes ? rbytes : 1, &tmp));
    transport_xfer_t s, r;
    xfer_init(&s, sbuf, sbytes, p->tag);
    xfer_init(&r, tmp, rbytes, p->tag);
    exch_t e = {.p = p, .send_peer = send_peer, .recv_peer = recv_peer, .sends = &s, .recvs = &r, .nsends = 1,
                .nrecvs = 1, .sends_ready = 1, .red = red, .local = local, .dst = dst};
    return exch_run(&e);
}

/* Chains move one message per chunk, so that a stage can forward chunk i while chunk i+1 arrives. */
static int chain_nchunks(const prims_t *p, size_t bytes, size_t elem)
{
    size_t chunk = p->chunk_bytes - p->chunk_bytes % elem;
    return bytes ? (int)((bytes + chunk - 1) / chunk) : 1;
}

static void chain_layout(const prims_t *p, size_t bytes, size_t elem, int i, size_t *off_p, size_t *len_p)
{
    size_t chunk = p->chunk_bytes - p->chunk_bytes % elem;
    *off_p = (size_t)i * chunk;
    *len_p = CHORUS_MIN(chunk, bytes - *off_p);
}

static chorus_result_t chain_forward(exch_t *e, int i)
{
    (void)i;
    if (e->nsends) e->sends_ready++;
    return CHORUS_SUCCESS;
}

static chorus_result_t chain_reduce_chunk(exch_t *e, int i)
{
    const transport_xfer_t *x = &e->recvs[i];
    size_t off = (size_t)((const char *)x->buf - e->chain_buf);
    reduce_apply3(e->dst + off, e->local + off, x->buf, x->len / e->red->elem, e->red->dtype, e->red->op);
    if (e->nsends) e->sends_ready++;
    return CHORUS_SUCCESS;
}

/* Shared set-up of the two chain primitives: recvs land in rbuf, sends read sbuf, chunk by chunk. */
static chorus_result_t chain_run(prims_t *p, int recv_peer, int send_peer, const char *sbuf, char *rbuf, size_t bytes,
                                 size_t elem, exch_t *e)
{
    int n = chain_nchunks(p, bytes, elem);
    transport_xfer_t *xs = calloc((size_t)n * 2, sizeof(*xs));
    if (!xs) return CHORUS_ERR_NO_MEMORY;
    for (int i = 0; i < n; i++) {
        size_t off, len;
        chain_layout(p, bytes, elem, i, &off, &len);
        xfer_init(&xs[i], sbuf + off, len, p->tag);
        xfer_init(&xs[n + i], rbuf + off, len, p->tag);
    }
    e->p = p;
    e->send_peer = send_peer;
    e->recv_peer = recv_peer;
    e->sends = xs;
    e->nsends = send_peer >= 0 ? n : 0;
    e->recvs = xs + n;
    e->nrecvs = recv_peer >= 0 ? n : 0;
    e->sends_ready = recv_peer < 0 ? e->nsends : 0;
    e->chain_buf = rbuf;
    chorus_result_t res = exch_run(e);
    free(xs);
    return res;
}

chorus_result_t prims_chain_copy(prims_t *p, int recv_peer, int send_peer, void *buf, size_t bytes)
{
    exch_t e = {.on_chunk = chain_forward};
    return chain_run(p, recv_peer, send_peer, buf, buf, bytes, 1, &e);
}

chorus_result_t prims_chain_reduce(prims_t *p, int recv_peer, int send_peer, const void *local, void *dst,
                                   size_t bytes, const prims_reduce_t *red)
{
    if (recv_peer < 0) {
        exch_t e = {0};
        return chain_run(p, -1, send_peer, local, NULL, bytes, red->elem, &e);
    }
    void *tmp;
    CHECK(prims_scratch(p, 0, bytes ? bytes : 1, &tmp));
    exch_t e = {.on_chunk = chain_reduce_chunk, .red = red, .local = local, .dst = dst};
    return chain_run(p, recv_peer, send_peer, dst, tmp, bytes, red->elem, &e);
}
