/* Small helpers shared by every layer: time, the three error-propagation macros, min/max. */
#ifndef CHORUS_UTIL_H
#define CHORUS_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "chorus/chorus.h"

#define CHORUS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CHORUS_MAX(a, b) ((a) > (b) ? (a) : (b))
#define CHORUS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define CHORUS_ROUND_UP(n, to) (((n) + (to) - 1) / (to) * (to))

/* Monotonic clock in nanoseconds. */
static inline int64_t time_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The same clock, read cheaply but only to the kernel's tick (a few ms): for per-operation stamps and
 * deadlines, which need no finer grain. On virtual machines a precise read can cost a system call, a
 * sizeable part of a small collective. */
static inline int64_t time_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A deadline `ms` milliseconds from now; ms <= 0 means none (INT64_MAX). */
static inline int64_t time_deadline_ms(int64_t ms)
{
    return ms > 0 ? time_now_ns() + ms * 1000000 : INT64_MAX;
}

/* Milliseconds left until `deadline`, clamped to [0, cap_ms]; for poll()'s timeout. */
static inline int time_left_ms(int64_t deadline, int cap_ms)
{
    if (deadline == INT64_MAX) return cap_ms;
    int64_t left = (deadline - time_now_ns() + 999999) / 1000000;
    if (left < 0) return 0;
    return left > cap_ms ? cap_ms : (int)left;
}

/* The three propagation helpers. The function that classifies an error logs it; these pass it on. */
#define CHECK(call)                                   \
    do {                                              \
        chorus_result_t check_res_ = (call);          \
        if (check_res_ != CHORUS_SUCCESS) return check_res_; \
    } while (0)

#define CHECK_GOTO(call, res, label)     \
    do {                                 \
        (res) = (call);                  \
        if ((res) != CHORUS_SUCCESS) goto label; \
    } while (0)

/* Retry a syscall on EINTR; evaluates to its result. */
#define SYSCALL_RETRY(expr)                              \
    ({                                                   \
        __typeof__(expr) sys_res_;                       \
        do { sys_res_ = (expr); } while (sys_res_ == -1 && errno == EINTR); \
        sys_res_;                                        \
    })

#endif
