/* The communicator. Owned by core; other layers see only the parts handed to them (prims_t to algorithms,
 * connections to the progress engine). */
#ifndef CHORUS_COMM_H
#define CHORUS_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "algo/algo.h"
#include "algo/prims_impl.h"
#include "core/recorder.h"
#include "tune/tune.h"
#include "util/params.h"

#define COMM_ERROR_BYTES 1024

struct chorus_comm {
    int rank;
    int nranks;
    int nhosts;
    int nshm, ntcp;           /* peers reached through each transport */
    int shm_fallback_logged;
    int algo_fallback_logged;
    algo_shared_state_t shared; /* whether every rank's buffers were chorus_mem_alloc's (algo_for_shared_buffers) */
    chorus_params_t params;
    algo_config_t algo;       /* CHORUS_ALGO, parsed */
    transport_conn_t **conns; /* by rank; NULL for this rank */
    char (*hosts)[PRIMS_HOST_BYTES];
    int *host_of; /* by rank: its host, numbered in order of each host's lowest rank */
    progress_engine_t engine;
    prims_t prims;
    uint64_t coll_seq;     /* collectives issued so far */
    uint32_t *send_seq;    /* point-to-point messages sent to each peer */
    uint32_t *recv_seq;    /* and received from each */
    void *stage;           /* float32 staging of half-precision reductions */
    size_t stage_bytes;
    char last_error[COMM_ERROR_BYTES];
    uint64_t serial; /* unique in the process: tells this communicator from a later one at its address */
    /* Failure state, shared with chorus_comm_abort() on other threads. Every call reads sticky without the
     * lock; sticky changes, and sticky_error is written and read, only under fail_lock, so that a thread
     * that sees the error also sees all of its description (comm_set_sticky). */
    pthread_mutex_t fail_lock;
    _Atomic chorus_result_t sticky; /* the error that broke the communicator, or SUCCESS */
    atomic_int in_op;               /* 1 while an operation runs */
    char sticky_error[COMM_ERROR_BYTES];
    int64_t init_deadline_ns; /* while init runs: when CHORUS_CONNECT_TIMEOUT ends it (monotonic ns); else 0 */
    recorder_t rec; /* the flight recorder */
    tune_state_t tune; /* how calls choose their algorithm (comm_tune.c) */
    /* Turns (comm_turn_*): once an operation was queued on a stream (streamed), every operation takes a
     * ticket when issued and runs when the operations issued before it are done, so that the stream
     * threads and the caller's own thread run them one at a time, in the order they were issued. */
    int streamed; /* set and read by the issuing thread only */
    pthread_mutex_t turn_lock;
    pthread_cond_t turn_cv;
    uint64_t turns_taken, turns_done;
};

/* One operation, checked and ready to run, now or later on a stream's thread (stream.c). */
typedef enum { CALL_COLL, CALL_SEND, CALL_RECV } call_kind_t;
typedef struct comm_call {
    call_kind_t kind;
    coll_args_t a;         /* CALL_SEND, CALL_RECV: the buffer, count and datatype; root is the peer */
    size_t elem;           /* the datatype's size */
    size_t in_elems, out_elems; /* this rank's input and output elements (half-precision staging) */
    int turn;              /* a call without a stream holds its communicator's turn (comm_turn_wait) */
} comm_call_t;

/* Run a checked call on the calling thread (api.c). The caller holds the communicator's turn if it has
 * streamed. */
chorus_result_t api_call_run(chorus_comm_t comm, const comm_call_t *c);

/* A ticket in the communicator's order of operations, taken when the operation is issued. */
uint64_t comm_turn_take(chorus_comm_t comm);
/* Wait until every operation issued before the ticket's is done. Each of those is bounded by its own
 * timeout (and ended by an abort), so this wait is too. */
void comm_turn_wait(chorus_comm_t comm, uint64_t ticket);
/* The turn's operation is done: the next may run. The caller touches the communicator no more after this
 * (a chorus_comm_destroy waiting for its turn may free it at once). */
void comm_turn_end(chorus_comm_t comm);

/* While this thread checks the arguments of an operation it queues on a stream, the communicator's own
 * operations may be running on a stream's thread and writing last_error: this call's detail goes to this
 * thread's own buffer instead (as comm_side_error's), which chorus_comm_last_error shows this thread until
 * its next call on the communicator. comm_queue_checks(NULL) ends the checks. */
void comm_queue_checks(chorus_comm_t comm);

/* Operations bracket their work with these: begin refuses a broken communicator (returning its sticky
 * error), end makes a peer-caused failure sticky. */
chorus_result_t comm_op_begin(chorus_comm_t comm);
chorus_result_t comm_op_end(chorus_comm_t comm, chorus_result_t res);

/* The tuning state, once the connections and the host arena are up (comm_tune.c). cores: of this host;
 * partner: the rank rank 0 measures its link with; inside_partner: across hosts, the one it measures its
 * own host's link with (-1: none); inside_shm: that link is shared memory (as rank 0 sees it). */
chorus_result_t comm_tune_init(chorus_comm_t comm, int ranks_per_host, int partner, int inside_partner,
                               int inside_shm, int cores);

/* Record the detail of a failure (printf-style) and return res, for one-line error returns. */
chorus_result_t comm_error(chorus_comm_t comm, chorus_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for a call that may run on another thread than the communicator's operations (chorus_comm_dump):
 * its detail is kept for the calling thread, since last_error belongs to the operation that may be running. */
chorus_result_t comm_side_error(chorus_comm_t comm, chorus_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
