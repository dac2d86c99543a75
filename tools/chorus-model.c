/*
 * chorus-model: what the cost model (src/tune/) predicts for every algorithm of a collective, over a
 * size sweep, and the sizes where one algorithm overtakes another. docs/tuning.md.
 *
 *   chorus-model allreduce -p 8 --alpha 5us --beta 450GB/s       the seed's Hockney model (alpha, beta only)
 *   chorus-model allgather -p 4 --tuning-file tuned.txt --arena  a tuning file's parameters, one host
 *   chorus-model allreduce -p 8 --hosts 2                       across two hosts of 4 ranks, per level
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "platform/host.h"
#include "transport/shm/arena.h"
#include "tune/tune.h"
#include "util/copy.h"
#include "util/params.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: chorus-model COLLECTIVE -p P [options]\n"
            "  COLLECTIVE        allreduce, allgather, reduce_scatter, broadcast, reduce, alltoall, barrier\n"
            "  -p P              number of ranks\n"
            "  -b MIN, -e MAX    size sweep in bytes of the whole buffer (default 1K .. 256M)\n"
            "  -f FACTOR         sweep step factor (default 2)\n"
            "  --alpha T         latency per step of the link (e.g. 5us)\n"
            "  --beta RATE       bandwidth of the link (e.g. 450GB/s)\n"
            "  --gamma T         reduction time per byte (e.g. 0.2ns)\n"
            "  --copy RATE       local copy bandwidth\n"
            "  --link shm|tcp    which link --alpha/--beta describe and the algorithms use (default shm)\n"
            "  --tuning-file F   parameters from a tuning file (chorus-tune)\n"
            "  --arena           one host with the host arena: include the direct algorithms\n"
            "  --ranks-per-host R, --cores C   ranks sharing a host's C cores (default: no sharing)\n"
            "  --hosts H         the ranks on H hosts, host by host (R each, default P / H rounded up): TCP\n"
            "                    between hosts, shared memory inside each; with the hierarchical algorithms\n"
            "  --chunk S, --slot S             CHORUS_CHUNK_SIZE and CHORUS_SHM_SLOT_SIZE (default 256K and auto:\n"
            "                    the library's choice on this machine for the ranks of the host)\n"
            "With --alpha or --beta and no tuning file, the model is the seed's: the reduction and local copies\n"
            "cost nothing unless --gamma and --copy say otherwise. Without either, the built-in parameters.\n");
}

static double parse_value_or_die(const char *flag, const char *text)
{
    double v;
    if (tune_parse_value(text, &v) != 0) {
        fprintf(stderr, "chorus-model: %s %s: expected a number with a unit (5us, 450GB/s)\n", flag, text);
        exit(2);
    }
    return v;
}

static double parse_size_or_die(const char *flag, const char *text)
{
    int64_t v;
    if (params_parse_size(text, &v) != 0 || v < 0) {
        fprintf(stderr, "chorus-model: %s %s: expected a size (64K, 1M)\n", flag, text);
        exit(2);
    }
    return (double)v;
}

static void fmt_time(double s, char *buf, size_t len)
{
    if (s < 1e-3)
        snprintf(buf, len, "%.2fus", s * 1e6);
    else if (s < 1)
        snprintf(buf, len, "%.3fms", s * 1e3);
    else
        snprintf(buf, len, "%.3fs", s);
}

static void fmt_bytes(double n, char *buf, size_t len)
{
    if (n >= 1e6)
        snprintf(buf, len, "%.1f MB (%.2f MiB)", n / 1e6, n / 1048576);
    else if (n >= 1e3)
        snprintf(buf, len, "%.1f KB (%.2f KiB)", n / 1e3, n / 1024);
    else
        snprintf(buf, len, "%.0f B", n);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int coll = 0;
    while (coll < COLL_COUNT && strcasecmp(coll_name((coll_kind_t)coll), argv[1]) != 0) coll++;
    if (coll == COLL_COUNT) {
        fprintf(stderr, "chorus-model: unknown collective \"%s\"\n", argv[1]);
        usage(stderr);
        return 2;
    }
    tune_comm_t tc = {.nranks = 0, .net = TUNE_LINK_SHM, .chunk = 256 << 10, .slot = -1};
    double lo = 1024, hi = 256.0 * 1048576, factor = 2;
    const char *alpha = NULL, *beta = NULL, *gamma = NULL, *copy = NULL, *file = NULL;
    int arena = 0, hosts = 1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--arena") == 0) {
            arena = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "chorus-model: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "-p") == 0)
            tc.nranks = atoi(v);
        else if (strcmp(a, "-b") == 0)
            lo = parse_size_or_die(a, v);
        else if (strcmp(a, "-e") == 0)
            hi = parse_size_or_die(a, v);
        else if (strcmp(a, "-f") == 0)
            factor = atof(v);
        else if (strcmp(a, "--alpha") == 0)
            alpha = v;
        else if (strcmp(a, "--beta") == 0)
            beta = v;
        else if (strcmp(a, "--gamma") == 0)
            gamma = v;
        else if (strcmp(a, "--copy") == 0)
            copy = v;
        else if (strcmp(a, "--tuning-file") == 0)
            file = v;
        else if (strcmp(a, "--ranks-per-host") == 0)
            tc.ranks_per_host = atoi(v);
        else if (strcmp(a, "--cores") == 0)
            tc.cores = atoi(v);
        else if (strcmp(a, "--hosts") == 0)
            hosts = atoi(v);
        else if (strcmp(a, "--chunk") == 0)
            tc.chunk = parse_size_or_die(a, v);
        else if (strcmp(a, "--slot") == 0)
            tc.slot = strcmp(v, "auto") == 0 ? -1 : parse_size_or_die(a, v);
        else if (strcmp(a, "--link") == 0 && (strcmp(v, "shm") == 0 || strcmp(v, "tcp") == 0))
            tc.net = strcmp(v, "shm") == 0 ? TUNE_LINK_SHM : TUNE_LINK_TCP;
        else {
            fprintf(stderr, "chorus-model: unknown option %s %s\n", a, v);
            usage(stderr);
            return 2;
        }
    }
    if (tc.nranks < 2 || lo <= 0 || hi < lo || factor <= 1) {
        fprintf(stderr, "chorus-model: need -p of at least 2, 0 < -b <= -e and -f above 1\n");
        return 2;
    }
    if (hosts < 1 || hosts > tc.nranks || (hosts > 1 && arena)) {
        fprintf(stderr, "chorus-model: --hosts needs 1 to P hosts, and the host arena (--arena) is for one host\n");
        return 2;
    }
    if (hosts > 1) { /* between hosts TCP, inside each shared memory */
        tc.net = TUNE_LINK_TCP;
        tc.inside = TUNE_LINK_SHM;
        if (tc.ranks_per_host <= 0) tc.ranks_per_host = (tc.nranks + hosts - 1) / hosts;
    }
    /* The sets measured at the share nearest these ranks' (tune_file_use_share): on one host all of them. */
    tune_comm_t probe = tc;
    if (probe.ranks_per_host <= 0) probe.ranks_per_host = tc.nranks;
    tune_comm_set_cores(&probe, tc.cores);
    tune_params_t tp;
    tune_params_builtin(&tp, tune_share(&probe));
    if (file) {
        tune_file_t tf = {.params = tp};
        char err[512];
        if (tune_file_read(file, &tf, err, sizeof(err)) != CHORUS_SUCCESS) {
            fprintf(stderr, "chorus-model: %s\n", err);
            return 2;
        }
        tune_file_use_share(&tf, tune_share(&probe));
        tp = tf.params;
    } else if (alpha || beta) {
        /* The seed's model: links only, the formulas as they stand (no efficiency of the built-in set's). */
        memset(tp.efficiency, 0, sizeof(tp.efficiency));
        tp.gamma[TUNE_CACHE] = tp.gamma[TUNE_MEMORY] = 0;
        tp.beta_copy[TUNE_CACHE] = tp.beta_copy[TUNE_MEMORY] = INFINITY;
        snprintf(tp.source, sizeof(tp.source), "given (the seed's alpha-beta model)");
    }
    /* A value given on the command line holds in both regimes. */
    for (int r = 0; r < TUNE_REGIMES; r++) {
        if (alpha) tp.alpha[tc.net] = parse_value_or_die("--alpha", alpha);
        if (beta) tp.beta[tc.net][r] = tp.beta_oneway[tc.net][r] = parse_value_or_die("--beta", beta);
        if (gamma) tp.gamma[r] = parse_value_or_die("--gamma", gamma);
        if (copy) tp.beta_copy[r] = parse_value_or_die("--copy", copy);
    }
    if (copy) tp.beta_stream = 0; /* streamed copies too */
    if (tc.slot < 0) /* CHORUS_SHM_SLOT_SIZE=auto, as rank 0 of a communicator of these ranks would take it */
        tc.slot = (double)shm_arena_auto_slot_bytes(
            host_l2_bytes(), tc.ranks_per_host > 0 ? tc.ranks_per_host : tc.nranks, tc.cores);
    /* Where outputs stream, as on a host of these ranks here (copy_streams). */
    tc.cache_share = copy_cache_share(host_l3_bytes(), tc.ranks_per_host > 0 ? tc.ranks_per_host : tc.nranks);
    tc.caps = (algo_caps_t){.nranks = tc.nranks, .direct = arena, .single_copy = arena, .hosts = hosts,
                            .per_host = hosts > 1 ? tc.ranks_per_host : 0, .hosts_consecutive = 1};
    tune_comm_set_cores(&tc, tc.cores);

    size_t count;
    const algo_desc_t *table = algo_registry(&count);
    const algo_desc_t *algos[64];
    int nalgos = 0;
    for (size_t i = 0; i < count; i++)
        if (table[i].coll == (coll_kind_t)coll && algo_supported(&table[i], &tc.caps)) algos[nalgos++] = &table[i];

    char t1[32], t2[32], b1[64];
    printf("# chorus-model %s, p %d, link %s: alpha %s", coll_name((coll_kind_t)coll), tc.nranks, tune_link_name(tc.net),
           (fmt_time(tp.alpha[tc.net], t1, sizeof(t1)), t1));
    printf(", beta %.4g GB/s", tp.beta[tc.net][TUNE_CACHE] / 1e9);
    if (tp.beta[tc.net][TUNE_MEMORY] != tp.beta[tc.net][TUNE_CACHE])
        printf(" (memory %.4g GB/s)", tp.beta[tc.net][TUNE_MEMORY] / 1e9);
    if (tp.beta_oneway[tc.net][TUNE_CACHE] != tp.beta[tc.net][TUNE_CACHE])
        printf(", one way %.4g GB/s (memory %.4g)", tp.beta_oneway[tc.net][TUNE_CACHE] / 1e9,
               tp.beta_oneway[tc.net][TUNE_MEMORY] / 1e9);
    if (arena) printf(", arena alpha %s", (fmt_time(tp.alpha[TUNE_LINK_ARENA], t2, sizeof(t2)), t2));
    if (hosts > 1)
        printf(", %d hosts of %d ranks, inside them shm alpha %s, beta %.4g GB/s, one way %.4g GB/s", hosts,
               tc.ranks_per_host, (fmt_time(tp.alpha[TUNE_LINK_SHM], t2, sizeof(t2)), t2),
               tp.beta[TUNE_LINK_SHM][TUNE_CACHE] / 1e9, tp.beta_oneway[TUNE_LINK_SHM][TUNE_CACHE] / 1e9);
    printf(", gamma %.3g ns/B", tp.gamma[TUNE_CACHE] * 1e9);
    if (tp.gamma[TUNE_MEMORY] != tp.gamma[TUNE_CACHE]) printf(" (memory %.3g)", tp.gamma[TUNE_MEMORY] * 1e9);
    if (isinf(tp.beta_copy[TUNE_CACHE]))
        printf(", copies free");
    else
        printf(", copy %.4g GB/s (memory %.4g), cache %.0f MiB", tp.beta_copy[TUNE_CACHE] / 1e9,
               tp.beta_copy[TUNE_MEMORY] / 1e9, tp.cache_bytes / 1048576);
    static const char *const profile_names[TUNE_PROFILES] = {"the arena's", "single-copy reads'", "local copies'"};
    for (int k = 0, shown = 0; k < TUNE_PROFILES; k++)
        if (tp.profile[k].n >= 2)
            printf("%s %s (%d points)", shown++ ? "," : "; memory shares by profiles:", profile_names[k],
                   tp.profile[k].n);
    for (int a = 0, shown = 0; a < nalgos; a++) {
        const double *e = tp.efficiency[tc.net][algos[a] - table];
        if (e[TUNE_CACHE] > 0)
            printf("%s %s %.2f/%.2f", shown++ ? "," : "; efficiencies in cache/memory (docs/tuning.md):",
                   algos[a]->name, e[TUNE_CACHE], e[TUNE_MEMORY]);
    }
    printf("; parameters %s\n", tp.source);
    printf("# %12s", "bytes");
    for (int a = 0; a < nalgos; a++) printf(" %12s", algos[a]->name);
    printf("  best\n");
    for (double n = lo; n <= hi * 1.0000001; n *= factor) {
        double nb = floor(n);
        printf("  %12.0f", nb);
        int best = 0;
        double best_t = INFINITY;
        for (int a = 0; a < nalgos; a++) {
            double t = tune_predict(&tp, &tc, algos[a], nb);
            if (t < best_t) {
                best_t = t;
                best = a;
            }
            fmt_time(t, t1, sizeof(t1));
            printf(" %12s", t1);
        }
        printf("  %s\n", algos[best]->name);
    }
    /* Crossovers: every sign change of T_a - T_b on a fine grid, refined by bisection. */
    printf("# crossovers between %s and %s:\n", (fmt_bytes(lo, b1, sizeof(b1)), b1), (fmt_bytes(hi, t2, sizeof(t2)), t2));
    int any = 0;
    for (int a = 0; a < nalgos; a++)
        for (int b = a + 1; b < nalgos; b++) {
            double prev_n = lo, prev_d = tune_predict(&tp, &tc, algos[a], lo) - tune_predict(&tp, &tc, algos[b], lo);
            for (double n = lo * 1.01; n <= hi * 1.0000001; n *= 1.01) {
                double d = tune_predict(&tp, &tc, algos[a], n) - tune_predict(&tp, &tc, algos[b], n);
                if ((prev_d < 0) != (d < 0) && prev_d != 0) {
                    double l = prev_n, h = n;
                    for (int it = 0; it < 60; it++) {
                        double m = (l + h) / 2;
                        double dm = tune_predict(&tp, &tc, algos[a], m) - tune_predict(&tp, &tc, algos[b], m);
                        if ((dm < 0) == (prev_d < 0)) l = m; else h = m;
                    }
                    const algo_desc_t *below = prev_d < 0 ? algos[a] : algos[b], *above = prev_d < 0 ? algos[b] : algos[a];
                    fmt_bytes((l + h) / 2, b1, sizeof(b1));
                    printf("#   %s / %s at %s: %s faster below, %s above\n", algos[a]->name, algos[b]->name, b1,
                           below->name, above->name);
                    any = 1;
                }
                prev_n = n;
                prev_d = d;
            }
        }
    if (!any) printf("#   none\n");
    return 0;
}
