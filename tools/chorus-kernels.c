/* chorus-kernels: how close the reduction kernels come to the memory bandwidth this machine sustains.
 *     chorus-kernels -s 64M -d float32 -o sum
 * For each dtype x op it times reduce_apply3(dst, a, b) and, interleaved with it on the same buffers,
 * memcpy(dst, a). Each is reported as the rate of the traffic it implies (reduce: 2 reads + 1 write; memcpy:
 * 1 read + 1 write), and the kernel's rate as a share of memcpy's: a streaming kernel cannot beat the
 * streaming copy by much, so 100% means it runs at memory speed. Interleaving puts both under the same noise
 * on a shared machine; medians discard the outliers. The half-precision staging conversions
 * (half_to_float_array, float_to_half_array) get rows "widen" and "narrow". --isa all runs the rows once per
 * instruction set the CPU offers (portable, AVX2, AVX-512 and its extensions), to compare them side by side. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "algo/reduce.h"
#include "util/params.h"
#include "util/util.h"

/* A row is a combining op (chorus_redop_t) or one of the two conversions, numbered after the ops. */
enum { ROW_WIDEN = chorus_num_ops, ROW_NARROW, ROW_NUM_KINDS };

typedef struct opts {
    size_t size;
    int iters;
    int nisas;
    const char *isas[REDUCE_MAX_ISAS];
    int ndtypes;
    chorus_datatype_t dtypes[chorus_num_datatypes];
    int nkinds;
    int kinds[ROW_NUM_KINDS];
} opts_t;

typedef struct buffers {
    void *dst, *a, *b;
    size_t size;
} buffers_t;

typedef struct isa_text {
    char text[128];
} isa_text_t;

/* "portable, avx2, ...": the instruction sets this CPU runs. */
static isa_text_t isa_names(void)
{
    const char *names[REDUCE_MAX_ISAS];
    int n = reduce_isa_list(names, REDUCE_MAX_ISAS);
    isa_text_t t = {""};
    size_t used = 0;
    for (int i = 0; i < n && used < sizeof(t.text); i++)
        used += (size_t)snprintf(t.text + used, sizeof(t.text) - used, "%s%s", i ? ", " : "", names[i]);
    return t;
}

static int parse_isas(const char *text, opts_t *o)
{
    const char *names[REDUCE_MAX_ISAS];
    int n = reduce_isa_list(names, REDUCE_MAX_ISAS);
    o->nisas = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(text, "all") == 0 || strcmp(text, names[i]) == 0) o->isas[o->nisas++] = names[i];
    if (o->nisas > 0) return 0;
    fprintf(stderr, "--isa %s: this CPU runs %s (or all of them: --isa all)\n", text, isa_names().text);
    return 1;
}

static void usage(void)
{
    printf("usage: %s [-s SIZE] [-n ITERS] [-d TYPE|all] [-o OP|all] [--isa NAME|all] [--portable]\n"
           "  -s SIZE     bytes per operand (default 64M; K, M and G suffixes)\n"
           "  -n ITERS    timed iterations per row; times are medians (default 10)\n"
           "  -d TYPE     int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64\n"
           "              or all (default all)\n"
           "  -o OP       sum, prod, max, min, avg, widen, narrow or all (default all: every op but avg, which\n"
           "              runs the sum loop); widen and narrow apply to float16 and bfloat16 only\n"
           "  --isa NAME  the kernels of one instruction set this CPU runs, or all of them in turn (default:\n"
           "              the best; this CPU runs %s)\n"
           "  --portable  the portable loops: --isa portable\n"
           "Traffic per row: reduce 3 x size, memcpy 2 x size, widen and narrow 1.5 x size (size is the\n"
           "float32 side, the half side is size / 2).\n",
           program_invocation_short_name, isa_names().text);
}

static const char *kind_name(int kind)
{
    return kind == ROW_WIDEN ? "widen" : kind == ROW_NARROW ? "narrow" : redop_name((chorus_redop_t)kind);
}

static int parse_kinds(const char *text, opts_t *o)
{
    if (strcmp(text, "all") == 0) {
        static const int all[] = {chorus_sum, chorus_prod, chorus_max, chorus_min, ROW_WIDEN, ROW_NARROW};
        o->nkinds = (int)CHORUS_ARRAY_SIZE(all);
        memcpy(o->kinds, all, sizeof(all));
        return 0;
    }
    o->nkinds = 1;
    for (int k = 0; k < ROW_NUM_KINDS; k++)
        if (strcasecmp(text, kind_name(k)) == 0) {
            o->kinds[0] = k;
            return 0;
        }
    fprintf(stderr, "-o %s: unknown op\n", text);
    return -1;
}

static int parse_dtypes(const char *text, opts_t *o)
{
    if (dtype_parse_choice(text, o->dtypes, &o->ndtypes) == 0) return 0;
    fprintf(stderr, "-d %s: unknown datatype\n", text);
    return -1;
}

static int is_half(chorus_datatype_t dt)
{
    return dt == chorus_float16 || dt == chorus_bfloat16;
}

static int row_applies(chorus_datatype_t dt, int kind)
{
    return kind < chorus_num_ops || is_half(dt);
}

/* Returns 0 to run, 1 if help was printed, -1 on a usage error (printed). */
static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {{"portable", no_argument, NULL, 'p'},
                                             {"isa", required_argument, NULL, 'i'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    *o = (opts_t){.size = 64 << 20, .iters = 10};
    parse_dtypes("all", o);
    parse_kinds("all", o);
    int bad = 0, c;
    int64_t v;
    while (!bad && (c = getopt_long(argc, argv, "s:n:d:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            /* At least 8 bytes, so that every dtype has an element. */
            bad = params_parse_size(optarg, &v) != 0 || v < 8;
            if (bad) fprintf(stderr, "-s %s: expected a size of at least 8, such as 1M or 64M\n", optarg);
            else o->size = (size_t)v;
            break;
        case 'n':
            bad = params_parse_int(optarg, &v) != 0 || v < 1 || v > 1000000;
            if (bad) fprintf(stderr, "-n %s: expected an integer from 1 to 1000000\n", optarg);
            else o->iters = (int)v;
            break;
        case 'd': bad = parse_dtypes(optarg, o); break;
        case 'o': bad = parse_kinds(optarg, o); break;
        case 'p': bad = parse_isas("portable", o); break;
        case 'i': bad = parse_isas(optarg, o); break;
        case 'h': usage(); return 1;
        default: bad = 1;
        }
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "%s: unexpected argument\n", argv[optind]);
        bad = 1;
    }
    int rows = 0;
    for (int d = 0; d < o->ndtypes; d++)
        for (int k = 0; k < o->nkinds; k++) rows += row_applies(o->dtypes[d], o->kinds[k]);
    if (!bad && rows == 0) {
        fprintf(stderr, "nothing to run: widen and narrow apply to float16 and bfloat16 only\n");
        bad = 1;
    }
    if (bad) {
        fprintf(stderr, "Run %s -h for the flags.\n", program_invocation_short_name);
        return -1;
    }
    return 0;
}

/* Small integers: every op is exact or merely rounds, never overflows a float into infinity, and no float
 * operand is subnormal or NaN, which could take a slow path and time something other than the loop. */
static void fill(void *buf, size_t size, chorus_datatype_t dt, unsigned seed)
{
    size_t n = size / dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        unsigned v = 1 + (unsigned)((i + seed) % 13);
        switch (dt) {
        case chorus_int8:
        case chorus_uint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
        case chorus_int32:
        case chorus_uint32: ((uint32_t *)buf)[i] = v; break;
        case chorus_int64:
        case chorus_uint64: ((uint64_t *)buf)[i] = v; break;
        case chorus_float16: ((uint16_t *)buf)[i] = float_to_fp16((float)v); break;
        case chorus_bfloat16: ((uint16_t *)buf)[i] = float_to_bf16((float)v); break;
        case chorus_float32: ((float *)buf)[i] = (float)v; break;
        case chorus_float64: ((double *)buf)[i] = (double)v; break;
        default: break;
        }
    }
}

/* On failure the buffers allocated so far stay in *bufs for buffers_free. */
static int buffers_alloc(buffers_t *bufs, size_t size)
{
    void **all[] = {&bufs->dst, &bufs->a, &bufs->b};
    for (size_t i = 0; i < CHORUS_ARRAY_SIZE(all); i++) {
        if (posix_memalign(all[i], 64, size) != 0) {
            fprintf(stderr, "%s: cannot allocate 3 buffers of %zu bytes\n", program_invocation_short_name, size);
            return -1;
        }
        /* Fault every page in now, so that no timed pass pays for first touches. */
        memset(*all[i], 0, size);
    }
    return 0;
}

static void buffers_free(buffers_t *bufs)
{
    free(bufs->dst);
    free(bufs->a);
    free(bufs->b);
}

/* One pass of the row's kernel; returns the bytes of traffic it implies. */
static size_t run_kernel(const buffers_t *bufs, chorus_datatype_t dt, int kind)
{
    size_t floats = bufs->size / sizeof(float), half_traffic = floats * (sizeof(float) + sizeof(uint16_t));
    switch (kind) {
    case ROW_WIDEN: half_to_float_array(bufs->dst, bufs->a, floats, dt); return half_traffic;
    case ROW_NARROW: float_to_half_array(bufs->dst, bufs->a, floats, dt); return half_traffic;
    default: {
        size_t count = bufs->size / dtype_size(dt);
        reduce_apply3(bufs->dst, bufs->a, bufs->b, count, dt, (chorus_redop_t)kind);
        return count * dtype_size(dt) * 3;
    }
    }
}

static int compare_ns(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static double median_ns(int64_t *ns, int n)
{
    qsort(ns, (size_t)n, sizeof(*ns), compare_ns);
    return n % 2 ? (double)ns[n / 2] : 0.5 * (double)(ns[n / 2 - 1] + ns[n / 2]);
}

/* Times the row and memcpy alternately, one untimed pass of each first (code and TLB warm). kernel_ns and
 * copy_ns hold iters slots each. */
static void run_row(const buffers_t *bufs, chorus_datatype_t dt, int kind, int iters, int64_t *kernel_ns,
                    int64_t *copy_ns, size_t *traffic_p)
{
    /* The conversions read one half-precision or float32 array, the reductions two operands of dt. */
    fill(bufs->a, bufs->size, kind == ROW_NARROW ? chorus_float32 : dt, 0);
    fill(bufs->b, bufs->size, dt, 5);
    size_t traffic = run_kernel(bufs, dt, kind);
    memcpy(bufs->dst, bufs->a, bufs->size);
    for (int i = 0; i < iters; i++) {
        int64_t t0 = time_now_ns();
        run_kernel(bufs, dt, kind);
        int64_t t1 = time_now_ns();
        memcpy(bufs->dst, bufs->a, bufs->size);
        int64_t t2 = time_now_ns();
        /* A tiny -s can finish within one clock tick; a zero would divide into an infinite rate. */
        kernel_ns[i] = CHORUS_MAX(t1 - t0, 1);
        copy_ns[i] = CHORUS_MAX(t2 - t1, 1);
    }
    *traffic_p = traffic;
}

/* Every row with the kernels of one instruction set (NULL: the best). */
static void run_isa(const opts_t *o, const buffers_t *bufs, const char *isa_name, int64_t *kernel_ns,
                    int64_t *copy_ns)
{
    const char *isa = reduce_set_isa(isa_name);
    printf("# chorus-kernels: isa %s, %zu bytes per operand, %d iterations, median times; traffic: reduce 3 x size,"
           " memcpy 2 x size, widen/narrow 1.5 x size\n",
           isa, o->size, o->iters);
    printf("#%9s %7s %12s %9s %9s %9s %7s\n", "dtype", "op", "size", "kernel", "kernel", "memcpy", "% of");
    printf("#%9s %7s %12s %9s %9s %9s %7s\n", "", "", "(B)", "(ms)", "(GB/s)", "(GB/s)", "memcpy");
    for (int d = 0; d < o->ndtypes; d++) {
        for (int k = 0; k < o->nkinds; k++) {
            chorus_datatype_t dt = o->dtypes[d];
            if (!row_applies(dt, o->kinds[k])) continue;
            size_t traffic;
            run_row(bufs, dt, o->kinds[k], o->iters, kernel_ns, copy_ns, &traffic);
            double kernel = median_ns(kernel_ns, o->iters), copy = median_ns(copy_ns, o->iters);
            /* Bytes per nanosecond are GB/s (10^9 bytes, as nccl-tests counts them). */
            double kernel_gbs = (double)traffic / kernel, copy_gbs = 2.0 * (double)o->size / copy;
            printf(" %9s %7s %12zu %9.3f %9.2f %9.2f %7.1f\n", dtype_name(dt), kind_name(o->kinds[k]), o->size,
                   kernel / 1e6, kernel_gbs, copy_gbs, 100.0 * kernel_gbs / copy_gbs);
            fflush(stdout);
        }
    }
}

int main(int argc, char **argv)
{
    opts_t o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) return rc > 0 ? 0 : 2;

    buffers_t bufs = {.size = o.size};
    int64_t *kernel_ns = calloc((size_t)o.iters, sizeof(*kernel_ns));
    int64_t *copy_ns = calloc((size_t)o.iters, sizeof(*copy_ns));
    if (!kernel_ns || !copy_ns) {
        fprintf(stderr, "%s: out of memory\n", program_invocation_short_name);
        rc = 1;
        goto out;
    }
    if (buffers_alloc(&bufs, o.size) != 0) {
        rc = 1;
        goto out;
    }

    /* No --isa: one pass with the best instruction set, as the library runs. */
    for (int pass = 0; pass < CHORUS_MAX(o.nisas, 1); pass++)
        run_isa(&o, &bufs, o.nisas ? o.isas[pass] : NULL, kernel_ns, copy_ns);
out:
    buffers_free(&bufs);
    free(kernel_ns);
    free(copy_ns);
    return rc;
}
