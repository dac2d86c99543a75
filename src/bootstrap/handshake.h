/*
 * The mutual handshake that opens every bootstrap connection, as a non-blocking state machine: feed it
 * whenever its socket is ready and it says what to wait for next.
 *
 *   client -> server  HELLO      u32 magic, u16 version, u16 0, u64 comm tag, client nonce[16]      (32 B)
 *   server -> client  CHALLENGE  u32 magic, u16 version, u16 status, server nonce[16],
 *                                HMAC(key, "server" | client nonce | server nonce)[32]             (56 B)
 *   client -> server  PROOF      HMAC(key, "client" | server nonce | client nonce | payload)[32],
 *                                payload: u32 rank, u32 nranks                                      (40 B)
 *   server -> client  ACCEPT     u32 magic, u32 0                                                   (8 B)
 *
 * Integers are little-endian. HMAC is HMAC-SHA256 keyed by the unique id's secret, which never crosses
 * the wire; nonces are fresh random bytes per connection, so a recorded exchange cannot be replayed.
 * A HELLO with a bad magic is dropped without a word (not our protocol); one with another version or tag
 * gets a CHALLENGE whose status says so, without a MAC, so that a misconfigured rank learns why at once.
 * The ACCEPT lets the client tell "authenticated" from "dropped by a server whose handshake timer ran
 * out": only the former may be kept.
 */
#ifndef CHORUS_BOOTSTRAP_HANDSHAKE_H
#define CHORUS_BOOTSTRAP_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/wire.h"

#define HANDSHAKE_NONCE_BYTES 16
#define HANDSHAKE_MAC_BYTES 32
#define HANDSHAKE_MSG_MAX 56

typedef struct handshake {
    const bootstrap_secret_t *secret; /* borrowed: outlives the handshake */
    int step;
    int rejecting; /* server: fail once the rejecting CHALLENGE is sent */
    uint8_t nonce[HANDSHAKE_NONCE_BYTES];
    uint8_t peer_nonce[HANDSHAKE_NONCE_BYTES];
    uint32_t rank, nranks; /* the client's payload: set by the client, learned by the server */
    uint8_t buf[HANDSHAKE_MSG_MAX];
    size_t len, off;
    char why[128]; /* after a failure: what went wrong, for the owner's log line */
} handshake_t;

/* Start a handshake; a client sends rank and nranks as its payload (a server passes 0, 0). */
chorus_result_t handshake_init(handshake_t *hs, const bootstrap_secret_t *secret, int server, uint32_t rank,
                               uint32_t nranks);

/* Move as far as the socket allows. On success *done_p says whether the handshake completed; if not,
 * *events_p is EPOLLIN or EPOLLOUT, what to wait for. Errors (hs->why says more):
 * AUTH   the peer failed authentication (magic, version, tag or MAC)
 * REMOTE the peer closed or reset the connection
 * SYSTEM a socket call failed. */
chorus_result_t handshake_progress(handshake_t *hs, int fd, int *done_p, uint32_t *events_p);

/* HMAC-SHA256 of data under the secret's key. */
chorus_result_t handshake_hmac(const uint8_t *key, const void *data, size_t len, uint8_t mac[HANDSHAKE_MAC_BYTES]);

#endif
