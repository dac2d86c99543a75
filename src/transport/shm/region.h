/*
 * Buffers for collectives inside a host (chorus_mem_alloc): each one a memfd of its own, mapped shared, so
 * that the other ranks of the host can map it too (shm_arena_share, shm_arena_read) and read it with plain
 * loads where single-copy reads would otherwise pin its pages one call at a time (process_vm_readv).
 *
 * The process keeps one table of its regions, behind a lock (allocation and lookups may come from any
 * thread). Every region gets an id never used before in this process, so that a peer which mapped a
 * freed region can tell it from one allocated later at the same address.
 */
#ifndef CHORUS_SHM_REGION_H
#define CHORUS_SHM_REGION_H

#include <stddef.h>
#include <stdint.h>

typedef struct shm_region {
    uint64_t id;   /* from 1 */
    uint64_t base; /* its address in this process */
    uint64_t bytes;
    int fd;
} shm_region_t;

/* Whether [addr, addr + bytes) lies within [base, base + size). */
static inline int shm_region_holds(uint64_t base, uint64_t size, uint64_t addr, uint64_t bytes)
{
    return addr >= base && addr - base <= size && bytes <= size - (addr - base);
}

/* Allocate a region of bytes (rounded up to pages). Returns 0, or the errno. */
int shm_region_alloc(size_t bytes, void **ptr_p);
/* Free the region ptr starts. Returns 0, or EINVAL when ptr is no region's start. */
int shm_region_free(void *ptr);
/* The region holding [addr, addr + bytes), if any: 1 with it in *r, else 0. */
int shm_region_find(uint64_t addr, size_t bytes, shm_region_t *r);

#endif
