#include "transport/shm/region.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "platform/shmem.h"

static pthread_mutex_t regions_lock = PTHREAD_MUTEX_INITIALIZER;
static shm_region_t *regions; /* unordered */
static size_t nregions, cap;
static uint64_t last_id;

int shm_region_alloc(size_t bytes, void **ptr_p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - page) return ENOMEM;
    bytes = (bytes + page - 1) / page * page;
    int fd;
    void *map;
    int e = shmem_anon_create(bytes, &fd, &map);
    if (e) return e;
    pthread_mutex_lock(&regions_lock);
    if (nregions == cap) {
        size_t more = cap ? 2 * cap : 16;
        shm_region_t *r = realloc(regions, more * sizeof(*r));
        if (!r) {
            pthread_mutex_unlock(&regions_lock);
            munmap(map, bytes);
            close(fd);
            return ENOMEM;
        }
        regions = r;
        cap = more;
    }
    regions[nregions++] = (shm_region_t){.id = ++last_id, .base = (uint64_t)(uintptr_t)map, .bytes = bytes, .fd = fd};
    pthread_mutex_unlock(&regions_lock);
    *ptr_p = map;
    return 0;
}

int shm_region_free(void *ptr)
{
    pthread_mutex_lock(&regions_lock);
    for (size_t i = 0; i < nregions; i++) {
        if (regions[i].base != (uint64_t)(uintptr_t)ptr) continue;
        shm_region_t r = regions[i];
        regions[i] = regions[--nregions];
        pthread_mutex_unlock(&regions_lock);
        munmap(ptr, r.bytes);
        close(r.fd);
        return 0;
    }
    pthread_mutex_unlock(&regions_lock);
    return EINVAL;
}

int shm_region_find(uint64_t addr, size_t bytes, shm_region_t *r)
{
    int found = 0;
    pthread_mutex_lock(&regions_lock);
    for (size_t i = 0; i < nregions && !found; i++) {
        if (!shm_region_holds(regions[i].base, regions[i].bytes, addr, bytes)) continue;
        *r = regions[i];
        found = 1;
    }
    pthread_mutex_unlock(&regions_lock);
    return found;
}
