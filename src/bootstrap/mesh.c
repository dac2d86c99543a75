/*
 * The full mesh: one authenticated TCP connection per pair of ranks. The higher rank of a pair dials the
 * lower one, so each pair connects once; one epoll loop makes this rank's outgoing connections (with the
 * dialer's retries) while it accepts and authenticates the incoming ones, so no rank waits on another's
 * order. An incoming connection names its rank in the authenticated handshake payload; one that fails
 * the handshake or stays silent past the handshake timeout is closed and takes no place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bootstrap/dial.h"
#include "bootstrap/handshake.h"
#include "bootstrap/wire.h"
#include "platform/socket.h"
#include "util/log.h"
#include "util/util.h"

typedef struct mesh_in mesh_in_t;
struct mesh_in {
    mesh_in_t *prev, *next;
    int fd;
    uint32_t events;
    int64_t deadline;
    handshake_t hs;
    char peer[SOCK_ADDR_STRLEN];
};

typedef struct mesh {
    bootstrap_t *bs;
    int *fds;
    int connected;
    int epfd;
    int64_t handshake_ns;
    bootstrap_dial_t *dials; /* to every lower rank */
    mesh_in_t *head, *tail;  /* incoming and not yet authenticated, in accept (= deadline) order */
} mesh_t;

static void mesh_in_free(mesh_t *m, mesh_in_t *c, int close_fd)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        m->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        m->tail = c->prev;
    if (close_fd) close(c->fd);
    free(c);
}

static void mesh_accept(mesh_t *m)
{
    for (;;) {
        int fd;
        struct sockaddr_storage peer;
        int e = sock_accept(m->bs->listen_fd, &fd, &peer);
        if (e == ECONNABORTED) continue;
        if (e) {
            if (e != EAGAIN && e != EWOULDBLOCK) LOG_WARN(LOG_SUB_BOOTSTRAP, "mesh: accept failed: %s", strerror(e));
            return;
        }
        mesh_in_t *c = calloc(1, sizeof(*c));
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (!c || handshake_init(&c->hs, &m->bs->secret, 1, 0, 0) != CHORUS_SUCCESS ||
            epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            LOG_WARN(LOG_SUB_BOOTSTRAP, "mesh: cannot take a connection (out of memory or descriptors)");
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->events = EPOLLIN;
        c->deadline = bootstrap_after(time_now_ns(), m->handshake_ns);
        sock_addr_str(&peer, c->peer, sizeof(c->peer));
        c->prev = m->tail;
        if (m->tail)
            m->tail->next = c;
        else
            m->head = c;
        m->tail = c;
    }
}

static void mesh_on_incoming(mesh_t *m, mesh_in_t *c)
{
    const bootstrap_t *bs = m->bs;
    int done = 0;
    uint32_t want = 0;
    chorus_result_t res = handshake_progress(&c->hs, c->fd, &done, &want);
    if (res == CHORUS_ERR_AUTH) {
        LOG_WARN(LOG_SUB_BOOTSTRAP, "rank %d: closed %s, which failed the handshake: %s", bs->rank, c->peer, c->hs.why);
        mesh_in_free(m, c, 1);
        return;
    }
    if (res != CHORUS_SUCCESS) {
        LOG_INFO(LOG_SUB_BOOTSTRAP, "rank %d: lost %s during the handshake: %s", bs->rank, c->peer, c->hs.why);
        mesh_in_free(m, c, 1);
        return;
    }
    if (!done) {
        struct epoll_event ev = {.events = want, .data.ptr = c};
        if (want != c->events && epoll_ctl(m->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->events = want;
        return;
    }
    uint32_t q = c->hs.rank;
    if (c->hs.nranks != (uint32_t)bs->nranks || q <= (uint32_t)bs->rank || q >= (uint32_t)bs->nranks) {
        LOG_WARN(LOG_SUB_BOOTSTRAP, "rank %d of %d: %s claims rank %u of %u, but only higher ranks dial this one; closed",
                 bs->rank, bs->nranks, c->peer, q, c->hs.nranks);
        mesh_in_free(m, c, 1);
        return;
    }
    epoll_ctl(m->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    if (m->fds[q] >= 0) {
        /* Rank q dials again only when its side gave up on the first connection: the newer one is live. */
        LOG_INFO(LOG_SUB_BOOTSTRAP, "rank %d: rank %u connected again from %s; keeping the newer connection", bs->rank,
                 q, c->peer);
        close(m->fds[q]);
    } else {
        m->connected++;
    }
    m->fds[q] = c->fd;
    mesh_in_free(m, c, 0);
}

static chorus_result_t mesh_step_dial(mesh_t *m, bootstrap_dial_t *d, uint32_t events, char *err, size_t errlen)
{
    CHECK(bootstrap_dial_step(d, m->epfd, events, err, errlen));
    if (d->done && d->fd >= 0) {
        m->fds[d - m->dials] = d->fd;
        d->fd = -1;
        m->connected++;
    }
    return CHORUS_SUCCESS;
}

static int64_t mesh_next_wake(const mesh_t *m)
{
    int64_t t = m->bs->deadline;
    if (m->head) t = CHORUS_MIN(t, m->head->deadline);
    for (int p = 0; p < m->bs->rank; p++)
        if (!m->dials[p].done) t = CHORUS_MIN(t, m->dials[p].wake);
    return t;
}

static chorus_result_t mesh_timed_out(const mesh_t *m, char *err, size_t errlen)
{
    const bootstrap_t *bs = m->bs;
    uint8_t *missing = calloc((size_t)bs->nranks, 1);
    if (!missing) return bootstrap_fail(CHORUS_ERR_TIMEOUT, err, errlen, "rank %d: mesh incomplete", bs->rank);
    for (int i = 0; i < bs->nranks; i++) missing[i] = i != bs->rank && m->fds[i] < 0;
    char list[512], detail[256], name[SOCK_ADDR_STRLEN];
    int n = bootstrap_format_ranks(list, sizeof(list), missing, bs->nranks);
    int lower = 0;
    while (lower < bs->rank && m->fds[lower] >= 0) lower++;
    if (lower < bs->rank)
        snprintf(detail, sizeof(detail), "dialing rank %d at %s: %s", lower,
                 sock_addr_str(&m->dials[lower].addr, name, sizeof(name)), m->dials[lower].last_error);
    else
        snprintf(detail, sizeof(detail), "higher ranks dial this rank at %s",
                 sock_addr_str(&bs->peers[bs->rank].addr, name, sizeof(name)));
    free(missing);
    return bootstrap_fail(CHORUS_ERR_TIMEOUT, err, errlen, "rank %d of %d: no connection with %s %s within %lld ms (%s)",
                          bs->rank, bs->nranks, n == 1 ? "rank" : "ranks", list, (long long)bs->connect_timeout_ms,
                          detail);
}

/* The loop: expire silent incoming connections, move the dials whose time came, wait for events. */
static chorus_result_t mesh_run(mesh_t *m, char *err, size_t errlen)
{
    bootstrap_t *bs = m->bs;
    struct epoll_event evs[64];
    while (m->connected < bs->nranks - 1) {
        int64_t now = time_now_ns();
        while (m->head && now >= m->head->deadline) {
            LOG_INFO(LOG_SUB_BOOTSTRAP, "rank %d: %s did not complete the handshake in time; closed", bs->rank,
                     m->head->peer);
            mesh_in_free(m, m->head, 1);
        }
        for (int p = 0; p < bs->rank; p++)
            if (!m->dials[p].done && now >= m->dials[p].wake) CHECK(mesh_step_dial(m, &m->dials[p], 0, err, errlen));
        if (m->connected == bs->nranks - 1) break;
        if (now >= bs->deadline) return mesh_timed_out(m, err, errlen);

        int n = epoll_wait(m->epfd, evs, (int)CHORUS_ARRAY_SIZE(evs), time_left_ms(mesh_next_wake(m), 1000));
        for (int i = 0; i < n; i++) {
            void *ptr = evs[i].data.ptr;
            if (ptr == m)
                mesh_accept(m);
            else if (ptr >= (void *)m->dials && ptr < (void *)(m->dials + bs->rank))
                CHECK(mesh_step_dial(m, ptr, evs[i].events, err, errlen));
            else
                mesh_on_incoming(m, ptr);
        }
    }
    return CHORUS_SUCCESS;
}

chorus_result_t bootstrap_connect_mesh(bootstrap_t *bs, int *fds, char *err, size_t errlen)
{
    if (!bs || !fds || bs->listen_fd < 0)
        return bootstrap_fail(CHORUS_ERR_INVALID_ARGUMENT, err, errlen, "bootstrap_connect_mesh: no bootstrap to finish");
    mesh_t m = {.bs = bs, .epfd = -1};
    m.handshake_ns = bs->handshake_timeout_ms > 0 ? bs->handshake_timeout_ms * 1000000 : INT64_MAX;
    chorus_result_t res = CHORUS_SUCCESS;
    m.fds = malloc((size_t)bs->nranks * sizeof(*m.fds));
    m.dials = calloc((size_t)CHORUS_MAX(bs->rank, 1), sizeof(*m.dials));
    for (int i = 0; m.fds && i < bs->nranks; i++) m.fds[i] = -1;
    if (!m.fds || !m.dials) {
        res = bootstrap_fail(CHORUS_ERR_NO_MEMORY, err, errlen, "rank %d: out of memory building the mesh", bs->rank);
        goto out;
    }
    char what[32];
    for (int p = 0; p < bs->rank && res == CHORUS_SUCCESS; p++) {
        snprintf(what, sizeof(what), "rank %d", p);
        res = bootstrap_dial_init(&m.dials[p], &bs->peers[p].addr, what, &bs->secret, bs->rank, bs->nranks,
                                  bs->handshake_timeout_ms);
    }
    if (res != CHORUS_SUCCESS) goto out;
    m.epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &m};
    if (m.epfd < 0 || epoll_ctl(m.epfd, EPOLL_CTL_ADD, bs->listen_fd, &ev) != 0) {
        res = bootstrap_fail(CHORUS_ERR_SYSTEM, err, errlen, "rank %d: epoll set-up failed: %s", bs->rank, strerror(errno));
        goto out;
    }
    res = mesh_run(&m, err, errlen);
    for (int i = 0; i < bs->nranks && res == CHORUS_SUCCESS; i++)
        if (m.fds[i] >= 0 && sock_set_blocking(m.fds[i], 1) != CHORUS_SUCCESS)
            res = bootstrap_fail(CHORUS_ERR_SYSTEM, err, errlen, "rank %d: fcntl failed: %s", bs->rank, strerror(errno));
    if (res == CHORUS_SUCCESS) {
        memcpy(fds, m.fds, (size_t)bs->nranks * sizeof(*fds));
        LOG_INFO(LOG_SUB_BOOTSTRAP, "rank %d of %d: mesh connected", bs->rank, bs->nranks);
    }
out:
    while (m.head) mesh_in_free(&m, m.head, 1);
    for (int p = 0; m.dials && p < bs->rank; p++) bootstrap_dial_abandon(&m.dials[p]);
    free(m.dials);
    if (m.epfd >= 0) close(m.epfd);
    close(bs->listen_fd);
    bs->listen_fd = -1;
    for (int i = 0; m.fds && i < bs->nranks && res != CHORUS_SUCCESS; i++)
        if (m.fds[i] >= 0) close(m.fds[i]);
    free(m.fds);
    return res;
}
