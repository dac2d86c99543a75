/* POSIX shared-memory segments and futexes: the OS side of every shared-memory structure in Chorus. */
#ifndef CHORUS_SHMEM_H
#define CHORUS_SHMEM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Create segment `name` ("/chorus-..."), O_EXCL and mode 0600, with its `bytes` reserved now (a page that
 * tmpfs cannot supply later would be a SIGBUS in the data path), and map it. Returns 0, or -1 with the
 * reason in err (a full /dev/shm is named with the MiB free and needed). Nothing is left behind on failure. */
int shmem_create(const char *name, size_t bytes, void **map_p, char *err, size_t errlen);
/* Open and map an existing segment that must have exactly `bytes`. Returns 0, or -1 with the reason in err. */
int shmem_open(const char *name, size_t bytes, void **map_p, char *err, size_t errlen);
/* Remove segment `name` if it exists (mappings stay valid). */
void shmem_unlink(const char *name);
/* Read one byte of every page of a mapping, so that later accesses do not fault. Under shadow paging
 * (some virtual machines, the project's reference one among them) the first access to a page by a
 * process costs microseconds even with the page table filled (MAP_POPULATE does not help there). */
void shmem_prefault(const void *map, size_t bytes);

/* Copy bytes from another process's address space (process_vm_readv: one copy, no shared mapping).
 * Returns 0, or the errno (EPERM where the kernel's ptrace policy forbids it, ESRCH for a gone process). */
int shmem_peer_read(int pid, uint64_t addr, void *dst, size_t bytes);
/* Copy bytes into another process's address space (process_vm_writev; the same permission and errors). */
int shmem_peer_write(int pid, uint64_t addr, const void *src, size_t bytes);

/* Anonymous shared memory that other processes may map: a memfd of `bytes`, mapped read-write. Returns
 * 0 with its descriptor in *fd_p, or the errno. Pages are supplied on first touch, as malloc's are. */
int shmem_anon_create(size_t bytes, int *fd_p, void **map_p);
/* Map `bytes` of another process's descriptor `fd` read-only (pidfd_getfd: the same permission as
 * process_vm_readv). Returns 0, or the errno (ENOSYS where the kernel has no pidfd_getfd). */
int shmem_peer_map(int pid, int fd, size_t bytes, const void **map_p);

/* Futexes on 32-bit words in memory shared between processes (not FUTEX_PRIVATE). */
/* Sleep while *word == expected, at most timeout_ms; returns early on a wake, a signal or a changed word. */
void shmem_futex_wait(_Atomic uint32_t *word, uint32_t expected, int timeout_ms);
void shmem_futex_wake_all(_Atomic uint32_t *word);

#endif
