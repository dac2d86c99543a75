/* Host identity: which ranks share a machine (and so can share memory). */
#ifndef CHORUS_HOST_H
#define CHORUS_HOST_H

#include <stddef.h>

#define HOST_ID_BYTES 64

/* "<hostname>-<16 hex digits>": the digits hash the host name, the kernel's boot id and the network
 * namespace, so two containers or namespaces on one kernel get different ids, and a rebooted machine a new
 * one. A non-empty override (CHORUS_HOSTID) is used as is (truncated to HOST_ID_BYTES - 1). */
void host_identity(const char *override, char *out, size_t len);

/* The level-2 cache of the processor this thread runs on, in bytes (sysfs, else the C library's
 * figure); 0 when neither knows. */
size_t host_l2_bytes(void);
/* The same for the level-3 cache. A virtual machine is told of its host's whole L3 (260 and 480 MiB on
 * two Xeon virtual machines with 2 cores). */
size_t host_l3_bytes(void);

#endif
