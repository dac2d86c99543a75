/* Primitives over the transports: each builds a set of transfers, then lets the progress engine drive a
 * step function that advances the connections involved and does the per-chunk work (reduce, forward). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/prims_impl.h"
#include "util/copy.h"
#include "util/log.h"
#include "util/util.h"

int prims_rank(const prims_t *p) { return p->rank; }
int prims_nranks(const prims_t *p) { return p->nranks; }
size_t prims_chunk_bytes(const prims_t *p) { return p->chunk_bytes; }
size_t prims_stream_whole(const prims_t *p, size_t whole)
{
    return copy_streams((double)whole, (double)p->cache_share) ? whole : 0;
}
void prims_copy_out(const prims_t *p, void *dst, const void *src, size_t n, size_t whole)
{
    copy_out_part(dst, src, n, prims_stream_whole(p, whole));
}

/* What prims_slots_streaming answers: the choice of c's class after a copy of n bytes by it. */
static void prims_slot_copied(prims_t *p, const copy_shared_t *c, size_t n)
{
    if (n >= COPY_SHARED_MIN) p->slots_streaming = copy_shared_streams(c, n);
}

void prims_copy_slot(prims_t *p, void *slot, const void *src, size_t n)
{
    copy_shared_t *c = &p->slot_copy[copy_shared_class(n)];
    copy_shared(c, slot, src, n);
    prims_slot_copied(p, c, n);
}

void prims_copy_slot_pieces(prims_t *p, char *slot, const char *src, size_t stride, size_t piece, int count,
                            int skip)
{
    size_t total = piece * (size_t)(count - (skip >= 0 && skip < count));
    copy_shared_t *c = &p->slot_copy[copy_shared_class(total)];
    copy_shared_run_t run;
    copy_shared_begin(c, &run, total);
    for (int q = 0; q < count; q++)
        if (q != skip) copy_shared_piece(&run, slot + (size_t)q * piece, src + (size_t)q * stride, piece);
    copy_shared_end(c, &run);
    prims_slot_copied(p, c, total);
}

int prims_slot_streams(const prims_t *p, size_t n)
{
    return copy_shared_streams(&p->slot_copy[copy_shared_class(n)], n);
}

int prims_slots_streaming(const prims_t *p) { return p->slots_streaming; }

void prims_fix_slot_stores(prims_t *p, int streamed)
{
    for (int k = 0; k < COPY_SHARED_CLASSES; k++) copy_shared_fix(&p->slot_copy[k], streamed);
}

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
    shm_arena_close(p->arena);
    p->arena = NULL;
    free(p->direct_slots);
    p->direct_slots = NULL;
    free(p->direct_seen);
    p->direct_seen = NULL;
    free(p->direct_known);
    p->direct_known = NULL;
}

/* An exchange: the transfers of one primitive call with at most one sending and one receiving peer. */
typedef struct exch {
    prims_t *p;
    int send_peer, recv_peer;
    transport_conn_t *conns[2];
    int conn_peer[2];
    int nconns;
    transport_xfer_t *sends, *recvs;
    int nsends, nrecvs;
    int sends_posted;  /* sends are posted in order, possibly as their data becomes ready */
    int sends_ready;   /* how many sends may be posted now */
    int recvs_handled; /* receives whose data was consumed (reduced or forwarded) */
    int recvs_posted;  /* receives are posted in order: all at once, or within recv_window */
    int recv_window;   /* > 0: receives land in that many staging slots, reused as they are consumed */
    /* A reduction exchange or chain: as receive i lands, dst = local OP it, at chunk i's offset. */
    const prims_reduce_t *red;
    const char *local;
    char *dst;
    /* Per-chunk hook of the chain primitives, called when receive i completes. */
    chorus_result_t (*on_chunk)(struct exch *e, int i);
    int on_chunk_forward; /* a reduction chain: send i may go once receive i is reduced */
    /* A local copy done a chunk at a time while the link keeps this rank waiting (a chain head's own
     * output, out of place): copy_done of copy_len bytes so far. */
    const char *copy_src;
    char *copy_dst;
    size_t copy_len, copy_done;
} exch_t;

const char *prims_host(const prims_t *p, int peer) { return p->hosts ? p->hosts[peer] : "?"; }

int prims_host_of(const prims_t *p, int rank) { return p->host_of ? p->host_of[rank] : 0; }

static const char *fp_kind(uint32_t coll) { return coll == COLL_COUNT ? "send/recv" : coll_name((coll_kind_t)coll); }

#define PRIMS_WHY_VERSION 0x57485901u /* "WHY" 1 */

void prims_blame(prims_t *p, chorus_result_t res, int culprit, int finder)
{
    p->why = (prims_why_t){.res = res, .culprit = culprit, .finder = finder, .version = PRIMS_WHY_VERSION};
}

int prims_farewell(const prims_t *p, uint8_t *out)
{
    if (p->why.res == CHORUS_SUCCESS) return 0;
    memset(out, 0, TRANSPORT_NOTICE_BYTES);
    memcpy(out, &p->why, sizeof(p->why));
    return 1;
}

/* A mismatch found by rank `finder` (this rank: p->rank): describe it as seen from here. */
static chorus_result_t prims_describe_mismatch(prims_t *p, int peer, const prims_fingerprint_t *mine,
                                               const prims_fingerprint_t *theirs, int finder)
{
    char what[512], by[96] = "";
    size_t n = 0;
#define DIFF(cond, ...)                                                                                    \
    if ((cond) && n < sizeof(what)) n += (size_t)snprintf(what + n, sizeof(what) - n, __VA_ARGS__)
    DIFF(mine->seq != theirs->seq, "; call number: here #%llu, rank %d #%llu (a rank skipped or added a call)",
         (unsigned long long)mine->seq, peer, (unsigned long long)theirs->seq);
    DIFF(mine->coll != theirs->coll, "; collective: here %s, rank %d %s", fp_kind(mine->coll), peer,
         fp_kind(theirs->coll));
    DIFF(mine->count != theirs->count, "; count: here %llu, rank %d %llu", (unsigned long long)mine->count, peer,
         (unsigned long long)theirs->count);
    DIFF(mine->dtype != theirs->dtype, "; datatype: here %s, rank %d %s", dtype_name((chorus_datatype_t)mine->dtype),
         peer, dtype_name((chorus_datatype_t)theirs->dtype));
    DIFF(mine->op != theirs->op, "; op: here %s, rank %d %s", redop_name((chorus_redop_t)mine->op), peer,
         redop_name((chorus_redop_t)theirs->op));
    DIFF(mine->root != theirs->root, "; root: here %d, rank %d %d", mine->root, peer, theirs->root);
#undef DIFF
    if (finder != p->rank) snprintf(by, sizeof(by), " (rank %d (%s) found it)", finder, prims_host(p, finder));
    snprintf(p->err, p->errlen, "%s #%llu: rank %d (%s) called a different operation than %s #%llu here%s%s: every "
             "rank must make the same calls in the same order with the same arguments", p->op_name,
             (unsigned long long)p->op_seq, peer, prims_host(p, peer), fp_kind(mine->coll),
             (unsigned long long)mine->seq, n ? what : "", by);
    LOG_WARN(LOG_SUB_COLL, "%s", p->err);
    return CHORUS_ERR_MISMATCH;
}

/* What of this rank's to compare a peer's fingerprint with: `mine`, or, for a collective message of an
 * earlier call arriving now, this rank's own call of that number. A rank that received nothing from that
 * peer in that call (a Broadcast root that differs) reads the message only in a later call; compared with
 * the call it belongs to, it shows what differed then (the root) rather than only the call number. */
static const prims_fingerprint_t *prims_my_call(const prims_t *p, const prims_fingerprint_t *theirs)
{
    if (theirs->coll == COLL_COUNT) return p->fp.coll == COLL_COUNT && p->fp.seq == theirs->seq ? &p->fp : NULL;
    const prims_fingerprint_t *past = &p->fp_past[theirs->seq % PRIMS_FP_HISTORY];
    return past->seq == theirs->seq && past->coll != COLL_COUNT && past->seq <= p->fp.seq ? past : NULL;
}

static const prims_fingerprint_t *prims_comparable(const prims_t *p, const prims_fingerprint_t *mine,
                                                   const prims_fingerprint_t *theirs)
{
    const prims_fingerprint_t *m = theirs->seq < mine->seq ? prims_my_call(p, theirs) : NULL;
    return m && memcmp(m, theirs, sizeof(*m)) != 0 ? m : mine;
}

static int prims_agrees(const prims_t *p, const prims_fingerprint_t *theirs)
{
    const prims_fingerprint_t *m = prims_my_call(p, theirs);
    return m && memcmp(m, theirs, sizeof(*m)) == 0;
}

chorus_result_t prims_fail_mismatch(prims_t *p, int peer, const prims_fingerprint_t *mine,
                                    const prims_fingerprint_t *theirs)
{
    mine = prims_comparable(p, mine, theirs);
    prims_blame(p, CHORUS_ERR_MISMATCH, peer, p->rank);
    p->why.finder_fp = *mine;
    p->why.culprit_fp = *theirs;
    return prims_describe_mismatch(p, peer, mine, theirs, p->rank);
}

/* A peer gave up on this operation and said why (prims_why_t, its farewell): fail with that cause, and
 * pass it on. */
static chorus_result_t prims_fail_farewell(prims_t *p, int peer, const uint8_t *words)
{
    prims_why_t w;
    memcpy(&w, words, sizeof(w));
    if (w.version != PRIMS_WHY_VERSION || w.finder < 0 || w.finder >= p->nranks || w.culprit < -1 ||
        w.culprit >= p->nranks) {
        prims_blame(p, CHORUS_ERR_REMOTE, peer, p->rank);
        snprintf(p->err, p->errlen, "%s #%llu step %d: rank %d (%s) gave up on it, for a reason it could not tell",
                 p->op_name, (unsigned long long)p->op_seq, p->step, peer, prims_host(p, peer));
        return CHORUS_ERR_REMOTE;
    }
    p->why = w;
    if (w.res == CHORUS_ERR_MISMATCH && w.culprit >= 0) {
        /* Name the one of the two that called differently from this rank. */
        int other = w.culprit;
        const prims_fingerprint_t *theirs = &w.culprit_fp;
        if (w.culprit == p->rank || (!prims_agrees(p, &w.finder_fp) && prims_agrees(p, &w.culprit_fp))) {
            other = w.finder;
            theirs = &w.finder_fp;
        }
        return prims_describe_mismatch(p, other, prims_comparable(p, &p->fp, theirs), theirs, w.finder);
    }
    char who[96] = "it";
    if (w.finder != peer) snprintf(who, sizeof(who), "rank %d (%s)", w.finder, prims_host(p, w.finder));
    int c = w.culprit;
    chorus_result_t res = w.res == CHORUS_ERR_TIMEOUT ? CHORUS_ERR_TIMEOUT : CHORUS_ERR_REMOTE;
    size_t n = (size_t)snprintf(p->err, p->errlen, "%s #%llu step %d: rank %d (%s) gave up on it: ", p->op_name,
                                (unsigned long long)p->op_seq, p->step, peer, prims_host(p, peer));
    if (n >= p->errlen) n = p->errlen - 1;
    if (w.res == CHORUS_ERR_REMOTE && c >= 0)
        snprintf(p->err + n, p->errlen - n, "%s lost its connection to rank %d (%s): that rank exited, crashed or "
                 "closed the communicator", who, c, prims_host(p, c));
    else if (w.res == CHORUS_ERR_TIMEOUT && c >= 0)
        snprintf(p->err + n, p->errlen - n, "%s timed out waiting for rank %d (%s); that rank may be stuck, or have "
                 "called a different operation (raise CHORUS_TIMEOUT if it is just slow)", who, c, prims_host(p, c));
    else if (w.res == CHORUS_ERR_ABORTED)
        snprintf(p->err + n, p->errlen - n, "%s%s communicator was aborted", who, w.finder != peer ? "'s" : "s");
    else if (c >= 0)
        snprintf(p->err + n, p->errlen - n, "%s failed (%s) on its part with rank %d (%s)", who,
                 chorus_result_name((chorus_result_t)w.res), c, prims_host(p, c));
    else
        snprintf(p->err + n, p->errlen - n, "%s failed (%s)", who, chorus_result_name((chorus_result_t)w.res));
    LOG_WARN(LOG_SUB_NET, "%s", p->err);
    return res;
}

/* Describe a failed transfer from `peer` in the communicator's error buffer. A mismatch is described by
 * the fingerprints in the check bytes: found here, this transfer's and the one that arrived; found by the
 * peer (its notice), the one it had posted and the one of this rank's that it got instead, which may
 * belong to an earlier call of a rank that only sent. */
static chorus_result_t prims_fail_xfer(prims_t *p, int peer, const transport_xfer_t *x, int sending)
{
    if (x->err == CHORUS_ERR_REMOTE && x->peer_farewell) return prims_fail_farewell(p, peer, x->farewell);
    const uint8_t *own = x->peer_found ? x->own_check : x->check;
    if (x->err == CHORUS_ERR_MISMATCH && memcmp(own, x->peer_check, sizeof(x->check)) != 0) {
        prims_fingerprint_t mine, theirs;
        memcpy(&mine, own, sizeof(mine));
        memcpy(&theirs, x->peer_check, sizeof(theirs));
        if (!x->peer_found) return prims_fail_mismatch(p, peer, &mine, &theirs);
        /* The peer found that a message of this rank's differs: its finding, passed on as such. */
        prims_blame(p, CHORUS_ERR_MISMATCH, p->rank, peer);
        p->why.finder_fp = theirs;
        p->why.culprit_fp = mine;
        return prims_describe_mismatch(p, peer, &mine, &theirs, p->rank);
    }
    prims_blame(p, x->err, peer, p->rank);
    memcpy(&p->why.finder_fp, x->check, sizeof(p->why.finder_fp)); /* a mismatch of length or tag alone */
    p->why.culprit_fp = p->why.finder_fp;
    if (x->err == CHORUS_ERR_MISMATCH && x->peer_found) {
        snprintf(p->err, p->errlen,
                 "%s #%llu: rank %d (%s) expected a message of %llu bytes with tag %#x from this rank and got one "
                 "of %llu bytes with tag %#x: the ranks called different operations or sizes",
                 p->op_name, (unsigned long long)p->op_seq, peer, prims_host(p, peer),
                 (unsigned long long)x->peer_len, x->peer_tag, (unsigned long long)x->own_len, x->own_tag);
    } else if (x->err == CHORUS_ERR_MISMATCH) {
        snprintf(p->err, p->errlen,
                 "%s #%llu: rank %d (%s) sent a message of %llu bytes with tag %#x where %zu bytes with tag %#x "
                 "were expected: the ranks called different operations or sizes",
                 p->op_name, (unsigned long long)p->op_seq, peer, prims_host(p, peer),
                 (unsigned long long)x->peer_len, x->peer_tag, x->len, x->tag);
    } else {
        snprintf(p->err, p->errlen, "%s #%llu step %d: connection to rank %d (%s) failed while %s (%s): the peer "
                 "exited, crashed or closed the communicator, or found that the ranks' calls differ",
                 p->op_name, (unsigned long long)p->op_seq, p->step, peer, prims_host(p, peer),
                 sending ? "sending" : "receiving", x->sys_errno ? strerror(x->sys_errno) : "connection closed");
    }
    LOG_WARN(LOG_SUB_NET, "%s", p->err);
    return x->err;
}

/* How many receives may be posted now: all, or as many as the staging slots hold beyond those consumed. */
static int exch_recv_limit(const exch_t *e)
{
    return e->recv_window > 0 ? CHORUS_MIN(e->nrecvs, e->recvs_handled + e->recv_window) : e->nrecvs;
}

static chorus_result_t exch_post_recvs(exch_t *e)
{
    transport_conn_t *c = e->p->conns[e->recv_peer];
    for (int limit = exch_recv_limit(e); e->recvs_posted < limit;) {
        transport_xfer_t *x = &e->recvs[e->recvs_posted++];
        if (c->ops->post_recv(c, x) != CHORUS_SUCCESS) return prims_fail_xfer(e->p, e->recv_peer, x, 0);
    }
    return CHORUS_SUCCESS;
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

/* A send that failed only because this rank found a mismatch in what arrived on its connection: it knows
 * nothing of the difference (no fingerprint from the peer), the receive that found it does. */
static int xfer_failed_behind(const transport_xfer_t *x, int sending)
{
    return sending && x->err == CHORUS_ERR_MISMATCH && !x->peer_found;
}

static chorus_result_t exch_step(void *arg, progress_status_t *status)
{
    exch_t *e = arg;
    int moved = 0;
    int failed = -1;
    chorus_result_t failed_res = CHORUS_SUCCESS;
    for (int i = 0; i < e->nconns; i++) {
        int m = 0;
        chorus_result_t res = e->conns[i]->ops->progress(e->conns[i], &m);
        if (res != CHORUS_SUCCESS && failed < 0) {
            failed = e->conn_peer[i];
            failed_res = res;
        }
        moved |= m;
    }
    for (int i = 0; i < e->nsends; i++)
        if (e->sends[i].state == XFER_FAILED && !xfer_failed_behind(&e->sends[i], 1))
            return prims_fail_xfer(e->p, e->send_peer, &e->sends[i], 1);
    for (int i = e->recvs_handled; i < e->nrecvs; i++)
        if (e->recvs[i].state == XFER_FAILED) return prims_fail_xfer(e->p, e->recv_peer, &e->recvs[i], 0);
    for (int i = 0; i < e->nsends; i++)
        if (e->sends[i].state == XFER_FAILED) return prims_fail_xfer(e->p, e->send_peer, &e->sends[i], 1);
    /* A connection can fail with none of its transfers left to fail (a send already done, the peer dead
     * before the next one): that is still this operation's failure, and the only word of it. */
    if (failed >= 0) return prims_fail_conn(e->p, failed_res, failed);
    while (e->recvs_handled < e->nrecvs) {
        transport_xfer_t *x = &e->recvs[e->recvs_handled];
        if (x->state != XFER_DONE) break;
        if (e->on_chunk) CHECK(e->on_chunk(e, e->recvs_handled));
        e->recvs_handled++;
        moved = 1;
    }
    if (e->recvs_posted < exch_recv_limit(e)) CHECK(exch_post_recvs(e));
    if (e->sends_posted < e->sends_ready) {
        CHECK(exch_post_ready_sends(e));
        moved = 1;
    }
    if (!moved && e->copy_done < e->copy_len) {
        size_t len = CHORUS_MIN(e->copy_len - e->copy_done, CHORUS_MAX(e->p->chunk_bytes, (size_t)4096));
        copy_bytes(e->copy_dst + e->copy_done, e->copy_src + e->copy_done, len);
        e->copy_done += len;
        moved = 1;
    }
    int done = e->recvs_handled == e->nrecvs && e->sends_posted == e->nsends && e->copy_done == e->copy_len;
    for (int i = 0; done && i < e->nsends; i++) done = e->sends[i].state == XFER_DONE;
    *status = done ? PROGRESS_DONE : moved ? PROGRESS_MOVED : PROGRESS_IDLE;
    if (*status == PROGRESS_IDLE)
        prims_set_waiting_on(e->p, e->recvs_handled < e->nrecvs ? e->recv_peer : e->send_peer);
    return CHORUS_SUCCESS;
}

chorus_result_t prims_fail_conn(prims_t *p, chorus_result_t res, int failed)
{
    /* A transfer posted on the failed connection fails at once with what the connection knows: the peer
     * may have said why (its notice or farewell). Only a connection that reports its failure is probed: a
     * healthy one would keep the probe. */
    transport_xfer_t probe = {0};
    transport_conn_t *c = p->conns ? p->conns[failed] : NULL;
    int moved;
    if (c && c->ops->progress(c, &moved) != CHORUS_SUCCESS && c->ops->post_recv(c, &probe) != CHORUS_SUCCESS &&
        (probe.peer_found || probe.peer_farewell))
        return prims_fail_xfer(p, failed, &probe, 0);
    prims_blame(p, res, failed, p->rank);
    snprintf(p->err, p->errlen, "%s #%llu step %d: connection to rank %d (%s) failed: the peer exited, crashed or "
             "closed the communicator, or found that the ranks' calls differ", p->op_name,
             (unsigned long long)p->op_seq, p->step, failed, prims_host(p, failed));
    LOG_WARN(LOG_SUB_NET, "%s", p->err);
    return res;
}

chorus_result_t prims_fail_wait(prims_t *p, chorus_result_t res, int peer, const char *awaited)
{
    /* Ranks that began together reach their deadlines together: the peer waited on may itself have just
     * timed out on another rank and said so. One last look at its connection finds that farewell, and
     * the rank really stuck is named instead of the neighbour. */
    transport_conn_t *c = res == CHORUS_ERR_TIMEOUT && p->conns && peer >= 0 ? p->conns[peer] : NULL;
    int moved;
    chorus_result_t conn_res = c ? c->ops->progress(c, &moved) : CHORUS_SUCCESS;
    if (conn_res != CHORUS_SUCCESS) return prims_fail_conn(p, conn_res, peer);
    prims_blame(p, res, res == CHORUS_ERR_TIMEOUT ? peer : -1, p->rank);
    if (res == CHORUS_ERR_TIMEOUT)
        snprintf(p->err, p->errlen, "%s #%llu step %d: timed out waiting for rank %d (%s) to %s; it may be stuck, or "
                 "have called a different operation (raise CHORUS_TIMEOUT if it is just slow)",
                 p->op_name, (unsigned long long)p->op_seq, p->step, peer, prims_host(p, peer), awaited);
    else if (res == CHORUS_ERR_ABORTED)
        snprintf(p->err, p->errlen, "%s #%llu: the communicator was aborted", p->op_name, (unsigned long long)p->op_seq);
    if (res == CHORUS_ERR_TIMEOUT) LOG_WARN(LOG_SUB_NET, "%s", p->err);
    return res;
}

static chorus_result_t exch_fail_wait(exch_t *e, chorus_result_t res)
{
    int receiving = e->recvs_handled < e->nrecvs;
    return prims_fail_wait(e->p, res, receiving ? e->recv_peer : e->send_peer, receiving ? "send" : "receive");
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
        e->conn_peer[e->nconns] = e->recv_peer;
        e->conns[e->nconns++] = p->conns[e->recv_peer];
        CHECK(exch_post_recvs(e));
    }
    if (e->nsends) {
        if (!e->nrecvs || e->send_peer != e->recv_peer) {
            e->conn_peer[e->nconns] = e->send_peer;
            e->conns[e->nconns++] = p->conns[e->send_peer];
        }
        CHECK(exch_post_ready_sends(e));
    }
    prims_set_step(p, p->step + 1);
    int failed;
    chorus_result_t res = progress_run(p->engine, exch_step, e, p->conns, p->nranks, p->deadline_ns, &failed);
    if (failed >= 0) return prims_fail_conn(p, res, failed);
    if (res == CHORUS_ERR_TIMEOUT || res == CHORUS_ERR_ABORTED) return exch_fail_wait(e, res);
    return res;
}

static void xfer_init(transport_xfer_t *x, const void *buf, size_t len, const prims_t *p)
{
    memset(x, 0, sizeof(*x));
    x->buf = (void *)buf;
    x->len = len;
    x->tag = p->tag;
    memcpy(x->check, &p->fp, sizeof(x->check));
}

chorus_result_t prims_sendrecv(prims_t *p, int send_peer, const void *sbuf, size_t sbytes, int recv_peer, void *rbuf,
                               size_t rbytes)
{
    transport_xfer_t s, r;
    xfer_init(&s, sbuf, sbytes, p);
    xfer_init(&r, rbuf, rbytes, p);
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

/* Chains move one message per chunk, so that a stage can forward chunk i while chunk i+1 arrives. The
 * chunk is whole elements, so that a reduction never straddles two messages. */
static size_t chain_chunk(const prims_t *p, size_t elem) { return p->chunk_bytes - p->chunk_bytes % elem; }

static int chain_nchunks(const prims_t *p, size_t bytes, size_t elem)
{
    if (bytes <= p->chunk_bytes - elem + 1) return 1; /* within the chunk whatever elem divides: no division */
    size_t chunk = chain_chunk(p, elem);
    return (int)((bytes + chunk - 1) / chunk);
}

static void chain_layout(const prims_t *p, size_t bytes, size_t elem, int i, size_t *off_p, size_t *len_p)
{
    size_t chunk = chain_chunk(p, elem);
    *off_p = (size_t)i * chunk;
    *len_p = CHORUS_MIN(chunk, bytes - *off_p);
}

static chorus_result_t chain_forward(exch_t *e, int i)
{
    (void)i;
    if (e->nsends) e->sends_ready++;
    return CHORUS_SUCCESS;
}

/* The transfer lists of chains and reduction exchanges: on the stack for the few chunks of a small
 * message (with 8 ranks on 2 cores, a calloc and free per call were a tenth of the CPU time of an 8-byte
 * Broadcast), allocated beyond. Each entry a rank uses is cleared by xfer_init. */
#define XFERS_ON_STACK 8
static transport_xfer_t *xfers_get(transport_xfer_t *on_stack, size_t n)
{
    return n <= XFERS_ON_STACK ? on_stack : malloc(n * sizeof(transport_xfer_t));
}

static void xfers_put(transport_xfer_t *xs, const transport_xfer_t *on_stack)
{
    if (xs != on_stack) free(xs);
}

/* Shared set-up of the two chain primitives: recvs land in rbuf, sends read sbuf, chunk by chunk. */
static chorus_result_t chain_run(prims_t *p, int recv_peer, int send_peer, const char *sbuf, char *rbuf, size_t bytes,
                                 size_t elem, exch_t *e)
{
    int n = chain_nchunks(p, bytes, elem);
    transport_xfer_t on_stack[XFERS_ON_STACK], *xs = xfers_get(on_stack, (size_t)n * 2);
    if (!xs) return CHORUS_ERR_NO_MEMORY;
    for (int i = 0; i < n; i++) { /* only the transfers this rank makes: the head and the tail make one kind */
        size_t off, len;
        chain_layout(p, bytes, elem, i, &off, &len);
        if (send_peer >= 0) xfer_init(&xs[i], sbuf + off, len, p);
        if (recv_peer >= 0) xfer_init(&xs[n + i], rbuf + off, len, p);
    }
    e->p = p;
    e->send_peer = send_peer;
    e->recv_peer = recv_peer;
    e->sends = xs;
    e->nsends = send_peer >= 0 ? n : 0;
    e->recvs = xs + n;
    e->nrecvs = recv_peer >= 0 ? n : 0;
    e->sends_ready = recv_peer < 0 ? e->nsends : 0;
    chorus_result_t res = exch_run(e);
    xfers_put(xs, on_stack);
    return res;
}

chorus_result_t prims_chain_copy(prims_t *p, int recv_peer, int send_peer, const void *src, void *buf, size_t bytes)
{
    exch_t e = {.on_chunk = chain_forward};
    if (recv_peer >= 0 || src == buf) return chain_run(p, recv_peer, send_peer, buf, buf, bytes, 1, &e);
    e.copy_src = src;
    e.copy_dst = buf;
    e.copy_len = bytes;
    return chain_run(p, recv_peer, send_peer, src, buf, bytes, 1, &e);
}

/* Reduction exchanges and chains move one message per chunk: the receiver's chunks land in a few staging
 * slots, reused as each is reduced, so that what it reduces is still in cache and its scratch stays small
 * whatever the message (a single message would land whole in scratch, out of cache from a few MiB, and be
 * read back from memory by the reduction). */
#define EXCH_REDUCE_WINDOW 4

/* dst = local OP chunk i, which landed in its staging slot. */
static chorus_result_t window_reduce_chunk(exch_t *e, int i)
{
    const transport_xfer_t *x = &e->recvs[i];
    size_t off = (size_t)i * chain_chunk(e->p, e->red->elem);
    reduce_apply3(e->dst + off, e->local + off, x->buf, x->len / e->red->elem, e->red->dtype, e->red->op);
    if (e->on_chunk_forward && e->nsends) e->sends_ready++;
    return CHORUS_SUCCESS;
}

/* Lists the chunk messages of a reduction exchange (sends from sbuf; receives into staging slots, reduced
 * into dst) and runs it. */
static chorus_result_t reduce_run(exch_t *e, const char *sbuf, size_t sbytes, size_t rbytes)
{
    prims_t *p = e->p;
    size_t elem = e->red->elem;
    int ns = e->send_peer >= 0 ? chain_nchunks(p, sbytes, elem) : 0;
    int nr = e->recv_peer >= 0 ? chain_nchunks(p, rbytes, elem) : 0;
    int window = CHORUS_MIN(nr, EXCH_REDUCE_WINDOW);
    size_t slot = 0;
    char *stage = NULL;
    if (nr) {
        size_t off;
        chain_layout(p, rbytes, elem, 0, &off, &slot);
        CHECK(prims_scratch(p, 0, slot ? (size_t)window * slot : 1, (void **)&stage));
    }
    transport_xfer_t on_stack[XFERS_ON_STACK], *xs = xfers_get(on_stack, (size_t)(ns + nr));
    if (!xs) return CHORUS_ERR_NO_MEMORY;
    for (int i = 0; i < ns; i++) {
        size_t off, len;
        chain_layout(p, sbytes, elem, i, &off, &len);
        xfer_init(&xs[i], sbuf + off, len, p);
    }
    for (int i = 0; i < nr; i++) {
        size_t off, len;
        chain_layout(p, rbytes, elem, i, &off, &len);
        xfer_init(&xs[ns + i], stage + (size_t)(i % window) * slot, len, p);
    }
    e->sends = xs;
    e->nsends = ns;
    e->recvs = xs + ns;
    e->nrecvs = nr;
    e->recv_window = window;
    if (!e->on_chunk_forward) e->sends_ready = ns;
    e->on_chunk = window_reduce_chunk;
    chorus_result_t res = exch_run(e);
    xfers_put(xs, on_stack);
    return res;
}

chorus_result_t prims_sendrecv_reduce(prims_t *p, int send_peer, const void *sbuf, size_t sbytes, int recv_peer,
                                      const void *local, void *dst, size_t rbytes, const prims_reduce_t *red)
{
    exch_t e = {.p = p, .send_peer = send_peer, .recv_peer = recv_peer, .red = red, .local = local, .dst = dst};
    return reduce_run(&e, sbuf, sbytes, rbytes);
}

chorus_result_t prims_chain_reduce(prims_t *p, int recv_peer, int send_peer, const void *local, void *dst,
                                   size_t bytes, const prims_reduce_t *red)
{
    if (recv_peer < 0) {
        exch_t e = {0};
        return chain_run(p, -1, send_peer, local, NULL, bytes, red->elem, &e);
    }
    /* Each chunk goes on once it is reduced into dst. */
    exch_t e = {.p = p, .send_peer = send_peer, .recv_peer = recv_peer, .red = red, .local = local, .dst = dst,
                .on_chunk_forward = 1};
    return reduce_run(&e, dst, bytes, bytes);
}

/* ---- Trees: many peers at once, chunk by chunk ----
 * Every message of the call is listed up front, in one order all ranks compute alike: by chunk, then up
 * before down, then by tree. The messages to (or from) one peer form a lane, posted strictly in that
 * order, so two ranks that meet in several trees match their messages without tags. A message is posted
 * once it may be: a send when its data is complete, a child's chunk when its staging slot is free, a
 * chunk from the parent (allreduce) when the same bytes have gone up. Every such condition waits only on
 * messages earlier in the order, so no lane can block one that it waits for. */

#define TREE_WINDOW 4 /* chunks of one child staged ahead of their combination */

typedef struct tree_msg {
    transport_xfer_t x;
    int tree, chunk;
    int child; /* a child's chunk: which child (and so which staging slots); otherwise -1 */
    int up;    /* travels from child to parent */
} tree_msg_t;

/* The messages to or from one peer in one direction, in posting order. */
typedef struct tree_lane {
    int peer, send;
    int *msgs, n;
    int posted, done;
    int64_t since; /* when the lane last moved: a message of it done, or posted while none was pending */
} tree_lane_t;

/* One tree's progress. */
typedef struct tree_run {
    const prims_tree_t *t;
    size_t chunk;
    size_t slot;    /* staging per chunk: a chunk, or less for a one-chunk message */
    int nchunks, nslots;
    char *stage;    /* nchildren x nslots slots */
    int folded;     /* combinations done, in the order chunk * nchildren + child */
    int up_ready;   /* chunks complete enough to go to the parent */
    int down_ready; /* chunks complete enough to go to the children */
    int *up_recv;   /* the message of (chunk, child) */
    int *up_send;   /* the message of each chunk to the parent */
    int *down_recv; /* the message of each chunk from the parent */
} tree_run_t;

typedef struct trees_op {
    prims_t *p;
    prims_tree_mode_t mode;
    const prims_reduce_t *red;
    tree_run_t *runs;
    int ntrees;
    tree_msg_t *msgs;
    int nmsgs;
    tree_lane_t *lanes;
    int nlanes;
    int *lane_of; /* by peer: [0, nranks) send lanes, [nranks, 2 nranks) receive lanes; -1 if none */
    transport_conn_t **conns;
    int *conn_peer;
    int nconns;
} trees_op_t;

static void trees_free(trees_op_t *op)
{
    for (int i = 0; op->runs && i < op->ntrees; i++) free(op->runs[i].up_recv);
    for (int i = 0; op->lanes && i < op->nlanes; i++) free(op->lanes[i].msgs);
    free(op->runs);
    free(op->msgs);
    free(op->lanes);
    free(op->lane_of);
    free(op->conns);
    free(op->conn_peer);
}

/* One message to or from peer. The first walk, before the lanes have their msgs arrays, only counts each
 * lane's messages; the second records them and, through index_p, where each tree finds them. */
static void trees_add(trees_op_t *op, int peer, int send, int up, int tree, int chunk, int child, const void *buf,
                      size_t len, int *index_p)
{
    int *lane = &op->lane_of[send ? peer : op->p->nranks + peer];
    if (*lane < 0) {
        if (op->lane_of[peer] < 0 && op->lane_of[op->p->nranks + peer] < 0) {
            op->conn_peer[op->nconns] = peer;
            op->conns[op->nconns++] = op->p->conns[peer];
        }
        *lane = op->nlanes++;
        op->lanes[*lane] = (tree_lane_t){.peer = peer, .send = send};
    }
    tree_lane_t *l = &op->lanes[*lane];
    if (!l->msgs) {
        l->n++;
        return;
    }
    tree_msg_t *m = &op->msgs[op->nmsgs];
    xfer_init(&m->x, buf, len, op->p);
    m->tree = tree;
    m->chunk = chunk;
    m->child = child;
    m->up = up;
    l->msgs[l->n++] = op->nmsgs;
    if (index_p) *index_p = op->nmsgs;
    op->nmsgs++;
}

/* Every message of the call, in the posting order. */
static void trees_walk(trees_op_t *op)
{
    int maxchunks = 0;
    for (int t = 0; t < op->ntrees; t++) maxchunks = CHORUS_MAX(maxchunks, op->runs[t].nchunks);
    for (int c = 0; c < maxchunks; c++) {
        for (int up = 1; up >= 0; up--) {
            if (op->mode == (up ? PRIMS_TREE_BROADCAST : PRIMS_TREE_REDUCE)) continue;
            for (int t = 0; t < op->ntrees; t++) {
                tree_run_t *r = &op->runs[t];
                const prims_tree_t *tr = r->t;
                if (c >= r->nchunks) continue;
                size_t off = (size_t)c * r->chunk, len = CHORUS_MIN(r->chunk, tr->bytes - off);
                int nch = tr->nchildren;
                /* What this rank sends: its own data at a leaf going up and at the root of a broadcast. */
                int own = up ? nch == 0 : op->mode == PRIMS_TREE_BROADCAST && tr->parent < 0;
                const char *from = own ? (const char *)tr->src + off : (const char *)tr->dst + off;
                if (up) {
                    if (tr->parent >= 0) trees_add(op, tr->parent, 1, 1, t, c, -1, from, len, &r->up_send[c]);
                    for (int k = 0; k < nch; k++) {
                        size_t at = (size_t)k * (size_t)r->nslots + (size_t)(c % r->nslots);
                        trees_add(op, tr->children[k], 0, 1, t, c, k, r->stage + at * r->slot, len,
                                  &r->up_recv[c * nch + k]);
                    }
                } else {
                    if (tr->parent >= 0) trees_add(op, tr->parent, 0, 0, t, c, -1, from, len, &r->down_recv[c]);
                    for (int k = 0; k < nch; k++) trees_add(op, tr->children[k], 1, 0, t, c, -1, from, len, NULL);
                }
            }
        }
    }
}

/* Combine every child's chunk that has landed, in order, and note the chunks that became complete. */
static int trees_advance(trees_op_t *op, tree_run_t *r)
{
    const prims_tree_t *t = r->t;
    const prims_reduce_t *red = op->red;
    int nch = t->nchildren, moved = 0;
    while (op->mode != PRIMS_TREE_BROADCAST && r->folded < r->nchunks * nch) {
        const tree_msg_t *m = &op->msgs[r->up_recv[r->folded]];
        if (m->x.state != XFER_DONE) break;
        size_t off = (size_t)m->chunk * r->chunk, elems = m->x.len / red->elem;
        char *dst = (char *)t->dst + off;
        reduce_apply3(dst, m->child ? dst : (const char *)t->src + off, m->x.buf, elems, red->dtype, red->op);
        r->folded++;
        moved = 1;
        if (m->child < nch - 1) continue;
        if (t->parent >= 0) {
            r->up_ready = m->chunk + 1;
        } else if (op->mode == PRIMS_TREE_ALLREDUCE) {
            reduce_finish(dst, elems, red->dtype, red->op, op->p->nranks);
            r->down_ready = m->chunk + 1;
        }
    }
    while (op->mode != PRIMS_TREE_REDUCE && t->parent >= 0 && r->down_ready < r->nchunks &&
           op->msgs[r->down_recv[r->down_ready]].x.state == XFER_DONE) {
        r->down_ready++;
        moved = 1;
    }
    return moved;
}

static int trees_may_post(const trees_op_t *op, const tree_lane_t *l, const tree_msg_t *m)
{
    const tree_run_t *r = &op->runs[m->tree];
    if (l->send) return m->chunk < (m->up ? r->up_ready : r->down_ready);
    if (m->up) {
        int prev = m->chunk - r->nslots; /* the chunk that used this staging slot before */
        return prev < 0 || r->folded > prev * r->t->nchildren + m->child;
    }
    return op->mode != PRIMS_TREE_ALLREDUCE || op->msgs[r->up_send[m->chunk]].x.state == XFER_DONE;
}

/* The lane to name when the call waits: of those with messages posted and not done, the one that has
 * waited longest (a stopped peer stops its lanes first; lanes to other ranks stall only after, waiting
 * on what those ranks cannot finish without it); with none pending, the first unfinished lane. */
static int trees_stalled_lane(const trees_op_t *op)
{
    int best = -1, first = -1;
    for (int i = 0; i < op->nlanes; i++) {
        const tree_lane_t *l = &op->lanes[i];
        if (l->done == l->n) continue;
        if (first < 0) first = i;
        if (l->posted > l->done && (best < 0 || l->since < op->lanes[best].since)) best = i;
    }
    return best >= 0 ? best : first >= 0 ? first : 0;
}

static chorus_result_t trees_step(void *arg, progress_status_t *status)
{
    trees_op_t *op = arg;
    int moved = 0, done = 1;
    int64_t now = 0;
    int failed = -1;
    chorus_result_t failed_res = CHORUS_SUCCESS;
    for (int i = 0; i < op->nconns; i++) {
        int m = 0;
        chorus_result_t res = op->conns[i]->ops->progress(op->conns[i], &m);
        if (res != CHORUS_SUCCESS && failed < 0) {
            failed = op->conn_peer[i];
            failed_res = res;
        }
        moved |= m;
    }
    const tree_lane_t *behind = NULL; /* a lane whose send failed behind a mismatch found here */
    for (int i = 0; i < op->nlanes; i++) {
        tree_lane_t *l = &op->lanes[i];
        for (; l->done < l->posted; l->done++) {
            const transport_xfer_t *x = &op->msgs[l->msgs[l->done]].x;
            if (x->state == XFER_FAILED && xfer_failed_behind(x, l->send)) {
                if (!behind) behind = l;
                break;
            }
            if (x->state == XFER_FAILED) return prims_fail_xfer(op->p, l->peer, x, l->send);
            if (x->state != XFER_DONE) break;
            l->since = now ? now : (now = time_now_ns());
        }
    }
    if (behind) return prims_fail_xfer(op->p, behind->peer, &op->msgs[behind->msgs[behind->done]].x, 1);
    /* As in exch_step: a failed connection with no transfer left to carry the failure. */
    if (failed >= 0) return prims_fail_conn(op->p, failed_res, failed);
    for (int t = 0; t < op->ntrees; t++) moved |= trees_advance(op, &op->runs[t]);
    for (int i = 0; i < op->nlanes; i++) {
        tree_lane_t *l = &op->lanes[i];
        transport_conn_t *c = op->p->conns[l->peer];
        while (l->posted < l->n && trees_may_post(op, l, &op->msgs[l->msgs[l->posted]])) {
            if (l->posted == l->done) l->since = now ? now : (now = time_now_ns());
            transport_xfer_t *x = &op->msgs[l->msgs[l->posted++]].x;
            if ((l->send ? c->ops->post_send(c, x) : c->ops->post_recv(c, x)) != CHORUS_SUCCESS)
                return prims_fail_xfer(op->p, l->peer, x, l->send);
            moved = 1;
        }
        done &= l->done == l->n;
    }
    *status = done ? PROGRESS_DONE : moved ? PROGRESS_MOVED : PROGRESS_IDLE;
    if (*status == PROGRESS_IDLE) prims_set_waiting_on(op->p, op->lanes[trees_stalled_lane(op)].peer);
    return CHORUS_SUCCESS;
}

/* Size each tree's chunks and staging, and check its peers. */
static chorus_result_t trees_plan(trees_op_t *op, const prims_tree_t *trees, size_t *stage_bytes_p, int *nmsgs_p,
                                  int *maxlanes_p)
{
    prims_t *p = op->p;
    size_t elem = op->red ? op->red->elem : 1, chunk = p->chunk_bytes - p->chunk_bytes % elem;
    for (int t = 0; t < op->ntrees; t++) {
        const prims_tree_t *tr = &trees[t];
        tree_run_t *r = &op->runs[t];
        int bad = tr->parent == p->rank || tr->parent >= p->nranks;
        for (int k = 0; k < tr->nchildren; k++)
            bad |= tr->children[k] < 0 || tr->children[k] >= p->nranks || tr->children[k] == p->rank;
        if (bad) {
            snprintf(p->err, p->errlen, "%s: internal error: tree %d names a bad peer (rank %d)", p->op_name, t,
                     p->rank);
            return CHORUS_ERR_INTERNAL;
        }
        r->t = tr;
        r->chunk = chunk;
        r->nchunks = (int)((tr->bytes + chunk - 1) / chunk);
        r->nslots = CHORUS_MIN(TREE_WINDOW, r->nchunks);
        r->slot = CHORUS_MIN(chunk, tr->bytes);
        r->up_ready = tr->nchildren ? 0 : r->nchunks;
        r->down_ready = op->mode == PRIMS_TREE_BROADCAST && tr->parent < 0 ? r->nchunks : 0;
        if (op->mode != PRIMS_TREE_BROADCAST)
            *stage_bytes_p += (size_t)tr->nchildren * (size_t)r->nslots * r->slot;
        *nmsgs_p += r->nchunks * 2 * (tr->nchildren + 1);
        *maxlanes_p += 2 * (tr->nchildren + 1);
    }
    return CHORUS_SUCCESS;
}

chorus_result_t prims_trees(prims_t *p, prims_tree_mode_t mode, const prims_tree_t *trees, int ntrees,
                            const prims_reduce_t *red)
{
    trees_op_t op = {.p = p, .mode = mode, .red = red, .ntrees = ntrees};
    size_t stage_bytes = 0;
    int nmsgs = 0, maxlanes = 0;
    char *stage = NULL;
    chorus_result_t res = CHORUS_ERR_NO_MEMORY;
    op.runs = calloc((size_t)ntrees, sizeof(*op.runs));
    if (!op.runs) goto out;
    CHECK_GOTO(trees_plan(&op, trees, &stage_bytes, &nmsgs, &maxlanes), res, out);
    if (stage_bytes) CHECK_GOTO(prims_scratch(p, 0, stage_bytes, (void **)&stage), res, out);
    res = CHORUS_ERR_NO_MEMORY;
    for (int t = 0; t < ntrees; t++) {
        tree_run_t *r = &op.runs[t];
        size_t nch = (size_t)r->t->nchildren, nchunks = (size_t)r->nchunks;
        if (stage && mode != PRIMS_TREE_BROADCAST) {
            r->stage = stage;
            stage += nch * (size_t)r->nslots * r->slot;
        }
        /* One block per tree for where its messages are: up receives, up sends, down receives. */
        if (!(r->up_recv = calloc(nchunks * (nch + 2) + 1, sizeof(int)))) goto out;
        r->up_send = r->up_recv + nchunks * nch;
        r->down_recv = r->up_send + nchunks;
    }
    op.lanes = calloc((size_t)maxlanes + 1, sizeof(*op.lanes));
    op.conns = calloc((size_t)maxlanes + 1, sizeof(*op.conns));
    op.conn_peer = calloc((size_t)maxlanes + 1, sizeof(*op.conn_peer));
    op.lane_of = malloc(2 * (size_t)p->nranks * sizeof(int));
    op.msgs = calloc((size_t)nmsgs + 1, sizeof(*op.msgs));
    if (!op.lanes || !op.conns || !op.conn_peer || !op.lane_of || !op.msgs) goto out;
    for (int i = 0; i < 2 * p->nranks; i++) op.lane_of[i] = -1;
    trees_walk(&op);
    for (int i = 0; i < op.nlanes; i++) {
        if (!(op.lanes[i].msgs = malloc(((size_t)op.lanes[i].n + 1) * sizeof(int)))) goto out;
        op.lanes[i].n = 0;
    }
    trees_walk(&op);
    int failed = -1;
    prims_set_step(p, p->step + 1);
    res = progress_run(p->engine, trees_step, &op, p->conns, p->nranks, p->deadline_ns, &failed);
    if (failed >= 0) res = prims_fail_conn(p, res, failed);
    if (res == CHORUS_ERR_TIMEOUT || res == CHORUS_ERR_ABORTED) {
        const tree_lane_t *l = &op.lanes[trees_stalled_lane(&op)];
        res = prims_fail_wait(p, res, l->peer, l->send ? "receive" : "send");
    }
out:
    trees_free(&op);
    return res;
}
