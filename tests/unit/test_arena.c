/* The host arena (src/transport/shm/arena.c) between real processes: set-up and its refusals, phases with
 * their tags, stamped small payloads and slots, a sleeper woken by a publication in another process,
 * single-copy reads, reads out of shared regions (chorus_mem_alloc) and nothing left in /dev/shm. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "transport/shm/arena.h"
#include "transport/shm/region.h"

#define NRANKS 3
#define SLOT 5000 /* rounded up to whole pages */

static int name_exists(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "/dev/shm%s", name);
    return access(path, F_OK) == 0;
}

/* Whether process_vm_readv works at all here (a seccomp profile may forbid it even on oneself): where it
 * does not, the single-copy checks are skipped. */
static int single_copy;

static void tag_of(uint8_t tag[SHM_ARENA_TAG_BYTES], int v) { memset(tag, v, SHM_ARENA_TAG_BYTES); }

/* Refusals: a wrong token, another geometry, a name that does not exist, a name already taken. */
static void check_refusals(const char *name, const uint8_t token[SHM_ARENA_TOKEN_BYTES])
{
    char err[256];
    shm_arena_t *a = NULL;
    uint8_t bad[SHM_ARENA_TOKEN_BYTES], t2[SHM_ARENA_TOKEN_BYTES];
    memcpy(bad, token, sizeof(bad));
    bad[0] ^= 1;
    TEST_ASSERT(shm_arena_open(name, NRANKS, SLOT, bad, &a, err, sizeof(err)) == CHORUS_ERR_NOT_SUPPORTED &&
                    strstr(err, "token"), "a wrong token is refused: %s", err);
    TEST_ASSERT(shm_arena_open(name, NRANKS + 1, SLOT, token, &a, err, sizeof(err)) == CHORUS_ERR_NOT_SUPPORTED,
                "another rank count is refused: %s", err);
    TEST_ASSERT(shm_arena_open("/chorus-test-arena-none", NRANKS, SLOT, token, &a, err, sizeof(err)) ==
                    CHORUS_ERR_NOT_SUPPORTED && strstr(err, "cannot open"), "a missing arena: %s", err);
    TEST_ASSERT(shm_arena_create(name, NRANKS, SLOT, t2, &a, err, sizeof(err)) == CHORUS_ERR_NOT_SUPPORTED &&
                    strstr(err, "already exists"), "a taken name: %s", err);
}

/* Rank r of a child process: open, publish phase 1 with a payload, read every peer's, then sleep until
 * rank 0 publishes phase 2 (which it does a while later) and check its slot. Exit status: failures. */
static int child(const char *name, const uint8_t token[SHM_ARENA_TOKEN_BYTES], int r)
{
    char err[256];
    shm_arena_t *a = NULL;
    if (shm_arena_open(name, NRANKS, SLOT, token, &a, err, sizeof(err)) != CHORUS_SUCCESS) return 100;
    int bad = 0;
    uint8_t tag[SHM_ARENA_TAG_BYTES], probe[SHM_ARENA_TOKEN_BYTES];
    memcpy(probe, token, sizeof(probe));
    shm_arena_set_self(a, r, probe);
    char *slot = shm_arena_slot(a, r, 1);
    snprintf(slot, 16, "rank %d", r & 0xff);
    tag_of(tag, 7);
    shm_arena_publish(a, r, 1, tag, 0, 16);
    for (int q = 0; q < NRANKS; q++) {
        while (!shm_arena_reached(a, q, 1)) shm_arena_sleep(a, q, 1, 1000);
        char want[16];
        snprintf(want, sizeof(want), "rank %d", q & 0xff);
        bad += strcmp(shm_arena_data(a, q, 1), want) != 0;
        bad += memcmp(shm_arena_tag(a, q, 1), tag, sizeof(tag)) != 0;
        bad += q != r && single_copy && !shm_arena_can_copy(a, q, err, sizeof(err));
    }
    tag_of(tag, 9);
    shm_arena_publish(a, r, 2, tag, 0, 0);
    if (!shm_arena_reached(a, 0, 2)) shm_arena_sleep(a, 0, 2, 20000); /* one sleep: a lost wake-up fails */
    bad += !shm_arena_reached(a, 0, 2);
    const char *big = shm_arena_data(a, 0, 2);
    for (int i = 0; i < SLOT; i++) bad += big[i] != (char)(i % 251);
    shm_arena_close(a);
    return bad;
}

/* CHORUS_SHM_SLOT_SIZE=auto: the L2, within 256K..4M, the arena's slots in all kept to 16M; at most 512K
 * where ranks outnumber the cores more than twice over (0 cores: not known, no such bound). */
static void check_auto_slot(void)
{
    const size_t K = 1024, M = K * K;
    const struct {
        size_t l2;
        int nranks, cores;
        size_t slot;
    } cases[] = {{M, 2, 2, M},           {M, 8, 8, M},           {M, 16, 16, 512 * K},    {M, 64, 64, 256 * K},
                 {M, 4096, 0, 256 * K},  {0, 2, 2, 256 * K},     {128 * K, 2, 2, 256 * K}, {512 * K, 4, 4, 512 * K},
                 {2 * M, 4, 4, 2 * M},   {2 * M, 8, 8, M},       {32 * M, 2, 2, 4 * M},    {1280 * K, 2, 2, 1280 * K},
                 {1280 * K, 8, 8, 640 * K}, {M, 1, 1, M},        {M, 4, 2, M},             {M, 5, 2, 512 * K},
                 {M, 8, 2, 512 * K},     {M, 8, 0, M},           {M, 16, 2, 512 * K},     {M, 32, 2, 256 * K},
                 {128 * K, 8, 2, 256 * K}, {4 * M, 8, 2, 512 * K}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t got = shm_arena_auto_slot_bytes(cases[i].l2, cases[i].nranks, cases[i].cores);
        TEST_ASSERT(got == cases[i].slot, "auto slot for L2 %zu on %d ranks, %d cores: %zu, expected %zu",
                    cases[i].l2, cases[i].nranks, cases[i].cores, got, cases[i].slot);
    }
}

/* The ring of stamps, on rank 1's (its process gone): inline phases keep their data and tags until the
 * phase that reuses their stamp, and a tag copy of a rewritten stamp fails instead of mixing two tags. */
static void check_stamps(shm_arena_t *a)
{
    uint32_t k = shm_arena_stamps(a), first = 3;
    TEST_ASSERT(k >= 2 && (k & (k - 1)) == 0, "stamps per rank a power of two: %u", k);
    TEST_ASSERT(shm_arena_map_bytes(NRANKS, SLOT) >= 2 * NRANKS * (size_t)SLOT + (size_t)NRANKS * k * 128,
                "the map holds slots and stamps");
    uint8_t data[SHM_ARENA_INLINE_BYTES], tag[SHM_ARENA_TAG_BYTES], copy[SHM_ARENA_TAG_BYTES];
    for (uint32_t ph = first; ph <= first + k; ph++) {
        size_t bytes = ph % (SHM_ARENA_INLINE_BYTES + 1);
        for (size_t i = 0; i < bytes; i++) data[i] = (uint8_t)(ph + i);
        tag_of(tag, (int)(ph & 0xff));
        shm_arena_publish_inline(a, 1, ph, tag, data, bytes);
        TEST_ASSERT(shm_arena_reached(a, 1, ph) && shm_arena_passed(a, 1, ph) && shm_arena_phase(a, 1) == ph,
                    "phase %u published", ph);
        TEST_ASSERT(memcmp(shm_arena_data(a, 1, ph), data, bytes) == 0, "phase %u: %zu bytes inline", ph, bytes);
        TEST_ASSERT(shm_arena_tag_copy(a, 1, ph, copy) && memcmp(copy, tag, sizeof(tag)) == 0, "phase %u's tag", ph);
    }
    TEST_ASSERT(!shm_arena_reached(a, 1, first) && !shm_arena_tag_copy(a, 1, first, copy),
                "phase %u's stamp was reused by phase %u", first, first + k);
    TEST_ASSERT(shm_arena_reached(a, 1, first + 1) && shm_arena_passed(a, 1, first) &&
                    !shm_arena_passed(a, 1, first + k + 1),
                "the phase after it still stamped; passed compares with the last");
    /* Data published from an offset into the slot: read there, or out of the stamp where it fits one. */
    size_t at = shm_arena_slot_bytes(a) / 2, large = SHM_ARENA_LINE_BYTES + 100;
    for (uint32_t ph = first + k + 1; ph <= first + k + 2; ph++) {
        char *slot = shm_arena_slot(a, 1, ph);
        size_t bytes = ph == first + k + 1 ? large : SHM_ARENA_LINE_BYTES;
        for (size_t i = 0; i < bytes; i++) slot[at + i] = (char)(ph * 3 + i);
        shm_arena_publish(a, 1, ph, tag, at, bytes);
        const char *got = shm_arena_data(a, 1, ph);
        TEST_ASSERT(memcmp(got, slot + at, bytes) == 0 && (bytes == large ? got == slot + at : got != slot + at),
                    "phase %u: %zu bytes from offset %zu, %s", ph, bytes, at, bytes == large ? "slot" : "inline");
    }
}

/* Mappings of chorus_mem_alloc regions in this process (their memfds' name), from /proc/self/maps. */
static int region_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof(line), f)) n += strstr(line, "memfd:chorus-buffer") != NULL;
    if (f) fclose(f);
    return n;
}

static void fill(uint8_t *p, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 7 + (size_t)seed);
}

static int matches(const uint8_t *p, size_t n, size_t from, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)((from + i) * 7 + (size_t)seed)) return 0;
    return 1;
}

/* Rank 0 (this process) shares regions and reads them back as its own peer would: the first read maps
 * the region (one more mapping of its memfd), later ones reuse it; a region freed and replaced at its
 * address by memory of another kind must be read from that memory, not the old mapping; at most 8 of a
 * rank's regions stay mapped. */
static void check_shared_regions(shm_arena_t *a)
{
    enum { BYTES = 3 * 4096 + 100 };
    uint8_t seen[BYTES];
    void *buf;
    TEST_ASSERT(shm_region_alloc(BYTES, &buf) == 0, "region of %d bytes", BYTES);
    if (!buf) return;
    fill(buf, BYTES, 1);
    int before = region_mappings();
    shm_arena_share(a, 0, (uint8_t *)buf + 100, 5000);
    TEST_ASSERT(shm_arena_read(a, 0, (uint64_t)(uintptr_t)buf + 100, seen, 5000, 0) == 0 &&
                    matches(seen, 5000, 100, 1), "a read out of a shared region");
    TEST_ASSERT(region_mappings() == before + 1, "the first read maps the region (%d mappings, %d before)",
                region_mappings(), before);
    fill(buf, BYTES, 2); /* the mapping sees the owner's writes */
    TEST_ASSERT(shm_arena_read(a, 0, (uint64_t)(uintptr_t)buf, seen, BYTES, 1) == 0 && matches(seen, BYTES, 0, 2) &&
                    region_mappings() == before + 1, "a second read, through the same mapping");
    shm_region_t r;
    TEST_ASSERT(shm_region_find((uint64_t)(uintptr_t)buf + 10, 10, &r) && r.base == (uint64_t)(uintptr_t)buf &&
                    !shm_region_find((uint64_t)(uintptr_t)buf + 10, r.bytes, &r), "region lookups by range");
    TEST_ASSERT(shm_region_free((uint8_t *)buf + 1) == EINVAL, "free inside a region");
    TEST_ASSERT(shm_region_free(buf) == 0, "free");
    /* Memory of another kind where the region was. */
    uint8_t *heap = mmap(buf, BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    TEST_ASSERT(heap == buf, "anonymous memory at the freed region's address");
    if (heap == buf) {
        fill(heap, BYTES, 3);
        shm_arena_share(a, 0, heap, BYTES);
        TEST_ASSERT(!single_copy || (shm_arena_read(a, 0, (uint64_t)(uintptr_t)heap, seen, BYTES, 0) == 0 &&
                                     matches(seen, BYTES, 0, 3)),
                    "the new memory is read, not the freed region's pages");
        munmap(heap, BYTES);
    }
    void *many[10];
    for (int i = 0; i < 10; i++) {
        TEST_ASSERT(shm_region_alloc(4096, &many[i]) == 0, "region %d", i);
        fill(many[i], 4096, 10 + i);
        shm_arena_share(a, 0, many[i], 4096);
        TEST_ASSERT(shm_arena_read(a, 0, (uint64_t)(uintptr_t)many[i], seen, 4096, 0) == 0 &&
                        matches(seen, 4096, 0, 10 + i), "read of region %d", i);
    }
    TEST_ASSERT(region_mappings() == 10 + 8, "8 of a rank's regions mapped (%d mappings)",
                region_mappings());
    for (int i = 0; i < 10; i++) shm_region_free(many[i]);
}

int main(void)
{
    test_set_timeout(60);
    check_auto_slot();
    char name[64], err[256];
    snprintf(name, sizeof(name), "/chorus-test-arena-%d", (int)getpid());
    uint8_t token[SHM_ARENA_TOKEN_BYTES], tag[SHM_ARENA_TAG_BYTES];
    shm_arena_t *a = NULL;
    TEST_ASSERT(shm_arena_create(name, NRANKS, SLOT, token, &a, err, sizeof(err)) == CHORUS_SUCCESS, "create: %s",
                err);
    if (!a) return test_report();
    TEST_ASSERT(shm_arena_slot_bytes(a) >= SLOT && shm_arena_slot_bytes(a) % 4096 == 0, "slot rounded to pages");
    check_refusals(name, token);
    uint8_t self[SHM_ARENA_TOKEN_BYTES];
    shm_arena_set_self(a, 0, token);
    single_copy = shm_arena_read(a, 0, (uint64_t)(uintptr_t)token, self, sizeof(self), 0) == 0;
    if (!single_copy) printf("process_vm_readv is not permitted here: single-copy checks skipped\n");
    pid_t kids[NRANKS];
    for (int r = 1; r < NRANKS; r++)
        if ((kids[r] = fork()) == 0) _exit(child(name, token, r));
    /* Rank 0, in this process. */
    uint8_t probe[SHM_ARENA_TOKEN_BYTES];
    memcpy(probe, token, sizeof(probe));
    shm_arena_set_self(a, 0, probe);
    strcpy(shm_arena_slot(a, 0, 1), "rank 0");
    tag_of(tag, 7);
    shm_arena_publish(a, 0, 1, tag, 0, 16);
    for (int q = 1; q < NRANKS; q++) {
        while (!shm_arena_reached(a, q, 2)) shm_arena_sleep(a, q, 2, 1000);
        TEST_ASSERT(!single_copy || shm_arena_can_copy(a, q, err, sizeof(err)),
                    "single-copy read and write of rank %d: %s", q, err);
        uint8_t seen[SHM_ARENA_TAG_BYTES];
        tag_of(seen, 9);
        TEST_ASSERT(memcmp(shm_arena_tag(a, q, 2), seen, sizeof(seen)) == 0, "rank %d's phase-2 tag", q);
    }
    shm_arena_unlink(name); /* everyone has mapped it */
    TEST_ASSERT(!name_exists(name), "the arena is unlinked");
    /* The children sleep on phase 2 now: a publication far larger than a stamp must wake them. */
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    char *slot = shm_arena_slot(a, 0, 2);
    for (int i = 0; i < SLOT; i++) slot[i] = (char)(i % 251);
    tag_of(tag, 9);
    shm_arena_publish(a, 0, 2, tag, 0, SLOT);
    for (int r = 1; r < NRANKS; r++) {
        int status = 0;
        waitpid(kids[r], &status, 0);
        TEST_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d: status %#x (failures or 100: no open)",
                    r, status);
    }
    TEST_ASSERT(!single_copy || shm_arena_read(a, 1, (uint64_t)(uintptr_t)probe, tag, 4, 0) == ESRCH,
                "a gone rank: ESRCH");
    check_stamps(a);
    shm_arena_set_self(a, 0, probe);
    check_shared_regions(a);
    shm_arena_close(a);
    TEST_ASSERT(region_mappings() == 0, "closing the arena unmaps the regions it mapped (%d left)", region_mappings());
    return test_report();
}
