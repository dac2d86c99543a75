/* The data path behind algo/prims.h. Only the core (which sets it up per communicator and per operation)
 * and prims.c see this; algorithms see prims_t as opaque. */
#ifndef CHORUS_PRIMS_IMPL_H
#define CHORUS_PRIMS_IMPL_H

#include <stdint.h>

#include "algo/prims.h"
#include "progress/progress.h"
#include "transport/shm/arena.h"
#include "util/copy.h"

#define PRIMS_HOST_BYTES 64
/* Collective fingerprints kept for error messages (prims_fail_mismatch). */
#define PRIMS_FP_HISTORY 8

/* What every rank must agree an operation is; published with each direct phase and compared. */
typedef struct prims_fingerprint {
    uint32_t coll; /* coll_kind_t; COLL_COUNT for point to point */
    uint32_t dtype;
    uint32_t op;
    int32_t root;
    uint64_t count;
    uint64_t seq;
} prims_fingerprint_t;
_Static_assert(sizeof(prims_fingerprint_t) == SHM_ARENA_TAG_BYTES, "a fingerprint is an arena tag");
_Static_assert(sizeof(prims_fingerprint_t) == TRANSPORT_CHECK_BYTES, "a fingerprint is a frame's check bytes");

/* Why this rank's operation failed, for its peers: comm_op_end sends it on every connection as the
 * transports' farewell (transport.h), and a peer that meets it where it expected a message fails with it
 * and passes it on, so that every rank names the first cause, not the rank next to it that gave up. */
typedef struct prims_why {
    int32_t res;     /* CHORUS_SUCCESS: nothing failed */
    int32_t culprit; /* the rank to blame (died, stuck, or called differently); -1: none */
    int32_t finder;  /* the rank that found it */
    uint32_t version;
    prims_fingerprint_t finder_fp, culprit_fp; /* a mismatch: what each of the two called */
} prims_why_t;
_Static_assert(sizeof(prims_why_t) <= TRANSPORT_NOTICE_BYTES, "a why is a farewell's payload");

struct prims {
    int rank;
    int nranks;
    transport_conn_t **conns; /* by rank; NULL for this rank */
    const char (*hosts)[PRIMS_HOST_BYTES]; /* by rank, for error messages */
    const int *host_of;                    /* by rank: its host (prims_host_of) */
    progress_engine_t *engine;
    size_t chunk_bytes;
    size_t cache_share; /* the host's last-level cache over its ranks, for copy_streams (0: not known) */
    /* The operation in progress (set by the core before it runs an algorithm). */
    int64_t deadline_ns;
    uint32_t tag;
    const char *op_name;
    uint64_t op_seq;
    prims_fingerprint_t fp;
    /* The last collectives' fingerprints, collective #s at s % PRIMS_FP_HISTORY (set by the core). */
    prims_fingerprint_t fp_past[PRIMS_FP_HISTORY];
    /* Read by flight-recorder dumps on other threads while the operation runs: set only through
     * prims_set_step and prims_set_waiting_on. */
    int step; /* exchanges so far in this operation, for error messages */
    int waiting_on; /* the peer an idle exchange waits for (-1: none yet), for the flight recorder */
    /* Direct access (NULL arena: none). */
    shm_arena_t *arena;
    uint32_t phase; /* the last phase this rank began */
    size_t direct_offset; /* where in its slot this rank writes that phase (prims_direct_begin_placed) */
    int direct_spread;    /* each rank of the host has a core of its own: phases go round the slots */
    const void **direct_slots; /* nranks entries, for prims_direct_wait_all */
    uint32_t *direct_seen;     /* by rank: the last phase seen published and fingerprint-checked */
    uint32_t *direct_known;    /* by rank: a phase it has published (not checked: prims_direct_begin_inline) */
    int single_copy;           /* every rank can read every other's memory (process_vm_readv) */
    copy_shared_t slot_copy[COPY_SHARED_CLASSES]; /* how this rank's copies into its slots went lately, per
                                                   * size class (prims_copy_slot) */
    int slots_streaming; /* the latest such copy's class chose streamed stores (prims_slots_streaming) */
    uint8_t arena_probe[SHM_ARENA_TOKEN_BYTES]; /* the arena's token, read by peers to prove single copy */
    /* Scratch, grown on demand, freed with the communicator. */
    void *scratch[2];
    size_t scratch_bytes[2];
    /* Where failures are described: the communicator's last-error buffer; why, for the peers. */
    char *err;
    size_t errlen;
    prims_why_t why;
};

/* Where the operation is, as relaxed atomic stores (a plain store on the hardware): a dump may read them
 * at any moment (recorder.c). */
static inline void prims_set_step(prims_t *p, int step) { __atomic_store_n(&p->step, step, __ATOMIC_RELAXED); }
static inline void prims_set_waiting_on(prims_t *p, int peer)
{
    __atomic_store_n(&p->waiting_on, peer, __ATOMIC_RELAXED);
}

void prims_fini(prims_t *p);
/* "host pid N" of a peer, for error messages. */
const char *prims_host(const prims_t *p, int peer);
/* Describe in the error buffer, log, and return res: the engine, watching every connection while it
 * waited, saw the one to `failed` break (prims_fail_conn); a wait on peer timed out or was aborted,
 * peer being expected to do `awaited` ("send", "receive", ...) (prims_fail_wait). */
chorus_result_t prims_fail_conn(prims_t *p, chorus_result_t res, int failed);
chorus_result_t prims_fail_wait(prims_t *p, chorus_result_t res, int peer, const char *awaited);
/* A peer's fingerprint differs from this rank's: describe every field that differs (and both values) in
 * the error buffer, log it, and return CHORUS_ERR_MISMATCH. */
chorus_result_t prims_fail_mismatch(prims_t *p, int peer, const prims_fingerprint_t *mine,
                                    const prims_fingerprint_t *theirs);
/* Remember why this operation failed, for the peers (prims_farewell); the fail functions above do. */
void prims_blame(prims_t *p, chorus_result_t res, int culprit, int finder);
/* The farewell for this rank's peers after its operation failed (out: TRANSPORT_NOTICE_BYTES); 0 if
 * nothing failed in the data path (then there is nothing to tell). */
int prims_farewell(const prims_t *p, uint8_t *out);

#endif
