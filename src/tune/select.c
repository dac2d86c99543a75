/* Selection: forced > a tuning file's rules > the built-in rules (CHORUS_TUNING=rules; a rule naming several
 * algorithms leaves the model to choose among them) > the model. */
#include <stdio.h>
#include <string.h>

#include "tune/tune.h"
#include "util/log.h"

unsigned tune_bucket(size_t bytes, double *mid_p)
{
    if (bytes == 0) {
        *mid_p = 0;
        return 0;
    }
    unsigned e = 63u - (unsigned)__builtin_clzll((unsigned long long)bytes);
    unsigned f = e >= 2 ? (unsigned)(bytes >> (e - 2)) & 3u : 0;
    double base = (double)(1ull << e);
    *mid_p = e >= 2 ? base * (1 + (f + 0.5) / 4) : (double)bytes;
    return 4 * e + f;
}

static void tune_log_decision(tune_state_t *ts, const coll_args_t *a, size_t bytes, unsigned bucket,
                              const algo_desc_t *d, const char *why, const algo_config_t *cfg)
{
    int in_place = algo_in_place(a, ts->comm.nranks); /* the rules may choose apart (AllToAll) */
    uint64_t bit = 1ull << (bucket % 64), *word = &ts->logged[in_place][a->coll][bucket / 64];
    if (*word & bit) return;
    *word |= bit;
    if (!log_enabled(LOG_INFO, LOG_SUB_TUNING)) return;
    char alts[768];
    size_t used = 0, count;
    alts[0] = 0;
    const algo_desc_t *table = algo_registry(&count);
    for (size_t i = 0; i < count && used < sizeof(alts); i++) {
        if (table[i].coll != a->coll || !(cfg->allowed >> i & 1) || !algo_supported(&table[i], &ts->comm.caps)) continue;
        double t = tune_predict(&ts->file.params, &ts->comm, &table[i], (double)bytes);
        used += (size_t)snprintf(alts + used, sizeof(alts) - used, "%s%s %.1fus", used ? ", " : "", table[i].name, t * 1e6);
    }
    LOG_INFO(LOG_SUB_TUNING, "%s of %zu bytes on %d ranks%s: %s (%s); model: %s", coll_name(a->coll), bytes,
             ts->comm.nranks, in_place ? ", in place" : "", d->name, why, alts);
}

const algo_desc_t *tune_select(tune_state_t *ts, const coll_args_t *a, const algo_config_t *cfg)
{
    return tune_select_among(ts, a, cfg, NULL);
}

const algo_desc_t *tune_select_among(tune_state_t *ts, const coll_args_t *a, const algo_config_t *cfg,
                                     tune_among_t *among_p)
{
    tune_among_t among = {0, 0};
    size_t bytes = algo_call_bytes(a, ts->comm.nranks);
    double mid;
    unsigned bucket = tune_bucket(bytes, &mid);
    const char *why = "tuning file rule";
    int in_place = algo_in_place(a, ts->comm.nranks);
    const algo_desc_t *d = tune_rule_choice(&ts->file, &ts->comm, a->coll, (double)bytes, in_place, cfg);
    if (!d && ts->mode == TUNE_MODE_RULES) {
        uint64_t named = algo_rule_choice(a->coll, bytes, in_place, &ts->comm.caps, cfg);
        size_t count;
        const algo_desc_t *table = algo_registry(&count);
        if (named & (named - 1)) {
            why = "built-in rule, the model's choice among its algorithms";
            const algo_desc_t **cached = &ts->rule_model_choice[in_place][a->coll][bucket];
            algo_config_t named_cfg = {.allowed = named};
            if (!*cached) *cached = tune_model_choice(&ts->file.params, &ts->comm, a->coll, mid, &named_cfg);
            d = *cached;
            among = (tune_among_t){named, 1};
        } else if (named) {
            why = "built-in rule";
            d = &table[__builtin_ctzll(named)];
            among.algos = cfg->allowed; /* measured here once: the watch may still move away from it */
        }
    }
    if (!d) {
        why = "model";
        d = ts->model_choice[a->coll][bucket];
        if (!d) d = ts->model_choice[a->coll][bucket] = tune_model_choice(&ts->file.params, &ts->comm, a->coll, mid, cfg);
        among.algos = cfg->allowed;
    }
    if (!d) {
        why = "no allowed algorithm is supported here";
        d = algo_first_supported(a->coll, &ts->comm.caps, cfg);
    }
    if (d) tune_log_decision(ts, a, bytes, bucket, d, why, cfg);
    if (among_p) *among_p = d ? among : (tune_among_t){0, 0};
    return d;
}

const algo_desc_t *tune_select_again(tune_state_t *ts, const coll_args_t *a, const algo_config_t *cfg,
                                     tune_among_t *among_p)
{
    size_t bytes = algo_call_bytes(a, ts->comm.nranks);
    struct tune_last *last = &ts->last[algo_in_place(a, ts->comm.nranks)][a->coll];
    if (!last->algo || last->bytes != bytes) {
        last->algo = tune_select_among(ts, a, cfg, &last->among);
        last->bytes = bytes;
    }
    *among_p = last->among;
    return last->algo;
}

void tune_forget(tune_state_t *ts)
{
    memset(ts->model_choice, 0, sizeof(ts->model_choice));
    memset(ts->rule_model_choice, 0, sizeof(ts->rule_model_choice));
    memset(ts->logged, 0, sizeof(ts->logged));
    memset(ts->last, 0, sizeof(ts->last));
    tune_state_free(ts);
}
