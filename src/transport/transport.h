/*
 * THE transport contract.
 *
 * A transport moves bytes over one connection between two endpoints. It never sees a communicator, a
 * datatype, a reduction or an algorithm: it is handed an already authenticated connection (bootstrap made
 * it), queues of transfers, and reports progress and failure through the transfers' status fields. It
 * never calls up.
 *
 * Messages. A transfer is one message: the sender's bytes arrive in the receiver's buffer in one piece,
 * preceded on the wire by a small frame header (length, a 32-bit tag and TRANSPORT_CHECK_BYTES of check
 * bytes the caller sets, opaque to the transport) so that a receiver whose posted length, tag or check
 * bytes differ from what arrives fails with CHORUS_ERR_MISMATCH, told what the sender's frame said,
 * instead of reading garbage. A side's last word (a notice after a mismatch, a farewell on abandon; see
 * TRANSPORT_TAG_NOTICE) tells the peer why the connection ends.
 *
 * Ordering. Per connection and direction, messages are matched and complete in the order posted.
 *
 * Ownership. A posted transfer and its buffer belong to the transport until the transfer is no longer
 * XFER_PENDING, or until the connection is closed; then they are the caller's again.
 *
 * Blocking. No operation blocks. When progress() moves nothing, the caller waits on poll_fd().
 */
#ifndef CHORUS_TRANSPORT_H
#define CHORUS_TRANSPORT_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "chorus/chorus.h"

typedef enum { XFER_PENDING = 0, XFER_DONE = 1, XFER_FAILED = 2 } xfer_state_t;

#define TRANSPORT_CHECK_BYTES 32

/* The tag of a connection's last message, an empty one with zero check bytes sent right before an
 * orderly close and never received (no other message has both this tag and zero check bytes). A
 * transport that finds its peer's close behind bytes nobody asked for yet (the peer sent ahead, then went
 * away) tells an orderly close from a crash by it: the stream ends with this frame only if the peer left
 * in good order. */
#define TRANSPORT_TAG_GOODBYE 0xffffffffu

static inline int transport_frame_is_goodbye(uint64_t len, uint32_t tag, const uint8_t *check)
{
    static const uint8_t zero[TRANSPORT_CHECK_BYTES];
    return len == 0 && tag == TRANSPORT_TAG_GOODBYE && memcmp(check, zero, TRANSPORT_CHECK_BYTES) == 0;
}

/*
 * A side's last word: a message of TRANSPORT_NOTICE_BYTES with zero check bytes and one of two tags, sent
 * only where the stream is between messages and the socket or ring takes it now, whole (best effort:
 * without it the peer sees only the connection's end, or nothing). A receiver that meets it where it expected a
 * message, or behind the peer's close, fails the connection with it (see peer_found and peer_farewell).
 *  - TRANSPORT_TAG_NOTICE: sent by a receiver that found a mismatch, right before it shuts the connection
 *    down, so that a peer that only sends learns what differed, not only that the connection ended. Its
 *    payload is two frame headers {u64 len; u32 tag; u32 unused; u8 check[32]} (little-endian): what the
 *    receiver had posted, and what arrived from the peer. The peer fails with CHORUS_ERR_MISMATCH.
 *  - TRANSPORT_TAG_FAREWELL: sent by abandon() for the layer above, whose operation failed: its payload is
 *    the layer's own (why it gave up), opaque to the transport. The peer fails with CHORUS_ERR_REMOTE.
 */
#define TRANSPORT_TAG_NOTICE 0xfffffffeu
#define TRANSPORT_TAG_FAREWELL 0xfffffffdu
#define TRANSPORT_NOTICE_HALF (16 + TRANSPORT_CHECK_BYTES)
#define TRANSPORT_NOTICE_BYTES (2 * TRANSPORT_NOTICE_HALF)

/* The tag of a frame that is a last word (TRANSPORT_TAG_NOTICE or _FAREWELL), else 0. */
static inline uint32_t transport_frame_last_word(uint64_t len, uint32_t tag, const uint8_t *check)
{
    static const uint8_t zero[TRANSPORT_CHECK_BYTES];
    if (len != TRANSPORT_NOTICE_BYTES || (tag != TRANSPORT_TAG_NOTICE && tag != TRANSPORT_TAG_FAREWELL)) return 0;
    return memcmp(check, zero, TRANSPORT_CHECK_BYTES) == 0 ? tag : 0;
}

typedef struct transport_xfer {
    /* Set by the caller before posting. */
    void *buf;
    size_t len;
    uint32_t tag;
    uint8_t check[TRANSPORT_CHECK_BYTES]; /* both sides must post the same (the layer above's fingerprint) */
    /* Written by the transport. */
    size_t done;        /* bytes moved so far; for a receive, buf[0, done) holds final data */
    xfer_state_t state;
    chorus_result_t err;  /* when FAILED: REMOTE (peer closed or reset), MISMATCH, SYSTEM */
    /* When MISMATCH found here: what the sender's header announced. When MISMATCH found by the peer
     * (peer_found, from its notice): what the peer had posted, and in own_* what it got from this side
     * instead (a message of this side's, not necessarily this transfer). */
    uint64_t peer_len;
    uint32_t peer_tag;
    uint8_t peer_check[TRANSPORT_CHECK_BYTES];
    int peer_found;
    uint64_t own_len;
    uint32_t own_tag;
    uint8_t own_check[TRANSPORT_CHECK_BYTES];
    /* When REMOTE because the peer's layer above gave up and said why (TRANSPORT_TAG_FAREWELL): its words. */
    int peer_farewell;
    uint8_t farewell[TRANSPORT_NOTICE_BYTES];
    int sys_errno;        /* when REMOTE or SYSTEM: the errno seen, 0 for an orderly close */
    struct transport_xfer *next; /* queue link, owned by the transport while posted */
} transport_xfer_t;

/* The FIFO of posted transfers a transport keeps per direction: helpers every transport shares. */
typedef struct xfer_queue {
    struct transport_xfer *head;
    struct transport_xfer *tail;
} xfer_queue_t;

typedef struct transport_conn transport_conn_t;

typedef struct transport_ops {
    const char *name;
    /* Queue a transfer. Never blocks; bytes may move now or in later progress() calls. Returns
     * CHORUS_SUCCESS, or the connection's sticky error if it already failed (the transfer is then FAILED). */
    chorus_result_t (*post_send)(transport_conn_t *conn, transport_xfer_t *xfer);
    chorus_result_t (*post_recv)(transport_conn_t *conn, transport_xfer_t *xfer);
    /* Move as many bytes as possible without blocking, but at most transport_piece_bytes() of payload per
     * direction (so that the caller sees every piece land); *moved is set to 1 if any byte moved. On a
     * connection failure it returns the error, marks every posted transfer FAILED, and the error sticks;
     * the connection is shut down, so that the peer fails too instead of waiting for it. */
    chorus_result_t (*progress)(transport_conn_t *conn, int *moved);
    /* The descriptor to poll when progress() moved nothing, and the events that would let it move
     * (POLLIN with a receive posted or the peer's close to notice, POLLOUT with a send queued). -1 if none.
     * It is the transport's "about to sleep" hook: call it right before each poll() and progress() after
     * each poll() returns. A transport that finds, while preparing to sleep, that progress() could move
     * bytes after all asks for an event that is ready at once (shm: POLLOUT on its doorbell), so a
     * wake-up that raced with the preparation is never lost. */
    int (*poll_fd)(transport_conn_t *conn, short *events);
    /* Give every posted transfer back (left as they are, the caller's again) and stop moving data, but keep
     * the connection open, so that the peer does not take it for this side's failure. With farewell (not
     * NULL), TRANSPORT_NOTICE_BYTES of the caller's saying why go to the peer as this side's last word
     * (TRANSPORT_TAG_FAREWELL). From then on progress() only discards what arrives and reports the peer's
     * close (REMOTE), and poll_fd() waits for it. Used once an operation failed: its buffers may be freed
     * while the connection lingers. */
    void (*abandon)(transport_conn_t *conn, const uint8_t *farewell);
    /* Close the connection; pending transfers are abandoned (left PENDING, owned by the caller again). */
    void (*close)(transport_conn_t *conn);
} transport_ops_t;

static inline void xfer_queue_push(xfer_queue_t *q, transport_xfer_t *xfer)
{
    xfer->next = NULL;
    if (q->tail)
        q->tail->next = xfer;
    else
        q->head = xfer;
    q->tail = xfer;
}

/* Completion hands the transfer back to the caller, so it is unlinked before its state is published. */
static inline void xfer_queue_pop_done(xfer_queue_t *q)
{
    transport_xfer_t *xfer = q->head;
    q->head = xfer->next;
    if (!q->head) q->tail = NULL;
    xfer->state = XFER_DONE;
}

/* Encode a notice's payload: what this side had posted (`posted`) and the frame header that arrived
 * instead (len, tag, check). */
static inline void transport_notice_encode(uint8_t *out, const struct transport_xfer *posted, uint64_t len,
                                           uint32_t tag, const uint8_t *check)
{
    uint64_t lens[2] = {htole64((uint64_t)posted->len), htole64(len)};
    uint32_t tags[2] = {htole32(posted->tag), htole32(tag)};
    const uint8_t *checks[2] = {posted->check, check};
    memset(out, 0, TRANSPORT_NOTICE_BYTES);
    for (int i = 0; i < 2; i++) {
        uint8_t *half = out + i * TRANSPORT_NOTICE_HALF;
        memcpy(half, &lens[i], 8);
        memcpy(half + 8, &tags[i], 4);
        memcpy(half + 16, checks[i], TRANSPORT_CHECK_BYTES);
    }
}

/* The failure fields of a transfer from the connection's sticky state: err, errno, and the peer's last
 * word (`said` is its tag, 0 if none, then `words` its payload). */
static inline void xfer_set_failed(transport_xfer_t *xfer, chorus_result_t err, int sys_errno, uint32_t said,
                                   const uint8_t *words)
{
    xfer->err = err;
    xfer->sys_errno = sys_errno;
    xfer->peer_found = said == TRANSPORT_TAG_NOTICE;
    xfer->peer_farewell = said == TRANSPORT_TAG_FAREWELL;
    if (xfer->peer_farewell) memcpy(xfer->farewell, words, TRANSPORT_NOTICE_BYTES);
    if (xfer->peer_found) {
        const uint8_t *notice = words;
        uint64_t len;
        uint32_t tag;
        memcpy(&len, notice, 8);
        memcpy(&tag, notice + 8, 4);
        xfer->peer_len = le64toh(len);
        xfer->peer_tag = le32toh(tag);
        memcpy(xfer->peer_check, notice + 16, TRANSPORT_CHECK_BYTES);
        notice += TRANSPORT_NOTICE_HALF;
        memcpy(&len, notice, 8);
        memcpy(&tag, notice + 8, 4);
        xfer->own_len = le64toh(len);
        xfer->own_tag = le32toh(tag);
        memcpy(xfer->own_check, notice + 16, TRANSPORT_CHECK_BYTES);
    }
    xfer->state = XFER_FAILED;
}

/* Fail every queued transfer, emptying the queue. */
static inline void xfer_queue_fail(xfer_queue_t *q, chorus_result_t err, int sys_errno, uint32_t said,
                                   const uint8_t *words)
{
    transport_xfer_t *xfer = q->head;
    q->head = q->tail = NULL;
    while (xfer) {
        transport_xfer_t *next = xfer->next;
        xfer_set_failed(xfer, err, sys_errno, said, words);
        xfer = next;
    }
}

/* Every transport's connection begins with this. */
struct transport_conn {
    const transport_ops_t *ops;
};

/* The most payload one progress() call may move for a transfer of len bytes with chunk_bytes: one chunk,
 * or an eighth of a larger transfer. Larger pieces of a large transfer are cheaper to move (over TCP a
 * socket with a backlog is slower to drain in small reads: two ranks exchanging 64 MiB over loopback
 * took 20 % longer reading 256 KiB at a time than 1 MiB and up, and from 1 to 16 MiB the piece size made
 * no difference); and a caller that works on each piece as it lands (a streamed reduction) still
 * overlaps all but the last eighth of that work with the transfer. */
#define TRANSPORT_PIECES 8
static inline size_t transport_piece_bytes(size_t chunk_bytes, size_t len)
{
    size_t eighth = len / TRANSPORT_PIECES;
    return chunk_bytes == 0 ? SIZE_MAX : chunk_bytes > eighth ? chunk_bytes : eighth;
}

/* Tuning handed down at connection set-up (values come from the knobs; the transport reads no knob). */
typedef struct transport_options {
    size_t chunk_bytes;   /* progress granularity (transport_piece_bytes); 0: no limit */
    size_t socket_buffer;      /* SO_RCVBUF request; 0 keeps the kernel's */
    size_t socket_send_buffer; /* SO_SNDBUF request; 0 keeps the kernel's */
    size_t shm_ring_bytes; /* shm: ring per direction, rounded up to whole pages (the creator's value rules) */
    int64_t shm_setup_timeout_ms; /* shm: bound on the set-up exchange with the peer; 0: none */
    /* shm: descriptors of other connections to watch during the set-up exchange (entries of -1 and the
     * doorbell itself are skipped). The close of one (its peer died or gave up) ends the exchange with
     * CHORUS_ERR_REMOTE, its index in *watch_closed (else -1), instead of waiting on a peer that will now
     * never answer. NULL / 0: none. */
    const int *watch_fds;
    int nwatch;
    int *watch_closed;
} transport_options_t;

/* TCP: wrap a connected, authenticated stream socket. Takes ownership of fd (closed by close(), or at once
 * if this fails). */
chorus_result_t tcp_conn_open(int fd, const transport_options_t *opt, transport_conn_t **conn_p);

/* Shared memory with a peer on the same host. doorbell_fd is a connected, authenticated stream socket to
 * that peer: it carries a short set-up exchange, then wakes a sleeping side, and its EOF or reset reports
 * the peer's death. The creator (the caller says which side) makes the segment `name` ("/chorus-<hex>");
 * the opener checks that the peer offers that name (NULL: takes the one offered). Blocks until both sides
 * agree, until opt->shm_setup_timeout_ms, or until a watched descriptor closes (opt->watch_fds).
 * SUCCESS: the connection owns doorbell_fd. NOT_SUPPORTED: both sides refused (err says why, e.g. too
 * little room in /dev/shm); doorbell_fd is still the caller's and holds no stray byte, so both can fall
 * back to tcp_conn_open on it. Any other error (REMOTE, TIMEOUT, SYSTEM): the exchange itself broke off;
 * doorbell_fd is still the caller's, to close. */
chorus_result_t shm_conn_open(int doorbell_fd, const char *name, int creator, const transport_options_t *opt,
                              transport_conn_t **conn_p, char *err, size_t errlen);

#endif
