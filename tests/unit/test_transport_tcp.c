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

static int sockopt_int(int fd, int name)
{
    int value = -1;
    socklen_t len = sizeof(value);
    return getsockopt(fd, SOL_SOCKET, name, &value, &len) == 0 ? value : -1;
}

/* The send and receive buffers are requested apart (a small send buffer keeps a sender from copying
 * megabytes into the kernel ahead of its receiver: tcp_conn_open); Linux reports twice the request. */
static void test_socket_buffers(void)
{
    const int send_req = 32 << 10, recv_req = 160 << 10; /* below the usual wmem_max / rmem_max caps */
    transport_options_t opt = {.chunk_bytes = 256 << 10, .socket_buffer = recv_req, .socket_send_buffer = send_req};
    transport_conn_t *a, *b;
    int rc = tcp_test_make_pair(&opt, &a, &b);
    TEST_ASSERT(rc == 0, "make_pair failed");
    if (rc != 0) return;
    transport_conn_t *conns[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        short events;
        int fd = conns[i]->ops->poll_fd(conns[i], &events);
        int snd = sockopt_int(fd, SO_SNDBUF), rcv = sockopt_int(fd, SO_RCVBUF);
        TEST_ASSERT(snd >= send_req && snd <= 2 * send_req, "SO_SNDBUF %d for a request of %d", snd, send_req);
        TEST_ASSERT(rcv >= recv_req && rcv <= 2 * recv_req, "SO_RCVBUF %d for a request of %d", rcv, recv_req);
        conns[i]->ops->close(conns[i]);
    }
}

int main(void)
{
    test_set_timeout(60);
    test_socket_buffers();
    conformance_run(&(conformance_factory_t){.name = "tcp", .make_pair = tcp_test_make_pair});
    return test_report();
}
