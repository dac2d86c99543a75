/*
 * The flight recorder: the last N operations of a communicator, kept so that a hang or a divergence can be
 * explained after the fact (docs/recorder.md has the dump format and chorus-trace).
 *
 * Recording is a fixed ring of plain structs filled by the thread that runs the operation: no allocation,
 * no formatting, no lock; a few stores, and one coarse clock read at the end (the start time is the
 * caller's): stamps are to the kernel's tick, enough to tell a hang's story, and cheap. All formatting
 * happens in recorder_write(), which may run on another thread (chorus_comm_abort, the SIGUSR1 helper) while an
 * operation is being recorded: it then copies entries without synchronisation, so the entry being
 * written may come out torn, but every field is a number or a pointer to a static string, so a torn
 * entry can print wrong values and never crash.
 */
#ifndef CHORUS_RECORDER_H
#define CHORUS_RECORDER_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "algo/algo.h"
#include "util/util.h"

/* Kinds beyond the collectives of coll_kind_t. */
#define REC_SEND COLL_COUNT
#define REC_RECV (COLL_COUNT + 1)

typedef enum { REC_RUNNING = 0, REC_DONE = 1, REC_FAILED = 2 } rec_state_t;

typedef struct rec_entry {
    uint64_t op;    /* index among this communicator's operations */
    uint64_t seq;   /* collective sequence number, or the message number of the (sender, receiver) pair */
    uint64_t count;
    int64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
    const char *algo;         /* static; NULL when no algorithm ran (one rank, count 0, send, recv) */
    int32_t kind;             /* coll_kind_t, REC_SEND or REC_RECV */
    int32_t root;             /* the root of broadcast and reduce, the peer of send and recv, else -1 */
    int32_t step, wait;       /* of a failed operation: the exchange it was in and the peer it waited on */
    int32_t result;
    int8_t dtype, redop, state;
} rec_entry_t;

typedef struct recorder {
    rec_entry_t *ring;
    uint64_t size;
    uint64_t next;             /* the slot of the next operation: recorded % size */
    rec_entry_t *cur;          /* the entry of the operation in progress */
    _Atomic uint64_t recorded; /* operations begun so far: publishes entries to a dumping thread */
    uint64_t tag;              /* the communicator's public tag, to group the dumps of one communicator */
    char dump_path[512];       /* where automatic dumps go */
    struct chorus_comm *next_signalled; /* the list the SIGUSR1 helper dumps */
} recorder_t;

/* start_ns: the caller's clock reading (it has one for the deadline). */
static inline void recorder_begin(recorder_t *r, int64_t start_ns, int kind, uint64_t seq, size_t count,
                                  chorus_datatype_t dtype, chorus_redop_t redop, int root)
{
    if (!r->size) return;
    uint64_t n = atomic_load_explicit(&r->recorded, memory_order_relaxed);
    rec_entry_t *e = &r->ring[r->next];
    r->next = r->next + 1 == r->size ? 0 : r->next + 1; /* no division on this path */
    *e = (rec_entry_t){.op = n, .seq = seq, .count = count, .start_ns = start_ns, .kind = kind, .root = root,
                       .step = -1, .wait = -1, .dtype = (int8_t)dtype, .redop = (int8_t)redop};
    r->cur = e;
    atomic_store_explicit(&r->recorded, n + 1, memory_order_release);
}

static inline void recorder_algo(recorder_t *r, const char *algo)
{
    if (r->size) r->cur->algo = algo;
}

/* step and wait: where the operation was when it ended (kept only if it failed). */
static inline void recorder_end(recorder_t *r, chorus_result_t res, int step, int wait)
{
    if (!r->size) return;
    rec_entry_t *e = r->cur;
    e->end_ns = time_coarse_ns();
    e->result = res;
    if (res != CHORUS_SUCCESS) {
        e->step = step;
        e->wait = wait;
    }
    e->state = res == CHORUS_SUCCESS ? REC_DONE : REC_FAILED;
}

/* Set up comm->rec from the knobs (id: the communicator's unique id, for its tag); register the
 * communicator for SIGUSR1 dumps when CHORUS_DUMP_ON_SIGNAL is set. recorder_fini undoes it (safe on a
 * communicator whose init failed half way). */
chorus_result_t recorder_init(struct chorus_comm *comm, const chorus_unique_id_t *id);
void recorder_fini(struct chorus_comm *comm);

/* Write the dump (docs/recorder.md) to f. reason: one word. Callable from any thread. */
void recorder_write(struct chorus_comm *comm, FILE *f, const char *reason);

/* The communicator just broke with res (a timeout, an abort, a mismatch, a dead peer): dump it to the dump
 * directory, and say where in a warning. */
void recorder_on_failure(struct chorus_comm *comm, chorus_result_t res);

#endif
