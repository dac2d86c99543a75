/*
 * THE transport contract.
 *
 * A transport moves bytes over one connection between two endpoints. It never sees a communicator, a
 * datatype, a reduction or an algorithm: it is handed an already authenticated connection (bootstrap made
 * it), queues of transfers, and reports progress and failure through the transfers' status fields. It
 * never calls up.
 *
 * Messages. A transfer is one message: the sender's bytes arrive in the receiver's buffer in one piece,
 * preceded on the wire by a small frame header (length and a 32-bit tag) so that a receiver whose posted
 * length or tag differs from what arrives fails with CHORUS_ERR_MISMATCH instead of reading garbage.
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

#include <stddef.h>
#include <stdint.h>

#include "chorus/chorus.h"

typedef enum { XFER_PENDING = 0, XFER_DONE = 1, XFER_FAILED = 2 } xfer_state_t;

typedef struct transport_xfer {
    /* Set by the caller before posting. */
    void *buf;
    size_t len;
    uint32_t tag;
    /* Written by the transport. */
    size_t done;        /* bytes moved so far; for a receive, buf[0, done) holds final data */
    xfer_state_t state;
    chorus_result_t err;  /* when FAILED: REMOTE (peer closed or reset), MISMATCH, SYSTEM */
    uint64_t peer_len;    /* when MISMATCH: what the sender's header announced */
    uint32_t peer_tag;
    int sys_errno;        /* when REMOTE or SYSTEM: the errno seen, 0 for an orderly close */
    struct transport_xfer *next; /* queue link, owned by the transport while posted */
} transport_xfer_t;

typedef struct transport_conn transport_conn_t;

typedef struct transport_ops {
    const char *name;
    /* Queue a transfer. Never blocks; bytes may move now or in later progress() calls. Returns
     * CHORUS_SUCCESS, or the connection's sticky error if it already failed (the transfer is then FAILED). */
    chorus_result_t (*post_send)(transport_conn_t *conn, transport_xfer_t *xfer);
    chorus_result_t (*post_recv)(transport_conn_t *conn, transport_xfer_t *xfer);
    /* Move as many bytes as possible without blocking, but at most chunk_bytes of payload per direction
     * (so that the caller sees every chunk land); *moved is set to 1 if any byte moved. On a
     * connection failure it returns the error, marks every posted transfer FAILED, and the error sticks;
     * the connection is shut down, so that the peer fails too instead of waiting for it. */
    chorus_result_t (*progress)(transport_conn_t *conn, int *moved);
    /* The descriptor to poll when progress() moved nothing, and the events that would let it move
     * (POLLIN with a receive posted or the peer's close to notice, POLLOUT with a send queued). -1 if none. */
    int (*poll_fd)(transport_conn_t *conn, short *events);
    /* Close the connection; pending transfers are abandoned (left PENDING, owned by the caller again). */
    void (*close)(transport_conn_t *conn);
} transport_ops_t;

/* Every transport's connection begins with this. */
struct transport_conn {
    const transport_ops_t *ops;
};

/* Tuning handed down at connection set-up (values come from the knobs; the transport reads no knob). */
typedef struct transport_options {
    size_t chunk_bytes;   /* largest single read/write: receivers see progress at this granularity; 0: no limit */
    size_t socket_buffer; /* SO_SNDBUF / SO_RCVBUF request; 0 keeps the kernel's */
} transport_options_t;

/* TCP: wrap a connected, authenticated stream socket. Takes ownership of fd (closed by close(), or at once
 * if this fails). */
chorus_result_t tcp_conn_open(int fd, const transport_options_t *opt, transport_conn_t **conn_p);

#endif
