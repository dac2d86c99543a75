/*
 * The flight recorder's dumps: the text format of docs/recorder.md, the automatic dump when a
 * communicator breaks, chorus_comm_dump(), and the SIGUSR1 dump of CHORUS_DUMP_ON_SIGNAL.
 *
 * SIGUSR1. Formatting a dump is not async-signal-safe (stdio, locks), and a signal often lands while the
 * process is blocked in poll() or busy outside Chorus, so the dump cannot wait for the next operation
 * either. The handler therefore only writes one byte to a pipe; a helper thread, started with the first
 * communicator that enables the knob and joined when the last one is destroyed, reads it and writes the
 * dumps of every such communicator from ordinary thread context. The pipe is created once and kept for the
 * life of the process, so a handler that runs late on another CPU, after the previous action was restored,
 * writes into this pipe and never into a descriptor closed and reused meanwhile.
 */
#include "core/recorder.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/reduce.h"
#include "bootstrap/wire.h"
#include "core/comm.h"
#include "util/log.h"
#include "util/thread.h"

#define REC_FORMAT_VERSION 1
#define REC_MAX_SIZE (1 << 20)

/* Dumps are serialised: the SIGUSR1 helper, chorus_comm_abort() and the API may dump at the same time, to
 * the same file. The list of communicators the helper dumps is kept under the same lock. */
static pthread_mutex_t rec_dump_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chorus_comm *rec_signalled;
/* Starting and stopping the helper; never taken by the helper, so joining it under this lock is safe. */
static pthread_mutex_t rec_life_lock = PTHREAD_MUTEX_INITIALIZER;
static int rec_pipe[2] = {-1, -1};
static int rec_running;
static atomic_int rec_stop;
static pthread_t rec_thread;
static struct sigaction rec_old_action;

static const char *rec_kind_name(int kind)
{
    if (kind == REC_SEND) return "send";
    if (kind == REC_RECV) return "recv";
    return kind >= 0 && kind < COLL_COUNT ? coll_name((coll_kind_t)kind) : "?";
}

static int rec_reduces(int kind) { return kind == COLL_ALLREDUCE || kind == COLL_REDUCE || kind == COLL_REDUCE_SCATTER; }

/* A rank, or "-" for none. */
static const char *rec_int(char *buf, size_t len, int v, int valid)
{
    if (!valid || v < 0) return "-";
    snprintf(buf, len, "%d", v);
    return buf;
}

/* Monotonic ns as wall-clock seconds with microseconds, so that the dumps of all ranks line up. */
static const char *rec_time(char *buf, size_t len, int64_t mono_ns, int64_t wall_offset_ns)
{
    if (!mono_ns) return "-";
    int64_t us = (mono_ns + wall_offset_ns) / 1000;
    snprintf(buf, len, "%lld.%06lld", (long long)(us / 1000000), (long long)(us % 1000000));
    return buf;
}

static void rec_print(const struct chorus_comm *comm, FILE *f, const rec_entry_t *e, int live, int64_t offset)
{
    char root[16], peer[16], step[16], wait[16], t0[32], t1[32];
    int kind = e->kind, p2p = kind == REC_SEND || kind == REC_RECV;
    int s = e->step, w = e->wait;
    if (e->state == REC_RUNNING && live) { /* where the operation is right now */
        s = __atomic_load_n(&comm->prims.step, __ATOMIC_RELAXED);
        w = __atomic_load_n(&comm->prims.waiting_on, __ATOMIC_RELAXED);
    }
    const char *dtype = kind == COLL_BARRIER ? NULL : dtype_name((chorus_datatype_t)e->dtype);
    const char *redop = rec_reduces(kind) ? redop_name((chorus_redop_t)e->redop) : NULL;
    static const char *const states[] = {"running", "done", "failed"};
    fprintf(f, "op=%llu kind=%s seq=%llu count=%llu dtype=%s redop=%s root=%s peer=%s algo=%s state=%s result=%s "
            "step=%s wait=%s start=%s end=%s\n",
            (unsigned long long)e->op, rec_kind_name(kind), (unsigned long long)e->seq, (unsigned long long)e->count,
            dtype ? dtype : "-", redop ? redop : "-",
            rec_int(root, sizeof(root), e->root, kind == COLL_BROADCAST || kind == COLL_REDUCE),
            rec_int(peer, sizeof(peer), e->root, p2p), e->algo ? e->algo : "-",
            (unsigned)e->state < 3 ? states[e->state] : "?",
            e->state == REC_RUNNING ? "-" : chorus_result_name((chorus_result_t)e->result),
            rec_int(step, sizeof(step), s, e->state != REC_DONE), rec_int(wait, sizeof(wait), w, e->state != REC_DONE),
            rec_time(t0, sizeof(t0), e->start_ns, offset),
            rec_time(t1, sizeof(t1), e->state == REC_RUNNING ? 0 : e->end_ns, offset));
}

/* A copy of an entry the recording thread may be writing right now (recorder.h). */
static void rec_load(const rec_entry_t *from, rec_entry_t *e)
{
    e->op = REC_LOAD(from->op);
    e->seq = REC_LOAD(from->seq);
    e->count = REC_LOAD(from->count);
    e->start_ns = REC_LOAD(from->start_ns);
    e->end_ns = REC_LOAD(from->end_ns);
    e->algo = REC_LOAD(from->algo);
    e->kind = REC_LOAD(from->kind);
    e->root = REC_LOAD(from->root);
    e->step = REC_LOAD(from->step);
    e->wait = REC_LOAD(from->wait);
    e->result = REC_LOAD(from->result);
    e->dtype = REC_LOAD(from->dtype);
    e->redop = REC_LOAD(from->redop);
    e->state = REC_LOAD(from->state);
}

void recorder_write(struct chorus_comm *comm, FILE *f, const char *reason)
{
    const recorder_t *r = &comm->rec;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t offset = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec - time_now_ns();
    char host[256] = "?", now[32];
    gethostname(host, sizeof(host) - 1);
    for (char *c = host; *c; c++)
        if (*c == ' ' || *c == '=') *c = '_';
    uint64_t n = atomic_load_explicit(&r->recorded, memory_order_acquire);
    fprintf(f, "chorus-dump version=%d comm=%016llx rank=%d nranks=%d host=%s pid=%d capacity=%llu recorded=%llu "
            "reason=%s time=%s\n",
            REC_FORMAT_VERSION, (unsigned long long)r->tag, comm->rank, comm->nranks, host, (int)getpid(),
            (unsigned long long)r->size, (unsigned long long)n, reason, rec_time(now, sizeof(now), time_now_ns(), offset));
    for (uint64_t i = n > r->size ? n - r->size : 0; i < n; i++) {
        rec_entry_t e;
        rec_load(&r->ring[i % r->size], &e);
        if (e.op != i) continue; /* overwritten by an operation that began while this dump ran */
        rec_print(comm, f, &e, i == n - 1, offset);
    }
}

/* Write the dump to path through a temporary file, so that a reader never sees half of one. Returns 0 or
 * an errno value. */
static int rec_dump_file(struct chorus_comm *comm, const char *path, const char *reason)
{
    char tmp[sizeof(comm->rec.dump_path) + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return errno;
    errno = 0;
    recorder_write(comm, f, reason);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        int err = errno ? errno : EIO;
        unlink(tmp);
        return err;
    }
    return 0;
}

void recorder_on_failure(struct chorus_comm *comm, chorus_result_t res)
{
    if (!comm->rec.size) return;
    char reason[32]; /* the result's name without its prefix, in lower case: "timeout" */
    const char *name = chorus_result_name(res);
    size_t i = 0;
    for (name += strncmp(name, "CHORUS_ERR_", 11) == 0 ? 11 : 0; name[i] && i < sizeof(reason) - 1; i++)
        reason[i] = (char)tolower((unsigned char)name[i]);
    reason[i] = 0;
    pthread_mutex_lock(&rec_dump_lock);
    int err = rec_dump_file(comm, comm->rec.dump_path, reason);
    pthread_mutex_unlock(&rec_dump_lock);
    if (err)
        LOG_WARN(LOG_SUB_COLL, "cannot write the flight recorder to %s: %s (set CHORUS_DUMP_DIR)", comm->rec.dump_path,
                 strerror(err));
    else
        LOG_WARN(LOG_SUB_COLL, "flight recorder written to %s; chorus-trace reads the dumps of all ranks",
                 comm->rec.dump_path);
}

chorus_result_t chorus_comm_dump(chorus_comm_t comm, const char *path)
{
    if (!comm) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "dump: comm is NULL");
    int err = 0;
    pthread_mutex_lock(&rec_dump_lock);
    FILE *f = path ? fopen(path, "w") : stderr;
    if (f) {
        errno = 0;
        recorder_write(comm, f, "api");
        int bad = ferror(f);
        bad |= path ? fclose(f) != 0 : fflush(f) != 0;
        if (bad) err = errno ? errno : EIO;
    } else {
        err = errno;
    }
    pthread_mutex_unlock(&rec_dump_lock);
    if (err)
        return comm_side_error(comm, CHORUS_ERR_SYSTEM, "dump: cannot write %s: %s", path ? path : "stderr",
                               strerror(err));
    return CHORUS_SUCCESS;
}

static void rec_on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    (void)!write(rec_pipe[1], "d", 1);
    errno = saved;
}

static void *rec_helper(void *arg)
{
    (void)arg;
    char buf[64];
    for (;;) {
        ssize_t got = read(rec_pipe[0], buf, sizeof(buf));
        if (atomic_load(&rec_stop)) return NULL;
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return NULL;
        pthread_mutex_lock(&rec_dump_lock);
        for (struct chorus_comm *c = rec_signalled; c; c = c->rec.next_signalled) {
            int err = rec_dump_file(c, c->rec.dump_path, "signal");
            if (err)
                LOG_WARN(LOG_SUB_COLL, "cannot write the flight recorder to %s: %s", c->rec.dump_path, strerror(err));
            else
                LOG_WARN(LOG_SUB_COLL, "flight recorder written to %s (SIGUSR1)", c->rec.dump_path);
        }
        pthread_mutex_unlock(&rec_dump_lock);
    }
}

/* Start the helper (taking no signals), then install the handler. Returns 0 or an errno value. */
static int rec_start_helper(void)
{
    if (rec_pipe[0] < 0 && pipe2(rec_pipe, O_CLOEXEC) != 0) return errno;
    (void)fcntl(rec_pipe[1], F_SETFL, O_NONBLOCK); /* a flood of signals must never block a handler */
    atomic_store(&rec_stop, 0);
    int err = thread_start_quiet(&rec_thread, NULL, rec_helper, NULL);
    if (err) return err;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = rec_on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &rec_old_action);
    rec_running = 1;
    return 0;
}

/* Restore the previous action unless the application replaced ours meanwhile, then join the helper. */
static void rec_stop_helper(void)
{
    struct sigaction cur;
    if (sigaction(SIGUSR1, NULL, &cur) == 0 && cur.sa_handler == rec_on_signal) sigaction(SIGUSR1, &rec_old_action, NULL);
    atomic_store(&rec_stop, 1);
    (void)!write(rec_pipe[1], "q", 1); /* if the pipe is full, the helper has bytes to wake up for anyway */
    pthread_join(rec_thread, NULL);
    rec_running = 0;
}

chorus_result_t recorder_init(struct chorus_comm *comm, const chorus_unique_id_t *id)
{
    recorder_t *r = &comm->rec;
    const chorus_params_t *pm = &comm->params;
    if (pm->recorder_size < 0 || pm->recorder_size > REC_MAX_SIZE)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "CHORUS_RECORDER_SIZE=%lld is out of range [0, %d]",
                          (long long)pm->recorder_size, REC_MAX_SIZE);
    r->size = (uint64_t)pm->recorder_size;
    if (r->size && !(r->ring = calloc(r->size, sizeof(*r->ring))))
        return comm_error(comm, CHORUS_ERR_NO_MEMORY, "init: out of memory for the flight recorder");
    struct sockaddr_storage root;
    bootstrap_secret_t secret;
    if (bootstrap_id_parse(id, &root, &secret) == CHORUS_SUCCESS) r->tag = secret.tag;
    memset(&secret, 0, sizeof(secret));
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
    snprintf(r->dump_path, sizeof(r->dump_path), "%s/chorus-dump.%s.%d.rank%d.txt",
             pm->dump_dir[0] ? pm->dump_dir : ".", host, (int)getpid(), comm->rank);
    if (!pm->dump_on_signal) return CHORUS_SUCCESS;
    pthread_mutex_lock(&rec_life_lock);
    int err = rec_running ? 0 : rec_start_helper();
    if (!err) {
        pthread_mutex_lock(&rec_dump_lock);
        r->next_signalled = rec_signalled;
        rec_signalled = comm;
        pthread_mutex_unlock(&rec_dump_lock);
    }
    pthread_mutex_unlock(&rec_life_lock);
    if (err)
        return comm_error(comm, CHORUS_ERR_SYSTEM, "CHORUS_DUMP_ON_SIGNAL: cannot start the dump thread: %s",
                          strerror(err));
    return CHORUS_SUCCESS;
}

void recorder_fini(struct chorus_comm *comm)
{
    pthread_mutex_lock(&rec_life_lock);
    pthread_mutex_lock(&rec_dump_lock);
    int found = 0;
    for (struct chorus_comm **c = &rec_signalled; *c; c = &(*c)->rec.next_signalled)
        if (*c == comm) {
            *c = comm->rec.next_signalled;
            found = 1;
            break;
        }
    int last = found && !rec_signalled;
    pthread_mutex_unlock(&rec_dump_lock);
    if (last) rec_stop_helper();
    pthread_mutex_unlock(&rec_life_lock);
    free(comm->rec.ring);
    comm->rec.ring = NULL;
    comm->rec.size = 0;
}
