/*
 * slot-stream: how fast one core hands data to another through shared slots, by slot size; the
 * measurement behind CHORUS_SHM_SLOT_SIZE=auto (docs/algorithms.md, "Slots of the L2's size").
 *
 *   slot-stream [SLOTS [MIB]]     e.g. slot-stream 2 2048
 *
 * Two processes pinned to CPUs 0 and 1 share SLOTS slots (default 2, as the host arena has per rank). The
 * writer copies a private buffer into slot k % SLOTS and publishes k; the reader waits for k, copies the
 * slot into a private buffer and acknowledges k; the writer reuses a slot once its reader is done with
 * it. Each slot size from 64 KiB to 4 MiB streams MIB MiB (default 2048) and prints GB/s.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof(set), &set); /* best effort: one CPU runs both, slowly */
}

static double stream(size_t slot, int nslots, size_t total)
{
    size_t map_bytes = (size_t)nslots * slot + 256;
    char *shared = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return -1;
    memset(shared, 0, map_bytes);
    _Atomic long *published = (_Atomic long *)(shared + (size_t)nslots * slot);
    _Atomic long *done = (_Atomic long *)(shared + (size_t)nslots * slot + 128); /* a line of its own */
    long chunks = (long)(total / slot);
    pid_t reader = fork();
    if (reader == 0) {
        pin(1);
        char *dst = aligned_alloc(4096, slot);
        memset(dst, 1, slot);
        for (long k = 1; k <= chunks; k++) {
            while (atomic_load_explicit(published, memory_order_acquire) < k) {
            }
            memcpy(dst, shared + (size_t)(k % nslots) * slot, slot);
            atomic_store_explicit(done, k, memory_order_release);
        }
        _exit(0);
    }
    pin(0);
    char *src = aligned_alloc(4096, slot);
    memset(src, 2, slot);
    double t0 = now_s();
    for (long k = 1; k <= chunks; k++) {
        while (atomic_load_explicit(done, memory_order_acquire) < k - nslots + 1) {
        }
        memcpy(shared + (size_t)(k % nslots) * slot, src, slot);
        atomic_store_explicit(published, k, memory_order_release);
    }
    while (atomic_load_explicit(done, memory_order_acquire) < chunks) {
    }
    double t = now_s() - t0;
    waitpid(reader, NULL, 0);
    free(src);
    munmap(shared, map_bytes);
    return (double)chunks * (double)slot / t / 1e9;
}

int main(int argc, char **argv)
{
    int nslots = argc > 1 ? atoi(argv[1]) : 2;
    long mib = argc > 2 ? atol(argv[2]) : 2048;
    if (nslots < 2 || mib < 4) {
        fprintf(stderr, "usage: slot-stream [SLOTS (2 or more) [MIB (4 or more)]]\n");
        return 2;
    }
    printf("# %d slots, %ld MiB per size\n# %10s %8s\n", nslots, mib, "slot", "GB/s");
    for (size_t slot = 64 << 10; slot <= 4 << 20; slot *= 2)
        printf("%10zuK %8.2f\n", slot >> 10, stream(slot, nslots, (size_t)mib << 20));
    return 0;
}
