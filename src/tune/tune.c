/* The cost model's arithmetic, its parameters and tuning files (tune.h). */
#include "tune/tune.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "util/copy.h"
#include "util/params.h"
#include "util/util.h"

static const char *const link_names[TUNE_LINK_COUNT] = {"shm", "tcp", "arena"};
static const char *const regime_names[TUNE_REGIMES] = {"cache", "memory"};

const char *tune_link_name(tune_link_t link) { return link < TUNE_LINK_COUNT ? link_names[link] : "?"; }

/* The built-in figures, one set per share of the cores as a tuning file holds them: the medians of three
 * `chorus-tune --fit` runs on 2, 4 and 8 ranks (shares 1, 2 and 4) of the AMD EPYC virtual machine with
 * 1 MiB of L2 per core and 32 MiB of L3 (docs/tuning.md, "Built-in figures per share of the cores"), made
 * with the data path as it is. Without a tuning file the init measures the cache figures and scales both
 * regimes of these by what it measured over what it measures on that machine at that share (quick: the
 * medians of 15 inits; calibrate.c, tune_scale_figures): what counts there is each figure's memory rate
 * over its cache rate at the communicator's share, which rises with the share (the cache figures, timed by
 * every rank at once, fall as more ranks share a core's caches; the memory ones rise): single-copy reads
 * in memory at 0.38 of their cache rate at one rank a core, 0.60 at four, the arena's 0.25 and 0.36.
 * The rates in GB/s, alpha in microseconds, gamma in nanoseconds per byte. */
static const struct tune_builtin {
    double share;
    double alpha[TUNE_LINK_COUNT];
    double beta[TUNE_LINK_COUNT][TUNE_REGIMES];
    double oneway[TUNE_LINK_ARENA][TUNE_REGIMES]; /* shm, tcp */
    double cma[TUNE_REGIMES], cma_read[TUNE_REGIMES], copy[TUNE_REGIMES], stream, gamma[TUNE_REGIMES];
    /* What the init measures there at that share (tune_params_t.quick; oneway: shm, tcp): the medians of 15
     * inits (of 5 over TCP, CHORUS_TRANSPORT=tcp). */
    struct tune_quick quick;
    const char *efficiency; /* builtin_efficiency.c's text of that share */
} tune_builtins[] = {
    {1, {0.115, 3.515, 0.0664}, {{26.91, 10.26}, {8.712, 5.284}, {63.3, 16.01}}, {{58.13, 20.21}, {13.01, 7.781}},
     {15.37, 7.256}, {14.71, 5.591}, {63.3, 20.52}, 21.95, {0.01501, 0.04695},
     {{21.97, 6.44, 43.62}, {50.19, 12.74}, 13.59, 12.07, 69.1, 0.016}, tune_builtin_efficiency_1},
    {2, {0.3, 3.851, 1.54}, {{24.7, 9.511}, {7.148, 4.752}, {53.82, 15.67}}, {{52.56, 18.25}, {11.54, 6.921}},
     {14.64, 7.718}, {13.88, 6.668}, {64.16, 20.76}, 21.82, {0.01414, 0.04742},
     {{16.07, 5.98, 41.1}, {45.03, 9.45}, 13.72, 13.18, 76.1, 0.016}, tune_builtin_efficiency_2},
    {4, {0.2905, 3.671, 2.573}, {{26.55, 9.862}, {8.35, 5.176}, {54.88, 19.98}}, {{54.7, 20.54}, {11.89, 7.137}},
     {14.01, 8.822}, {11.95, 7.138}, {64.87, 21.18}, 22.82, {0.0158, 0.04726},
     {{17.77, 6.15, 45.32}, {40.57, 9.78}, 13.0, 9.8, 66.4, 0.017}, tune_builtin_efficiency_4},
};

/* How far a set measured at share `set` lies from share s (a ratio either way counts alike): the built-in
 * sets and a file's are taken by the least. */
static double tune_share_distance(double set, double s) { return fabs(log(set / s)); }

static int tune_parse_efficiency(tune_params_t *tp, char *const *w, int nw, char *err, size_t errlen);

/* The lines of a built-in efficiency text into tp (the library's own: the tests check that every line
 * reads, check_builtin_shares). */
static void tune_builtin_efficiencies(tune_params_t *tp, const char *text)
{
    char line[128], err[160], *w[8], *save;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        snprintf(line, sizeof(line), "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
        int nw = 0;
        for (char *tok = strtok_r(line, " ", &save); tok && nw < 8; tok = strtok_r(NULL, " ", &save)) w[nw++] = tok;
        if (nw > 0) (void)tune_parse_efficiency(tp, w, nw, err, sizeof(err));
    }
}

void tune_params_builtin(tune_params_t *tp, double s)
{
    size_t k = 0;
    for (size_t i = 1; i < CHORUS_ARRAY_SIZE(tune_builtins); i++)
        if (tune_share_distance(tune_builtins[i].share, s) < tune_share_distance(tune_builtins[k].share, s)) k = i;
    const struct tune_builtin *b = &tune_builtins[k];
    *tp = (tune_params_t){.beta_stream = b->stream * 1e9, .cache_bytes = 32 << 20};
    for (int r = 0; r < TUNE_REGIMES; r++) {
        for (int l = 0; l < TUNE_LINK_COUNT; l++) {
            tp->beta[l][r] = b->beta[l][r] * 1e9;
            if (l < TUNE_LINK_ARENA) tp->beta_oneway[l][r] = b->oneway[l][r] * 1e9;
        }
        tp->beta_cma[r] = b->cma[r] * 1e9;
        tp->beta_cma_read[r] = b->cma_read[r] * 1e9;
        tp->beta_copy[r] = b->copy[r] * 1e9;
        tp->gamma[r] = b->gamma[r] * 1e-9;
    }
    for (int l = 0; l < TUNE_LINK_COUNT; l++) {
        tp->alpha[l] = b->alpha[l] * 1e-6;
        tp->quick.beta[l] = b->quick.beta[l] * 1e9;
        tp->quick.oneway[l] = b->quick.oneway[l] * 1e9;
    }
    tp->quick.cma = b->quick.cma * 1e9;
    tp->quick.cma_read = b->quick.cma_read * 1e9;
    tp->quick.copy = b->quick.copy * 1e9;
    tp->quick.gamma = b->quick.gamma * 1e-9;
    tune_builtin_efficiencies(tp, b->efficiency);
    snprintf(tp->source, sizeof(tp->source), "built in (the AMD EPYC machine at %g rank%s per core)", b->share,
             b->share == 1 ? "" : "s");
}

static int tune_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..m) (the lower middle for an even m), sorting v. */
static double tune_median_of(double *v, int m)
{
    qsort(v, (size_t)m, sizeof(double), tune_cmp_double);
    return v[(m - 1) / 2];
}

void tune_params_median(tune_params_t *tp, const tune_params_t *runs, int k)
{
    static const struct {
        size_t offset, count;
    } figures[] = {
#define TUNE_FIGURE(f) {offsetof(tune_params_t, f), sizeof(((tune_params_t *)0)->f) / sizeof(double)}
        TUNE_FIGURE(alpha), TUNE_FIGURE(beta),  TUNE_FIGURE(beta_oneway),  TUNE_FIGURE(beta_cma), TUNE_FIGURE(beta_cma_read),
        TUNE_FIGURE(beta_copy), TUNE_FIGURE(beta_stream), TUNE_FIGURE(gamma), TUNE_FIGURE(cache_bytes),
        TUNE_FIGURE(profile[TUNE_PROFILE_ARENA].rate), TUNE_FIGURE(profile[TUNE_PROFILE_CMA].rate),
        TUNE_FIGURE(profile[TUNE_PROFILE_COPY].rate), TUNE_FIGURE(arena_call),
#undef TUNE_FIGURE
    };
    k = CHORUS_MIN(k, TUNE_MEDIAN_MAX);
    *tp = runs[0];
    for (size_t f = 0; f < CHORUS_ARRAY_SIZE(figures); f++)
        for (size_t j = 0; j < figures[f].count; j++) {
            double v[TUNE_MEDIAN_MAX];
            for (int i = 0; i < k; i++) v[i] = ((const double *)((const char *)&runs[i] + figures[f].offset))[j];
            ((double *)((char *)tp + figures[f].offset))[j] = tune_median_of(v, k);
        }
}

/* A profile's time per byte at working set w: log-linear in w between its points, its end points' beyond
 * them. */
static double tune_profile_time(const tune_profile_t *pf, double w)
{
    int k = 1, n = pf->n;
    if (w <= pf->bytes[0]) return 1 / pf->rate[0];
    if (w >= pf->bytes[n - 1]) return 1 / pf->rate[n - 1];
    while (pf->bytes[k] < w) k++;
    double x = log2(w / pf->bytes[k - 1]) / log2(pf->bytes[k] / pf->bytes[k - 1]);
    return (1 - x) / pf->rate[k - 1] + x / pf->rate[k];
}

/* The working set per core of the calls that measured the cache figures, at s ranks a core: every rank's
 * two buffers of TUNE_CACHE_BYTES in all. */
static double tune_cache_working_set(double s) { return 2.0 * TUNE_CACHE_BYTES * s; }

/* The memory share by a profile, at the call's working set: from the working set of the calls that
 * measured the cache figures to that of the memory figures' (two TUNE_MEMORY_BYTES buffers). The links'
 * and the arena's profiles and cache figures were measured by every rank at once (TUNE_CACHE_BYTES in all
 * for each rank a core runs) and are read at the working set per core (the call's buffers for each of the
 * s ranks a core runs). The local copy's and the reduction's were measured by one rank alone
 * (TUNE_CACHE_BYTES, whatever s), the last-level cache all its own, and are read at the host's working
 * set, every rank's buffers, which share that cache (read per core, the 2-rank direct Broadcast and
 * AllGather of 16 MiB measured 1.55 times their prices: docs/tuning.md, "The copies' working set"). -1
 * where the profile cannot say (fewer than two points, or no slower at the memory end). */
static double tune_profile_share(const tune_params_t *tp, tune_profile_kind_t kind, const tune_comm_t *tc,
                                 double buffers)
{
    const tune_profile_t *pf = &tp->profile[kind];
    if (pf->n < 2) return -1;
    int alone = kind == TUNE_PROFILE_COPY;
    double s = tune_share(tc), w = buffers * (alone ? CHORUS_MAX(tc->ranks_per_host, 1) : s),
           lo = tune_profile_time(pf, tune_cache_working_set(alone ? 1 : s)),
           hi = tune_profile_time(pf, 2.0 * TUNE_MEMORY_BYTES);
    if (hi <= lo) return -1;
    return CHORUS_MIN(CHORUS_MAX((tune_profile_time(pf, w) - lo) / (hi - lo), 0.0), 1.0);
}

double tune_memory_share(const tune_params_t *tp, const tune_comm_t *tc, tune_profile_kind_t kind, double buffers)
{
    const tune_profile_kind_t order[] = {kind, TUNE_PROFILE_ARENA, TUNE_PROFILE_COPY};
    for (size_t i = 0; i < CHORUS_ARRAY_SIZE(order); i++) {
        double f = tune_profile_share(tp, order[i], tc, buffers);
        if (f >= 0) return f;
    }
    double w = buffers * CHORUS_MAX(tc->ranks_per_host, 1), lo = tp->cache_bytes / 4, hi = tp->cache_bytes * 4;
    if (w <= lo) return 0;
    if (w >= hi) return 1;
    return log2(w / lo) / log2(hi / lo);
}

/* Below the working set at which the arena's cache figures were measured (TUNE_CACHE_BYTES in all for
 * each rank a core runs), the arena profile can run slower per byte than there: on an AMD EPYC virtual
 * machine (1 MiB of L2 per core) the 2-rank direct AllGather of 256 KiB ran at 13.7 GB/s against 31 at 1
 * and 2 MiB, the lines a peer has just written coming out of its L2 more slowly than out of the L3 they
 * reach at larger sizes. The memory share cannot say so (it is 0 there). This is the excess, in seconds
 * per byte the arena moves between ranks (the profile's AllGather moves (p-1)/p of its bytes so): 0
 * without a profile, and where the profile is no slower than at that working set. */
static double tune_arena_excess(const tune_params_t *tp, const tune_comm_t *tc, double buffers)
{
    const tune_profile_t *pf = &tp->profile[TUNE_PROFILE_ARENA];
    if (pf->n < 2 || tc->nranks < 2) return 0;
    double s = tune_share(tc), anchor = tune_cache_working_set(s), w = buffers * s;
    if (w >= anchor) return 0;
    double excess = tune_profile_time(pf, w) - tune_profile_time(pf, anchor);
    return excess > 0 ? excess * tc->nranks / (tc->nranks - 1.0) : 0;
}

/* Seconds per byte at rate[cache] and rate[memory], blended by the memory share f. */
static double tune_per_byte(const double rate[TUNE_REGIMES], double f)
{
    return (1 - f) / rate[TUNE_CACHE] + f / rate[TUNE_MEMORY];
}

double tune_stream_rate(const tune_params_t *tp)
{
    return tp->beta_stream > 0 ? tp->beta_stream : tp->beta_copy[TUNE_MEMORY];
}

double tune_stream_per_byte(const tune_params_t *tp, double copy_per_byte)
{
    return CHORUS_MIN(1 / tune_stream_rate(tp), copy_per_byte);
}

/* The prediction's two parts, before any efficiency (tune_predict_parts). mapped: single-copy reads come
 * out of mappings of the peers' buffers (chorus_mem_alloc), priced as reads of the arena's slots are,
 * instead of at process_vm_readv's rate. */
static void predict_parts(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, double n, int mapped,
                          double *latency_p, double *rest_p, double *memory_p)
{
    algo_shape_t shape = {.p = tc->nranks, .n = n, .chunk = tc->chunk, .slot = tc->slot, .shared = tc->caps.oversubscribed,
                          .hosts = tc->caps.hosts, .per_host = tc->caps.per_host, .cache_share = tc->cache_share};
    algo_cost_t c = d->cost(&shape);
    tune_link_t link = c.link == ALGO_LINK_NET ? tc->net : TUNE_LINK_ARENA;
    /* The memory shares: the arena profile's for the links, the copy profile's for local copies and sums. */
    double buffers = algo_buffer_bytes(d->coll, n, tc->nranks);
    double f = tune_memory_share(tp, tc, TUNE_PROFILE_ARENA, buffers),
           fc = tune_memory_share(tp, tc, TUNE_PROFILE_COPY, buffers), copy = tune_per_byte(tp->beta_copy, fc);
    /* What stays in cache at any size (a combine over slot-sized chunks): the cache rates whatever the share. */
    double t = c.steps * tp->alpha[link] + (c.copied - c.streamed) * copy +
               c.streamed * tune_stream_per_byte(tp, copy) +
               (c.reduced - c.slot_reduced) * ((1 - fc) * tp->gamma[TUNE_CACHE] + fc * tp->gamma[TUNE_MEMORY]) +
               c.slot_reduced * tp->gamma[TUNE_CACHE];
    int cma = c.link == ALGO_LINK_CMA && !mapped;
    const double *rate = cma ? tp->beta_cma : tp->beta[link];
    double f_read = cma ? tune_memory_share(tp, tc, TUNE_PROFILE_CMA, buffers) : f;
    double read = cma ? c.read : 0;
    if (c.bytes > 0)
        t += (c.bytes - c.slot_bytes - read) * tune_per_byte(rate, f_read) + c.slot_bytes / rate[TUNE_CACHE] +
             read * tune_per_byte(tp->beta_cma_read, f_read);
    if (c.bytes > 0 && c.link == ALGO_LINK_ARENA) t += c.bytes * tune_arena_excess(tp, tc, buffers);
    if (c.oneway > 0) t += c.oneway * tune_per_byte(tp->beta_oneway[link], f);
    t = CHORUS_MAX(t, c.steps * tp->alpha[link] + c.beside_copied * copy);
    double inside = c.inside_steps * tp->alpha[tc->inside];
    if (c.inside_bytes > 0) inside += c.inside_bytes * tune_per_byte(tp->beta[tc->inside], f);
    if (c.inside_oneway > 0) inside += c.inside_oneway * tune_per_byte(tp->beta_oneway[tc->inside], f);
    double s = tune_share(tc), latency = c.steps * tp->alpha[link] + c.inside_steps * tp->alpha[tc->inside];
    *latency_p = s * latency;
    *rest_p = s * CHORUS_MAX(t + inside - latency, 0.0);
    *memory_p = f;
}

/* The efficiency tp holds for algorithm d on tc's link at memory share f (1 where none was measured). */
static double tune_efficiency(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, double f)
{
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    ptrdiff_t i = d - table;
    if (i < 0 || i >= TUNE_ALGOS_MAX || tc->net >= TUNE_LINK_COUNT) return 1;
    const double *e = tp->efficiency[tc->net][i];
    return e[TUNE_CACHE] > 0 && e[TUNE_MEMORY] > 0 ? (1 - f) * e[TUNE_CACHE] + f * e[TUNE_MEMORY] : 1;
}

static double predict(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, double n, int mapped)
{
    double latency, rest, f;
    predict_parts(tp, tc, d, n, mapped, &latency, &rest, &f);
    return latency + tune_efficiency(tp, tc, d, f) * rest;
}

double tune_predict(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, double n)
{
    return predict(tp, tc, d, n, 0);
}

double tune_predict_mapped(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, double n)
{
    return predict(tp, tc, d, n, 1);
}

void tune_predict_parts(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, double n,
                        double *latency_p, double *rest_p, double *memory_p)
{
    predict_parts(tp, tc, d, n, 0, latency_p, rest_p, memory_p);
}

void tune_fit_efficiency(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, const double *sizes,
                         const double *times, int k, double e[TUNE_REGIMES])
{
    double v[TUNE_REGIMES][TUNE_FIT_SIZES_MAX];
    int m[TUNE_REGIMES] = {0};
    for (int i = 0; i < k && i < TUNE_FIT_SIZES_MAX; i++) {
        double latency, rest, f;
        if (sizes[i] < TUNE_FIT_FROM) continue;
        predict_parts(tp, tc, d, sizes[i], 0, &latency, &rest, &f);
        /* A call faster than its steps alone says nothing of the rates. */
        if (rest > 0 && rest >= TUNE_FIT_REST * (latency + rest) && times[i] > latency) {
            int r = f < 0.5 ? TUNE_CACHE : TUNE_MEMORY;
            v[r][m[r]++] = (times[i] - latency) / rest;
        }
    }
    for (int r = 0; r < TUNE_REGIMES; r++) e[r] = m[r] ? tune_median_of(v[r], m[r]) : 0;
    for (int r = 0; r < TUNE_REGIMES; r++)
        if (!m[r]) e[r] = e[1 - r];
}

void tune_comm_set_cores(tune_comm_t *tc, int cores)
{
    tc->cores = cores;
    tc->caps.oversubscribed = cores > 0 && tc->ranks_per_host > cores;
}

void tune_comm_set_single_copy(tune_comm_t *tc, const tune_params_t *tp)
{
    double cma = tp->beta_cma[TUNE_CACHE], arena = tp->beta[TUNE_LINK_ARENA][TUNE_CACHE];
    tc->caps.single_copy_fast = tc->caps.single_copy && cma > arena;
    tc->caps.single_copy_saves = tc->caps.single_copy && 1 / cma < 1 / tp->beta_copy[TUNE_CACHE] + 1 / arena;
}

double tune_share(const tune_comm_t *tc)
{
    return tc->caps.oversubscribed ? (double)tc->ranks_per_host / tc->cores : 1;
}

static int tune_usable(const algo_desc_t *d, size_t i, coll_kind_t coll, const tune_comm_t *tc,
                       const algo_config_t *allowed)
{
    return d->coll == coll && (!allowed || (allowed->allowed >> i & 1)) && algo_supported(d, &tc->caps);
}

const algo_desc_t *tune_model_choice(const tune_params_t *tp, const tune_comm_t *tc, coll_kind_t coll, double n,
                                     const algo_config_t *allowed)
{
    size_t count;
    const algo_desc_t *table = algo_registry(&count), *best = NULL;
    double best_t = INFINITY;
    for (size_t i = 0; i < count; i++) {
        if (!tune_usable(&table[i], i, coll, tc, allowed)) continue;
        double t = tune_predict(tp, tc, &table[i], n);
        if (t < best_t) {
            best_t = t;
            best = &table[i];
        }
    }
    return best;
}

const algo_desc_t *tune_rule_choice(const tune_file_t *tf, const tune_comm_t *tc, coll_kind_t coll, double n,
                                    int in_place, const algo_config_t *allowed)
{
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    for (int r = 0; r < tf->nrules; r++) {
        const tune_rule_t *rule = &tf->rules[r];
        if (rule->coll != coll || tc->nranks < rule->min_ranks || (rule->max_ranks > 0 && tc->nranks > rule->max_ranks) ||
            n < rule->min_bytes || (rule->max_bytes > 0 && n > rule->max_bytes) ||
            (rule->links && !(rule->links >> tc->net & 1)) ||
            (rule->place != TUNE_PLACE_ANY && rule->place != (in_place ? TUNE_PLACE_IN : TUNE_PLACE_OUT)))
            continue;
        if (tune_usable(&table[rule->entry], rule->entry, coll, tc, allowed)) return &table[rule->entry];
    }
    return NULL;
}

void tune_machine(char *buf, size_t len, int *cores_p)
{
    char host[64] = "?", cpu[96] = "?", line[256];
    gethostname(host, sizeof(host) - 1);
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof(line), f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        snprintf(cpu, sizeof(cpu), "%s", colon + 2);
        cpu[strcspn(cpu, "\n")] = 0;
        break;
    }
    if (f) fclose(f);
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cores_p) *cores_p = cores;
    snprintf(buf, len, "%s cores %d cpu %s", host, cores, cpu);
}

int tune_parse_value(const char *text, double *v_p)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || !(v >= 0)) return -1;
    static const struct { const char *unit; double scale; } units[] = {
        {"", 1},       {"s", 1},         {"ms", 1e-3},   {"us", 1e-6},   {"ns", 1e-9},     {"B/s", 1},
        {"KB/s", 1e3}, {"MB/s", 1e6},    {"GB/s", 1e9},  {"KiB/s", 1024}, {"MiB/s", 1048576}, {"GiB/s", 1073741824},
    };
    for (size_t i = 0; i < CHORUS_ARRAY_SIZE(units); i++)
        if (strcasecmp(end, units[i].unit) == 0) {
            *v_p = v * units[i].scale;
            return 0;
        }
    return -1;
}

static int tune_find_regime(const char *name)
{
    for (int r = 0; r < TUNE_REGIMES; r++)
        if (strcasecmp(name, regime_names[r]) == 0) return r;
    return -1;
}

static int tune_find_link(const char *name)
{
    for (int l = 0; l < TUNE_LINK_COUNT; l++)
        if (strcasecmp(name, link_names[l]) == 0) return l;
    return -1;
}

/* The registry index of algorithm `name` of collective `coll`, or -1 with err saying so. */
static int tune_find_algo(const char *coll, const char *name, char *err, size_t errlen)
{
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    size_t i = 0;
    while (i < count && !(strcasecmp(coll_name(table[i].coll), coll) == 0 && strcasecmp(table[i].name, name) == 0)) i++;
    if (i < count && i < TUNE_ALGOS_MAX) return (int)i;
    snprintf(err, errlen, "no algorithm \"%s\" for collective \"%s\" (chorus-perf -a all lists them)", name, coll);
    return -1;
}

/* One "rule" line's words after "rule". */
static int tune_parse_rule(char **w, int nw, tune_rule_t *rule, char *err, size_t errlen)
{
    if (nw < 2) {
        snprintf(err, errlen, "a rule names a collective and an algorithm");
        return -1;
    }
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    int i = tune_find_algo(w[0], w[1], err, errlen);
    if (i < 0) return -1;
    *rule = (tune_rule_t){.coll = table[i].coll, .entry = (size_t)i};
    for (int k = 2; k < nw; k++) {
        int64_t v;
        int link;
        if (strncmp(w[k], "ranks>=", 7) == 0 && params_parse_int(w[k] + 7, &v) == 0 && v > 0 && v <= INT32_MAX)
            rule->min_ranks = (int)v;
        else if (strncmp(w[k], "ranks<=", 7) == 0 && params_parse_int(w[k] + 7, &v) == 0 && v > 0 && v <= INT32_MAX)
            rule->max_ranks = (int)v;
        else if (strncmp(w[k], "ranks=", 6) == 0 && params_parse_int(w[k] + 6, &v) == 0 && v > 0 && v <= INT32_MAX)
            rule->min_ranks = rule->max_ranks = (int)v;
        else if (strncmp(w[k], "link=", 5) == 0 && (link = tune_find_link(w[k] + 5)) >= 0 && link != TUNE_LINK_ARENA)
            rule->links = 1u << link;
        else if (strcmp(w[k], "place=in") == 0 || strcmp(w[k], "place=out") == 0)
            rule->place = w[k][6] == 'i' ? TUNE_PLACE_IN : TUNE_PLACE_OUT;
        else if (strncmp(w[k], "bytes>=", 7) == 0 && params_parse_size(w[k] + 7, &v) == 0)
            rule->min_bytes = (double)v;
        else if (strncmp(w[k], "bytes<=", 7) == 0 && params_parse_size(w[k] + 7, &v) == 0 && v > 0)
            rule->max_bytes = (double)v;
        else {
            snprintf(err, errlen, "\"%s\": a rule's bounds are ranks>=P, ranks<=P, ranks=P, bytes>=N, bytes<=N (sizes "
                     "as 64K, 4M), link=shm|tcp and place=in|out", w[k]);
            return -1;
        }
    }
    return 0;
}

/* An efficiency line's words after "efficiency": COLL ALGO shm|tcp CACHE MEMORY, into tp. */
static int tune_parse_efficiency(tune_params_t *tp, char *const *w, int nw, char *err, size_t errlen)
{
    int i = nw == 5 ? tune_find_algo(w[0], w[1], err, errlen) : -1, link;
    if (nw != 5) snprintf(err, errlen, "\"efficiency COLL ALGO shm|tcp CACHE MEMORY\": two factors, in cache and in memory");
    if (i < 0) return -1;
    double v, m;
    if ((link = tune_find_link(w[2])) < 0 || link == TUNE_LINK_ARENA || tune_parse_value(w[3], &v) != 0 ||
        tune_parse_value(w[4], &m) != 0 || !(v > 0) || !(m > 0) || !isfinite(v) || !isfinite(m)) {
        snprintf(err, errlen, "\"efficiency %s %s %s %s %s\": the link is shm or tcp, the factors numbers above 0",
                 w[0], w[1], w[2], w[3], w[4]);
        return -1;
    }
    tp->efficiency[link][i][TUNE_CACHE] = v;
    tp->efficiency[link][i][TUNE_MEMORY] = m;
    return 0;
}

/* One line, split into words. */
static int tune_parse_line(tune_file_t *tf, char **w, int nw, int *version_p, char *err, size_t errlen)
{
    double v;
    int link;
    if (strcmp(w[0], "chorus-tuning") == 0) {
        if (nw != 2 || strcmp(w[1], "1") != 0) {
            snprintf(err, errlen, "version %s: this library reads version 1", nw > 1 ? w[1] : "(none)");
            return -1;
        }
        *version_p = 1;
        return 0;
    }
    if (!*version_p) {
        snprintf(err, errlen, "the file must start with \"chorus-tuning 1\" (is it a tuning file?)");
        return -1;
    }
    if (strcmp(w[0], "machine") == 0 || strcmp(w[0], "date") == 0) {
        if (strcmp(w[0], "machine") == 0) {
            size_t used = 0;
            tf->machine[0] = 0;
            for (int k = 1; k < nw && used < sizeof(tf->machine); k++)
                used += (size_t)snprintf(tf->machine + used, sizeof(tf->machine) - used, "%s%s", k > 1 ? " " : "", w[k]);
        }
        return 0;
    }
    int r = nw > 2 ? tune_find_regime(w[2]) : -1;
    if (strcmp(w[0], "alpha") == 0 && nw == 3 && (link = tune_find_link(w[1])) >= 0 && tune_parse_value(w[2], &v) == 0) {
        tf->params.alpha[link] = v;
        return 0;
    }
    if (strcmp(w[0], "beta") == 0 && nw == 4 && r >= 0 && tune_parse_value(w[3], &v) == 0 && v > 0) {
        if (strcmp(w[1], "stream") == 0 && r == TUNE_MEMORY) {
            tf->params.beta_stream = v;
            return 0;
        }
        if (strcmp(w[1], "copy") == 0 || strcmp(w[1], "cma") == 0 || strcmp(w[1], "cma-read") == 0) {
            (strcmp(w[1], "copy") == 0  ? tf->params.beta_copy
             : strcmp(w[1], "cma") == 0 ? tf->params.beta_cma
                                         : tf->params.beta_cma_read)[r] = v;
            return 0;
        }
        if ((link = tune_find_link(w[1])) >= 0) {
            tf->params.beta[link][r] = v;
            return 0;
        }
    }
    if (strcmp(w[0], "oneway") == 0 && nw == 4 && r >= 0 && (link = tune_find_link(w[1])) >= 0 &&
        link != TUNE_LINK_ARENA && tune_parse_value(w[3], &v) == 0 && v > 0) {
        tf->params.beta_oneway[link][r] = v;
        return 0;
    }
    if (strcmp(w[0], "gamma") == 0 && nw == 3 && (r = tune_find_regime(w[1])) >= 0 && tune_parse_value(w[2], &v) == 0) {
        tf->params.gamma[r] = v;
        return 0;
    }
    int64_t bytes;
    if (strcmp(w[0], "cache") == 0 && nw == 2 && params_parse_size(w[1], &bytes) == 0 && bytes > 0) {
        tf->params.cache_bytes = (double)bytes;
        return 0;
    }
    double rate;
    /* "profile [cma|copy] SIZE RATE": the first word after profile names the profile where there are two. */
    int named = nw == 4, kind = !named ? TUNE_PROFILE_ARENA
                                : strcmp(w[1], "cma") == 0  ? TUNE_PROFILE_CMA
                                : strcmp(w[1], "copy") == 0 ? TUNE_PROFILE_COPY
                                                            : -1;
    if (strcmp(w[0], "profile") == 0 && kind >= 0 && nw == 3 + named && params_parse_size(w[1 + named], &bytes) == 0 &&
        bytes > 0 && tune_parse_value(w[2 + named], &rate) == 0 && rate > 0) {
        tune_profile_t *pf = &tf->params.profile[kind];
        if (pf->n == TUNE_PROFILE_MAX) {
            snprintf(err, errlen, "more than %d profile points", TUNE_PROFILE_MAX);
            return -1;
        }
        if (pf->n > 0 && (double)bytes <= pf->bytes[pf->n - 1]) {
            snprintf(err, errlen, "profile points must come in increasing bytes (%s after %.0f)", w[1 + named],
                     pf->bytes[pf->n - 1]);
            return -1;
        }
        pf->bytes[pf->n] = (double)bytes;
        pf->rate[pf->n++] = rate;
        return 0;
    }
    if (strcmp(w[0], "efficiency") == 0) return tune_parse_efficiency(&tf->params, w + 1, nw - 1, err, errlen);
    if (strcmp(w[0], "rule") == 0) {
        if (tf->nrules == TUNE_MAX_RULES) {
            snprintf(err, errlen, "more than %d rules", TUNE_MAX_RULES);
            return -1;
        }
        if (tune_parse_rule(w + 1, nw - 1, &tf->rules[tf->nrules], err, errlen) != 0) return -1;
        tf->nrules++;
        return 0;
    }
    snprintf(err, errlen, "cannot read \"%s ...\" (expected alpha shm|tcp|arena T, beta shm|tcp|arena|copy|cma|"
             "cma-read cache|memory RATE, beta stream memory RATE, oneway shm|tcp cache|memory RATE, gamma cache|memory T, "
             "cache SIZE, profile [cma|copy] SIZE RATE, efficiency COLL ALGO shm|tcp CACHE MEMORY, "
             "rule COLL ALGO [bounds], machine, date)", w[0]);
    return -1;
}

/* A file without oneway, beta cma or beta cma-read lines (written before the model had them) is priced as
 * it was then: a connection used one way at its exchange's rate, single-copy copies at the arena's, the
 * reads among them at the other single-copy copies' rate (and without beta stream, streamed copies at its
 * copy rate in memory: tune_file_read). */
static void tune_file_fill_rates(tune_params_t *tp)
{
    for (int r = 0; r < TUNE_REGIMES; r++) {
        for (int l = 0; l < TUNE_LINK_COUNT; l++)
            if (tp->beta_oneway[l][r] == 0) tp->beta_oneway[l][r] = tp->beta[l][r];
        if (tp->beta_cma[r] == 0) tp->beta_cma[r] = tp->beta[TUNE_LINK_ARENA][r];
        if (tp->beta_cma_read[r] == 0) tp->beta_cma_read[r] = tp->beta_cma[r];
    }
}

int tune_file_put_set(tune_file_t *tf, const tune_params_t *tp, double s)
{
    int i = 0;
    while (i < tf->nsets && tf->set_share[i] < s) i++;
    if (i < tf->nsets && tf->set_share[i] == s) {
        tf->set[i] = *tp;
        return 0;
    }
    if (tf->nsets == TUNE_SETS_MAX) return -1;
    memmove(&tf->set[i + 1], &tf->set[i], (size_t)(tf->nsets - i) * sizeof(tf->set[0]));
    memmove(&tf->set_share[i + 1], &tf->set_share[i], (size_t)(tf->nsets - i) * sizeof(tf->set_share[0]));
    tf->set[i] = *tp;
    tf->set_share[i] = s;
    tf->nsets++;
    return 0;
}

void tune_file_use_share(tune_file_t *tf, double s)
{
    int best = -1;
    for (int i = 0; i < tf->nsets; i++)
        if (best < 0 || tune_share_distance(tf->set_share[i], s) < tune_share_distance(tf->set_share[best], s))
            best = i;
    if (best >= 0) {
        tf->params = tf->set[best];
        tf->share = tf->set_share[best];
    }
}

/* Whether two machine descriptions (tune_machine's: "HOST cores N cpu MODEL", or a file's machine line)
 * name the same host and processor: the same words, whitespace aside, but for "cores N", which is the
 * affinity of the process that wrote it (chorus-tune pinned to one processor writes cores 1). */
static int tune_same_machine(const char *a, const char *b)
{
    char x[256], y[256], *sx, *sy;
    snprintf(x, sizeof(x), "%s", a);
    snprintf(y, sizeof(y), "%s", b);
    char *u = strtok_r(x, " \t", &sx), *v = strtok_r(y, " \t", &sy);
    for (;;) {
        while (u && strcmp(u, "cores") == 0) u = strtok_r(NULL, " \t", &sx) ? strtok_r(NULL, " \t", &sx) : NULL;
        while (v && strcmp(v, "cores") == 0) v = strtok_r(NULL, " \t", &sy) ? strtok_r(NULL, " \t", &sy) : NULL;
        if (!u || !v) return !u && !v;
        if (strcmp(u, v) != 0) return 0;
        u = strtok_r(NULL, " \t", &sx);
        v = strtok_r(NULL, " \t", &sy);
    }
}

int tune_file_measured_here(const tune_file_t *tf, double s)
{
    /* The file writes shares with %g: 5 ranks on 3 cores read back as 1.66667. */
    if (!tf->from_file || !tf->machine[0] || !(tf->share > 0) || tune_share_distance(tf->share, s) > 1e-4) return 0;
    char here[256];
    tune_machine(here, sizeof(here), NULL);
    return tune_same_machine(here, tf->machine);
}

/* The lines that give a figure (they go to the set of the share line before them). */
static int tune_is_figure(const char *word)
{
    static const char *const figures[] = {"alpha", "beta", "oneway", "gamma", "cache", "profile", "efficiency"};
    for (size_t i = 0; i < CHORUS_ARRAY_SIZE(figures); i++)
        if (strcmp(word, figures[i]) == 0) return 1;
    return 0;
}

/* The set read so far, as the one of share s: its unset rates filled (tune_file_fill_rates) and its
 * source named. */
static int tune_file_end_set(tune_file_t *tf, const char *path, double s, char *why, size_t whylen)
{
    for (int i = 0; i < tf->nsets; i++)
        if (tf->set_share[i] == s) {
            snprintf(why, whylen, "a second set of figures for share %g (one share line per share)", s);
            return -1;
        }
    tune_file_fill_rates(&tf->params);
    snprintf(tf->params.source, sizeof(tf->params.source), "tuning file %.60s, measured on %.40s at %g rank%s per core",
             path, tf->machine[0] ? tf->machine : "an unnamed machine", s, s == 1 ? "" : "s");
    if (tune_file_put_set(tf, &tf->params, s) != 0) {
        snprintf(why, whylen, "more than %d shares", TUNE_SETS_MAX);
        return -1;
    }
    return 0;
}

chorus_result_t tune_file_read(const char *path, tune_file_t *tf, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "CHORUS_TUNING_FILE=%s: cannot open it: %s", path, strerror(errno));
        return CHORUS_ERR_INVALID_ARGUMENT;
    }
    char line[512], why[384];
    int lineno = 0, version = 0, figures = 0, shared = 0; /* figures: lines read into the current set;
                                                            * shared: it began with a share line */
    double share = 1;                                      /* the current set's (before any share line: 1) */
    chorus_result_t res = CHORUS_SUCCESS;
    /* Each set starts from the defaults, with these unset until a line gives them: see tune_file_fill_rates. */
    const tune_params_t given = tf->params;
    tune_params_t defaults = given;
    memset(defaults.beta_oneway, 0, sizeof(defaults.beta_oneway));
    memset(defaults.beta_cma, 0, sizeof(defaults.beta_cma));
    memset(defaults.beta_cma_read, 0, sizeof(defaults.beta_cma_read));
    /* The built-in set's quick figures and efficiencies go with its figures: the file's are chorus-tune's,
     * and priced by its own lines alone (efficiencies of its own: --fit). */
    memset(&defaults.quick, 0, sizeof(defaults.quick));
    memset(defaults.efficiency, 0, sizeof(defaults.efficiency));
    defaults.beta_stream = 0; /* without a line: the file's copy rate in memory (tune_stream_rate) */
    tf->params = defaults;
    tf->nsets = 0;
    tf->share = 0;
    while (res == CHORUS_SUCCESS && fgets(line, sizeof(line), f)) {
        lineno++;
        char *w[16], *save, *tok;
        int nw = 0, bad = 0;
        for (tok = strtok_r(line, " \t\r\n", &save); tok && nw < 16; tok = strtok_r(NULL, " \t\r\n", &save)) w[nw++] = tok;
        if (nw == 0 || w[0][0] == '#') continue;
        if (version && strcmp(w[0], "share") == 0) {
            double v;
            if (nw != 2 || tune_parse_value(w[1], &v) != 0 || !(v >= 1) || !isfinite(v)) {
                snprintf(why, sizeof(why), "\"share S\": S is the ranks per core of the communicator that measured "
                         "the figures after it, 1 or more");
                bad = 1;
            } else if (figures == 0 && shared) {
                snprintf(why, sizeof(why), "no figures for share %g before this share line", share);
                bad = 1;
            } else if (figures > 0 && tune_file_end_set(tf, path, share, why, sizeof(why)) != 0) {
                bad = 1;
            } else {
                tf->params = defaults;
                share = v;
                figures = 0;
                shared = 1;
            }
        } else if (tune_parse_line(tf, w, nw, &version, why, sizeof(why)) != 0) {
            bad = 1;
        } else {
            figures += tune_is_figure(w[0]);
        }
        if (bad) {
            snprintf(err, errlen, "CHORUS_TUNING_FILE=%s line %d: %s", path, lineno, why);
            res = CHORUS_ERR_INVALID_ARGUMENT;
        }
    }
    fclose(f);
    if (res == CHORUS_SUCCESS && !version) {
        snprintf(err, errlen, "CHORUS_TUNING_FILE=%s: empty, or not a tuning file (no \"chorus-tuning 1\")", path);
        res = CHORUS_ERR_INVALID_ARGUMENT;
    }
    if (res == CHORUS_SUCCESS && figures == 0 && shared) {
        snprintf(err, errlen, "CHORUS_TUNING_FILE=%s: no figures for share %g after its share line", path, share);
        res = CHORUS_ERR_INVALID_ARGUMENT;
    }
    if (res == CHORUS_SUCCESS && figures > 0 && tune_file_end_set(tf, path, share, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "CHORUS_TUNING_FILE=%s: %s", path, why);
        res = CHORUS_ERR_INVALID_ARGUMENT;
    }
    /* A file of rules only keeps the figures given. */
    tf->from_file = res == CHORUS_SUCCESS && tf->nsets > 0;
    tf->params = given;
    tune_file_use_share(tf, 1);
    return res;
}

/* A size as a rule's bounds read it back: 64K, 4M, or plain bytes. */
static void tune_format_size(char *buf, size_t len, double bytes)
{
    unsigned long long b = (unsigned long long)bytes;
    if (b && b % (1ull << 20) == 0)
        snprintf(buf, len, "%lluM", b >> 20);
    else if (b && b % (1ull << 10) == 0)
        snprintf(buf, len, "%lluK", b >> 10);
    else
        snprintf(buf, len, "%llu", b);
}

/* A rule as its file line says it (without the leading "rule "). */
static void tune_rule_format(const tune_rule_t *rule, char *buf, size_t len)
{
    size_t count, used;
    const algo_desc_t *d = &algo_registry(&count)[rule->entry];
    char size[32];
    used = (size_t)snprintf(buf, len, "%s %s", coll_name(rule->coll), d->name);
#define TUNE_APPEND(...) \
    if (used < len) used += (size_t)snprintf(buf + used, len - used, __VA_ARGS__)
    if (rule->min_ranks > 0 && rule->min_ranks == rule->max_ranks) {
        TUNE_APPEND(" ranks=%d", rule->min_ranks);
    } else {
        if (rule->min_ranks > 0) TUNE_APPEND(" ranks>=%d", rule->min_ranks);
        if (rule->max_ranks > 0) TUNE_APPEND(" ranks<=%d", rule->max_ranks);
    }
    for (int l = 0; l < TUNE_LINK_COUNT; l++)
        if (rule->links >> l & 1) TUNE_APPEND(" link=%s", link_names[l]);
    if (rule->place != TUNE_PLACE_ANY) TUNE_APPEND(" place=%s", rule->place == TUNE_PLACE_IN ? "in" : "out");
    if (rule->min_bytes > 0) {
        tune_format_size(size, sizeof(size), rule->min_bytes);
        TUNE_APPEND(" bytes>=%s", size);
    }
    if (rule->max_bytes > 0) {
        tune_format_size(size, sizeof(size), rule->max_bytes);
        TUNE_APPEND(" bytes<=%s", size);
    }
#undef TUNE_APPEND
}

/* One set's figure lines. */
static void tune_write_params(FILE *f, const tune_params_t *tp)
{
    for (int l = 0; l < TUNE_LINK_COUNT; l++) fprintf(f, "alpha %s %.4gus\n", link_names[l], tp->alpha[l] * 1e6);
    for (int r = 0; r < TUNE_REGIMES; r++) {
        for (int l = 0; l < TUNE_LINK_COUNT; l++)
            fprintf(f, "beta %s %s %.4gGB/s\n", link_names[l], regime_names[r], tp->beta[l][r] / 1e9);
        for (int l = 0; l < TUNE_LINK_COUNT; l++)
            if (l != TUNE_LINK_ARENA)
                fprintf(f, "oneway %s %s %.4gGB/s\n", link_names[l], regime_names[r], tp->beta_oneway[l][r] / 1e9);
        fprintf(f, "beta cma %s %.4gGB/s\nbeta copy %s %.4gGB/s\ngamma %s %.4gns\n", regime_names[r],
                tp->beta_cma[r] / 1e9, regime_names[r], tp->beta_copy[r] / 1e9, regime_names[r], tp->gamma[r] * 1e9);
        fprintf(f, "beta cma-read %s %.4gGB/s\n", regime_names[r], tp->beta_cma_read[r] / 1e9);
    }
    if (tp->beta_stream > 0) fprintf(f, "beta stream memory %.4gGB/s\n", tp->beta_stream / 1e9);
    fprintf(f, "cache %.0f\n", tp->cache_bytes);
    static const char *const profile_lines[TUNE_PROFILES][2] = {
        [TUNE_PROFILE_ARENA] = {"profile", "the links' profile: a direct AllGather's rates by working set per core"},
        [TUNE_PROFILE_CMA] = {"profile cma", "the single-copy reads' profile: a single-copy AllGather's rates"},
        [TUNE_PROFILE_COPY] = {"profile copy", "the local copies' and sums' profile: a copy's rates on one rank"},
    };
    for (int k = 0; k < TUNE_PROFILES; k++) {
        const tune_profile_t *pf = &tp->profile[k];
        if (pf->n > 0) fprintf(f, "# %s (docs/tuning.md, Regimes)\n", profile_lines[k][1]);
        for (int i = 0; i < pf->n; i++)
            fprintf(f, "%s %.0f %.4gGB/s\n", profile_lines[k][0], pf->bytes[i], pf->rate[i] / 1e9);
    }
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    int said = 0;
    for (int l = 0; l < TUNE_LINK_COUNT; l++)
        for (size_t i = 0; i < count && i < TUNE_ALGOS_MAX; i++) {
            const double *e = tp->efficiency[l][i];
            if (!(e[TUNE_CACHE] > 0 && e[TUNE_MEMORY] > 0)) continue;
            if (!said++)
                fprintf(f, "# per algorithm and link: its calls' time over the model's price past the latencies, in "
                           "cache and in memory (docs/tuning.md, Efficiencies)\n");
            fprintf(f, "efficiency %s %s %s %.3g %.3g\n", coll_name(table[i].coll), table[i].name, link_names[l],
                    e[TUNE_CACHE], e[TUNE_MEMORY]);
        }
}

chorus_result_t tune_file_write(const char *path, const tune_file_t *tf, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return CHORUS_ERR_INVALID_ARGUMENT;
    }
    char machine[256], date[64];
    tune_machine(machine, sizeof(machine), NULL);
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    fprintf(f, "chorus-tuning 1\n# written by chorus-tune; read through CHORUS_TUNING_FILE (docs/tuning.md)\n");
    fprintf(f, "machine %s\ndate %s\n", machine, date);
    if (tf->nsets == 0) tune_write_params(f, &tf->params);
    for (int i = 0; i < tf->nsets; i++) {
        fprintf(f, "# measured by a communicator of %g rank%s per core\nshare %g\n", tf->set_share[i],
                tf->set_share[i] == 1 ? "" : "s", tf->set_share[i]);
        tune_write_params(f, &tf->set[i]);
    }
    fprintf(f, "# rules, tried in order before the built-in ones and the model: rule COLLECTIVE ALGORITHM [ranks>=P] "
               "[ranks<=P] [ranks=P] [link=shm|tcp] [place=in|out] [bytes>=N] [bytes<=N]\n");
    for (int r = 0; r < tf->nrules; r++) {
        char line[256];
        tune_rule_format(&tf->rules[r], line, sizeof(line));
        fprintf(f, "rule %s\n", line);
    }
    if (fclose(f) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return CHORUS_ERR_SYSTEM;
    }
    return CHORUS_SUCCESS;
}

/* Best of a few timed runs: the machine is shared, and the least disturbed run is the closest to what
 * the hardware does. */
static double tune_best_of(void (*fn)(void *), void *arg, int runs)
{
    double best = INFINITY;
    for (int r = 0; r < runs; r++) {
        int64_t t0 = time_now_ns();
        fn(arg);
        double t = (double)(time_now_ns() - t0) * 1e-9;
        if (t < best) best = t;
    }
    return best;
}

typedef struct tune_bufs {
    float *a, *b;
    size_t count;
    int owned;
} tune_bufs_t;

static void tune_copy_once(void *arg)
{
    tune_bufs_t *m = arg;
    memcpy(m->b, m->a, m->count * sizeof(float));
    __asm__ volatile("" ::: "memory");
}

static void tune_stream_once(void *arg)
{
    tune_bufs_t *m = arg;
    copy_out(m->b, m->a, m->count * sizeof(float));
    __asm__ volatile("" ::: "memory");
}

/* b = a + b: two reads and a write per element, as a reduction step's. */
static void tune_reduce_once(void *arg)
{
    tune_bufs_t *m = arg;
    reduce_apply3(m->b, m->a, m->b, m->count, chorus_float32, chorus_sum);
}

static void tune_bufs_free(tune_bufs_t *m)
{
    if (!m->owned) return;
    free(m->a);
    free(m->b);
}

void *tune_alloc(size_t bytes)
{
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, bytes) != 0) return NULL;
    memset(buf, 1, bytes); /* not 0: GCC would turn malloc and memset(0) into calloc, leaving pages untouched */
    return buf;
}

/* Two buffers of `bytes`, in `scratch` (room for both) or allocated. */
static int tune_bufs_alloc(tune_bufs_t *m, size_t bytes, void *scratch)
{
    *m = (tune_bufs_t){.count = bytes / sizeof(float), .owned = !scratch};
    m->a = scratch ? scratch : tune_alloc(bytes);
    m->b = scratch ? (float *)scratch + m->count : tune_alloc(bytes);
    if (!m->a || !m->b) {
        tune_bufs_free(m);
        return -1;
    }
    for (size_t i = 0; i < m->count; i++) m->a[i] = m->b[i] = (float)i;
    return 0;
}

void tune_measure_local(tune_params_t *tp, tune_regime_t r, int runs, void *scratch)
{
    tune_bufs_t m;
    size_t each = r == TUNE_CACHE ? TUNE_CACHE_BYTES : TUNE_MEMORY_BYTES;
    if (tune_bufs_alloc(&m, each, r == TUNE_CACHE ? scratch : NULL) != 0) return;
    double bytes = (double)(m.count * sizeof(float));
    double copy = tune_best_of(tune_copy_once, &m, runs), red = tune_best_of(tune_reduce_once, &m, runs);
    if (copy > 0) tp->beta_copy[r] = bytes / copy;
    if (red > 0) tp->gamma[r] = red / bytes;
    double stream = r == TUNE_MEMORY ? tune_best_of(tune_stream_once, &m, runs) : 0;
    if (stream > 0) tp->beta_stream = bytes / stream;
    tune_bufs_free(&m);
}

/* The handoff look (tune.h): the buffers, whose turn it is (1 the reader's), and the writer's time. */
typedef struct tune_handoff {
    const char *in;
    char *shared, *out;
    _Atomic int turn;
    double seconds;
} tune_handoff_t;

#define TUNE_HANDOFF_ROUNDS 32

static void *tune_handoff_writer(void *arg)
{
    tune_handoff_t *h = arg;
    int64_t t0 = time_now_ns();
    for (int i = 0; i < TUNE_HANDOFF_ROUNDS; i++) {
        memcpy(h->shared, h->in, TUNE_CACHE_BYTES);
        atomic_store_explicit(&h->turn, 1, memory_order_release);
        while (atomic_load_explicit(&h->turn, memory_order_acquire) != 0) sched_yield();
    }
    h->seconds = (double)(time_now_ns() - t0) * 1e-9;
    return NULL;
}

static void *tune_handoff_reader(void *arg)
{
    tune_handoff_t *h = arg;
    for (int i = 0; i < TUNE_HANDOFF_ROUNDS; i++) {
        while (atomic_load_explicit(&h->turn, memory_order_acquire) != 1) sched_yield();
        memcpy(h->out, h->shared, TUNE_CACHE_BYTES);
        atomic_store_explicit(&h->turn, 0, memory_order_release);
    }
    return NULL;
}

/* A thread running fn(arg) on processor cpu alone; 0 if it started. */
static int tune_start_on(pthread_t *t, int cpu, void *(*fn)(void *), void *arg)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return -1;
    int rc = pthread_attr_setaffinity_np(&attr, sizeof(one), &one) == 0 ? pthread_create(t, &attr, fn, arg) : -1;
    pthread_attr_destroy(&attr);
    return rc;
}

double tune_handoff_ratio(void)
{
    /* The writer and the reader each on a processor of its own, among those this process may use: two
     * threads on one (a process pinned to it) take turns at it and time the switches (40 copies a
     * handoff here), not the cores. */
    cpu_set_t allowed;
    int cpu[2] = {-1, -1}, k = 0;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return 0;
    for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
        if (CPU_ISSET(c, &allowed)) cpu[k++] = c;
    if (k < 2) return 0;
    tune_bufs_t m;
    if (tune_bufs_alloc(&m, TUNE_CACHE_BYTES, NULL) != 0) return 0;
    tune_handoff_t h = {.in = (const char *)m.a, .shared = tune_alloc(TUNE_CACHE_BYTES), .out = (char *)m.b};
    double local = tune_best_of(tune_copy_once, &m, 8);
    pthread_t writer, reader;
    int started = h.shared && tune_start_on(&reader, cpu[1], tune_handoff_reader, &h) == 0;
    if (started && tune_start_on(&writer, cpu[0], tune_handoff_writer, &h) != 0) {
        /* No writer: let the reader through its turns, and tell nothing. */
        for (int i = 0; i < TUNE_HANDOFF_ROUNDS; i++) {
            atomic_store_explicit(&h.turn, 1, memory_order_release);
            while (atomic_load_explicit(&h.turn, memory_order_acquire) != 0) sched_yield();
        }
        h.seconds = 0;
    } else if (started) {
        pthread_join(writer, NULL);
    }
    if (started) pthread_join(reader, NULL);
    free(h.shared);
    tune_bufs_free(&m);
    return h.seconds > 0 && local > 0 ? h.seconds / TUNE_HANDOFF_ROUNDS / (2 * local) : 0;
}

void tune_measure_profile(tune_params_t *tp)
{
    /* The largest buffers once, touched once (the first touch costs more than the copies here); the smaller
     * working sets copy their beginnings, best of several runs each. */
    const size_t most = 128u << 20;
    tune_bufs_t m;
    if (tune_bufs_alloc(&m, most, NULL) != 0) return;
    tune_profile_t *pf = &tp->profile[TUNE_PROFILE_COPY];
    pf->n = 0;
    for (size_t bytes = 128u << 10; bytes <= most && pf->n < TUNE_PROFILE_MAX; bytes *= 2) {
        m.count = bytes / sizeof(float);
        pf->bytes[pf->n] = 2.0 * (double)bytes;
        pf->rate[pf->n++] = (double)bytes / tune_best_of(tune_copy_once, &m, bytes < (32u << 20) ? 10 : 3);
    }
    tune_bufs_free(&m);
    /* The memory regime's copy is the profile's point at its working set: one measurement, not two that
     * the noise of a shared machine sets apart (7.2 and 9.4 GB/s in one run on one virtual machine), since
     * the memory share counts from the profile's time there. */
    double at_memory = tune_profile_time(pf, 2.0 * TUNE_MEMORY_BYTES);
    if (at_memory > 0) tp->beta_copy[TUNE_MEMORY] = 1 / at_memory;
    /* cache: from 2 MiB (past the private caches, so the drop looked for is the last-level cache's), the
     * working sets copied at more than half the rate at 2 MiB. */
    double at_2m = tune_profile_time(pf, 2.0 * TUNE_CACHE_BYTES);
    for (int k = 0; k < pf->n; k++) {
        if (pf->bytes[k] < 2.0 * TUNE_CACHE_BYTES) continue;
        if (1 / pf->rate[k] > 2 * at_2m) break;
        tp->cache_bytes = pf->bytes[k];
    }
}
