/* The algorithm registry: CHORUS_ALGO's syntax (forcing, lists, exclusion, per collective, errors that
 * name the valid choices) and the default rule (small calls take the log p algorithms, large ones the
 * ring or chain; forcing and exclusion override it). */
#include <string.h>

#include "algo/algo.h"
#include "test.h"

static const char *pick_caps(const algo_config_t *cfg, coll_kind_t coll, size_t count, int nranks, int direct)
{
    coll_args_t a = {coll, NULL, NULL, count, chorus_uint8, chorus_sum, 0};
    algo_caps_t caps = {.nranks = nranks, .direct = direct};
    const algo_desc_t *d = algo_select(&a, &caps, cfg);
    return d ? d->name : "(none)";
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
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLGATHER, 1 << 24, 4), "bruck") == 0, "a list keeps the listed ones");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_REDUCE_SCATTER, 10, 4), "rhd") == 0, "others keep the default");

    TEST_ASSERT(parse("^rhd,bruck", &cfg, err), "exclusion: %s", err);
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLREDUCE, 10, 4), "ring") == 0, "excluded rhd falls to the next rule");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLTOALL, 10, 4), "pairwise") == 0, "excluded bruck");

    TEST_ASSERT(parse("ring;allreduce:tree,mesh", &cfg, err), "segments in order: %s", err);
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLREDUCE, 1 << 24, 4), "tree") == 0, "the later segment wins");
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLGATHER, 10, 4), "ring") == 0, "the earlier one still holds elsewhere");
    TEST_ASSERT(parse("^ring;allreduce:^rhd", &cfg, err), "exclusions add up: %s", err);
    TEST_ASSERT(strcmp(pick(&cfg, COLL_ALLREDUCE, 1 << 24, 4), "dbt") == 0, "neither ring nor rhd");
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
                    all = {.nranks = 4, .direct = 1, .single_copy = 1};
        TEST_ASSERT(algo_supported(&t[i], &all), "%s %s unsupported with every capability", coll_name(t[i].coll),
                    t[i].name);
        TEST_ASSERT(algo_supported(&t[i], &none) == !t[i].needs, "%s %s restrictions", coll_name(t[i].coll),
                    t[i].name);
        TEST_ASSERT(algo_supported(&t[i], &direct) == !(t[i].needs & ALGO_NEEDS_SINGLE_COPY),
                    "%s %s needs single copy", coll_name(t[i].coll), t[i].name);
    }
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

int main(void)
{
    test_set_timeout(30);
    check_defaults();
    check_forcing();
    check_restrictions();
    check_errors();
    return test_report();
}
