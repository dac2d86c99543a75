#include "transport/shm/arena.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "platform/shmem.h"
#include "platform/socket.h"
#include "transport/shm/region.h"
#include "util/copy.h"
#include "util/log.h"
#include "util/util.h"

#define ARENA_MAGIC 0x63686f7275734101ull
#define ARENA_VERSION 3u
/* Two 64-byte lines per rank: adjacent-line prefetchers would otherwise make neighbours share. */
#define ARENA_LINE 128

_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "words shared between processes must be lock-free atomics");

typedef struct arena_hdr {
    uint64_t magic;
    uint64_t version;
    uint64_t nranks;
    uint64_t slot_bytes;
    uint8_t token[SHM_ARENA_TOKEN_BYTES];
} arena_hdr_t;

/* A phase as published, in its own two cache lines: a reader that polls the stamp gets the tag and up to
 * 24 bytes of payload in the first line's transfer, the rest of the payload in the line the adjacent-line
 * prefetcher pairs with it. The tag is written and read as words, so that a reader checking an old phase
 * while its owner overwrites it (see shm_arena_tag_copy) reads torn words, never racy bytes. */
typedef struct arena_stamp {
    _Alignas(ARENA_LINE) _Atomic uint32_t phase; /* the phase published here; written last (release) */
    uint32_t inline_bytes; /* payload bytes copied below, or UINT32_MAX: read the slot, from the offset that
                              the payload's first 8 bytes hold then */
    _Atomic uint64_t tag[SHM_ARENA_TAG_BYTES / 8];
    uint8_t payload[SHM_ARENA_INLINE_BYTES];
} arena_stamp_t;
_Static_assert(sizeof(arena_stamp_t) == ARENA_LINE, "a stamp is two cache lines");
_Static_assert(offsetof(arena_stamp_t, payload) + SHM_ARENA_LINE_BYTES <= 64, "a stamp's first line holds them");

/* What one rank publishes; only its owner writes it, apart from waiters. */
typedef struct arena_line {
    _Alignas(ARENA_LINE) _Atomic uint32_t phase; /* the last phase published: the futex word sleepers use */
    _Atomic uint32_t waiters;                   /* readers asleep (or about to be) on phase */
    uint64_t pid;                               /* for single-copy reads: the process */
    uint64_t probe;                             /* and where it keeps a copy of the token */
} arena_line_t;

/* A region of chorus_mem_alloc memory (transport/shm/region.h) a rank shares: what a peer needs to map it.
 * Only its owner writes it, before publishing the phase whose slot holds an address in it. */
typedef struct arena_region {
    uint64_t id; /* 0: none */
    uint64_t base;
    uint64_t bytes;
    uint64_t fd;
} arena_region_t;
#define ARENA_REGIONS 8 /* per rank: a call shares two at most */

/* A peer's region as this rank mapped it; map NULL: it could not be mapped (read it with
 * process_vm_readv instead). */
typedef struct arena_map {
    uint64_t id;
    uint64_t base;
    uint64_t bytes;
    const char *map;
    uint64_t used; /* when it was last read: the least recently read goes first */
} arena_map_t;
#define ARENA_MAPS 8 /* per peer */

struct shm_arena {
    arena_hdr_t *hdr;
    arena_line_t *lines;
    arena_stamp_t *stamps; /* nstamps per rank, by rank */
    arena_region_t *regions; /* ARENA_REGIONS per rank, by rank */
    arena_map_t *maps;       /* this rank's mappings: ARENA_MAPS per peer, by rank */
    uint64_t reads;
    uint32_t next_region;
    uint32_t nstamps;
    char *slots;
    size_t slot_bytes;
    size_t map_bytes;
    int nranks;
};


/* Stamps per rank: SHM_ARENA_STAMPS_MAX, halved while all ranks' stamps would pass
 * SHM_ARENA_STAMP_BUDGET (a power of two, so that phase % stamps survives the phase's wrap-around). */
static uint32_t arena_stamps(int nranks)
{
    uint32_t k = SHM_ARENA_STAMPS_MAX;
    while (k > 2 && (size_t)nranks * k * sizeof(arena_stamp_t) > SHM_ARENA_STAMP_BUDGET) k /= 2;
    return k;
}

/* The arena's geometry: header, phase lines and stamps, then two slots per rank (rounded up to pages in
 * *slot_bytes); the total, or 0 if it overflows. */
static size_t arena_layout(int nranks, size_t *slot_bytes, size_t *head_p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t slot = CHORUS_ROUND_UP(CHORUS_MAX(*slot_bytes, (size_t)1), page), total;
    if (nranks < 1 || slot < *slot_bytes || __builtin_mul_overflow(slot, 2 * (size_t)nranks, &total)) return 0;
    size_t head = CHORUS_ROUND_UP(CHORUS_ROUND_UP(sizeof(arena_hdr_t), ARENA_LINE) +
                               (size_t)nranks * (sizeof(arena_line_t) + arena_stamps(nranks) * sizeof(arena_stamp_t) +
                                                 ARENA_REGIONS * sizeof(arena_region_t)),
                           page);
    if (__builtin_add_overflow(total, head, &total)) return 0;
    *slot_bytes = slot;
    *head_p = head;
    return total;
}

size_t shm_arena_map_bytes(int nranks, size_t slot_bytes)
{
    size_t head;
    return arena_layout(nranks, &slot_bytes, &head);
}

/* Every rank reads every slot of the arena, from its first direct collective on: its pages are mapped
 * now (shmem_prefault), at init, where a 2-rank direct AllGather of 2 MiB otherwise took 2.5 ms on its
 * first call against 0.1 ms from the second (0.4 ms with the pages read at init). */
static shm_arena_t *arena_wrap(void *map, size_t map_bytes, int nranks, size_t head, size_t slot_bytes)
{
    shm_arena_t *a = calloc(1, sizeof(*a));
    if (!a) return NULL;
    a->maps = calloc((size_t)nranks * ARENA_MAPS, sizeof(*a->maps));
    if (!a->maps) {
        free(a);
        return NULL;
    }
    shmem_prefault(map, map_bytes);
    a->hdr = map;
    a->lines = (arena_line_t *)((char *)map + CHORUS_ROUND_UP(sizeof(arena_hdr_t), ARENA_LINE));
    a->stamps = (arena_stamp_t *)(a->lines + nranks);
    a->nstamps = arena_stamps(nranks);
    a->regions = (arena_region_t *)(a->stamps + (size_t)nranks * a->nstamps);
    a->nranks = nranks;
    a->slots = (char *)map + head;
    a->slot_bytes = slot_bytes;
    a->map_bytes = map_bytes;
    return a;
}

size_t shm_arena_auto_slot_bytes(size_t l2_bytes, int nranks, int cores)
{
    size_t slot = CHORUS_MIN(CHORUS_MAX(l2_bytes, SHM_ARENA_AUTO_MIN), SHM_ARENA_AUTO_MAX);
    if (cores > 0 && nranks > 2 * cores) slot = CHORUS_MIN(slot, SHM_ARENA_AUTO_SHARED);
    size_t ranks = nranks > 1 ? (size_t)nranks : 1;
    while (slot > SHM_ARENA_AUTO_MIN && slot * 2 * ranks > SHM_ARENA_AUTO_BUDGET) slot /= 2;
    return CHORUS_MAX(slot, SHM_ARENA_AUTO_MIN);
}

chorus_result_t shm_arena_create(const char *name, int nranks, size_t slot_bytes,
                                 uint8_t token_p[SHM_ARENA_TOKEN_BYTES], shm_arena_t **arena_p, char *err,
                                 size_t errlen)
{
    size_t head, bytes = arena_layout(nranks, &slot_bytes, &head);
    if (!bytes) {
        snprintf(err, errlen, "an arena of %d slots of %zu bytes is too large", nranks, slot_bytes);
        return CHORUS_ERR_NOT_SUPPORTED;
    }
    void *map;
    if (shmem_create(name, bytes, &map, err, errlen) != 0) return CHORUS_ERR_NOT_SUPPORTED;
    shm_arena_t *a = arena_wrap(map, bytes, nranks, head, slot_bytes);
    if (!a || sock_random_bytes(a->hdr->token, SHM_ARENA_TOKEN_BYTES) != CHORUS_SUCCESS) {
        snprintf(err, errlen, "%s", a ? "no random bytes for the arena's token" : "out of memory");
        free(a);
        munmap(map, bytes);
        shm_arena_unlink(name);
        return CHORUS_ERR_NOT_SUPPORTED;
    }
    a->hdr->magic = ARENA_MAGIC;
    a->hdr->version = ARENA_VERSION;
    a->hdr->nranks = (uint64_t)nranks;
    a->hdr->slot_bytes = slot_bytes;
    memcpy(token_p, a->hdr->token, SHM_ARENA_TOKEN_BYTES);
    *arena_p = a;
    return CHORUS_SUCCESS;
}

chorus_result_t shm_arena_open(const char *name, int nranks, size_t slot_bytes,
                               const uint8_t token[SHM_ARENA_TOKEN_BYTES], shm_arena_t **arena_p, char *err,
                               size_t errlen)
{
    size_t head, bytes = arena_layout(nranks, &slot_bytes, &head);
    void *map;
    if (!bytes) {
        snprintf(err, errlen, "an arena of %d slots of %zu bytes is too large", nranks, slot_bytes);
        return CHORUS_ERR_NOT_SUPPORTED;
    }
    if (shmem_open(name, bytes, &map, err, errlen) != 0) return CHORUS_ERR_NOT_SUPPORTED;
    const arena_hdr_t *h = map;
    if (h->magic != ARENA_MAGIC || h->version != ARENA_VERSION || h->nranks != (uint64_t)nranks ||
        h->slot_bytes != slot_bytes || memcmp(h->token, token, SHM_ARENA_TOKEN_BYTES) != 0) {
        snprintf(err, errlen, "shared memory segment %s is not the arena rank 0 made: its header or token differs",
                 name);
        munmap(map, bytes);
        return CHORUS_ERR_NOT_SUPPORTED;
    }
    shm_arena_t *a = arena_wrap(map, bytes, nranks, head, slot_bytes);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        munmap(map, bytes);
        return CHORUS_ERR_NOT_SUPPORTED;
    }
    *arena_p = a;
    return CHORUS_SUCCESS;
}

void shm_arena_unlink(const char *name) { shm_unlink(name); }

void shm_arena_close(shm_arena_t *arena)
{
    if (!arena) return;
    for (size_t i = 0; i < (size_t)arena->nranks * ARENA_MAPS; i++)
        if (arena->maps[i].map) munmap((void *)arena->maps[i].map, arena->maps[i].bytes);
    free(arena->maps);
    munmap(arena->hdr, arena->map_bytes);
    free(arena);
}

size_t shm_arena_slot_bytes(const shm_arena_t *arena) { return arena->slot_bytes; }

void *shm_arena_slot(const shm_arena_t *arena, int rank, uint32_t phase)
{
    return arena->slots + ((size_t)rank * 2 + (phase & 1)) * arena->slot_bytes;
}

static arena_stamp_t *arena_stamp(const shm_arena_t *arena, int rank, uint32_t phase)
{
    return &arena->stamps[(size_t)rank * arena->nstamps + phase % arena->nstamps];
}

uint32_t shm_arena_stamps(const shm_arena_t *arena) { return arena->nstamps; }

/* Write phase's stamp and publish it. While the stamp is rewritten its phase says phase - 1, which no
 * reader looks for there (that phase has another stamp), so a reader of the phase it held before sees it
 * gone before any word of it changes (shm_arena_tag_copy). */
static void arena_stamp_write(shm_arena_t *arena, int rank, uint32_t phase, const void *tag, const void *data,
                              size_t offset, size_t used, size_t most)
{
    arena_line_t *l = &arena->lines[rank];
    arena_stamp_t *st = arena_stamp(arena, rank, phase);
    atomic_store_explicit(&st->phase, phase - 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (size_t w = 0; w < SHM_ARENA_TAG_BYTES / 8; w++) {
        uint64_t word;
        memcpy(&word, (const char *)tag + 8 * w, 8);
        atomic_store_explicit(&st->tag[w], word, memory_order_relaxed);
    }
    st->inline_bytes = UINT32_MAX;
    if (used <= most) {
        if (used) memcpy(st->payload, (const char *)data + offset, used);
        st->inline_bytes = (uint32_t)used;
    } else {
        uint64_t at = offset;
        memcpy(st->payload, &at, sizeof(at));
    }
    atomic_store_explicit(&st->phase, phase, memory_order_release);
    atomic_store(&l->phase, phase); /* seq-cst: ordered before the waiters load below */
    if (atomic_load(&l->waiters)) shmem_futex_wake_all(&l->phase);
}

void shm_arena_publish(shm_arena_t *arena, int rank, uint32_t phase, const void *tag, size_t offset, size_t used)
{
    /* A reader of more than the stamp's first line holds reads the slot: as cheap as a second line of
     * the stamp, and the writer has no copy to make (2 ranks, one-shot AllReduce of 64 bytes: 0.45 us
     * a call that way, 0.49 with the payload in the stamp, medians of 7 alternating runs). */
    arena_stamp_write(arena, rank, phase, tag, shm_arena_slot(arena, rank, phase), offset, used,
                      SHM_ARENA_LINE_BYTES);
}

void shm_arena_publish_inline(shm_arena_t *arena, int rank, uint32_t phase, const void *tag, const void *data,
                              size_t bytes)
{
    arena_stamp_write(arena, rank, phase, tag, data, 0, bytes, SHM_ARENA_INLINE_BYTES);
}

static int phase_reached(uint32_t cur, uint32_t phase) { return (int32_t)(cur - phase) >= 0; }

/* The stamp of phase holds phase exactly from its publication until rank publishes phase + nstamps, which
 * it cannot do before every reader of phase has moved on (see the header). */
int shm_arena_reached(const shm_arena_t *arena, int rank, uint32_t phase)
{
    return atomic_load_explicit(&arena_stamp(arena, rank, phase)->phase, memory_order_acquire) == phase;
}

uint32_t shm_arena_phase(const shm_arena_t *arena, int rank)
{
    return atomic_load_explicit(&arena->lines[rank].phase, memory_order_acquire);
}

int shm_arena_passed(const shm_arena_t *arena, int rank, uint32_t phase)
{
    return phase_reached(shm_arena_phase(arena, rank), phase);
}

const void *shm_arena_tag(const shm_arena_t *arena, int rank, uint32_t phase)
{
    return (const void *)arena_stamp(arena, rank, phase)->tag;
}

int shm_arena_tag_copy(const shm_arena_t *arena, int rank, uint32_t phase, void *tag)
{
    const arena_stamp_t *st = arena_stamp(arena, rank, phase);
    if (atomic_load_explicit(&st->phase, memory_order_acquire) != phase) return 0;
    for (size_t w = 0; w < SHM_ARENA_TAG_BYTES / 8; w++) {
        uint64_t word = atomic_load_explicit(&st->tag[w], memory_order_relaxed);
        memcpy((char *)tag + 8 * w, &word, 8);
    }
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&st->phase, memory_order_relaxed) == phase;
}

const void *shm_arena_data(const shm_arena_t *arena, int rank, uint32_t phase)
{
    const arena_stamp_t *st = arena_stamp(arena, rank, phase);
    if (st->inline_bytes != UINT32_MAX) return (const void *)st->payload;
    uint64_t at;
    memcpy(&at, st->payload, sizeof(at));
    return (const char *)shm_arena_slot(arena, rank, phase) + at;
}

void shm_arena_sleep(shm_arena_t *arena, int rank, uint32_t phase, int timeout_ms)
{
    arena_line_t *l = &arena->lines[rank];
    atomic_fetch_add(&l->waiters, 1);
    uint32_t cur = atomic_load(&l->phase); /* seq-cst: after the waiters increment */
    if (!phase_reached(cur, phase)) shmem_futex_wait(&l->phase, cur, timeout_ms);
    atomic_fetch_sub(&l->waiters, 1);
}

void shm_arena_set_self(shm_arena_t *arena, int rank, const uint8_t *probe)
{
    arena->lines[rank].pid = (uint64_t)getpid();
    arena->lines[rank].probe = (uint64_t)(uintptr_t)probe;
}

int shm_arena_can_copy(const shm_arena_t *arena, int rank, char *err, size_t errlen)
{
    uint8_t seen[SHM_ARENA_TOKEN_BYTES];
    int pid = (int)arena->lines[rank].pid;
    int e = shmem_peer_read(pid, arena->lines[rank].probe, seen, sizeof(seen));
    if (e) {
        snprintf(err, errlen, "process_vm_readv from rank %d (pid %d): %s%s", rank, pid, strerror(e),
                 e == EPERM ? " (the kernel's ptrace policy, e.g. kernel.yama.ptrace_scope, or separate pid "
                              "namespaces)"
                            : "");
        return 0;
    }
    if (memcmp(seen, arena->hdr->token, sizeof(seen)) != 0) {
        snprintf(err, errlen, "rank %d's pid %d is another process here (separate pid namespaces)", rank, pid);
        return 0;
    }
    /* The same bytes back: the probe does not change. */
    e = shmem_peer_write(pid, arena->lines[rank].probe, seen, sizeof(seen));
    if (e) snprintf(err, errlen, "process_vm_writev to rank %d (pid %d): %s", rank, pid, strerror(e));
    return !e;
}

static int ranges_meet(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) { return a < b + bn && b < a + an; }

void shm_arena_share(shm_arena_t *arena, int rank, const void *buf, size_t bytes)
{
    shm_region_t r;
    arena_region_t *t = arena->regions + (size_t)rank * ARENA_REGIONS;
    if (!shm_region_find((uint64_t)(uintptr_t)buf, bytes, &r)) {
        /* Memory of another kind now where a region was (freed since): no reader may look for it there. */
        for (int i = 0; i < ARENA_REGIONS; i++)
            if (t[i].id && ranges_meet(t[i].base, t[i].bytes, (uint64_t)(uintptr_t)buf, bytes)) t[i].id = 0;
        return;
    }
    for (int i = 0; i < ARENA_REGIONS; i++) {
        if (t[i].id == r.id) return;
        /* A region freed since, whose address range the new one takes: no reader may find it again. */
        if (t[i].id && ranges_meet(t[i].base, t[i].bytes, r.base, r.bytes)) t[i].id = 0;
    }
    t[arena->next_region++ % ARENA_REGIONS] =
        (arena_region_t){.id = r.id, .base = r.base, .bytes = r.bytes, .fd = (uint64_t)r.fd};
}

/* Where this process sees [addr, addr + bytes) of rank's memory, if rank shared the region holding it and
 * it could be mapped; else NULL. A region is mapped on its first read and stays mapped (ARENA_MAPS per
 * peer, the least recently read unmapped first, and any the peer's newer regions overlap). */
static const char *arena_mapped(shm_arena_t *arena, int rank, uint64_t addr, size_t bytes)
{
    const arena_region_t *t = arena->regions + (size_t)rank * ARENA_REGIONS;
    arena_region_t r = {0};
    for (int i = 0; i < ARENA_REGIONS && !r.id; i++)
        if (t[i].id && shm_region_holds(t[i].base, t[i].bytes, addr, bytes)) r = t[i];
    if (!r.id) return NULL;
    arena_map_t *m = arena->maps + (size_t)rank * ARENA_MAPS, *slot = NULL;
    for (int i = 0; i < ARENA_MAPS; i++) {
        if (m[i].id == r.id) {
            m[i].used = ++arena->reads;
            return m[i].map ? m[i].map + (addr - r.base) : NULL;
        }
        if (m[i].id && ranges_meet(m[i].base, m[i].bytes, r.base, r.bytes)) {
            if (m[i].map) munmap((void *)m[i].map, m[i].bytes);
            m[i] = (arena_map_t){0};
        }
    }
    for (int i = 0; i < ARENA_MAPS; i++)
        if (!slot || !m[i].id || (slot->id && m[i].used < slot->used)) slot = &m[i];
    if (slot->id && slot->map) munmap((void *)slot->map, slot->bytes);
    const void *map = NULL;
    int e = shmem_peer_map((int)arena->lines[rank].pid, (int)r.fd, r.bytes, &map);
    if (e)
        LOG_INFO(LOG_SUB_SHM, "cannot map rank %d's buffer of %llu bytes (chorus_mem_alloc): %s; reading it with "
                 "process_vm_readv", rank, (unsigned long long)r.bytes, strerror(e));
    else
        LOG_INFO(LOG_SUB_SHM, "mapped rank %d's buffer of %llu bytes (chorus_mem_alloc): reads from it are plain "
                 "copies", rank, (unsigned long long)r.bytes);
    *slot = (arena_map_t){.id = r.id, .base = r.base, .bytes = r.bytes, .map = e ? NULL : map, .used = ++arena->reads};
    return slot->map ? slot->map + (addr - r.base) : NULL;
}

const void *shm_arena_view(shm_arena_t *arena, int rank, uint64_t addr, size_t bytes)
{
    return arena_mapped(arena, rank, addr, bytes);
}

int shm_arena_read(shm_arena_t *arena, int rank, uint64_t addr, void *dst, size_t bytes, int out)
{
    const char *src = arena_mapped(arena, rank, addr, bytes);
    if (!src) return shmem_peer_read((int)arena->lines[rank].pid, addr, dst, bytes);
    if (out)
        copy_out(dst, src, bytes);
    else
        copy_bytes(dst, src, bytes);
    return 0;
}

int shm_arena_write(shm_arena_t *arena, int rank, uint64_t addr, const void *src, size_t bytes)
{
    return shmem_peer_write((int)arena->lines[rank].pid, addr, src, bytes);
}
