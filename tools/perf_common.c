#include "perf_common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/reduce.h"
#include "util/params.h"
#include "util/util.h"

/* COLL_NO_IN_PLACE: blocking send and recv cannot exchange within one buffer, since the rank that receives
 * first would overwrite what it has yet to send. */
enum { COLL_REDUCES = 1, COLL_ROOTED = 2, COLL_BLOCKS = 4, COLL_NO_IN_PLACE = 8 };

static const struct coll_desc {
    const char *name;
    unsigned flags;
} colls[PERF_NUM_COLLS] = {
    [PERF_ALLREDUCE] = {"allreduce", COLL_REDUCES},
    [PERF_ALLGATHER] = {"allgather", COLL_BLOCKS},
    [PERF_REDUCE_SCATTER] = {"reduce_scatter", COLL_REDUCES | COLL_BLOCKS},
    [PERF_BROADCAST] = {"broadcast", COLL_ROOTED},
    [PERF_REDUCE] = {"reduce", COLL_REDUCES | COLL_ROOTED},
    [PERF_ALLTOALL] = {"alltoall", COLL_BLOCKS},
    [PERF_SENDRECV] = {"sendrecv", COLL_NO_IN_PLACE},
    [PERF_BARRIER] = {"barrier", 0},
};

const char *perf_coll_name(perf_coll_t coll)
{
    return colls[coll].name;
}

static double busbw_factor(perf_coll_t coll, int nranks)
{
    switch (coll) {
    case PERF_ALLREDUCE: return 2.0 * (nranks - 1) / nranks;
    case PERF_ALLGATHER:
    case PERF_REDUCE_SCATTER:
    case PERF_ALLTOALL: return (double)(nranks - 1) / nranks;
    default: return 1;
    }
}

/* ---- Arguments ---- */

static void usage(const char *extra)
{
    printf("usage: %s COLLECTIVE [flags]\n"
           "%s"
           "  COLLECTIVE  allreduce, allgather, reduce_scatter, broadcast, reduce, alltoall, sendrecv or barrier\n"
           "  -b BYTES    smallest size (default 32M; K, M and G suffixes)\n"
           "  -e BYTES    largest size (default 32M)\n"
           "  -f N        multiply the size by N from one row to the next (default 2)\n"
           "  -n N        timed iterations per row (default 20)\n"
           "  -w N        warm-up iterations per row (default 5)\n"
           "  -c 0|1      check every value after timing (default 1)\n"
           "  -o OP       sum, prod, max, min, avg or all (default sum)\n"
           "  -d TYPE     int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64\n"
           "              or all (default float32)\n"
           "  -r ROOT     root of broadcast and reduce (default 0)\n"
           "  -a ALGO     force one algorithm of the collective, or all: one block per algorithm\n"
           "  -O BYTES    start both buffers this many bytes past a page boundary (default 0; malloc puts\n"
           "              large blocks 16 bytes past one, and some copy routines care)\n"
           "  -z 0|1      1: every call completes before it returns (default); 0: the calls are queued on a\n"
           "              stream and waited for once after the timed ones, as nccl-tests does by default\n"
           "  -R 0|1      1: both buffers from the library's allocator for communication memory\n"
           "              (chorus_mem_alloc, MPI_Alloc_mem), as nccl-tests' -R; 0: the heap's (default)\n"
           "Sizes are the bytes of the whole buffer, as in nccl-tests: for allgather, reduce_scatter and\n"
           "alltoall the nranks blocks together.\n",
           program_invocation_short_name, extra ? extra : "");
}

static int parse_int_arg(const char *text, char flag, int lo, int hi, int *out)
{
    int64_t v;
    if (params_parse_int(text, &v) == 0 && v >= lo && v <= hi) {
        *out = (int)v;
        return 0;
    }
    fprintf(stderr, "-%c %s: expected an integer from %d to %d\n", flag, text, lo, hi);
    return -1;
}

static int parse_size_arg(const char *text, char flag, int64_t *out)
{
    if (params_parse_size(text, out) == 0) return 0;
    fprintf(stderr, "-%c %s: expected a size such as 8, 64K, 4M or 1G\n", flag, text);
    return -1;
}

static int parse_dtypes(const char *text, perf_opts_t *o)
{
    if (dtype_parse_choice(text, o->dtypes, &o->ndtypes) == 0) return 0;
    fprintf(stderr, "-d %s: unknown datatype\n", text);
    return -1;
}

static int parse_ops(const char *text, perf_opts_t *o)
{
    if (strcmp(text, "all") == 0) {
        for (int i = 0; i < chorus_num_ops; i++) o->ops[i] = (chorus_redop_t)i;
        o->nops = chorus_num_ops;
        return 0;
    }
    o->nops = 1;
    if (redop_parse(text, &o->ops[0]) == 0) return 0;
    fprintf(stderr, "-o %s: unknown reduction op\n", text);
    return -1;
}

static int parse_coll(const char *text, perf_coll_t *coll_p)
{
    for (int c = 0; c < PERF_NUM_COLLS; c++)
        if (strcmp(text, colls[c].name) == 0) {
            *coll_p = (perf_coll_t)c;
            return 0;
        }
    fprintf(stderr, "%s: unknown collective\n", text);
    return -1;
}

int perf_parse_args(int argc, char **argv, const char *extra_usage, perf_opts_t *o)
{
    *o = (perf_opts_t){.min_bytes = 32 << 20, .max_bytes = 32 << 20, .factor = 2, .iters = 20, .warmup = 5,
                       .check = 1, .blocking = 1, .ndtypes = 1, .dtypes = {chorus_float32}, .nops = 1, .ops = {chorus_sum}};
    int bad = 0, opt;
    while (!bad && (opt = getopt(argc, argv, "b:e:f:n:w:c:o:d:r:a:O:z:R:h")) != -1) {
        switch (opt) {
        case 'b': bad = parse_size_arg(optarg, 'b', &o->min_bytes); break;
        case 'e': bad = parse_size_arg(optarg, 'e', &o->max_bytes); break;
        case 'f': bad = parse_int_arg(optarg, 'f', 1, INT32_MAX, &o->factor); break;
        case 'n': bad = parse_int_arg(optarg, 'n', 1, INT32_MAX, &o->iters); break;
        case 'w': bad = parse_int_arg(optarg, 'w', 0, INT32_MAX, &o->warmup); break;
        case 'c': bad = parse_int_arg(optarg, 'c', 0, 1, &o->check); break;
        case 'r': bad = parse_int_arg(optarg, 'r', 0, INT32_MAX, &o->root); break;
        case 'o': bad = parse_ops(optarg, o); break;
        case 'd': bad = parse_dtypes(optarg, o); break;
        case 'a': o->algo = optarg; break;
        case 'O': bad = parse_int_arg(optarg, 'O', 0, 4095, &o->offset); break;
        case 'z': bad = parse_int_arg(optarg, 'z', 0, 1, &o->blocking); break;
        case 'R': bad = parse_int_arg(optarg, 'R', 0, 1, &o->alloc); break;
        case 'h': usage(extra_usage); return 1;
        default: bad = 1;
        }
    }
    if (!bad && optind != argc - 1) {
        fprintf(stderr, "%s\n", optind < argc ? "expected one collective" : "missing the collective");
        bad = 1;
    }
    if (!bad) bad = parse_coll(argv[optind], &o->coll);
    if (!bad && o->min_bytes > o->max_bytes) {
        fprintf(stderr, "-b must not exceed -e\n");
        bad = 1;
    }
    if (!bad && o->factor < 2 && o->min_bytes < o->max_bytes) {
        fprintf(stderr, "-f must be at least 2 when -b is below -e\n");
        bad = 1;
    }
    if (bad) {
        fprintf(stderr, "Run %s -h for the flags.\n", program_invocation_short_name);
        return -1;
    }
    return 0;
}

/* ---- Inputs and expected values ----
 * Every value depends on the element index only through index % PERIOD, so the inputs and the expected
 * results of a rank are one PERIOD-long template, tiled with memcpy and compared with memcmp. PERIOD is
 * prime so that a block landing at a wrong power-of-two offset does not line up with its own pattern. */
#define PERIOD 1021

typedef enum { PAT_SUM, PAT_PROD, PAT_WIDE } pattern_t;

typedef struct tmpl {
    size_t dsize;
    unsigned char bytes[PERIOD * sizeof(double)];
} tmpl_t;

static uint32_t index_hash(size_t j)
{
    return (uint32_t)((j + 1) * 2654435761u);
}

static int dtype_unsigned(chorus_datatype_t dt)
{
    return dt == chorus_uint8 || dt == chorus_uint32 || dt == chorus_uint64;
}

/* Rank r's input at index j (< PERIOD): small integers, so that every reduction is exact in every dtype
 * and in any order for up to 128 ranks (int8 and bfloat16 are the tightest). */
static double input_value(pattern_t pat, chorus_datatype_t dt, int rank, int nranks, size_t j)
{
    uint32_t h = index_hash(j);
    int negative_ok = !dtype_unsigned(dt);
    switch (pat) {
    case PAT_SUM:
        /* Ranks cycle through four consecutive values, so a partial sum over any subset of 128 ranks
         * stays within [-32, 96] (signed) or [0, 192] (unsigned). */
        return (double)((rank + (h >> 24)) % 4) - negative_ok;
    case PAT_PROD:
        /* One 2 per index, +-1 elsewhere: every partial product is +-1 or +-2. */
        if ((uint32_t)rank == h % (uint32_t)nranks) return 2;
        return negative_ok && (rank + (h >> 24)) % 3 == 0 ? -1 : 1;
    case PAT_WIDE:
        /* Differs between ranks, so data from the wrong rank is caught. */
        return (double)((rank * 37 + (h >> 24)) % 251) - (negative_ok ? 125 : 0);
    }
    return 0;
}

static void store_value(void *buf, size_t i, chorus_datatype_t dt, double v)
{
    switch (dt) {
    case chorus_int8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case chorus_uint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case chorus_int32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case chorus_uint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case chorus_int64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case chorus_uint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case chorus_float16: ((uint16_t *)buf)[i] = float_to_fp16((float)v); break;
    case chorus_bfloat16: ((uint16_t *)buf)[i] = float_to_bf16((float)v); break;
    case chorus_float32: ((float *)buf)[i] = (float)v; break;
    case chorus_float64: ((double *)buf)[i] = v; break;
    default: break;
    }
}

/* avg as the library computes it: the exact sum, then one division in the dtype's precision (float16
 * and bfloat16 divide in float32 and round once when stored); integers truncate toward zero. */
static double avg_value(double sum, int nranks, chorus_datatype_t dt)
{
    switch (dt) {
    case chorus_float64: return sum / nranks;
    case chorus_float32:
    case chorus_float16:
    case chorus_bfloat16: return (float)sum / (float)nranks;
    default: return (double)((int64_t)sum / nranks);
    }
}

static void tmpl_input(tmpl_t *t, chorus_datatype_t dt, pattern_t pat, int rank, int nranks)
{
    t->dsize = dtype_size(dt);
    for (size_t j = 0; j < PERIOD; j++) store_value(t->bytes, j, dt, input_value(pat, dt, rank, nranks, j));
}

static void tmpl_reduced(tmpl_t *t, chorus_datatype_t dt, pattern_t pat, chorus_redop_t op, int nranks)
{
    t->dsize = dtype_size(dt);
    for (size_t j = 0; j < PERIOD; j++) {
        double acc = input_value(pat, dt, 0, nranks, j);
        for (int r = 1; r < nranks; r++) {
            double v = input_value(pat, dt, r, nranks, j);
            switch (op) {
            case chorus_prod: acc *= v; break;
            case chorus_max: acc = fmax(acc, v); break;
            case chorus_min: acc = fmin(acc, v); break;
            default: acc += v; break;
            }
        }
        store_value(t->bytes, j, dt, op == chorus_avg ? avg_value(acc, nranks, dt) : acc);
    }
}

/* A value no check may accept: the most negative integer, the largest unsigned one, a float NaN. */
static void tmpl_poison(tmpl_t *t, chorus_datatype_t dt)
{
    t->dsize = dtype_size(dt);
    if (dt == chorus_int8 || dt == chorus_int32 || dt == chorus_int64) {
        for (size_t j = 0; j < PERIOD; j++) {
            memset(t->bytes + j * t->dsize, 0, t->dsize);
            t->bytes[(j + 1) * t->dsize - 1] = 0x80; /* little endian: the sign bit alone */
        }
    } else {
        memset(t->bytes, 0xff, PERIOD * t->dsize);
    }
}

/* buf[k] = template element (offset + k) % PERIOD, for k < count. */
static void tile_fill(void *buf, size_t count, const tmpl_t *t, size_t offset)
{
    char *dst = buf;
    for (size_t j = offset % PERIOD; count; j = 0) {
        size_t n = CHORUS_MIN(count, PERIOD - j);
        memcpy(dst, t->bytes + j * t->dsize, n * t->dsize);
        dst += n * t->dsize;
        count -= n;
    }
}

/* How many of buf's count elements differ, bit for bit, from the tiled template. */
static size_t tile_wrong(const void *buf, size_t count, const tmpl_t *t, size_t offset)
{
    const char *src = buf;
    size_t wrong = 0;
    for (size_t j = offset % PERIOD; count; j = 0) {
        size_t n = CHORUS_MIN(count, PERIOD - j);
        const unsigned char *want = t->bytes + j * t->dsize;
        if (memcmp(src, want, n * t->dsize) != 0)
            for (size_t k = 0; k < n; k++) wrong += memcmp(src + k * t->dsize, want + k * t->dsize, t->dsize) != 0;
        src += n * t->dsize;
        count -= n;
    }
    return wrong;
}

/* ---- One row ---- */

typedef struct row {
    const perf_opts_t *opts;
    const perf_backend_t *be;
    char *buf_a, *buf_b;
    chorus_datatype_t dtype;
    chorus_redop_t op;
    size_t dsize;
    size_t count;  /* elements of the whole buffer, as printed */
    size_t pcount; /* elements per rank block for the blocked collectives, else count */
} row_t;

static pattern_t row_pattern(const row_t *row)
{
    if (!(colls[row->opts->coll].flags & COLL_REDUCES)) return PAT_WIDE;
    switch (row->op) {
    case chorus_sum:
    case chorus_avg: return PAT_SUM;
    case chorus_prod: return PAT_PROD;
    default: return PAT_WIDE;
    }
}

/* In place follows the API: AllGather sends from its own block of recvbuf, ReduceScatter receives into
 * its own block of sendbuf, every other collective uses one buffer. */
static perf_call_t row_call(const row_t *row, int in_place)
{
    perf_coll_t coll = row->opts->coll;
    perf_call_t call = {.coll = coll, .count = row->pcount, .dtype = row->dtype, .op = row->op,
                        .root = row->opts->root, .sendbuf = row->buf_a, .recvbuf = row->buf_b,
                        .in_place = in_place};
    if (!in_place) return call;
    char *own_block = row->buf_b + (size_t)row->be->rank * row->pcount * row->dsize;
    call.sendbuf = coll == PERF_ALLGATHER ? own_block : row->buf_b;
    call.recvbuf = coll == PERF_REDUCE_SCATTER ? own_block : row->buf_b;
    return call;
}

/* Poison what the call writes, then lay down this rank's input (which, in place, may overwrite part of
 * the poison on purpose). */
static void row_fill(const row_t *row, const perf_call_t *call)
{
    perf_coll_t coll = row->opts->coll;
    int rank = row->be->rank;
    tmpl_t t;
    tmpl_poison(&t, row->dtype);
    tile_fill(call->recvbuf, coll == PERF_REDUCE_SCATTER ? row->pcount : row->count, &t, 0);
    if (coll == PERF_BROADCAST && rank != row->opts->root) return;
    tmpl_input(&t, row->dtype, row_pattern(row), rank, row->be->nranks);
    tile_fill((void *)call->sendbuf, coll == PERF_ALLGATHER ? row->pcount : row->count, &t, 0);
}

/* Block b of recvbuf holds rank b's input, starting at element `offset` of that input. */
static size_t wrong_blocks(const row_t *row, const perf_call_t *call, size_t offset)
{
    size_t wrong = 0;
    tmpl_t t;
    for (int b = 0; b < row->be->nranks; b++) {
        tmpl_input(&t, row->dtype, PAT_WIDE, b, row->be->nranks);
        wrong += tile_wrong((char *)call->recvbuf + b * row->pcount * row->dsize, row->pcount, &t, offset);
    }
    return wrong;
}

static size_t row_wrong(const row_t *row, const perf_call_t *call)
{
    int rank = row->be->rank, nranks = row->be->nranks, root = row->opts->root;
    tmpl_t t;
    switch (row->opts->coll) {
    case PERF_ALLREDUCE:
    case PERF_REDUCE:
    case PERF_REDUCE_SCATTER:
        if (row->opts->coll == PERF_REDUCE && rank != root) return 0;
        tmpl_reduced(&t, row->dtype, row_pattern(row), row->op, nranks);
        if (row->opts->coll == PERF_REDUCE_SCATTER)
            return tile_wrong(call->recvbuf, row->pcount, &t, (size_t)rank * row->pcount);
        return tile_wrong(call->recvbuf, row->count, &t, 0);
    case PERF_ALLGATHER: return wrong_blocks(row, call, 0);
    case PERF_ALLTOALL: return wrong_blocks(row, call, (size_t)rank * row->pcount);
    case PERF_BROADCAST:
    case PERF_SENDRECV:
        tmpl_input(&t, row->dtype, PAT_WIDE, row->opts->coll == PERF_BROADCAST ? root : (rank - 1 + nranks) % nranks,
                   nranks);
        return tile_wrong(call->recvbuf, row->count, &t, 0);
    default: return 0;
    }
}

/* With -z 0, wait for the calls queued so far. */
static int sync_calls(const row_t *row)
{
    return row->opts->blocking ? 0 : row->be->sync(row->be->ctx);
}

/* Average microseconds per call on the slowest rank, as nccl-tests reports. */
static int time_call(const row_t *row, const perf_call_t *call, double *us_p)
{
    const perf_backend_t *be = row->be;
    const perf_call_t barrier = {.coll = PERF_BARRIER};
    for (int i = 0; i < row->opts->warmup; i++)
        if (be->run(be->ctx, call)) return -1;
    if (be->run(be->ctx, &barrier) || sync_calls(row)) return -1;
    int64_t start = time_now_ns();
    for (int i = 0; i < row->opts->iters; i++)
        if (be->run(be->ctx, call)) return -1;
    if (sync_calls(row)) return -1;
    *us_p = (double)(time_now_ns() - start) / 1e3 / row->opts->iters;
    return be->allreduce_max_double(be->ctx, us_p);
}

static int check_call(const row_t *row, const perf_call_t *call, int64_t *wrong_p)
{
    row_fill(row, call);
    if (row->be->run(row->be->ctx, call) || sync_calls(row)) return -1;
    *wrong_p = (int64_t)row_wrong(row, call);
    return row->be->allreduce_sum_int64(row->be->ctx, wrong_p);
}

static void print_na_columns(void)
{
    printf("  %9s  %7s  %7s  %6s", "N/A", "N/A", "N/A", "N/A");
}

static void print_time(double us)
{
    printf("  %9.*f", us < 1e4 ? 2 : us < 1e6 ? 1 : 0, us);
}

typedef struct totals {
    double busbw_sum;
    int busbw_n;
    int64_t wrong;
} totals_t;

static int run_row(row_t *row, int64_t bytes, totals_t *tot)
{
    const perf_opts_t *o = row->opts;
    int nranks = row->be->nranks;
    row->count = (size_t)bytes / row->dsize;
    if (colls[o->coll].flags & COLL_BLOCKS) row->count -= row->count % (size_t)nranks;
    row->pcount = colls[o->coll].flags & COLL_BLOCKS ? row->count / (size_t)nranks : row->count;
    int modes = colls[o->coll].flags & COLL_NO_IN_PLACE ? 1 : 2;
    double us[2];
    int64_t wrong[2] = {0, 0};
    for (int in_place = 0; in_place < modes; in_place++) {
        perf_call_t call = row_call(row, in_place);
        row_fill(row, &call);
        if (time_call(row, &call, &us[in_place])) return -1;
    }
    for (int in_place = 0; o->check && in_place < modes; in_place++) {
        perf_call_t call = row_call(row, in_place);
        if (check_call(row, &call, &wrong[in_place])) return -1;
    }
    size_t size = row->count * row->dsize;
    double algbw[2];
    for (int m = 0; m < modes; m++) {
        algbw[m] = (double)size / us[m] / 1e3;
        tot->busbw_sum += algbw[m] * busbw_factor(o->coll, nranks);
        tot->busbw_n++;
        tot->wrong += wrong[m];
    }
    if (row->be->rank != 0) return 0;
    printf("%12zu  %12zu  %8s  %6s  %6d", size, row->count, dtype_name(row->dtype),
           colls[o->coll].flags & COLL_REDUCES ? redop_name(row->op) : "none",
           colls[o->coll].flags & COLL_ROOTED ? o->root : -1);
    for (int m = 0; m < modes; m++) {
        print_time(us[m]);
        printf("  %7.2f  %7.2f", algbw[m], algbw[m] * busbw_factor(o->coll, nranks));
        if (o->check)
            printf("  %6lld", (long long)wrong[m]);
        else
            printf("  %6s", "N/A");
    }
    if (modes < 2) print_na_columns();
    if (row->be->predict) {
        perf_call_t call = row_call(row, 0);
        double model_us = NAN;
        const char *algo = row->be->predict(row->be->ctx, &call, &model_us);
        printf("  %12s", algo ? algo : "-");
        if (isnan(model_us))
            printf("  %9s  %7s", "N/A", "N/A");
        else {
            print_time(model_us);
            printf("  %7.2f", us[0] / model_us);
        }
    }
    printf("\n");
    fflush(stdout);
    return 0;
}

static int run_barrier(const row_t *row)
{
    const perf_call_t call = {.coll = PERF_BARRIER};
    double us;
    if (time_call(row, &call, &us)) return -1;
    if (row->be->rank != 0) return 0;
    printf("%12d  %12d  %8s  %6s  %6d", 0, 0, "none", "none", -1);
    print_time(us);
    printf("  %7s  %7s  %6s", "N/A", "N/A", "N/A");
    print_na_columns();
    printf("\n");
    return 0;
}

static void print_header(const perf_opts_t *o, const perf_backend_t *be)
{
    const char *op = o->nops > 1 ? "all" : redop_name(o->ops[0]);
    if (!(colls[o->coll].flags & COLL_REDUCES)) op = "none";
    printf("# %s %s: nranks %d, %s\n", program_invocation_short_name, colls[o->coll].name, be->nranks, be->description);
    printf("# dtype %s, op %s, minBytes %lld, maxBytes %lld, step %d (factor), warmup iters %d, iters %d, "
           "validation %d, root %d, buffers %d bytes past a page%s, blocking %d\n",
           o->ndtypes > 1 ? "all" : dtype_name(o->dtypes[0]), op, (long long)o->min_bytes, (long long)o->max_bytes,
           o->factor, o->warmup, o->iters, o->check, o->root, o->offset, o->alloc ? " from the library's allocator" : "",
           o->blocking);
    printf("#\n#%63s%s%27s%s\n", "", "out-of-place", "", "in-place");
    printf("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    for (int m = 0; m < 2; m++) printf("  %9s  %7s  %7s  %6s", "time", "algbw", "busbw", "#wrong");
    if (be->predict) printf("  %12s  %9s  %7s", "algorithm", "model", "meas/");
    printf("\n#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    for (int m = 0; m < 2; m++) printf("  %9s  %7s  %7s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
    if (be->predict) printf("  %12s  %9s  %7s", "(out-of-pl.)", "(us)", "model");
    printf("\n");
}

/* Every row of one dtype x op: the sizes from -b to -e. */
static int run_sizes(row_t *row, totals_t *tot)
{
    const perf_opts_t *o = row->opts;
    for (int64_t bytes = o->min_bytes; bytes <= o->max_bytes;) {
        if (run_row(row, bytes, tot)) return -1;
        if (bytes > 0 && (o->factor < 2 || bytes > INT64_MAX / o->factor)) break;
        bytes = bytes ? bytes * o->factor : 1;
    }
    return 0;
}

static void buffer_free(const perf_opts_t *o, const perf_backend_t *be, void *buf)
{
    if (o->alloc && buf)
        be->mem_free(be->ctx, buf);
    else
        free(buf);
}

int perf_main(const perf_opts_t *o, const perf_backend_t *be)
{
    if (o->root >= be->nranks) {
        if (be->rank == 0) fprintf(stderr, "-r %d: the root must be below nranks (%d)\n", o->root, be->nranks);
        return 2;
    }
    if (!o->blocking && !be->sync) {
        if (be->rank == 0) fprintf(stderr, "-z 0: %s runs blocking calls only\n", program_invocation_short_name);
        return 2;
    }
    if (be->rank == 0) print_header(o, be);
    if (o->coll == PERF_SENDRECV && be->nranks < 2) {
        if (be->rank == 0) printf("# sendrecv needs at least 2 ranks: skipped\n");
        return 0;
    }
    row_t row = {.opts = o, .be = be};
    size_t bytes = (size_t)CHORUS_MAX(o->max_bytes, 1);
    void *a = NULL, *b = NULL;
    size_t off = (size_t)o->offset;
    if (o->alloc && !be->mem_alloc) {
        if (be->rank == 0) fprintf(stderr, "-R 1: %s has no allocator of its own\n", program_invocation_short_name);
        return 2;
    }
    /* A library's allocator need not return whole pages (MPI_Alloc_mem returns malloc's blocks, 16 or 32
     * bytes past a page): ask for a page more and start at the next page boundary, so that -O means the
     * same for every library. */
    size_t pad = o->alloc ? 4095 : 0;
    if (o->alloc ? be->mem_alloc(be->ctx, bytes + off + pad, &a) || be->mem_alloc(be->ctx, bytes + off + pad, &b)
                 : posix_memalign(&a, 4096, bytes + off) || posix_memalign(&b, 4096, bytes + off)) {
        fprintf(stderr, "%s: cannot allocate two buffers of %zu bytes\n", program_invocation_short_name, bytes);
        buffer_free(o, be, a);
        return 1;
    }
    row.buf_a = (char *)(((uintptr_t)a + pad) & ~(uintptr_t)4095) + off;
    row.buf_b = (char *)(((uintptr_t)b + pad) & ~(uintptr_t)4095) + off;
    totals_t tot = {0, 0, 0};
    int failed = 0;
    if (o->coll == PERF_BARRIER) failed = run_barrier(&row) != 0;
    int has_op = (colls[o->coll].flags & COLL_REDUCES) != 0;
    for (int d = 0; o->coll != PERF_BARRIER && !failed && d < o->ndtypes; d++) {
        for (int k = 0; !failed && k < (has_op ? o->nops : 1); k++) {
            row.dtype = o->dtypes[d];
            row.op = o->ops[k];
            row.dsize = dtype_size(row.dtype);
            const char *why = be->unsupported ? be->unsupported(row.dtype, row.op, has_op) : NULL;
            if (why) {
                if (be->rank == 0)
                    printf("# skipping %s%s%s: %s\n", dtype_name(row.dtype), has_op ? " " : "",
                           has_op ? redop_name(row.op) : "", why);
                continue;
            }
            failed = run_sizes(&row, &tot) != 0;
        }
    }
    buffer_free(o, be, a);
    buffer_free(o, be, b);
    if (failed) return 1;
    if (be->rank == 0) {
        printf("# Out of bounds values : %lld %s\n", (long long)tot.wrong, tot.wrong ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n#\n", tot.busbw_n ? tot.busbw_sum / tot.busbw_n : 0.0);
    }
    return tot.wrong ? 1 : 0;
}
