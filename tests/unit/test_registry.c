/* The algorithm registry: CHORUS_ALGO's syntax (forcing, lists, exclusion, per collective, errors that
 * name the valid choices) and the default rule (small calls take the log p algorithms, large ones the
 * ring or chain; forcing and exclusion override it). */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo.h"
#include "tune/tune.h"
#include "test.h"

/* What single-copy reads do in the parameters pick_args selects with: 0 as built in (slower than the arena,
 * and than a copy and an arena read together), 1 outrun the arena, 2 slower than the arena but faster than
 * a copy and an arena read. */
static int single_copy_fast;

/* The arena's and single-copy reads' rates in the parameters pick_args selects with, as multiples of the
 * built-in ones. */
static double arena_scale = 1, cma_scale = 1;
/* 1: state_for leaves out the built-in efficiencies, for the checks of the model's own terms. */
static int no_efficiencies;

/* A communicator's tuning state as pick_args selects with: built-in parameters (as single_copy_fast,
 * arena_scale and cma_scale adjust them), nranks on one host (direct) or across hosts. */
static void state_for(tune_state_t *ts, int nranks, int direct, int cores)
{
    memset(ts, 0, sizeof(*ts));
    ts->mode = TUNE_MODE_RULES;
    ts->comm = (tune_comm_t){.nranks = nranks, .ranks_per_host = nranks, .net = direct ? TUNE_LINK_SHM : TUNE_LINK_TCP,
                             .caps = {.nranks = nranks, .direct = direct, .single_copy = direct},
                             .chunk = 256 << 10, .slot = 256 << 10};
    tune_comm_set_cores(&ts->comm, cores);
    tune_params_builtin(&ts->file.params, tune_share(&ts->comm));
    if (no_efficiencies) memset(ts->file.params.efficiency, 0, sizeof(ts->file.params.efficiency));
    for (int r = 0; r < TUNE_REGIMES; r++) {
        ts->file.params.beta[TUNE_LINK_ARENA][r] *= arena_scale;
        ts->file.params.beta_cma[r] *= cma_scale;
    }
    if (single_copy_fast)
        ts->file.params.beta_cma[TUNE_CACHE] =
            (single_copy_fast == 1 ? 1.5 : 0.9) * ts->file.params.beta[TUNE_LINK_ARENA][TUNE_CACHE];
    tune_comm_set_single_copy(&ts->comm, &ts->file.params);
}

/* Selection as a communicator makes it with CHORUS_TUNING=rules and no tuning file, with as many cores
 * as ranks unless `cores` says otherwise; direct: direct access and single-copy reads; out of place
 * unless in_place. */
static const char *pick_args(const algo_config_t *cfg, coll_kind_t coll, size_t count, int nranks, int direct,
                             int cores, int in_place)
{
    /* The output above the input: an AllGather whose input lies within its output's count * nranks bytes
     * from its start is in place (algo_in_place). */
    static char buf[2];
    coll_args_t a = {coll, &buf[0], in_place ? &buf[0] : &buf[1], count, chorus_uint8, chorus_sum, 0};
    static tune_state_t ts;
    state_for(&ts, nranks, direct, cores);
    const algo_desc_t *d = tune_select(&ts, &a, cfg);
    return d ? d->name : "(none)";
}

/* The model's choice for the call pick_args makes (out of place, a core per rank), among the
 * comma-separated names of the collective's algorithms. */
static const char *model_among(coll_kind_t coll, size_t count, int nranks, int direct, const char *names)
{
    static tune_state_t ts;
    state_for(&ts, nranks, direct, nranks);
    /* CHORUS_ALGO's syntax narrows the collective to the names; the model looks at that collective only. */
    static char err[512];
    char text[256];
    algo_config_t among;
    snprintf(text, sizeof(text), "%s:%s", coll_name(coll), names);
    if (algo_config_parse(text, &among, err, sizeof(err)) != CHORUS_SUCCESS) return err;
    coll_args_t a = {coll, NULL, NULL, count, chorus_uint8, chorus_sum, 0};
    double mid; /* the selection prices a size bucket's middle (tune_select_among) */
    tune_bucket(algo_call_bytes(&a, nranks), &mid);
    const algo_desc_t *d = tune_model_choice(&ts.file.params, &ts.comm, coll, mid, &among);
    return d ? d->name : "(none)";
}

static const char *pick_on(const algo_config_t *cfg, coll_kind_t coll, size_t count, int nranks, int direct,
                           int cores)
{
    return pick_args(cfg, coll, count, nranks, direct, cores, 0);
}

static const char *pick_caps(const algo_config_t *cfg, coll_kind_t coll, size_t count, int nranks, int direct)
{
    return pick_on(cfg, coll, count, nranks, direct, nranks);
}

/* Across hosts: no direct access. */
static const char *pick(const algo_config_t *cfg, coll_kind_t coll, size_t count, int nranks)
{
    return pick_caps(cfg, coll, count, nranks, 0);
}

static int parse(const char *text, algo_config_t *cfg, char *err)
{
    err[0] = 0;
    return algo_config_parse(text, cfg, err, 512) == CHORUS_SUCCESS;
}

static void check_defaults(void)
{
    algo_config_t cfg;
    char err[512];
    TEST_ASSERT(parse(NULL, &cfg, err) && parse("", &cfg, err), "empty settings: %s", err);
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLREDUCE, 1000, 8), "rhd") == 0, "small allreduce");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLREDUCE, 1 << 24, 8), "ring") == 0, "large allreduce");
    /* Built-in rules that depend on the rank count, the core count and direct access (counts in bytes;
     * AllGather and ReduceScatter counts are per rank). */
    static const struct {
        coll_kind_t coll;
        size_t count;
        int nranks, direct, cores;
        const char *want, *what;
    } cases[] = {
        /* Ranks that outnumber the cores take the mesh for large AllReduce over connections, the ring
         * below 1 MiB; on one host with direct access the arena algorithms still come first. */
        {COLL_ALLREDUCE, 1 << 24, 8, 0, 2, "mesh", "oversubscribed, large"},
        {COLL_ALLREDUCE, 512 << 10, 8, 0, 2, "rhd", "oversubscribed, 512 KiB"},
        {COLL_ALLREDUCE, 512 << 10, 6, 0, 2, "ring", "oversubscribed, 512 KiB, 6 ranks"},
        {COLL_ALLREDUCE, 1 << 24, 8, 1, 2, "twoshot", "oversubscribed, one host"},
        {COLL_ALLREDUCE, 1 << 24, 4, 0, 0, "ring", "cores unknown: no sharing"},
        /* Two ranks across two hosts take the mesh for large AllReduce, one rank a core or not; on one host
         * twoshot. */
        {COLL_ALLREDUCE, 8 << 20, 2, 0, 2, "mesh", "2 ranks, 8 MiB"},
        {COLL_ALLREDUCE, 16 << 10, 2, 0, 2, "rd", "2 ranks, two hosts, 16 KiB"},
        {COLL_ALLREDUCE, 16, 2, 0, 2, "rd", "2 ranks, two hosts, 16 B"},
        {COLL_ALLREDUCE, 64 << 10, 2, 0, 2, "rhd", "2 ranks, two hosts, 64 KiB"},
        {COLL_ALLREDUCE, 8 << 20, 2, 1, 4, "twoshot", "2 ranks, 8 MiB, one host"},
        {COLL_ALLREDUCE, 4 << 20, 2, 0, 2, "ring", "2 ranks, 4 MiB"},
        {COLL_ALLREDUCE, 8 << 20, 3, 0, 4, "ring", "3 ranks, 8 MiB"},
        /* Small AllReduce where ranks outnumber cores: the star, up to 8 ranks and 64 KiB; then rhd to 512
         * KiB for a power-of-two rank count. */
        {COLL_ALLREDUCE, 1 << 10, 4, 0, 2, "star", "oversubscribed, 1 KiB"},
        {COLL_ALLREDUCE, 64 << 10, 8, 0, 2, "star", "oversubscribed, 64 KiB"},
        {COLL_ALLREDUCE, 128 << 10, 8, 0, 2, "rhd", "oversubscribed, 128 KiB"},
        {COLL_ALLREDUCE, 256 << 10, 4, 0, 2, "rhd", "oversubscribed, 256 KiB"},
        {COLL_ALLREDUCE, 1 << 10, 4, 0, 4, "rhd", "one rank a core, 1 KiB"},
        {COLL_ALLREDUCE, 1 << 10, 16, 0, 2, "rhd", "16 ranks, 1 KiB"},
        {COLL_ALLREDUCE, 1 << 10, 8, 1, 2, "oneshot", "one host, 1 KiB"},
        /* One host: oneshot to 64 KiB on 2 ranks, 32 KiB on 4, 16 KiB on 8; then twoshot (2, 4, 8 ranks). */
        {COLL_ALLREDUCE, 64 << 10, 2, 1, 2, "oneshot", "2 ranks, one host, 64 KiB"},
        {COLL_ALLREDUCE, 128 << 10, 2, 1, 2, "twoshot", "2 ranks, one host, 128 KiB"},
        {COLL_ALLREDUCE, 32 << 10, 4, 1, 2, "oneshot", "4 ranks, one host, 32 KiB"},
        {COLL_ALLREDUCE, 64 << 10, 4, 1, 2, "twoshot", "4 ranks, one host, 64 KiB"},
        {COLL_ALLREDUCE, 16 << 10, 8, 1, 2, "oneshot", "8 ranks, one host, 16 KiB"},
        {COLL_ALLREDUCE, 32 << 10, 8, 1, 2, "twoshot", "8 ranks, one host, 32 KiB"},
        {COLL_ALLREDUCE, 32 << 10, 6, 1, 2, "oneshot", "6 ranks, one host, 32 KiB"},
        {COLL_ALLREDUCE, 256 << 10, 4, 1, 2, "twoshot", "4 ranks, one host, 256 KiB"},
        {COLL_ALLREDUCE, 512 << 10, 4, 1, 2, "twoshot", "4 ranks, one host, 512 KiB"},
        /* 3 and 5 to 7 ranks of one host: one-shot while n p <= 256 KiB, then two-shot at every size. */
        {COLL_ALLREDUCE, 256 << 10, 3, 1, 2, "twoshot", "3 ranks, one host, 256 KiB"},
        {COLL_ALLREDUCE, 64 << 10, 3, 1, 2, "oneshot", "3 ranks, one host, 64 KiB"},
        {COLL_ALLREDUCE, 64 << 20, 3, 1, 2, "twoshot", "3 ranks, one host, 64 MiB"},
        {COLL_ALLREDUCE, 64 << 10, 6, 1, 2, "twoshot", "6 ranks, one host, 64 KiB"},
        {COLL_ALLREDUCE, 1 << 20, 7, 1, 2, "twoshot", "7 ranks, one host, 1 MiB"},
        {COLL_ALLREDUCE, 16 << 10, 7, 1, 2, "oneshot", "7 ranks, one host, 16 KiB"},
        {COLL_REDUCE_SCATTER, 1 << 21, 4, 0, 2, "mesh", "reduce_scatter 8 MiB in all, oversubscribed"},
        {COLL_REDUCE_SCATTER, 1 << 18, 4, 0, 2, "ring", "reduce_scatter 1 MiB in all, oversubscribed"},
        {COLL_ALLGATHER, 1 << 20, 4, 0, 2, "rd", "allgather 4 MiB, oversubscribed"},
        {COLL_ALLGATHER, 4 << 20, 4, 0, 2, "rd", "allgather 16 MiB, oversubscribed"},
        {COLL_ALLGATHER, 32 << 10, 4, 0, 2, "rd", "allgather 128 KiB, oversubscribed"},
        {COLL_ALLGATHER, 1 << 20, 6, 0, 2, "mesh", "allgather 6 MiB, 6 ranks, oversubscribed"},
        {COLL_ALLGATHER, 1 << 24, 4, 0, 2, "ring", "allgather 64 MiB, oversubscribed"},
        {COLL_ALLGATHER, 1 << 20, 4, 0, 4, "ring", "allgather 4 MiB, one rank a core"},
        /* Small AllGather where ranks outnumber cores: recursive doubling for a power-of-two rank count. */
        {COLL_ALLGATHER, 256, 4, 0, 2, "rd", "allgather 1 KiB, oversubscribed"},
        {COLL_ALLGATHER, 2 << 10, 8, 0, 2, "rd", "allgather 16 KiB, 8 ranks, oversubscribed"},
        {COLL_ALLGATHER, 256, 6, 0, 2, "bruck", "allgather 1.5 KiB, 6 ranks, oversubscribed"},
        /* On 2 ranks of one host (with single-copy reads) the direct AllGather up to 64 KiB, then the
         * model's choice among direct, ring and cma (check_rule_model), which the built-in figures make
         * direct at 128 KiB; across two hosts the ring. */
        {COLL_ALLGATHER, 32 << 10, 2, 1, 2, "direct", "allgather 64 KiB, 2 ranks, one host"},
        {COLL_ALLGATHER, 64 << 10, 2, 1, 2, "direct", "allgather 128 KiB, 2 ranks, one host"},
        {COLL_ALLGATHER, 8 << 20, 2, 0, 2, "ring", "allgather 16 MiB, 2 ranks, two hosts"},
        {COLL_ALLGATHER, 32 << 10, 3, 1, 2, "direct", "allgather 96 KiB, 3 ranks, one host"},
        {COLL_ALLGATHER, 256, 4, 0, 4, "bruck", "allgather 1 KiB, one rank a core"},
        {COLL_ALLGATHER, 16 << 10, 4, 0, 2, "bruck", "allgather 64 KiB, oversubscribed"},
        /* Broadcast: direct on 2 ranks of one host; small, where ranks outnumber cores, the chain. */
        {COLL_BROADCAST, 8, 2, 1, 2, "direct", "broadcast 8 B, 2 ranks, one host"},
        {COLL_BROADCAST, 8, 2, 0, 2, "chain", "broadcast 8 B, 2 ranks, two hosts"},
        {COLL_REDUCE, 8, 2, 1, 2, "chain", "reduce 8 B, 2 ranks, one host"},
        /* The direct Reduce from 3 ranks and 256 KiB on one host. */
        {COLL_REDUCE, 256 << 10, 3, 1, 2, "direct", "reduce 256 KiB, 3 ranks, one host"},
        {COLL_REDUCE, 1 << 20, 8, 1, 2, "direct", "reduce 1 MiB, 8 ranks, one host"},
        {COLL_REDUCE, 128 << 10, 4, 1, 2, "chain", "reduce 128 KiB, 4 ranks, one host"},
        {COLL_REDUCE, 1 << 20, 4, 0, 2, "chain", "reduce 1 MiB, 4 ranks, no arena"},
        {COLL_REDUCE, 8, 3, 0, 4, "binomial", "reduce 8 B, 3 ranks, one rank a core"},
        {COLL_BROADCAST, 8, 3, 0, 4, "binomial", "broadcast 8 B, 3 ranks, one rank a core"},
        {COLL_BROADCAST, 1 << 10, 4, 0, 2, "chain", "broadcast 1 KiB, oversubscribed"},
        {COLL_BROADCAST, 1 << 10, 4, 1, 2, "chain", "broadcast 1 KiB, oversubscribed, one host"},
        /* Up to what travels in a stamp, the direct one, whose root runs ahead, on any ranks of one host. */
        {COLL_BROADCAST, 8, 8, 1, 2, "direct", "broadcast 8 B, oversubscribed, one host"},
        {COLL_BROADCAST, 88, 4, 1, 4, "direct", "broadcast 88 B, one rank a core, one host"},
        {COLL_BROADCAST, 89, 8, 1, 2, "chain", "broadcast 89 B, oversubscribed, one host"},
        {COLL_BROADCAST, 8, 8, 0, 2, "chain", "broadcast 8 B, oversubscribed, no arena"},
        {COLL_BROADCAST, 1 << 10, 4, 0, 4, "binomial", "broadcast 1 KiB, one rank a core"},
        {COLL_BROADCAST, 64 << 10, 4, 0, 2, "chain", "broadcast 64 KiB, oversubscribed"},
        {COLL_BROADCAST, 64 << 10, 4, 0, 4, "binomial", "broadcast 64 KiB, one rank a core"},
        {COLL_BROADCAST, 1 << 20, 4, 1, 2, "direct", "broadcast 1 MiB, one host"},
        {COLL_BROADCAST, 32 << 10, 8, 1, 2, "direct", "broadcast 32 KiB, 8 ranks, one host"},
        {COLL_BROADCAST, 16 << 10, 8, 1, 2, "chain", "broadcast 16 KiB, 8 ranks, one host"},
        {COLL_BROADCAST, 64 << 10, 3, 1, 2, "chain", "broadcast 64 KiB, 3 ranks, one host"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const char *got = pick_on(&cfg, cases[k].coll, cases[k].count, cases[k].nranks, cases[k].direct,
                                  cases[k].cores);
        TEST_ASSERT(strcmp(got, cases[k].want) == 0, "%s: %s, not %s", cases[k].what, got, cases[k].want);
    }
    /* AllToAll in place on one host: direct at every size (the others copy the input to scratch first). */
    TEST_ASSERT(strcmp(pick_args(&cfg, COLL_ALLTOALL, 1 << 20, 8, 1, 8, 1), "direct") == 0, "alltoall 8 MiB in place");
    TEST_ASSERT(strcmp(pick_args(&cfg, COLL_ALLTOALL, 1 << 20, 8, 1, 8, 0), model_among(COLL_ALLTOALL, 1 << 20, 8, 1,
                "direct,cma")) == 0, "alltoall 8 MiB out of place: the model's choice between direct and cma");
    TEST_ASSERT(strcmp(pick_args(&cfg, COLL_ALLTOALL, 1 << 20, 8, 0, 8, 1), "pairwise") == 0, "in place, two hosts");
    /* Per-rank counts are scaled by nranks: 8 x 16K is large. */
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLGATHER, 16 << 10, 8), "ring") == 0, "allgather sized as the whole buffer");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_BARRIER, 0, 8), "dissemination") == 0, "barrier");
    size_t n;
    const algo_desc_t *t = algo_registry(&n);
    for (int c = 0; c < COLL_COUNT; c++) {
        int found = 0;
        for (size_t i = 0; i < n; i++) found |= t[i].coll == (coll_kind_t)c;
        TEST_ASSERT(found, "%s has no algorithm", coll_name((coll_kind_t)c));
    }
}

static void check_forcing(void)
{
    algo_config_t cfg;
    char err[512];
    TEST_ASSERT(parse("ring", &cfg, err), "ring: %s", err);
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLREDUCE, 10, 4), "ring") == 0, "ring forces allreduce");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLTOALL, 10, 4), "ring") == 0, "ring forces alltoall");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_BROADCAST, 10, 4), "binomial") == 0, "broadcast has no ring: default");

    TEST_ASSERT(parse(" allreduce : DBT ; allgather:bruck,mesh ", &cfg, err), "per collective: %s", err);
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLREDUCE, 1 << 24, 4), "dbt") == 0, "allreduce:dbt");
    const char *listed = pick(&cfg, COLL_ALLGATHER, 1 << 24, 4);
    TEST_ASSERT(strcmp(listed, "bruck") == 0 || strcmp(listed, "mesh") == 0, "a list keeps the listed ones: %s", listed);
    TEST_ASSERT(strcmp(pick(&cfg, COLL_REDUCE_SCATTER, 10, 4), "rhd") == 0, "others keep the default");

    TEST_ASSERT(parse("^rhd,bruck", &cfg, err), "exclusion: %s", err);
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLREDUCE, 10, 4), "ring") == 0, "excluded rhd falls to the next rule");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLTOALL, 10, 4), "pairwise") == 0, "excluded bruck");

    TEST_ASSERT(parse("ring;allreduce:tree,mesh", &cfg, err), "segments in order: %s", err);
    const char *later = pick(&cfg, COLL_ALLREDUCE, 1 << 24, 4);
    TEST_ASSERT(strcmp(later, "tree") == 0 || strcmp(later, "mesh") == 0, "the later segment wins: %s", later);
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLGATHER, 10, 4), "ring") == 0, "the earlier one still holds elsewhere");
    TEST_ASSERT(parse("^ring;allreduce:^rhd", &cfg, err), "exclusions add up: %s", err);
    const char *left = pick(&cfg, COLL_ALLREDUCE, 1 << 24, 4);
    TEST_ASSERT(strcmp(left, "ring") != 0 && strcmp(left, "rhd") != 0 && strcmp(left, "oneshot") != 0 &&
                strcmp(left, "twoshot") != 0, "neither ring nor rhd (nor a direct one across hosts): %s", left);
}

/* Where the built-in rules leave a choice among allowed algorithms, and with CHORUS_TUNING=model, the
 * model's minimum decides; a tuning file's rules come first. */
static void check_tuning_precedence(void)
{
    algo_config_t cfg;
    char err[512];
    TEST_ASSERT(parse("", &cfg, err), "%s", err);
    static tune_state_t ts;
    memset(&ts, 0, sizeof(ts));
    tune_params_builtin(&ts.file.params, 1);
    ts.comm = (tune_comm_t){.nranks = 8, .ranks_per_host = 1, .cores = 2, .net = TUNE_LINK_TCP,
                            .caps = {.nranks = 8}, .chunk = 256 << 10, .slot = 256 << 10};
    coll_args_t a = {COLL_ALLREDUCE, NULL, NULL, 1 << 20, chorus_uint8, chorus_sum, 0};
    ts.mode = TUNE_MODE_MODEL;
    const algo_desc_t *m = tune_select(&ts, &a, &cfg);
    const algo_desc_t *best = tune_model_choice(&ts.file.params, &ts.comm, COLL_ALLREDUCE, 1 << 20, &cfg);
    TEST_ASSERT(m && best && m == best, "model mode takes the model's minimum: %s, %s", m ? m->name : "-",
                best ? best->name : "-");
    for (size_t i = 0, n; i < (algo_registry(&n), n); i++) {
        const algo_desc_t *d = &algo_registry(&n)[i];
        if (d->coll == COLL_ALLREDUCE && algo_supported(d, &ts.comm.caps))
            TEST_ASSERT(tune_predict(&ts.file.params, &ts.comm, d, 1 << 20) >=
                            tune_predict(&ts.file.params, &ts.comm, best, 1 << 20),
                        "%s predicted faster than the minimum", d->name);
    }
    /* A tuning file's rule beats both the built-in rules and the model. */
    size_t n, star = 0;
    const algo_desc_t *t = algo_registry(&n);
    while (star < n && !(t[star].coll == COLL_ALLREDUCE && strcmp(t[star].name, "star") == 0)) star++;
    ts.file.rules[0] = (tune_rule_t){.coll = COLL_ALLREDUCE, .entry = star, .min_bytes = 1000, .max_bytes = 1 << 21};
    ts.file.nrules = 1;
    for (int mode = TUNE_MODE_RULES; mode <= TUNE_MODE_MODEL; mode++) {
        ts.mode = (tune_mode_t)mode;
        TEST_ASSERT(strcmp(tune_select(&ts, &a, &cfg)->name, "star") == 0, "the file's rule comes first");
        a.count = 1 << 22;
        TEST_ASSERT(strcmp(tune_select(&ts, &a, &cfg)->name, "star") != 0, "the file's rule has bounds");
        a.count = 1 << 20;
    }
    /* A rule's other bounds: the communicator's link, in place or not, and its rank counts. */
    ts.mode = TUNE_MODE_RULES;
    ts.file.rules[0].links = 1u << TUNE_LINK_SHM;
    TEST_ASSERT(strcmp(tune_select(&ts, &a, &cfg)->name, "star") != 0, "a rule for shared memory is not one for TCP");
    ts.file.rules[0].links = 1u << TUNE_LINK_TCP;
    TEST_ASSERT(strcmp(tune_select(&ts, &a, &cfg)->name, "star") == 0, "a rule for TCP applies over TCP");
    ts.file.rules[0].place = TUNE_PLACE_OUT;
    TEST_ASSERT(strcmp(tune_select(&ts, &a, &cfg)->name, "star") != 0, "an out-of-place rule is not for in place");
    static char in[8], out[8];
    a.sendbuf = in;
    a.recvbuf = out;
    TEST_ASSERT(strcmp(tune_select(&ts, &a, &cfg)->name, "star") == 0, "an out-of-place rule applies out of place");
    ts.file.rules[0].max_ranks = 4;
    TEST_ASSERT(strcmp(tune_select(&ts, &a, &cfg)->name, "star") != 0, "nor beyond its rank counts");
    ts.file.rules[0] = (tune_rule_t){.coll = COLL_ALLREDUCE, .entry = star, .min_bytes = 1000, .max_bytes = 1 << 21};
    a.sendbuf = a.recvbuf = NULL;
    /* In place is the same on every rank: only rank 0's in-place AllGather and ReduceScatter buffers start
     * at the same address. */
    static char buf[64];
    coll_args_t g = {COLL_ALLGATHER, buf + 16, buf, 8, chorus_uint8, chorus_sum, 0};
    TEST_ASSERT(algo_in_place(&g, 4), "rank 2's in-place AllGather is in place");
    g.sendbuf = buf + 40;
    TEST_ASSERT(!algo_in_place(&g, 4), "a send buffer past the receive buffer is not");
    g = (coll_args_t){COLL_REDUCE_SCATTER, buf, buf + 24, 8, chorus_uint8, chorus_sum, 0};
    TEST_ASSERT(algo_in_place(&g, 4), "rank 3's in-place ReduceScatter is in place");
    g.recvbuf = NULL;
    TEST_ASSERT(!algo_in_place(&g, 4), "disjoint buffers are not");
    /* ... but not before CHORUS_ALGO (fixed for a communicator's life: the cache of model choices
     * assumes it). */
    TEST_ASSERT(parse("allreduce:ring", &cfg, err), "%s", err);
    memset(ts.model_choice, 0, sizeof(ts.model_choice));
    TEST_ASSERT(strcmp(tune_select(&ts, &a, &cfg)->name, "ring") == 0, "forced beats the file's rule");
}

/* Algorithms that need direct access are chosen only where the communicator has it; forcing one where
 * it has not falls back to what is allowed and supported, then to any supported algorithm. */
static void check_restrictions(void)
{
    algo_config_t cfg;
    char err[512];
    TEST_ASSERT(parse(NULL, &cfg, err), "empty settings: %s", err);
    TEST_ASSERT(strcmp(pick_caps(&cfg, COLL_ALLREDUCE, 1000, 4, 1), "oneshot") == 0, "small allreduce on one host");
    TEST_ASSERT(strcmp(pick_caps(&cfg, COLL_BARRIER, 0, 4, 1), "direct") == 0, "barrier on one host");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_BARRIER, 0, 4), "dissemination") == 0, "barrier across hosts");
    TEST_ASSERT(parse("allreduce:oneshot", &cfg, err), "oneshot: %s", err);
    TEST_ASSERT(strcmp(pick_caps(&cfg, COLL_ALLREDUCE, 1 << 24, 4, 1), "oneshot") == 0, "forced oneshot");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLREDUCE, 1 << 24, 4), "ring") == 0, "forced oneshot across hosts: default");
    size_t n;
    const algo_desc_t *t = algo_registry(&n);
    for (size_t i = 0; i < n; i++) {
        algo_caps_t none = {.nranks = 4}, direct = {.nranks = 4, .direct = 1},
                    all = {.nranks = 4, .direct = 1, .single_copy = 1, .hosts = 2, .per_host = 2};
        TEST_ASSERT(algo_supported(&t[i], &all), "%s %s unsupported with every capability", coll_name(t[i].coll),
                    t[i].name);
        TEST_ASSERT(algo_supported(&t[i], &none) == !t[i].needs, "%s %s restrictions", coll_name(t[i].coll),
                    t[i].name);
        TEST_ASSERT(algo_supported(&t[i], &direct) == !(t[i].needs & (ALGO_NEEDS_SINGLE_COPY | ALGO_NEEDS_HOSTS | ALGO_NEEDS_EVEN_HOSTS)),
                    "%s %s needs single copy", coll_name(t[i].coll), t[i].name);
    }
}

/* Where single-copy reads outrun the arena, 2 ranks of one host take the single-copy algorithms from
 * 16 KiB (AllReduce from 32 KiB, Reduce from 64 KiB); elsewhere the rules stay as they were. Where they
 * beat a copy and an arena read together, 2 ranks take the single-copy Broadcast, AllGather, AllToAll,
 * ReduceScatter and AllReduce from 64 KiB, 3 and 4 ranks the AllGather from 512 KiB to 16 MiB, the
 * AllReduce from 256 KiB, the ReduceScatter from 1 MiB, the Reduce from 1 to 16 MiB and the AllToAll from
 * 256 KiB to 8 MiB out of place, 4 ranks the Broadcast from 256 KiB to 8 MiB (8 ranks leave the AllToAll
 * from 256 KiB to the model either way, and take the single-copy ReduceScatter from 256 KiB to 4 MiB).
 * The cases below say which, with the exceptions (place, the two-shot AllReduce from 32 MiB). */
static void check_single_copy_fast(void)
{
    algo_config_t cfg;
    char err[512];
    TEST_ASSERT(parse(NULL, &cfg, err), "empty settings: %s", err);
    /* want[mode]: the choice with single-copy reads as built in (0), faster than the arena (1), and only
     * faster than a copy and an arena read together (2); "model": the model's among the rule's names
     * (direct, ring and cma for the AllGather; direct and cma for the AllToAll from 8 ranks; direct,
     * pairwise and cma for the others). */
    static const struct {
        coll_kind_t coll;
        size_t count;
        int nranks, direct, in_place;
        const char *want[3], *what;
    } cases[] = {
        {COLL_ALLREDUCE, 256 << 10, 2, 1, 0, {"twoshot", "cma", "cma"}, "allreduce 256 KiB"},
        {COLL_ALLREDUCE, 128 << 10, 2, 1, 0, {"twoshot", "cma", "cma"}, "allreduce 128 KiB"},
        {COLL_ALLREDUCE, 256 << 10, 2, 1, 1, {"twoshot", "cma", "cma"}, "allreduce 256 KiB in place"},
        {COLL_ALLREDUCE, 32 << 20, 2, 1, 0, {"twoshot", "twoshot", "twoshot"}, "allreduce 32 MiB"},
        {COLL_ALLREDUCE, 32 << 20, 2, 1, 1, {"twoshot", "cma", "cma"}, "allreduce 32 MiB in place"},
        {COLL_ALLREDUCE, 64 << 10, 2, 1, 0, {"oneshot", "cma", "cma"}, "allreduce 64 KiB"},
        {COLL_ALLREDUCE, 32 << 10, 2, 1, 1, {"oneshot", "cma", "oneshot"}, "allreduce 32 KiB in place"},
        {COLL_ALLREDUCE, 16 << 10, 2, 1, 0, {"oneshot", "oneshot", "oneshot"}, "allreduce 16 KiB"},
        {COLL_ALLREDUCE, 1 << 20, 2, 0, 0, {"ring", "ring", "ring"}, "allreduce 1 MiB, two hosts"},
        /* 3 and 4 ranks: single copy from 256 KiB to 4 MiB where it saves a copy, in place from 256 KiB. */
        {COLL_ALLREDUCE, 1 << 20, 4, 1, 0, {"twoshot", "cma", "cma"}, "allreduce 1 MiB, 4 ranks"},
        {COLL_ALLREDUCE, 128 << 10, 4, 1, 1, {"twoshot", "twoshot", "twoshot"}, "allreduce 128 KiB in place, 4 ranks"},
        {COLL_ALLREDUCE, 8 << 20, 4, 1, 0, {"twoshot", "twoshot", "twoshot"}, "allreduce 8 MiB, 4 ranks"},
        {COLL_ALLREDUCE, 64 << 20, 4, 1, 1, {"twoshot", "cma", "cma"}, "allreduce 64 MiB in place, 4 ranks"},
        {COLL_ALLREDUCE, 1 << 20, 8, 1, 0, {"twoshot", "twoshot", "twoshot"}, "allreduce 1 MiB, 8 ranks"},
        {COLL_ALLREDUCE, 1 << 20, 3, 1, 0, {"twoshot", "cma", "cma"}, "allreduce 1 MiB, 3 ranks"},
        {COLL_ALLREDUCE, 16 << 20, 3, 1, 1, {"twoshot", "cma", "cma"}, "allreduce 16 MiB in place, 3 ranks"},
        {COLL_ALLGATHER, 8 << 10, 2, 1, 0, {"direct", "cma", "direct"}, "allgather 16 KiB"},
        {COLL_ALLGATHER, 4 << 10, 2, 1, 0, {"direct", "direct", "direct"}, "allgather 8 KiB"},
        {COLL_BROADCAST, 16 << 10, 2, 1, 0, {"direct", "cma", "direct"}, "broadcast 16 KiB"},
        {COLL_BROADCAST, 16 << 20, 2, 1, 1, {"direct", "direct", "direct"}, "broadcast 16 MiB in place"},
        {COLL_BROADCAST, 16 << 20, 2, 1, 0, {"direct", "cma", "cma"}, "broadcast 16 MiB"},
        /* 2 ranks from 1 MiB: single copy wherever it saves the direct algorithms' copy, fast or not. */
        {COLL_BROADCAST, 1 << 20, 2, 1, 1, {"direct", "cma", "cma"}, "broadcast 1 MiB in place"},
        {COLL_BROADCAST, 512 << 10, 2, 1, 0, {"direct", "cma", "cma"}, "broadcast 512 KiB"},
        /* From 64 KiB where they save a copy (below, a call's syscalls weigh). */
        {COLL_BROADCAST, 64 << 10, 2, 1, 0, {"direct", "cma", "cma"}, "broadcast 64 KiB"},
        {COLL_BROADCAST, 32 << 10, 2, 1, 0, {"direct", "cma", "direct"}, "broadcast 32 KiB"},
        {COLL_ALLGATHER, 32 << 10, 2, 1, 0, {"direct", "cma", "cma"}, "allgather 64 KiB"},
        {COLL_ALLGATHER, 16 << 10, 2, 1, 0, {"direct", "cma", "direct"}, "allgather 32 KiB"},
        {COLL_ALLTOALL, 32 << 10, 2, 1, 0, {"direct", "cma", "cma"}, "alltoall 64 KiB"},
        {COLL_ALLTOALL, 16 << 10, 2, 1, 0, {"direct", "cma", "direct"}, "alltoall 32 KiB"},
        /* Elsewhere from 128 KiB the model chooses ("model"; check_rule_model). */
        {COLL_ALLGATHER, 8 << 20, 2, 1, 0, {"model", "cma", "cma"}, "allgather 16 MiB"},
        /* From 32 MiB the direct algorithms, whose outputs stream, whatever single copy does; the AllGather,
         * whose single-copy blocks go out of the writer's cache, only in place from 128 MiB. */
        {COLL_ALLGATHER, 16 << 20, 2, 1, 0, {"model", "cma", "cma"}, "allgather 32 MiB"},
        {COLL_ALLGATHER, 64 << 20, 2, 1, 0, {"model", "cma", "cma"}, "allgather 128 MiB"},
        {COLL_ALLGATHER, 64 << 20, 2, 1, 1, {"direct", "direct", "direct"}, "allgather 128 MiB in place"},
        {COLL_ALLGATHER, 16 << 20, 2, 1, 1, {"model", "cma", "cma"}, "allgather 32 MiB in place"},
        {COLL_ALLTOALL, 32 << 20, 2, 1, 0, {"direct", "direct", "direct"}, "alltoall 64 MiB"},
        {COLL_BROADCAST, 32 << 20, 2, 1, 0, {"direct", "direct", "direct"}, "broadcast 32 MiB"},
        {COLL_BROADCAST, 32 << 20, 2, 1, 1, {"direct", "direct", "direct"}, "broadcast 32 MiB in place"},
        {COLL_ALLGATHER, 256 << 10, 2, 1, 0, {"model", "cma", "model"}, "allgather 512 KiB"},
        {COLL_ALLTOALL, 2 << 20, 2, 1, 0, {"model", "cma", "cma"}, "alltoall 4 MiB"},
        {COLL_ALLTOALL, 512 << 10, 2, 1, 1, {"direct", "direct", "direct"}, "alltoall 1 MiB in place"},
        {COLL_ALLTOALL, 8 << 10, 2, 1, 1, {"direct", "direct", "direct"}, "alltoall 16 KiB in place"},
        {COLL_ALLTOALL, 8 << 10, 2, 1, 0, {"direct", "cma", "direct"}, "alltoall 16 KiB"},
        {COLL_ALLTOALL, 2 << 10, 2, 1, 0, {"direct", "direct", "direct"}, "alltoall 4 KiB"},
        /* 3 and 4 ranks: the single-copy AllToAll from 256 KiB to 8 MiB out of place wherever it saves the
         * direct one's copy, fast or not, and direct where it does not (the built-in figures); the rank
         * counts, sizes and places around it keep their rules. */
        {COLL_ALLTOALL, 64 << 10, 4, 1, 0, {"direct", "cma", "cma"}, "alltoall 256 KiB, 4 ranks"},
        {COLL_ALLTOALL, 1 << 20, 4, 1, 0, {"direct", "cma", "cma"}, "alltoall 4 MiB, 4 ranks"},
        {COLL_ALLTOALL, 2 << 20, 4, 1, 0, {"direct", "cma", "cma"}, "alltoall 8 MiB, 4 ranks"},
        {COLL_ALLTOALL, 4 << 20, 4, 1, 0, {"direct", "direct", "direct"}, "alltoall 16 MiB, 4 ranks"},
        {COLL_ALLTOALL, 128 << 10, 3, 1, 0, {"direct", "cma", "cma"}, "alltoall 384 KiB, 3 ranks"},
        {COLL_ALLTOALL, 16 << 10, 4, 1, 0, {"direct", "direct", "direct"}, "alltoall 64 KiB, 4 ranks"},
        {COLL_ALLTOALL, 1 << 20, 4, 1, 1, {"direct", "direct", "direct"}, "alltoall 4 MiB in place, 4 ranks"},
        /* 3 and 4 ranks: the single-copy AllGather from 512 KiB to 16 MiB where it saves the direct one's
         * copy; 4 ranks: the single-copy Broadcast from 256 KiB to 8 MiB, in place or not. */
        {COLL_ALLGATHER, 128 << 10, 4, 1, 0, {"direct", "cma", "cma"}, "allgather 512 KiB, 4 ranks"},
        {COLL_ALLGATHER, 2 << 20, 4, 1, 1, {"direct", "cma", "cma"}, "allgather 8 MiB in place, 4 ranks"},
        {COLL_ALLGATHER, 1 << 20, 3, 1, 0, {"direct", "cma", "cma"}, "allgather 3 MiB, 3 ranks"},
        {COLL_ALLGATHER, 64 << 10, 4, 1, 0, {"direct", "direct", "direct"}, "allgather 256 KiB, 4 ranks"},
        {COLL_ALLGATHER, 4 << 20, 4, 1, 0, {"direct", "cma", "cma"}, "allgather 16 MiB, 4 ranks"},
        {COLL_ALLGATHER, 8 << 20, 4, 1, 0, {"direct", "direct", "direct"}, "allgather 32 MiB, 4 ranks"},
        {COLL_ALLGATHER, 128 << 10, 8, 1, 0, {"direct", "direct", "direct"}, "allgather 1 MiB, 8 ranks"},
        {COLL_BROADCAST, 256 << 10, 4, 1, 0, {"direct", "cma", "cma"}, "broadcast 256 KiB, 4 ranks"},
        {COLL_BROADCAST, 8 << 20, 4, 1, 1, {"direct", "cma", "cma"}, "broadcast 8 MiB in place, 4 ranks"},
        {COLL_BROADCAST, 16 << 20, 4, 1, 0, {"direct", "direct", "direct"}, "broadcast 16 MiB, 4 ranks"},
        {COLL_BROADCAST, 1 << 20, 3, 1, 0, {"direct", "direct", "direct"}, "broadcast 1 MiB, 3 ranks"},
        {COLL_BROADCAST, 1 << 20, 8, 1, 0, {"direct", "direct", "direct"}, "broadcast 1 MiB, 8 ranks"},
        /* From 8 ranks out of place from 256 KiB: the model's choice between direct and single copy, at every
         * size (the watch may then move between them). */
        {COLL_ALLTOALL, 32 << 20, 8, 1, 0, {"model", "model", "model"}, "alltoall 256 MiB, 8 ranks"},
        {COLL_ALLTOALL, 8 << 20, 8, 1, 0, {"model", "model", "model"}, "alltoall 64 MiB, 8 ranks"},
        {COLL_ALLTOALL, 1 << 20, 8, 1, 0, {"model", "model", "model"}, "alltoall 8 MiB, 8 ranks"},
        {COLL_ALLTOALL, 32 << 10, 8, 1, 0, {"model", "model", "model"}, "alltoall 256 KiB, 8 ranks"},
        {COLL_ALLTOALL, 16 << 10, 8, 1, 0, {"direct", "direct", "direct"}, "alltoall 128 KiB, 8 ranks"},
        {COLL_ALLTOALL, 64 << 10, 8, 1, 1, {"direct", "direct", "direct"}, "alltoall 512 KiB in place, 8 ranks"},
        /* The single-copy ReduceScatter: 2 ranks from 16 KiB where it is fast, from 64 KiB where it saves a
         * copy; 3 and 4 ranks from 1 MiB where it saves a copy; 8 ranks from 256 KiB to 4 MiB. */
        {COLL_REDUCE_SCATTER, 8 << 10, 2, 1, 0, {"direct", "cma", "direct"}, "reduce_scatter 16 KiB"},
        {COLL_REDUCE_SCATTER, 4 << 10, 2, 1, 0, {"direct", "direct", "direct"}, "reduce_scatter 8 KiB"},
        {COLL_REDUCE_SCATTER, 32 << 10, 2, 1, 1, {"direct", "cma", "cma"}, "reduce_scatter 64 KiB in place"},
        {COLL_REDUCE_SCATTER, 64 << 20, 2, 1, 0, {"direct", "cma", "cma"}, "reduce_scatter 128 MiB"},
        {COLL_REDUCE_SCATTER, 256 << 10, 4, 1, 0, {"direct", "cma", "cma"}, "reduce_scatter 1 MiB, 4 ranks"},
        {COLL_REDUCE_SCATTER, 128 << 10, 4, 1, 0, {"direct", "direct", "direct"}, "reduce_scatter 512 KiB, 4 ranks"},
        {COLL_REDUCE_SCATTER, 16 << 20, 3, 1, 1, {"direct", "cma", "cma"}, "reduce_scatter 48 MiB in place, 3 ranks"},
        {COLL_REDUCE_SCATTER, 32 << 10, 8, 1, 0, {"cma", "cma", "cma"}, "reduce_scatter 256 KiB, 8 ranks"},
        {COLL_REDUCE_SCATTER, 16 << 10, 8, 1, 0, {"direct", "direct", "direct"}, "reduce_scatter 128 KiB, 8 ranks"},
        {COLL_REDUCE_SCATTER, 1 << 20, 8, 1, 0, {"direct", "direct", "direct"}, "reduce_scatter 8 MiB, 8 ranks"},
        {COLL_REDUCE_SCATTER, 1 << 20, 2, 0, 0, {"ring", "ring", "ring"}, "reduce_scatter 2 MiB, two hosts"},
        /* The single-copy Reduce: 2 ranks from 64 KiB where it is fast; 3 and 4 ranks from 1 to 16 MiB where
         * it saves a copy. */
        {COLL_REDUCE, 64 << 10, 2, 1, 0, {"chain", "cma", "chain"}, "reduce 64 KiB"},
        {COLL_REDUCE, 32 << 10, 2, 1, 0, {"chain", "chain", "chain"}, "reduce 32 KiB"},
        {COLL_REDUCE, 1 << 20, 4, 1, 1, {"direct", "cma", "cma"}, "reduce 1 MiB in place, 4 ranks"},
        {COLL_REDUCE, 16 << 20, 3, 1, 0, {"direct", "cma", "cma"}, "reduce 16 MiB, 3 ranks"},
        {COLL_REDUCE, 32 << 20, 4, 1, 0, {"direct", "direct", "direct"}, "reduce 32 MiB, 4 ranks"},
        {COLL_REDUCE, 512 << 10, 4, 1, 0, {"direct", "direct", "direct"}, "reduce 512 KiB, 4 ranks"},
        {COLL_REDUCE, 4 << 20, 8, 1, 0, {"direct", "direct", "direct"}, "reduce 4 MiB, 8 ranks"},
    };
    for (int mode = 0; mode < 3; mode++) {
        single_copy_fast = mode;
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            const char *want = cases[k].want[mode];
            if (strcmp(want, "model") == 0)
                want = model_among(cases[k].coll, cases[k].count, cases[k].nranks, cases[k].direct,
                                   cases[k].coll == COLL_ALLGATHER ? "direct,ring,cma"
                                   : cases[k].nranks >= 8          ? "direct,cma"
                                                                   : "direct,pairwise,cma");
            const char *got = pick_args(&cfg, cases[k].coll, cases[k].count, cases[k].nranks, cases[k].direct,
                                        cases[k].nranks, cases[k].in_place);
            TEST_ASSERT(strcmp(got, want) == 0, "%s, single copy mode %d: %s, not %s", cases[k].what, mode, got,
                        want);
        }
    }
    single_copy_fast = 0;
}

/* On 2 ranks of one host the built-in rules leave the model to choose the AllGather from 128 KiB among
 * direct, ring and cma (where single copy neither outruns the arena nor saves a copy), and the
 * out-of-place AllToAll from 128 KiB among direct, pairwise and cma, both below 32 MiB in all (direct
 * from there): which wins there is the machine's
 * (docs/algorithms.md). The choice is the model's minimum among those, never another algorithm the model
 * prices lower, and follows the figures: with an arena twice as fast as the built-in one the direct
 * algorithms, with the arena and single-copy reads a quarter as fast the ring and the pairwise exchange. */
static void check_rule_model(void)
{
    algo_config_t cfg;
    char err[512];
    TEST_ASSERT(parse(NULL, &cfg, err), "empty settings: %s", err);
    /* Per rank, on 2 ranks: up to just under 32 MiB in all, below the direct algorithms' rules. */
    static const size_t sizes[] = {64 << 10, 512 << 10, 2 << 20, 8 << 20, (16 << 20) - 4096};
    static const struct {
        double arena, cma;
        const char *allgather, *alltoall; /* NULL: whichever the model prefers */
    } figures[] = {{1, 1, NULL, NULL}, {2, 1, "direct", "direct"}, {0.25, 0.25, "ring", "pairwise"}};
    for (size_t f = 0; f < sizeof(figures) / sizeof(figures[0]); f++) {
        arena_scale = figures[f].arena;
        cma_scale = figures[f].cma;
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            const char *g = pick_on(&cfg, COLL_ALLGATHER, sizes[k], 2, 1, 2);
            TEST_ASSERT(strcmp(g, model_among(COLL_ALLGATHER, sizes[k], 2, 1, "direct,ring,cma")) == 0,
                        "allgather of %zu per rank, figures %zu: %s, not the model's choice", sizes[k], f, g);
            TEST_ASSERT(!figures[f].allgather || strcmp(g, figures[f].allgather) == 0,
                        "allgather of %zu per rank, figures %zu: %s", sizes[k], f, g);
            if (2 * sizes[k] < (128 << 10)) continue; /* AllToAll's rule starts at 128 KiB in all */
            const char *x = pick_on(&cfg, COLL_ALLTOALL, sizes[k], 2, 1, 2);
            TEST_ASSERT(strcmp(x, model_among(COLL_ALLTOALL, sizes[k], 2, 1, "direct,pairwise,cma")) == 0,
                        "alltoall of %zu per rank, figures %zu: %s, not the model's choice", sizes[k], f, x);
            TEST_ASSERT(!figures[f].alltoall || strcmp(x, figures[f].alltoall) == 0,
                        "alltoall of %zu per rank, figures %zu: %s", sizes[k], f, x);
        }
    }
    arena_scale = cma_scale = 1;
    /* With more ranks, the out-of-place AllToAll above 1 MiB is the direct one whatever the figures (3 and 4
     * ranks take the single-copy one up to 8 MiB, 8 and more from 256 KiB), even where the model would
     * price pairwise lower (an arena a quarter as fast). */
    for (int f = 0; f < 2; f++) {
        arena_scale = f ? 0.25 : 1;
        for (int nranks = 3; nranks <= 7; nranks += 4) {
            size_t mib = nranks < 5 ? 16 : 2, count = (mib << 20) / (size_t)nranks;
            const char *x = pick_on(&cfg, COLL_ALLTOALL, count, nranks, 1, nranks);
            TEST_ASSERT(strcmp(x, "direct") == 0, "alltoall of %zu MiB on %d ranks, arena x%g: %s", mib, nranks,
                        arena_scale, x);
        }
    }
    TEST_ASSERT(strcmp(model_among(COLL_ALLTOALL, (16u << 20) / 3, 3, 1, "direct,pairwise"), "pairwise") == 0,
                "the model prices pairwise lower with an arena a quarter as fast");
    arena_scale = 1;
    /* Across hosts these rules leave the small sizes to the log p algorithms. */
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLGATHER, 1 << 10, 2), "bruck") == 0, "allgather 2 KiB, 2 ranks, two hosts");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLTOALL, 2 << 10, 2), "bruck") == 0, "alltoall 4 KiB, 2 ranks, two hosts");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLTOALL, 1 << 20, 2), "pairwise") == 0, "alltoall 2 MiB, 2 ranks, two hosts");
    /* The built-in figures' terms (their efficiencies aside) price recursive doubling below direct and
     * single copy at 16 MiB, level with the ring (on 2 ranks both are one exchange of the same bytes): it
     * is not among the rule's, and never taken. */
    no_efficiencies = 1;
    TEST_ASSERT(strcmp(model_among(COLL_ALLGATHER, 8 << 20, 2, 1, "rd,mesh,direct,cma"), "rd") == 0,
                "rd below direct and cma at 16 MiB (the case this checks)");
    no_efficiencies = 0;
    const char *among = pick_on(&cfg, COLL_ALLGATHER, 8 << 20, 2, 1, 2);
    TEST_ASSERT(strcmp(among, "direct") == 0 || strcmp(among, "ring") == 0 || strcmp(among, "cma") == 0,
                "the rule's choice is one of its own: %s", among);
    /* CHORUS_ALGO narrows the rule's list: of direct and ring, the model's choice of the two. */
    TEST_ASSERT(parse("allgather:ring,direct", &cfg, err), "%s", err);
    TEST_ASSERT(strcmp(pick_on(&cfg, COLL_ALLGATHER, 1 << 20, 2, 1, 2), model_among(COLL_ALLGATHER, 1 << 20, 2, 1,
                                                                                       "direct,ring")) == 0,
                "a list narrowed by CHORUS_ALGO");
    TEST_ASSERT(parse("allgather:ring", &cfg, err), "%s", err);
    TEST_ASSERT(strcmp(pick_on(&cfg, COLL_ALLGATHER, 1 << 20, 2, 1, 2), "ring") == 0, "one left: that one");
}

static void check_errors(void)
{
    algo_config_t cfg = {0};
    char err[512];
    TEST_ASSERT(!parse("rong", &cfg, err) && strstr(err, "\"rong\"") && strstr(err, "scatter_allgather"),
                "unknown name lists the known ones: %s", err);
    TEST_ASSERT(!parse("broadcast:rhd", &cfg, err) && strstr(err, "chain, binomial, scatter_allgather"),
                "a name the collective lacks lists its own: %s", err);
    TEST_ASSERT(!parse("allreduz:ring", &cfg, err) && strstr(err, "allreduz"), "unknown collective: %s", err);
    TEST_ASSERT(!parse("barrier:^dissemination,direct", &cfg, err) && strstr(err, "barrier"), "nothing left: %s", err);
    TEST_ASSERT(!parse("allreduce:", &cfg, err), "an empty list");
    TEST_ASSERT(cfg.allowed == 0, "a failed parse writes nothing");
}

/* The built-in figures: the set of the share nearest the communicator's, each named in the logs by its share;
 * single-copy reads keep more of their cache rate in memory where more ranks share a core (tune.c). */
static void check_builtin_shares(void)
{
    static const struct {
        double s;
        const char *set;
    } cases[] = {{1, "at 1 rank per"}, {1.3, "at 1 rank per"}, {1.5, "at 2 ranks"}, {2, "at 2 ranks"},
                 {3, "at 4 ranks"}, {4, "at 4 ranks"}, {16, "at 4 ranks"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tune_params_t tp;
        tune_params_builtin(&tp, cases[i].s);
        TEST_ASSERT(strstr(tp.source, cases[i].set) != NULL, "share %g: %s", cases[i].s, tp.source);
        for (int r = 0; r < TUNE_REGIMES; r++)
            TEST_ASSERT(tp.beta[TUNE_LINK_ARENA][r] > 0 && tp.beta_cma_read[r] > 0 && tp.beta_copy[r] > 0 &&
                            tp.gamma[r] > 0 && tp.beta[TUNE_LINK_TCP][r] > 0 && tp.beta_oneway[TUNE_LINK_SHM][r] > 0,
                        "share %g: every rate set", cases[i].s);
    }
    /* Every line of the built-in efficiencies reads into its set. */
    static const struct {
        double s;
        const char *text;
    } effs[] = {{1, tune_builtin_efficiency_1}, {2, tune_builtin_efficiency_2}, {4, tune_builtin_efficiency_4}};
    for (size_t i = 0; i < sizeof(effs) / sizeof(effs[0]); i++) {
        tune_params_t tp;
        tune_params_builtin(&tp, effs[i].s);
        int lines = 0, set = 0;
        for (const char *p = effs[i].text; *p; p++) lines += *p == '\n';
        for (int l = 0; l < TUNE_LINK_COUNT; l++)
            for (int a = 0; a < TUNE_ALGOS_MAX; a++) set += tp.efficiency[l][a][TUNE_CACHE] > 0;
        TEST_ASSERT(lines > 50 && set == lines, "share %g: %d efficiencies set of %d lines", effs[i].s, set, lines);
    }
    tune_params_t one, four;
    tune_params_builtin(&one, 1);
    tune_params_builtin(&four, 4);
    TEST_ASSERT(four.beta_cma_read[TUNE_MEMORY] / four.beta_cma_read[TUNE_CACHE] >
                    one.beta_cma_read[TUNE_MEMORY] / one.beta_cma_read[TUNE_CACHE],
                "single-copy reads in memory over cache: higher at 4 ranks a core than at 1");
}

/* The init's figures: like with like. Measured as the quick measurement finds the built-in set's machine,
 * the set as it is in both regimes; measured at half that, half the set; a tuning file's set (no quick
 * figures) keeps the cache figure as measured and scales the memory one by it. */
static void check_scale_figures(void)
{
    tune_params_t was, tp;
    tune_params_builtin(&was, 1);
    TEST_ASSERT(was.quick.beta[TUNE_LINK_ARENA] > 0 && was.quick.cma > 0 && was.quick.gamma > 0,
                "the built-in set knows what the init measures where it was made");
    for (int half = 0; half < 2; half++) {
        double f = half ? 0.5 : 1;
        tp = was;
        tp.beta[TUNE_LINK_ARENA][TUNE_CACHE] = f * was.quick.beta[TUNE_LINK_ARENA];
        tp.beta_cma_read[TUNE_CACHE] = f * was.quick.cma_read;
        tp.beta_copy[TUNE_CACHE] = f * was.quick.copy;
        tp.gamma[TUNE_CACHE] = was.quick.gamma / f; /* a time per byte: twice as long */
        tune_scale_figures(&tp, &was);
        for (int r = 0; r < TUNE_REGIMES; r++) {
            TEST_ASSERT(fabs(tp.beta[TUNE_LINK_ARENA][r] / was.beta[TUNE_LINK_ARENA][r] - f) < 1e-9 &&
                            fabs(tp.beta_cma_read[r] / was.beta_cma_read[r] - f) < 1e-9 &&
                            fabs(tp.beta_copy[r] / was.beta_copy[r] - f) < 1e-9 &&
                            fabs(tp.gamma[r] / was.gamma[r] - 1 / f) < 1e-9,
                        "measured at %g of the init's figures there: %g of the set (regime %d)", f, f, r);
            TEST_ASSERT(tp.beta[TUNE_LINK_TCP][r] == was.beta[TUNE_LINK_TCP][r] && tp.beta_cma[r] == was.beta_cma[r],
                        "figures not measured stay the set's");
        }
        TEST_ASSERT(fabs(tp.beta_stream / was.beta_stream - f) < 1e-9, "the streamed copies go with the copies");
    }
    tune_params_t file = was;
    memset(&file.quick, 0, sizeof(file.quick));
    tp = file;
    tp.beta[TUNE_LINK_ARENA][TUNE_CACHE] = 0.5 * file.beta[TUNE_LINK_ARENA][TUNE_CACHE];
    tune_scale_figures(&tp, &file);
    TEST_ASSERT(tp.beta[TUNE_LINK_ARENA][TUNE_CACHE] == 0.5 * file.beta[TUNE_LINK_ARENA][TUNE_CACHE] &&
                    fabs(tp.beta[TUNE_LINK_ARENA][TUNE_MEMORY] / file.beta[TUNE_LINK_ARENA][TUNE_MEMORY] - 0.5) < 1e-9,
                "a file's set: the cache figure as measured, the memory one scaled by it");
    /* A tuning file's sets start from the built-in figures for what they leave out, but not from what the
     * init measures where those were made, nor from their efficiencies. */
    char path[] = "/tmp/chorus-tuning-XXXXXX";
    int fd = mkstemp(path);
    TEST_ASSERT(fd >= 0, "a temporary file");
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    fprintf(f, "chorus-tuning 1\nbeta shm cache 10GB/s\n");
    fclose(f);
    static tune_file_t tf;
    tune_params_builtin(&tf.params, 1);
    char err[256] = "";
    TEST_ASSERT(tune_file_read(path, &tf, err, sizeof(err)) == CHORUS_SUCCESS, "the file reads: %s", err);
    unlink(path);
    struct tune_quick none;
    memset(&none, 0, sizeof(none));
    TEST_ASSERT(memcmp(&tf.params.quick, &none, sizeof(none)) == 0, "a file's set has no quick figures");
    int effs = 0;
    for (int l = 0; l < TUNE_LINK_COUNT; l++)
        for (int a = 0; a < TUNE_ALGOS_MAX; a++) effs += tf.params.efficiency[l][a][TUNE_CACHE] > 0;
    TEST_ASSERT(effs == 0, "a file without efficiency lines has none (%d from the built-in set)", effs);
}

/* chorus-tune's look at the cores' handoffs: a ratio where the process may use two processors or more (no
 * more is asserted: it is a time), none where it is pinned to one, whose threads would take turns at it. */
static void check_handoff_look(void)
{
    cpu_set_t was, one;
    TEST_ASSERT(sched_getaffinity(0, sizeof(was), &was) == 0, "the affinity");
    if (CPU_COUNT(&was) >= 2) {
        double r = tune_handoff_ratio();
        TEST_ASSERT(r > 0 && isfinite(r), "two processors: a handoff of %g copies", r);
    }
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &was)) {
            CPU_SET(c, &one);
            break;
        }
    TEST_ASSERT(sched_setaffinity(0, sizeof(one), &one) == 0, "pinned to one processor");
    TEST_ASSERT(tune_handoff_ratio() == 0, "one processor: no look");
    sched_setaffinity(0, sizeof(was), &was);
}

/* chorus-tune's passes: every figure the median of its values, so that one disturbed pass is outvoted. */
static void check_params_median(void)
{
    tune_params_t runs[3], med;
    for (int i = 0; i < 3; i++) {
        tune_params_builtin(&runs[i], 1);
        tune_profile_t *pf = &runs[i].profile[TUNE_PROFILE_ARENA];
        pf->n = 2;
        pf->bytes[0] = 1 << 20;
        pf->bytes[1] = 64 << 20;
        pf->rate[0] = 10e9;
        pf->rate[1] = 5e9;
    }
    runs[1].beta[TUNE_LINK_ARENA][TUNE_CACHE] = 3.4e9; /* the disturbed pass */
    runs[2].beta[TUNE_LINK_ARENA][TUNE_CACHE] = 23.4e9;
    runs[0].beta[TUNE_LINK_ARENA][TUNE_CACHE] = 22.6e9;
    runs[0].gamma[TUNE_MEMORY] = 9e-9;
    runs[2].alpha[TUNE_LINK_SHM] = 1e-6;
    runs[1].alpha[TUNE_LINK_SHM] = 2e-6;
    runs[1].profile[TUNE_PROFILE_ARENA].rate[1] = 1e9;
    runs[2].profile[TUNE_PROFILE_ARENA].rate[1] = 2e9;
    for (int i = 0; i < 3; i++)
        for (int k = TUNE_PROFILE_CMA; k <= TUNE_PROFILE_COPY; k++) {
            tune_profile_t *pf = &runs[i].profile[k];
            pf->n = 1;
            pf->bytes[0] = 1 << 20;
            pf->rate[0] = (i == 1 ? 0.5e9 : 8e9 + i * 1e9) * k;
        }
    runs[0].cache_bytes = 8 << 20;
    runs[1].cache_bytes = 16 << 20;
    runs[2].cache_bytes = 4 << 20;
    tune_params_median(&med, runs, 3);
    TEST_ASSERT(med.beta[TUNE_LINK_ARENA][TUNE_CACHE] == 22.6e9, "arena %g", med.beta[TUNE_LINK_ARENA][TUNE_CACHE]);
    TEST_ASSERT(med.gamma[TUNE_MEMORY] == runs[1].gamma[TUNE_MEMORY], "gamma %g", med.gamma[TUNE_MEMORY]);
    TEST_ASSERT(med.alpha[TUNE_LINK_SHM] == 1e-6, "alpha %g", med.alpha[TUNE_LINK_SHM]);
    const tune_profile_t *pf = &med.profile[TUNE_PROFILE_ARENA];
    TEST_ASSERT(pf->rate[1] == 2e9 && pf->rate[0] == 10e9, "profile %g %g", pf->rate[0], pf->rate[1]);
    TEST_ASSERT(med.cache_bytes == 8 << 20, "cache %g", med.cache_bytes);
    for (int k = TUNE_PROFILE_CMA; k <= TUNE_PROFILE_COPY; k++)
        TEST_ASSERT(med.profile[k].rate[0] == 8e9 * k && med.profile[k].n == 1, "profile %d's median: %g", k,
                    med.profile[k].rate[0]);
    TEST_ASSERT(pf->n == 2 && pf->bytes[1] == 64 << 20, "the profile's sizes kept");
    TEST_ASSERT(med.beta_copy[TUNE_CACHE] == runs[0].beta_copy[TUNE_CACHE], "figures alike in every pass kept");
}

/* chorus-tune's passes and the arena's rates: derived again from the median times and figures, the model
 * prices the call that measured them at its median time. Derived pass by pass, each from its own copy
 * rate, and then the medians taken, the same three passes would price it elsewhere. */
static void check_derive_arena(void)
{
    static tune_state_t ts;
    no_efficiencies = 1; /* the terms' price of the time the figures were derived from */
    state_for(&ts, 8, 1, 2); /* 8 ranks on 2 cores: 4 a core */
    no_efficiencies = 0;
    const double call[3] = {4.8e-3, 6.3e-3, 3.9e-3}, copy[3] = {7.1e9, 13.5e9, 11.3e9}; /* s per call at a core each */
    tune_params_t runs[3], med;
    for (int i = 0; i < 3; i++) {
        runs[i] = ts.file.params;
        runs[i].beta_copy[TUNE_MEMORY] = copy[i];
        runs[i].arena_call[TUNE_MEMORY][0] = call[i];
        tune_derive_arena(&runs[i], &ts.comm, 8);
    }
    size_t n, k = 0;
    const algo_desc_t *t = algo_registry(&n);
    while (k < n && !(t[k].coll == COLL_ALLGATHER && strcmp(t[k].name, "direct") == 0)) k++;
    TEST_ASSERT(k < n, "no direct allgather");
    if (k == n) return;
    double bytes = (double)TUNE_MEMORY_BYTES, share = tune_share(&ts.comm), want = share * 4.8e-3;
    tune_params_median(&med, runs, 3);
    double medians_only = tune_predict(&med, &ts.comm, &t[k], bytes);
    tune_derive_arena(&med, &ts.comm, 8);
    double derived = tune_predict(&med, &ts.comm, &t[k], bytes);
    TEST_ASSERT(fabs(derived / want - 1) < 1e-6, "priced at %g s, the median time %g", derived, want);
    TEST_ASSERT(fabs(medians_only / want - 1) > 0.05, "the medians alone priced it at %g s (%g): the test would "
                "not tell", medians_only, want);
}

/* Efficiencies: calls that took latency + 1.5 rest where mostly in cache and latency + 0.8 rest where
 * mostly in memory fit 1.5 and 0.8 (sizes below TUNE_FIT_FROM and latency-bound ones left out); with them
 * the prediction scales the rest by the blend of the two at the call's memory share, on that link only. */
static void check_fit(void)
{
    static tune_state_t ts;
    no_efficiencies = 1; /* the figures' terms alone, before any efficiency */
    state_for(&ts, 2, 1, 2);
    no_efficiencies = 0;
    size_t n, k = 0;
    const algo_desc_t *t = algo_registry(&n);
    while (k < n && !(t[k].coll == COLL_ALLREDUCE && strcmp(t[k].name, "ring") == 0)) k++;
    TEST_ASSERT(k < n, "no ring allreduce");
    if (k == n) return;
    tune_params_t *tp = &ts.file.params;
    double sizes[9], times[9], lat, rest, f; /* 16 KiB to 1 GiB */
    int m = 0, regimes[2] = {0};
    for (double b = 16 << 10; b <= 1024.0 * (1 << 20) && m < 9; b *= 4, m++) {
        tune_predict_parts(tp, &ts.comm, &t[k], b, &lat, &rest, &f);
        sizes[m] = b;
        times[m] = b < TUNE_FIT_FROM ? 100 * (lat + rest) : lat + (f < 0.5 ? 1.5 : 0.8) * rest;
        if (b >= TUNE_FIT_FROM) regimes[f >= 0.5]++;
    }
    TEST_ASSERT(regimes[0] > 0 && regimes[1] > 0, "sizes in both regimes: %d in cache, %d in memory", regimes[0],
                regimes[1]);
    double e[TUNE_REGIMES];
    tune_fit_efficiency(tp, &ts.comm, &t[k], sizes, times, m, e);
    TEST_ASSERT(fabs(e[TUNE_CACHE] - 1.5) < 1e-9 && fabs(e[TUNE_MEMORY] - 0.8) < 1e-9, "fitted %g and %g",
                e[TUNE_CACHE], e[TUNE_MEMORY]);
    tune_fit_efficiency(tp, &ts.comm, &t[k], sizes, times, 2, e); /* 16 and 64 KiB only */
    TEST_ASSERT(e[TUNE_CACHE] == 0 && e[TUNE_MEMORY] == 0, "nothing to fit from: %g, %g", e[TUNE_CACHE],
                e[TUNE_MEMORY]);
    double b = 256.0 * (1 << 20), before = tune_predict(tp, &ts.comm, &t[k], b);
    tune_predict_parts(tp, &ts.comm, &t[k], b, &lat, &rest, &f);
    tp->efficiency[TUNE_LINK_SHM][k][TUNE_CACHE] = 1.5;
    tp->efficiency[TUNE_LINK_SHM][k][TUNE_MEMORY] = 0.8;
    double after = tune_predict(tp, &ts.comm, &t[k], b), want = lat + ((1 - f) * 1.5 + f * 0.8) * rest;
    TEST_ASSERT(fabs(before - (lat + rest)) < 1e-9 * before && fabs(after / want - 1) < 1e-9,
                "priced %g, then %g with the efficiencies (want %g)", before, after, want);
    ts.comm.net = TUNE_LINK_TCP;
    double tcp_before = tune_predict(tp, &ts.comm, &t[k], b);
    tp->efficiency[TUNE_LINK_SHM][k][TUNE_CACHE] = tp->efficiency[TUNE_LINK_SHM][k][TUNE_MEMORY] = 0;
    TEST_ASSERT(tune_predict(tp, &ts.comm, &t[k], b) == tcp_before, "the shm efficiencies moved a TCP price");
}

/* A communicator's repeated calls: tune_select_again gives what tune_select would for each call, as the
 * collective, size and layout change and repeat (a stale memo would keep an earlier call's algorithm). */
static void check_select_again(void)
{
    algo_config_t cfg;
    char err[512];
    TEST_ASSERT(parse("", &cfg, err), "%s", err);
    static tune_state_t memo, fresh;
    state_for(&memo, 4, 1, 4);
    static char in[8], out[8];
    static const struct {
        coll_kind_t coll;
        size_t count;
        int in_place;
    } calls[] = {{COLL_ALLREDUCE, 8, 0},        {COLL_ALLREDUCE, 8, 0},       {COLL_ALLREDUCE, 64 << 20, 0},
                 {COLL_ALLREDUCE, 64 << 20, 1}, {COLL_ALLREDUCE, 8, 1},       {COLL_BROADCAST, 8, 0},
                 {COLL_ALLREDUCE, 8, 0},        {COLL_ALLREDUCE, 1 << 20, 0}, {COLL_ALLREDUCE, 1 << 20, 0},
                 {COLL_BROADCAST, 64 << 20, 0}, {COLL_ALLTOALL, 1 << 20, 0},  {COLL_ALLTOALL, 1 << 20, 1}};
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        coll_args_t a = {calls[i].coll, in, calls[i].in_place ? in : out, calls[i].count, chorus_uint8, chorus_sum, 0};
        state_for(&fresh, 4, 1, 4);
        tune_among_t among_again, among_first;
        const algo_desc_t *again = tune_select_again(&memo, &a, &cfg, &among_again),
                          *first = tune_select_among(&fresh, &a, &cfg, &among_first);
        TEST_ASSERT(again == first && among_again.algos == among_first.algos &&
                        among_again.close == among_first.close,
                    "call %zu (%s of %zu bytes%s): %s again, %s selected afresh (among %llx and %llx)", i,
                    coll_name(calls[i].coll), calls[i].count, calls[i].in_place ? ", in place" : "",
                    again ? again->name : "-", first ? first->name : "-", (unsigned long long)among_again.algos,
                    (unsigned long long)among_first.algos);
    }
}

/* The watch over the model's choices (watch.c): what it watches, and its decisions as the looks come in:
 * stay while the choice runs near its price, try the cheapest alternative when it runs far above it at
 * two looks in a row (never at the first alone, however far above), hold the slow one off for two looks,
 * then expect it at its best again. */
static char watch_in[1], watch_out[1];

/* 4 ranks with direct access, the model choosing, a look every 8 calls: the watch over a 64 MiB AllReduce out
 * of place (*a), which runs the model's choice (returned) at first. */
static const algo_desc_t *watched_allreduce(tune_state_t *ts, algo_config_t *cfg, coll_args_t *a, tune_among_t *among,
                                            tune_watch_t **w)
{
    char err[512];
    TEST_ASSERT(parse("", cfg, err), "%s", err);
    state_for(ts, 4, 1, 4);
    ts->mode = TUNE_MODE_MODEL;
    ts->watch_calls = 8;
    *a = (coll_args_t){COLL_ALLREDUCE, watch_in, watch_out, 64 << 20, chorus_uint8, chorus_sum, 0};
    const algo_desc_t *first = tune_select_among(ts, a, cfg, among), *run = first;
    TEST_ASSERT(first && tune_watch_get(ts, a, *among, &run, w) == CHORUS_SUCCESS && *w && run == first,
                "a 64 MiB AllReduce the model chose %s for is watched, and runs it", first ? first->name : "none");
    return first;
}

static void check_watch(void)
{
    algo_config_t cfg;
    static tune_state_t ts;
    coll_args_t a;
    tune_among_t among;
    tune_watch_t *w;
    const algo_desc_t *first = watched_allreduce(&ts, &cfg, &a, &among, &w), *run;
    TEST_ASSERT(among.algos == cfg.allowed && !among.close, "the model's choice is among everything allowed");
    char *in = watch_in, *out = watch_out;
    double n = 64 << 20, price = tune_predict(&ts.file.params, &ts.comm, first, n);
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 1.5 * price) == first,
                "1.5 times its price at the first look: the others are expected 1.25 times theirs, %s stays",
                first->name);
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 1.2 * price) == first, "1.2 times its price: %s stays", first->name);
    /* The alternative the choice's slow looks go to: the cheapest other by the model, expected 1.25 times
     * its price (only one has run), among those that share memory as the choice does (the arena, single
     * copy) where it does. */
    const algo_desc_t *cheapest = NULL;
    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    double cheapest_price = INFINITY;
    const unsigned shared = ALGO_NEEDS_DIRECT | ALGO_NEEDS_SINGLE_COPY;
    TEST_ASSERT(first->needs & shared, "4 ranks with direct access, 64 MiB: the model's %s works in the arena",
                first->name);
    for (size_t i = 0; i < count; i++) {
        double t = tune_predict(&ts.file.params, &ts.comm, &table[i], n);
        if (table[i].coll == COLL_ALLREDUCE && &table[i] != first && algo_supported(&table[i], &ts.comm.caps) &&
            table[i].needs & shared && t < cheapest_price) {
            cheapest = &table[i];
            cheapest_price = t;
        }
    }
    TEST_ASSERT(cheapest && cheapest_price < 1.9 * price, "an alternative within 1.9 times the choice's price");
    /* Past the margin over the try's expected time (1.25 times its price): a try at the second look in a row
     * only. */
    double between = 1.1 * TUNE_WATCH_MARGIN * TUNE_WATCH_MARGIN * cheapest_price;
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, between) == first, "%.2f times its price once: %s stays",
                between / price, first->name);
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 1.2 * price) == first, "then 1.2: %s stays", first->name);
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, between) == first, "again, not twice in a row: %s stays", first->name);
    const algo_desc_t *next = tune_watch_decide(&ts, w, &a, between);
    TEST_ASSERT(next == cheapest, "%.2f times its price at two looks in a row: %s goes to %s, not %s",
                between / price, first->name, cheapest->name, next->name);
    TEST_ASSERT(tune_watch_current(&ts, &a, first) == cheapest, "what calls like it run now is what the watch says");
    run = first;
    tune_watch_t *same = w;
    TEST_ASSERT(tune_watch_get(&ts, &a, among, &run, &w) == CHORUS_SUCCESS && w == same && run == cheapest,
                "the next call runs %s", cheapest->name);
    /* The alternative runs as priced: the slow choice is held off two looks, then expected at its best
     * again, or at its price where its best was above it (1.2 here), and the alternative stays only while
     * it is within the margin of that. */
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, cheapest_price) == cheapest, "held off: first look");
    const algo_desc_t *third = tune_watch_decide(&ts, w, &a, cheapest_price);
    TEST_ASSERT(third == (cheapest_price > TUNE_WATCH_MARGIN * price ? first : cheapest),
                "after two looks %s is expected at its price (%.0f us against %.0f): %s runs", first->name,
                price * 1e6, cheapest_price * 1e6, third->name);
    if (third == cheapest)
        TEST_ASSERT(tune_watch_decide(&ts, w, &a, 3 * cheapest_price) == first,
                    "%s at 3 times its price: back to %s, expected at its best", cheapest->name, first->name);
    /* Looks far above the choice's price from the first: the cheapest other is tried, out of place only. */
    coll_args_t in_place = {COLL_ALLREDUCE, in, in, 64 << 20, chorus_uint8, chorus_sum, 0};
    run = tune_select_among(&ts, &in_place, &cfg, &among);
    TEST_ASSERT(tune_watch_get(&ts, &in_place, among, &run, &w) == CHORUS_SUCCESS && w && run == first,
                "in place: a watch of its own, from %s", first->name);
    TEST_ASSERT(tune_watch_decide(&ts, w, &in_place, 3 * price) == first &&
                    tune_watch_decide(&ts, w, &in_place, 3 * price) == first,
                "in place, 3 times its price at two looks: %s stays", first->name);
    coll_args_t half = {COLL_ALLREDUCE, in, out, 32 << 20, chorus_uint8, chorus_sum, 0};
    const algo_desc_t *half_first = run = tune_select_among(&ts, &half, &cfg, &among);
    TEST_ASSERT(tune_watch_get(&ts, &half, among, &run, &w) == CHORUS_SUCCESS && w, "32 MiB: watched");
    double half_price = tune_predict(&ts.file.params, &ts.comm, half_first, 32 << 20);
    TEST_ASSERT(tune_watch_decide(&ts, w, &half, 10 * half_price) == half_first,
                "32 MiB out of place, 10 times its price at the first look: %s stays (a size's first calls run "
                "slow)", half_first->name);
    TEST_ASSERT(tune_watch_decide(&ts, w, &half, 10 * half_price) != half_first,
                "10 times its price at the second look too: another than %s is tried", half_first->name);
    /* Not watched: a forced choice (among 0), a call priced below a look's 32 times, the watch off. */
    run = first;
    TEST_ASSERT(tune_watch_get(&ts, &a, (tune_among_t){0, 0}, &run, &w) == CHORUS_SUCCESS && !w && run == first,
                "a forced choice");
    coll_args_t small = {COLL_ALLREDUCE, in, out, 8, chorus_uint8, chorus_sum, 0};
    run = tune_select_among(&ts, &small, &cfg, &among);
    TEST_ASSERT(tune_watch_get(&ts, &small, among, &run, &w) == CHORUS_SUCCESS && !w, "an 8-byte AllReduce");
    ts.watch_calls = 0;
    coll_args_t other = {COLL_ALLREDUCE, in, out, 16 << 20, chorus_uint8, chorus_sum, 0};
    run = tune_select_among(&ts, &other, &cfg, &among);
    TEST_ASSERT(tune_watch_get(&ts, &other, among, &run, &w) == CHORUS_SUCCESS && !w, "CHORUS_TUNE_WATCH=0");
    tune_state_free(&ts);
}

/* A first choice left in a slow stretch: its best there, far above its price, does not keep it left once
 * the stretch has passed. After its hold it is expected at its price, runs again where the alternative
 * takes more than the margin over that; where it runs slow again it is held off twice as long, and it
 * stays once it runs as priced. */
static void check_watch_stale(void)
{
    algo_config_t cfg;
    static tune_state_t ts;
    coll_args_t a;
    tune_among_t among;
    tune_watch_t *w;
    const algo_desc_t *first = watched_allreduce(&ts, &cfg, &a, &among, &w);
    double price = tune_predict(&ts.file.params, &ts.comm, first, 64 << 20);
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 10 * price) == first, "10 times its price at the first look: %s "
                "stays", first->name);
    const algo_desc_t *other = tune_watch_decide(&ts, w, &a, 10 * price);
    TEST_ASSERT(other != first, "10 times its price at the second look: %s is left", first->name);
    /* The alternative at twice the first choice's price: under its 10, over the margin over its price. */
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 2 * price) == other, "%s held off: first look", first->name);
    const algo_desc_t *back = tune_watch_decide(&ts, w, &a, 2 * price);
    TEST_ASSERT(back == first, "after two looks %s is expected at its price, not at its 10: it runs again, not %s",
                first->name, back->name);
    /* Slow again: back at once to the alternative, which took less when it last ran, for 4 looks this time. */
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 3 * price) == other, "%s at 3 times its price, the alternative took "
                "twice: back to %s", first->name, other->name);
    for (int look = 1; look < 4; look++)
        TEST_ASSERT(tune_watch_decide(&ts, w, &a, 2 * price) == other, "%s held off: look %d of 4", first->name, look);
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 2 * price) == first, "after 4 looks %s runs again", first->name);
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 0.9 * price) == first, "%s as priced: it stays", first->name);
    tune_state_free(&ts);
}

/* The watch over a built-in rule's several (the 8-rank AllToAll out of place from 256 KiB: direct and single
 * copy, measured to run close here): an untried one is expected at the margin over the choice's price, not
 * its own, so that where the model prices single copy at twice its time it is still tried once direct
 * runs past 1.25 squared times its price at two looks in a row. */
static void check_watch_close(void)
{
    algo_config_t cfg;
    char err[512];
    TEST_ASSERT(parse("", &cfg, err), "%s", err);
    static tune_state_t ts;
    cma_scale = 0.5;
    state_for(&ts, 8, 1, 2);
    cma_scale = 1;
    ts.watch_calls = 8;
    static char in[1], out[1];
    coll_args_t a = {COLL_ALLTOALL, in, out, (16 << 20) / 8, chorus_uint8, chorus_sum, 0}; /* 16 MiB in all */
    tune_among_t among;
    const algo_desc_t *first = tune_select_among(&ts, &a, &cfg, &among), *run = first;
    TEST_ASSERT(first && strcmp(first->name, "direct") == 0 && among.close,
                "8 ranks, 16 MiB: the rule's direct, among its several (%s)", first ? first->name : "-");
    tune_watch_t *w;
    TEST_ASSERT(tune_watch_get(&ts, &a, among, &run, &w) == CHORUS_SUCCESS && w, "watched");
    double n = 16 << 20, price = tune_predict(&ts.file.params, &ts.comm, first, n);
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 1.5 * price) == first, "1.5 times its price: direct stays");
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 1.7 * price) == first, "1.7 times its price once: direct stays");
    const algo_desc_t *next = tune_watch_decide(&ts, w, &a, 1.7 * price);
    TEST_ASSERT(strcmp(next->name, "cma") == 0, "1.7 times its price twice in a row: cma is tried, not %s",
                next->name);
    TEST_ASSERT(tune_watch_decide(&ts, w, &a, 2 * price) == first, "cma at twice direct's price: back to direct");
    coll_args_t twice = {COLL_ALLTOALL, in, out, (32 << 20) / 8, chorus_uint8, chorus_sum, 0};
    run = tune_select_among(&ts, &twice, &cfg, &among);
    TEST_ASSERT(tune_watch_get(&ts, &twice, among, &run, &w) == CHORUS_SUCCESS && w, "32 MiB: watched");
    double twice_price = tune_predict(&ts.file.params, &ts.comm, run, 32 << 20);
    TEST_ASSERT(tune_watch_decide(&ts, w, &twice, 2 * twice_price) == run, "32 MiB, twice its price at the "
                "first look: direct stays");
    next = tune_watch_decide(&ts, w, &twice, 2 * twice_price);
    TEST_ASSERT(strcmp(next->name, "cma") == 0, "32 MiB, twice its price at the second look: cma, not %s",
                next->name);
    tune_state_free(&ts);
}

/* Ranks on several hosts, some sharing one: the hierarchical AllReduce, at every size; with one rank per
 * host, or one host, it is not supported and the flat rules apply. */
/* Ranks on several hosts take the hierarchical algorithms where the rules say (registry.c), and only
 * there: one host, or one rank per host, keeps the flat ones. */
static void check_hosts(void)
{
    algo_config_t cfg;
    char err[512];
    TEST_ASSERT(parse(NULL, &cfg, err), "empty settings: %s", err);
    static const struct {
        coll_kind_t coll;
        int nranks, hosts, per_host;
        const char *small, *large; /* at 16 bytes and 4 MiB */
    } cases[] = {
        {COLL_ALLREDUCE, 4, 2, 2, "hier", "hier2d"},        {COLL_ALLREDUCE, 6, 3, 2, "hier", "hier2d"},
        {COLL_ALLREDUCE, 7, 3, 3, "hier", "hier"},          {COLL_ALLREDUCE, 4, 3, 3, "hier", "hier"},
        {COLL_ALLREDUCE, 4, 4, 1, "rhd", "ring"},           {COLL_ALLREDUCE, 4, 1, 4, "rhd", "ring"},
        {COLL_ALLGATHER, 4, 2, 2, "bruck", "hier"},         {COLL_ALLGATHER, 4, 4, 1, "bruck", "ring"},
        {COLL_REDUCE_SCATTER, 4, 2, 2, "rhd", "hier"},      {COLL_REDUCE_SCATTER, 4, 4, 1, "rhd", "ring"},
        {COLL_BROADCAST, 4, 2, 2, "hier", "hier"},          {COLL_BROADCAST, 4, 4, 1, "binomial", "chain"},
        {COLL_BROADCAST, 16, 2, 8, "binomial", "hier"},     {COLL_REDUCE, 4, 2, 2, "hier", "hier"},
        {COLL_REDUCE, 4, 1, 4, "binomial", "chain"},        {COLL_REDUCE, 16, 4, 4, "binomial", "hier"},
        {COLL_ALLTOALL, 4, 2, 2, "hier", "pairwise"},      {COLL_ALLTOALL, 4, 4, 1, "bruck", "pairwise"},
        {COLL_ALLTOALL, 6, 3, 2, "bruck", "pairwise"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        tune_state_t ts;
        state_for(&ts, cases[k].nranks, 0, 64);
        ts.comm.caps.hosts = cases[k].hosts;
        ts.comm.caps.per_host = cases[k].per_host;
        for (int big = 0; big < 2; big++) {
            coll_args_t a = {cases[k].coll, NULL, NULL, big ? (size_t)1 << 22 : 16, chorus_uint8, chorus_sum, 0};
            const algo_desc_t *d = tune_select(&ts, &a, &cfg);
            const char *want = big ? cases[k].large : cases[k].small;
            TEST_ASSERT(d && strcmp(d->name, want) == 0, "%s, %d ranks, %d hosts, %d on the busiest, %s: %s, not %s",
                        coll_name(cases[k].coll), cases[k].nranks, cases[k].hosts, cases[k].per_host,
                        big ? "4 MiB" : "16 B", d ? d->name : "none", want);
        }
    }
    /* Where each host's ranks are consecutive, AllGather and ReduceScatter take hier from 4 KiB (the whole
     * buffer); where they are dealt in turn, from 256 KiB. */
    static const struct {
        coll_kind_t coll;
        int consecutive;
        size_t count; /* per rank, bytes: 4 ranks make the whole buffer */
        const char *want;
    } placed[] = {
        {COLL_ALLGATHER, 1, 256, "bruck"},     {COLL_ALLGATHER, 1, 1024, "hier"},
        {COLL_ALLGATHER, 0, 1024, "bruck"},    {COLL_ALLGATHER, 0, 64 << 10, "hier"},
        {COLL_REDUCE_SCATTER, 1, 256, "rhd"},  {COLL_REDUCE_SCATTER, 1, 1024, "hier"},
        {COLL_REDUCE_SCATTER, 0, 1024, "rhd"}, {COLL_REDUCE_SCATTER, 0, 64 << 10, "hier"},
    };
    for (size_t k = 0; k < sizeof(placed) / sizeof(placed[0]); k++) {
        tune_state_t ts;
        state_for(&ts, 4, 0, 64);
        ts.comm.caps.hosts = 2;
        ts.comm.caps.per_host = 2;
        ts.comm.caps.hosts_consecutive = placed[k].consecutive;
        coll_args_t a = {placed[k].coll, NULL, NULL, placed[k].count, chorus_uint8, chorus_sum, 0};
        const algo_desc_t *d = tune_select(&ts, &a, &cfg);
        TEST_ASSERT(d && strcmp(d->name, placed[k].want) == 0, "%s of %zu bytes a rank, 2 hosts of 2, %s: %s, not %s",
                    coll_name(placed[k].coll), placed[k].count, placed[k].consecutive ? "host by host" : "in turn",
                    d ? d->name : "none", placed[k].want);
    }
}

/* The hierarchical algorithms' level inside each host is priced at the link that connects a host's ranks
 * (tune_comm_t.inside, measured at init with a rank of rank 0's host): its figures move their estimates,
 * and where that link is TCP the shared-memory figures no longer do. */
static void check_levels(void)
{
    static const char *const forced[] = {"allreduce:hier",    "allgather:hier",   "reduce_scatter:hier",
                                         "alltoall:hier",     "allreduce:hier2d", "alltoall:hier2d"};
    static const coll_kind_t colls[] = {COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCE_SCATTER,
                                        COLL_ALLTOALL,  COLL_ALLREDUCE, COLL_ALLTOALL};
    for (size_t k = 0; k < sizeof(forced) / sizeof(forced[0]); k++) {
        algo_config_t cfg;
        char err[512];
        TEST_ASSERT(parse(forced[k], &cfg, err), "%s: %s", forced[k], err);
        double t[2][2]; /* [inside is TCP][shared memory 4x slower] */
        for (int tcp = 0; tcp < 2; tcp++)
            for (int slow = 0; slow < 2; slow++) {
                tune_state_t ts;
                state_for(&ts, 4, 0, 64);
                ts.comm.caps.hosts = 2;
                ts.comm.caps.per_host = 2;
                ts.comm.ranks_per_host = 2;
                ts.comm.inside = tcp ? TUNE_LINK_TCP : TUNE_LINK_SHM;
                tune_params_t *tp = &ts.file.params;
                for (int r = 0; r < TUNE_REGIMES && slow; r++) {
                    tp->beta[TUNE_LINK_SHM][r] /= 4;
                    tp->beta_oneway[TUNE_LINK_SHM][r] /= 4;
                }
                if (slow) tp->alpha[TUNE_LINK_SHM] *= 4;
                coll_args_t a = {colls[k], NULL, NULL, 1 << 18, chorus_uint8, chorus_sum, 0};
                const algo_desc_t *d = tune_select(&ts, &a, &cfg);
                TEST_ASSERT(d && strcmp(d->name, strchr(forced[k], ':') + 1) == 0, "%s: selected %s", forced[k],
                            d ? d->name : "none");
                t[tcp][slow] = d ? tune_predict(tp, &ts.comm, d, (double)algo_call_bytes(&a, 4)) : 0;
            }
        TEST_ASSERT(t[0][1] > 1.2 * t[0][0], "%s: slower shared memory inside the hosts (%.1f us against %.1f)",
                    forced[k], t[0][1] * 1e6, t[0][0] * 1e6);
        TEST_ASSERT(t[1][1] == t[1][0] && t[1][0] != t[0][0], "%s: TCP inside the hosts: %.1f and %.1f us, shm %.1f",
                    forced[k], t[1][0] * 1e6, t[1][1] * 1e6, t[0][0] * 1e6);
    }
}

/* Before the ranks ever all had chorus_mem_alloc buffers, they ask at calls 0, 1, 2, 4, ..., then every
 * ALGO_SHARED_ASK_EVERY-th, and at no other. */
static void check_shared_ask(void)
{
    int asked = 0;
    for (uint64_t c = 0; c < 10 * ALGO_SHARED_ASK_EVERY; c++) {
        int want = c < ALGO_SHARED_ASK_EVERY ? (c == 0 || (c & (c - 1)) == 0) : c % ALGO_SHARED_ASK_EVERY == 0;
        TEST_ASSERT(algo_shared_ask(c) == want, "call %llu: asks %d", (unsigned long long)c, algo_shared_ask(c));
        asked += algo_shared_ask(c);
    }
    TEST_ASSERT(asked == 7 + 9, "asked at %d of the first %d calls", asked, 10 * ALGO_SHARED_ASK_EVERY);
}

int main(void)
{
    test_set_timeout(30);
    check_shared_ask();
    char err[512] = "";
    TEST_ASSERT(algo_rules_valid(err, sizeof(err)), "%s", err);
    check_defaults();
    check_forcing();
    check_restrictions();
    check_single_copy_fast();
    check_tuning_precedence();
    check_rule_model();
    check_errors();
    check_params_median();
    check_builtin_shares();
    check_scale_figures();
    check_handoff_look();
    check_derive_arena();
    check_fit();
    check_select_again();
    check_watch();
    check_watch_stale();
    check_watch_close();
    check_hosts();
    check_levels();
    return test_report();
}
