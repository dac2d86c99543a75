/*
 * TCP transport: one connected stream socket carries framed messages in each direction.
 *
 * Wire format, per message: a 48-byte frame header {u64 len; u32 tag; u32 magic; u8 check[32]} (numbers
 * little-endian) followed by len payload bytes. Payload goes straight between the socket and the caller's buffer (no staging
 * copy); headers live in small arrays inside the connection.
 *
 * progress() moves a bounded amount of payload per direction (tcp_progress), so a receiver's `done`
 * advances piece by piece and the layer above can reduce piece k while piece k+1 is still on the wire.
 * Within that budget one sendmsg/recvmsg covers the headers and payloads of up to TCP_BATCH queued
 * messages, so a burst of small messages costs one system call, not two per message.
 *
 * A peer's close behind bytes nobody has asked for yet is seen with POLLRDHUP and judged by those bytes:
 * an orderly close leaves the goodbye frame last (TRANSPORT_TAG_GOODBYE), a crash does not and fails the
 * connection at once (see tcp_close_behind_input). The peer's last word (transport.h: a notice after a
 * mismatch, a farewell) is read where a message was expected, or found in that unread input, or, when a
 * send fails because the peer went away, by peeking at what is left unread (tcp_fail_remote).
 *
 * Receives are speculative: the payload of a posted receive is read together with its header, before the
 * header is checked. That is safe because a header that does not match fails the connection for good
 * (the stream position can no longer be trusted), and a failed receive promises nothing about its buffer.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/transport.h"
#include "util/log.h"
#include "util/util.h"

#define TCP_HDR_BYTES (16 + TRANSPORT_CHECK_BYTES)
#define TCP_FRAME_MAGIC 0x43484f52u /* "CHOR": catches a stream that lost its framing */
/* Messages covered by one socket call: two iovecs each, far below IOV_MAX. */
#define TCP_BATCH 32

typedef struct tcp_queue {
    xfer_queue_t q;
    /* Header bytes of `head` already moved (TCP_HDR_BYTES once, for a receive, it has been checked). */
    size_t head_hdr_done;
    /* The head's header; slots 1.. hold the headers of the rest of a batch during one socket call. */
    unsigned char hdr[TCP_BATCH][TCP_HDR_BYTES];
    struct iovec iov[2 * TCP_BATCH];
} tcp_queue_t;

typedef struct tcp_conn {
    transport_conn_t base;
    int fd;
    size_t chunk_bytes;
    size_t send_budget; /* payload one progress() call may send: a chunk, or the socket's buffer if more */
    chorus_result_t err; /* sticky: once set, the connection is dead */
    int sys_errno;
    /* Bytes are waiting in the socket with no receive posted: polling for POLLIN would only spin. */
    int unclaimed_input;
    /* The peer closed in good order behind the unclaimed input (see tcp_close_behind_input). */
    int peer_left;
    int abandoned; /* see transport.h: only the peer's close is still of interest */
    uint32_t said; /* the peer's last word (transport.h: TRANSPORT_TAG_NOTICE, _FAREWELL), 0 if none */
    uint8_t words[TRANSPORT_NOTICE_BYTES];
    tcp_queue_t tx;
    tcp_queue_t rx;
} tcp_conn_t;

static void tcp_hdr_encode(unsigned char *hdr, const transport_xfer_t *xfer)
{
    uint64_t len = htole64((uint64_t)xfer->len);
    uint32_t tag = htole32(xfer->tag);
    uint32_t magic = htole32(TCP_FRAME_MAGIC);
    memcpy(hdr, &len, 8);
    memcpy(hdr + 8, &tag, 4);
    memcpy(hdr + 12, &magic, 4);
    memcpy(hdr + 16, xfer->check, TRANSPORT_CHECK_BYTES);
}

/* The numbers of a frame header, in host order. */
static void tcp_hdr_decode(const unsigned char *hdr, uint64_t *len, uint32_t *tag, uint32_t *magic)
{
    memcpy(len, hdr, 8);
    memcpy(tag, hdr + 8, 4);
    memcpy(magic, hdr + 12, 4);
    *len = le64toh(*len);
    *tag = le32toh(*tag);
    *magic = le32toh(*magic);
}

static void tcp_queue_pop_done(tcp_queue_t *q)
{
    q->head_hdr_done = 0;
    xfer_queue_pop_done(&q->q);
}

/* Shutting the socket down tells the peer at once, instead of leaving it to wait for bytes that will
 * never come. */
static chorus_result_t tcp_fail(tcp_conn_t *conn, chorus_result_t err, int sys_errno)
{
    conn->err = err;
    conn->sys_errno = sys_errno;
    xfer_queue_fail(&conn->tx.q, err, sys_errno, conn->said, conn->words);
    xfer_queue_fail(&conn->rx.q, err, sys_errno, conn->said, conn->words);
    shutdown(conn->fd, SHUT_RDWR);
    return err;
}

/* The peer's last word (a notice: it found a mismatch in what this side sent it; a farewell: its layer
 * above gave up) fails the connection. */
static chorus_result_t tcp_fail_said(tcp_conn_t *conn, uint32_t said, const unsigned char *payload)
{
    memcpy(conn->words, payload, TRANSPORT_NOTICE_BYTES);
    conn->said = said;
    if (said == TRANSPORT_TAG_FAREWELL) {
        LOG_INFO(LOG_SUB_NET, "tcp: fd %d: the peer gave up and said why", conn->fd);
        return tcp_fail(conn, CHORUS_ERR_REMOTE, 0);
    }
    LOG_WARN(LOG_SUB_NET, "tcp: fd %d: the peer found that a message from here differs from what it expected",
             conn->fd);
    return tcp_fail(conn, CHORUS_ERR_MISMATCH, 0);
}

static chorus_result_t tcp_fail_remote(tcp_conn_t *conn, int sys_errno);

/* Errors that mean the peer or the path to it went away are REMOTE; anything else is our own failure. */
static chorus_result_t tcp_fail_errno(tcp_conn_t *conn, int e, const char *what)
{
    switch (e) {
    case EPIPE:
    case ECONNRESET:
    case ECONNABORTED:
    case ECONNREFUSED:
    case ENOTCONN:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case EHOSTDOWN:
    case ENETUNREACH:
    case ENETDOWN:
    case ENETRESET:
        LOG_WARN(LOG_SUB_NET, "tcp: fd %d: %s: peer lost: %s", conn->fd, what, strerror(e));
        return tcp_fail_remote(conn, e);
    default:
        LOG_WARN(LOG_SUB_NET, "tcp: fd %d: %s failed: %s", conn->fd, what, strerror(e));
        return tcp_fail(conn, CHORUS_ERR_SYSTEM, e);
    }
}

static chorus_result_t tcp_fail_eof(tcp_conn_t *conn)
{
    LOG_INFO(LOG_SUB_NET, "tcp: fd %d: closed by the peer", conn->fd);
    return tcp_fail_remote(conn, 0);
}

/*
 * Describe the front of queue q as iovecs: each message's unsent header bytes, then its payload, while
 * the payload budget lasts. A message cut short by the budget ends the batch, because whatever follows
 * it on the wire is its own remaining payload. Returns the iovec count.
 */
static int tcp_queue_gather(tcp_queue_t *q, size_t budget, int encode_hdrs)
{
    int niov = 0;
    int slot = 0;
    for (transport_xfer_t *xfer = q->q.head; xfer && slot < TCP_BATCH; xfer = xfer->next, slot++) {
        size_t hdr_done = slot == 0 ? q->head_hdr_done : 0;
        size_t left = xfer->len - xfer->done;
        if (slot > 0 && budget == 0) break;
        if (hdr_done < TCP_HDR_BYTES) {
            if (encode_hdrs) tcp_hdr_encode(q->hdr[slot], xfer);
            q->iov[niov++] = (struct iovec){q->hdr[slot] + hdr_done, TCP_HDR_BYTES - hdr_done};
        }
        if (left == 0) continue;
        size_t take = CHORUS_MIN(left, budget);
        q->iov[niov++] = (struct iovec){(char *)xfer->buf + xfer->done, take};
        budget -= take;
        if (take < left) break;
    }
    return niov;
}

static size_t tcp_iov_bytes(const struct iovec *iov, int niov)
{
    size_t n = 0;
    for (int i = 0; i < niov; i++) n += iov[i].iov_len;
    return n;
}

/* One sendmsg over the front of the send queue, within *budget bytes of payload (reduced by what moved).
 * *more is cleared when the socket is full, the budget spent or the queue empty. */
static chorus_result_t tcp_send_once(tcp_conn_t *conn, size_t *budget, int *moved, int *more)
{
    tcp_queue_t *q = &conn->tx;
    int niov = tcp_queue_gather(q, *budget, 1);
    struct msghdr msg = {.msg_iov = q->iov, .msg_iovlen = (size_t)niov};
    ssize_t n = SYSCALL_RETRY(sendmsg(conn->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT));
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *more = 0;
            return CHORUS_SUCCESS;
        }
        return tcp_fail_errno(conn, errno, "send");
    }
    *moved = 1;
    /* A short write means the socket buffer is full: asking again would only return EAGAIN. */
    *more = (size_t)n == tcp_iov_bytes(q->iov, niov);
    size_t left = (size_t)n;
    while (q->q.head) {
        transport_xfer_t *xfer = q->q.head;
        size_t hdr = CHORUS_MIN(left, TCP_HDR_BYTES - q->head_hdr_done);
        q->head_hdr_done += hdr;
        left -= hdr;
        size_t body = CHORUS_MIN(left, xfer->len - xfer->done);
        xfer->done += body;
        *budget -= body;
        left -= body;
        if (q->head_hdr_done < TCP_HDR_BYTES || xfer->done < xfer->len) break;
        tcp_queue_pop_done(q);
    }
    if (!q->q.head || *budget == 0) *more = 0;
    return CHORUS_SUCCESS;
}

/* Send this side's last word (transport.h), unless this side is in the middle of sending a message, where
 * a frame cannot go, or the socket has no room for it now. A frame the socket took only part of is
 * finished within a short bound, so that the peer does not find half a frame (and wait for the rest). */
static void tcp_send_last_word(tcp_conn_t *conn, uint32_t tag, const uint8_t *payload)
{
    if (conn->tx.q.head && conn->tx.head_hdr_done > 0) return;
    unsigned char frame[TCP_HDR_BYTES + TRANSPORT_NOTICE_BYTES];
    tcp_hdr_encode(frame, &(transport_xfer_t){.len = TRANSPORT_NOTICE_BYTES, .tag = tag});
    memcpy(frame + TCP_HDR_BYTES, payload, TRANSPORT_NOTICE_BYTES);
    size_t sent = 0;
    int64_t deadline = time_deadline_ms(200);
    while (sent < sizeof(frame)) {
        ssize_t n = SYSCALL_RETRY(send(conn->fd, frame + sent, sizeof(frame) - sent, MSG_DONTWAIT | MSG_NOSIGNAL));
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (sent == 0 || !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) || time_now_ns() >= deadline) return;
        struct pollfd pfd = {.fd = conn->fd, .events = POLLOUT};
        (void)SYSCALL_RETRY(poll(&pfd, 1, 10));
    }
}

/* The tag of a frame header that is a last word (with the right magic), else 0. */
static uint32_t tcp_hdr_last_word(const unsigned char *hdr)
{
    uint64_t len;
    uint32_t tag, magic;
    tcp_hdr_decode(hdr, &len, &tag, &magic);
    return magic == TCP_FRAME_MAGIC ? transport_frame_last_word(len, tag, hdr + 16) : 0;
}

/* The peer's last word (tag `said`) arrived where a posted receive's header was expected, `avail` bytes
 * behind it in this read (stream offset `off` of the iovecs the read filled, so in posted buffers or
 * header slots): take its payload from there, and from the socket if it is not all in yet. */
static chorus_result_t tcp_take_last_word(tcp_conn_t *conn, uint32_t said, const struct iovec *iov, int niov,
                                          size_t off, size_t avail)
{
    unsigned char payload[TRANSPORT_NOTICE_BYTES];
    size_t have = 0;
    for (int i = 0; i < niov && have < sizeof(payload) && have < avail; i++) {
        if (off >= iov[i].iov_len) {
            off -= iov[i].iov_len;
            continue;
        }
        size_t n = CHORUS_MIN(iov[i].iov_len - off, CHORUS_MIN(sizeof(payload) - have, avail - have));
        memcpy(payload + have, (const char *)iov[i].iov_base + off, n);
        have += n;
        off = 0;
    }
    /* The peer wrote it with one send(): the rest is in flight at most. */
    for (int tries = 0; have < sizeof(payload) && tries < 10; tries++) {
        struct pollfd pfd = {.fd = conn->fd, .events = POLLIN};
        (void)SYSCALL_RETRY(poll(&pfd, 1, 100));
        ssize_t n = SYSCALL_RETRY(recv(conn->fd, payload + have, sizeof(payload) - have, MSG_DONTWAIT));
        if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) break;
        if (n > 0) have += (size_t)n;
    }
    if (have < sizeof(payload)) {
        LOG_WARN(LOG_SUB_NET, "tcp: fd %d: the peer's last word was cut short", conn->fd);
        return tcp_fail(conn, CHORUS_ERR_REMOTE, 0);
    }
    return tcp_fail_said(conn, said, payload);
}

static chorus_result_t tcp_check_hdr(tcp_conn_t *conn, transport_xfer_t *xfer, const unsigned char *hdr)
{
    uint64_t len;
    uint32_t tag, magic;
    tcp_hdr_decode(hdr, &len, &tag, &magic);
    if (magic == TCP_FRAME_MAGIC && len == (uint64_t)xfer->len && tag == xfer->tag &&
        memcmp(hdr + 16, xfer->check, TRANSPORT_CHECK_BYTES) == 0)
        return CHORUS_SUCCESS;
    if (magic == TCP_FRAME_MAGIC && transport_frame_is_goodbye(len, tag, hdr + 16)) {
        LOG_INFO(LOG_SUB_NET, "tcp: fd %d: the peer closed in good order before sending this message", conn->fd);
        return tcp_fail(conn, CHORUS_ERR_REMOTE, 0);
    }
    xfer->peer_len = len;
    xfer->peer_tag = tag;
    memcpy(xfer->peer_check, hdr + 16, TRANSPORT_CHECK_BYTES);
    if (magic != TCP_FRAME_MAGIC) {
        LOG_WARN(LOG_SUB_NET, "tcp: fd %d: bad frame magic 0x%08x: the stream lost its framing", conn->fd,
                 magic);
    } else {
        LOG_WARN(LOG_SUB_NET, "tcp: fd %d: receive posted for %zu bytes tag %u, peer sent %llu bytes tag %u%s",
                 conn->fd, xfer->len, xfer->tag, (unsigned long long)len, tag,
                 len == xfer->len && tag == xfer->tag ? " with other check bytes" : "");
        uint8_t notice[TRANSPORT_NOTICE_BYTES];
        transport_notice_encode(notice, xfer, len, tag, hdr + 16);
        tcp_send_last_word(conn, TRANSPORT_TAG_NOTICE, notice);
    }
    return tcp_fail(conn, CHORUS_ERR_MISMATCH, 0);
}

/* One recvmsg into the front of the receive queue (headers into the connection, payloads straight into
 * the posted buffers), within *budget bytes of payload (reduced by what moved). *more is cleared when
 * the socket is drained, the budget spent or the queue empty. */
static chorus_result_t tcp_recv_once(tcp_conn_t *conn, size_t *budget, int *moved, int *more)
{
    tcp_queue_t *q = &conn->rx;
    int niov = tcp_queue_gather(q, *budget, 0);
    struct msghdr msg = {.msg_iov = q->iov, .msg_iovlen = (size_t)niov};
    ssize_t n = SYSCALL_RETRY(recvmsg(conn->fd, &msg, MSG_DONTWAIT));
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *more = 0;
            return CHORUS_SUCCESS;
        }
        return tcp_fail_errno(conn, errno, "recv");
    }
    if (n == 0) return tcp_fail_eof(conn);
    *moved = 1;
    conn->unclaimed_input = 0;
    /* A short read means the socket is drained: asking again would only return EAGAIN. */
    *more = (size_t)n == tcp_iov_bytes(q->iov, niov);
    size_t left = (size_t)n;
    for (int slot = 0; q->q.head && left > 0; slot++) {
        transport_xfer_t *xfer = q->q.head;
        size_t hdr = CHORUS_MIN(left, TCP_HDR_BYTES - q->head_hdr_done);
        /* The batch's later headers land in their own slots; the one now at the head moves to slot 0. */
        if (slot > 0) memcpy(q->hdr[0] + q->head_hdr_done, q->hdr[slot] + q->head_hdr_done, hdr);
        q->head_hdr_done += hdr;
        left -= hdr;
        if (q->head_hdr_done < TCP_HDR_BYTES) break;
        uint32_t said = hdr > 0 ? tcp_hdr_last_word(q->hdr[0]) : 0;
        if (said) return tcp_take_last_word(conn, said, q->iov, niov, (size_t)n - left, left);
        if (hdr > 0) CHECK(tcp_check_hdr(conn, xfer, q->hdr[0]));
        size_t body = CHORUS_MIN(left, xfer->len - xfer->done);
        xfer->done += body;
        *budget -= body;
        left -= body;
        if (xfer->done < xfer->len) break;
        tcp_queue_pop_done(q);
    }
    if (!q->q.head || *budget == 0) *more = 0;
    return CHORUS_SUCCESS;
}

/* With nothing posted, look (without consuming) whether the peer closed, so that a dead peer is noticed
 * by an idle connection too; a busy one learns it from its next send or receive. Data nobody asked for
 * yet stays in the socket. */
static chorus_result_t tcp_peek(tcp_conn_t *conn)
{
    char byte;
    ssize_t n = SYSCALL_RETRY(recv(conn->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT));
    if (n > 0) {
        conn->unclaimed_input = 1;
        return CHORUS_SUCCESS;
    }
    if (n == 0) return tcp_fail_eof(conn);
    if (errno == EAGAIN || errno == EWOULDBLOCK) return CHORUS_SUCCESS;
    return tcp_fail_errno(conn, errno, "recv");
}

/* Walk the whole frames of the len bytes of stream in buf, which start at a frame boundary. *said is set
 * to the tag of a last word among them (0 if none), *words to its payload; returns whether they are
 * whole frames the last of which is the goodbye (TRANSPORT_TAG_GOODBYE): what a peer that closed in good
 * order leaves. */
static int tcp_stream_scan(const unsigned char *buf, size_t len, uint32_t *said, const unsigned char **words)
{
    size_t at = 0;
    int goodbye = 0;
    *said = 0;
    while (len - at >= TCP_HDR_BYTES) {
        uint64_t body;
        uint32_t tag, magic;
        tcp_hdr_decode(buf + at, &body, &tag, &magic);
        if (magic != TCP_FRAME_MAGIC) return 0;
        goodbye = transport_frame_is_goodbye(body, tag, buf + at + 16);
        uint32_t last = transport_frame_last_word(body, tag, buf + at + 16);
        at += TCP_HDR_BYTES;
        if (body > len - at) return 0;
        if (last && !*said) {
            *said = last;
            *words = buf + at;
        }
        at += (size_t)body;
    }
    return at == len && goodbye;
}

/* Copy (peek) what the socket holds beyond the receive position into *buf_p (malloc'd, NULL if nothing);
 * returns its length. `skip` bytes of the head receive's payload come first and are left out. */
static size_t tcp_peek_unread(tcp_conn_t *conn, size_t skip, unsigned char **buf_p)
{
    int queued = 0;
    *buf_p = NULL;
    if (ioctl(conn->fd, FIONREAD, &queued) < 0 || (size_t)queued <= skip) return 0;
    unsigned char *buf = malloc((size_t)queued);
    if (!buf) return 0;
    ssize_t n = SYSCALL_RETRY(recv(conn->fd, buf, (size_t)queued, MSG_PEEK | MSG_DONTWAIT));
    if (n <= (ssize_t)skip) {
        free(buf);
        return 0;
    }
    memmove(buf, buf + skip, (size_t)n - skip);
    *buf_p = buf;
    return (size_t)n - skip;
}

/* The peer went away. If it said why first (its last word), that is in the unread part of the stream,
 * behind what it sent before (whole frames from the receive position on): report that instead. */
static chorus_result_t tcp_fail_remote(tcp_conn_t *conn, int sys_errno)
{
    const transport_xfer_t *head = conn->rx.q.head;
    size_t hdr_done = conn->rx.head_hdr_done;
    if (head && hdr_done > 0 && hdr_done < TCP_HDR_BYTES) return tcp_fail(conn, CHORUS_ERR_REMOTE, sys_errno);
    unsigned char *buf;
    size_t len = tcp_peek_unread(conn, head && hdr_done ? head->len - head->done : 0, &buf);
    const unsigned char *words = NULL;
    uint32_t said = 0;
    if (buf) (void)tcp_stream_scan(buf, len, &said, &words);
    chorus_result_t res = said ? tcp_fail_said(conn, said, words) : tcp_fail(conn, CHORUS_ERR_REMOTE, sys_errno);
    free(buf);
    return res;
}

/* With unclaimed input, the peer's close sits behind bytes a receive has not asked for yet, where recv
 * cannot see it: a peer that sent ahead and then crashed would go unnoticed until this rank got that far.
 * POLLRDHUP sees the close; the bytes left in the socket then tell a crash from an orderly close, which
 * ends the stream with the goodbye frame. The peek copies at most one socket buffer, once per close. */
static chorus_result_t tcp_close_behind_input(tcp_conn_t *conn)
{
    struct pollfd pfd = {.fd = conn->fd, .events = POLLRDHUP};
    if (SYSCALL_RETRY(poll(&pfd, 1, 0)) <= 0 || !(pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return CHORUS_SUCCESS;
    unsigned char *buf;
    size_t len = tcp_peek_unread(conn, 0, &buf);
    const unsigned char *words = NULL;
    uint32_t said = 0;
    int orderly = buf && tcp_stream_scan(buf, len, &said, &words);
    if (said) {
        chorus_result_t res = tcp_fail_said(conn, said, words);
        free(buf);
        return res;
    }
    free(buf);
    /* A peer that left in good order may still reset the connection: closing with bytes of ours unread
     * (a call it never matched) makes its kernel send a reset. What it sent stays readable here. */
    if (orderly) {
        conn->peer_left = 1;
        return CHORUS_SUCCESS;
    }
    int e = 0;
    socklen_t elen = sizeof(e);
    if ((pfd.revents & POLLERR) && getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &e, &elen) == 0 && e != 0)
        return tcp_fail_errno(conn, e, "recv");
    LOG_INFO(LOG_SUB_NET, "tcp: fd %d: closed by the peer behind %zu unread bytes, without its goodbye", conn->fd,
             len);
    return tcp_fail(conn, CHORUS_ERR_REMOTE, 0);
}

static chorus_result_t tcp_post(tcp_conn_t *conn, tcp_queue_t *q, transport_xfer_t *xfer)
{
    xfer->done = 0;
    xfer->err = CHORUS_SUCCESS;
    xfer->peer_len = 0;
    xfer->peer_tag = 0;
    xfer->sys_errno = 0;
    if (conn->err != CHORUS_SUCCESS) {
        xfer_set_failed(xfer, conn->err, conn->sys_errno, conn->said, conn->words);
        return conn->err;
    }
    xfer->state = XFER_PENDING;
    xfer_queue_push(&q->q, xfer);
    return CHORUS_SUCCESS;
}

static chorus_result_t tcp_post_send(transport_conn_t *base, transport_xfer_t *xfer)
{
    tcp_conn_t *conn = (tcp_conn_t *)base;
    return tcp_post(conn, &conn->tx, xfer);
}

static chorus_result_t tcp_post_recv(transport_conn_t *base, transport_xfer_t *xfer)
{
    tcp_conn_t *conn = (tcp_conn_t *)base;
    return tcp_post(conn, &conn->rx, xfer);
}

/* An abandoned connection reads and drops whatever arrives, until the peer's close. */
static chorus_result_t tcp_discard(tcp_conn_t *conn)
{
    char buf[4096];
    for (;;) {
        ssize_t n = SYSCALL_RETRY(recv(conn->fd, buf, sizeof(buf), MSG_DONTWAIT));
        if (n > 0) continue;
        if (n == 0) return tcp_fail_eof(conn);
        if (errno == EAGAIN || errno == EWOULDBLOCK) return CHORUS_SUCCESS;
        return tcp_fail_errno(conn, errno, "recv");
    }
}

static chorus_result_t tcp_progress(transport_conn_t *base, int *moved)
{
    tcp_conn_t *conn = (tcp_conn_t *)base;
    *moved = 0;
    if (conn->err != CHORUS_SUCCESS) return conn->err;
    if (conn->abandoned) return tcp_discard(conn);
    /* A bounded payload per direction and call (transport_piece_bytes): with a fast sender the socket
     * never runs dry, and the caller must get each piece as it lands (to reduce it while the next is on
     * the wire). Sends take what the socket's buffer holds (at least a chunk), so that the receive side
     * gets its turn; receives are sized by the message at the head of the queue. */
    size_t send_budget = conn->send_budget;
    size_t recv_budget = transport_piece_bytes(conn->chunk_bytes, conn->rx.q.head ? conn->rx.q.head->len : 0);
    int send_more = conn->tx.q.head != NULL;
    int recv_more = conn->rx.q.head != NULL;
    while (send_more || recv_more) {
        if (send_more) CHECK(tcp_send_once(conn, &send_budget, moved, &send_more));
        if (recv_more) CHECK(tcp_recv_once(conn, &recv_budget, moved, &recv_more));
    }
    if (!*moved && !conn->tx.q.head && !conn->rx.q.head) {
        if (!conn->unclaimed_input)
            CHECK(tcp_peek(conn));
        else if (!conn->peer_left)
            CHECK(tcp_close_behind_input(conn));
    }
    return CHORUS_SUCCESS;
}

static int tcp_poll_fd(transport_conn_t *base, short *events)
{
    tcp_conn_t *conn = (tcp_conn_t *)base;
    *events = 0;
    if (conn->err != CHORUS_SUCCESS) return -1;
    if (conn->abandoned) {
        *events = POLLIN;
        return conn->fd;
    }
    /* Idle, POLLIN reports the peer's close (see tcp_peek). Not with unclaimed input: POLLIN would fire
     * at once, forever; POLLRDHUP reports a close behind that input (see tcp_close_behind_input). A
     * blocked send learns of a lost peer from POLLOUT, or from POLLERR/POLLHUP, which poll() always reports. */
    if (conn->rx.q.head || (!conn->tx.q.head && !conn->unclaimed_input)) *events |= POLLIN;
    if (!conn->rx.q.head && !conn->tx.q.head && conn->unclaimed_input && !conn->peer_left) *events |= POLLRDHUP;
    if (conn->tx.q.head) *events |= POLLOUT;
    return conn->fd;
}

static void tcp_abandon(transport_conn_t *base, const uint8_t *farewell)
{
    tcp_conn_t *conn = (tcp_conn_t *)base;
    if (farewell && conn->err == CHORUS_SUCCESS && !conn->abandoned)
        tcp_send_last_word(conn, TRANSPORT_TAG_FAREWELL, farewell);
    conn->tx.q.head = conn->tx.q.tail = NULL;
    conn->rx.q.head = conn->rx.q.tail = NULL;
    conn->abandoned = 1;
}

static void tcp_close(transport_conn_t *base)
{
    tcp_conn_t *conn = (tcp_conn_t *)base;
    close(conn->fd);
    free(conn);
}

static const transport_ops_t tcp_ops = {
    .name = "tcp",
    .post_send = tcp_post_send,
    .post_recv = tcp_post_recv,
    .progress = tcp_progress,
    .poll_fd = tcp_poll_fd,
    .abandon = tcp_abandon,
    .close = tcp_close,
};

static chorus_result_t tcp_setsockopt(int fd, int level, int name, int value, const char *what)
{
    if (setsockopt(fd, level, name, &value, sizeof(value)) == 0) return CHORUS_SUCCESS;
    LOG_WARN(LOG_SUB_NET, "tcp: fd %d: setsockopt %s: %s", fd, what, strerror(errno));
    return CHORUS_ERR_SYSTEM;
}

chorus_result_t tcp_conn_open(int fd, const transport_options_t *opt, transport_conn_t **conn_p)
{
    chorus_result_t res = CHORUS_ERR_SYSTEM;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        LOG_WARN(LOG_SUB_NET, "tcp: fd %d: cannot make it non-blocking: %s", fd, strerror(errno));
        goto fail;
    }
    int domain = 0;
    socklen_t domain_len = sizeof(domain);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &domain_len) < 0) {
        LOG_WARN(LOG_SUB_NET, "tcp: fd %d: not a socket: %s", fd, strerror(errno));
        goto fail;
    }
    /* Nagle would hold back the small frames collectives are made of; AF_UNIX has no such delay. */
    if (domain == AF_INET || domain == AF_INET6)
        CHECK_GOTO(tcp_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"), res, fail);
    /* A small send buffer and a large receive buffer (transport_options_t). With the send buffer as large
     * as the receive one (4 MiB), a sender copied megabytes into its socket ahead of a receiver that was
     * not reading yet, out of the cache by the time they were read, and the window updates of a receiver
     * that then read pushed the queued segments out from its own core while the sender pushed more from
     * its own: over loopback segments arrived out of order and were sent again (hundreds per thousand
     * calls, nstat's TcpRetransSegs and TCPOFOQueue), and 4-rank Broadcasts of 1 and 4 MiB took twice as
     * long (docs/design.md, Data path). */
    if (opt->socket_send_buffer > 0)
        CHECK_GOTO(tcp_setsockopt(fd, SOL_SOCKET, SO_SNDBUF, (int)CHORUS_MIN(opt->socket_send_buffer, (size_t)INT_MAX),
                                  "SO_SNDBUF"),
                   res, fail);
    if (opt->socket_buffer > 0)
        CHECK_GOTO(tcp_setsockopt(fd, SOL_SOCKET, SO_RCVBUF, (int)CHORUS_MIN(opt->socket_buffer, (size_t)INT_MAX),
                                  "SO_RCVBUF"),
                   res, fail);
    tcp_conn_t *conn = calloc(1, sizeof(*conn));
    if (!conn) {
        res = CHORUS_ERR_NO_MEMORY;
        goto fail;
    }
    conn->base.ops = &tcp_ops;
    conn->fd = fd;
    conn->chunk_bytes = opt->chunk_bytes;
    /* Sends as long as the buffer the kernel granted holds, a chunk at least: over loopback, sends capped
     * at a chunk took a fifth longer (docs/design.md, Data path, "Longer sends inside a host"). */
    int granted = 0;
    socklen_t granted_len = sizeof(granted);
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &granted, &granted_len) < 0) granted = 0;
    conn->send_budget = transport_piece_bytes(opt->chunk_bytes, 0);
    if (conn->send_budget < (size_t)CHORUS_MAX(granted, 0)) conn->send_budget = (size_t)granted;
    LOG_DEBUG(LOG_SUB_NET, "tcp: fd %d open, chunk %zu bytes, socket buffers %zu bytes to send, %zu to receive", fd,
              opt->chunk_bytes, opt->socket_send_buffer, opt->socket_buffer);
    *conn_p = &conn->base;
    return CHORUS_SUCCESS;
fail:
    close(fd);
    return res;
}
