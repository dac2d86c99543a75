/*
 * The flight recorder: the last N operations of a communicator, kept so that a hang or a divergence can be
 * explained after the fact (docs/recorder.md has the dump format and chorus-trace).
 *
 * Recording is a fixed ring of plain structs filled by the thread that runs the operation: no allocation,
 * no formatting, no lock; a few stores, and one coarse clock read at the end (the start time is the
 * caller's): stamps are to the kernel's tick, enough to tell a hang's story, and cheap. All formatting
 * happens in recorder_write(), which may run on another thread (chorus_comm_abort, the SIGUSR1 helper,
 * chorus_comm_dump) while an operation is being recorded. Every field of an entry is therefore stored and
 * loaded as a relaxed atomic (REC_STORE, REC_LOAD: plain moves on the hardware, no fence): the entry being
 * written may come out mixed, some fields old and some new, but every field is a number or a pointer to a
 * static string read whole, so a mixed entry can print wrong values and never crash.
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

/* An entry's fields, as the recording thread writes them and a dumping thread reads them (see above). */
#define REC_STORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)
#define REC_LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* start_ns: the caller's clock reading (it has one for the deadline). */
static inline void recorder_begin(recorder_t *r, int64_t start_ns, int kind, uint64_t seq, size_t count,
                                  chorus_datatype_t dtype, chorus_redop_t redop, int root)
{
    if (!r->size) return;
    uint64_t n = atomic_load_explicit(&r->recorded, memory_order_relaxed);
    rec_entry_t *e = &r->ring[r->next];
    r->next = r->next + 1 == r->size ? 0 : r->next + 1; /* no division on this path */
    REC_STORE(e->op, n);
    REC_STORE(e->seq, seq);
    REC_STORE(e->count, (uint64_t)count);
    REC_STORE(e->start_ns, start_ns);
    REC_STORE(e->end_ns, (int64_t)0);
    REC_STORE(e->algo, (const char *)NULL);
    REC_STORE(e->kind, (int32_t)kind);
    REC_STORE(e->root, (int32_t)root);
    REC_STORE(e->step, (int32_t)-1);
    REC_STORE(e->wait, (int32_t)-1);
    REC_STORE(e->result, (int32_t)CHORUS_SUCCESS);
    REC_STORE(e->dtype, (int8_t)dtype);
    REC_STORE(e->redop, (int8_t)redop);
    REC_STORE(e->state, (int8_t)REC_RUNNING);
    r->cur = e;
    atomic_store_explicit(&r->recorded, n + 1, memory_order_release);
}

static inline void recorder_algo(recorder_t *r, const char *algo)
{
    if (r->size) REC_STORE(r->cur->algo, algo);
}

/* step and wait: where the operation was when it ended (kept only if it failed). */
static inline void recorder_end(recorder_t *r, chorus_result_t res, int step, int wait)
{
    if (!r->size) return;
    rec_entry_t *e = r->cur;
    REC_STORE(e->end_ns, time_coarse_ns());
    REC_STORE(e->result, (int32_t)res);
    if (res != CHORUS_SUCCESS) {
        REC_STORE(e->step, (int32_t)step);
        REC_STORE(e->wait, (int32_t)wait);
    }
    REC_STORE(e->state, (int8_t)(res == CHORUS_SUCCESS ? REC_DONE : REC_FAILED));
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
