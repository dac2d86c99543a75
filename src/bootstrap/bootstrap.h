/*
 * Bootstrap: the unique id, the rendezvous at the root, the exchange of addresses and host identities, and
 * the authenticated connections between ranks. Never the data path: it hands connected sockets upward and
 * forgets them.
 *
 * Every connection (rank -> root, rank -> rank) opens with a mutual handshake: magic, protocol version,
 * communicator tag, and HMAC-SHA256 proofs over fresh nonces keyed by the unique id's secret (the secret
 * never crosses the wire). A peer that fails it, or stays silent past the handshake deadline, is closed
 * without taking a rank's place.
 */
#ifndef CHORUS_BOOTSTRAP_H
#define CHORUS_BOOTSTRAP_H

#include <stdint.h>
#include <sys/socket.h>

#include "chorus/chorus.h"

#define BOOTSTRAP_PROTOCOL_VERSION 1
#define BOOTSTRAP_HOST_BYTES 64
#define BOOTSTRAP_HOSTID_BYTES 64

/* Everything bootstrap needs from the knobs (the caller fills it; bootstrap reads no environment). */
typedef struct bootstrap_options {
    int64_t connect_timeout_ms;   /* the whole init: root rendezvous and the mesh */
    int64_t handshake_timeout_ms; /* per connection */
    const char *ifname;           /* CHORUS_SOCKET_IFNAME syntax; "" for the default choice */
    const char *family;           /* "", "AF_INET", "4", "AF_INET6", "6" */
    const char *hostid;           /* this rank's host identity (platform/host.h), shared with every rank */
} bootstrap_options_t;

/* What every rank learns about every other. */
typedef struct bootstrap_peer_info {
    struct sockaddr_storage addr; /* where it listens for peer connections */
    char host[BOOTSTRAP_HOST_BYTES]; /* hostname, for messages */
    char hostid[BOOTSTRAP_HOSTID_BYTES]; /* equal for ranks that can share memory */
    int pid;
} bootstrap_peer_info_t;

typedef struct bootstrap bootstrap_t;

/* Make a unique id and start the root (an epoll loop on a background thread) on the chosen interface.
 * The root serves one communicator and exits once every rank has the table or the connect timeout passed. */
chorus_result_t bootstrap_root_start(const bootstrap_options_t *opt, chorus_unique_id_t *id_p, char *err, size_t errlen);

/* Unique id text form (hex). */
chorus_result_t bootstrap_id_to_string(const chorus_unique_id_t *id, char *str, size_t len);
chorus_result_t bootstrap_id_from_string(const char *str, chorus_unique_id_t *id_p);

/* Join: connect to the root (retrying with exponential backoff and jitter until the connect timeout),
 * report this rank's listening address and host, receive the table of all ranks, then build a full mesh
 * of authenticated TCP connections. On success fds[peer] is a connected blocking-mode socket for every
 * peer != rank (fds[rank] = -1), owned by the caller. On failure err says what went wrong; on a timeout it
 * lists the ranks that never arrived. */
chorus_result_t bootstrap_init(const chorus_unique_id_t *id, int rank, int nranks, const bootstrap_options_t *opt,
                               bootstrap_t **bs_p, char *err, size_t errlen);
chorus_result_t bootstrap_connect_mesh(bootstrap_t *bs, int *fds, char *err, size_t errlen);
const bootstrap_peer_info_t *bootstrap_peer(const bootstrap_t *bs, int rank);
/* A name for a shared-memory segment between ranks a and b (order does not matter), derived from the
 * communicator's secret so that no other communicator or user can guess it: "/chorus-<32 hex digits>".
 * a == b names the host arena of the communicator's ranks. */
chorus_result_t bootstrap_shm_name(const bootstrap_t *bs, int a, int b, char *name, size_t len);
void bootstrap_close(bootstrap_t *bs);

#endif
