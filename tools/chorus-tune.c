/*
 * chorus-tune: measures the cost model's parameters on this machine, thoroughly (TUNE_PASSES passes of
 * about a second per link, or --passes, spread over --spread seconds; each figure their median), and
 * writes a tuning file for CHORUS_TUNING_FILE.
 * Run it under chorusrun with two ranks or more:
 *
 *     chorusrun -n 2 chorus-tune -o chorus-tuning.txt
 *     chorusrun -n 4 chorus-tune --rules -o chorus-tuning.txt
 *
 * On one host it measures shared memory (and the host arena) with a first communicator, then TCP with a
 * second one (CHORUS_TRANSPORT=tcp); across hosts, TCP between rank 0 and the first rank on another host.
 *
 * With --fit it also times every algorithm of every collective on this rank count, over a size sweep
 * from 1 MiB (turns of the whole sweep, each point the median of its turns), and writes each algorithm's
 * efficiencies on this link: its time over the model's price past the latencies, in cache and in memory
 * (tune_fit_efficiency).
 * With --rules it does the same over a sweep from 1 KiB and writes the fastest as rules for this rank
 * count and link, out of place. Rules an existing file holds for other rank counts or links are kept, so
 * runs with several rank counts build one file. So are its figures measured at other shares of the cores (ranks per
 * core): the figures of this run replace those of its own share only, and a communicator uses the set of
 * the share nearest its own (chorusrun -n 2, -n 4 and -n 8 on 2 cores: shares 1, 2 and 4). Rank 0 writes
 * the file. docs/tuning.md.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chorus/chorus.h"
#include "core/comm_info.h"
#include "tune/tune.h"
#include "util/params.h"
#include "util/util.h"

/* Passes of the measurement; each figure is their median. On a shared virtual machine a slow phase can
 * last ten seconds and more, longer than a pass: one pass there measured the arena's reads at 3.4 GB/s
 * in cache (and 4.9 in memory), the next two 22.6 and 23.4. --passes and --spread take more passes, and
 * spread them over minutes, for a file meant to outlast the phase it was measured in. */
#define TUNE_PASSES 3

static int fail(chorus_comm_t comm, const char *what, chorus_result_t res)
{
    fprintf(stderr, "chorus-tune: %s: %s: %s\n", what, chorus_result_name(res),
            comm ? chorus_comm_last_error(comm) : chorus_strerror(res));
    return 1;
}

/* The sweep: whole-buffer sizes from TUNE_SWEEP_MIN (--fit alone: from TUNE_FIT_FROM, the sizes it fits
 * from) to the --max-bytes, by a factor of 4. */
#define TUNE_SWEEP_MIN 1024.0
#define TUNE_SWEEP_MAX_SIZES 24
#define TUNE_REPS 5           /* each algorithm's time at a size: the median of this many turns */
#define TUNE_BUDGET_S 3e-3    /* a turn's timed calls take about this long, and as many warm it up */
#define TUNE_KEEP_WITHIN 1.05 /* the previous size's winner stays while within 5 % of the fastest */
#define TUNE_DROP_OVER 3.0    /* from TUNE_DROP_FROM bytes, an algorithm over 3x the fastest (--drop-over) is not */
#define TUNE_DROP_FROM 1048576.0 /* timed at larger sizes (below, latency can hide a bandwidth winner) */

typedef struct sweep {
    chorus_comm_t comm;
    int rank, nranks;
    void *send, *recv;
    tune_params_t *tp; /* the figures the efficiencies are fitted against, and where they go */
    double from;       /* the sweep's first size */
    double drop_over;  /* TUNE_DROP_OVER, or --drop-over's (0: none dropped) */
    struct settle *settle; /* the run's waiting for slow stretches */
} sweep_t;

/* One out-of-place call moving n bytes in all, float32 (sum where it reduces), as algo_shape_t counts. */
static chorus_result_t sweep_call(const sweep_t *s, coll_kind_t coll, double n)
{
    size_t count = (size_t)(n / 4), per_rank = count / (size_t)s->nranks;
    switch (coll) {
    case COLL_ALLREDUCE: return chorus_allreduce(s->send, s->recv, count, chorus_float32, chorus_sum, s->comm, NULL);
    case COLL_ALLGATHER: return chorus_allgather(s->send, s->recv, per_rank, chorus_float32, s->comm, NULL);
    case COLL_REDUCE_SCATTER:
        return chorus_reduce_scatter(s->send, s->recv, per_rank, chorus_float32, chorus_sum, s->comm, NULL);
    case COLL_BROADCAST: return chorus_broadcast(s->send, s->recv, count, chorus_float32, 0, s->comm, NULL);
    case COLL_REDUCE: return chorus_reduce(s->send, s->recv, count, chorus_float32, chorus_sum, 0, s->comm, NULL);
    case COLL_ALLTOALL: return chorus_alltoall(s->send, s->recv, per_rank, chorus_float32, s->comm, NULL);
    default: return CHORUS_ERR_INVALID_ARGUMENT;
    }
}

/* Seconds per call of `iters` calls after a barrier, the slowest rank's (the same on every rank). */
static chorus_result_t sweep_time(const sweep_t *s, coll_kind_t coll, double n, int iters, double *sec_p)
{
    chorus_result_t res = chorus_barrier(s->comm, NULL);
    int64_t t0 = time_now_ns();
    for (int i = 0; res == CHORUS_SUCCESS && i < iters; i++) res = sweep_call(s, coll, n);
    double t = (double)(time_now_ns() - t0) * 1e-9 / iters;
    if (res == CHORUS_SUCCESS) res = chorus_allreduce(&t, &t, 1, chorus_float64, chorus_max, s->comm, NULL);
    *sec_p = t;
    return res;
}

/* Calls of `algo` only, for coll, from now on (every rank alike). */
static chorus_result_t sweep_force(const sweep_t *s, coll_kind_t coll, const char *algo)
{
    char forced[96];
    snprintf(forced, sizeof(forced), "%s:%s", coll_name(coll), algo);
    return comm_set_algo(s->comm, forced);
}

/* Timed calls for about TUNE_BUDGET_S, from one call's seconds (2 to 1000). */
static int sweep_iters(double once) { return (int)fmin(1000, fmax(2, TUNE_BUDGET_S / fmax(once, 1e-7))); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The sizes of the sweep and, per size, the registry entry that was fastest. */
typedef struct sweep_result {
    int nsizes;
    double size[TUNE_SWEEP_MAX_SIZES];
    size_t winner[TUNE_SWEEP_MAX_SIZES];
} sweep_result_t;

#define SWEEP_ALGOS_MAX 64

/* One collective's sweep: its algorithms, and per algorithm and size the turns' times. */
typedef struct sweep_coll {
    coll_kind_t coll;
    int nalgos;
    size_t algos[SWEEP_ALGOS_MAX]; /* registry entries */
    int until[SWEEP_ALGOS_MAX];    /* the sizes an algorithm is timed at: those before this index, */
    int also[SWEEP_ALGOS_MAX];     /* and this one (-1: none), a dropped one's first size mostly in memory */
    int32_t memory[TUNE_SWEEP_MAX_SIZES]; /* 1: the size lies mostly in memory (sweep_coll_init) */
    int iters[SWEEP_ALGOS_MAX][TUNE_SWEEP_MAX_SIZES];
    double t[SWEEP_ALGOS_MAX][TUNE_SWEEP_MAX_SIZES][TUNE_REPS];
    sweep_result_t result;
} sweep_coll_t;

/* The algorithms of sc->coll the communicator supports, the sweep's sizes, and which of them lie mostly in
 * memory: the model's memory share at least a half, as tune_fit_efficiency sorts them (the collective's
 * share, the same for each of its algorithms), by rank 0's figures, which every rank then holds (the
 * others' arena profiles are their own timings, and where they put a size decides which calls a
 * dropped algorithm makes: sweep_drop). */
static chorus_result_t sweep_coll_init(const sweep_t *s, coll_kind_t coll, double max_bytes, sweep_coll_t *sc)
{
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    sc->coll = coll;
    sc->nalgos = 0;
    sc->result.nsizes = 0;
    for (double n = s->from; n <= max_bytes && sc->result.nsizes < TUNE_SWEEP_MAX_SIZES; n *= 4)
        sc->result.size[sc->result.nsizes++] = n;
    for (size_t i = 0; i < count && sc->nalgos < SWEEP_ALGOS_MAX; i++)
        if (table[i].coll == coll && algo_supported(&table[i], comm_algo_caps(s->comm))) {
            sc->until[sc->nalgos] = sc->result.nsizes;
            sc->also[sc->nalgos] = -1;
            sc->algos[sc->nalgos++] = i;
        }
    for (int k = 0; k < sc->result.nsizes && sc->nalgos > 0; k++) {
        double latency, rest, f;
        tune_predict_parts(s->tp, comm_tune_comm(s->comm), &table[sc->algos[0]], sc->result.size[k], &latency, &rest,
                           &f);
        sc->memory[k] = f >= 0.5;
    }
    return chorus_broadcast(sc->memory, sc->memory, TUNE_SWEEP_MAX_SIZES, chorus_int32, 0, s->comm, NULL);
}

static double sweep_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

/* Whether algorithm a of sc is timed at size k. */
static int sweep_timed(const sweep_coll_t *sc, int a, int k) { return k < sc->until[a] || k == sc->also[a]; }

/* Algorithm a of sc, dropped after size k: where none of the sizes it was timed at lies mostly in memory
 * (sc->memory), it is timed once more at the first that does, so that both its efficiencies are
 * fitted. Without it, one dropped at the first size kept its efficiency in cache for memory too: on 8
 * ranks and 2 cores of an AMD EPYC virtual machine the mesh and recursive-doubling AllReduces, dropped at
 * 1 MiB with 3.27 and 3.43 in cache, then ran at 0.30 to 0.42 of their prices from 4 MiB (docs/tuning.md,
 * "Efficiencies: chorus-tune --fit"). */
static void sweep_drop(sweep_coll_t *sc, int a, int k)
{
    sc->until[a] = k + 1;
    for (int i = 0; i < sc->result.nsizes; i++)
        if (sc->memory[i]) {
            if (i > k) sc->also[a] = i;
            return;
        }
}

/* One turn of sc: every algorithm in turn at each size. The first turn times one call to size the
 * others (about TUNE_BUDGET_S, the same on every rank), and from TUNE_DROP_FROM bytes stops timing, at
 * larger sizes, an algorithm over s->drop_over times the fastest of that turn, timed twice (but for
 * one size mostly in memory: sweep_drop). */
static chorus_result_t sweep_turn(const sweep_t *s, sweep_coll_t *sc, int rep)
{
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    for (int k = 0; k < sc->result.nsizes; k++) {
        double n = sc->result.size[k], best = INFINITY;
        for (int a = 0; a < sc->nalgos; a++) {
            if (!sweep_timed(sc, a, k)) continue;
            CHECK(sweep_force(s, sc->coll, table[sc->algos[a]].name));
            /* One call, then as many warm-up calls as timed ones, as chorus-perf's defaults do. */
            double once, warm;
            CHECK(sweep_time(s, sc->coll, n, 1, &once));
            if (rep == 0) sc->iters[a][k] = sweep_iters(once);
            CHECK(sweep_time(s, sc->coll, n, sc->iters[a][k], &warm));
            CHECK(sweep_time(s, sc->coll, n, sc->iters[a][k], &sc->t[a][k][rep]));
            /* The fastest of those not dropped, which is then never dropped itself: a dropped one timed in
             * memory (sweep_drop) could otherwise drop every other and leave the next size with none. */
            if (k < sc->until[a]) best = fmin(best, sc->t[a][k][rep]);
        }
        /* Timed a second time before it is dropped, and that time kept: a slow stretch of the machine can
         * cover one timing (one fit dropped the 4-rank ring AllGather at 4 MiB, where it ran close to the
         * direct one in the grid after). */
        for (int a = 0; rep == 0 && n >= TUNE_DROP_FROM && a < sc->nalgos; a++) {
            if (k >= sc->until[a] || !(s->drop_over > 0) || sc->t[a][k][rep] <= best * s->drop_over) continue;
            CHECK(sweep_force(s, sc->coll, table[sc->algos[a]].name));
            CHECK(sweep_time(s, sc->coll, n, sc->iters[a][k], &sc->t[a][k][rep]));
            if (sc->t[a][k][rep] > best * s->drop_over) sweep_drop(sc, a, k);
        }
    }
    return comm_set_algo(s->comm, getenv("CHORUS_ALGO")); /* as the run began */
}

/* After the turns: each algorithm's median at each size, the fastest per size into sc->result, and each
 * one's efficiency (tune_fit_efficiency) into s->tp. Rank 0 prints the table and the efficiencies. */
static void sweep_coll_finish(const sweep_t *s, sweep_coll_t *sc)
{
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    sweep_result_t *out = &sc->result;
    double took[SWEEP_ALGOS_MAX][TUNE_SWEEP_MAX_SIZES]; /* per algorithm and size: the median, 0 where not timed */
    if (sc->nalgos == 0) {
        out->nsizes = 0;
        return;
    }
    if (s->rank == 0) {
        printf("# %s on %d ranks, us per call (median of %d turns; -: dropped, over %gx the fastest at a size from "
               "1M, but for one size mostly in memory)\n%10s",
               coll_name(sc->coll), s->nranks, TUNE_REPS, s->drop_over, "bytes");
        for (int a = 0; a < sc->nalgos; a++) printf(" %10s", table[sc->algos[a]].name);
        printf("  fastest\n");
    }
    for (int k = 0; k < out->nsizes; k++) {
        int best = -1;
        for (int a = 0; a < sc->nalgos; a++) {
            took[a][k] = sweep_timed(sc, a, k) ? sweep_median(sc->t[a][k], TUNE_REPS) : 0;
            if (took[a][k] > 0 && (best < 0 || took[a][k] < took[best][k])) best = a;
        }
        /* Ties within the noise keep the previous size's winner: fewer rules, and no flapping. */
        for (int a = 0; k > 0 && a < sc->nalgos; a++)
            if (took[a][k] > 0 && sc->algos[a] == out->winner[k - 1] && took[a][k] <= took[best][k] * TUNE_KEEP_WITHIN)
                best = a;
        out->winner[k] = sc->algos[best];
        if (s->rank == 0) {
            printf("%10.0f", out->size[k]);
            for (int a = 0; a < sc->nalgos; a++)
                took[a][k] > 0 ? printf(" %10.2f", took[a][k] * 1e6) : printf(" %10s", "-");
            printf("  %s\n", table[sc->algos[best]].name);
        }
    }
    if (s->rank == 0) {
        printf("# mostly in memory (the model's memory share at least a half; the others in cache):");
        for (int k = 0; k < out->nsizes; k++)
            if (sc->memory[k]) printf(" %.0f", out->size[k]);
        printf("\n");
    }
    const tune_comm_t *tc = comm_tune_comm(s->comm);
    if (s->rank == 0)
        printf("# efficiency in cache/memory (time over the model's price past the latencies, medians from %.0f MiB):",
               TUNE_FIT_FROM / 1048576);
    for (int a = 0; a < sc->nalgos; a++) {
        /* The sizes it was timed at (a dropped algorithm up to where it was dropped, and sweep_drop's). */
        double sizes[TUNE_SWEEP_MAX_SIZES], times[TUNE_SWEEP_MAX_SIZES];
        int k = 0;
        for (int i = 0; i < out->nsizes; i++)
            if (took[a][i] > 0) {
                sizes[k] = out->size[i];
                times[k++] = took[a][i];
            }
        double *e = s->tp->efficiency[tc->net][sc->algos[a]];
        tune_fit_efficiency(s->tp, tc, &table[sc->algos[a]], sizes, times, k, e);
        if (s->rank == 0)
            e[TUNE_CACHE] > 0 ? printf(" %s %.2f/%.2f", table[sc->algos[a]].name, e[TUNE_CACHE], e[TUNE_MEMORY])
                              : printf(" %s -", table[sc->algos[a]].name);
    }
    if (s->rank == 0) {
        printf("\n");
        fflush(stdout);
    }
}

/* Waiting out the machine's slow stretches. The AMD EPYC machine has stretches of seconds to minutes in which the
 * algorithms over the shared-memory rings take two to four times as long (the 4-rank ring AllGather of 1 MiB 426 us
 * a call through a whole sweep, 206 in one an hour before; docs/tuning.md, "Efficiencies fitted over turns of the
 * whole sweep"): fitted there, their efficiencies priced them at three times what they took later, and figures
 * measured there price every call slow. With --fit or --rules, before each pass of the figures and each
 * collective's turn of a sweep, a look at the handoff of TUNE_CACHE_BYTES between two threads against two local
 * copies (tune_handoff_ratio): about 1.2 there outside the stretches, 4 to 6 inside, for minutes at a time
 * (docs/tuning.md, "A look that needs no fast turn"). A sweep's turn also looks at its ring AllGather of
 * TUNE_CACHE_BYTES (or of the sweep's largest size, where that is smaller) against the fastest such look of the
 * sweep. Where the handoff runs past SETTLE_HANDOFF, or the ring past SETTLE_FACTOR times its fastest, the run
 * waits for the stretch to pass, looking every SETTLE_PAUSE_S, up to SETTLE_WAIT_S at a time, and in all no longer
 * than it has measured (so a run takes at most about twice its time) nor SETTLE_TOTAL_S, and then goes on whatever
 * the looks say: a machine whose handoffs always cost more than SETTLE_HANDOFF copies waits that long and no
 * longer. */
#define SETTLE_FACTOR 1.6
#define SETTLE_HANDOFF 2.0
#define SETTLE_PAUSE_S 2
#define SETTLE_WAIT_S 60
#define SETTLE_TOTAL_S 600

typedef struct settle {
    int64_t start; /* when the run began */
    double waited; /* seconds waited in all */
} settle_t;

/* Whether the run may wait SETTLE_PAUSE_S more, `waited` seconds into this wait: the same answer on every
 * rank (rank 0's clock). */
static chorus_result_t settle_may_wait(chorus_comm_t comm, const settle_t *st, double waited, int *may_p)
{
    double measured = (double)(time_now_ns() - st->start) * 1e-9 - st->waited;
    CHECK(chorus_broadcast(&measured, &measured, 1, chorus_float64, 0, comm, NULL));
    *may_p = waited < SETTLE_WAIT_S && st->waited + SETTLE_PAUSE_S <= fmin(measured, SETTLE_TOTAL_S);
    return CHORUS_SUCCESS;
}

/* Waits SETTLE_PAUSE_S, every rank alike, and lines them up again. */
static chorus_result_t settle_pause(chorus_comm_t comm, settle_t *st, double *waited)
{
    sleep(SETTLE_PAUSE_S);
    *waited += SETTLE_PAUSE_S;
    st->waited += SETTLE_PAUSE_S;
    return chorus_barrier(comm, NULL);
}

/* Rank 0's tune_handoff_ratio, on every rank (the others wait in the broadcast). */
static chorus_result_t settle_handoff(chorus_comm_t comm, double *ratio_p)
{
    int rank;
    chorus_comm_rank(comm, &rank);
    *ratio_p = rank == 0 ? tune_handoff_ratio() : 0;
    return chorus_broadcast(ratio_p, ratio_p, 1, chorus_float64, 0, comm, NULL);
}

/* Before a pass of the figures: the handoff's look alone. */
static chorus_result_t settle_pass(chorus_comm_t comm, settle_t *st, int pass)
{
    double ratio, waited = 0;
    int may, rank;
    chorus_comm_rank(comm, &rank);
    CHECK(settle_handoff(comm, &ratio));
    while (ratio > SETTLE_HANDOFF) {
        CHECK(settle_may_wait(comm, st, waited, &may));
        if (!may) break;
        CHECK(settle_pause(comm, st, &waited));
        CHECK(settle_handoff(comm, &ratio));
    }
    if (waited > 0 && rank == 0)
        printf("# pass %d: a handoff %.2f times its copies; %safter %.0f s of waiting\n", pass + 1, ratio,
               ratio > SETTLE_HANDOFF ? "still slow " : "", waited);
    return CHORUS_SUCCESS;
}

/* A sweep's looks: its ring AllGather's size, calls and fastest time. */
typedef struct sweep_settle {
    int iters;    /* calls a look times (0: not sized yet) */
    double best;  /* the fastest look's seconds a call */
    double bytes; /* a look's size: TUNE_CACHE_BYTES, or the sweep's largest where that is smaller */
} sweep_settle_t;

/* The looks: *sec_p, seconds a call of the ring AllGather; *handoff_p, settle_handoff's. */
static chorus_result_t settle_look(const sweep_t *s, sweep_settle_t *ss, double *sec_p, double *handoff_p)
{
    CHECK(sweep_force(s, COLL_ALLGATHER, "ring"));
    double once;
    CHECK(sweep_time(s, COLL_ALLGATHER, ss->bytes, 1, &once));
    if (!ss->iters) ss->iters = sweep_iters(once);
    CHECK(sweep_time(s, COLL_ALLGATHER, ss->bytes, ss->iters, sec_p));
    CHECK(settle_handoff(s->comm, handoff_p));
    return comm_set_algo(s->comm, getenv("CHORUS_ALGO"));
}

/* Whether the looks say the machine is in a slow stretch. */
static int settle_slow(const sweep_settle_t *ss, double t, double handoff)
{
    return t > SETTLE_FACTOR * ss->best || handoff > SETTLE_HANDOFF;
}

static chorus_result_t sweep_settle(const sweep_t *s, sweep_settle_t *ss, coll_kind_t coll, int rep)
{
    double t, handoff, waited = 0;
    int may;
    CHECK(settle_look(s, ss, &t, &handoff));
    if (ss->best == 0 || t < ss->best) ss->best = t;
    while (settle_slow(ss, t, handoff)) {
        CHECK(settle_may_wait(s->comm, s->settle, waited, &may));
        if (!may) break;
        CHECK(settle_pause(s->comm, s->settle, &waited));
        CHECK(settle_look(s, ss, &t, &handoff));
        if (t < ss->best) ss->best = t;
    }
    if (waited > 0 && s->rank == 0)
        printf("# turn %d, %s: the ring AllGather of %.0f bytes took %.1f us, %.2f times the sweep's fastest, a "
               "handoff %.2f times its copies; %safter %.0f s of waiting\n", rep + 1, coll_name(coll), ss->bytes,
               t * 1e6, t / ss->best, handoff, settle_slow(ss, t, handoff) ? "still slow " : "", waited);
    return CHORUS_SUCCESS;
}

/* Appends to tf one rule per run of sizes with the same winner, the bounds halfway (geometrically)
 * between the last size of a run and the first of the next. */
static int add_rules(tune_file_t *tf, coll_kind_t coll, int nranks, tune_link_t link, const sweep_result_t *r)
{
    for (int i = 0; i < r->nsizes;) {
        int j = i;
        while (j + 1 < r->nsizes && r->winner[j + 1] == r->winner[i]) j++;
        if (tf->nrules == TUNE_MAX_RULES) {
            fprintf(stderr, "chorus-tune: more than %d rules; keep fewer rank counts in one file\n", TUNE_MAX_RULES);
            return -1;
        }
        tf->rules[tf->nrules++] = (tune_rule_t){
            .coll = coll,
            .entry = r->winner[i],
            .min_ranks = nranks,
            .max_ranks = nranks,
            .min_bytes = i > 0 ? round(sqrt(r->size[i - 1] * r->size[i])) : 0,
            .max_bytes = j + 1 < r->nsizes ? round(sqrt(r->size[j] * r->size[j + 1])) : 0,
            .links = 1u << link,
            .place = TUNE_PLACE_OUT,
        };
        i = j + 1;
    }
    return 0;
}

/* Times every algorithm of every collective on this communicator and fits their efficiencies into
 * tf->params (whose figures must be this communicator's link's); with `rules`, derives the rules of its
 * rank count and link into tf too (rank 0's counts). */
static chorus_result_t sweep_all(chorus_comm_t comm, tune_link_t link, double max_bytes, double drop_over,
                                 tune_file_t *tf, int rules, settle_t *st)
{
    sweep_t s = {.comm = comm, .tp = &tf->params, .from = rules ? TUNE_SWEEP_MIN : TUNE_FIT_FROM,
                 .drop_over = drop_over, .settle = st};
    chorus_comm_rank(comm, &s.rank);
    chorus_comm_size(comm, &s.nranks);
    s.send = tune_alloc((size_t)max_bytes);
    s.recv = tune_alloc((size_t)max_bytes);
    if (!s.send || !s.recv) {
        free(s.send);
        free(s.recv);
        return CHORUS_ERR_NO_MEMORY;
    }
    /* Ones: sums stay exact and far from the denormals that would slow the reduction kernels. */
    for (size_t i = 0; i < (size_t)max_bytes / 4; i++) ((float *)s.send)[i] = 1.0f;
    if (s.rank == 0)
        printf("# every algorithm on %d ranks over %s, out of place%s\n", s.nranks, tune_link_name(link),
               rules ? ", and the rules it makes" : "");
    static const coll_kind_t colls[] = {COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCE_SCATTER,
                                        COLL_BROADCAST, COLL_REDUCE,    COLL_ALLTOALL};
    enum { NCOLLS = sizeof(colls) / sizeof(colls[0]) };
    sweep_coll_t *sc = calloc(NCOLLS, sizeof(*sc));
    chorus_result_t res = sc ? CHORUS_SUCCESS : CHORUS_ERR_NO_MEMORY;
    for (int c = 0; sc && c < NCOLLS && res == CHORUS_SUCCESS; c++)
        res = sweep_coll_init(&s, colls[c], max_bytes, &sc[c]);
    /* Turn after turn of the whole sweep, so that the turns of one point lie spread over it: the AMD EPYC
     * machine runs in stretches of seconds to minutes in which the shared-memory rings take several times
     * as long (docs/tuning.md, "Two modes"), and five turns back to back fell into one stretch together. */
    sweep_settle_t settle = {.bytes = fmin(TUNE_CACHE_BYTES, max_bytes)};
    for (int rep = 0; res == CHORUS_SUCCESS && rep < TUNE_REPS; rep++)
        for (int c = 0; res == CHORUS_SUCCESS && c < NCOLLS; c++) {
            res = sweep_settle(&s, &settle, colls[c], rep);
            if (res == CHORUS_SUCCESS) res = sweep_turn(&s, &sc[c], rep);
        }
    for (int c = 0; res == CHORUS_SUCCESS && c < NCOLLS; c++) {
        sweep_coll_finish(&s, &sc[c]);
        if (rules && s.rank == 0 && add_rules(tf, colls[c], s.nranks, link, &sc[c].result) != 0)
            res = CHORUS_ERR_INVALID_ARGUMENT;
    }
    free(sc);
    free(s.send);
    free(s.recv);
    return res;
}

/* What of an existing file at path this run does not measure anew, kept in tf: the rules of other rank
 * counts or links (or written by hand), and the sets of figures of other shares of the cores. A missing
 * file has none; one that cannot be read is an error. */
static int keep_from(const char *path, int nranks, const int derived[TUNE_LINK_COUNT], tune_file_t *tf)
{
    if (access(path, F_OK) != 0) return 0;
    tune_file_t *old = calloc(1, sizeof(*old));
    char err[512];
    if (!old) return -1;
    tune_params_builtin(&old->params, 1);
    if (tune_file_read(path, old, err, sizeof(err)) != CHORUS_SUCCESS) {
        fprintf(stderr, "chorus-tune: cannot keep the rules and figures of %s: %s (remove it, or write elsewhere with -o)\n",
                path, err);
        free(old);
        return -1;
    }
    for (int r = 0; r < old->nrules; r++) {
        const tune_rule_t *rule = &old->rules[r];
        int mine = rule->min_ranks == nranks && rule->max_ranks == nranks && rule->links;
        for (int l = 0; l < TUNE_LINK_COUNT; l++)
            if (rule->links >> l & 1 && !derived[l]) mine = 0;
        if (!mine) tf->rules[tf->nrules++] = *rule;
    }
    for (int i = 0; i < old->nsets; i++) {
        tf->set[i] = old->set[i];
        tf->set_share[i] = old->set_share[i];
    }
    tf->nsets = old->nsets;
    free(old);
    return 0;
}

/* How many passes, and over how many seconds their starts are spread (0: back to back). */
typedef struct passes {
    int count;
    double spread_s;
} passes_t;

/* The parameters of comm's links: the median of the passes' measurements, the passes' starts spread
 * evenly over the spread (every rank sleeps alike, then a barrier lines them up); with st, each pass
 * after the machine's slow stretch, if any (settle_pass). */
static chorus_result_t measure(chorus_comm_t comm, const passes_t *ps, settle_t *st, tune_params_t *tp,
                               tune_link_t *link_p, double *share_p)
{
    tune_params_t runs[TUNE_MEDIAN_MAX];
    int64_t start = time_now_ns();
    for (int i = 0; i < ps->count; i++) {
        if (i > 0 && ps->spread_s > 0) {
            double due = ps->spread_s * i / (ps->count - 1), now = (double)(time_now_ns() - start) * 1e-9;
            if (due > now) {
                double left = due - now;
                struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
                while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {} /* interrupted: the rest */
            }
            CHECK(chorus_barrier(comm, NULL));
        }
        if (st) CHECK(settle_pass(comm, st, i));
        CHECK(comm_tune_measure(comm, &runs[i], link_p, share_p));
    }
    comm_tune_median(comm, tp, runs, ps->count);
    return CHORUS_SUCCESS;
}

int main(int argc, char **argv)
{
    const char *out = "chorus-tuning.txt";
    int rules = 0, fit = 0;
    int64_t max_bytes = 64 << 20;
    double drop_over = TUNE_DROP_OVER;
    passes_t ps = {TUNE_PASSES, 0};
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--rules") == 0)
            rules = fit = 1;
        else if (strcmp(argv[i], "--fit") == 0)
            fit = 1;
        else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc && params_parse_size(argv[i + 1], &max_bytes) == 0 &&
                 max_bytes >= TUNE_SWEEP_MIN)
            i++;
        else if (strcmp(argv[i], "--passes") == 0 && i + 1 < argc &&
                 (ps.count = (int)strtol(argv[i + 1], &end, 10), *end == 0) && ps.count >= 1 &&
                 ps.count <= TUNE_MEDIAN_MAX)
            i++;
        else if (strcmp(argv[i], "--drop-over") == 0 && i + 1 < argc &&
                 (drop_over = strtod(argv[i + 1], &end), *end == 0) && (drop_over == 0 || drop_over >= 1))
            i++;
        else if (strcmp(argv[i], "--spread") == 0 && i + 1 < argc &&
                 (ps.spread_s = strtod(argv[i + 1], &end), *end == 0) && ps.spread_s >= 0 && ps.spread_s <= 3600)
            i++;
        else {
            fprintf(stderr,
                    "usage: chorusrun -n N chorus-tune [-o FILE] [--passes K] [--spread S] [--fit | --rules]\n"
                    "                                  [--max-bytes SIZE] [--drop-over X]\n"
                    "  -o FILE            the tuning file to write (default: %s); rules it holds for other rank\n"
                    "                     counts or links, and figures for other shares of the cores, are kept\n"
                    "  --passes K         measure K times, 1 to %d, and write each figure's median (default %d)\n"
                    "  --spread S         spread the passes' starts over S seconds, up to 3600 (default 0: back to\n"
                    "                     back); on a shared machine whose speed moves for minutes at a time, a\n"
                    "                     file from passes minutes apart is less the one phase it was measured in\n"
                    "  --fit              also time every algorithm of every collective on N ranks, 1M to SIZE\n"
                    "                     bytes, and write each one's efficiency: its time over the model's price\n"
                    "                     past the latencies (a few minutes: it waits out the machine's slow\n"
                    "                     stretches, at most about as long again)\n"
                    "  --rules            --fit from 1K, and write the fastest at each size as rules\n"
                    "  --max-bytes SIZE   the sweep's largest size, at least 1K (default 64M)\n"
                    "  --drop-over X      from 1M, time an algorithm over X times the fastest at a size at larger\n"
                    "                     sizes no more, but for its first one mostly in memory (X at least 1;\n"
                    "                     default %g; 0: time every algorithm at every size)\n",
                    out, TUNE_MEDIAN_MAX, TUNE_PASSES, TUNE_DROP_OVER);
            if (strcmp(argv[i], "-h") != 0)
                fprintf(stderr, "chorus-tune: cannot use \"%s%s%s\"\n", argv[i], i + 1 < argc ? " " : "",
                        i + 1 < argc ? argv[i + 1] : "");
            return strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    chorus_comm_t comm, tcp_comm;
    chorus_result_t res = chorus_comm_init_from_env(&comm);
    if (res != CHORUS_SUCCESS) return fail(NULL, "chorus_comm_init_from_env (run under chorusrun)", res);
    int rank, nranks;
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &nranks);
    if (nranks < 2) {
        fprintf(stderr, "chorus-tune: needs two ranks or more (chorusrun -n 2 chorus-tune)\n");
        chorus_comm_destroy(comm);
        return 2;
    }
    tune_file_t *tf = calloc(1, sizeof(*tf));
    if (!tf) return fail(comm, "memory for the tuning file", CHORUS_ERR_NO_MEMORY);
    settle_t settle = {.start = time_now_ns()};
    tune_params_t tcp;
    tune_link_t link, tcp_link = TUNE_LINK_COUNT;
    double share, tcp_share;
    if ((res = measure(comm, &ps, fit ? &settle : NULL, &tf->params, &link, &share)) != CHORUS_SUCCESS)
        return fail(comm, "measuring", res);
    if (fit && (res = sweep_all(comm, link, (double)max_bytes, drop_over, tf, rules, &settle)) != CHORUS_SUCCESS)
        return fail(comm, "timing the algorithms", res);
    if (link == TUNE_LINK_SHM) {
        /* The TCP path of this host: a second communicator over loopback (or CHORUS_SOCKET_IFNAME), its
         * unique id sent through the first. */
        chorus_unique_id_t id;
        if (rank == 0 && (res = chorus_get_unique_id(&id)) != CHORUS_SUCCESS) return fail(NULL, "unique id", res);
        if ((res = chorus_broadcast(&id, &id, sizeof(id), chorus_uint8, 0, comm, NULL)) != CHORUS_SUCCESS)
            return fail(comm, "broadcast of the unique id", res);
        setenv("CHORUS_TRANSPORT", "tcp", 1);
        if ((res = chorus_comm_init_rank(&tcp_comm, nranks, id, rank)) != CHORUS_SUCCESS)
            return fail(NULL, "the TCP communicator", res);
        if ((res = measure(tcp_comm, &ps, fit ? &settle : NULL, &tcp, &tcp_link, &tcp_share)) != CHORUS_SUCCESS)
            return fail(tcp_comm, "measuring TCP", res);
        /* The file's TCP figures, before the sweep fits the TCP efficiencies against them. */
        tune_params_t *tp = &tf->params;
        tp->alpha[TUNE_LINK_TCP] = tcp.alpha[TUNE_LINK_TCP];
        memcpy(tp->beta[TUNE_LINK_TCP], tcp.beta[TUNE_LINK_TCP], sizeof(tp->beta[TUNE_LINK_TCP]));
        memcpy(tp->beta_oneway[TUNE_LINK_TCP], tcp.beta_oneway[TUNE_LINK_TCP], sizeof(tp->beta_oneway[TUNE_LINK_TCP]));
        if (fit &&
            (res = sweep_all(tcp_comm, tcp_link, (double)max_bytes, drop_over, tf, rules, &settle)) != CHORUS_SUCCESS)
            return fail(tcp_comm, "timing the algorithms over TCP", res);
        chorus_comm_destroy(tcp_comm);
    }
    chorus_comm_destroy(comm);
    if (rank != 0) {
        free(tf);
        return 0;
    }
    /* This run's rules go after the ones kept: a rank count and link of their own, they never overlap. */
    int derived[TUNE_LINK_COUNT] = {0};
    if (rules) {
        derived[link] = 1;
        if (tcp_link < TUNE_LINK_COUNT) derived[tcp_link] = 1;
    }
    tune_file_t *merged = calloc(1, sizeof(*merged));
    if (!merged || keep_from(out, nranks, derived, merged) != 0) {
        free(merged);
        free(tf);
        return 1;
    }
    if (merged->nrules + tf->nrules > TUNE_MAX_RULES) {
        fprintf(stderr, "chorus-tune: %s keeps %d rules and this run derived %d: more than the %d a file may hold; "
                "write elsewhere with -o\n", out, merged->nrules, tf->nrules, TUNE_MAX_RULES);
        free(merged);
        free(tf);
        return 1;
    }
    for (int r = 0; r < tf->nrules; r++) merged->rules[merged->nrules++] = tf->rules[r];
    /* This run's figures replace the set of its share; the others' stay. */
    if (tune_file_put_set(merged, &tf->params, share) != 0) {
        fprintf(stderr, "chorus-tune: %s holds figures for %d shares of the cores already, the most a file may hold; "
                "write elsewhere with -o\n", out, TUNE_SETS_MAX);
        free(merged);
        free(tf);
        return 1;
    }
    char err[512];
    res = tune_file_write(out, merged, err, sizeof(err));
    free(merged);
    free(tf);
    if (res != CHORUS_SUCCESS) {
        fprintf(stderr, "chorus-tune: %s\n", err);
        return 1;
    }
    printf("chorus-tune: %d ranks; wrote %s:\n", nranks, out);
    FILE *f = fopen(out, "r");
    char line[512];
    while (f && fgets(line, sizeof(line), f))
        if (line[0] != '#') printf("  %s", line);
    if (f) fclose(f);
    return 0;
}
