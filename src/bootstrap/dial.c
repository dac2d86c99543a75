/* Outgoing bootstrap connections with retries (see dial.h). */
#include "bootstrap/dial.h"

#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "platform/socket.h"
#include "util/log.h"
#include "util/util.h"

chorus_result_t bootstrap_dial_init(bootstrap_dial_t *d, const struct sockaddr_storage *addr, const char *what,
                                    const bootstrap_secret_t *secret, int rank, int nranks, int64_t attempt_ms)
{
    memset(d, 0, sizeof(*d));
    d->addr = *addr;
    snprintf(d->what, sizeof(d->what), "%s", what);
    d->secret = secret;
    d->rank = (uint32_t)rank;
    d->nranks = (uint32_t)nranks;
    d->attempt_ns = attempt_ms > 0 ? attempt_ms * 1000000 : INT64_MAX;
    d->fd = -1;
    d->backoff_ms = BOOTSTRAP_BACKOFF_MIN_MS;
    snprintf(d->last_error, sizeof(d->last_error), "no attempt yet");
    CHECK(sock_random_bytes(&d->jitter, sizeof(d->jitter)));
    d->jitter |= 1; /* xorshift never leaves zero */
    return CHORUS_SUCCESS;
}

static uint64_t dial_random(bootstrap_dial_t *d)
{
    d->jitter ^= d->jitter << 13;
    d->jitter ^= d->jitter >> 7;
    d->jitter ^= d->jitter << 17;
    return d->jitter;
}

void bootstrap_dial_abandon(bootstrap_dial_t *d)
{
    if (d->fd >= 0) close(d->fd); /* also leaves the epoll set */
    d->fd = -1;
    d->events = 0;
    d->connecting = 0;
}

/* This attempt failed: pause for half the backoff plus a random part of the other half, then double it. */
static void dial_retry(bootstrap_dial_t *d, int64_t now, const char *why)
{
    bootstrap_dial_abandon(d);
    snprintf(d->last_error, sizeof(d->last_error), "%s", why);
    int64_t half = d->backoff_ms / 2;
    int64_t pause_ms = half + (int64_t)(dial_random(d) % (uint64_t)(d->backoff_ms - half + 1));
    d->wake = now + pause_ms * 1000000;
    d->backoff_ms = CHORUS_MIN(d->backoff_ms * 2, BOOTSTRAP_BACKOFF_MAX_MS);
    char name[SOCK_ADDR_STRLEN];
    LOG_DEBUG(LOG_SUB_BOOTSTRAP, "connection to %s at %s failed (%s); next attempt in %lld ms", d->what,
              sock_addr_str(&d->addr, name, sizeof(name)), why, (long long)pause_ms);
}

static chorus_result_t dial_watch(bootstrap_dial_t *d, int epfd, uint32_t events, char *err, size_t errlen)
{
    if (d->events == events) return CHORUS_SUCCESS;
    struct epoll_event ev = {.events = events, .data.ptr = d};
    if (epoll_ctl(epfd, d->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, d->fd, &ev) != 0)
        return bootstrap_fail(CHORUS_ERR_SYSTEM, err, errlen, "epoll_ctl failed: %s", strerror(errno));
    d->events = events;
    return CHORUS_SUCCESS;
}

chorus_result_t bootstrap_dial_step(bootstrap_dial_t *d, int epfd, uint32_t events, char *err, size_t errlen)
{
    int64_t now = time_now_ns();
    if (d->done) return CHORUS_SUCCESS;
    if (d->fd < 0) {
        if (now < d->wake) return CHORUS_SUCCESS;
        int e = sock_connect_start(&d->addr, &d->fd);
        if (e) {
            dial_retry(d, now, strerror(e));
            return CHORUS_SUCCESS;
        }
        d->connecting = 1;
        d->wake = bootstrap_after(now, d->attempt_ns);
        return dial_watch(d, epfd, EPOLLOUT, err, errlen);
    }
    if (d->connecting) {
        if (!events) {
            if (now >= d->wake) dial_retry(d, now, "connect timed out");
            return CHORUS_SUCCESS;
        }
        int e = sock_connect_result(d->fd);
        if (e) {
            dial_retry(d, now, strerror(e));
            return CHORUS_SUCCESS;
        }
        d->connecting = 0;
        CHECK(handshake_init(&d->hs, d->secret, 0, d->rank, d->nranks));
    }
    int done = 0;
    uint32_t want = 0;
    chorus_result_t res = handshake_progress(&d->hs, d->fd, &done, &want);
    char name[SOCK_ADDR_STRLEN];
    if (res == CHORUS_ERR_AUTH) {
        bootstrap_dial_abandon(d);
        return bootstrap_fail(res, err, errlen, "rank %u: handshake with %s at %s failed: %s", d->rank, d->what,
                              sock_addr_str(&d->addr, name, sizeof(name)), d->hs.why);
    }
    if (res == CHORUS_ERR_REMOTE || res == CHORUS_ERR_SYSTEM) {
        dial_retry(d, now, d->hs.why);
        return CHORUS_SUCCESS;
    }
    if (res != CHORUS_SUCCESS) {
        bootstrap_dial_abandon(d);
        return bootstrap_fail(res, err, errlen, "rank %u: handshake with %s failed: %s", d->rank, d->what, d->hs.why);
    }
    if (done) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, d->fd, NULL);
        d->events = 0;
        d->done = 1;
        LOG_DEBUG(LOG_SUB_BOOTSTRAP, "connected to %s at %s", d->what, sock_addr_str(&d->addr, name, sizeof(name)));
        return CHORUS_SUCCESS;
    }
    if (now >= d->wake) {
        dial_retry(d, now, "handshake timed out");
        return CHORUS_SUCCESS;
    }
    return dial_watch(d, epfd, want, err, errlen);
}
