/*
 * Streams (chorus_stream_t): an ordered queue of checked calls and the thread that runs them, so that a
 * caller computes while its communication runs (the stream argument of NCCL and HCCL, on a CPU).
 *
 * api.c checks a call on the caller's thread and hands it here with a ticket in its communicator's order
 * of operations (comm_turn_take, in issue order). The stream's thread takes its calls in the order they
 * were queued, waits for each one's turn on its communicator (the operations issued before it on that
 * communicator, on other streams or on none, are done) and runs it. Queue order and turn order both
 * follow the order of issue, so no two streams can wait on each other in a cycle.
 *
 * A call that fails leaves its detail here, copied from its communicator before the turn passes on; the
 * next synchronize (or query) returns the first such failure and clears it. Calls after a failed one still
 * run: they may be on other communicators whose peers expect them, and on the broken one they fail at once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/stream.h"
#include "util/log.h"
#include "util/thread.h"
#include "util/util.h"

#define STREAM_MAGIC 0x6d727453u /* "Strm" */
#define STREAM_ERROR_BYTES (COMM_ERROR_BYTES + 64)

typedef struct stream_op {
    struct stream_op *next;
    chorus_comm_t comm;
    uint64_t ticket;
    const char *name;
    comm_call_t call;
} stream_op_t;

struct chorus_stream {
    uint32_t magic;
    pthread_mutex_t lock;
    pthread_cond_t work_cv; /* the thread waits here for calls */
    pthread_cond_t done_cv; /* synchronize waits here for the thread */
    stream_op_t *head, *tail;
    uint64_t queued, finished;
    uint64_t wake_at; /* the smallest count of finished calls a synchronize waits for; UINT64_MAX: none */
    int stopping;
    chorus_result_t error;               /* the first failure not yet reported */
    char error_text[STREAM_ERROR_BYTES]; /* its detail (under lock) */
    char reported[STREAM_ERROR_BYTES];   /* the detail of the failure last reported: the caller's */
    pthread_t thread;
};

static void *stream_main(void *arg)
{
    chorus_stream_t s = arg;
    char detail[STREAM_ERROR_BYTES];
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->work_cv, &s->lock);
        stream_op_t *op = s->head;
        if (!op) break;
        pthread_mutex_unlock(&s->lock);

        chorus_comm_t comm = op->comm;
        comm_turn_wait(comm, op->ticket);
        log_set_rank(comm->rank);
        chorus_result_t res = api_call_run(comm, &op->call);
        if (res != CHORUS_SUCCESS)
            snprintf(detail, sizeof(detail), "%s queued on rank %d: %s", op->name, comm->rank,
                     chorus_comm_last_error(comm));
        comm_turn_end(comm); /* the communicator is not ours to touch after this */

        pthread_mutex_lock(&s->lock);
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        if (res != CHORUS_SUCCESS && s->error == CHORUS_SUCCESS) {
            s->error = res;
            memcpy(s->error_text, detail, sizeof(detail));
        }
        /* Waking the caller at every call would cost it a context switch per call on a busy core. */
        if (++s->finished >= s->wake_at) {
            s->wake_at = UINT64_MAX;
            pthread_cond_broadcast(&s->done_cv);
        }
        free(op);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

chorus_result_t chorus_stream_create(chorus_stream_t *stream_p)
{
    if (!stream_p) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "stream_create: stream_p is NULL");
    chorus_stream_t s = calloc(1, sizeof(*s));
    if (!s) return comm_error(NULL, CHORUS_ERR_NO_MEMORY, "stream_create: out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    s->wake_at = UINT64_MAX;
    int err = thread_start_quiet(&s->thread, NULL, stream_main, s);
    if (err) {
        pthread_cond_destroy(&s->done_cv);
        pthread_cond_destroy(&s->work_cv);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return comm_error(NULL, CHORUS_ERR_SYSTEM, "stream_create: cannot start the stream's thread: %s",
                          strerror(err));
    }
    pthread_setname_np(s->thread, "chorus-stream");
    s->magic = STREAM_MAGIC;
    LOG_DEBUG(LOG_SUB_COLL, "stream %p created", (void *)s);
    *stream_p = s;
    return CHORUS_SUCCESS;
}

chorus_result_t stream_check(chorus_comm_t comm, chorus_stream_t s, const char *name)
{
    if (s && s->magic == STREAM_MAGIC) return CHORUS_SUCCESS;
    return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT,
                      "%s: stream %p is not a stream chorus_stream_create made (or it was destroyed)", name, (void *)s);
}

chorus_result_t stream_enqueue(chorus_stream_t s, chorus_comm_t comm, const comm_call_t *c, const char *name)
{
    stream_op_t *op = malloc(sizeof(*op));
    if (!op) return comm_error(comm, CHORUS_ERR_NO_MEMORY, "%s: out of memory queueing it on its stream", name);
    comm->streamed = 1;
    *op = (stream_op_t){.comm = comm, .name = name, .call = *c};
    pthread_mutex_lock(&s->lock);
    op->ticket = comm_turn_take(comm); /* under the lock: on this stream, tickets follow queue order */
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->queued++;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->lock);
    return CHORUS_SUCCESS;
}

/* Under the lock: the failure not yet reported (now reported), or CHORUS_SUCCESS. */
static chorus_result_t stream_report(chorus_stream_t s)
{
    chorus_result_t res = s->error;
    memcpy(s->reported, s->error_text, sizeof(s->reported));
    s->error = CHORUS_SUCCESS;
    s->error_text[0] = 0;
    return res;
}

chorus_result_t chorus_stream_synchronize(chorus_stream_t s)
{
    CHECK(stream_check(NULL, s, "stream_synchronize"));
    pthread_mutex_lock(&s->lock);
    uint64_t target = s->queued;
    while (s->finished < target) {
        if (target < s->wake_at) s->wake_at = target;
        pthread_cond_wait(&s->done_cv, &s->lock);
    }
    chorus_result_t res = stream_report(s);
    pthread_mutex_unlock(&s->lock);
    return res;
}

chorus_result_t chorus_stream_query(chorus_stream_t s)
{
    CHECK(stream_check(NULL, s, "stream_query"));
    pthread_mutex_lock(&s->lock);
    chorus_result_t res = s->finished < s->queued ? CHORUS_IN_PROGRESS : stream_report(s);
    pthread_mutex_unlock(&s->lock);
    return res;
}

const char *chorus_stream_last_error(chorus_stream_t s) { return s && s->magic == STREAM_MAGIC ? s->reported : ""; }

chorus_result_t chorus_stream_destroy(chorus_stream_t s)
{
    CHECK(stream_check(NULL, s, "stream_destroy"));
    chorus_result_t res = chorus_stream_synchronize(s);
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    LOG_DEBUG(LOG_SUB_COLL, "stream %p destroyed", (void *)s);
    s->magic = 0;
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return res;
}
