#include "platform/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "util/log.h"
#include "util/util.h"

static chorus_result_t sock_fail(chorus_result_t res, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static chorus_result_t sock_fail(chorus_result_t res, char *err, size_t errlen, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    LOG_WARN(LOG_SUB_NET, "%s", msg);
    if (err && errlen) snprintf(err, errlen, "%s", msg);
    return res;
}

const char *sock_addr_str(const struct sockaddr_storage *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)addr;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(sin->sin_port));
    } else if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)addr;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
        char scope[IF_NAMESIZE + 12] = "";
        char name[IF_NAMESIZE];
        if (sin6->sin6_scope_id && if_indextoname(sin6->sin6_scope_id, name))
            snprintf(scope, sizeof(scope), "%%%s", name);
        else if (sin6->sin6_scope_id)
            snprintf(scope, sizeof(scope), "%%%u", sin6->sin6_scope_id);
        snprintf(buf, len, "[%s%s]:%u", host, scope, ntohs(sin6->sin6_port));
    } else {
        snprintf(buf, len, "(address family %d)", addr->ss_family);
    }
    return buf;
}

socklen_t sock_addr_len(const struct sockaddr_storage *addr)
{
    return addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int sock_ifname_match(const char *spec, const char *name)
{
    if (!spec || !*spec) return 1;
    int exclude = spec[0] == '^';
    spec += exclude;
    int exact = spec[0] == '=';
    spec += exact;
    int found = 0;
    for (const char *p = spec; *p && !found;) {
        size_t n = strcspn(p, ",");
        if (n > 0) found = strncmp(name, p, n) == 0 && (!exact || name[n] == '\0');
        p += n + (p[n] == ',');
    }
    return found != exclude;
}

chorus_result_t sock_family_parse(const char *family, int *family_p)
{
    if (!family || !*family) {
        *family_p = AF_UNSPEC;
    } else if (strcmp(family, "AF_INET") == 0 || strcmp(family, "4") == 0) {
        *family_p = AF_INET;
    } else if (strcmp(family, "AF_INET6") == 0 || strcmp(family, "6") == 0) {
        *family_p = AF_INET6;
    } else {
        return CHORUS_ERR_INVALID_ARGUMENT;
    }
    return CHORUS_SUCCESS;
}

static int sock_is_ip(const struct ifaddrs *ifa)
{
    return ifa->ifa_addr && (ifa->ifa_addr->sa_family == AF_INET || ifa->ifa_addr->sa_family == AF_INET6) &&
           (ifa->ifa_flags & IFF_UP);
}

/* The first address of `family` on an interface that passes spec; loopback: -1 any, 0 none, 1 only.
 * A link-local IPv6 address is taken only when no interface offers a global one. */
static const struct ifaddrs *sock_pick(const struct ifaddrs *list, const char *spec, int family, int loopback)
{
    const struct ifaddrs *link_local = NULL;
    for (const struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
        if (!sock_is_ip(ifa) || ifa->ifa_addr->sa_family != family) continue;
        if (loopback >= 0 && !!(ifa->ifa_flags & IFF_LOOPBACK) != loopback) continue;
        if (!sock_ifname_match(spec, ifa->ifa_name)) continue;
        if (family == AF_INET6 &&
            IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)(const void *)ifa->ifa_addr)->sin6_addr)) {
            if (!link_local) link_local = ifa;
            continue;
        }
        return ifa;
    }
    return link_local;
}

/* "lo, eth0": the interfaces that are up and have an IP address, each once. */
static void sock_list_interfaces(const struct ifaddrs *list, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (const struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
        if (!sock_is_ip(ifa)) continue;
        const struct ifaddrs *prev = list;
        while (prev != ifa && !(sock_is_ip(prev) && strcmp(prev->ifa_name, ifa->ifa_name) == 0)) prev = prev->ifa_next;
        if (prev != ifa || off >= len) continue;
        int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", ifa->ifa_name);
        if (n > 0) off += (size_t)n;
    }
    if (!buf[0]) snprintf(buf, len, "none");
}

chorus_result_t sock_find_interface(const char *ifname, const char *family, struct sockaddr_storage *addr_p,
                                    char *err, size_t errlen)
{
    const char *spec = ifname ? ifname : "";
    int want;
    if (sock_family_parse(family, &want) != CHORUS_SUCCESS)
        return sock_fail(CHORUS_ERR_INVALID_ARGUMENT, err, errlen,
                         "CHORUS_SOCKET_FAMILY=%s is none of AF_INET, 4, AF_INET6, 6", family);
    struct ifaddrs *list;
    if (getifaddrs(&list) != 0)
        return sock_fail(CHORUS_ERR_SYSTEM, err, errlen, "getifaddrs failed: %s", strerror(errno));

    static const int families[] = {AF_INET, AF_INET6};
    const struct ifaddrs *found = NULL;
    /* Without a filter, loopback is the last resort: its own pass after every other interface. */
    int passes = *spec ? 1 : 2;
    for (int pass = 0; pass < passes && !found; pass++)
        for (size_t f = 0; f < CHORUS_ARRAY_SIZE(families) && !found; f++)
            if (want == AF_UNSPEC || want == families[f])
                found = sock_pick(list, spec, families[f], *spec ? -1 : pass);

    chorus_result_t res = CHORUS_SUCCESS;
    if (found) {
        struct sockaddr_storage addr;
        memset(&addr, 0, sizeof(addr));
        if (found->ifa_addr->sa_family == AF_INET) {
            memcpy(&addr, found->ifa_addr, sizeof(struct sockaddr_in));
        } else {
            struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&addr;
            memcpy(sin6, found->ifa_addr, sizeof(*sin6));
            if (IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr) && !sin6->sin6_scope_id)
                sin6->sin6_scope_id = if_nametoindex(found->ifa_name);
            sin6->sin6_port = 0;
        }
        char name[SOCK_ADDR_STRLEN];
        LOG_INFO(LOG_SUB_NET, "interface %s, address %s (CHORUS_SOCKET_IFNAME=%s CHORUS_SOCKET_FAMILY=%s)",
                 found->ifa_name, sock_addr_str(&addr, name, sizeof(name)), spec, family ? family : "");
        *addr_p = addr;
    } else {
        char names[256];
        sock_list_interfaces(list, names, sizeof(names));
        res = sock_fail(CHORUS_ERR_INVALID_ARGUMENT, err, errlen,
                        "CHORUS_SOCKET_IFNAME=%s%s%s matched no interface that is up%s; interfaces: %s", spec,
                        want != AF_UNSPEC ? " CHORUS_SOCKET_FAMILY=" : "", want != AF_UNSPEC ? family : "",
                        want != AF_UNSPEC ? " with an address of that family" : "", names);
    }
    freeifaddrs(list);
    return res;
}

static void sock_nodelay(int fd)
{
    int one = 1;
    /* Bootstrap traffic is request / reply; a failure here costs latency, not correctness. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

chorus_result_t sock_listen(const struct sockaddr_storage *addr, int backlog, int *fd_p,
                            struct sockaddr_storage *bound_p, char *err, size_t errlen)
{
    struct sockaddr_storage bound;
    socklen_t len = sizeof(bound);
    int one = 1;
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) goto fail;
    if (addr->ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) goto fail;
    if (bind(fd, (const struct sockaddr *)addr, sock_addr_len(addr)) != 0) goto fail;
    if (listen(fd, backlog) != 0) goto fail;
    if (getsockname(fd, (struct sockaddr *)&bound, &len) != 0) goto fail;
    *fd_p = fd;
    *bound_p = bound;
    return CHORUS_SUCCESS;
fail:;
    int e = errno;
    if (fd >= 0) close(fd);
    char name[SOCK_ADDR_STRLEN];
    return sock_fail(CHORUS_ERR_SYSTEM, err, errlen, "cannot listen on %s: %s", sock_addr_str(addr, name, sizeof(name)),
                     strerror(e));
}

int sock_accept(int listen_fd, int *fd_p, struct sockaddr_storage *peer_p)
{
    struct sockaddr_storage peer;
    socklen_t len = sizeof(peer);
    int fd = SYSCALL_RETRY(accept4(listen_fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd < 0) return errno;
    sock_nodelay(fd);
    *fd_p = fd;
    *peer_p = peer;
    return 0;
}

int sock_connect_start(const struct sockaddr_storage *addr, int *fd_p)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    sock_nodelay(fd);
    /* EINTR on a non-blocking connect leaves it running in the background, like EINPROGRESS. */
    if (connect(fd, (const struct sockaddr *)addr, sock_addr_len(addr)) != 0 && errno != EINPROGRESS &&
        errno != EINTR) {
        int e = errno;
        close(fd);
        return e;
    }
    *fd_p = fd;
    return 0;
}

int sock_connect_result(int fd)
{
    int e = 0;
    socklen_t len = sizeof(e);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0) return errno;
    return e;
}

chorus_result_t sock_set_blocking(int fd, int blocking)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return CHORUS_ERR_SYSTEM;
    flags = blocking ? (flags & ~O_NONBLOCK) : (flags | O_NONBLOCK);
    return fcntl(fd, F_SETFL, flags) == 0 ? CHORUS_SUCCESS : CHORUS_ERR_SYSTEM;
}

static chorus_result_t sock_wait(int fd, short events, int64_t deadline)
{
    for (;;) {
        if (deadline != INT64_MAX && time_now_ns() >= deadline) return CHORUS_ERR_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, time_left_ms(deadline, 1000));
        if (n > 0) return CHORUS_SUCCESS;
        if (n < 0 && errno != EINTR) return CHORUS_ERR_SYSTEM;
    }
}

static chorus_result_t sock_errno_result(int e)
{
    return e == EPIPE || e == ECONNRESET || e == ECONNABORTED || e == ETIMEDOUT ? CHORUS_ERR_REMOTE : CHORUS_ERR_SYSTEM;
}

chorus_result_t sock_send_all(int fd, const void *buf, size_t len, int64_t deadline)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            CHECK(sock_wait(fd, POLLOUT, deadline));
        } else if (n < 0 && errno != EINTR) {
            return sock_errno_result(errno);
        }
    }
    return CHORUS_SUCCESS;
}

chorus_result_t sock_recv_all(int fd, void *buf, size_t len, int64_t deadline)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n == 0) {
            return CHORUS_ERR_REMOTE;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            CHECK(sock_wait(fd, POLLIN, deadline));
        } else if (errno != EINTR) {
            return sock_errno_result(errno);
        }
    }
    return CHORUS_SUCCESS;
}

chorus_result_t sock_random_bytes(void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            LOG_WARN(LOG_SUB_NET, "getrandom failed: %s", strerror(errno));
            return CHORUS_ERR_SYSTEM;
        }
        p += n;
        len -= (size_t)n;
    }
    return CHORUS_SUCCESS;
}
