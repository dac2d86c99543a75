/*
 * The measurements behind the cost model, on every rank of a communicator together, in the same order:
 *   1. rank 0 times local copies and float32 sums (beta_copy, gamma; chorus-tune also the memory regime
 *      and the copy profile, from which the cache size);
 *   2. rank 0 and its partner (the first rank on another host, else rank 1) ping-pong 8 bytes (alpha),
 *      exchange larger messages (beta) and send them one way (beta_oneway) over their connection (shm on
 *      one host, tcp across hosts);
 *   3. with the host arena, every rank runs batches of barriers through it, timed at rank 0 (its alpha),
 *      then direct and single-copy allgathers (the arena's beta, beta_cma) and single-copy alltoalls (the
 *      reads out of a peer's buffer, beta_cma_read), taken at the share of a core the ranks had
 *      (tune_busiest_cpu); chorus-tune then times the allgathers
 *      from 256 KiB to 128 MiB: the direct one's profile replaces the copy's, the single-copy one's is
 *      the single-copy reads' own.
 * Each figure is the best of its repetitions: the least disturbed run is the closest to what the hardware
 * does, and the share of the cores that ranks outnumbering them get is the model's own term. At init
 * (tune_setup) the measurement is the quick one, about 20 ms, and rank 0's parameters and rules
 * then go to every rank, so that every rank chooses the same algorithms.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune.h"
#include "util/log.h"
#include "util/util.h"

typedef struct tune_effort {
    int local_runs;
    int small_trips;  /* 8-byte round trips: alpha */
    int large_trips;  /* cache-regime round trips: beta */
    int memory_trips; /* memory-regime round trips (0: not measured) */
    int barrier_batches;
    int algo_batch;   /* allgathers per timed batch */
} tune_effort_t;

#define TUNE_SMALL 8
#define TUNE_SCRATCH_BYTES (2 * (size_t)TUNE_CACHE_BYTES)
#define TUNE_BATCH 8      /* barriers per timed batch */

/* The AllGathers' batches: 4 calls at init, where the whole measurement has about 20 ms; 16 in chorus-tune.
 * On a Xeon virtual machine batches of 4 (each ending in a barrier, after a batch of the other algorithm)
 * timed a 2-rank single-copy AllGather of 4 to 32 MiB at 9.6 to 10.5 GB/s, batches of 16 at 10.5 to 12.4,
 * and chorus-perf's runs of 20 calls at 12.6 to 13.2 (4 and 16 MiB); the direct one of 4 MiB at 7.8 to 8.5,
 * 8.9 to 9.0 and 9.6. The profiles are shapes, but the shorter batches flattened the single-copy one's
 * (docs/tuning.md, "Single-copy reads have a knee of their own"). */
static const tune_effort_t tune_quick = {
    .local_runs = 10, .small_trips = 64, .large_trips = 8, .barrier_batches = 8, .algo_batch = 4};
static const tune_effort_t tune_thorough = {.local_runs = 20, .small_trips = 1000, .large_trips = 100,
                                            .memory_trips = 5, .barrier_batches = 100, .algo_batch = 16};

typedef enum { TUNE_PINGPONG, TUNE_EXCHANGE, TUNE_ONEWAY } tune_pattern_t;

/* Best time of `trips` transfers of `bytes` between rank 0 (the timer) and partner:
 *   PINGPONG  there and back, one way at a time; the time is half the round trip (the latency);
 *   EXCHANGE  both ranks send and receive at once, as the steps of ring, pairwise and halving-doubling
 *             do (on one host the two directions share the two ranks' cores);
 *   ONEWAY    rank 0 sends, its partner answers with 8 bytes, as a broadcast's root sends (the time
 *             includes both latencies). */
static chorus_result_t tune_transfer(prims_t *p, int partner, char *buf, size_t bytes, int trips,
                                     tune_pattern_t pattern, double *time_p)
{
    int me = prims_rank(p), peer = me == 0 ? partner : 0;
    size_t back = pattern == TUNE_ONEWAY ? TUNE_SMALL : bytes;
    double best = INFINITY;
    for (int t = 0; t < trips; t++) {
        int64_t t0 = time_now_ns();
        if (pattern == TUNE_EXCHANGE)
            CHECK(prims_sendrecv(p, peer, buf, bytes, peer, buf + bytes, bytes));
        else if (me == 0) {
            CHECK(prims_send(p, peer, buf, bytes));
            CHECK(prims_recv(p, peer, buf, back));
        } else {
            CHECK(prims_recv(p, peer, buf, bytes));
            CHECK(prims_send(p, peer, buf, back));
        }
        double t1 = (double)(time_now_ns() - t0) * 1e-9;
        if (t1 < best) best = t1;
    }
    *time_p = pattern == TUNE_PINGPONG ? best / 2 : best;
    return CHORUS_SUCCESS;
}

/* alpha, and beta of the exchange and of one way, of rank 0's link with partner, in the cache regime and
 * (thorough) the memory one. pair_share: what the two ranks' sharing of their host's cores adds to their
 * times (2 where they share one core), which the model applies itself (tune_share). */
static chorus_result_t tune_measure_link(prims_t *p, tune_state_t *ts, const tune_effort_t *e, char *scratch,
                                         int partner, tune_link_t link, double pair_share)
{
    int me = prims_rank(p);
    if (me != 0 && me != partner) return CHORUS_SUCCESS;
    char *buf = e->memory_trips ? tune_alloc(2 * (size_t)TUNE_MEMORY_BYTES) : scratch;
    if (!buf) return CHORUS_ERR_NO_MEMORY;
    tune_params_t *tp = &ts->file.params;
    double small = 0;
    chorus_result_t res = tune_transfer(p, partner, buf, TUNE_SMALL, e->small_trips, TUNE_PINGPONG, &small);
    small /= pair_share;
    for (int r = 0; r < (e->memory_trips ? TUNE_REGIMES : 1) && res == CHORUS_SUCCESS; r++) {
        size_t bytes = r == TUNE_CACHE ? TUNE_CACHE_BYTES : TUNE_MEMORY_BYTES;
        int trips = r == TUNE_CACHE ? e->large_trips : e->memory_trips;
        double both = 0, one = 0;
        res = tune_transfer(p, partner, buf, bytes, trips, TUNE_EXCHANGE, &both);
        if (res == CHORUS_SUCCESS) res = tune_transfer(p, partner, buf, bytes, trips, TUNE_ONEWAY, &one);
        if (res != CHORUS_SUCCESS || me != 0 || small <= 0) continue;
        both /= pair_share;
        one /= pair_share;
        if (both > small) tp->beta[link][r] = (double)bytes / (both - small);
        if (one > 2 * small) tp->beta_oneway[link][r] = (double)bytes / (one - 2 * small);
    }
    if (buf != scratch) free(buf);
    if (res == CHORUS_SUCCESS && me == 0 && small > 0) tp->alpha[link] = small;
    return res;
}

/* Best mean time per call of `batches` batches of `calls` back-to-back calls of each of `nways`
 * algorithms on every rank (after one of each to warm up), timed at rank 0, the algorithms' batches taken
 * in turn. A batch, not a single call: a call can return on rank 0 while its peers still read, and the
 * next call pays for that. With 4 ranks on 2 cores the best single direct allgather of 1 MiB took 60 us at
 * rank 0, and calls back to back 155 us each (the single-copy one, whose ranks wait until every peer has
 * read their buffers, 120 and 130). Each batch ends with a barrier inside its time, for the same reason:
 * the peers' reads of its last direct call would otherwise fall outside it, where a single-copy call's
 * are inside. Without it, 4 ranks on 2 cores (Xeon virtual machine) had single-copy batches of 1 MiB
 * 10 to 25 % slower than direct ones (best of 4: 143 to 173 us against 134 to 148), and single-copy reads
 * at 5.3 to 8.2 GB/s against the arena's 9.2 to 13.8, where chorus-perf's runs of 20 calls had the
 * single-copy AllGather at 0.84 of the direct one's time; with it, both at 154 to 158 us, and over 8
 * inits single-copy reads at 8 to 15 GB/s against the arena's 8.4 to 13.3. In turn, not one algorithm's
 * batches and then the next's: a
 * disturbance of a millisecond, as long as one algorithm's batches at init, once made single-copy reads
 * measure 0.9 GB/s against 14 in the runs before and after, and the choices that follow from it (ring
 * AllGathers, twice as slow) stayed for the communicator's life; taken in turn, it spoils a batch of each. */
static chorus_result_t tune_time_algos(prims_t *p, const algo_run_fn *runs, int nways, const coll_args_t *a,
                                       int batches, int calls, double *best)
{
    coll_args_t barrier = {.coll = COLL_BARRIER};
    chorus_result_t res = CHORUS_SUCCESS;
    for (int w = 0; w < nways; w++) {
        best[w] = INFINITY;
        if (res == CHORUS_SUCCESS) res = runs[w](p, &a[w]);
    }
    for (int b = 0; b < batches && res == CHORUS_SUCCESS; b++)
        for (int w = 0; w < nways && res == CHORUS_SUCCESS; w++) {
            int64_t t0 = time_now_ns();
            for (int i = 0; i < calls && res == CHORUS_SUCCESS; i++) res = runs[w](p, &a[w]);
            if (res == CHORUS_SUCCESS) res = barrier_direct(p, &barrier);
            double t = (double)(time_now_ns() - t0) * 1e-9 / calls;
            if (t < best[w]) best[w] = t;
        }
    return res;
}

/* The arena's AllGathers (direct, through the slots, and single copy, out of the peers' memory), then the
 * single-copy AllToAll, whose reads copy out of a peer's buffer into the output (beta_cma_read). */
static const algo_run_fn tune_arena_calls[] = {allgather_direct, allgather_cma, alltoall_cma};

/* The bytes per rank (per block) of the arena's calls of `all` bytes in all on n ranks. */
static size_t tune_arena_each(size_t all, int n) { return CHORUS_MAX(all / (size_t)n, (size_t)4096); }

/* Point k of a profile: calls of `each` bytes per rank on n ranks at share s took t seconds. */
static void tune_profile_point(tune_profile_t *pf, int k, size_t each, int n, double s, double t)
{
    pf->bytes[k] = algo_buffer_bytes(COLL_ALLGATHER, (double)each * n, n) * s;
    pf->rate[k] = (double)each * n / t;
}

/* Best mean times of `batches` batches of each of the first `nways` of tune_arena_calls, of `each` bytes
 * per rank (the AllToAll: per block), in scratch where they fit. */
static chorus_result_t tune_time_arena(prims_t *p, int nways, size_t each, int batches, int calls, char *scratch,
                                       double *best)
{
    int n = prims_nranks(p);
    size_t whole = (size_t)n * each;
    char *buf = 2 * whole <= TUNE_SCRATCH_BYTES ? scratch : tune_alloc(2 * whole);
    if (!buf) return CHORUS_ERR_NO_MEMORY;
    coll_args_t a[3] = {{.coll = COLL_ALLGATHER, .sendbuf = buf + whole, .recvbuf = buf, .count = each,
                         .dtype = chorus_uint8}};
    a[1] = a[0];
    a[2] = (coll_args_t){.coll = COLL_ALLTOALL, .sendbuf = buf + whole, .recvbuf = buf, .count = each,
                         .dtype = chorus_uint8};
    chorus_result_t res = tune_time_algos(p, tune_arena_calls, nways, a, batches, calls, best);
    if (buf != scratch) free(buf);
    return res;
}

/* The most ranks found on one processor, each rank's sched_getcpu() published in one arena phase (a rank
 * that cannot tell counts for none). Right after the ranks start, the kernel has not always spread them yet: of 8 inits
 * of 4 ranks on the 2 cores of a Xeon virtual machine, one found three ranks on one core, and measured the
 * arena's barriers at 1.15 us and its reads at 7.9 GB/s against 0.60 to 0.72 us and 12.1 to 12.6 GB/s
 * in the other seven (two ranks a core), which priced every direct call from a few MiB 1.4 to 1.6 times
 * the others' price for the same measured time. */
static chorus_result_t tune_busiest_cpu(prims_t *p, int *busiest_p)
{
    int32_t *slot;
    const void *const *slots;
    int n = prims_nranks(p), busiest = 0;
    CHECK(prims_direct_begin(p, (void **)&slot));
    *slot = sched_getcpu();
    prims_direct_publish(p, sizeof(*slot));
    CHECK(prims_direct_wait_all(p, &slots));
    for (int q = 0; q < n; q++) {
        int32_t cpu = *(const int32_t *)slots[q], same = 0;
        for (int r = 0; cpu >= 0 && r < n; r++) same += *(const int32_t *)slots[r] == cpu;
        busiest = CHORUS_MAX(busiest, same);
    }
    *busiest_p = busiest;
    return CHORUS_SUCCESS;
}

void tune_derive_arena(tune_params_t *tp, const tune_comm_t *tc, int n)
{
    static const algo_cost_fn costs[TUNE_ARENA_CALLS] = {allgather_direct_cost, allgather_cma_cost, alltoall_cma_cost};
    static const char *const names[TUNE_ARENA_CALLS] = {"direct allgather", "single-copy allgather",
                                                        "single-copy alltoall"};
    for (int r = 0; r < TUNE_REGIMES; r++)
        for (int w = 0; w < TUNE_ARENA_CALLS; w++) {
            if (!(tp->arena_call[r][w] > 0)) continue;
            double *rate = w == 0 ? tp->beta[TUNE_LINK_ARENA] : w == 1 ? tp->beta_cma : tp->beta_cma_read;
            size_t each = tune_arena_each(r == TUNE_CACHE ? TUNE_CACHE_BYTES : TUNE_MEMORY_BYTES, n);
            algo_shape_t shape = {.p = n, .n = (double)each * n, .chunk = tc->chunk, .slot = tc->slot,
                                  .shared = tc->caps.oversubscribed, .cache_share = tc->cache_share};
            algo_cost_t c = costs[w](&shape);
            double rest = tp->arena_call[r][w] - c.steps * tp->alpha[TUNE_LINK_ARENA] -
                          (c.copied - c.streamed) / tp->beta_copy[r] -
                          c.streamed * tune_stream_per_byte(tp, 1 / tp->beta_copy[r]);
            LOG_DEBUG(LOG_SUB_TUNING, "calibration: %s of %zu bytes per rank (per block): %.1f us per call at a core "
                      "each; %.1f us left to %.0f bytes of reads after %.0f steps and %.0f bytes copied",
                      names[w], each, tp->arena_call[r][w] * 1e6, rest * 1e6, c.bytes, c.steps, c.copied);
            /* Reading a peer's data is a copy: no faster than a local one in cache (a disturbed subtraction
             * could otherwise promise any rate). In memory too: there the direct AllGather reads the peers'
             * slots, which stay in cache, into an output its copies stream to, which outruns a copy between
             * two buffers in memory (docs/tuning.md, "Figures per share of the cores"). */
            if (rest > 0) rate[r] = CHORUS_MIN(c.bytes / rest, tp->beta_copy[TUNE_CACHE]);
        }
}

/* alpha: the best mean of batches of back-to-back barriers (a single one can find every peer there
 * already). beta of the arena and of single-copy reads: from a direct and a single-copy allgather (each
 * moves (p - 1) each from the peers into every rank), what its cost terms leave to those reads. */
static chorus_result_t tune_measure_arena(prims_t *p, tune_state_t *ts, const tune_effort_t *e, char *scratch)
{
    tune_params_t *tp = &ts->file.params;
    coll_args_t barrier = {.coll = COLL_BARRIER};
    int me = prims_rank(p), n = prims_nranks(p), before, after;
    CHECK(barrier_direct(p, &barrier));
    CHECK(tune_busiest_cpu(p, &before));
    double best = INFINITY;
    for (int b = 0; b < e->barrier_batches; b++) {
        int64_t t0 = time_now_ns();
        for (int i = 0; i < TUNE_BATCH; i++) CHECK(barrier_direct(p, &barrier));
        double mean = (double)(time_now_ns() - t0) * 1e-9 / TUNE_BATCH;
        if (mean < best) best = mean;
    }
    int nways = ts->comm.caps.single_copy ? 3 : 1, regimes = e->memory_trips ? TUNE_REGIMES : 1;
    size_t each[TUNE_REGIMES];
    double t[TUNE_REGIMES][3];
    for (int r = 0; r < regimes; r++) {
        /* In all: TUNE_CACHE_BYTES in cache, TUNE_MEMORY_BYTES in memory (buffers past any last-level cache,
         * as the memory regime's copies have). */
        size_t all = r == TUNE_CACHE ? TUNE_CACHE_BYTES : TUNE_MEMORY_BYTES;
        each[r] = tune_arena_each(all, n);
        int batches = CHORUS_MAX((r == TUNE_CACHE ? e->large_trips : e->memory_trips) / 2, 1);
        CHECK(tune_time_arena(p, nways, each[r], batches, e->algo_batch, scratch, t[r]));
    }
    /* At init, the direct AllGather of TUNE_SMALL_ARENA_BYTES too: with the one above, the two points of an
     * arena profile where none came from a tuning file (rank 0 decides below; every rank measures). */
    double t_small = 0;
    size_t small_each = tune_arena_each(TUNE_SMALL_ARENA_BYTES, n);
    if (!e->memory_trips)
        CHECK(tune_time_arena(p, 1, small_each, CHORUS_MAX(e->large_trips / 2, 1), e->algo_batch, scratch, &t_small));
    CHECK(tune_busiest_cpu(p, &after));
    if (me != 0) return CHORUS_SUCCESS;
    /* The share of a core each rank had while measuring: the model's, which it applies itself, or more
     * where the ranks sat more to a processor than that both before and after the measurements (where
     * they moved in between, the best batches are those on the other side of the move). */
    double share = CHORUS_MAX(tune_share(&ts->comm), (double)CHORUS_MIN(before, after));
    if (share > tune_share(&ts->comm))
        LOG_INFO(LOG_SUB_TUNING, "calibration: %d of the %d ranks on one processor while the host arena was "
                 "measured (%.3g for the model); its figures are taken at that share", CHORUS_MIN(before, after), n,
                 tune_share(&ts->comm));
    if (best > 0 && isfinite(best)) tp->alpha[TUNE_LINK_ARENA] = best / share;
    memset(tp->arena_call, 0, sizeof(tp->arena_call));
    for (int r = 0; r < regimes; r++)
        for (int w = 0; w < nways; w++) tp->arena_call[r][w] = isfinite(t[r][w]) ? t[r][w] / share : 0;
    tune_derive_arena(tp, &ts->comm, n);
    tune_profile_t *pf = &tp->profile[TUNE_PROFILE_ARENA];
    if (t_small > 0 && t[TUNE_CACHE][0] > 0 && pf->n < 2 && isfinite(t_small) && isfinite(t[TUNE_CACHE][0])) {
        tune_profile_point(pf, 0, small_each, n, tune_share(&ts->comm), t_small);
        tune_profile_point(pf, 1, each[TUNE_CACHE], n, tune_share(&ts->comm), t[TUNE_CACHE][0]);
        pf->n = 2;
        LOG_DEBUG(LOG_SUB_TUNING, "calibration: arena profile of two points: %.2f GB/s at %zu bytes per rank, %.2f at "
                  "%zu", pf->rate[0] / 1e9, small_each, pf->rate[1] / 1e9, each[TUNE_CACHE]);
    }
    return CHORUS_SUCCESS;
}

/* The arena's profile from direct AllGathers of 256 KiB to 128 MiB in all (doubling), on every rank together:
 * a collective's working set as the model counts it (its buffers, algo_buffer_bytes, for each rank the core
 * runs: tune_memory_share) against its rate, n over the time. It prices what the local copy's profile does
 * not: the caches and the memory are shared by the cores, and a collective's ranks use them at once. On a Sapphire
 * Rapids virtual machine (2 MiB of L2 per core) a copy by one core ran at 14.5 GB/s at working sets of 4 to
 * 32 MiB, 40 % of its rate at 2 MiB, where a 2-rank AllGather kept 79 % of its own; priced by the copy's
 * profile every algorithm of 2 ranks at 4 MiB took 0.6 to 0.85 of its prediction, by the AllGather's 0.85 to
 * 1.1 (but for bruck, 1.5). Where ranks can read each other's memory, the single-copy AllGathers of the same
 * sizes give the single-copy reads' profile (TUNE_PROFILE_CMA): on a Xeon virtual machine (2 MiB of L2
 * per core) the direct AllGather's rate fell by a third from 1 to 4 MiB and then stayed, the single-copy
 * one's by half from 1 to 4 MiB and again by a third from 16 to 64 MiB (docs/tuning.md). */
static chorus_result_t tune_measure_arena_profile(prims_t *p, tune_state_t *ts, const tune_effort_t *e, char *scratch)
{
    tune_params_t *tp = &ts->file.params;
    int n = prims_nranks(p), k = 0;
    double s = tune_share(&ts->comm);
    int nways = ts->comm.caps.single_copy ? 2 : 1;
    for (size_t all = TUNE_SMALL_ARENA_BYTES; all <= (128u << 20) && k < TUNE_PROFILE_MAX; all *= 2, k++) {
        size_t each = tune_arena_each(all, n);
        double t[2];
        CHECK(tune_time_arena(p, nways, each, all < (16u << 20) ? 5 : 2, e->algo_batch, scratch, t));
        static const tune_profile_kind_t kinds[] = {TUNE_PROFILE_ARENA, TUNE_PROFILE_CMA}; /* tune_arena_calls' */
        for (int w = 0; w < nways; w++) tune_profile_point(&tp->profile[kinds[w]], k, each, n, s, t[w]);
    }
    tp->profile[TUNE_PROFILE_ARENA].n = k;
    tp->profile[TUNE_PROFILE_CMA].n = nways > 1 ? k : 0;
    return CHORUS_SUCCESS;
}

/* One figure (a rate, or gamma's time per byte) whose cache-regime value the quick measurement took from
 * was to figure[TUNE_CACHE]: both regimes become their source's times the ratio of what was measured to
 * what the quick measurement finds where the source was measured (quick, where known; else was itself, and
 * the cache figure stays as measured). The ratio, 1 where the figure was not measured. */
static double tune_scale_figure(double *figure, double was, double quick)
{
    if (!(was > 0) || !(figure[TUNE_CACHE] > 0) || figure[TUNE_CACHE] == was) return 1;
    double ratio = figure[TUNE_CACHE] / (quick > 0 ? quick : was);
    figure[TUNE_CACHE] = was * ratio;
    figure[TUNE_MEMORY] *= ratio;
    return ratio;
}

/* The quick measurement times the cache regime only (the memory regime needs buffers past the last-level
 * cache, whose first touch alone would take a quarter of a second on the reference machine). The memory
 * figures then keep their source's (the tuning file's, or the built-in set's of the communicator's share)
 * ratio to the cache figures: a machine whose copies run at 40 % of the built-in figures in cache is
 * assumed to run at 40 % of them in memory too. On an AMD EPYC virtual machine with copies at 22 GB/s in
 * cache against the 53 of the figures then built in (the reference machine's), chorus-tune measured 6.1
 * GB/s in memory, and this rule gives 6.7; their own 16.1 had made every call of more than a few MiB come
 * out 2-4x slower than predicted. The built-in sets are one machine's at shares 1, 2 and 4 (tune.c): one
 * set of one rank a core had kept the single-copy reads in memory at 0.37 of their cache rate at any
 * share, where chorus-tune measures 0.6 at four ranks a core.
 * Like is set against like: the built-in sets are chorus-tune's figures, the best of 50 batches of 16
 * calls (the arena's), and the quick measurement's best of 4 batches of 4 finds less on the same machine:
 * on the AMD EPYC one, the arena's reads at 43.6 GB/s in cache at one rank a core (the median of 15
 * inits) against the set's 63.3, so that every figure scaled by it came out 10 to 30 % slow and the
 * direct algorithms in memory were priced that much too slow (docs/tuning.md, "The init against its own
 * kind of measurement"). The built-in sets carry what the quick measurement finds on that machine at their
 * share (tune_params_t.quick, the medians of inits), and the init scales both regimes of a figure by what it measures over that: on
 * that machine, the set as it is, give or take the moment; elsewhere, the set as far from it as the
 * machine is, measured the same way.
 * A tuning file's memory figures were measured on this machine: where the communicator's ranks outnumber
 * the cores they stay as they are, since the init's cache figures then carry the sharing of the cores
 * beyond the share s the model applies (4 ranks on 2 cores of a Xeon virtual machine measured single-copy
 * reads at 9.2 GB/s in cache where a file of 2 ranks had 19.9), which calls bound by the memory do not pay
 * in full: scaled, the 4-rank direct algorithms from 16 MiB measured 0.61 to 0.75 of their predictions,
 * kept 0.79 to 0.90 (docs/tuning.md, "Single-copy profile"). Keeping them on 2 ranks too, with a file of
 * each communicator's own share (tune_file_use_share), made no difference beyond the runs' noise
 * (docs/tuning.md, "Figures per share of the cores"). By default, a file measured on this machine at the
 * communicator's share skips the measurement at init altogether (tune_setup). */
void tune_scale_figures(tune_params_t *tp, const tune_params_t *was)
{
    const struct tune_quick *q = &was->quick;
    for (int l = 0; l < TUNE_LINK_COUNT; l++) {
        tune_scale_figure(tp->beta[l], was->beta[l][TUNE_CACHE], q->beta[l]);
        tune_scale_figure(tp->beta_oneway[l], was->beta_oneway[l][TUNE_CACHE], q->oneway[l]);
    }
    tune_scale_figure(tp->beta_cma, was->beta_cma[TUNE_CACHE], q->cma);
    tune_scale_figure(tp->beta_cma_read, was->beta_cma_read[TUNE_CACHE], q->cma_read);
    tp->beta_stream *= tune_scale_figure(tp->beta_copy, was->beta_copy[TUNE_CACHE], q->copy);
    tune_scale_figure(tp->gamma, was->gamma[TUNE_CACHE], q->gamma);
}

/* What two ranks' sharing of their host's cores adds to the times of their link (2 where they share one
 * core), which the model applies itself (tune_share); 1 for a link between hosts (a core at each end). */
static double tune_pair_share(const tune_state_t *ts, int same_host)
{
    return same_host ? CHORUS_MAX(2.0 / CHORUS_MAX(ts->comm.cores, 1), 1.0) : 1;
}

chorus_result_t tune_measure(prims_t *p, tune_state_t *ts, int thorough)
{
    const tune_effort_t *e = thorough ? &tune_thorough : &tune_quick;
    tune_params_t *tp = &ts->file.params;
    const tune_params_t was = *tp;
    /* One scratch buffer for every cache-regime measurement, its pages touched by every rank at once: a
     * page's first touch is what costs most here (4 ms per MiB on the reference machine, a virtual
     * machine; a tenth of a millisecond on bare metal), and would otherwise fall into the timed runs or
     * keep a partner waiting. Page-aligned, as chorus-perf's buffers are: on an AMD EPYC virtual machine,
     * glibc's memcpy (rep movsb from a few KiB to the L2 size) ran 3x slower between a malloc'ed buffer (16
     * bytes past a page) and the page-aligned arena slots than between page-aligned buffers, and the
     * arena's rate came out at 1 GB/s where chorus-perf's direct algorithms ran at 5-10. */
    char *scratch = tune_alloc(TUNE_SCRATCH_BYTES);
    if (!scratch) return CHORUS_ERR_NO_MEMORY;
    if (prims_rank(p) == 0) {
        tune_measure_local(tp, TUNE_CACHE, e->local_runs, scratch);
        if (thorough) {
            tune_measure_local(tp, TUNE_MEMORY, 5, NULL);
            tune_measure_profile(tp);
        }
    }
    /* Rank 0's link with its partner, then across hosts with its own host's next rank. */
    chorus_result_t res = prims_nranks(p) > 1 ? tune_measure_link(p, ts, e, scratch, ts->partner, ts->comm.net,
                                                                  tune_pair_share(ts, ts->comm.caps.hosts <= 1))
                                              : CHORUS_SUCCESS;
    if (res == CHORUS_SUCCESS && ts->inside_partner > 0)
        res = tune_measure_link(p, ts, e, scratch, ts->inside_partner, ts->comm.inside, tune_pair_share(ts, 1));
    if (res == CHORUS_SUCCESS && ts->comm.caps.direct) res = tune_measure_arena(p, ts, e, scratch);
    if (res == CHORUS_SUCCESS && ts->comm.caps.direct && thorough) res = tune_measure_arena_profile(p, ts, e, scratch);
    free(scratch);
    CHECK(res);
    if (prims_rank(p) == 0 && !thorough && !(ts->file.from_file && ts->comm.caps.oversubscribed)) /* see above */
        tune_scale_figures(tp, &was);
    if (prims_rank(p) == 0) {
        char was[sizeof(tp->source)];
        snprintf(was, sizeof(was), "%s", tp->source);
        char inside[48] = "";
        if (ts->inside_partner > 0)
            snprintf(inside, sizeof(inside), ", inside the host %s with rank %d", tune_link_name(ts->comm.inside),
                     ts->inside_partner);
        snprintf(tp->source, sizeof(tp->source), "measured %s (link %s with rank %d%s; the rest: %.150s)",
                 thorough ? "by chorus-tune" : "at init", tune_link_name(ts->comm.net), ts->partner, inside, was);
    }
    return CHORUS_SUCCESS;
}

/* How far the host arena's or the link's time may stray, either way, from a tuning file's price for it
 * before the file counts as measured in another state of the machine. On an AMD EPYC virtual machine, for
 * stretches of seconds to minutes, the arena's algorithms took 2.5 to 10 times their usual time, and the
 * AllGather and AllToAll over TCP on one host 1.7 to 2.5 (docs/tuning.md, "Two modes, told apart at
 * init", "Going round the slot"); on a Xeon one, batches of 4 timed the direct AllGather at 0.87 to 0.96
 * of chorus-tune's rate (above). */
#define TUNE_PROBE_FACTOR 1.6

/* The host arena, for tune_probe: every rank times a few batches of the direct AllGather of
 * TUNE_CACHE_BYTES (tune_quick's); on rank 0, the best and the file's price for it. */
static chorus_result_t tune_probe_arena(prims_t *p, tune_state_t *ts, double *best_p, double *price_p,
                                        size_t *bytes_p)
{
    char *scratch = tune_alloc(TUNE_SCRATCH_BYTES);
    if (!scratch) return CHORUS_ERR_NO_MEMORY;
    int n = prims_nranks(p);
    size_t each = tune_arena_each(TUNE_CACHE_BYTES, n);
    chorus_result_t res =
        tune_time_arena(p, 1, each, CHORUS_MAX(tune_quick.large_trips / 2, 1), tune_quick.algo_batch, scratch, best_p);
    free(scratch);
    CHECK(res);
    size_t count;
    const algo_desc_t *reg = algo_registry(&count), *d = NULL;
    for (size_t i = 0; i < count && !d; i++)
        if (reg[i].run == allgather_direct) d = &reg[i];
    *bytes_p = each * (size_t)n;
    *price_p = d ? tune_predict(&ts->file.params, &ts->comm, d, (double)*bytes_p) : 0;
    return CHORUS_SUCCESS;
}

/* Rank 0's link with its partner, for tune_probe where there is no arena: a few exchanges of
 * TUNE_CACHE_BYTES (tune_quick's), the best against the file's price for one (what tune_measure_link
 * takes its beta from), on rank 0. */
static chorus_result_t tune_probe_link(prims_t *p, tune_state_t *ts, double *best_p, double *price_p)
{
    int me = prims_rank(p);
    if (me != 0 && me != ts->partner) return CHORUS_SUCCESS;
    char *buf = tune_alloc(2 * (size_t)TUNE_CACHE_BYTES);
    if (!buf) return CHORUS_ERR_NO_MEMORY;
    int trips = CHORUS_MAX(tune_quick.large_trips / 2, 1);
    chorus_result_t res = tune_transfer(p, ts->partner, buf, TUNE_CACHE_BYTES, trips, TUNE_EXCHANGE, best_p);
    free(buf);
    const tune_params_t *tp = &ts->file.params;
    double rate = tp->beta[ts->comm.net][TUNE_CACHE];
    *price_p = rate > 0 ? tune_pair_share(ts, ts->comm.caps.hosts <= 1) *
                              (tp->alpha[ts->comm.net] + TUNE_CACHE_BYTES / rate)
                        : 0;
    return res;
}

/* Under TUNE_CALIBRATE_AUTO, where the tuning file was measured here: a quick look at what the
 * communicator's algorithms run on most (the host arena where there is one, else rank 0's link), the
 * best time against the file's price for it. On rank 0, *agrees_p: within TUNE_PROBE_FACTOR of it
 * either way. */
static chorus_result_t tune_probe(prims_t *p, tune_state_t *ts, int32_t *agrees_p)
{
    double best = INFINITY, price = 0;
    size_t bytes = TUNE_CACHE_BYTES;
    char what[48], how[64];
    if (ts->comm.caps.direct) {
        CHECK(tune_probe_arena(p, ts, &best, &price, &bytes));
        snprintf(what, sizeof(what), "the host arena");
        snprintf(how, sizeof(how), "a direct AllGather of %zu bytes", bytes);
    } else {
        CHECK(tune_probe_link(p, ts, &best, &price));
        snprintf(what, sizeof(what), "the %s link with rank %d", tune_link_name(ts->comm.net), ts->partner);
        snprintf(how, sizeof(how), "an exchange of %zu bytes each way", bytes);
    }
    if (prims_rank(p) != 0) return CHORUS_SUCCESS;
    double ratio = price > 0 && isfinite(best) ? best / price : 1;
    *agrees_p = ratio <= TUNE_PROBE_FACTOR && ratio >= 1 / TUNE_PROBE_FACTOR;
    if (*agrees_p)
        LOG_INFO(LOG_SUB_TUNING, "no calibration at init: the tuning file was measured on this machine at %g "
                 "rank%s per core, and %s runs as it says (%s: %.1f us, the file's price %.1f; "
                 "CHORUS_TUNE_CALIBRATE=1 measures anyway)", tune_share(&ts->comm),
                 tune_share(&ts->comm) == 1 ? "" : "s", what, how, best * 1e6, price * 1e6);
    else
        LOG_INFO(LOG_SUB_TUNING, "calibration at init: the tuning file was measured on this machine, but %s "
                 "runs at %.2f times its price now (%s: %.1f us, the file's price %.1f); measuring "
                 "(CHORUS_TUNE_CALIBRATE=0 keeps the file's figures)", what, ratio, how, best * 1e6, price * 1e6);
    return CHORUS_SUCCESS;
}

/* What rank 0 gives every rank at init. */
typedef struct tune_shared {
    tune_file_t file;
    int32_t mode;
    int32_t cores; /* rank 0's: ranks with other affinity masks still choose alike */
    int32_t inside; /* rank 0's tune_comm_t.inside */
    char error[256]; /* rank 0's trouble with the tuning file, or empty */
} tune_shared_t;

chorus_result_t tune_setup(prims_t *p, tune_state_t *ts, int calibrate, char *err, size_t errlen)
{
    int me = prims_rank(p);
    if (prims_nranks(p) < 2) return err[0] ? CHORUS_ERR_INVALID_ARGUMENT : CHORUS_SUCCESS;
    if (calibrate == TUNE_CALIBRATE_AUTO) {
        /* A tuning file measured here at this share holds chorus-tune's figures, the medians of three
         * passes of batches of 16 calls; the init's few milliseconds add a snapshot of the moment, which
         * priced the calls of the grid further from their times (docs/tuning.md, "A copy profile of its
         * own"). */
        double s = tune_share(&ts->comm);
        int32_t here = me == 0 && !err[0] && tune_file_measured_here(&ts->file, s);
        coll_args_t decide = {.coll = COLL_BROADCAST, .sendbuf = &here, .recvbuf = &here, .count = sizeof(here),
                              .dtype = chorus_uint8, .root = 0};
        CHECK(broadcast_binomial(p, &decide));
        /* Unless the machine runs otherwise now than when the file was made: a quick look. */
        if (here) {
            CHECK(tune_probe(p, ts, &here));
            CHECK(broadcast_binomial(p, &decide));
        }
        calibrate = !here;
    }
    if (calibrate) CHECK(tune_measure(p, ts, 0));
    /* Whether some rank's copies into its slots streamed in the measurement or the look (watch.c). */
    int32_t streaming = prims_slots_streaming(p);
    coll_args_t any = {.coll = COLL_ALLREDUCE, .sendbuf = &streaming, .recvbuf = &streaming, .count = 1,
                       .dtype = chorus_int32, .op = chorus_max};
    CHECK(allreduce_rd(p, &any));
    ts->arena_streaming = streaming;
    tune_shared_t *shared = calloc(1, sizeof(*shared));
    if (!shared) return CHORUS_ERR_NO_MEMORY;
    if (me == 0) {
        shared->file = ts->file;
        shared->mode = (int32_t)ts->mode;
        shared->cores = ts->comm.cores;
        shared->inside = (int32_t)ts->comm.inside;
        snprintf(shared->error, sizeof(shared->error), "%s", err);
    }
    coll_args_t share = {.coll = COLL_BROADCAST, .sendbuf = shared, .recvbuf = shared, .count = sizeof(*shared),
                         .dtype = chorus_uint8, .root = 0};
    chorus_result_t res = broadcast_binomial(p, &share);
    if (res == CHORUS_SUCCESS && shared->error[0]) {
        if (me != 0) snprintf(err, errlen, "rank 0: %s", shared->error);
        res = CHORUS_ERR_INVALID_ARGUMENT;
    } else if (res == CHORUS_SUCCESS) {
        ts->file = shared->file;
        ts->mode = (tune_mode_t)shared->mode;
        tune_comm_set_cores(&ts->comm, shared->cores);
        ts->comm.inside = (tune_link_t)shared->inside;
        tune_comm_set_single_copy(&ts->comm, &ts->file.params);
    }
    free(shared);
    return res;
}
