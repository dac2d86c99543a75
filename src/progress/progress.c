#include "progress.h"

#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/log.h"
#include "util/util.h"

/* Longest single sleep: bounds how stale a deadline check can be. */
#define PROGRESS_POLL_CAP_MS 100
/* Idle turns between clock reads: a read can cost more than a turn (a system call on some virtual
 * machines), and each one delays noticing the peer's data. */
#define PROGRESS_CLOCK_TURNS 16

chorus_result_t progress_engine_init(progress_engine_t *pe, int64_t spin_us, int max_conns)
{
    pe->fds = calloc((size_t)max_conns + 1, sizeof(*pe->fds));
    pe->owner = calloc((size_t)max_conns + 1, sizeof(*pe->owner));
    pe->max_conns = max_conns;
    if (!pe->fds || !pe->owner) return CHORUS_ERR_NO_MEMORY;
    pe->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (pe->wake_fd < 0) {
        LOG_WARN(LOG_SUB_INIT, "eventfd failed: %m");
        return CHORUS_ERR_SYSTEM;
    }
    atomic_init(&pe->aborted, 0);
    pe->spin_ns = spin_us < 0 ? 0 : spin_us * 1000;
    pe->yield = 0;
    return CHORUS_SUCCESS;
}

void progress_engine_fini(progress_engine_t *pe)
{
    if (pe->wake_fd >= 0) close(pe->wake_fd);
    pe->wake_fd = -1;
    free(pe->fds);
    free(pe->owner);
    pe->fds = NULL;
    pe->owner = NULL;
}

void progress_abort(progress_engine_t *pe)
{
    atomic_store(&pe->aborted, 1);
    uint64_t one = 1;
    (void)!write(pe->wake_fd, &one, sizeof(one));
}

/* Block until a connection or the wake descriptor is ready, or the timeout passes; then let every
 * connection that became ready make progress, so that one whose peer died reports it. */
static chorus_result_t progress_block(progress_engine_t *pe, transport_conn_t *const *conns, int nconns,
                                      int timeout_ms, int *failed_p)
{
    struct pollfd *fds = pe->fds;
    int *owner = pe->owner, n = 0;
    fds[n] = (struct pollfd){.fd = pe->wake_fd, .events = POLLIN};
    owner[n++] = -1;
    for (int i = 0; i < nconns && i < pe->max_conns; i++) {
        short events = 0;
        int fd = conns[i] ? conns[i]->ops->poll_fd(conns[i], &events) : -1;
        if (fd < 0 || !events) continue;
        fds[n] = (struct pollfd){.fd = fd, .events = events};
        owner[n++] = i;
    }
    if (SYSCALL_RETRY(poll(fds, (nfds_t)n, timeout_ms)) < 0 && errno != EINTR) {
        LOG_WARN(LOG_SUB_NET, "poll failed: %m");
        return CHORUS_ERR_SYSTEM;
    }
    for (int k = 1; k < n; k++) {
        if (!fds[k].revents) continue;
        int moved = 0;
        chorus_result_t res = conns[owner[k]]->ops->progress(conns[owner[k]], &moved);
        if (res != CHORUS_SUCCESS) {
            *failed_p = owner[k];
            return res;
        }
    }
    return CHORUS_SUCCESS;
}

chorus_result_t progress_check(progress_engine_t *pe, transport_conn_t *const *conns, int nconns, int *failed_p)
{
    *failed_p = -1;
    return progress_block(pe, conns, nconns, 0, failed_p);
}

/* progress_block for a run. A connection that fails while the run is blocked may be one the step uses:
 * its transfers then know more than the connection's bare failure does (the receive that found a
 * mismatch holds both sides' headers). So the step gets one more turn to report it first; only if the
 * step does not fail is the connection's failure returned, as progress_block found it. */
static chorus_result_t progress_wait(progress_engine_t *pe, progress_step_fn step, void *arg,
                                     transport_conn_t *const *conns, int nconns, int timeout_ms, int *failed_p)
{
    chorus_result_t res = progress_block(pe, conns, nconns, timeout_ms, failed_p);
    if (res == CHORUS_SUCCESS || *failed_p < 0) return res;
    progress_status_t status;
    chorus_result_t step_res = step(arg, &status);
    if (step_res == CHORUS_SUCCESS) return res;
    *failed_p = -1;
    return step_res;
}

chorus_result_t progress_run_sleep(progress_engine_t *pe, progress_step_fn step, progress_sleep_fn sleep, void *arg,
                                   transport_conn_t *const *conns, int nconns, int64_t deadline_ns, int *failed_p)
{
    int64_t idle_since = 0; /* when the run last stopped moving, 0 while it moves */
    unsigned turns = 0;     /* idle turns since the clock was last read */
    *failed_p = -1;
    for (;;) {
        progress_status_t status = PROGRESS_IDLE;
        CHECK(step(arg, &status));
        if (status == PROGRESS_DONE) return CHORUS_SUCCESS;
        if (atomic_load_explicit(&pe->aborted, memory_order_relaxed)) return CHORUS_ERR_ABORTED;
        if (status == PROGRESS_MOVED) {
            idle_since = 0;
            continue;
        }
        /* With more ranks than cores, the peer we wait for may need this very core: yield it while spinning. */
        if (idle_since && ++turns % PROGRESS_CLOCK_TURNS) {
            if (pe->yield) sched_yield();
            continue;
        }
        int64_t now = time_now_ns();
        if (!idle_since) idle_since = now;
        if (now - idle_since < pe->spin_ns) {
            if (pe->yield) sched_yield();
            continue;
        }
        if (now >= deadline_ns) return CHORUS_ERR_TIMEOUT;
        CHECK(progress_wait(pe, step, arg, conns, nconns, sleep ? 0 : time_left_ms(deadline_ns, PROGRESS_POLL_CAP_MS),
                            failed_p));
        if (sleep) sleep(arg, time_left_ms(deadline_ns, PROGRESS_SLEEP_SLICE_MS));
    }
}

chorus_result_t progress_run(progress_engine_t *pe, progress_step_fn step, void *arg, transport_conn_t *const *conns,
                             int nconns, int64_t deadline_ns, int *failed_p)
{
    return progress_run_sleep(pe, step, NULL, arg, conns, nconns, deadline_ns, failed_p);
}
