/*
 * chorus-trace: read the flight recorder dumps of the ranks of a job (docs/recorder.md) and say what went
 * wrong: which rank is behind, where the ranks' collectives diverge, and which peer each rank waits on.
 *
 *   chorus-trace [DUMP | DIRECTORY]...
 *
 * A directory contributes every file named chorus-dump* in it (not the .tmp files of a dump being
 * written). Dumps are grouped by communicator; for a rank dumped more than once, the latest dump counts.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FIELD_BYTES 48

/* The fields of an operation line that the analysis uses, as written. */
typedef struct op {
    char kind[FIELD_BYTES], count[FIELD_BYTES], dtype[FIELD_BYTES], redop[FIELD_BYTES], root[FIELD_BYTES];
    char algo[FIELD_BYTES], peer[FIELD_BYTES], state[FIELD_BYTES], result[FIELD_BYTES], step[FIELD_BYTES], wait[FIELD_BYTES];
    long long seq;
} op_t;

typedef struct dump {
    char path[512];
    char comm[FIELD_BYTES], host[FIELD_BYTES], reason[FIELD_BYTES], time[FIELD_BYTES];
    int rank, nranks, pid;
    op_t *ops;
    int nops;
} dump_t;

/* The dumps of one communicator, by rank (NULL: no dump from that rank). */
typedef struct group {
    char comm[FIELD_BYTES];
    int nranks;
    dump_t **by_rank;
} group_t;

static dump_t *dumps;
static int ndumps;

/* The value of `key=` in a line of space-separated key=value tokens, or "" when absent. */
static void field(const char *line, const char *key, char *out)
{
    size_t klen = strlen(key);
    out[0] = 0;
    for (const char *p = line; p && *p;) {
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
            const char *v = p + klen + 1;
            size_t n = strcspn(v, " \n");
            if (n >= FIELD_BYTES) n = FIELD_BYTES - 1;
            memcpy(out, v, n);
            out[n] = 0;
            return;
        }
        p = strchr(p, ' ');
        if (p) p++;
    }
}

static int is_p2p(const op_t *o) { return strcmp(o->kind, "send") == 0 || strcmp(o->kind, "recv") == 0; }

static int read_dump(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "chorus-trace: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    dump_t d = {0};
    snprintf(d.path, sizeof(d.path), "%s", path);
    char buf[FIELD_BYTES];
    if (getline(&line, &cap, f) < 0 || strncmp(line, "chorus-dump ", 12) != 0) {
        fprintf(stderr, "chorus-trace: %s is not a Chorus flight recorder dump\n", path);
        free(line);
        fclose(f);
        return -1;
    }
    field(line, "comm", d.comm);
    field(line, "host", d.host);
    field(line, "reason", d.reason);
    field(line, "time", d.time);
    field(line, "rank", buf);
    d.rank = buf[0] ? atoi(buf) : -1;
    field(line, "nranks", buf);
    d.nranks = atoi(buf);
    field(line, "pid", buf);
    d.pid = atoi(buf);
    while (getline(&line, &cap, f) >= 0) {
        if (strncmp(line, "op=", 3) != 0) continue;
        op_t *ops = realloc(d.ops, (size_t)(d.nops + 1) * sizeof(*ops));
        if (!ops) break;
        d.ops = ops;
        op_t *o = &d.ops[d.nops++];
        field(line, "kind", o->kind);
        field(line, "count", o->count);
        field(line, "dtype", o->dtype);
        field(line, "redop", o->redop);
        field(line, "root", o->root);
        field(line, "algo", o->algo);
        field(line, "peer", o->peer);
        field(line, "state", o->state);
        field(line, "result", o->result);
        field(line, "step", o->step);
        field(line, "wait", o->wait);
        field(line, "seq", buf);
        o->seq = atoll(buf);
    }
    free(line);
    fclose(f);
    if (d.rank < 0 || d.nranks < 1 || d.rank >= d.nranks) {
        fprintf(stderr, "chorus-trace: %s: bad header (rank %d of %d)\n", path, d.rank, d.nranks);
        free(d.ops);
        return -1;
    }
    dump_t *all = realloc(dumps, (size_t)(ndumps + 1) * sizeof(*all));
    if (!all) {
        free(d.ops);
        return -1;
    }
    dumps = all;
    dumps[ndumps++] = d;
    return 0;
}

static void read_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "chorus-trace: cannot open %s: %s\n", dir, strerror(errno));
        return;
    }
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "chorus-dump", 11) != 0 || (n > 4 && strcmp(e->d_name + n - 4, ".tmp") == 0)) continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        read_dump(path);
    }
    closedir(d);
}

/* The last collective of a dump (NULL if none), and how far it got: entered = 1 + its sequence number,
 * completed = 1 + the highest done collective's. */
static const op_t *progress(const dump_t *d, long long *entered_p, long long *completed_p)
{
    const op_t *last = NULL;
    *entered_p = *completed_p = 0;
    for (int i = 0; i < d->nops; i++) {
        const op_t *o = &d->ops[i];
        if (is_p2p(o)) continue;
        last = o;
        if (o->seq + 1 > *entered_p) *entered_p = o->seq + 1;
        if (strcmp(o->state, "done") == 0 && o->seq + 1 > *completed_p) *completed_p = o->seq + 1;
    }
    return last;
}

static const op_t *find_coll(const dump_t *d, long long seq)
{
    for (int i = 0; i < d->nops; i++)
        if (!is_p2p(&d->ops[i]) && d->ops[i].seq == seq) return &d->ops[i];
    return NULL;
}

/* "kind #seq state result, step S, waiting on rank W" for the operation a rank is in. */
static void describe(const op_t *o, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s #%lld", o->kind, o->seq);
    if (is_p2p(o)) n += snprintf(buf + n, len - (size_t)n, " with rank %s", o->peer);
    n += snprintf(buf + n, len - (size_t)n, " %s", o->state);
    if (strcmp(o->state, "failed") == 0) n += snprintf(buf + n, len - (size_t)n, " %s", o->result);
    if (strcmp(o->step, "-") != 0) n += snprintf(buf + n, len - (size_t)n, ", step %s", o->step);
    if (strcmp(o->wait, "-") != 0) snprintf(buf + n, len - (size_t)n, ", waiting on rank %s", o->wait);
}

/* Print "rank 2" or "ranks 0, 1, 3" for the ranks whose flag is set. */
static void print_ranks(const int *set, int nranks)
{
    int k = 0;
    for (int r = 0; r < nranks; r++) k += set[r];
    printf("rank%s", k == 1 ? "" : "s");
    for (int r = 0, first = 1; r < nranks; r++)
        if (set[r]) {
            printf("%s %d", first ? "" : ",", r);
            first = 0;
        }
}

static void report_behind(const group_t *g, long long *entered, long long *completed)
{
    long long min_e = -1, max_e = -1, min_c = -1, max_c = -1;
    for (int r = 0; r < g->nranks; r++) {
        if (!g->by_rank[r]) continue;
        if (min_e < 0 || entered[r] < min_e) min_e = entered[r];
        if (entered[r] > max_e) max_e = entered[r];
        if (min_c < 0 || completed[r] < min_c) min_c = completed[r];
        if (completed[r] > max_c) max_c = completed[r];
    }
    if (min_e == max_e && min_c == max_c) {
        printf("behind: none: every rank entered %lld and completed %lld collective(s)\n", max_e, max_c);
        return;
    }
    /* Fewer collectives entered is further behind; among equals, fewer completed. */
    int by_entered = min_e != max_e;
    int *set = calloc((size_t)g->nranks, sizeof(int));
    for (int r = 0; r < g->nranks; r++)
        set[r] = g->by_rank[r] && (by_entered ? entered[r] == min_e : completed[r] == min_c);
    printf("behind: ");
    print_ranks(set, g->nranks);
    if (by_entered) {
        printf(": entered %lld collective(s)", min_e);
        int *ahead = calloc((size_t)g->nranks, sizeof(int));
        const op_t *next = NULL;
        for (int r = 0; r < g->nranks; r++) {
            ahead[r] = g->by_rank[r] && entered[r] > min_e;
            if (ahead[r] && !next) next = find_coll(g->by_rank[r], min_e);
        }
        printf("; ");
        print_ranks(ahead, g->nranks);
        printf(" entered collective #%lld (%s)", min_e, next ? next->kind : "not recorded");
        free(ahead);
    } else {
        printf(": completed %lld collective(s); the others completed collective #%lld", min_c, min_c);
    }
    printf("\n");
    for (int r = 0; r < g->nranks; r++) {
        if (!set[r]) continue;
        const dump_t *d = g->by_rank[r];
        char what[256];
        if (d->nops) {
            describe(&d->ops[d->nops - 1], what, sizeof(what));
            printf("  rank %d is now in %s\n", r, what);
        }
    }
    free(set);
}

/* The fields compared between ranks: a collective that differs in any of them cannot complete. */
#define NFIELDS 6
static const char *const field_names[NFIELDS] = {"kind", "count", "dtype", "redop", "root", "algo"};

static const char *op_field(const op_t *o, int k)
{
    const char *const v[NFIELDS] = {o->kind, o->count, o->dtype, o->redop, o->root, o->algo};
    return v[k];
}

/* The first collective that differs between the ranks that recorded it; every field that differs. */
static void report_divergence(const group_t *g, long long max_entered)
{
    const op_t **ops = calloc((size_t)g->nranks, sizeof(*ops));
    int *set = calloc((size_t)g->nranks, sizeof(int)), *listed = calloc((size_t)g->nranks, sizeof(int));
    int found = 0;
    for (long long seq = 0; seq < max_entered && !found; seq++) {
        const op_t *ref = NULL;
        for (int r = 0; r < g->nranks; r++) {
            ops[r] = g->by_rank[r] ? find_coll(g->by_rank[r], seq) : NULL;
            if (!ref) ref = ops[r];
        }
        for (int k = 0; k < NFIELDS; k++) {
            int differs = 0;
            for (int r = 0; r < g->nranks; r++) differs |= ops[r] && strcmp(op_field(ops[r], k), op_field(ref, k)) != 0;
            if (!differs) continue;
            found = 1;
            printf("divergence: collective #%lld: %s differs:", seq, field_names[k]);
            memset(listed, 0, (size_t)g->nranks * sizeof(int));
            for (int r = 0; r < g->nranks; r++) { /* the ranks grouped by value */
                if (!ops[r] || listed[r]) continue;
                const char *v = op_field(ops[r], k);
                for (int q = 0; q < g->nranks; q++) {
                    set[q] = ops[q] && !listed[q] && strcmp(op_field(ops[q], k), v) == 0;
                    listed[q] |= set[q];
                }
                printf(" ");
                print_ranks(set, g->nranks);
                printf(" %s=%s;", field_names[k], v);
            }
            printf("\n");
        }
    }
    if (!found) printf("divergence: none among the recorded collectives\n");
    free(ops);
    free(set);
    free(listed);
}

static void report_waits(const group_t *g)
{
    int any = 0;
    for (int r = 0; r < g->nranks; r++) {
        const dump_t *d = g->by_rank[r];
        if (!d || !d->nops) continue;
        const op_t *o = &d->ops[d->nops - 1];
        if (strcmp(o->state, "done") == 0) continue;
        const char *how = strcmp(o->state, "failed") == 0 ? o->result : o->state;
        if (strcmp(o->wait, "-") != 0)
            printf("waiting: rank %d waits on rank %s (%s #%lld step %s, %s)\n", r, o->wait, o->kind, o->seq, o->step, how);
        else
            printf("waiting: rank %d: no peer known (%s #%lld step %s, %s)\n", r, o->kind, o->seq, o->step, how);
        any = 1;
    }
    if (!any) printf("waiting: no rank is inside an operation\n");
    /* A rank that left no dump (stopped, killed, hung outside Chorus) while others wait on it is the first
     * suspect: their timeouts only show who waits on whom. */
    int *waiters = calloc((size_t)g->nranks, sizeof(int));
    for (int t = 0; t < g->nranks; t++) {
        if (g->by_rank[t]) continue;
        int n = 0;
        for (int r = 0; r < g->nranks; r++) {
            const dump_t *d = g->by_rank[r];
            const op_t *o = d && d->nops ? &d->ops[d->nops - 1] : NULL;
            waiters[r] = o && strcmp(o->state, "done") != 0 && strcmp(o->wait, "-") != 0 && atoi(o->wait) == t;
            n += waiters[r];
        }
        if (!n) continue;
        printf("suspect: rank %d left no dump and ", t);
        print_ranks(waiters, g->nranks);
        printf(" wait%s on it\n", n == 1 ? "s" : "");
    }
    free(waiters);
}

static void report(const group_t *g)
{
    int present = 0;
    for (int r = 0; r < g->nranks; r++) present += g->by_rank[r] != NULL;
    printf("communicator %s: %d ranks, dumps from %d\n", g->comm, g->nranks, present);
    if (present < g->nranks) {
        int *missing = calloc((size_t)g->nranks, sizeof(int));
        for (int r = 0; r < g->nranks; r++) missing[r] = !g->by_rank[r];
        printf("missing: ");
        print_ranks(missing, g->nranks);
        printf(" (no dump: exited, killed, or never failed)\n");
        free(missing);
    }
    long long *entered = calloc((size_t)g->nranks, sizeof(long long));
    long long *completed = calloc((size_t)g->nranks, sizeof(long long)), max_entered = 0;
    for (int r = 0; r < g->nranks; r++) {
        const dump_t *d = g->by_rank[r];
        if (!d) continue;
        progress(d, &entered[r], &completed[r]);
        if (entered[r] > max_entered) max_entered = entered[r];
        char what[256] = "no operation recorded";
        if (d->nops) describe(&d->ops[d->nops - 1], what, sizeof(what));
        printf("rank %d: %s pid %d, dump %s at %s: entered %lld, completed %lld collective(s); last: %s\n", r, d->host,
               d->pid, d->reason, d->time, entered[r], completed[r], what);
    }
    report_behind(g, entered, completed);
    report_divergence(g, max_entered);
    report_waits(g);
    free(entered);
    free(completed);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: chorus-trace [DUMP | DIRECTORY]...\n\n"
                "Reads the flight recorder dumps of every rank (files chorus-dump* in a directory, or files\n"
                "named on the command line) and reports, per communicator, which rank is behind, the first\n"
                "collective where the ranks diverge, and the peer each rank waits on (docs/recorder.md).\n");
        return argc < 2 ? 2 : 0;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            read_dir(argv[i]);
        else
            read_dump(argv[i]);
    }
    if (!ndumps) {
        fprintf(stderr, "chorus-trace: no dumps found\n");
        return 1;
    }
    group_t *groups = calloc((size_t)ndumps, sizeof(*groups));
    int ngroups = 0;
    for (int i = 0; i < ndumps; i++) {
        dump_t *d = &dumps[i];
        group_t *g = NULL;
        for (int k = 0; k < ngroups && !g; k++)
            if (strcmp(groups[k].comm, d->comm) == 0 && groups[k].nranks == d->nranks) g = &groups[k];
        if (!g) {
            g = &groups[ngroups++];
            snprintf(g->comm, sizeof(g->comm), "%s", d->comm);
            g->nranks = d->nranks;
            g->by_rank = calloc((size_t)d->nranks, sizeof(*g->by_rank));
        }
        dump_t **slot = &g->by_rank[d->rank];
        if (!*slot || strtod(d->time, NULL) > strtod((*slot)->time, NULL)) *slot = d; /* the latest dump wins */
    }
    for (int k = 0; k < ngroups; k++) {
        if (k) printf("\n");
        report(&groups[k]);
        free(groups[k].by_rank);
    }
    for (int i = 0; i < ndumps; i++) free(dumps[i].ops);
    free(dumps);
    free(groups);
    return 0;
}
