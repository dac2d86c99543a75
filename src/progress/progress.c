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
#define PROGRESS_MAX_POLL_FDS 64

chorus_result_t progress_engine_init(progress_engine_t *pe, int spin_count)
{
    pe->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (pe->wake_fd < 0) {
        LOG_WARN(LOG_SUB_INIT, "eventfd failed: %m");
        return CHORUS_ERR_SYSTEM;
    }
    atomic_init(&pe->aborted, 0);
    pe->spin_count = spin_count < 0 ? 0 : spin_count;
    return CHORUS_SUCCESS;
}

void progress_engine_fini(progress_engine_t *pe)
{
    if (pe->wake_fd >= 0) close(pe->wake_fd);
    pe->wake_fd = -1;
}

void progress_abort(progress_engine_t *pe)
{
    atomic_store(&pe->aborted, 1);
    uint64_t one = 1;
    (void)!write(pe->wake_fd, &one, sizeof(one));
}

/* Block until a connection or the wake descriptor is ready, or the timeout passes. */
static chorus_result_t progress_block(progress_engine_t *pe, transport_conn_t *const *conns, int nconns,
                                      int timeout_ms)
{
    struct pollfd fds[PROGRESS_MAX_POLL_FDS + 1];
    int n = 0;
    fds[n++] = (struct pollfd){.fd = pe->wake_fd, .events = POLLIN};
    for (int i = 0; i < nconns && n <= PROGRESS_MAX_POLL_FDS; i++) {
        short events = 0;
        int fd = conns[i] ? conns[i]->ops->poll_fd(conns[i], &events) : -1;
        if (fd >= 0 && events) fds[n++] = (struct pollfd){.fd = fd, .events = events};
    }
    if (SYSCALL_RETRY(poll(fds, (nfds_t)n, timeout_ms)) < 0 && errno != EINTR) {
        LOG_WARN(LOG_SUB_NET, "poll failed: %m");
        return CHORUS_ERR_SYSTEM;
    }
    return CHORUS_SUCCESS;
}

chorus_result_t progress_run(progress_engine_t *pe, progress_step_fn step, void *arg, transport_conn_t *const *conns,
                             int nconns, int64_t deadline_ns)
{
    int idle_turns = 0;
    for (;;) {
        progress_status_t status = PROGRESS_IDLE;
        CHECK(step(arg, &status));
        if (status == PROGRESS_DONE) return CHORUS_SUCCESS;
        if (status == PROGRESS_MOVED) {
            idle_turns = 0;
            continue;
        }
        if (atomic_load_explicit(&pe->aborted, memory_order_relaxed)) return CHORUS_ERR_ABORTED;
        /* Yield while spinning: with more ranks than cores, the peer we wait for may need this core. */
        if (++idle_turns < pe->spin_count) {
            sched_yield();
            continue;
        }
        if (time_now_ns() >= deadline_ns) return CHORUS_ERR_TIMEOUT;
        CHECK(progress_block(pe, conns, nconns, time_left_ms(deadline_ns, PROGRESS_POLL_CAP_MS)));
    }
}
