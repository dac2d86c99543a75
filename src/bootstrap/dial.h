/*
 * An outgoing bootstrap connection that keeps trying: non-blocking connect, then the client handshake,
 * each attempt bounded by the handshake timeout; a failed attempt is retried after a pause that starts
 * at BOOTSTRAP_BACKOFF_MIN_MS and doubles up to BOOTSTRAP_BACKOFF_MAX_MS, with random jitter so that
 * many ranks refused together do not come back together. Driven from the owner's epoll loop; the
 * owner bounds the whole by its own deadline.
 */
#ifndef CHORUS_BOOTSTRAP_DIAL_H
#define CHORUS_BOOTSTRAP_DIAL_H

#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/handshake.h"
#include "bootstrap/wire.h"

typedef struct bootstrap_dial {
    struct sockaddr_storage addr;
    char what[48];   /* "the root", "rank 3": for messages */
    const bootstrap_secret_t *secret;
    uint32_t rank, nranks;
    int64_t attempt_ns;
    int fd;          /* -1 while pausing before the next attempt */
    int connecting;  /* connect() still in flight; else the handshake runs */
    int done;        /* fd is authenticated and no longer in the epoll set */
    uint32_t events; /* what fd is registered for (0: not registered) */
    int64_t wake;    /* when to try again (fd < 0), or when this attempt gives up */
    int64_t backoff_ms;
    uint64_t jitter; /* xorshift state */
    handshake_t hs;
    char last_error[128];
} bootstrap_dial_t;

/* Set up a dial to `addr`; the first attempt starts at the first step. `what` names the target. */
chorus_result_t bootstrap_dial_init(bootstrap_dial_t *d, const struct sockaddr_storage *addr, const char *what,
                                    const bootstrap_secret_t *secret, int rank, int nranks, int64_t attempt_ms);

/* Move the dial on: after epoll reported `events` for it (data.ptr == d), or with events 0 once d->wake
 * passed. On success d->done says whether d->fd is now authenticated (removed from epfd, the caller's to
 * keep). Returns AUTH when the target failed the handshake (err says how); failures worth another
 * attempt are not errors. */
chorus_result_t bootstrap_dial_step(bootstrap_dial_t *d, int epfd, uint32_t events, char *err, size_t errlen);

/* Close the connection of a dial that did not finish. */
void bootstrap_dial_abandon(bootstrap_dial_t *d);

#endif
