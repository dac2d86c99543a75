/* The TCP transport against the transport conformance suite, over real loopback TCP connections. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.h"
#include "transport_conformance.h"

static int tcp_test_make_pair(const transport_options_t *opt, transport_conn_t **a_p, transport_conn_t **b_p)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t addr_len = sizeof(addr);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int afd = -1;
    if (lfd >= 0 && cfd >= 0 && bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen(lfd, 1) == 0 &&
        getsockname(lfd, (struct sockaddr *)&addr, &addr_len) == 0 &&
        connect(cfd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
        afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    close(lfd);
    if (afd >= 0 && tcp_conn_open(cfd, opt, a_p) == CHORUS_SUCCESS) {
        if (tcp_conn_open(afd, opt, b_p) == CHORUS_SUCCESS) return 0;
        (*a_p)->ops->close(*a_p);
        close(afd);
        return -1;
    }
    close(cfd);
    close(afd);
    return -1;
}

int main(void)
{
    test_set_timeout(60);
    conformance_run(&(conformance_factory_t){.name = "tcp", .make_pair = tcp_test_make_pair});
    return test_report();
}
