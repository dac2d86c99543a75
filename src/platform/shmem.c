#include "platform/shmem.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int shmem_map(int fd, const char *name, size_t bytes, void **map_p, char *err, size_t errlen)
{
    void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "cannot map shared memory segment %s (%zu bytes): %s", name, bytes, strerror(errno));
        return -1;
    }
    *map_p = map;
    return 0;
}

/* posix_fallocate, but a /dev/shm known to be too small is refused up front with the sizes involved. */
static int shmem_reserve(int fd, const char *name, size_t bytes, char *err, size_t errlen)
{
    struct statvfs vfs;
    unsigned long long avail = 0;
    int known = fstatvfs(fd, &vfs) == 0 && vfs.f_blocks > 0;
    if (known) avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    int e = known && avail < bytes ? ENOSPC : posix_fallocate(fd, 0, (off_t)bytes);
    if (e == ENOSPC && known)
        snprintf(err, errlen, "/dev/shm has %llu MiB free, %zu MiB needed", avail >> 20,
                 (bytes + (1u << 20) - 1) >> 20);
    else if (e != 0)
        snprintf(err, errlen, "cannot allocate %zu bytes for shared memory segment %s: %s", bytes, name, strerror(e));
    return e ? -1 : 0;
}

int shmem_create(const char *name, size_t bytes, void **map_p, char *err, size_t errlen)
{
    if (!name || name[0] != '/' || strlen(name) >= NAME_MAX || strchr(name + 1, '/')) {
        snprintf(err, errlen, "bad shared memory segment name \"%s\"", name ? name : "(null)");
        return -1;
    }
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            snprintf(err, errlen, "shared memory segment %s already exists: a name collision, or another program's",
                     name);
        else
            snprintf(err, errlen, "cannot create shared memory segment %s: %s", name, strerror(errno));
        return -1;
    }
    int rc = shmem_reserve(fd, name, bytes, err, errlen);
    if (rc == 0) rc = shmem_map(fd, name, bytes, map_p, err, errlen);
    close(fd);
    if (rc != 0) shm_unlink(name);
    return rc;
}

void shmem_unlink(const char *name) { (void)shm_unlink(name); }

void shmem_prefault(const void *map, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t step = page > 0 ? (size_t)page : 4096;
    const volatile char *p = map;
    for (size_t off = 0; off < bytes; off += step) (void)p[off];
}

int shmem_open(const char *name, size_t bytes, void **map_p, char *err, size_t errlen)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open shared memory segment %s: %s (the ranks need the same /dev/shm: "
                 "containers must share it, e.g. docker --ipc=host)", name, strerror(errno));
        return -1;
    }
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) != 0)
        snprintf(err, errlen, "cannot stat shared memory segment %s: %s", name, strerror(errno));
    else if ((uint64_t)st.st_size != bytes)
        snprintf(err, errlen, "shared memory segment %s has %lld bytes, %zu expected", name, (long long)st.st_size,
                 bytes);
    else
        rc = shmem_map(fd, name, bytes, map_p, err, errlen);
    close(fd);
    return rc;
}

/* process_vm_readv (write 0) or process_vm_writev (write 1) of bytes at addr in pid, until all are done. */
static int peer_copy(int pid, uint64_t addr, void *buf, size_t bytes, int write)
{
    while (bytes) {
        struct iovec local = {buf, bytes}, remote = {(void *)(uintptr_t)addr, bytes};
        ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
                          : process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : EFAULT;
        buf = (char *)buf + n;
        addr += (uint64_t)n;
        bytes -= (size_t)n;
    }
    return 0;
}

int shmem_peer_read(int pid, uint64_t addr, void *dst, size_t bytes) { return peer_copy(pid, addr, dst, bytes, 0); }

int shmem_peer_write(int pid, uint64_t addr, const void *src, size_t bytes)
{
    return peer_copy(pid, addr, (void *)src, bytes, 1); /* only read from */
}

int shmem_anon_create(size_t bytes, int *fd_p, void **map_p)
{
    int fd = (int)syscall(SYS_memfd_create, "chorus-buffer", MFD_CLOEXEC);
    if (fd < 0) return errno;
    int e = ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
    void *map = e ? MAP_FAILED : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!e && map == MAP_FAILED) e = errno;
    if (e) {
        close(fd);
        return e;
    }
    *fd_p = fd;
    *map_p = map;
    return 0;
}

int shmem_peer_map(int pid, int fd, size_t bytes, const void **map_p)
{
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) return errno;
    int mine = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    int e = mine < 0 ? errno : 0;
    close(pidfd);
    if (e) return e;
    void *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, mine, 0);
    e = map == MAP_FAILED ? errno : 0;
    close(mine);
    if (!e) *map_p = map;
    return e;
#else
    (void)pid, (void)fd, (void)bytes, (void)map_p;
    return ENOSYS;
#endif
}

void shmem_futex_wait(_Atomic uint32_t *word, uint32_t expected, int timeout_ms)
{
    struct timespec ts = {.tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
    (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

void shmem_futex_wake_all(_Atomic uint32_t *word)
{
    (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
