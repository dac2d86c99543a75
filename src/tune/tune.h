/*
 * The cost model: the alpha-beta-gamma parameters of the links a communicator uses, the time each
 * algorithm's cost terms (algo.h) predict with them, and where the parameters come from (built in,
 * a tuning file written by chorus-tune, or a short measurement at init). docs/tuning.md.
 *
 *     T = s (steps alpha[link] + bytes / beta[link][r] + oneway / beta_oneway[link][r]
 *            + (copied - streamed) / beta_copy[r] + streamed / beta_stream + reduced gamma[r])
 *
 * link: the pair connections (shared-memory rings inside a host, TCP between hosts) or the host arena
 * (whose single-copy reads have a rate of their own, beta_cma). r: the regime. Every per-byte cost is
 * measured twice, in cache and in memory, and blended by how far the call's working set on the busiest
 * host (its ranks' inputs and outputs, algo_buffer_bytes) passes a quarter of the last-level cache: all cache
 * below that, all memory from four times the cache up, log-linear between (caches are shared and the
 * data of other ranks' cores arrives through them, so the knee is gradual), or by a measured profile
 * where a tuning file has one (tune_memory_share: the arena's, the single-copy reads' and the local
 * copies' each by a profile of their own). The bytes and reductions that stay in cache at any
 * size (algo_cost_t.slot_bytes, slot_reduced: a combine's reads of the arena's slots and its passes over
 * a slot-sized chunk) take the cache rates: the slots are reused chunk after chunk. The copies that
 * stream past the cache (algo_cost_t.streamed, copy_out's) take their own rate, whatever the regime.
 * s = max(1, ranks on the busiest host / its cores):
 * ranks that outnumber the cores share them, and every term here is work those cores do (copies,
 * reductions, the scheduling a wait costs).
 */
#ifndef CHORUS_TUNE_H
#define CHORUS_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algo.h"

typedef enum { TUNE_LINK_SHM, TUNE_LINK_TCP, TUNE_LINK_ARENA, TUNE_LINK_COUNT } tune_link_t;
typedef enum { TUNE_CACHE, TUNE_MEMORY, TUNE_REGIMES } tune_regime_t;
#define TUNE_PROFILE_MAX 16

/* A profile: a rate at each of n working sets, bytes increasing. */
typedef struct tune_profile {
    int n;
    double bytes[TUNE_PROFILE_MAX], rate[TUNE_PROFILE_MAX];
} tune_profile_t;

/* What each profile measures (docs/tuning.md, Regimes), and which terms take their memory share from it:
 * ARENA, a direct AllGather's, from every rank at once (its reads of the arena and everything no other
 * profile prices; where there is no host arena, COPY's stands in); CMA, a single-copy AllGather's (the
 * single-copy reads: process_vm_readv's rate falls where the peer's buffer leaves the last-level cache,
 * not where the arena's copies leave the private caches); COPY, a local copy's on one rank alone, as
 * beta_copy and gamma were measured (the local copies, algo_cost_t.copied: a rank's own block, staging,
 * slots; and the reductions). */
typedef enum { TUNE_PROFILE_ARENA, TUNE_PROFILE_CMA, TUNE_PROFILE_COPY, TUNE_PROFILES } tune_profile_kind_t;

/* Registry entries a tuning file's per-algorithm figures can name (algo_config_t's mask holds 64). */
#define TUNE_ALGOS_MAX 64

/* The arena calls the rates of the arena and of single-copy reads are derived from (calibrate.c). */
#define TUNE_ARENA_CALLS 3

typedef struct tune_params {
    double alpha[TUNE_LINK_COUNT];               /* seconds per step (arena: per synchronisation) */
    double beta[TUNE_LINK_COUNT][TUNE_REGIMES];  /* bytes per second through a rank's link (arena: read from peers) */
    double beta_oneway[TUNE_LINK_COUNT][TUNE_REGIMES]; /* a connection used one way (arena: unused) */
    double beta_cma[TUNE_REGIMES];               /* bytes per second copied between processes (process_vm_*v) */
    /* Single-copy reads out of a peer's buffer into this rank's output (algo_cost_t.read: the AllToAll's),
     * measured by single-copy AllToAlls; beta_cma by single-copy AllGathers, which write their blocks from
     * the cache. Files without it: beta_cma's. */
    double beta_cma_read[TUNE_REGIMES];
    double beta_copy[TUNE_REGIMES];              /* bytes per second of a local memory copy */
    double beta_stream; /* bytes per second of a streamed copy (copy_out) in memory; 0: beta_copy's in memory */
    double gamma[TUNE_REGIMES];                  /* seconds per byte reduced (float32 sum) */
    double cache_bytes;                          /* working sets beyond this run at memory speed */
    /* Profiles: rates at working sets per core of increasing size, measured by chorus-tune (none built in;
     * at init the tuning file's are kept). Only their shapes count: where one has points it sets the
     * memory share of the terms it prices instead of cache_bytes (tune_memory_share). */
    tune_profile_t profile[TUNE_PROFILES];
    /* Not in files: what the arena's rates (beta[ARENA], beta_cma, beta_cma_read) were derived from, per
     * regime, so that a median over runs derives them again from the median times (tune_derive_arena):
     * seconds per call of the direct AllGather, the single-copy AllGather and the single-copy AllToAll at
     * one rank a core (the share the ranks had divided out), 0 where not measured. */
    double arena_call[TUNE_REGIMES][TUNE_ARENA_CALLS];
    /* Per link the ranks' pairs talk over (tune_comm_t.net: shm or tcp), algorithm (registry index) and
     * regime: what its calls took over what the model's terms past the latencies price, measured by
     * chorus-tune --fit or --rules (tune_fit_efficiency), or the built-in set's (builtin_efficiency.c, the
     * medians of such files); the prediction multiplies those terms by the two
     * blended by the call's memory share. 0: not measured, taken as 1 (docs/tuning.md, "Efficiencies"). */
    double efficiency[TUNE_LINK_COUNT][TUNE_ALGOS_MAX][TUNE_REGIMES];
    /* Not in files: what the quick measurement at init (calibrate.c) finds for the cache figures on the
     * machine and at the share these figures were measured at, 0 where not known (the built-in sets carry
     * them; a tuning file's sets do not). The init prices by what it measures over these, like with like
     * (tune_scale_figures). */
    struct tune_quick {
        double beta[TUNE_LINK_COUNT], oneway[TUNE_LINK_COUNT], cma, cma_read, copy, gamma;
    } quick;
    char source[256];                            /* where they come from, for the logs */
} tune_params_t;

/* A communicator as the model sees it. */
typedef struct tune_comm {
    int nranks;
    int ranks_per_host; /* on the busiest host */
    double cache_share; /* its last-level cache over its ranks, where outputs start to stream (copy_streams) */
    int cores;          /* of rank 0's host (tune_comm_set_cores) */
    tune_link_t net;    /* what the pair connections' slowest hop is: SHM on one host, TCP across hosts */
    tune_link_t inside; /* across hosts, what connects a host's ranks (rank 0's with its own host's): SHM,
                         * or TCP where shared memory is off */
    algo_caps_t caps;
    double chunk, slot;
} tune_comm_t;

const char *tune_link_name(tune_link_t link);
/* Sets the cores of the busiest host's share and the oversubscribed capability the rules read. */
void tune_comm_set_cores(tune_comm_t *tc, int cores);
/* Sets the single_copy_fast capability the rules read: single-copy reads (caps.single_copy) whose rate in
 * cache beats the arena's in tp (measured at init, or a tuning file's; the built-in figures' do not);
 * and single_copy_saves: whose time per byte beats a copy's and the arena's together. */
void tune_comm_set_single_copy(tune_comm_t *tc, const tune_params_t *tp);
/* s: the factor ranks that outnumber their host's cores pay (1 when they do not; tune_comm_set_cores). */
double tune_share(const tune_comm_t *tc);
/* How much of a call whose ranks' buffers take `buffers` bytes each (algo_buffer_bytes) runs at memory
 * speed (0: all in cache, 1: all in memory), for the terms profile `kind` prices. With that profile (or,
 * where it has no points, ARENA's, then COPY's): where the call's working set per core (`buffers` for
 * each rank the core runs) falls, in time per byte interpolated log-linearly between the profile's
 * points, between that of the calls that measured the cache figures (two buffers of TUNE_CACHE_BYTES)
 * and that of the memory figures (two of TUNE_MEMORY_BYTES on one rank per core). Without any: its
 * working set on the busiest host against the last-level cache, blended log-linearly from a quarter of
 * the cache to four times it (caches are shared, with other ranks and other tenants). */
double tune_memory_share(const tune_params_t *tp, const tune_comm_t *tc, tune_profile_kind_t kind, double buffers);

/* tp = runs[0] with every measured figure the median of its k values (the lower middle for an even k),
 * the profile's rates point by point: one disturbed pass of chorus-tune's measurement then counts for
 * nothing. k at most TUNE_MEDIAN_MAX. */
#define TUNE_MEDIAN_MAX 9
void tune_params_median(tune_params_t *tp, const tune_params_t *runs, int k);

/* The arena's rates from tp->arena_call and the figures they depend on (alpha[ARENA], beta_copy,
 * beta_stream), on n ranks laid out as tc says: what each call's time leaves to its reads once its steps
 * and copies are priced. The measurement derives them from its own times; after a median over runs,
 * deriving them again from the median times and figures keeps the model's price for the calls it was
 * measured by at their median time (docs/tuning.md, "Medians of times, not of rates"). */
void tune_derive_arena(tune_params_t *tp, const tune_comm_t *tc, int n);

/* The built-in parameters of the set measured at the share of the cores nearest s (docs/tuning.md says
 * how and when). */
void tune_params_builtin(tune_params_t *tp, double s);
/* Its efficiencies at shares 1, 2 and 4, in a tuning file's words (builtin_efficiency.c). */
extern const char tune_builtin_efficiency_1[], tune_builtin_efficiency_2[], tune_builtin_efficiency_4[];

/* Bytes per second of a streamed copy: beta_stream, or where none was measured beta_copy's in memory. */
double tune_stream_rate(const tune_params_t *tp);
/* Seconds per streamed byte where a plain copy takes copy_per_byte: the stream rate's, but never more than
 * the plain copy's (copies stream only where that measured no slower: util/copy.h; a call of a few MiB,
 * whose plain copies the model prices at cache rates, would otherwise be priced as if it went to memory). */
double tune_stream_per_byte(const tune_params_t *tp, double copy_per_byte);

/* Predicted seconds for algorithm d moving n bytes (the whole buffer, as algo_shape_t says). */
double tune_predict(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, double n);
/* The same where every rank's buffers are chorus_mem_alloc's: single-copy reads out of mappings, priced at
 * the arena's read rate (docs/algorithms.md, "Buffers from chorus_mem_alloc"). */
double tune_predict_mapped(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, double n);

/* The parts of tune_predict before any efficiency: *latency_p, the steps' (times the share); *rest_p,
 * everything else (the bytes' terms, times the share); *memory_p, the call's memory share (0 all in
 * cache, 1 all in memory: tune_memory_share of the arena's profile). The prediction is latency + rest
 * ((1 - memory) efficiency[cache] + memory efficiency[memory]). */
void tune_predict_parts(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, double n,
                        double *latency_p, double *rest_p, double *memory_p);

/* The sizes an efficiency is fitted from, and what of a call the terms past the latencies must make up
 * there for it to count (a call that is mostly steps says little about the rates). */
#define TUNE_FIT_FROM 1048576.0
#define TUNE_FIT_REST 0.5
#define TUNE_FIT_SIZES_MAX 32 /* sizes counted at most */
/* An algorithm's efficiencies e[cache] and e[memory] from calls of sizes[i] bytes that took times[i]
 * seconds (k of them): over the sizes from TUNE_FIT_FROM whose terms past the latencies are at least
 * TUNE_FIT_REST of the prediction and whose time exceeds the latency, the median of (time - latency) /
 * rest (tune_predict_parts, priced with tp's figures, whatever efficiency it holds) among those mostly in
 * cache (memory share below one half) and among the others; a regime without such sizes takes the other's.
 * Both 0 where no size counts. */
void tune_fit_efficiency(const tune_params_t *tp, const tune_comm_t *tc, const algo_desc_t *d, const double *sizes,
                         const double *times, int k, double e[TUNE_REGIMES]);

/* The supported algorithm of a collective with the smallest prediction (ties: registry order), among
 * those allowed (NULL: any). */
const algo_desc_t *tune_model_choice(const tune_params_t *tp, const tune_comm_t *tc, coll_kind_t coll, double n,
                                     const algo_config_t *allowed);

/*
 * Tuning files (text, versioned): written by chorus-tune, read through CHORUS_TUNING_FILE.
 *     chorus-tuning 1
 *     machine <host> cores <n> cpu <model...>
 *     date <ISO 8601>
 *     alpha shm|tcp|arena <seconds>
 *     beta shm|tcp|arena|copy|cma|cma-read cache|memory <bytes per second>
 *     beta stream memory <bytes per second>
 *     oneway shm|tcp cache|memory <bytes per second>
 *     gamma cache|memory <seconds per byte>
 *     cache <bytes>
 *     profile <bytes> <bytes per second>       (the arena's profile: one line per point, bytes increasing)
 *     profile cma|copy <bytes> <bytes per second> (the single-copy reads' and the local copies', likewise)
 *     efficiency <collective> <algorithm> shm|tcp <cache factor> <memory factor>  (tune_params_t.efficiency)
 *     rule <collective> <algorithm> [ranks>=P] [ranks<=P] [ranks=P] [bytes>=N] [bytes<=N] [link=shm|tcp]
 *          [place=in|out]
 *     share <ranks per core>                   (the figures after it, to the next share line, were measured
 *                                               by a communicator with that many ranks per core)
 * Blank lines and lines starting with # are ignored. Rules apply in file order, before the built-in
 * rules and the model, whatever share line they follow. Figures before any share line are a set of share
 * 1 (files written before share lines existed: chorus-tune on one rank per core).
 */
#define TUNE_MAX_RULES 256
typedef enum { TUNE_PLACE_ANY, TUNE_PLACE_IN, TUNE_PLACE_OUT } tune_place_t;
typedef struct tune_rule {
    coll_kind_t coll;
    size_t entry; /* registry index */
    int min_ranks, max_ranks;    /* max 0: no bound */
    double min_bytes, max_bytes; /* max 0: no bound */
    unsigned links;              /* 0: any; else bit l: communicators whose link (tune_comm_t.net) is l */
    tune_place_t place;
} tune_rule_t;

/* Sets of figures one file can hold: chorus-tune run with 2, 4 and 8 ranks on the same cores writes one set
 * per share of the cores (docs/tuning.md, "Figures per share of the cores"). */
#define TUNE_SETS_MAX 8

typedef struct tune_file {
    tune_params_t params; /* the figures in use: the built-in ones, or the set tune_file_use_share picked */
    int from_file; /* params read from a tuning file (tune_file_read), not the built-in ones (or those given) */
    /* The file's sets, in increasing share: set[i] measured at set_share[i] ranks per core. */
    tune_params_t set[TUNE_SETS_MAX];
    double set_share[TUNE_SETS_MAX];
    int nsets;
    double share; /* of the set in params (tune_file_use_share); 0: none */
    char machine[256];
    tune_rule_t rules[TUNE_MAX_RULES];
    int nrules;
} tune_file_t;

/* Reads path over *tf (whose params should hold the defaults: a file may give only some). On error,
 * err names the line and what is wrong. */
chorus_result_t tune_file_read(const char *path, tune_file_t *tf, char *err, size_t errlen);
/* Puts in tf->params the file's set measured at the share nearest to s (by ratio; the lower one where two
 * are as near), and names it in their source. Nothing without sets. */
void tune_file_use_share(tune_file_t *tf, double s);
/* Whether tf's figures in use were measured on this machine (its host and processor, as the file's machine
 * line names them) at share s of its cores: then the calibration at init has nothing to add by default
 * (docs/tuning.md, "Where they come from"). */
int tune_file_measured_here(const tune_file_t *tf, double s);
/* Puts tp in tf's sets as the one of share s, in place of the one it had. -1 where the file holds
 * TUNE_SETS_MAX others already. */
int tune_file_put_set(tune_file_t *tf, const tune_params_t *tp, double s);
/* Writes tf's sets (or, with none, its params) and rules to path, stamped with this machine and the time. */
chorus_result_t tune_file_write(const char *path, const tune_file_t *tf, char *err, size_t errlen);
/* The first rule of tf that fits the call and whose algorithm is allowed and supported, or NULL. */
const algo_desc_t *tune_rule_choice(const tune_file_t *tf, const tune_comm_t *tc, coll_kind_t coll, double n,
                                    int in_place, const algo_config_t *allowed);

/* "<number><unit>" in base units: s, ms, us, ns for times; B/s, KB/s, MB/s, GB/s (powers of 10) and
 * KiB/s, MiB/s, GiB/s for rates; a bare number as is. 0 on success. */
int tune_parse_value(const char *text, double *v_p);

/* A communicator's tuning state: what selection reads on every call. */
#define TUNE_BUCKETS 256 /* quarter octaves of bytes */
typedef enum { TUNE_MODE_RULES, TUNE_MODE_MODEL } tune_mode_t;
/* A size's bucket, quarter octaves: bucket 4e + f holds sizes in [2^e (1 + f/4), 2^e (1 + (f+1)/4));
 * *mid_p: the middle of its range. */
unsigned tune_bucket(size_t bytes, double *mid_p);

/* The algorithms a choice was made among, for the watch: the registry bits (cfg's where the model or a
 * built-in rule chose, a built-in rule's several where the model chose among them; 0 where cfg forced the
 * choice or a tuning file's rule made it); close: a built-in rule's several, measured to run close to one
 * another here. */
typedef struct tune_among {
    uint64_t algos;
    int close;
} tune_among_t;

typedef struct tune_state {
    tune_mode_t mode;
    int partner; /* the rank rank 0 measures its link with: the first on another host, else rank 1 */
    /* Across hosts, the rank rank 0 measures the inside level's link with (tune_comm_t.inside): the next
     * on its host, if it has one and they share memory; -1 otherwise, and on one host. */
    int inside_partner;
    tune_file_t file; /* parameters and rules, the same on every rank (rank 0's) */
    tune_comm_t comm;
    /* The model's choice per collective and size bucket, made at the first call that needs it (for the
     * communicator's CHORUS_ALGO, which does not change). */
    const algo_desc_t *model_choice[COLL_COUNT][TUNE_BUCKETS];
    /* The same among the algorithms a built-in rule names (several: it leaves the model to choose), [in
     * place] as the rules tell the two apart. */
    const algo_desc_t *rule_model_choice[2][COLL_COUNT][TUNE_BUCKETS];
    uint64_t logged[2][COLL_COUNT][TUNE_BUCKETS / 64]; /* decisions already logged at INFO TUNING, [in place] */
    /* The last decision per collective and layout ([in place]), for tune_select_again. */
    struct tune_last {
        const algo_desc_t *algo;
        tune_among_t among;
        size_t bytes;
    } last[2][COLL_COUNT];
    /* The watch over the model's and the built-in rules' choices as calls run (watch.c), per [in
     * place][collective][size bucket]: made at the bucket's first call; NULL before. watch_calls: calls
     * per look, 0 off (CHORUS_TUNE_WATCH). */
    struct tune_watch *watch[2][COLL_COUNT][TUNE_BUCKETS];
    int watch_calls;
    /* At the latest look, some rank's latest copy into its arena slots streamed (prims_slots_streaming);
     * before the first, after the measurement at init: agreed, the same on every rank. */
    int arena_streaming;
} tune_state_t;

/* The algorithm for a call: what cfg forces (CHORUS_ALGO narrowing the choice), then the tuning file's
 * rules, then (mode rules) the built-in ones (the model's minimum among the algorithms of one that names
 * several), then the model's minimum. Logs each decision once per size
 * bucket at INFO TUNING, with the model's estimates of the alternatives. Never NULL for a registered
 * collective. */
const algo_desc_t *tune_select(tune_state_t *ts, const coll_args_t *a, const algo_config_t *cfg);
/* The same, and *among_p (may be NULL): what the watch may move among. */
const algo_desc_t *tune_select_among(tune_state_t *ts, const coll_args_t *a, const algo_config_t *cfg,
                                     tune_among_t *among_p);

/* tune_select for a communicator's calls, whose state and cfg no longer change: a call of the same
 * collective, layout and size as the last one takes the last one's algorithm without going through the
 * rules again (with 8 ranks on 2 cores, the rules' walk was a tenth of the CPU time of an 8-byte
 * Broadcast). */
const algo_desc_t *tune_select_again(tune_state_t *ts, const coll_args_t *a, const algo_config_t *cfg,
                                     tune_among_t *among_p);

/*
 * The watch (watch.c): the model prices each algorithm from a few measured rates, and a machine can run
 * one of them far slower than that for a while (on 2 cores shared by 8 ranks the direct AllToAll ran at
 * 2 to 3.4 times its price for minutes at a time, single copy at its price; docs/tuning.md, "Watching the
 * choices").
 * So the choices the model or a built-in rule made are checked as they run: every watch_calls calls of a
 * collective, layout and size bucket, all ranks agree on the fastest rank's lower quartile of its times
 * for those calls (a rank that waited for a late peer took longer than the algorithm did) and decide
 * alike:
 * - while nothing but the first choice has run, and it took more than TUNE_WATCH_MARGIN times its price,
 *   the alternative the model prices lowest is tried (where the choice works in the host arena or by
 *   single copy, among those that do too: watch.c, tune_watch_alike) if, expected at the margin over its
 *   own price (over the choice's, among a built-in rule's several), it would take less than what ran by
 *   the margin again (at the second look in a row that calls for it; one such try; out of place only, as
 *   the model prices the calls);
 * - from then on the watch moves among what it has measured: to an algorithm expected (at its best) to
 *   take less than what ran by the margin, or back at once to one it left if that one took less when it
 *   last ran;
 * - an algorithm left is held off (expected as it last ran) for 2 looks, then 4, 8 ... 64 while it keeps
 *   running slow when it runs again; then it is expected at its best again, or at its price where its
 *   best was above it (a best found in a slow stretch says nothing once the stretch has passed);
 * - while some rank's copies into its arena slots stream (arena_streaming: they do in the slow stretches
 *   alone), a new bucket where a built-in rule left an algorithm working in the arena and a single-copy
 *   one to the model starts on single copy, the first choice held off 2 looks as if left at one, where
 *   ranks outnumber the cores and each rank's buffers fit its share of the cache (the sign can outlast
 *   the stretch, and past the cache single copy then costs what the direct algorithm's fast times save;
 *   within it, it does not: docs/tuning.md, "Watching the choices").
 * Only calls priced at TUNE_WATCH_MIN_RATIO times a look's own price or more are watched: a look costs
 * them at most 1 / (TUNE_WATCH_MIN_RATIO watch_calls) of their time.
 */
#define TUNE_WATCH_MIN_RATIO 32
#define TUNE_WATCH_MAX_CALLS 64 /* the most calls per look */
/* Another algorithm runs when what it is expected to take, times this, is still below what ran. */
#define TUNE_WATCH_MARGIN 1.25
typedef struct tune_watch tune_watch_t;
/* The watch over a call the selection chose *algo_p for among `among` (tune_select_among), the same on
 * every rank: *w_p NULL when the call is not watched (the watch off, no algos, the call priced below the
 * minimum, no alternative); otherwise *algo_p becomes what the call runs now. NO_MEMORY if a new watch
 * cannot be allocated. */
chorus_result_t tune_watch_get(tune_state_t *ts, const coll_args_t *a, tune_among_t among, const algo_desc_t **algo_p,
                               tune_watch_t **w_p);
/* After a watched call ran (seconds: on this rank): at the end of a look, on every rank together, the
 * agreement and the decision. */
chorus_result_t tune_watch_after(prims_t *p, tune_state_t *ts, tune_watch_t *w, const coll_args_t *a, double seconds);
/* What calls like a (tune_select's d) run now: the watch's choice where there is a watch, else d. */
const algo_desc_t *tune_watch_current(const tune_state_t *ts, const coll_args_t *a, const algo_desc_t *d);
/* The decision of a look, given the fastest rank's lower quartile: what the next calls run. For tests. */
const algo_desc_t *tune_watch_decide(tune_state_t *ts, tune_watch_t *w, const coll_args_t *a, double fastest);
/* The watches' memory. */
void tune_state_free(tune_state_t *ts);
/* Every choice made so far, memos and watches, for a cfg that changed (chorus-tune forcing algorithms in
 * turn: a memo kept had every call of a size run the first one forced). */
void tune_forget(tune_state_t *ts);

/* At init, on every rank together (connections ready, nothing else in flight): the measurement when
 * calibrate is 1, or when it is TUNE_CALIBRATE_AUTO and rank 0's tuning file was not measured here at this
 * communicator's share (tune_file_measured_here; rank 0 decides for all), then rank 0's parameters, rules
 * and selection mode given to every rank, so that all choose alike. err: on rank 0, its trouble reading
 * the tuning file (or ""), which fails init on every rank (INVALID_ARGUMENT, err filled). */
#define TUNE_CALIBRATE_AUTO (-1)
chorus_result_t tune_setup(prims_t *p, tune_state_t *ts, int calibrate, char *err, size_t errlen);

/* This machine's description: "host cores N cpu MODEL". */
void tune_machine(char *buf, size_t len, int *cores_p);

/* The cache regime's buffers: within the last-level cache but past the private ones, as a collective's
 * data is (another core wrote it). At 256 KiB copies here ran at 80-116 GB/s, at 1 to 8 MiB at 50-57. */
#define TUNE_CACHE_BYTES (1u << 20)
/* The smallest calls of chorus-tune's arena profile, and the smaller of the two the init measures where no
 * tuning file gave one: tune_arena_excess in tune.c says why. */
#define TUNE_SMALL_ARENA_BYTES (256u << 10)

/* The memory regime's buffers, well past any last-level cache: local copies and sums of two such buffers,
 * exchanges of such messages, the arena's AllGathers of this much in all. */
#define TUNE_MEMORY_BYTES (64u << 20)

/* A measurement buffer: page-aligned, as chorus-perf's are (the copy routines' speed can depend on how
 * source and destination sit within a page), its pages already touched. NULL if out of memory. */
void *tune_alloc(size_t bytes);
/* Local measurements (no peer involved): beta_copy and gamma of one regime, each the best of `runs`
 * (cache: two TUNE_CACHE_BYTES buffers, in scratch when it is not NULL; memory: two of
 * TUNE_MEMORY_BYTES, and beta_stream). */
void tune_measure_local(tune_params_t *tp, tune_regime_t r, int runs, void *scratch);
/* A look at how the cores hand data to each other now, against how fast each copies alone: the time of
 * handing TUNE_CACHE_BYTES from one thread to another (one copies them into a buffer, the other out of
 * it, in turn), over two local copies of as much; about 1 where a handoff costs its two copies. An AMD
 * EPYC virtual machine runs in stretches of minutes in which it is 4 to 6 and the local copies keep their
 * speed (docs/tuning.md, "A look that needs no fast turn"). A few milliseconds; 0 where it cannot tell
 * (a process allowed one processor, no memory, no thread). */
double tune_handoff_ratio(void);
/* The copy profile (working sets of 256 KiB to 256 MiB, doubling: profile[TUNE_PROFILE_COPY]), and from it
 * the memory regime's copy rate (its point at twice TUNE_MEMORY_BYTES) and the last-level cache as copies see it: the
 * largest working set from 2 MiB whose copy rate stays above half the one at 2 MiB.
 * About half a second, most of it the first touch of the largest buffers. */
void tune_measure_profile(tune_params_t *tp);

/* The measurements, on every rank of the communicator together (calibrate.c): rank 0's params hold the
 * results. thorough: chorus-tune's (more repetitions, both regimes, the cache size; ~1 s); otherwise the
 * few milliseconds of init (cache regime only). */
chorus_result_t tune_measure(prims_t *p, tune_state_t *ts, int thorough);
/* After the quick measurement, on rank 0: tp held `was` (a tuning file's set, or the built-in one of the
 * communicator's share) and now the cache figures measured; each measured figure's two regimes become
 * was's times what was measured over what the quick measurement finds where was came from (was.quick),
 * or over was's own figure where that is not known, which leaves the cache figure as measured. */
void tune_scale_figures(tune_params_t *tp, const tune_params_t *was);

#endif
