/*
 * Bootstrap internals shared by the root, the ranks and the mesh: the unique id's fields, the wire
 * encodings, and the rank-side state.
 *
 * Byte order on the wire and in the unique id: every integer is little-endian; IP addresses are their
 * 4 or 16 bytes in network order, as in sockaddr. Every message has a fixed size or a fixed-size header
 * announcing its length, so a reader always knows how much to expect.
 *
 * Rank -> root, after the handshake (whose payload carries rank and nranks):
 *   INFO   peer entry (BOOTSTRAP_ENTRY_BYTES)
 * Root -> rank, once:
 *   REPLY  u32 magic, u32 kind, u32 code, u32 count, then
 *          kind TABLE: count = nranks peer entries, in rank order
 *          kind ERROR: count bytes of message text (no NUL); code is the chorus_result_t for the rank
 * Peer entry: address (BOOTSTRAP_ADDR_BYTES), u32 pid, host name (BOOTSTRAP_HOST_BYTES, NUL-padded), host
 * identity (BOOTSTRAP_HOSTID_BYTES, NUL-padded).
 * Address: u16 family (4 or 6), u16 port, u32 IPv6 scope id, 16 address bytes (IPv4 in the first 4).
 */
#ifndef CHORUS_BOOTSTRAP_WIRE_H
#define CHORUS_BOOTSTRAP_WIRE_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/bootstrap.h"

#define BOOTSTRAP_MAGIC 0x524f4843u /* "CHOR" in the little-endian byte stream */
#define BOOTSTRAP_SECRET_BYTES 16
#define BOOTSTRAP_ADDR_BYTES 24
#define BOOTSTRAP_ENTRY_BYTES (BOOTSTRAP_ADDR_BYTES + 4 + BOOTSTRAP_HOST_BYTES + BOOTSTRAP_HOSTID_BYTES)
#define BOOTSTRAP_REPLY_HEADER_BYTES 16
#define BOOTSTRAP_REPLY_TEXT_MAX 4096
/* Bounds what one rank's report can make the root allocate. */
#define BOOTSTRAP_MAX_RANKS (1 << 20)
/* The first pause between connection attempts, and the cap it doubles towards. */
#define BOOTSTRAP_BACKOFF_MIN_MS 10
#define BOOTSTRAP_BACKOFF_MAX_MS 1000

enum { BOOTSTRAP_REPLY_TABLE = 1, BOOTSTRAP_REPLY_ERROR = 2 };

/* What the unique id's holders share: the key, and the tag derived from it. */
typedef struct bootstrap_secret {
    uint8_t key[BOOTSTRAP_SECRET_BYTES];
    uint64_t tag; /* sent in clear so that a peer of another communicator is turned away cheaply */
} bootstrap_secret_t;

/* The rank side of a communicator being built (rank.c makes it, mesh.c finishes it). */
struct bootstrap {
    int rank;
    int nranks;
    bootstrap_secret_t secret;
    struct sockaddr_storage root;
    int listen_fd;                /* for peer connections; closed once the mesh is built */
    int64_t deadline;             /* the whole init, rendezvous and mesh (time_now_ns() scale) */
    int64_t connect_timeout_ms;   /* for messages */
    int64_t handshake_timeout_ms;
    bootstrap_peer_info_t *peers; /* nranks entries */
};

/* t + ns, saturating at INT64_MAX ("no deadline"). */
static inline int64_t bootstrap_after(int64_t t, int64_t ns) { return t > INT64_MAX - ns ? INT64_MAX : t + ns; }

static inline void wire_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void wire_put32(uint8_t *p, uint32_t v)
{
    wire_put16(p, (uint16_t)v);
    wire_put16(p + 2, (uint16_t)(v >> 16));
}
static inline void wire_put64(uint8_t *p, uint64_t v)
{
    wire_put32(p, (uint32_t)v);
    wire_put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint16_t wire_get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t wire_get32(const uint8_t *p) { return wire_get16(p) | (uint32_t)wire_get16(p + 2) << 16; }
static inline uint64_t wire_get64(const uint8_t *p) { return wire_get32(p) | (uint64_t)wire_get32(p + 4) << 32; }

/* Addresses and peer entries; the getters return INVALID_ARGUMENT for a family other than 4 or 6. */
void bootstrap_put_addr(uint8_t *p, const struct sockaddr_storage *addr);
chorus_result_t bootstrap_get_addr(const uint8_t *p, struct sockaddr_storage *addr_p);
void bootstrap_put_peer(uint8_t *p, const bootstrap_peer_info_t *info);
chorus_result_t bootstrap_get_peer(const uint8_t *p, bootstrap_peer_info_t *info_p);

/* A root reply (header and body) in one malloc'ed buffer. */
uint8_t *bootstrap_reply_error(chorus_result_t code, const char *text, size_t *len_p);
uint8_t *bootstrap_reply_table(const bootstrap_peer_info_t *peers, int nranks, size_t *len_p);

/* The unique id: make one for a root listening at `root` (with a fresh secret), or read one back. */
chorus_result_t bootstrap_id_make(const struct sockaddr_storage *root, chorus_unique_id_t *id_p);
chorus_result_t bootstrap_id_parse(const chorus_unique_id_t *id, struct sockaddr_storage *root_p,
                                   bootstrap_secret_t *secret_p);

/* Writes the i < n with flag[i] set as "2, 5-7" (cut short with "..." if too long); returns how many. */
int bootstrap_format_ranks(char *buf, size_t len, const uint8_t *flag, int n);

/* Classify an error: format it into err, log it at WARN, return res. */
chorus_result_t bootstrap_fail(chorus_result_t res, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
