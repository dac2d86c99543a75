/* Logging. The level and subsystem mask are checked before any formatting, so a disabled log line costs
 * one branch. Lines read "host:pid:tid [rank] LEVEL SUBSYS message". */
#ifndef CHORUS_LOG_H
#define CHORUS_LOG_H

#include <stdarg.h>
#include <stdatomic.h>

typedef enum { LOG_NONE = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3, LOG_TRACE = 4 } log_level_t;

typedef enum {
    LOG_SUB_INIT = 1 << 0,
    LOG_SUB_BOOTSTRAP = 1 << 1,
    LOG_SUB_NET = 1 << 2,
    LOG_SUB_COLL = 1 << 3,
    LOG_SUB_ALGO = 1 << 4,
    LOG_SUB_SHM = 1 << 5,
    LOG_SUB_TUNING = 1 << 6,
    LOG_SUB_ALL = 0xffff
} log_subsys_t;

/* Written by log_configure, read before every log line by every thread (ranks may be threads of one
 * process, initialising at the same time): atomics, read relaxed, which costs a plain load. */
extern _Atomic int log_level_current;
extern _Atomic unsigned log_subsys_mask;

/* Configure from CHORUS_LOG_LEVEL / CHORUS_LOG_SUBSYS values (at every init; the process has one setting,
 * the last init's). */
void log_configure(const char *level, const char *subsys);
/* The rank printed in this thread's log lines (-1: none). */
void log_set_rank(int rank);
void log_write(log_level_t level, log_subsys_t sub, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static inline int log_enabled(log_level_t level, log_subsys_t sub)
{
    return (int)level <= atomic_load_explicit(&log_level_current, memory_order_relaxed) &&
           ((unsigned)sub & atomic_load_explicit(&log_subsys_mask, memory_order_relaxed));
}

#define LOG_AT(level, sub, ...)                                                    \
    do {                                                                           \
        if (log_enabled((level), (sub))) log_write((level), (sub), __VA_ARGS__);   \
    } while (0)
#define LOG_WARN(sub, ...) LOG_AT(LOG_WARN, sub, __VA_ARGS__)
#define LOG_INFO(sub, ...) LOG_AT(LOG_INFO, sub, __VA_ARGS__)
#define LOG_DEBUG(sub, ...) LOG_AT(LOG_DEBUG, sub, __VA_ARGS__)
#define LOG_TRACE(sub, ...) LOG_AT(LOG_TRACE, sub, __VA_ARGS__)

#endif
