#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic int log_level_current = LOG_WARN;
_Atomic unsigned log_subsys_mask = LOG_SUB_ALL;
static __thread int log_rank = -1;

static const struct {
    const char *name;
    unsigned bit;
} log_subsys_names[] = {
    {"INIT", LOG_SUB_INIT}, {"BOOTSTRAP", LOG_SUB_BOOTSTRAP}, {"NET", LOG_SUB_NET},
    {"COLL", LOG_SUB_COLL}, {"ALGO", LOG_SUB_ALGO},           {"SHM", LOG_SUB_SHM}, {"TUNING", LOG_SUB_TUNING}, {"ALL", LOG_SUB_ALL},
};

static const char *const log_level_names[] = {"NONE", "WARN", "INFO", "DEBUG", "TRACE"};

void log_configure(const char *level, const char *subsys)
{
    for (int i = 0; i <= LOG_TRACE; i++)
        if (level && strcasecmp(level, log_level_names[i]) == 0)
            atomic_store_explicit(&log_level_current, i, memory_order_relaxed);
    if (!subsys || !*subsys) return;
    int exclude = subsys[0] == '^';
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", subsys + exclude);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        for (size_t i = 0; i < sizeof(log_subsys_names) / sizeof(log_subsys_names[0]); i++)
            if (strcasecmp(tok, log_subsys_names[i].name) == 0) mask |= log_subsys_names[i].bit;
    atomic_store_explicit(&log_subsys_mask, exclude ? (LOG_SUB_ALL & ~mask) : mask, memory_order_relaxed);
}

void log_set_rank(int rank) { log_rank = rank; }

static const char *log_subsys_name(log_subsys_t sub)
{
    for (size_t i = 0; i < sizeof(log_subsys_names) / sizeof(log_subsys_names[0]); i++)
        if (log_subsys_names[i].bit == (unsigned)sub) return log_subsys_names[i].name;
    return "?";
}

/* The host name, looked up once: threads may write their first lines at the same time. */
static char log_host[64];
static pthread_once_t log_host_once = PTHREAD_ONCE_INIT;

static void log_host_lookup(void) { gethostname(log_host, sizeof(log_host) - 1); }

void log_write(log_level_t level, log_subsys_t sub, const char *fmt, ...)
{
    pthread_once(&log_host_once, log_host_lookup);
    const char *host = log_host;
    char line[1024];
    int n = snprintf(line, sizeof(line), "%s:%d:%ld [%d] CHORUS %s %s ", host, (int)getpid(),
                     (long)syscall(SYS_gettid), log_rank, log_level_names[level], log_subsys_name(sub));
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && n < (int)sizeof(line)) vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
