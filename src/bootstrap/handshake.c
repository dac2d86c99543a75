/* The bootstrap handshake state machine (the messages are described in handshake.h). */
#include "bootstrap/handshake.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "platform/socket.h"
#include "util/log.h"
#include "util/util.h"

enum {
    HS_SEND_HELLO,
    HS_RECV_HELLO,
    HS_SEND_CHALLENGE,
    HS_RECV_CHALLENGE,
    HS_SEND_PROOF,
    HS_RECV_PROOF,
    HS_SEND_ACCEPT,
    HS_RECV_ACCEPT,
    HS_DONE
};

enum { HS_STATUS_OK = 0, HS_STATUS_VERSION = 1, HS_STATUS_TAG = 2 };

static const size_t hs_msg_bytes[] = {
    [HS_SEND_HELLO] = 32, [HS_RECV_HELLO] = 32, [HS_SEND_CHALLENGE] = 56, [HS_RECV_CHALLENGE] = 56,
    [HS_SEND_PROOF] = 40, [HS_RECV_PROOF] = 40, [HS_SEND_ACCEPT] = 8,     [HS_RECV_ACCEPT] = 8,
};

static const char hs_label_server[] = "server";
static const char hs_label_client[] = "client";
#define HS_LABEL_BYTES 6
#define HS_PAYLOAD_BYTES 8

chorus_result_t handshake_hmac(const uint8_t *key, const void *data, size_t len, uint8_t mac[HANDSHAKE_MAC_BYTES])
{
    unsigned int n = 0;
    if (!HMAC(EVP_sha256(), key, BOOTSTRAP_SECRET_BYTES, data, len, mac, &n) || n != HANDSHAKE_MAC_BYTES) {
        LOG_WARN(LOG_SUB_BOOTSTRAP, "HMAC-SHA256 failed in libcrypto");
        return CHORUS_ERR_INTERNAL;
    }
    return CHORUS_SUCCESS;
}

/* HMAC(key, label | first nonce | second nonce | payload); the payload only in the client's proof. */
static chorus_result_t hs_mac(const handshake_t *hs, const char *label, const uint8_t *first, const uint8_t *second,
                              const uint8_t *payload, uint8_t mac[HANDSHAKE_MAC_BYTES])
{
    uint8_t data[HS_LABEL_BYTES + 2 * HANDSHAKE_NONCE_BYTES + HS_PAYLOAD_BYTES];
    size_t len = 0;
    memcpy(data, label, HS_LABEL_BYTES);
    len += HS_LABEL_BYTES;
    memcpy(data + len, first, HANDSHAKE_NONCE_BYTES);
    len += HANDSHAKE_NONCE_BYTES;
    memcpy(data + len, second, HANDSHAKE_NONCE_BYTES);
    len += HANDSHAKE_NONCE_BYTES;
    if (payload) {
        memcpy(data + len, payload, HS_PAYLOAD_BYTES);
        len += HS_PAYLOAD_BYTES;
    }
    return handshake_hmac(hs->secret->key, data, len, mac);
}

static chorus_result_t hs_fail(handshake_t *hs, chorus_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static chorus_result_t hs_fail(handshake_t *hs, chorus_result_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(hs->why, sizeof(hs->why), fmt, ap);
    va_end(ap);
    return res;
}

static void hs_enter(handshake_t *hs, int step)
{
    hs->step = step;
    hs->off = 0;
    hs->len = step == HS_DONE ? 0 : hs_msg_bytes[step];
}

chorus_result_t handshake_init(handshake_t *hs, const bootstrap_secret_t *secret, int server, uint32_t rank,
                               uint32_t nranks)
{
    memset(hs, 0, sizeof(*hs));
    hs->secret = secret;
    hs->rank = rank;
    hs->nranks = nranks;
    CHECK(sock_random_bytes(hs->nonce, sizeof(hs->nonce)));
    if (server) {
        hs_enter(hs, HS_RECV_HELLO);
        return CHORUS_SUCCESS;
    }
    hs_enter(hs, HS_SEND_HELLO);
    wire_put32(hs->buf, BOOTSTRAP_MAGIC);
    wire_put16(hs->buf + 4, BOOTSTRAP_PROTOCOL_VERSION);
    wire_put64(hs->buf + 8, secret->tag);
    memcpy(hs->buf + 16, hs->nonce, HANDSHAKE_NONCE_BYTES);
    return CHORUS_SUCCESS;
}

static chorus_result_t hs_on_hello(handshake_t *hs)
{
    uint8_t *b = hs->buf;
    if (wire_get32(b) != BOOTSTRAP_MAGIC) return hs_fail(hs, CHORUS_ERR_AUTH, "the peer does not speak the Chorus bootstrap protocol (bad magic)");
    unsigned version = wire_get16(b + 4);
    uint64_t tag = wire_get64(b + 8);
    memcpy(hs->peer_nonce, b + 16, HANDSHAKE_NONCE_BYTES);

    unsigned status = HS_STATUS_OK;
    if (version != BOOTSTRAP_PROTOCOL_VERSION) {
        status = HS_STATUS_VERSION;
        hs_fail(hs, CHORUS_ERR_AUTH, "the peer speaks bootstrap protocol version %u, this process %d", version,
                BOOTSTRAP_PROTOCOL_VERSION);
    } else if (tag != hs->secret->tag) {
        status = HS_STATUS_TAG;
        hs_fail(hs, CHORUS_ERR_AUTH, "the peer belongs to another communicator (tag %016llx)", (unsigned long long)tag);
    }
    hs->rejecting = status != HS_STATUS_OK;
    hs_enter(hs, HS_SEND_CHALLENGE);
    memset(b, 0, hs->len);
    wire_put32(b, BOOTSTRAP_MAGIC);
    wire_put16(b + 4, BOOTSTRAP_PROTOCOL_VERSION);
    wire_put16(b + 6, (uint16_t)status);
    memcpy(b + 8, hs->nonce, HANDSHAKE_NONCE_BYTES);
    if (!hs->rejecting) CHECK(hs_mac(hs, hs_label_server, hs->peer_nonce, hs->nonce, NULL, b + 24));
    return CHORUS_SUCCESS;
}

static chorus_result_t hs_on_challenge(handshake_t *hs)
{
    uint8_t *b = hs->buf;
    if (wire_get32(b) != BOOTSTRAP_MAGIC)
        return hs_fail(hs, CHORUS_ERR_AUTH, "the peer is not a Chorus bootstrap endpoint (bad magic)");
    unsigned status = wire_get16(b + 6);
    if (status == HS_STATUS_VERSION)
        return hs_fail(hs, CHORUS_ERR_AUTH, "the peer speaks bootstrap protocol version %u, this process %d",
                       wire_get16(b + 4), BOOTSTRAP_PROTOCOL_VERSION);
    if (status == HS_STATUS_TAG)
        return hs_fail(hs, CHORUS_ERR_AUTH, "the peer serves another communicator (a different unique id)");
    if (status != HS_STATUS_OK) return hs_fail(hs, CHORUS_ERR_AUTH, "the peer answered with unknown status %u", status);
    memcpy(hs->peer_nonce, b + 8, HANDSHAKE_NONCE_BYTES);
    uint8_t expect[HANDSHAKE_MAC_BYTES];
    CHECK(hs_mac(hs, hs_label_server, hs->nonce, hs->peer_nonce, NULL, expect));
    if (CRYPTO_memcmp(expect, b + 24, HANDSHAKE_MAC_BYTES) != 0)
        return hs_fail(hs, CHORUS_ERR_AUTH, "the peer failed to prove it holds the unique id's secret");

    hs_enter(hs, HS_SEND_PROOF);
    wire_put32(b + HANDSHAKE_MAC_BYTES, hs->rank);
    wire_put32(b + HANDSHAKE_MAC_BYTES + 4, hs->nranks);
    return hs_mac(hs, hs_label_client, hs->peer_nonce, hs->nonce, b + HANDSHAKE_MAC_BYTES, b);
}

static chorus_result_t hs_on_proof(handshake_t *hs)
{
    uint8_t *b = hs->buf;
    uint8_t expect[HANDSHAKE_MAC_BYTES];
    CHECK(hs_mac(hs, hs_label_client, hs->nonce, hs->peer_nonce, b + HANDSHAKE_MAC_BYTES, expect));
    if (CRYPTO_memcmp(expect, b, HANDSHAKE_MAC_BYTES) != 0)
        return hs_fail(hs, CHORUS_ERR_AUTH, "the peer failed to prove it holds the unique id's secret");
    hs->rank = wire_get32(b + HANDSHAKE_MAC_BYTES);
    hs->nranks = wire_get32(b + HANDSHAKE_MAC_BYTES + 4);
    hs_enter(hs, HS_SEND_ACCEPT);
    memset(b, 0, hs->len);
    wire_put32(b, BOOTSTRAP_MAGIC);
    return CHORUS_SUCCESS;
}

/* A whole message went out or came in: act on it and set up the next. */
static chorus_result_t hs_next(handshake_t *hs)
{
    switch (hs->step) {
    case HS_SEND_HELLO: hs_enter(hs, HS_RECV_CHALLENGE); return CHORUS_SUCCESS;
    case HS_RECV_HELLO: return hs_on_hello(hs);
    case HS_SEND_CHALLENGE:
        if (hs->rejecting) return CHORUS_ERR_AUTH;
        hs_enter(hs, HS_RECV_PROOF);
        return CHORUS_SUCCESS;
    case HS_RECV_CHALLENGE: return hs_on_challenge(hs);
    case HS_SEND_PROOF: hs_enter(hs, HS_RECV_ACCEPT); return CHORUS_SUCCESS;
    case HS_RECV_PROOF: return hs_on_proof(hs);
    case HS_SEND_ACCEPT: hs_enter(hs, HS_DONE); return CHORUS_SUCCESS;
    case HS_RECV_ACCEPT:
        if (wire_get32(hs->buf) != BOOTSTRAP_MAGIC) return hs_fail(hs, CHORUS_ERR_AUTH, "the peer's ACCEPT has a bad magic");
        hs_enter(hs, HS_DONE);
        return CHORUS_SUCCESS;
    }
    return hs_fail(hs, CHORUS_ERR_INTERNAL, "handshake driven past its end");
}

static int hs_sending(int step)
{
    return step == HS_SEND_HELLO || step == HS_SEND_CHALLENGE || step == HS_SEND_PROOF || step == HS_SEND_ACCEPT;
}

chorus_result_t handshake_progress(handshake_t *hs, int fd, int *done_p, uint32_t *events_p)
{
    while (hs->step != HS_DONE) {
        int sending = hs_sending(hs->step);
        while (hs->off < hs->len) {
            ssize_t n = sending ? send(fd, hs->buf + hs->off, hs->len - hs->off, MSG_NOSIGNAL)
                                : recv(fd, hs->buf + hs->off, hs->len - hs->off, 0);
            if (n > 0) {
                hs->off += (size_t)n;
            } else if (n == 0) {
                return hs_fail(hs, CHORUS_ERR_REMOTE, "the peer closed the connection during the handshake");
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                *done_p = 0;
                *events_p = sending ? EPOLLOUT : EPOLLIN;
                return CHORUS_SUCCESS;
            } else if (errno != EINTR) {
                int e = errno;
                return hs_fail(hs, e == ENOMEM || e == ENOBUFS ? CHORUS_ERR_SYSTEM : CHORUS_ERR_REMOTE,
                               "handshake %s failed: %s", sending ? "send" : "receive", strerror(e));
            }
        }
        CHECK(hs_next(hs));
    }
    *done_p = 1;
    return CHORUS_SUCCESS;
}
