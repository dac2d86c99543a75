/*
 * The root: one epoll loop on a detached thread that serves one communicator, in two phases.
 *
 * Gather. Accept connections; each must complete the handshake and report its peer entry within the
 * handshake timeout, or it is closed without taking a place. A report claims a rank: the first fixes
 * nranks; a disagreeing nranks or a rank claimed twice gets an error reply. A rank that disconnects
 * before the table is complete gives its place back.
 *
 * Reply. When every rank is in, or the connect deadline passed, the listener closes and one reply is
 * broadcast: the table, or the list of ranks that never arrived. The broadcast is the seed's engine
 * shape: every socket with bytes left is watched for EPOLLOUT and written without blocking, so one slow
 * reader holds up nobody. The loop ends when every reply is out (bounded by the handshake timeout past
 * the deadline) and frees everything.
 *
 * A leader tier (root -> leaders -> ranks) would reuse both phases: a leader gathers its group like this
 * root, reports the group to the root as one message, and broadcasts the table it gets back.
 */
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bootstrap/handshake.h"
#include "bootstrap/wire.h"
#include "platform/socket.h"
#include "util/log.h"
#include "util/thread.h"
#include "util/util.h"

typedef enum { RC_AUTH, RC_INFO, RC_WAIT, RC_SEND } root_conn_state_t;

typedef struct root_conn root_conn_t;
typedef struct root_list {
    root_conn_t *head, *tail;
} root_list_t;

struct root_conn {
    root_conn_t *prev, *next;
    root_list_t *list;
    int fd;
    root_conn_state_t state;
    uint32_t events;
    int64_t deadline; /* handshake and report, while pending */
    int rank;         /* the place it holds, or -1 */
    handshake_t hs;
    uint8_t in[BOOTSTRAP_ENTRY_BYTES];
    size_t in_off;
    bootstrap_peer_info_t info;
    const uint8_t *out; /* the reply being sent: the broadcast one, or own */
    uint8_t *own;
    size_t out_len, out_off;
    char peer[SOCK_ADDR_STRLEN];
};

typedef struct root {
    int epfd, listen_fd;
    bootstrap_secret_t secret;
    char addr[SOCK_ADDR_STRLEN];
    int64_t deadline, handshake_ns, timeout_ms;
    int replying;     /* the gather phase is over */
    int64_t finish_by; /* bound on the reply phase */
    int nranks, first_rank, arrived;
    root_conn_t **slot; /* by rank */
    root_list_t pending; /* not yet in a place, in accept order, which is also deadline order */
    root_list_t placed;  /* holding a place, or sending an error reply */
    root_list_t dead;    /* closed during this batch of events; freed after it */
    uint8_t *reply;     /* the broadcast reply */
} root_t;

static void root_list_push(root_list_t *l, root_conn_t *c)
{
    c->list = l;
    c->next = NULL;
    c->prev = l->tail;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
}

static void root_list_remove(root_conn_t *c)
{
    root_list_t *l = c->list;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        l->tail = c->prev;
    c->list = NULL;
}

static void root_move(root_conn_t *c, root_list_t *to)
{
    root_list_remove(c);
    root_list_push(to, c);
}

static void root_close(root_t *r, root_conn_t *c)
{
    close(c->fd);
    c->fd = -1;
    if (c->rank >= 0 && r->slot[c->rank] == c) {
        r->slot[c->rank] = NULL;
        r->arrived--;
    }
    root_move(c, &r->dead);
}

static void root_free_dead(root_t *r)
{
    while (r->dead.head) {
        root_conn_t *c = r->dead.head;
        root_list_remove(c);
        free(c->own);
        free(c);
    }
}

static void root_watch(root_t *r, root_conn_t *c, uint32_t events)
{
    if (c->events == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(r->epfd, c->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        LOG_WARN(LOG_SUB_BOOTSTRAP, "root: epoll_ctl for %s failed: %s; closing it", c->peer, strerror(errno));
        root_close(r, c);
        return;
    }
    c->events = events;
}

static void root_send_reply(root_t *r, root_conn_t *c, const uint8_t *msg, size_t len)
{
    if (c->list != &r->placed) root_move(c, &r->placed);
    c->state = RC_SEND;
    c->out = msg;
    c->out_len = len;
    c->out_off = 0;
    root_watch(r, c, EPOLLOUT);
}

/* Turn a connection away with an error reply; the rank returns `code` with `msg`. */
static void root_reject(root_t *r, root_conn_t *c, chorus_result_t code, const char *msg)
{
    LOG_WARN(LOG_SUB_BOOTSTRAP, "root at %s: %s", r->addr, msg);
    c->own = bootstrap_reply_error(code, msg, &c->out_len);
    if (!c->own) {
        root_close(r, c);
        return;
    }
    root_send_reply(r, c, c->own, c->out_len);
}

/* End the gather phase: close the door, drop whoever has not reported, send `reply` (NULL: nothing, just
 * close) to every rank holding a place. */
static void root_start_replies(root_t *r, uint8_t *reply, size_t len)
{
    r->replying = 1;
    r->reply = reply;
    int64_t now = time_now_ns();
    r->finish_by = bootstrap_after(r->deadline == INT64_MAX ? now : CHORUS_MAX(r->deadline, now), r->handshake_ns);
    close(r->listen_fd);
    r->listen_fd = -1;
    while (r->pending.head) {
        LOG_INFO(LOG_SUB_BOOTSTRAP, "root at %s: closed %s, which had not reported a rank", r->addr, r->pending.head->peer);
        root_close(r, r->pending.head);
    }
    for (root_conn_t *c = r->placed.head, *next; c; c = next) {
        next = c->next;
        if (c->state != RC_WAIT) continue;
        if (reply)
            root_send_reply(r, c, reply, len);
        else
            root_close(r, c);
    }
}

static void root_send_table(root_t *r)
{
    bootstrap_peer_info_t *peers = calloc((size_t)r->nranks, sizeof(*peers));
    size_t len = 0;
    uint8_t *reply = NULL;
    if (peers) {
        for (int i = 0; i < r->nranks; i++) peers[i] = r->slot[i]->info;
        reply = bootstrap_reply_table(peers, r->nranks, &len);
    }
    free(peers);
    if (reply)
        LOG_INFO(LOG_SUB_BOOTSTRAP, "root at %s: all %d ranks in; sending the table", r->addr, r->nranks);
    else
        LOG_WARN(LOG_SUB_BOOTSTRAP, "root at %s: out of memory building the table of %d ranks", r->addr, r->nranks);
    root_start_replies(r, reply, len);
}

static void root_time_out(root_t *r)
{
    if (r->nranks == 0) {
        LOG_WARN(LOG_SUB_BOOTSTRAP, "root at %s: no rank arrived within %lld ms; giving up", r->addr,
                 (long long)r->timeout_ms);
        root_start_replies(r, NULL, 0);
        return;
    }
    uint8_t *missing = malloc((size_t)r->nranks);
    char list[1024], msg[1280];
    for (int i = 0; missing && i < r->nranks; i++) missing[i] = r->slot[i] == NULL;
    int n = missing ? bootstrap_format_ranks(list, sizeof(list), missing, r->nranks) : r->nranks - r->arrived;
    if (!missing) snprintf(list, sizeof(list), "(%d of them)", n);
    free(missing);
    snprintf(msg, sizeof(msg), "%s %s of %d never reached the root at %s within %lld ms", n == 1 ? "rank" : "ranks", list,
             r->nranks, r->addr, (long long)r->timeout_ms);
    LOG_WARN(LOG_SUB_BOOTSTRAP, "root: %s", msg);
    size_t len = 0;
    uint8_t *reply = bootstrap_reply_error(CHORUS_ERR_TIMEOUT, msg, &len);
    root_start_replies(r, reply, len);
}

/* A connection passed the handshake and reported its entry: give it its place, or turn it away. */
static void root_register(root_t *r, root_conn_t *c)
{
    uint32_t rank = c->hs.rank, nranks = c->hs.nranks;
    char msg[512];
    if (nranks < 1 || nranks > BOOTSTRAP_MAX_RANKS || rank >= nranks) {
        snprintf(msg, sizeof(msg), "rank %u of nranks %u (%s pid %d) is out of range", rank, nranks, c->info.host,
                 c->info.pid);
        root_reject(r, c, CHORUS_ERR_INVALID_ARGUMENT, msg);
        return;
    }
    if (r->nranks == 0) {
        r->slot = calloc(nranks, sizeof(*r->slot));
        if (!r->slot) {
            root_reject(r, c, CHORUS_ERR_NO_MEMORY, "the root ran out of memory");
            return;
        }
        r->nranks = (int)nranks;
        r->first_rank = (int)rank;
    } else if ((int)nranks != r->nranks) {
        snprintf(msg, sizeof(msg), "rank %u says nranks is %u, but rank %d, the first to reach the root at %s, said %d",
                 rank, nranks, r->first_rank, r->addr, r->nranks);
        root_reject(r, c, CHORUS_ERR_INVALID_ARGUMENT, msg);
        return;
    }
    root_conn_t *old = r->slot[rank];
    if (old && old->info.pid == c->info.pid && strcmp(old->info.host, c->info.host) == 0) {
        /* The same process again: its first connection failed on its side after the root took it. */
        LOG_INFO(LOG_SUB_BOOTSTRAP, "root: rank %u reconnected from %s; dropping its older connection", rank, c->peer);
        root_close(r, old);
    } else if (old) {
        snprintf(msg, sizeof(msg), "rank %u is claimed twice: by %s pid %d (from %s) and by %s pid %d (from %s)", rank,
                 old->info.host, old->info.pid, old->peer, c->info.host, c->info.pid, c->peer);
        root_reject(r, c, CHORUS_ERR_INVALID_ARGUMENT, msg);
        return;
    }
    root_move(c, &r->placed);
    c->state = RC_WAIT;
    root_watch(r, c, EPOLLIN);
    if (c->fd < 0) return;
    r->slot[rank] = c;
    c->rank = (int)rank;
    r->arrived++;
    LOG_INFO(LOG_SUB_BOOTSTRAP, "root: rank %u of %u in from %s (%s pid %d); %d of %d", rank, nranks, c->peer,
             c->info.host, c->info.pid, r->arrived, r->nranks);
    if (r->arrived == r->nranks) root_send_table(r);
}

static void root_on_info(root_t *r, root_conn_t *c)
{
    while (c->in_off < sizeof(c->in)) {
        ssize_t n = recv(c->fd, c->in + c->in_off, sizeof(c->in) - c->in_off, 0);
        if (n > 0) {
            c->in_off += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            root_watch(r, c, EPOLLIN);
            return;
        } else if (n == 0 || errno != EINTR) {
            LOG_INFO(LOG_SUB_BOOTSTRAP, "root: %s left before reporting its rank", c->peer);
            root_close(r, c);
            return;
        }
    }
    if (bootstrap_get_peer(c->in, &c->info) != CHORUS_SUCCESS) {
        LOG_WARN(LOG_SUB_BOOTSTRAP, "root: %s reported a malformed entry; closed", c->peer);
        root_close(r, c);
        return;
    }
    root_register(r, c);
}

static void root_on_auth(root_t *r, root_conn_t *c)
{
    int done = 0;
    uint32_t want = 0;
    chorus_result_t res = handshake_progress(&c->hs, c->fd, &done, &want);
    if (res == CHORUS_ERR_AUTH) {
        LOG_WARN(LOG_SUB_BOOTSTRAP, "root at %s: closed %s, which failed the handshake: %s", r->addr, c->peer, c->hs.why);
        root_close(r, c);
    } else if (res != CHORUS_SUCCESS) {
        LOG_INFO(LOG_SUB_BOOTSTRAP, "root at %s: lost %s during the handshake: %s", r->addr, c->peer, c->hs.why);
        root_close(r, c);
    } else if (!done) {
        root_watch(r, c, want);
    } else {
        c->state = RC_INFO;
        root_on_info(r, c);
    }
}

/* A rank holding a place says nothing until the reply; readable means it left (or broke the protocol). */
static void root_on_wait(root_t *r, root_conn_t *c)
{
    char byte;
    ssize_t n = recv(c->fd, &byte, 1, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    LOG_WARN(LOG_SUB_BOOTSTRAP, "root: rank %d (%s pid %d) left before every rank was in; its place is open again",
             c->rank, c->info.host, c->info.pid);
    root_close(r, c);
}

static void root_on_send(root_t *r, root_conn_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else if (errno != EINTR) {
            LOG_WARN(LOG_SUB_BOOTSTRAP, "root: sending the reply to %s failed: %s", c->peer, strerror(errno));
            break;
        }
    }
    root_close(r, c);
}

static void root_accept(root_t *r)
{
    for (;;) {
        int fd;
        struct sockaddr_storage peer;
        int e = sock_accept(r->listen_fd, &fd, &peer);
        if (e == ECONNABORTED) continue;
        if (e) {
            if (e != EAGAIN && e != EWOULDBLOCK) LOG_WARN(LOG_SUB_BOOTSTRAP, "root: accept failed: %s", strerror(e));
            return;
        }
        root_conn_t *c = calloc(1, sizeof(*c));
        if (!c || handshake_init(&c->hs, &r->secret, 1, 0, 0) != CHORUS_SUCCESS) {
            LOG_WARN(LOG_SUB_BOOTSTRAP, "root: cannot take a connection (out of memory or randomness)");
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->rank = -1;
        c->state = RC_AUTH;
        c->deadline = bootstrap_after(time_now_ns(), r->handshake_ns);
        sock_addr_str(&peer, c->peer, sizeof(c->peer));
        root_list_push(&r->pending, c);
        root_watch(r, c, EPOLLIN);
        LOG_DEBUG(LOG_SUB_BOOTSTRAP, "root: connection from %s", c->peer);
    }
}

static void root_on_event(root_t *r, root_conn_t *c)
{
    switch (c->state) {
    case RC_AUTH: root_on_auth(r, c); break;
    case RC_INFO: root_on_info(r, c); break;
    case RC_WAIT: root_on_wait(r, c); break;
    case RC_SEND: root_on_send(r, c); break;
    }
}

static void root_check_time(root_t *r)
{
    int64_t now = time_now_ns();
    while (r->pending.head && now >= r->pending.head->deadline) {
        root_conn_t *c = r->pending.head;
        LOG_INFO(LOG_SUB_BOOTSTRAP, "root: %s %s within the handshake timeout; closed", c->peer,
                 c->state == RC_AUTH ? "did not complete the handshake" : "did not report its rank");
        root_close(r, c);
    }
    if (!r->replying && now >= r->deadline) {
        root_time_out(r);
    } else if (r->replying && now >= r->finish_by) {
        while (r->placed.head) {
            LOG_WARN(LOG_SUB_BOOTSTRAP, "root: %s did not take its reply in time; closed", r->placed.head->peer);
            root_close(r, r->placed.head);
        }
    }
}

static void root_free(root_t *r)
{
    if (r->listen_fd >= 0) close(r->listen_fd);
    if (r->epfd >= 0) close(r->epfd);
    root_free_dead(r);
    free(r->slot);
    free(r->reply);
    OPENSSL_cleanse(&r->secret, sizeof(r->secret));
    free(r);
}

static void *root_main(void *arg)
{
    root_t *r = arg;
    struct epoll_event evs[64];
    while (!r->replying || r->placed.head || r->pending.head) {
        int64_t until = r->replying ? r->finish_by : r->deadline;
        if (r->pending.head) until = CHORUS_MIN(until, r->pending.head->deadline);
        int n = epoll_wait(r->epfd, evs, (int)CHORUS_ARRAY_SIZE(evs), time_left_ms(until, 1000));
        for (int i = 0; i < n; i++) {
            root_conn_t *c = evs[i].data.ptr;
            if (!c && r->listen_fd >= 0)
                root_accept(r);
            else if (c && c->fd >= 0)
                root_on_event(r, c);
        }
        root_check_time(r);
        root_free_dead(r);
    }
    LOG_INFO(LOG_SUB_BOOTSTRAP, "root at %s: done", r->addr);
    root_free(r);
    return NULL;
}

static chorus_result_t root_spawn(root_t *r, char *err, size_t errlen)
{
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0) return bootstrap_fail(CHORUS_ERR_SYSTEM, err, errlen, "pthread_attr_init failed");
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = thread_start_quiet(&thread, &attr, root_main, r); /* signals stay with the application's threads */
    pthread_attr_destroy(&attr);
    if (e != 0) return bootstrap_fail(CHORUS_ERR_SYSTEM, err, errlen, "cannot start the root thread: %s", strerror(e));
    return CHORUS_SUCCESS;
}

chorus_result_t bootstrap_root_start(const bootstrap_options_t *opt, chorus_unique_id_t *id_p, char *err, size_t errlen)
{
    if (!opt || !id_p) return bootstrap_fail(CHORUS_ERR_INVALID_ARGUMENT, err, errlen, "bootstrap_root_start: NULL argument");
    struct sockaddr_storage local, bound;
    CHECK(sock_find_interface(opt->ifname, opt->family, &local, err, errlen));
    root_t *r = calloc(1, sizeof(*r));
    if (!r) return bootstrap_fail(CHORUS_ERR_NO_MEMORY, err, errlen, "out of memory starting the root");
    r->listen_fd = -1;
    r->epfd = -1;
    r->deadline = time_deadline_ms(opt->connect_timeout_ms);
    r->timeout_ms = opt->connect_timeout_ms;
    r->handshake_ns = opt->handshake_timeout_ms > 0 ? opt->handshake_timeout_ms * 1000000 : INT64_MAX;
    r->finish_by = INT64_MAX;

    chorus_unique_id_t id;
    chorus_result_t res;
    CHECK_GOTO(sock_listen(&local, SOMAXCONN, &r->listen_fd, &bound, err, errlen), res, fail);
    sock_addr_str(&bound, r->addr, sizeof(r->addr));
    if ((res = bootstrap_id_make(&bound, &id)) != CHORUS_SUCCESS ||
        (res = bootstrap_id_parse(&id, &bound, &r->secret)) != CHORUS_SUCCESS) {
        res = bootstrap_fail(res, err, errlen, "cannot make a unique id for the root at %s", r->addr);
        goto fail;
    }
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (r->epfd < 0 || epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->listen_fd, &ev) != 0) {
        res = bootstrap_fail(CHORUS_ERR_SYSTEM, err, errlen, "root: epoll set-up failed: %s", strerror(errno));
        goto fail;
    }
    LOG_INFO(LOG_SUB_BOOTSTRAP, "root listening at %s (connect timeout %lld ms)", r->addr,
             (long long)opt->connect_timeout_ms);
    CHECK_GOTO(root_spawn(r, err, errlen), res, fail);
    *id_p = id;
    return CHORUS_SUCCESS;
fail:
    root_free(r);
    return res;
}
