/*
 * The progress engine: every wait in Chorus goes through progress_run().
 *
 * An operation is a step function that advances what it can without blocking and says whether it is
 * done, moved something, or is idle (waiting on the network). When idle, the engine spins a little (a
 * peer's data is often microseconds away) and then blocks in poll() on the descriptors of the
 * connections involved and on the engine's wake descriptor. Every wait has a deadline and checks the
 * abort flag, which another thread may raise at any time (progress_abort), waking a blocked waiter at once.
 * When ranks outnumber cores, spinning yields the processor each turn: a rank that spins without
 * yielding starves the very peer it waits for (4 ranks on 2 cores: 2 ms per tiny AllReduce instead of
 * 0.17 ms). Otherwise it spins flat out, which is what small-message latency needs.
 *
 * The loop, each turn:  step  ->  done? return  ->  moved? go again  ->  spin budget left? go again
 *                       ->  aborted? ABORTED  ->  past the deadline? TIMEOUT  ->  poll(fds, wake, <=100 ms)
 */
#ifndef CHORUS_PROGRESS_H
#define CHORUS_PROGRESS_H

#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>

#include "transport/transport.h"

typedef enum { PROGRESS_IDLE = 0, PROGRESS_MOVED = 1, PROGRESS_DONE = 2 } progress_status_t;

/* Advance an operation. Returns SUCCESS with *status set, or an error that ends the run. */
typedef chorus_result_t (*progress_step_fn)(void *arg, progress_status_t *status);

typedef struct progress_engine {
    int wake_fd; /* eventfd written by progress_abort() */
    atomic_int aborted;
    int64_t spin_ns;      /* how long an idle run polls before it blocks */
    int yield;            /* yield the processor on each spin turn (set when ranks outnumber cores) */
    int max_conns;        /* poll set capacity: every connection plus the wake descriptor */
    struct pollfd *fds;
    int *owner;           /* index into the run's conns of each polled descriptor */
} progress_engine_t;

/* max_conns: the most connections a run will pass (the communicator's size). */
chorus_result_t progress_engine_init(progress_engine_t *pe, int64_t spin_us, int max_conns);
void progress_engine_fini(progress_engine_t *pe);
/* Callable from any thread, any number of times: every current and future run returns ABORTED. */
void progress_abort(progress_engine_t *pe);

/* Run `step` until it is done, fails, the deadline (monotonic ns; INT64_MAX for none) passes (TIMEOUT) or
 * the engine is aborted (ABORTED). conns are all the connections of the communicator (NULL entries
 * allowed): while blocked the engine watches every one, not only those the step uses, so that a peer that
 * dies anywhere fails the wait at once instead of leaving it to the deadline. When a connection fails
 * that way, the step gets one more turn, so that it can report the failure from its own transfers (which
 * know more: what the peer sent where something else was expected); if that turn does not fail, the
 * connection's index is stored in *failed_p (else -1) and its error returned. */
chorus_result_t progress_run(progress_engine_t *pe, progress_step_fn step, void *arg, transport_conn_t *const *conns,
                             int nconns, int64_t deadline_ns, int *failed_p);

/* Without blocking: let every connection with something to report (bytes, or its peer's close) make
 * progress, as a blocked run does after poll(). Returns the first failure, its index in *failed_p (else
 * -1): how a rank that no longer waits on a peer still learns that it died. */
chorus_result_t progress_check(progress_engine_t *pe, transport_conn_t *const *conns, int nconns, int *failed_p);

/* How a run sleeps that waits on shared memory, which no descriptor signals (e.g. a futex): it returns
 * when woken, or after at most timeout_ms. */
typedef void (*progress_sleep_fn)(void *arg, int timeout_ms);

/* progress_run, but an idle run past its spin sleeps in `sleep` (given `arg` too), in slices of at most
 * PROGRESS_SLEEP_SLICE_MS; between slices it checks every connection without blocking, so that a dead
 * peer, the deadline and an abort are still noticed within a slice. */
#define PROGRESS_SLEEP_SLICE_MS 20
chorus_result_t progress_run_sleep(progress_engine_t *pe, progress_step_fn step, progress_sleep_fn sleep, void *arg,
                                   transport_conn_t *const *conns, int nconns, int64_t deadline_ns, int *failed_p);

#endif
