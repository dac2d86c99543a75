/*
 * The rank side of the rendezvous: open this rank's listener for its peers, reach the root (retrying
 * until the connect deadline), report where this rank listens, and receive the table of every rank or
 * the root's verdict on why there is none.
 */
#include <openssl/crypto.h>
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

/* How long past its own deadline a rank still listens for the root's verdict: the root, started first,
 * is the one that can say which ranks are missing. */
#define RANK_VERDICT_GRACE_MS 250

static chorus_result_t rank_dial_root(bootstrap_t *bs, const char *root, int *fd_p, char *err, size_t errlen)
{
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) return bootstrap_fail(CHORUS_ERR_SYSTEM, err, errlen, "epoll_create1 failed: %s", strerror(errno));
    bootstrap_dial_t d;
    chorus_result_t res =
        bootstrap_dial_init(&d, &bs->root, "the root", &bs->secret, bs->rank, bs->nranks, bs->handshake_timeout_ms);
    uint32_t events = 0;
    while (res == CHORUS_SUCCESS) {
        res = bootstrap_dial_step(&d, epfd, events, err, errlen);
        if (res != CHORUS_SUCCESS || d.done) break;
        if (time_now_ns() >= bs->deadline) {
            res = bootstrap_fail(CHORUS_ERR_TIMEOUT, err, errlen,
                                 "rank %d: the root at %s was unreachable for %lld ms (last error: %s)", bs->rank,
                                 root, (long long)bs->connect_timeout_ms, d.last_error);
            break;
        }
        struct epoll_event ev;
        int n = epoll_wait(epfd, &ev, 1, time_left_ms(CHORUS_MIN(d.wake, bs->deadline), 1000));
        events = n > 0 ? ev.events : 0;
    }
    if (res == CHORUS_SUCCESS)
        *fd_p = d.fd;
    else
        bootstrap_dial_abandon(&d);
    close(epfd);
    return res;
}

static chorus_result_t rank_io_fail(const bootstrap_t *bs, chorus_result_t res, const char *root, char *err,
                                    size_t errlen)
{
    if (res == CHORUS_ERR_TIMEOUT)
        return bootstrap_fail(res, err, errlen,
                              "rank %d: no table from the root at %s within %lld ms (it had not heard from every rank)",
                              bs->rank, root, (long long)bs->connect_timeout_ms);
    if (res == CHORUS_ERR_REMOTE)
        return bootstrap_fail(res, err, errlen, "rank %d: the root at %s closed the connection before sending the table",
                              bs->rank, root);
    return bootstrap_fail(res, err, errlen, "rank %d: talking to the root at %s failed: %s", bs->rank, root,
                          strerror(errno));
}

static chorus_result_t rank_read_table(bootstrap_t *bs, int fd, uint32_t count, int64_t until, const char *root,
                                       char *err, size_t errlen)
{
    if (count != (uint32_t)bs->nranks)
        return bootstrap_fail(CHORUS_ERR_REMOTE, err, errlen, "rank %d: the root at %s sent a table of %u ranks, not %d",
                              bs->rank, root, count, bs->nranks);
    size_t len = (size_t)count * BOOTSTRAP_ENTRY_BYTES;
    uint8_t *table = malloc(len);
    bs->peers = calloc(count, sizeof(*bs->peers));
    chorus_result_t res = CHORUS_ERR_NO_MEMORY;
    if (!table || !bs->peers) goto out;
    res = sock_recv_all(fd, table, len, until);
    if (res != CHORUS_SUCCESS) {
        res = rank_io_fail(bs, res, root, err, errlen);
        goto out;
    }
    for (uint32_t i = 0; i < count && res == CHORUS_SUCCESS; i++)
        res = bootstrap_get_peer(table + (size_t)i * BOOTSTRAP_ENTRY_BYTES, &bs->peers[i]);
    if (res != CHORUS_SUCCESS)
        res = bootstrap_fail(CHORUS_ERR_REMOTE, err, errlen, "rank %d: the root at %s sent a malformed table", bs->rank,
                             root);
out:
    free(table);
    return res;
}

static chorus_result_t rank_read_verdict(bootstrap_t *bs, int fd, uint32_t code, uint32_t count, int64_t until,
                                         const char *root, char *err, size_t errlen)
{
    char text[BOOTSTRAP_REPLY_TEXT_MAX + 1];
    if (count > BOOTSTRAP_REPLY_TEXT_MAX)
        return bootstrap_fail(CHORUS_ERR_REMOTE, err, errlen, "rank %d: the root at %s sent a malformed error",
                              bs->rank, root);
    chorus_result_t res = sock_recv_all(fd, text, count, until);
    if (res != CHORUS_SUCCESS) return rank_io_fail(bs, res, root, err, errlen);
    text[count] = '\0';
    res = code == CHORUS_ERR_TIMEOUT || code == CHORUS_ERR_INVALID_ARGUMENT ? (chorus_result_t)code : CHORUS_ERR_REMOTE;
    return bootstrap_fail(res, err, errlen, "rank %d: %s", bs->rank, text);
}

/* Report `me` to the root and take its answer: the table, or an error that becomes ours. */
static chorus_result_t rank_rendezvous(bootstrap_t *bs, const bootstrap_peer_info_t *me, char *err, size_t errlen)
{
    char root[SOCK_ADDR_STRLEN];
    sock_addr_str(&bs->root, root, sizeof(root));
    int fd = -1;
    CHECK(rank_dial_root(bs, root, &fd, err, errlen));

    int64_t until = bootstrap_after(bs->deadline, RANK_VERDICT_GRACE_MS * 1000000LL);
    uint8_t entry[BOOTSTRAP_ENTRY_BYTES], header[BOOTSTRAP_REPLY_HEADER_BYTES];
    bootstrap_put_peer(entry, me);
    chorus_result_t res = sock_send_all(fd, entry, sizeof(entry), bs->deadline);
    if (res == CHORUS_SUCCESS) res = sock_recv_all(fd, header, sizeof(header), until);
    if (res != CHORUS_SUCCESS) {
        res = rank_io_fail(bs, res, root, err, errlen);
    } else if (wire_get32(header) != BOOTSTRAP_MAGIC) {
        res = bootstrap_fail(CHORUS_ERR_REMOTE, err, errlen, "rank %d: the root at %s sent a malformed reply", bs->rank,
                             root);
    } else if (wire_get32(header + 4) == BOOTSTRAP_REPLY_TABLE) {
        res = rank_read_table(bs, fd, wire_get32(header + 12), until, root, err, errlen);
    } else {
        res = rank_read_verdict(bs, fd, wire_get32(header + 8), wire_get32(header + 12), until, root, err, errlen);
    }
    close(fd);
    return res;
}

chorus_result_t bootstrap_init(const chorus_unique_id_t *id, int rank, int nranks, const bootstrap_options_t *opt,
                               bootstrap_t **bs_p, char *err, size_t errlen)
{
    if (!id || !opt || !bs_p) return bootstrap_fail(CHORUS_ERR_INVALID_ARGUMENT, err, errlen, "bootstrap_init: NULL argument");
    if (nranks < 1 || nranks > BOOTSTRAP_MAX_RANKS || rank < 0 || rank >= nranks)
        return bootstrap_fail(CHORUS_ERR_INVALID_ARGUMENT, err, errlen,
                              "rank %d of nranks %d: need 0 <= rank < nranks <= %d", rank, nranks, BOOTSTRAP_MAX_RANKS);
    bootstrap_t *bs = calloc(1, sizeof(*bs));
    if (!bs) return bootstrap_fail(CHORUS_ERR_NO_MEMORY, err, errlen, "out of memory in bootstrap_init");
    bs->rank = rank;
    bs->nranks = nranks;
    bs->listen_fd = -1;
    bs->deadline = time_deadline_ms(opt->connect_timeout_ms);
    bs->connect_timeout_ms = opt->connect_timeout_ms;
    bs->handshake_timeout_ms = opt->handshake_timeout_ms;

    chorus_result_t res = bootstrap_id_parse(id, &bs->root, &bs->secret);
    if (res != CHORUS_SUCCESS) {
        res = bootstrap_fail(CHORUS_ERR_INVALID_ARGUMENT, err, errlen,
                             "rank %d: the unique id is not a Chorus unique id of protocol version %d", rank,
                             BOOTSTRAP_PROTOCOL_VERSION);
        goto fail;
    }
    bootstrap_peer_info_t me;
    memset(&me, 0, sizeof(me));
    struct sockaddr_storage local;
    CHECK_GOTO(sock_find_interface(opt->ifname, opt->family, &local, err, errlen), res, fail);
    CHECK_GOTO(sock_listen(&local, SOMAXCONN, &bs->listen_fd, &me.addr, err, errlen), res, fail);
    gethostname(me.host, sizeof(me.host) - 1);
    snprintf(me.hostid, sizeof(me.hostid), "%s", opt->hostid ? opt->hostid : "");
    me.pid = (int)getpid();
    CHECK_GOTO(rank_rendezvous(bs, &me, err, errlen), res, fail);

    char name[SOCK_ADDR_STRLEN];
    LOG_INFO(LOG_SUB_BOOTSTRAP, "rank %d of %d: table received; listening for peers at %s", rank, nranks,
             sock_addr_str(&me.addr, name, sizeof(name)));
    *bs_p = bs;
    return CHORUS_SUCCESS;
fail:
    bootstrap_close(bs);
    return res;
}

const bootstrap_peer_info_t *bootstrap_peer(const bootstrap_t *bs, int rank)
{
    return bs && rank >= 0 && rank < bs->nranks ? &bs->peers[rank] : NULL;
}

void bootstrap_close(bootstrap_t *bs)
{
    if (!bs) return;
    if (bs->listen_fd >= 0) close(bs->listen_fd);
    free(bs->peers);
    OPENSSL_cleanse(&bs->secret, sizeof(bs->secret));
    free(bs);
}

chorus_result_t bootstrap_shm_name(const bootstrap_t *bs, int a, int b, char *name, size_t len)
{
    uint8_t msg[16] = "chorus shm";
    wire_put32(msg + 8, (uint32_t)(a < b ? a : b));
    wire_put32(msg + 12, (uint32_t)(a < b ? b : a));
    uint8_t mac[HANDSHAKE_MAC_BYTES];
    CHECK(handshake_hmac(bs->secret.key, msg, sizeof(msg), mac));
    if (len < 8 + 32 + 1) return CHORUS_ERR_INVALID_ARGUMENT;
    int n = snprintf(name, len, "/chorus-");
    for (int i = 0; i < 16; i++) n += snprintf(name + n, len - (size_t)n, "%02x", mac[i]);
    return CHORUS_SUCCESS;
}
