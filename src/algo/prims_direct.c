/* The direct-access primitives (prims.h) over the host arena: phases, waits that spin and then sleep on
 * the arena's futex while still watching every connection, and fingerprint checks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/prims_impl.h"
#include "transport/shm/region.h"
#include "util/log.h"
#include "util/util.h"

_Static_assert(PRIMS_DIRECT_INLINE_BYTES <= SHM_ARENA_INLINE_BYTES, "inline phases' data fits a stamp");

size_t prims_direct_bytes(const prims_t *p) { return p->arena ? shm_arena_slot_bytes(p->arena) : 0; }

typedef struct direct_wait {
    prims_t *p;
    int peer;
    uint32_t phase;
    int (*done)(const shm_arena_t *arena, int rank, uint32_t phase);
} direct_wait_t;

static chorus_result_t direct_wait_step(void *arg, progress_status_t *status)
{
    direct_wait_t *w = arg;
    *status = w->done(w->p->arena, w->peer, w->phase) ? PROGRESS_DONE : PROGRESS_IDLE;
    return CHORUS_SUCCESS;
}

static void direct_wait_sleep(void *arg, int timeout_ms)
{
    direct_wait_t *w = arg;
    shm_arena_sleep(w->p->arena, w->peer, w->phase, timeout_ms);
}

/* Polls of the peer's stamp before the progress engine takes over the wait: the common case, a peer a
 * fraction of a microsecond behind, then costs no clock reads. */
#define DIRECT_QUICK_POLLS 64

/* Wait until done(peer, phase): peer's stamp of phase is published (shm_arena_reached), or peer has
 * published phase or a later one (shm_arena_passed). */
static chorus_result_t direct_wait_until(prims_t *p, int peer, uint32_t phase,
                                         int (*done)(const shm_arena_t *, int, uint32_t))
{
    for (int i = 0; i < DIRECT_QUICK_POLLS; i++)
        if (done(p->arena, peer, phase)) return CHORUS_SUCCESS;
    direct_wait_t w = {p, peer, phase, done};
    prims_set_waiting_on(p, peer);
    int failed;
    chorus_result_t res = progress_run_sleep(p->engine, direct_wait_step, direct_wait_sleep, &w, p->conns, p->nranks,
                                             p->deadline_ns, &failed);
    if (res == CHORUS_SUCCESS) return res;
    if (failed >= 0) return prims_fail_conn(p, res, failed);
    if (res == CHORUS_ERR_TIMEOUT || res == CHORUS_ERR_ABORTED)
        return prims_fail_wait(p, res, peer, "publish its part in shared memory");
    return res;
}

static chorus_result_t direct_mismatch(prims_t *p, int peer, const void *mine_tag, const void *their_tag)
{
    prims_fingerprint_t mine, theirs;
    memcpy(&mine, mine_tag, sizeof(mine));
    memcpy(&theirs, their_tag, sizeof(theirs));
    return prims_fail_mismatch(p, peer, &mine, &theirs);
}

/* The peer's tag for phase (theirs: its stamp's, or a copy of it) must be this rank's. */
static chorus_result_t direct_check(prims_t *p, int peer, uint32_t phase, const void *theirs)
{
    const void *mine = shm_arena_tag(p->arena, p->rank, phase);
    return memcmp(mine, theirs, SHM_ARENA_TAG_BYTES) == 0 ? CHORUS_SUCCESS : direct_mismatch(p, peer, mine, theirs);
}

/* Wait until peer has published phase and check its fingerprint for it; remembered, so that the check
 * of a phase already seen costs nothing. If the phase before was not checked with this peer (a broadcast
 * of a root this rank did not read, or its own as the root), its tag is compared too where the peer's
 * stamp still holds it: a rank that alone took another root is found by the next rank that reads it, or
 * that it reads, in the next operation. */
static chorus_result_t direct_sync(prims_t *p, int peer, uint32_t phase)
{
    uint32_t seen = p->direct_seen[peer];
    if ((int32_t)(seen - phase) >= 0) return CHORUS_SUCCESS;
    CHECK(direct_wait_until(p, peer, phase, shm_arena_reached));
    CHECK(direct_check(p, peer, phase, shm_arena_tag(p->arena, peer, phase)));
    uint8_t before[SHM_ARENA_TAG_BYTES];
    if (seen != phase - 1 && phase != 1 && shm_arena_tag_copy(p->arena, peer, phase - 1, before))
        CHECK(direct_check(p, peer, phase - 1, before));
    p->direct_seen[peer] = phase;
    return CHORUS_SUCCESS;
}

chorus_result_t prims_direct_begin(prims_t *p, void **slot_p)
{
    uint32_t phase = p->phase + 1;
    /* This slot was last written two phases ago: every peer must have moved past reading it. The check
     * also catches a divergence that a phase waiting on only some peers (a broadcast's) let through. */
    for (int q = 0; q < p->nranks; q++)
        if (q != p->rank) CHECK(direct_sync(p, q, phase - 1));
    p->phase = phase;
    p->direct_offset = 0;
    prims_set_step(p, p->step + 1);
    *slot_p = shm_arena_slot(p->arena, p->rank, phase);
    return CHORUS_SUCCESS;
}

/* A store into a line that another core has read lately, and holds still, first takes the line back
 * from that core: on an AMD EPYC virtual machine (1 MiB of L2 per core) two processes that each copied
 * 512 KiB into a buffer the other had just read took 40 us a copy, 11 once the reader had since copied
 * 1 MiB of other data (256 KiB: 28 us against 6). A slot written every other phase is such a buffer:
 * its readers read it two phases before. So, where each rank has a core of its own, a phase's bytes
 * go round the slot, in page-aligned steps of their size, one step further each time the slot is used:
 * the lines written were last read as many uses ago as the slot has steps. Measured there, 2 ranks,
 * medians of 3 alternating runs: the direct AllGather of 64 and 256 KiB in all 2.1 and 2.2 times as fast
 * (64 KiB: 5.5 us against 2.6), the direct AllToAll of 16 to 256 KiB 1.7 to 2.0, the one-shot AllReduce
 * of 8 to 128 KiB 1.3 (docs/algorithms.md, "Going round the slot"). Below a page the lines stay: the
 * same AllGather of 2 KiB took 0.32 us going round against 0.25. Where ranks share cores, a peer on the
 * same core reads the lines out of the cache they share, which going round only makes larger (4 ranks on
 * 2 cores, the AllGather of 64 KiB: 13.3 us against 9.3). */
static size_t direct_place(const prims_t *p, size_t bytes)
{
    size_t slot = shm_arena_slot_bytes(p->arena), step = CHORUS_ROUND_UP(bytes, PRIMS_DIRECT_PLACE_MIN);
    if (!p->direct_spread || bytes < PRIMS_DIRECT_PLACE_MIN || step > slot / 2) return 0;
    return (size_t)(p->phase >> 1) % (slot / step) * step;
}

chorus_result_t prims_direct_begin_placed(prims_t *p, size_t bytes, void **slot_p)
{
    CHECK(prims_direct_begin(p, slot_p));
    p->direct_offset = direct_place(p, bytes);
    *slot_p = (char *)*slot_p + p->direct_offset;
    return CHORUS_SUCCESS;
}

chorus_result_t prims_direct_begin_inline(prims_t *p)
{
    uint32_t phase = p->phase + 1, since = phase - (shm_arena_stamps(p->arena) - 1);
    /* This phase's stamp last held phase - stamps: every peer must have published the phase after it. */
    for (int q = 0; q < p->nranks; q++) {
        if (q == p->rank || (int32_t)(p->direct_known[q] - since) >= 0) continue;
        CHECK(direct_wait_until(p, q, since, shm_arena_passed));
        p->direct_known[q] = shm_arena_phase(p->arena, q);
    }
    p->phase = phase;
    prims_set_step(p, p->step + 1);
    return CHORUS_SUCCESS;
}

void prims_direct_publish_inline(prims_t *p, const void *data, size_t bytes)
{
    shm_arena_publish_inline(p->arena, p->rank, p->phase, &p->fp, data, bytes);
}

void prims_direct_publish(prims_t *p, size_t used)
{
    shm_arena_publish(p->arena, p->rank, p->phase, &p->fp, p->direct_offset, used);
}

chorus_result_t prims_direct_wait(prims_t *p, int peer, const void **slot_p)
{
    CHECK(direct_sync(p, peer, p->phase));
    *slot_p = shm_arena_data(p->arena, peer, p->phase);
    return CHORUS_SUCCESS;
}

chorus_result_t prims_direct_wait_all(prims_t *p, const void *const **slots_p)
{
    const void **slots = p->direct_slots;
    for (int q = 0; q < p->nranks; q++) {
        if (q == p->rank)
            slots[q] = (const char *)shm_arena_slot(p->arena, q, p->phase) + p->direct_offset;
        else
            CHECK(prims_direct_wait(p, q, &slots[q]));
    }
    *slots_p = slots;
    return CHORUS_SUCCESS;
}

int prims_direct_single_copy(const prims_t *p) { return p->arena && p->single_copy; }

int prims_direct_in_shared_memory(const void *buf, size_t bytes)
{
    shm_region_t r;
    return shm_region_find((uint64_t)(uintptr_t)buf, bytes, &r);
}

chorus_result_t prims_direct_agree(prims_t *p, int mine, int *all_p)
{
    uint8_t yes = mine != 0;
    const void *const *slots;
    CHECK(prims_direct_begin_inline(p));
    prims_direct_publish_inline(p, &yes, 1);
    CHECK(prims_direct_wait_all(p, &slots));
    int all = yes;
    for (int q = 0; q < p->nranks; q++)
        if (q != p->rank) all &= *(const uint8_t *)slots[q] != 0;
    *all_p = all;
    return CHORUS_SUCCESS;
}

uint64_t prims_direct_share(prims_t *p, const void *buf, size_t bytes)
{
    shm_arena_share(p->arena, p->rank, buf, bytes);
    return (uint64_t)(uintptr_t)buf;
}

const void *prims_direct_view(prims_t *p, int peer, uint64_t addr, size_t bytes)
{
    return shm_arena_view(p->arena, peer, addr, bytes);
}

/* The error of a failed single-copy transfer with peer (errno e): a gone peer is the peer's fault. */
static chorus_result_t direct_copy_failed(prims_t *p, int peer, const char *what, size_t bytes, int e)
{
    snprintf(p->err, p->errlen, "%s #%llu phase %u: cannot %s %zu bytes of rank %d (%s): %s%s", p->op_name,
             (unsigned long long)p->op_seq, p->phase, what, bytes, peer, prims_host(p, peer), strerror(e),
             e == ESRCH ? " (the peer exited)" : "");
    LOG_WARN(LOG_SUB_COLL, "%s", p->err);
    chorus_result_t res = e == ESRCH ? CHORUS_ERR_REMOTE : CHORUS_ERR_SYSTEM;
    prims_blame(p, res, peer, p->rank);
    return res;
}

chorus_result_t prims_direct_read(prims_t *p, int peer, uint64_t addr, void *dst, size_t bytes, int out)
{
    int e = shm_arena_read(p->arena, peer, addr, dst, bytes, out && prims_stream_whole(p, bytes));
    return e ? direct_copy_failed(p, peer, "read", bytes, e) : CHORUS_SUCCESS;
}

chorus_result_t prims_direct_write(prims_t *p, int peer, uint64_t addr, const void *src, size_t bytes)
{
    int e = shm_arena_write(p->arena, peer, addr, src, bytes);
    return e ? direct_copy_failed(p, peer, "write", bytes, e) : CHORUS_SUCCESS;
}
