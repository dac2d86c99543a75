/* Socket helpers: the interface filter on made-up names, real interface selection on loopback, and a
 * listen / connect / accept / send / receive round trip over IPv4 and IPv6. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <poll.h>
#include <string.h>

#include "platform/socket.h"
#include "test.h"
#include "util/util.h"

static void test_ifname_match(void)
{
    static const struct {
        const char *spec, *name;
        int expect;
    } cases[] = {
        {"", "eth0", 1},          {NULL, "lo", 1},          {"eth", "eth0", 1},       {"eth", "ib0", 0},
        {"eth,ib", "ib0", 1},     {"eth,ib", "lo", 0},      {"^eth", "eth0", 0},      {"^eth", "lo", 1},
        {"^eth,lo", "lo", 0},     {"^eth,lo", "ib0", 1},    {"=eth0", "eth0", 1},     {"=eth0", "eth01", 0},
        {"=eth0,ib0", "ib0", 1},  {"=eth", "eth0", 0},      {"^=eth0", "eth0", 0},    {"^=eth0", "eth01", 1},
        {"^", "eth0", 1},         {"eth,,lo", "lo", 1},     {",", "eth0", 0},         {"docker", "docker0", 1},
    };
    for (size_t i = 0; i < CHORUS_ARRAY_SIZE(cases); i++)
        TEST_ASSERT(sock_ifname_match(cases[i].spec, cases[i].name) == cases[i].expect, "spec '%s' name '%s'",
                    cases[i].spec ? cases[i].spec : "(null)", cases[i].name);
}

static void test_family_parse(void)
{
    int f = -1;
    TEST_ASSERT(sock_family_parse("", &f) == CHORUS_SUCCESS && f == AF_UNSPEC, "empty");
    TEST_ASSERT(sock_family_parse("AF_INET", &f) == CHORUS_SUCCESS && f == AF_INET, "AF_INET");
    TEST_ASSERT(sock_family_parse("4", &f) == CHORUS_SUCCESS && f == AF_INET, "4");
    TEST_ASSERT(sock_family_parse("AF_INET6", &f) == CHORUS_SUCCESS && f == AF_INET6, "AF_INET6");
    TEST_ASSERT(sock_family_parse("6", &f) == CHORUS_SUCCESS && f == AF_INET6, "6");
    TEST_ASSERT(sock_family_parse("ipv6", &f) == CHORUS_ERR_INVALID_ARGUMENT, "ipv6");
}

static void test_find_loopback(void)
{
    struct sockaddr_storage addr;
    char name[SOCK_ADDR_STRLEN], err[512];
    TEST_ASSERT(sock_find_interface("lo", "AF_INET", &addr, err, sizeof(err)) == CHORUS_SUCCESS, "%s", err);
    TEST_ASSERT(strcmp(sock_addr_str(&addr, name, sizeof(name)), "127.0.0.1:0") == 0, "got %s", name);
    TEST_ASSERT(sock_find_interface("=lo", "6", &addr, err, sizeof(err)) == CHORUS_SUCCESS, "%s", err);
    TEST_ASSERT(strcmp(sock_addr_str(&addr, name, sizeof(name)), "[::1]:0") == 0, "got %s", name);
    TEST_ASSERT(sock_find_interface("lo", "", &addr, err, sizeof(err)) == CHORUS_SUCCESS && addr.ss_family == AF_INET,
                "an open family takes IPv4 first");

    TEST_ASSERT(sock_find_interface("xyz", "", &addr, err, sizeof(err)) == CHORUS_ERR_INVALID_ARGUMENT, "xyz");
    TEST_ASSERT(strstr(err, "CHORUS_SOCKET_IFNAME=xyz matched no interface that is up; interfaces: ") == err &&
                    strstr(err, "lo"),
                "message: %s", err);
    TEST_ASSERT(sock_find_interface("^", "AF_UNIX", &addr, err, sizeof(err)) == CHORUS_ERR_INVALID_ARGUMENT &&
                    strstr(err, "AF_UNIX"),
                "message: %s", err);
}

/* With no filter: the first non-loopback interface that is up, else loopback; global IPv6 before
 * link-local. Checked against getifaddrs on whatever host runs the test. */
static void test_find_default(void)
{
    struct ifaddrs *list;
    TEST_ASSERT(getifaddrs(&list) == 0, "getifaddrs");
    int other_v4 = 0, global_v6 = 0;
    for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK)) continue;
        if (ifa->ifa_addr->sa_family == AF_INET) other_v4 = 1;
        if (ifa->ifa_addr->sa_family == AF_INET6 &&
            !IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)(void *)ifa->ifa_addr)->sin6_addr))
            global_v6 = 1;
    }
    freeifaddrs(list);

    struct sockaddr_storage addr;
    char err[512], name[SOCK_ADDR_STRLEN];
    TEST_ASSERT(sock_find_interface("", "", &addr, err, sizeof(err)) == CHORUS_SUCCESS, "%s", err);
    if (other_v4) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)&addr;
        TEST_ASSERT(addr.ss_family == AF_INET && ntohl(sin->sin_addr.s_addr) >> 24 != 127, "got %s",
                    sock_addr_str(&addr, name, sizeof(name)));
    }
    if (global_v6) {
        TEST_ASSERT(sock_find_interface("^lo", "6", &addr, err, sizeof(err)) == CHORUS_SUCCESS, "%s", err);
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&addr;
        TEST_ASSERT(!IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr) && !IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr), "got %s",
                    sock_addr_str(&addr, name, sizeof(name)));
    }
}

static void test_round_trip(const char *family)
{
    struct sockaddr_storage local, bound, peer;
    char err[512], name[SOCK_ADDR_STRLEN];
    int lfd = -1, cfd = -1, sfd = -1;
    TEST_ASSERT(sock_find_interface("lo", family, &local, err, sizeof(err)) == CHORUS_SUCCESS, "%s", err);
    TEST_ASSERT(sock_listen(&local, SOMAXCONN, &lfd, &bound, err, sizeof(err)) == CHORUS_SUCCESS, "%s", err);
    TEST_ASSERT(strstr(sock_addr_str(&bound, name, sizeof(name)), ":0") == NULL, "ephemeral port: %s", name);
    TEST_ASSERT(sock_accept(lfd, &sfd, &peer) == EAGAIN, "nothing pending yet");
    TEST_ASSERT(sock_connect_start(&bound, &cfd) == 0, "connect");
    struct pollfd p = {.fd = cfd, .events = POLLOUT};
    TEST_ASSERT(poll(&p, 1, 2000) == 1 && sock_connect_result(cfd) == 0, "connected");
    p = (struct pollfd){.fd = lfd, .events = POLLIN};
    TEST_ASSERT(poll(&p, 1, 2000) == 1 && sock_accept(lfd, &sfd, &peer) == 0, "accepted");
    TEST_ASSERT(peer.ss_family == local.ss_family, "peer family");

    char out[1000], in[sizeof(out)];
    for (size_t i = 0; i < sizeof(out); i++) out[i] = (char)(i * 7);
    int64_t deadline = time_deadline_ms(5000);
    TEST_ASSERT(sock_send_all(cfd, out, sizeof(out), deadline) == CHORUS_SUCCESS, "send");
    TEST_ASSERT(sock_recv_all(sfd, in, sizeof(in), deadline) == CHORUS_SUCCESS && memcmp(in, out, sizeof(in)) == 0,
                "recv");
    TEST_ASSERT(sock_recv_all(sfd, in, 1, time_deadline_ms(50)) == CHORUS_ERR_TIMEOUT, "nothing to read");
    close(cfd);
    TEST_ASSERT(sock_recv_all(sfd, in, 1, deadline) == CHORUS_ERR_REMOTE, "peer closed");
    TEST_ASSERT(sock_set_blocking(sfd, 1) == CHORUS_SUCCESS, "blocking");
    close(sfd);
    close(lfd);
    TEST_ASSERT(sock_connect_start(&bound, &cfd) == ECONNREFUSED ||
                    (poll(&(struct pollfd){.fd = cfd, .events = POLLOUT}, 1, 2000) == 1 &&
                     sock_connect_result(cfd) == ECONNREFUSED && close(cfd) == 0),
                "a closed port refuses");
}

static void test_random(void)
{
    uint8_t a[16], b[16];
    TEST_ASSERT(sock_random_bytes(a, sizeof(a)) == CHORUS_SUCCESS && sock_random_bytes(b, sizeof(b)) == CHORUS_SUCCESS,
                "getrandom");
    TEST_ASSERT(memcmp(a, b, sizeof(a)) != 0, "two draws differ");
}

int main(void)
{
    test_set_timeout(30);
    test_ifname_match();
    test_family_parse();
    test_find_loopback();
    test_find_default();
    test_round_trip("AF_INET");
    test_round_trip("AF_INET6");
    test_random();
    return test_report();
}
