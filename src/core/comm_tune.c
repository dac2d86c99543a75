/* A communicator's tuning state at init: where the cost model's parameters come from (built in, a
 * tuning file, the measurement at init), the same on every rank, and logged at INFO TUNING. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/comm.h"
#include "core/comm_info.h"
#include "platform/host.h"
#include "util/copy.h"
#include "util/log.h"

/* Nothing else is in flight at init: a tag no collective or point-to-point message carries. */
#define TUNE_SETUP_TAG 0xfffffffdu

/* The communicator's primitives, ready for init-time messages: at init, within init's deadline. */
static void comm_tune_prims(chorus_comm_t comm)
{
    prims_t *p = &comm->prims;
    p->tag = TUNE_SETUP_TAG;
    p->fp = (prims_fingerprint_t){0};
    p->op_name = "init (tuning)";
    p->deadline_ns = comm->init_deadline_ns ? comm->init_deadline_ns : time_deadline_ms(comm->params.connect_timeout);
}

/* The efficiencies tp holds for the algorithms tc can run on its link, at INFO TUNING (nothing without). */
static void comm_log_efficiencies(const tune_params_t *tp, const tune_comm_t *tc)
{
    char buf[1024];
    size_t count, used = 0;
    const algo_desc_t *table = algo_registry(&count);
    int shown = 0;
    for (size_t i = 0; i < count && i < TUNE_ALGOS_MAX && used < sizeof(buf); i++)
        if (tp->efficiency[tc->net][i][TUNE_CACHE] > 0 && algo_supported(&table[i], &tc->caps))
            used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s:%s %.2f/%.2f", shown++ ? ", " : "",
                                     coll_name(table[i].coll), table[i].name, tp->efficiency[tc->net][i][TUNE_CACHE],
                                     tp->efficiency[tc->net][i][TUNE_MEMORY]);
    if (shown)
        LOG_INFO(LOG_SUB_TUNING, "efficiencies over %s in cache/memory (time over the model's price past the "
                 "latencies, %s): %s", tune_link_name(tc->net), tp->source, buf);
}

chorus_result_t comm_tune_init(chorus_comm_t comm, int ranks_per_host, int partner, int inside_partner,
                               int inside_shm, int cores)
{
    tune_state_t *ts = &comm->tune;
    const char *mode = comm->params.tuning;
    if (strcasecmp(mode, "rules") == 0)
        ts->mode = TUNE_MODE_RULES;
    else if (strcasecmp(mode, "model") == 0)
        ts->mode = TUNE_MODE_MODEL;
    else
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "CHORUS_TUNING=%s: use rules or model", mode);
    if (comm->params.tune_watch < 0 || comm->params.tune_watch > TUNE_WATCH_MAX_CALLS)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "CHORUS_TUNE_WATCH=%lld: use 0 (off) to %d calls per look",
                          (long long)comm->params.tune_watch, TUNE_WATCH_MAX_CALLS);
    ts->watch_calls = (int)comm->params.tune_watch;
    prims_t *p = &comm->prims;
    ts->comm = (tune_comm_t){.nranks = comm->nranks,
                             .ranks_per_host = ranks_per_host,
                             .net = comm->nhosts > 1 || comm->ntcp > 0 ? TUNE_LINK_TCP : TUNE_LINK_SHM,
                             .inside = inside_shm ? TUNE_LINK_SHM : TUNE_LINK_TCP,
                             .caps = {.nranks = comm->nranks,
                                      .direct = prims_direct_bytes(p) > 0,
                                      .single_copy = prims_direct_single_copy(p),
                                      .hosts = comm->nhosts,
                                      .per_host = ranks_per_host},
                             .chunk = (double)comm->params.chunk_size,
                             .slot = (double)prims_direct_bytes(p),
                             .cache_share = copy_cache_share(host_l3_bytes(), ranks_per_host)};
    p->cache_share = (size_t)ts->comm.cache_share;
    int runs = 1; /* runs of consecutive ranks on one host */
    for (int r = 1; r < comm->nranks; r++) runs += comm->host_of[r] != comm->host_of[r - 1];
    ts->comm.caps.hosts_consecutive = runs == comm->nhosts;
    tune_comm_set_cores(&ts->comm, cores);
    /* Rank 0 reads the tuning file, and its parameters, rules and mode hold for all. */
    tune_params_builtin(&ts->file.params, tune_share(&ts->comm));
    comm->last_error[0] = 0;
    if (comm->rank == 0 && comm->params.tuning_file[0])
        if (tune_file_read(comm->params.tuning_file, &ts->file, comm->last_error, COMM_ERROR_BYTES) == CHORUS_SUCCESS)
            tune_file_use_share(&ts->file, tune_share(&ts->comm));
    ts->partner = partner;
    ts->inside_partner = inside_partner;
    comm_tune_prims(comm);
    const char *cal = comm->params.tune_calibrate;
    int calibrate = strcasecmp(cal, "auto") == 0 ? TUNE_CALIBRATE_AUTO
                    : strcmp(cal, "1") == 0          ? 1
                    : strcmp(cal, "0") == 0          ? 0
                                                     : -2;
    if (calibrate == -2)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "CHORUS_TUNE_CALIBRATE=%s: use auto, 1 or 0", cal);
    chorus_result_t res = tune_setup(p, ts, calibrate, comm->last_error, COMM_ERROR_BYTES);
    if (res != CHORUS_SUCCESS) return res;
    const tune_params_t *tp = &ts->file.params;
    LOG_INFO(LOG_SUB_TUNING,
             "cost model, %s: alpha shm %.2fus, tcp %.2fus, arena %.2fus; beta (cache/memory) shm %.2f/%.2f GB/s "
             "(one way %.2f/%.2f), tcp %.2f/%.2f GB/s (one way %.2f/%.2f), arena %.2f/%.2f GB/s, cma %.2f/%.2f GB/s "
             "(reads %.2f/%.2f), copy %.2f/%.2f GB/s (streamed %.2f); gamma %.3f/%.3f ns/B; cache %.0f MiB%s; "
             "%d ranks on the busiest host, %d cores; single-copy reads %s; %d tuning-file rules; selection: %s",
             tp->source, tp->alpha[TUNE_LINK_SHM] * 1e6, tp->alpha[TUNE_LINK_TCP] * 1e6,
             tp->alpha[TUNE_LINK_ARENA] * 1e6, tp->beta[TUNE_LINK_SHM][0] / 1e9, tp->beta[TUNE_LINK_SHM][1] / 1e9,
             tp->beta_oneway[TUNE_LINK_SHM][0] / 1e9, tp->beta_oneway[TUNE_LINK_SHM][1] / 1e9,
             tp->beta[TUNE_LINK_TCP][0] / 1e9, tp->beta[TUNE_LINK_TCP][1] / 1e9, tp->beta_oneway[TUNE_LINK_TCP][0] / 1e9,
             tp->beta_oneway[TUNE_LINK_TCP][1] / 1e9, tp->beta[TUNE_LINK_ARENA][0] / 1e9,
             tp->beta[TUNE_LINK_ARENA][1] / 1e9, tp->beta_cma[0] / 1e9, tp->beta_cma[1] / 1e9,
             tp->beta_cma_read[0] / 1e9, tp->beta_cma_read[1] / 1e9, tp->beta_copy[0] / 1e9,
             tp->beta_copy[1] / 1e9, tune_stream_rate(tp) / 1e9,
             tp->gamma[0] * 1e9, tp->gamma[1] * 1e9, tp->cache_bytes / 1048576,
             tp->profile[TUNE_PROFILE_ARENA].n > 2 || tp->profile[TUNE_PROFILE_COPY].n >= 2
                 ? " (memory share from the tuning file's profiles)" : "", /* the init measures 2 points */
             ranks_per_host, ts->comm.cores,
             !ts->comm.caps.single_copy        ? "off"
             : ts->comm.caps.single_copy_fast  ? "faster than the arena"
             : ts->comm.caps.single_copy_saves ? "slower than the arena, faster than a copy and an arena read"
                                               : "slower than the arena",
             ts->file.nrules,
             ts->mode == TUNE_MODE_RULES ? "forced > file rules > built-in rules > model" : "forced > file rules > model");
    comm_log_efficiencies(tp, &ts->comm);
    return CHORUS_SUCCESS;
}

const char *comm_model_predict(chorus_comm_t comm, int coll, size_t count, chorus_datatype_t dtype, chorus_redop_t op,
                               int root, int in_place, int shared, double *seconds_p)
{
    *seconds_p = NAN;
    if (coll < 0 || coll >= COLL_COUNT) return NULL;
    static char in; /* never read or written: selection only compares the pointers (algo_in_place) */
    coll_args_t a = {.coll = (coll_kind_t)coll, .sendbuf = &in, .recvbuf = in_place ? &in : NULL, .count = count,
                     .dtype = dtype, .op = op, .root = root};
    const algo_desc_t *d = tune_watch_current(&comm->tune, &a, tune_select(&comm->tune, &a, &comm->algo)), *twin;
    if (d && shared && (twin = algo_shared_twin(&a, comm->nranks, &comm->tune.comm.caps, &comm->algo, d,
                                                  algo_shared_min(comm->nranks, comm->shared.seen))))
        d = twin;
    double n = (double)algo_call_bytes(&a, comm->nranks);
    if (d) *seconds_p = (shared ? tune_predict_mapped : tune_predict)(&comm->tune.file.params, &comm->tune.comm, d, n);
    return d ? d->name : NULL;
}

chorus_result_t comm_tune_measure(chorus_comm_t comm, tune_params_t *tp_p, tune_link_t *link_p, double *share_p)
{
    *link_p = comm->tune.comm.net;
    *share_p = tune_share(&comm->tune.comm);
    CHECK(comm_op_begin(comm));
    comm_tune_prims(comm);
    chorus_result_t res = tune_measure(&comm->prims, &comm->tune, 1);
    /* What was measured: the figures. Efficiencies come from timings of the algorithms (chorus-tune --fit),
     * and the quick figures go with the built-in sets alone. */
    *tp_p = comm->tune.file.params;
    memset(tp_p->efficiency, 0, sizeof(tp_p->efficiency));
    memset(&tp_p->quick, 0, sizeof(tp_p->quick));
    return comm_op_end(comm, res);
}

void comm_tune_median(chorus_comm_t comm, tune_params_t *tp, const tune_params_t *runs, int k)
{
    tune_params_median(tp, runs, k);
    tune_derive_arena(tp, &comm->tune.comm, comm->nranks);
}

chorus_result_t comm_set_algo(chorus_comm_t comm, const char *text)
{
    algo_config_t cfg;
    chorus_result_t res = algo_config_parse(text, &cfg, comm->last_error, COMM_ERROR_BYTES);
    if (res != CHORUS_SUCCESS) return res;
    comm->algo = cfg;
    tune_forget(&comm->tune); /* its choices were made for the previous setting */
    comm->algo_fallback_logged = 0;
    return CHORUS_SUCCESS;
}
