/*
 * Sockets: addresses, interface selection (NCCL's CHORUS_SOCKET_IFNAME syntax), non-blocking listen /
 * connect / accept, bounded send and receive, and random bytes. IPv4 and IPv6 alike.
 *
 * Every descriptor made here is non-blocking and close-on-exec.
 */
#ifndef CHORUS_SOCKET_H
#define CHORUS_SOCKET_H

#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "chorus/chorus.h"

/* "[fe80::1%eth0]:65535" fits, as does "255.255.255.255:65535". */
#define SOCK_ADDR_STRLEN (INET6_ADDRSTRLEN + IF_NAMESIZE + 10)

/* The address as "192.0.2.2:41234" or "[::1]:41234" (with "%ifname" for link-local); returns buf. */
const char *sock_addr_str(const struct sockaddr_storage *addr, char *buf, size_t len);
socklen_t sock_addr_len(const struct sockaddr_storage *addr);

/* Does the interface `name` pass the filter `spec`? spec is a comma-separated list of name prefixes; a
 * leading '^' turns it into an exclusion list, then a leading '=' asks for exact names. "" passes all. */
int sock_ifname_match(const char *spec, const char *name);

/* "" -> AF_UNSPEC, "AF_INET" or "4" -> AF_INET, "AF_INET6" or "6" -> AF_INET6; else INVALID_ARGUMENT. */
chorus_result_t sock_family_parse(const char *family, int *family_p);

/* Choose this host's address (port 0) on an interface that is up and passes `ifname`, restricted to
 * `family`. With an empty ifname: the first non-loopback interface, else loopback. IPv4 before IPv6 when
 * the family is open; global IPv6 addresses before link-local ones. */
chorus_result_t sock_find_interface(const char *ifname, const char *family, struct sockaddr_storage *addr_p,
                                    char *err, size_t errlen);

/* Bind to `addr` (its port, or an ephemeral one if 0) and listen. *bound_p gets the actual address. */
chorus_result_t sock_listen(const struct sockaddr_storage *addr, int backlog, int *fd_p,
                            struct sockaddr_storage *bound_p, char *err, size_t errlen);

/* Accept one pending connection: 0 with *fd_p and *peer_p set, or the errno (EAGAIN when none is
 * pending). */
int sock_accept(int listen_fd, int *fd_p, struct sockaddr_storage *peer_p);

/* Start a non-blocking connect: 0 with *fd_p set (the connect may still be in progress: wait until the
 * descriptor is writable, then ask sock_connect_result), or the errno of an immediate failure. */
int sock_connect_start(const struct sockaddr_storage *addr, int *fd_p);
/* 0 once connected, else the errno the connect failed with. */
int sock_connect_result(int fd);

chorus_result_t sock_set_blocking(int fd, int blocking);

/* Move exactly len bytes on a non-blocking socket, waiting at most until `deadline` (time_now_ns()
 * scale). REMOTE when the peer closed or reset the connection, TIMEOUT, or SYSTEM. */
chorus_result_t sock_send_all(int fd, const void *buf, size_t len, int64_t deadline);
chorus_result_t sock_recv_all(int fd, void *buf, size_t len, int64_t deadline);

/* Cryptographically random bytes (getrandom). */
chorus_result_t sock_random_bytes(void *buf, size_t len);

#endif
