/* The watch over the model's and the built-in rules' choices as calls run: tune.h says what it does and why. */
#include <math.h>
#include <stdlib.h>

#include "tune/tune.h"
#include "util/log.h"
#include "util/util.h"

#define TUNE_WATCH_ALGOS 8      /* the cheapest this many of the algorithms the model chose among */
#define TUNE_WATCH_HOLD_MAX 64  /* the most looks a slow algorithm is held off */

struct tune_watch {
    int nalgos; /* 0: the bucket is not watched */
    int close;  /* tune_among_t's */
    int run;    /* algos[run] is what its calls run now */
    const algo_desc_t *algos[TUNE_WATCH_ALGOS];
    /* What each took over its price at its last look and at its best (INFINITY until it has run); looks
     * left before one that was left for running slow is expected at its best again; and how many it was
     * held off last time. */
    double last[TUNE_WATCH_ALGOS], low[TUNE_WATCH_ALGOS];
    int hold[TUNE_WATCH_ALGOS], held[TUNE_WATCH_ALGOS];
    /* algos[single] works by single copy, where algos[0] works in the host arena alone, among a built-in
     * rule's several (-1: none such); stretch: the watch began on it, algos[0] not yet run, for a stretch
     * of streamed slot copies (tune_watch_get). */
    int single, stretch;
    int calls;         /* of the current look */
    int tries;         /* looks in a row that called for a try */
    double seconds[TUNE_WATCH_MAX_CALLS];
};

/* What the buckets that are not watched point to. */
static tune_watch_t tune_watch_none;

/* A look's agreement, an 8-byte AllReduce: the arena's one-shot where there is one. */
static algo_run_fn tune_watch_look_algo(const tune_comm_t *tc)
{
    return tc->caps.direct ? allreduce_oneshot : allreduce_rd;
}

/* The agreement: every rank's figure, the smallest of them, and whether any rank's slot copies stream, on
 * every rank. */
static chorus_result_t tune_watch_agree(prims_t *p, const tune_comm_t *tc, double *v, int *streaming)
{
    double both[2] = {*v, -(double)*streaming};
    coll_args_t a = {.coll = COLL_ALLREDUCE, .sendbuf = both, .recvbuf = both, .count = 2,
                     .dtype = chorus_float64, .op = chorus_min};
    CHECK(tune_watch_look_algo(tc)(p, &a));
    *v = both[0];
    *streaming = both[1] < 0;
    return CHORUS_SUCCESS;
}

/* What a look's agreement costs by the model. */
static double tune_watch_look_price(const tune_state_t *ts)
{
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    algo_run_fn run = tune_watch_look_algo(&ts->comm);
    for (size_t i = 0; i < count; i++)
        if (table[i].run == run) return tune_predict(&ts->file.params, &ts->comm, &table[i], 2 * sizeof(double));
    return 0;
}

/* Whether the watch may run d in place of the choice: where the choice works through memory the ranks
 * share directly (the host arena, single copy), only an algorithm that does too. The slow stretches that
 * slow the arena slow the algorithms over the shared-memory rings more: tried in them, the 4-rank mesh
 * AllToAll of 16 MiB ran at 2.2 and 2.3 times its price in two grids, and the 4-rank star AllReduce of 64
 * MiB at 2.3 (docs/tuning.md, "The shared-memory grid in medians of three"). */
static int tune_watch_alike(const algo_desc_t *chosen, const algo_desc_t *d)
{
    const unsigned shared = ALGO_NEEDS_DIRECT | ALGO_NEEDS_SINGLE_COPY;
    return !(chosen->needs & shared) || (d->needs & shared);
}

/* A new watch: the algorithms of among this communicator supports and may run in the choice's place
 * (tune_watch_alike), the choice first and then the cheapest (by the model at n bytes), if the choice is
 * worth watching and has an alternative. */
static void tune_watch_fill(const tune_state_t *ts, tune_watch_t *w, const coll_args_t *a, tune_among_t among,
                            const algo_desc_t *chosen, double n)
{
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    struct {
        double price;
        const algo_desc_t *d;
    } all[64];
    int k = 0;
    for (size_t i = 0; i < count && i < 64; i++) {
        const algo_desc_t *d = &table[i];
        if (d->coll != a->coll || !(among.algos >> i & 1) || !algo_supported(d, &ts->comm.caps) ||
            !tune_watch_alike(chosen, d))
            continue;
        double t = d == chosen ? -1 : tune_predict(&ts->file.params, &ts->comm, d, n);
        int j = k++;
        for (; j > 0 && all[j - 1].price > t; j--) all[j] = all[j - 1];
        all[j].price = t;
        all[j].d = d;
    }
    if (k < 2 || all[0].d != chosen ||
        tune_predict(&ts->file.params, &ts->comm, chosen, n) < TUNE_WATCH_MIN_RATIO * tune_watch_look_price(ts))
        return;
    w->nalgos = k < TUNE_WATCH_ALGOS ? k : TUNE_WATCH_ALGOS;
    w->close = among.close;
    w->single = -1;
    for (int i = 0; i < w->nalgos; i++) {
        w->algos[i] = all[i].d;
        w->last[i] = w->low[i] = INFINITY;
        if (w->close && ts->comm.caps.oversubscribed && w->single < 0 &&
            (w->algos[i]->needs & ALGO_NEEDS_SINGLE_COPY) &&
            (chosen->needs & (ALGO_NEEDS_DIRECT | ALGO_NEEDS_SINGLE_COPY)) == ALGO_NEEDS_DIRECT)
            w->single = i;
    }
}

chorus_result_t tune_watch_get(tune_state_t *ts, const coll_args_t *a, tune_among_t among, const algo_desc_t **algo_p,
                               tune_watch_t **w_p)
{
    *w_p = NULL;
    if (!among.algos || ts->watch_calls <= 0) return CHORUS_SUCCESS;
    size_t bytes = algo_call_bytes(a, ts->comm.nranks);
    double mid;
    tune_watch_t **slot = &ts->watch[algo_in_place(a, ts->comm.nranks)][a->coll][tune_bucket(bytes, &mid)];
    if (!*slot) {
        tune_watch_t *w = calloc(1, sizeof(*w));
        if (!w) return CHORUS_ERR_NO_MEMORY;
        tune_watch_fill(ts, w, a, among, *algo_p, (double)bytes);
        if (!w->nalgos) {
            free(w);
            w = &tune_watch_none;
        } else if (ts->arena_streaming && w->single >= 0 && 2.0 * (double)bytes <= ts->comm.cache_share) {
            /* A stretch of streamed slot copies (tune.h): the first choice held off as one left at a look. */
            w->stretch = 1;
            w->run = w->single;
            w->hold[0] = w->held[0] = 2;
            LOG_INFO(LOG_SUB_TUNING, "%s of %zu bytes on %d ranks: the copies into the arena's slots stream on some "
                     "rank (a slow stretch of the caches): %s, and %s after %d looks (CHORUS_TUNE_WATCH=0 keeps the "
                     "first choice)", coll_name(a->coll), bytes, ts->comm.nranks, w->algos[w->run]->name,
                     w->algos[0]->name, w->hold[0]);
        }
        *slot = w;
    }
    if (!(*slot)->nalgos) return CHORUS_SUCCESS;
    *w_p = *slot;
    *algo_p = (*slot)->algos[(*slot)->run];
    return CHORUS_SUCCESS;
}

const algo_desc_t *tune_watch_current(const tune_state_t *ts, const coll_args_t *a, const algo_desc_t *d)
{
    double mid;
    const tune_watch_t *w =
        ts->watch[algo_in_place(a, ts->comm.nranks)][a->coll][tune_bucket(algo_call_bytes(a, ts->comm.nranks), &mid)];
    return w && w->nalgos ? w->algos[w->run] : d;
}

static int tune_watch_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* What algos[i] is expected to take over its price, once measured and not held off: its best, or its price
 * where it never ran at or under it. A best found in a slow stretch says nothing once the stretch has
 * passed: a first choice left at its first looks in one, its best there twice its price, would otherwise
 * stay left while the alternative runs within the margin of that (an early slow stretch, the machine still
 * starting the program's other processes, would keep every call of the size on the alternative). */
static double tune_watch_best(const tune_watch_t *w, int i)
{
    return w->low[i] < 1 ? w->low[i] : 1;
}

const algo_desc_t *tune_watch_decide(tune_state_t *ts, tune_watch_t *w, const coll_args_t *a, double fastest)
{
    double n = (double)algo_call_bytes(a, ts->comm.nranks), price[TUNE_WATCH_ALGOS], expect[TUNE_WATCH_ALGOS];
    int cur = w->run, best = cur, seen = 0;
    for (int i = 0; i < w->nalgos; i++) {
        price[i] = tune_predict(&ts->file.params, &ts->comm, w->algos[i], n);
        if (i == cur) {
            w->last[i] = fastest / price[i];
            if (w->last[i] < w->low[i]) w->low[i] = w->last[i];
            if (w->last[i] < TUNE_WATCH_MARGIN * tune_watch_best(w, i)) w->held[i] = 0; /* at its best: no hold */
        } else if (w->hold[i] > 0 && --w->hold[i] == 0)
            LOG_DEBUG(LOG_SUB_TUNING, "%s of %.0f bytes: %s is no longer held off", coll_name(a->coll), n,
                      w->algos[i]->name);
        seen += isfinite(w->last[i]);
    }
    /* Expected: what ran, as it ran; one held off, as it ran last; one seen before, at its best (or its
     * price: tune_watch_best). The others only while nothing but the first choice has run, and only once
     * it took more than the margin over its price (the rules and the model chose it; nothing says they were
     * wrong before it runs slow): at the margin over their price (the model's prices may be off as far for
     * every algorithm), or over the choice's among a built-in rule's several (measured to run close here;
     * the model's prices for them can be further apart than their times: at init on 8 ranks and 2 cores it
     * priced single copy's AllToAll at 1.5-1.75 times what it took, the direct one's at 0.9-1.3). One such
     * try: after it, the watch moves among what it has measured. Out of place only: the model prices the
     * call out of place, and in place an untried algorithm's price says less (8 ranks on 2 cores, AllToAll
     * of 16 to 64 MiB in place in a slow stretch: direct at 1.9 times its price, pairwise, tried, at
     * 3.1-3.3). */
    int explore = seen == 1 && w->last[cur] > TUNE_WATCH_MARGIN && !algo_in_place(a, ts->comm.nranks);
    for (int i = 0; i < w->nalgos; i++) {
        double over = i == cur || w->hold[i] > 0 ? w->last[i] : tune_watch_best(w, i);
        expect[i] = isfinite(w->last[i])   ? price[i] * over
                    : i == 0 && w->stretch ? (w->hold[0] > 0 ? INFINITY : price[0])
                    : explore              ? (w->close ? price[cur] : price[i]) * TUNE_WATCH_MARGIN
                                           : INFINITY;
    }
    for (int i = 0; i < w->nalgos; i++)
        if (expect[i] < expect[best]) best = i;
    LOG_DEBUG(LOG_SUB_TUNING, "%s of %.0f bytes: %s took %.1f us (the fastest rank's lower quartile), %.2f times its "
              "price (at best %.2f)", coll_name(a->coll), n, w->algos[cur]->name, fastest * 1e6, w->last[cur],
              w->low[cur]);
    /* Back to one held off, by what it took last: no margin (a move that did not pay is undone at once). */
    if (best == cur || expect[best] * (w->hold[best] > 0 ? 1 : TUNE_WATCH_MARGIN) >= fastest) {
        w->tries = 0;
        return w->algos[cur];
    }
    /* A try only at the second look in a row that calls for it: a slow stretch lasts, while at single
     * looks the 8-rank direct AllToAll ran at 1.57-1.69 times its price outside them too (its rows at 1.1
     * to 1.3; the try, single copy, then kept rows of 16 and 32 MiB 11 and 31 % slower), and at 2 to 4.5
     * in them (single copy at its price). Even a look far above the margin waits for the next: a size's
     * first calls run slow (the 8-rank direct AllToAll of 1 MiB out of place at 1.55 to 1.98 times its
     * price over its first 8 calls, 1.17 to 1.30 over the next 8), and a try there at once, when the first
     * look passed 1.25 squared over the try's expected time, ran single copy at 959 us a call, where
     * direct's second looks took 444 to 521 in the runs without it (docs/tuning.md, "Watching the
     * choices"). */
    if (!isfinite(w->last[best]) && ++w->tries < 2) {
        LOG_DEBUG(LOG_SUB_TUNING, "%s of %.0f bytes: %s would be tried, if the next look calls for it too",
                  coll_name(a->coll), n, w->algos[best]->name);
        return w->algos[cur];
    }
    w->tries = 0;
    w->held[cur] = w->held[cur] ? 2 * w->held[cur] : 2;
    if (w->held[cur] > TUNE_WATCH_HOLD_MAX) w->held[cur] = TUNE_WATCH_HOLD_MAX;
    w->hold[cur] = w->held[cur];
    LOG_INFO(LOG_SUB_TUNING, "%s of %.0f bytes on %d ranks%s: %s took %.1f us over its last %d calls (the fastest "
             "rank's lower quartile), %.2f times its price (at best %.2f); %s is expected to take %.1f us: running it "
             "from the next call (CHORUS_TUNE_WATCH=0 keeps the first choice)", coll_name(a->coll), n,
             ts->comm.nranks, algo_in_place(a, ts->comm.nranks) ? ", in place" : "", w->algos[cur]->name,
             fastest * 1e6, ts->watch_calls, w->last[cur], w->low[cur], w->algos[best]->name, expect[best] * 1e6);
    w->run = best;
    return w->algos[best];
}

chorus_result_t tune_watch_after(prims_t *p, tune_state_t *ts, tune_watch_t *w, const coll_args_t *a, double seconds)
{
    /* The first look too: a size's first calls run slow here and there (the copies into the arena's slots
     * time themselves then, docs/design.md, Copies); on 8 ranks and 2 cores a first look after 4 calls
     * found the direct AllToAll of 4 to 32 MiB at 1.65 to 2.04 times its price, its rows at 1.15 to 1.26. */
    int calls = ts->watch_calls;
    w->seconds[w->calls++] = seconds;
    if (w->calls < calls) return CHORUS_SUCCESS;
    w->calls = 0;
    /* The lower quartile: a call or two slowed by something else (the first of a size finds its data out of
     * the caches) does not count; a choice that runs slow runs slow at most of the calls. */
    qsort(w->seconds, (size_t)calls, sizeof(double), tune_watch_cmp);
    double quartile = w->seconds[calls / 4];
    int streaming = prims_slots_streaming(p);
    CHECK(tune_watch_agree(p, &ts->comm, &quartile, &streaming));
    if (streaming != ts->arena_streaming)
        LOG_DEBUG(LOG_SUB_TUNING, "the copies into the arena's slots %s", streaming ? "stream on some rank"
                                                                                     : "stream on no rank");
    ts->arena_streaming = streaming;
    tune_watch_decide(ts, w, a, quartile);
    return CHORUS_SUCCESS;
}

void tune_state_free(tune_state_t *ts)
{
    for (int l = 0; l < 2; l++)
        for (int c = 0; c < COLL_COUNT; c++)
            for (int b = 0; b < TUNE_BUCKETS; b++) {
                if (ts->watch[l][c][b] != &tune_watch_none) free(ts->watch[l][c][b]);
                ts->watch[l][c][b] = NULL;
            }
}
