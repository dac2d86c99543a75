/*
 * Shared-memory transport: two processes on one host move messages through a segment both have mapped,
 * with a stream socket to the same peer as the doorbell (to wake a sleeping side, and to notice the
 * peer's death).
 *
 * Segment: a control page, then two rings of ring_bytes, ring s carrying side s's sends (side 0 is the
 * creator). Each ring is a single-producer single-consumer byte stream: the producer writes bytes, then
 * publishes its tail (release); the consumer reads the bytes below the tail it loaded (acquire), then
 * publishes its head. Positions count bytes since set-up and never wrap; a byte's place in the ring is
 * position % ring_bytes. Every shared word has its cache lines to itself.
 *
 * Messages keep the TCP transport's framing: a 48-byte frame {u64 len; u32 tag; u32 magic; u8 check[32]},
 * then the payload padded to 16 bytes, so that positions stay 16-byte aligned (frames and payloads that
 * straddle the ring's end are copied in two pieces). A message
 * larger than the ring streams through it: each progress() moves at most chunk_bytes per direction and
 * the receiver copies bytes out as they land, so `done` grows chunk by chunk.
 *
 * Waiting. A side about to block in poll() (poll_fd()) sets its asleep word, then re-checks the rings; a
 * side that published something (progress()) then looks at the peer's asleep word and, if set, clears it
 * and writes one byte to the doorbell. A seq-cst fence on each side orders "set word; read rings" against
 * "publish; read word", so either the sleeper sees the bytes or the publisher sees the word: no wake-up
 * is lost. A sleeper whose re-check finds work asks poll() for POLLOUT as well, which the doorbell (its
 * send buffer all but empty) reports at once. There is at most one doorbell byte per sleep, and the
 * next progress() drains them.
 *
 * Peer death shows on the doorbell as EOF or a reset. What the peer published before is still delivered
 * (as TCP delivers what arrived before a FIN) if it ends with the peer's goodbye (TRANSPORT_TAG_GOODBYE);
 * then every posted transfer fails with REMOTE. Without the goodbye the peer crashed: the connection
 * fails at once, even with nothing posted. The peer's last word (transport.h: a notice after a mismatch,
 * a farewell) is read where a message was expected, or found among what it left in the ring.
 *
 * Set-up, over the doorbell: three fixed-size messages, each sent whatever happened locally, so that a
 * refusal leaves no stray byte and the caller can fall back to TCP on the same socket:
 *   creator -> opener   OFFER    ok, ring size, the creator's token (also in the segment), the name
 *   opener  -> creator  ANSWER   ok (the creator's token is in the segment it mapped), the opener's token
 *   creator -> opener   VERDICT  ok (the opener's token is in the creator's mapping): the same memory
 * A refusal carries its reason instead of the name, so both sides can say why. The opener unlinks the
 * segment as soon as it has verified it, the creator once the answer is in: after set-up nothing is left
 * in /dev/shm for a crash to leak.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "platform/shmem.h"
#include "platform/socket.h"
#include "transport/transport.h"
#include "util/copy.h"
#include "util/log.h"
#include "util/util.h"

#define SHM_ALIGN 16
#define SHM_FRAME_BYTES (16 + TRANSPORT_CHECK_BYTES)
#define SHM_FRAME_MAGIC 0x43485348u /* "CHSH": catches a ring that lost its framing */
#define SHM_SEG_MAGIC 0x63686f7275730001ull
#define SHM_SETUP_MAGIC 0x43485355u
#define SHM_VERSION 1u
#define SHM_TOKEN_BYTES 16
#define SHM_TEXT_BYTES 256
/* Two 64-byte lines: adjacent-line prefetchers fetch lines in pairs, which would make neighbours share. */
#define SHM_LINE 128
/* Within one progress(), publish at least this often, so the peer starts copying before a chunk is
 * complete: the two copies then overlap even when the ring holds only a chunk or two. */
#define SHM_PUBLISH_BYTES (64u << 10)
/* No position (positions count from 0). */
#define SHM_NONE UINT64_MAX

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "words shared between processes must be lock-free atomics");

typedef struct shm_word {
    _Alignas(SHM_LINE) _Atomic uint64_t v;
} shm_word_t;

typedef struct shm_ctl {
    uint64_t magic;
    uint64_t version;
    uint64_t ring_bytes;
    uint8_t creator_token[SHM_TOKEN_BYTES];
    uint8_t opener_token[SHM_TOKEN_BYTES];
    shm_word_t asleep[2]; /* per side: it may be blocked in poll() and wants a doorbell byte */
    shm_word_t tail[2];   /* per ring: bytes its producer has published */
    shm_word_t head[2];   /* per ring: bytes its consumer has released */
} shm_ctl_t;

/* One direction as this side sees it: the queue of posted transfers and its end of the ring. */
typedef struct shm_dir {
    xfer_queue_t q;
    char *ring;
    _Atomic uint64_t *mine;   /* the position this side publishes: the tail of sends, the head of receives */
    _Atomic uint64_t *theirs; /* the peer's */
    uint64_t pos;             /* this side's position */
    uint64_t published;       /* pos as last published */
    uint64_t seen;            /* the peer's position as last loaded */
    int framed;               /* the head transfer's frame is written (or read and checked) */
    size_t body;              /* ring bytes of the head transfer's padded payload moved so far */
} shm_dir_t;

typedef struct shm_conn {
    transport_conn_t base;
    int fd;
    int side;
    size_t chunk_bytes;
    size_t ring_bytes;
    shm_ctl_t *ctl;
    size_t map_bytes;
    chorus_result_t err; /* sticky: once set, the connection is dead */
    int sys_errno;
    int asleep;    /* our asleep word was set: drain the doorbell at the next progress() */
    int peer_gone; /* the doorbell saw EOF or a reset: only what is already in the ring can still move */
    int peer_scanned; /* ... and what it left in the ring was looked at once (nothing more comes): */
    int peer_left;    /* it ends with the goodbye: the peer closed in good order */
    uint64_t peer_said;   /* a last word's frame position among it, SHM_NONE if none */
    int peer_errno;
    int abandoned; /* see transport.h: only the peer's close is still of interest */
    uint32_t said; /* the peer's last word (transport.h: TRANSPORT_TAG_NOTICE, _FAREWELL), 0 if none */
    uint8_t words[TRANSPORT_NOTICE_BYTES];
    shm_dir_t tx;
    shm_dir_t rx;
} shm_conn_t;

static size_t shm_padded(size_t len) { return (len + SHM_ALIGN - 1) & ~(size_t)(SHM_ALIGN - 1); }

static void shm_copy_in(shm_conn_t *c, uint64_t pos, const void *src, size_t n)
{
    size_t off = (size_t)(pos % c->ring_bytes), first = CHORUS_MIN(n, c->ring_bytes - off);
    copy_bytes(c->tx.ring + off, src, first);
    if (n > first) copy_bytes(c->tx.ring, (const char *)src + first, n - first);
}

static void shm_copy_out(shm_conn_t *c, void *dst, uint64_t pos, size_t n)
{
    size_t off = (size_t)(pos % c->ring_bytes), first = CHORUS_MIN(n, c->ring_bytes - off);
    copy_bytes(dst, c->rx.ring + off, first);
    if (n > first) copy_bytes((char *)dst + first, c->rx.ring, n - first);
}

/* Free bytes in the send ring; the consumer's head is loaded again only when the cached one shows too few. */
static size_t shm_tx_room(shm_conn_t *c, size_t want)
{
    shm_dir_t *d = &c->tx;
    size_t room = c->ring_bytes - (size_t)(d->pos - d->seen);
    if (room >= want) return room;
    d->seen = atomic_load_explicit(d->theirs, memory_order_acquire);
    return c->ring_bytes - (size_t)(d->pos - d->seen);
}

/* Published bytes in the receive ring not consumed yet; the producer's tail is loaded as above. */
static size_t shm_rx_ready(shm_conn_t *c, size_t want)
{
    shm_dir_t *d = &c->rx;
    size_t ready = (size_t)(d->seen - d->pos);
    if (ready >= want) return ready;
    d->seen = atomic_load_explicit(d->theirs, memory_order_acquire);
    return (size_t)(d->seen - d->pos);
}

/* Make this side's position visible to the peer: the bytes below it are written (tx) or free (rx). */
static void shm_publish(shm_dir_t *d)
{
    atomic_store_explicit(d->mine, d->pos, memory_order_release);
    d->published = d->pos;
}

static void shm_queue_pop_done(shm_dir_t *d)
{
    d->framed = 0;
    d->body = 0;
    xfer_queue_pop_done(&d->q);
}

/* Shutting the doorbell down tells the peer at once, instead of leaving it to wait for bytes that will
 * never come. */
static chorus_result_t shm_fail(shm_conn_t *c, chorus_result_t err, int sys_errno)
{
    c->err = err;
    c->sys_errno = sys_errno;
    xfer_queue_fail(&c->tx.q, err, sys_errno, c->said, c->words);
    xfer_queue_fail(&c->rx.q, err, sys_errno, c->said, c->words);
    shutdown(c->fd, SHUT_RDWR);
    return err;
}

/* The peer's last word, its frame at `pos` in the ring (a notice: it found a mismatch in what this side
 * sent it; a farewell: its layer above gave up), fails the connection. */
static chorus_result_t shm_fail_said(shm_conn_t *c, uint64_t pos)
{
    unsigned char frame[SHM_FRAME_BYTES];
    shm_copy_out(c, frame, pos, SHM_FRAME_BYTES);
    memcpy(&c->said, frame + 8, 4);
    shm_copy_out(c, c->words, pos + SHM_FRAME_BYTES, TRANSPORT_NOTICE_BYTES);
    if (c->said == TRANSPORT_TAG_FAREWELL) {
        LOG_INFO(LOG_SUB_NET, "shm: fd %d: the peer gave up and said why", c->fd);
        return shm_fail(c, CHORUS_ERR_REMOTE, 0);
    }
    LOG_WARN(LOG_SUB_NET, "shm: fd %d: the peer found that a message from here differs from what it expected", c->fd);
    return shm_fail(c, CHORUS_ERR_MISMATCH, 0);
}

/* A doorbell error that means the peer went away only stops new bytes (see shm_progress); any other is
 * our own failure. */
static chorus_result_t shm_doorbell_error(shm_conn_t *c, int e, const char *what)
{
    switch (e) {
    case EPIPE:
    case ECONNRESET:
    case ECONNABORTED:
    case ENOTCONN:
    case ETIMEDOUT:
        LOG_INFO(LOG_SUB_NET, "shm: fd %d: doorbell %s: peer lost: %s", c->fd, what, strerror(e));
        c->peer_gone = 1;
        c->peer_errno = e;
        return CHORUS_SUCCESS;
    default:
        LOG_WARN(LOG_SUB_NET, "shm: fd %d: doorbell %s failed: %s", c->fd, what, strerror(e));
        return shm_fail(c, CHORUS_ERR_SYSTEM, e);
    }
}

/* Back from a sleep: withdraw the asleep word and drain the doorbell, noticing the peer's close. */
static chorus_result_t shm_wake(shm_conn_t *c)
{
    atomic_store_explicit(&c->ctl->asleep[c->side].v, 0, memory_order_relaxed);
    c->asleep = 0;
    char buf[64];
    for (;;) {
        ssize_t n = SYSCALL_RETRY(recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT));
        if (n > 0) continue;
        if (n == 0) {
            LOG_INFO(LOG_SUB_NET, "shm: fd %d: closed by the peer", c->fd);
            c->peer_gone = 1;
            return CHORUS_SUCCESS;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) return CHORUS_SUCCESS;
        return shm_doorbell_error(c, errno, "recv");
    }
}

/* After publishing: wake the peer if it went to sleep. The fence pairs with the one in shm_poll_fd. */
static chorus_result_t shm_ring_doorbell(shm_conn_t *c)
{
    _Atomic uint64_t *peer_asleep = &c->ctl->asleep[1 - c->side].v;
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(peer_asleep, memory_order_relaxed) ||
        !atomic_exchange_explicit(peer_asleep, 0, memory_order_relaxed))
        return CHORUS_SUCCESS;
    char byte = 0;
    if (SYSCALL_RETRY(send(c->fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL)) == 1) return CHORUS_SUCCESS;
    /* A full doorbell already holds bytes the peer will wake to. */
    if (errno == EAGAIN || errno == EWOULDBLOCK) return CHORUS_SUCCESS;
    return shm_doorbell_error(c, errno, "send");
}

static void shm_write_frame(shm_conn_t *c, uint64_t len, uint32_t tag, const uint8_t *check)
{
    unsigned char frame[SHM_FRAME_BYTES];
    uint32_t magic = SHM_FRAME_MAGIC;
    memcpy(frame, &len, 8);
    memcpy(frame + 8, &tag, 4);
    memcpy(frame + 12, &magic, 4);
    memcpy(frame + 16, check, TRANSPORT_CHECK_BYTES);
    shm_copy_in(c, c->tx.pos, frame, SHM_FRAME_BYTES);
    c->tx.pos += SHM_FRAME_BYTES;
}

static void shm_send(shm_conn_t *c, int *moved)
{
    shm_dir_t *d = &c->tx;
    size_t budget = c->chunk_bytes;
    while (d->q.head && budget > 0) {
        transport_xfer_t *xfer = d->q.head;
        if (!d->framed) {
            if (shm_tx_room(c, SHM_FRAME_BYTES) < SHM_FRAME_BYTES) break;
            shm_write_frame(c, xfer->len, xfer->tag, xfer->check);
            d->framed = 1;
            *moved = 1;
        }
        size_t padded = shm_padded(xfer->len);
        while (d->body < padded && budget > 0) {
            size_t room = shm_tx_room(c, 1);
            if (room == 0) break;
            size_t n = CHORUS_MIN(CHORUS_MIN(padded - d->body, room), CHORUS_MIN(budget, (size_t)SHM_PUBLISH_BYTES));
            /* The padding is skipped, not written: nobody reads it. */
            if (d->body < xfer->len)
                shm_copy_in(c, d->pos, (const char *)xfer->buf + d->body, CHORUS_MIN(n, xfer->len - d->body));
            d->pos += n;
            d->body += n;
            budget -= n;
            xfer->done = CHORUS_MIN(d->body, xfer->len);
            *moved = 1;
            if (d->pos - d->published >= SHM_PUBLISH_BYTES) shm_publish(d);
        }
        if (d->body < padded) break;
        shm_queue_pop_done(d);
    }
}

/* Send this side's last word (transport.h) and wake the peer for it, unless this side is in the middle of
 * sending a message, where a frame cannot go, or the ring has no room for it now. */
static void shm_send_last_word(shm_conn_t *c, uint32_t tag, const uint8_t *payload)
{
    static const uint8_t zero[TRANSPORT_CHECK_BYTES];
    size_t need = SHM_FRAME_BYTES + shm_padded(TRANSPORT_NOTICE_BYTES);
    if (c->tx.framed || shm_tx_room(c, need) < need) return;
    shm_write_frame(c, TRANSPORT_NOTICE_BYTES, tag, zero);
    shm_copy_in(c, c->tx.pos, payload, TRANSPORT_NOTICE_BYTES);
    c->tx.pos += shm_padded(TRANSPORT_NOTICE_BYTES);
    shm_publish(&c->tx);
    (void)shm_ring_doorbell(c);
}

/* Whether the frame at `pos` is a whole last word. */
static int shm_last_word_at(shm_conn_t *c, uint64_t pos, uint64_t len, uint32_t tag, const uint8_t *check)
{
    if (!transport_frame_last_word(len, tag, check)) return 0;
    uint64_t end = atomic_load_explicit(c->rx.theirs, memory_order_acquire);
    return end - pos >= SHM_FRAME_BYTES + TRANSPORT_NOTICE_BYTES;
}

static chorus_result_t shm_check_frame(shm_conn_t *c, transport_xfer_t *xfer, const unsigned char *frame)
{
    uint64_t len;
    uint32_t tag, magic;
    memcpy(&len, frame, 8);
    memcpy(&tag, frame + 8, 4);
    memcpy(&magic, frame + 12, 4);
    if (magic == SHM_FRAME_MAGIC && len == (uint64_t)xfer->len && tag == xfer->tag &&
        memcmp(frame + 16, xfer->check, TRANSPORT_CHECK_BYTES) == 0)
        return CHORUS_SUCCESS;
    if (magic == SHM_FRAME_MAGIC && transport_frame_is_goodbye(len, tag, frame + 16)) {
        LOG_INFO(LOG_SUB_NET, "shm: fd %d: the peer closed in good order before sending this message", c->fd);
        return shm_fail(c, CHORUS_ERR_REMOTE, 0);
    }
    if (magic == SHM_FRAME_MAGIC && shm_last_word_at(c, c->rx.pos, len, tag, frame + 16))
        return shm_fail_said(c, c->rx.pos);
    xfer->peer_len = len;
    xfer->peer_tag = tag;
    memcpy(xfer->peer_check, frame + 16, TRANSPORT_CHECK_BYTES);
    if (magic != SHM_FRAME_MAGIC) {
        LOG_WARN(LOG_SUB_NET, "shm: fd %d: bad frame magic 0x%08x: the ring lost its framing", c->fd, magic);
    } else {
        LOG_WARN(LOG_SUB_NET, "shm: fd %d: receive posted for %zu bytes tag %u, peer sent %llu bytes tag %u%s", c->fd,
                 xfer->len, xfer->tag, (unsigned long long)len, tag,
                 len == xfer->len && tag == xfer->tag ? " with other check bytes" : "");
        uint8_t notice[TRANSPORT_NOTICE_BYTES];
        transport_notice_encode(notice, xfer, len, tag, frame + 16);
        shm_send_last_word(c, TRANSPORT_TAG_NOTICE, notice);
    }
    return shm_fail(c, CHORUS_ERR_MISMATCH, 0);
}

static chorus_result_t shm_recv(shm_conn_t *c, int *moved)
{
    shm_dir_t *d = &c->rx;
    size_t budget = c->chunk_bytes;
    while (d->q.head && budget > 0) {
        transport_xfer_t *xfer = d->q.head;
        if (!d->framed) {
            if (shm_rx_ready(c, SHM_FRAME_BYTES) < SHM_FRAME_BYTES) break;
            unsigned char frame[SHM_FRAME_BYTES];
            shm_copy_out(c, frame, d->pos, SHM_FRAME_BYTES);
            CHECK(shm_check_frame(c, xfer, frame));
            d->pos += SHM_FRAME_BYTES;
            d->framed = 1;
            *moved = 1;
        }
        size_t padded = shm_padded(xfer->len);
        while (d->body < padded && budget > 0) {
            size_t ready = shm_rx_ready(c, 1);
            if (ready == 0) break;
            size_t n = CHORUS_MIN(CHORUS_MIN(padded - d->body, ready), CHORUS_MIN(budget, (size_t)SHM_PUBLISH_BYTES));
            if (d->body < xfer->len)
                shm_copy_out(c, (char *)xfer->buf + d->body, d->pos, CHORUS_MIN(n, xfer->len - d->body));
            d->pos += n;
            d->body += n;
            budget -= n;
            xfer->done = CHORUS_MIN(d->body, xfer->len);
            *moved = 1;
            if (d->pos - d->published >= SHM_PUBLISH_BYTES) shm_publish(d);
        }
        if (d->body < padded) break;
        shm_queue_pop_done(d);
    }
    return CHORUS_SUCCESS;
}

/* Walk the whole frames in the unread part of the receive ring (from the next frame boundary). *said is
 * set to the frame position of a last word among them (SHM_NONE if none); returns whether they are whole frames
 * the last of which is the goodbye (TRANSPORT_TAG_GOODBYE): what a peer that closed in good order leaves. */
static int shm_ring_scan(shm_conn_t *c, uint64_t *said)
{
    uint64_t at = c->rx.pos, end = atomic_load_explicit(c->rx.theirs, memory_order_acquire);
    int goodbye = 0;
    *said = SHM_NONE;
    if (c->rx.framed) at += shm_padded(c->rx.q.head->len) - c->rx.body;
    while (end - at >= SHM_FRAME_BYTES) {
        unsigned char frame[SHM_FRAME_BYTES];
        uint64_t len;
        uint32_t tag, magic;
        shm_copy_out(c, frame, at, SHM_FRAME_BYTES);
        memcpy(&len, frame, 8);
        memcpy(&tag, frame + 8, 4);
        memcpy(&magic, frame + 12, 4);
        if (magic != SHM_FRAME_MAGIC) return 0;
        goodbye = transport_frame_is_goodbye(len, tag, frame + 16);
        if (*said == SHM_NONE && shm_last_word_at(c, at, len, tag, frame + 16)) *said = at;
        at += SHM_FRAME_BYTES;
        if (len > end - at) return 0;
        at += shm_padded((size_t)len);
    }
    return at == end && goodbye;
}

static chorus_result_t shm_post(shm_conn_t *c, shm_dir_t *d, transport_xfer_t *xfer)
{
    xfer->done = 0;
    xfer->err = CHORUS_SUCCESS;
    xfer->peer_len = 0;
    xfer->peer_tag = 0;
    xfer->sys_errno = 0;
    if (c->err != CHORUS_SUCCESS) {
        xfer_set_failed(xfer, c->err, c->sys_errno, c->said, c->words);
        return c->err;
    }
    xfer->state = XFER_PENDING;
    xfer_queue_push(&d->q, xfer);
    return CHORUS_SUCCESS;
}

static chorus_result_t shm_post_send(transport_conn_t *base, transport_xfer_t *xfer)
{
    shm_conn_t *c = (shm_conn_t *)base;
    return shm_post(c, &c->tx, xfer);
}

static chorus_result_t shm_post_recv(transport_conn_t *base, transport_xfer_t *xfer)
{
    shm_conn_t *c = (shm_conn_t *)base;
    return shm_post(c, &c->rx, xfer);
}

static chorus_result_t shm_progress(transport_conn_t *base, int *moved)
{
    shm_conn_t *c = (shm_conn_t *)base;
    *moved = 0;
    if (c->err != CHORUS_SUCCESS) return c->err;
    if (c->abandoned) {
        CHECK(shm_wake(c)); /* drains the doorbell, noticing the peer's close */
        return c->peer_gone ? shm_fail(c, CHORUS_ERR_REMOTE, c->peer_errno) : CHORUS_SUCCESS;
    }
    if (c->asleep) CHECK(shm_wake(c));
    int sent = 0, received = 0;
    /* Bytes for a peer that is gone would never be read: let the sends fail instead. */
    if (!c->peer_gone) shm_send(c, &sent);
    CHECK(shm_recv(c, &received));
    if (c->tx.pos != c->tx.published) shm_publish(&c->tx);
    if (c->rx.pos != c->rx.published) shm_publish(&c->rx);
    *moved = sent || received;
    if (*moved && !c->peer_gone) CHECK(shm_ring_doorbell(c));
    /* A gone peer's last messages stay receivable (unposted ones too, as TCP keeps them in the socket),
     * but only if it left in good order: unread messages that do not end with its goodbye are what a
     * crash leaves, and waiting for them to be asked for would hide the crash from a rank busy elsewhere.
     * Otherwise the connection fails once nothing more can come out of the ring for what is posted. */
    if (c->peer_gone && !received) {
        if (!c->peer_scanned) {
            c->peer_left = shm_ring_scan(c, &c->peer_said);
            c->peer_scanned = 1;
        }
        if (c->peer_said != SHM_NONE) return shm_fail_said(c, c->peer_said);
        if (c->tx.q.head || c->rx.q.head || shm_rx_ready(c, 1) == 0)
            return shm_fail(c, CHORUS_ERR_REMOTE, c->peer_errno);
        if (!c->peer_left) {
            LOG_INFO(LOG_SUB_NET, "shm: fd %d: closed by the peer behind unread messages, without its goodbye", c->fd);
            return shm_fail(c, CHORUS_ERR_REMOTE, c->peer_errno);
        }
    }
    return CHORUS_SUCCESS;
}

/* Would progress() move bytes now? Called after the fence in shm_poll_fd, so it sees what a peer
 * published before it could have seen our asleep word. */
static int shm_can_move(shm_conn_t *c)
{
    size_t tx_want = c->tx.framed ? 1 : SHM_FRAME_BYTES, rx_want = c->rx.framed ? 1 : SHM_FRAME_BYTES;
    if (c->tx.q.head && shm_tx_room(c, tx_want) >= tx_want) return 1;
    return c->rx.q.head && shm_rx_ready(c, rx_want) >= rx_want;
}

static int shm_poll_fd(transport_conn_t *base, short *events)
{
    shm_conn_t *c = (shm_conn_t *)base;
    *events = 0;
    /* A gone peer that was not failed left messages nobody has asked for: nothing to wait for. */
    if (c->err != CHORUS_SUCCESS || c->peer_gone) return -1;
    if (c->abandoned) {
        *events = POLLIN;
        return c->fd;
    }
    atomic_store_explicit(&c->ctl->asleep[c->side].v, 1, memory_order_relaxed);
    c->asleep = 1;
    atomic_thread_fence(memory_order_seq_cst);
    /* POLLIN: doorbell bytes and the peer's close. POLLOUT, ready at once, when there is work already. */
    *events = POLLIN;
    if (shm_can_move(c)) *events |= POLLOUT;
    return c->fd;
}

static void shm_abandon(transport_conn_t *base, const uint8_t *farewell)
{
    shm_conn_t *c = (shm_conn_t *)base;
    if (farewell && c->err == CHORUS_SUCCESS && !c->abandoned && !c->peer_gone)
        shm_send_last_word(c, TRANSPORT_TAG_FAREWELL, farewell);
    c->tx.q.head = c->tx.q.tail = NULL;
    c->rx.q.head = c->rx.q.tail = NULL;
    c->abandoned = 1;
}

/* Leaves the segment's shared words alone, so that closing an inherited copy (after fork) is invisible
 * to the processes still using the connection. */
static void shm_close(transport_conn_t *base)
{
    shm_conn_t *c = (shm_conn_t *)base;
    munmap(c->ctl, c->map_bytes);
    close(c->fd);
    free(c);
}

static const transport_ops_t shm_ops = {
    .name = "shm",
    .post_send = shm_post_send,
    .post_recv = shm_post_recv,
    .progress = shm_progress,
    .poll_fd = shm_poll_fd,
    .abandon = shm_abandon,
    .close = shm_close,
};

/* ---- Set-up ---- */

typedef struct shm_setup_msg {
    uint32_t magic;
    uint32_t version;
    uint32_t ok;
    uint32_t reserved;
    uint64_t ring_bytes;
    uint8_t token[SHM_TOKEN_BYTES];
    char text[SHM_TEXT_BYTES]; /* the segment's name in an offer; the reason in a refusal */
} shm_setup_msg_t;

typedef struct shm_setup {
    int fd;
    int64_t deadline;
    const char *name;
    size_t page;
    size_t ring_bytes;
    size_t seg_bytes;
    shm_ctl_t *ctl;  /* the mapped segment, NULL until then */
    int ok;          /* this side's verdict so far */
    char why[SHM_TEXT_BYTES]; /* the first reason it turned false */
    struct pollfd *pfd;       /* fd, then the watched descriptors (transport_options_t.watch_fds) */
    int npfd;
    int watch_closed;         /* the index of the watched descriptor that closed, or -1 */
} shm_setup_t;

static void shm_refuse(shm_setup_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void shm_refuse(shm_setup_t *s, const char *fmt, ...)
{
    if (!s->ok) return;
    s->ok = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof(s->why), fmt, ap);
    va_end(ap);
}

/* Wait until fd is ready or the deadline passes; a watched descriptor whose peer closed (only its close
 * is asked for: bytes waiting on it are not this exchange's) ends the exchange with REMOTE. */
static chorus_result_t shm_setup_wait(shm_setup_t *s, short events)
{
    struct pollfd one = {.fd = s->fd, .events = events}, *pfd = s->pfd ? s->pfd : &one;
    int n = s->pfd ? s->npfd : 1;
    pfd[0] = one;
    if (SYSCALL_RETRY(poll(pfd, (nfds_t)n, time_left_ms(s->deadline, 1000))) < 0) return CHORUS_ERR_SYSTEM;
    for (int k = 1; k < n; k++)
        if (pfd[k].fd >= 0 && (pfd[k].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
            s->watch_closed = k - 1;
            snprintf(s->why, sizeof(s->why), "another connection (watched descriptor %d) closed", k - 1);
            return CHORUS_ERR_REMOTE;
        }
    return CHORUS_SUCCESS;
}

/* The doorbell may be in blocking mode (bootstrap hands over such sockets): every call is MSG_DONTWAIT
 * and waits in poll(), so the descriptor's flags stay as the caller left them. */
static chorus_result_t shm_setup_io(shm_setup_t *s, void *buf, size_t len, int sending)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = sending ? send(s->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL) : recv(s->fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) return CHORUS_ERR_REMOTE;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return errno == EPIPE || errno == ECONNRESET ? CHORUS_ERR_REMOTE : CHORUS_ERR_SYSTEM;
        if (time_now_ns() >= s->deadline) return CHORUS_ERR_TIMEOUT;
        CHECK(shm_setup_wait(s, sending ? POLLOUT : POLLIN));
    }
    return CHORUS_SUCCESS;
}

static chorus_result_t shm_msg_send(shm_setup_t *s, shm_setup_msg_t *msg)
{
    msg->magic = SHM_SETUP_MAGIC;
    msg->version = SHM_VERSION;
    msg->ok = (uint32_t)s->ok;
    if (!s->ok) snprintf(msg->text, sizeof(msg->text), "%s", s->why);
    return shm_setup_io(s, msg, sizeof(*msg), 1);
}

/* A message from another protocol version reads as a refusal. */
static chorus_result_t shm_msg_recv(shm_setup_t *s, shm_setup_msg_t *msg)
{
    CHECK(shm_setup_io(s, msg, sizeof(*msg), 0));
    msg->text[sizeof(msg->text) - 1] = 0;
    if (msg->magic != SHM_SETUP_MAGIC || msg->version != SHM_VERSION) {
        snprintf(msg->text, sizeof(msg->text), "shm set-up protocol %#x version %u, this side speaks %#x version %u",
                 msg->magic, msg->version, SHM_SETUP_MAGIC, SHM_VERSION);
        msg->ok = 0;
    }
    if (!msg->ok) shm_refuse(s, "the peer: %s", msg->text);
    return CHORUS_SUCCESS;
}

static size_t shm_ctl_bytes(size_t page) { return (sizeof(shm_ctl_t) + page - 1) / page * page; }

/* Sizes from a ring size; 0 if it is not a whole number of pages or too large to map twice. */
static size_t shm_seg_bytes(size_t page, size_t ring_bytes)
{
    if (ring_bytes == 0 || ring_bytes % page != 0 || ring_bytes > (SIZE_MAX >> 2)) return 0;
    return shm_ctl_bytes(page) + 2 * ring_bytes;
}

static void shm_seg_create(shm_setup_t *s, size_t want_ring)
{
    s->ring_bytes = (CHORUS_MAX(want_ring, (size_t)1) + s->page - 1) / s->page * s->page;
    s->seg_bytes = shm_seg_bytes(s->page, s->ring_bytes);
    if (s->seg_bytes == 0) {
        shm_refuse(s, "a shared memory ring of %zu bytes is too large", want_ring);
        return;
    }
    if (s->name && strlen(s->name) >= SHM_TEXT_BYTES) {
        shm_refuse(s, "shared memory segment name \"%s\" is too long", s->name);
        return;
    }
    char why[SHM_TEXT_BYTES];
    void *map;
    if (shmem_create(s->name, s->seg_bytes, &map, why, sizeof(why)) != 0) {
        shm_refuse(s, "%s%s", why, strstr(why, "MiB free") ? " for shared memory with this peer: enlarge /dev/shm "
                   "(docker --shm-size) or set CHORUS_TRANSPORT=tcp" : "");
        return;
    }
    s->ctl = map;
    if (sock_random_bytes(s->ctl->creator_token, SHM_TOKEN_BYTES) != CHORUS_SUCCESS) {
        shm_refuse(s, "no random bytes for the shared memory token");
        shm_unlink(s->name);
        return;
    }
    s->ctl->magic = SHM_SEG_MAGIC;
    s->ctl->version = SHM_VERSION;
    s->ctl->ring_bytes = s->ring_bytes;
}

/* Map the segment the peer offered, if it is the one the peer made. */
static void shm_seg_attach(shm_setup_t *s, const shm_setup_msg_t *offer)
{
    s->ring_bytes = (size_t)offer->ring_bytes;
    s->seg_bytes = shm_seg_bytes(s->page, s->ring_bytes);
    if (s->seg_bytes == 0 || s->ring_bytes != offer->ring_bytes) {
        shm_refuse(s, "the peer offers a ring of %llu bytes, not a whole number of %zu-byte pages",
                   (unsigned long long)offer->ring_bytes, s->page);
        return;
    }
    if (s->name && strcmp(s->name, offer->text) != 0) {
        shm_refuse(s, "the peer offers shared memory segment %s, not %s", offer->text, s->name);
        return;
    }
    s->name = offer->text;
    char why[SHM_TEXT_BYTES];
    void *map;
    if (shmem_open(s->name, s->seg_bytes, &map, why, sizeof(why)) != 0) {
        shm_refuse(s, "%s", why);
        return;
    }
    s->ctl = map;
    if (s->ctl->magic != SHM_SEG_MAGIC || s->ctl->version != SHM_VERSION || s->ctl->ring_bytes != s->ring_bytes ||
        memcmp(s->ctl->creator_token, offer->token, SHM_TOKEN_BYTES) != 0)
        shm_refuse(s, "shared memory segment %s is not the one the peer made: its token differs", s->name);
    if (s->ok) shm_unlink(s->name);
}

/* Each side keeps the first reason it met; an echo of the peer's own refusal changes nothing. */
static chorus_result_t shm_setup_creator(shm_setup_t *s, size_t want_ring)
{
    shm_setup_msg_t offer = {0}, answer, verdict = {0};
    if (s->ok) shm_seg_create(s, want_ring);
    int created = s->ok;
    offer.ring_bytes = s->ring_bytes;
    if (s->ok) {
        memcpy(offer.token, s->ctl->creator_token, SHM_TOKEN_BYTES);
        snprintf(offer.text, sizeof(offer.text), "%s", s->name);
    }
    chorus_result_t res = shm_msg_send(s, &offer);
    if (res == CHORUS_SUCCESS) res = shm_msg_recv(s, &answer);
    /* Mapped by both by now, or never to be: either way the name has served. */
    if (created) shm_unlink(s->name);
    CHECK(res);
    if (s->ok && memcmp(s->ctl->opener_token, answer.token, SHM_TOKEN_BYTES) != 0)
        shm_refuse(s, "the opener's token is not in shared memory segment %s: the two processes do not share its "
                   "memory", s->name);
    return shm_msg_send(s, &verdict);
}

static chorus_result_t shm_setup_opener(shm_setup_t *s)
{
    shm_setup_msg_t offer, answer = {0}, verdict;
    CHECK(shm_msg_recv(s, &offer));
    if (s->ok) shm_seg_attach(s, &offer);
    if (s->ok && sock_random_bytes(answer.token, SHM_TOKEN_BYTES) != CHORUS_SUCCESS)
        shm_refuse(s, "no random bytes for the shared memory token");
    if (s->ok) memcpy(s->ctl->opener_token, answer.token, SHM_TOKEN_BYTES);
    CHECK(shm_msg_send(s, &answer));
    return shm_msg_recv(s, &verdict);
}

chorus_result_t shm_conn_open(int doorbell_fd, const char *name, int creator, const transport_options_t *opt,
                              transport_conn_t **conn_p, char *err, size_t errlen)
{
    shm_setup_t s = {
        .fd = doorbell_fd, .name = name, .ok = 1, .page = (size_t)sysconf(_SC_PAGESIZE), .watch_closed = -1};
    s.deadline = opt->shm_setup_timeout_ms > 0 ? time_deadline_ms(opt->shm_setup_timeout_ms) : INT64_MAX;
    if (opt->nwatch > 0 && opt->watch_fds) {
        s.pfd = calloc((size_t)opt->nwatch + 1, sizeof(*s.pfd));
        if (!s.pfd) shm_refuse(&s, "out of memory");
        for (int k = 0; s.pfd && k < opt->nwatch; k++)
            s.pfd[k + 1] = (struct pollfd){.fd = opt->watch_fds[k] == doorbell_fd ? -1 : opt->watch_fds[k],
                                           .events = POLLRDHUP};
        s.npfd = opt->nwatch + 1;
    }
    /* Allocated before the exchange, so that running out of memory is a refusal both sides agree on. */
    shm_conn_t *c = calloc(1, sizeof(*c));
    if (!c) shm_refuse(&s, "out of memory");
    chorus_result_t res = creator ? shm_setup_creator(&s, opt->shm_ring_bytes) : shm_setup_opener(&s);
    free(s.pfd);
    if (opt->watch_closed) *opt->watch_closed = s.watch_closed;
    if (res == CHORUS_SUCCESS && !s.ok) res = CHORUS_ERR_NOT_SUPPORTED;
    if (res != CHORUS_SUCCESS) {
        if (s.ok && s.watch_closed < 0)
            snprintf(s.why, sizeof(s.why), "shared memory set-up with the peer failed: %s", chorus_strerror(res));
        if (err && errlen) snprintf(err, errlen, "%s", s.why);
        LOG_INFO(LOG_SUB_NET, "shm: fd %d: no shared memory: %s", doorbell_fd, s.why);
        if (s.ctl) munmap(s.ctl, s.seg_bytes);
        free(c);
        return res;
    }
    int domain = 0;
    socklen_t domain_len = sizeof(domain);
    /* Nagle would hold a doorbell byte back while an earlier one is unacknowledged. */
    if (getsockopt(doorbell_fd, SOL_SOCKET, SO_DOMAIN, &domain, &domain_len) == 0 &&
        (domain == AF_INET || domain == AF_INET6))
        (void)setsockopt(doorbell_fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    int side = creator ? 0 : 1;
    char *rings = (char *)s.ctl + shm_ctl_bytes(s.page);
    c->base.ops = &shm_ops;
    c->fd = doorbell_fd;
    c->side = side;
    c->chunk_bytes = opt->chunk_bytes > 0 ? opt->chunk_bytes : SIZE_MAX;
    c->ring_bytes = s.ring_bytes;
    c->ctl = s.ctl;
    c->map_bytes = s.seg_bytes;
    c->tx = (shm_dir_t){.ring = rings + (size_t)side * s.ring_bytes,
                        .mine = &s.ctl->tail[side].v,
                        .theirs = &s.ctl->head[side].v};
    c->rx = (shm_dir_t){.ring = rings + (size_t)(1 - side) * s.ring_bytes,
                        .mine = &s.ctl->head[1 - side].v,
                        .theirs = &s.ctl->tail[1 - side].v};
    LOG_DEBUG(LOG_SUB_NET, "shm: fd %d open, ring %zu bytes per direction, chunk %zu bytes", doorbell_fd, s.ring_bytes,
              opt->chunk_bytes);
    *conn_p = &c->base;
    return CHORUS_SUCCESS;
}
