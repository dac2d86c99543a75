/* Reduction kernels: one plain C loop per (datatype, op), written so that gcc -O3 vectorises it, compiled
 * once per instruction set (reduce_impl.h), with float16 and bfloat16 by hand where the compiler's
 * vectorisation falls short: the portable loops here, AVX2 with F16C (reduce_avx2.c), AVX-512 and its
 * BF16 and FP16 extensions (reduce_avx512.c). The instruction set is chosen once, at the first call; the
 * choice is a table of loops, so each call makes one lookup and never branches per element on the
 * datatype or the op. */
#include "algo/reduce_impl.h"

#include <stdatomic.h>
#include <strings.h>

/* ---- Names ---- */

static const struct {
    const char *name;
    size_t size;
} dtype_info[chorus_num_datatypes] = {
    [chorus_int8] = {"int8", 1},       [chorus_uint8] = {"uint8", 1},     [chorus_int32] = {"int32", 4},
    [chorus_uint32] = {"uint32", 4},   [chorus_int64] = {"int64", 8},     [chorus_uint64] = {"uint64", 8},
    [chorus_float16] = {"float16", 2}, [chorus_bfloat16] = {"bfloat16", 2}, [chorus_float32] = {"float32", 4},
    [chorus_float64] = {"float64", 8},
};

/* The short forms users bring from NCCL, PyTorch and numpy. */
static const struct {
    const char *alias;
    chorus_datatype_t dt;
} dtype_aliases[] = {
    {"half", chorus_float16},   {"fp16", chorus_float16},   {"bf16", chorus_bfloat16}, {"float", chorus_float32},
    {"fp32", chorus_float32},   {"double", chorus_float64}, {"fp64", chorus_float64},  {"int", chorus_int32},
};

static const char *const redop_names[chorus_num_ops] = {
    [chorus_sum] = "sum", [chorus_prod] = "prod", [chorus_max] = "max", [chorus_min] = "min", [chorus_avg] = "avg",
};

size_t dtype_size(chorus_datatype_t dt)
{
    return (unsigned)dt < chorus_num_datatypes ? dtype_info[dt].size : 0;
}

const char *dtype_name(chorus_datatype_t dt)
{
    return (unsigned)dt < chorus_num_datatypes ? dtype_info[dt].name : NULL;
}

int dtype_parse(const char *name, chorus_datatype_t *dt_p)
{
    for (int i = 0; i < chorus_num_datatypes; i++) {
        if (strcasecmp(name, dtype_info[i].name) == 0) {
            *dt_p = (chorus_datatype_t)i;
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]); i++) {
        if (strcasecmp(name, dtype_aliases[i].alias) == 0) {
            *dt_p = dtype_aliases[i].dt;
            return 0;
        }
    }
    return -1;
}

int dtype_parse_choice(const char *text, chorus_datatype_t out[chorus_num_datatypes], int *n_p)
{
    if (strcmp(text, "all") == 0) {
        for (int i = 0; i < chorus_num_datatypes; i++) out[i] = (chorus_datatype_t)i;
        *n_p = chorus_num_datatypes;
        return 0;
    }
    *n_p = 1;
    return dtype_parse(text, &out[0]);
}

const char *redop_name(chorus_redop_t op)
{
    return (unsigned)op < chorus_num_ops ? redop_names[op] : NULL;
}

int redop_parse(const char *name, chorus_redop_t *op_p)
{
    for (int i = 0; i < chorus_num_ops; i++) {
        if (strcasecmp(name, redop_names[i]) == 0) {
            *op_p = (chorus_redop_t)i;
            return 0;
        }
    }
    return -1;
}

/* ---- Half-precision conversions (integer arithmetic, so the rounding mode cannot change them) ---- */

float fp16_to_float(uint16_t h)
{
    return fp16_widen(h);
}

uint16_t float_to_fp16(float f)
{
    return fp16_narrow(f);
}

float bf16_to_float(uint16_t b)
{
    return bf16_widen(b);
}

uint16_t float_to_bf16(float f)
{
    return bf16_narrow(f);
}

/* ---- The portable loops ---- */

#define REDUCE_TARGET_portable

REDUCE_LOOPS(DEFINE_LOOP, portable)
REDUCE_FINISHES(DEFINE_FINISH, portable)
DEFINE_HALF_LOOP(portable, bf16_sum, bf16_widen_raw, bf16_narrow, OP_SUM)
DEFINE_HALF_LOOP(portable, bf16_prod, bf16_widen_raw, bf16_narrow, OP_PROD)
DEFINE_HALF_LOOP(portable, bf16_max, bf16_widen_raw, bf16_narrow, OP_MAX)
DEFINE_HALF_LOOP(portable, bf16_min, bf16_widen_raw, bf16_narrow, OP_MIN)
DEFINE_HALF_FINISH(portable, bf16_avg, bf16_widen_raw, bf16_narrow)
DEFINE_WIDEN(portable, bf16_widen, bf16)
DEFINE_NARROW(portable, bf16_narrow, bf16)
DEFINE_HALF_LOOP(portable, fp16_sum, fp16_widen, fp16_narrow, OP_SUM)
DEFINE_HALF_LOOP(portable, fp16_prod, fp16_widen, fp16_narrow, OP_PROD)
DEFINE_HALF_LOOP(portable, fp16_max, fp16_widen, fp16_narrow, OP_MAX)
DEFINE_HALF_LOOP(portable, fp16_min, fp16_widen, fp16_narrow, OP_MIN)
DEFINE_HALF_FINISH(portable, fp16_avg, fp16_widen, fp16_narrow)
DEFINE_WIDEN(portable, fp16_widen, fp16)
DEFINE_NARROW(portable, fp16_narrow, fp16)

const struct reduce_isa reduce_isa_portable =
    REDUCE_ISA_TABLE("portable", NULL, portable, portable, portable, portable);

/* ---- Dispatch ---- */

static _Atomic(const struct reduce_isa *) reduce_isa_current;

/* Baseline first, then by width: the last one this CPU runs is the default. */
static const struct reduce_isa *const reduce_isas[] = {
    &reduce_isa_portable,
#ifdef REDUCE_HAVE_X86
    &reduce_isa_avx2,
    &reduce_isa_avx512,
#ifdef CHORUS_HAVE_AVX512BF16
    &reduce_isa_avx512_bf16,
#endif
#ifdef CHORUS_HAVE_AVX512FP16
    &reduce_isa_avx512_fp16,
#endif
#endif
};
#define REDUCE_NUM_ISAS (sizeof(reduce_isas) / sizeof(reduce_isas[0]))

static int reduce_isa_runs(const struct reduce_isa *isa)
{
    return !isa->runs_here || isa->runs_here();
}

static const struct reduce_isa *reduce_isa_best(void)
{
    for (size_t i = REDUCE_NUM_ISAS; i-- > 1;)
        if (reduce_isa_runs(reduce_isas[i])) return reduce_isas[i];
    return &reduce_isa_portable;
}

/* Racing first callers store the same pointer, so relaxed ordering suffices; the tables are constants. */
static const struct reduce_isa *reduce_isa_get(void)
{
    const struct reduce_isa *isa = atomic_load_explicit(&reduce_isa_current, memory_order_relaxed);
    if (!isa) {
        isa = reduce_isa_best();
        atomic_store_explicit(&reduce_isa_current, isa, memory_order_relaxed);
    }
    return isa;
}

int reduce_isa_list(const char **names, int max)
{
    int n = 0;
    for (size_t i = 0; i < REDUCE_NUM_ISAS; i++) {
        if (!reduce_isa_runs(reduce_isas[i])) continue;
        if (n < max) names[n] = reduce_isas[i]->name;
        n++;
    }
    return n;
}

const char *reduce_set_isa(const char *name)
{
    const struct reduce_isa *isa = NULL;
    if (!name) {
        isa = reduce_isa_best();
    } else {
        for (size_t i = 0; i < REDUCE_NUM_ISAS && !isa; i++)
            if (strcmp(reduce_isas[i]->name, name) == 0 && reduce_isa_runs(reduce_isas[i])) isa = reduce_isas[i];
        if (!isa) return NULL;
    }
    atomic_store_explicit(&reduce_isa_current, isa, memory_order_relaxed);
    return isa->name;
}

void reduce_apply3(void *dst, const void *a, const void *b, size_t count, chorus_datatype_t dt, chorus_redop_t op)
{
    if ((unsigned)dt >= chorus_num_datatypes || (unsigned)op >= chorus_num_ops) return;
    reduce_isa_get()->loop[dt][op == chorus_avg ? chorus_sum : op](dst, a, b, count);
}

void reduce_apply(void *dst, const void *src, size_t count, chorus_datatype_t dt, chorus_redop_t op)
{
    reduce_apply3(dst, dst, src, count, dt, op);
}

void reduce_finish(void *buf, size_t count, chorus_datatype_t dt, chorus_redop_t op, int nranks)
{
    if (op != chorus_avg || (unsigned)dt >= chorus_num_datatypes || nranks < 1) return;
    reduce_isa_get()->avg[dt](buf, count, nranks);
}

void half_to_float_array(float *dst, const uint16_t *src, size_t count, chorus_datatype_t dt)
{
    if (dt != chorus_float16 && dt != chorus_bfloat16) return;
    reduce_isa_get()->widen[dt == chorus_bfloat16](dst, src, count);
}

void float_to_half_array(uint16_t *dst, const float *src, size_t count, chorus_datatype_t dt)
{
    if (dt != chorus_float16 && dt != chorus_bfloat16) return;
    reduce_isa_get()->narrow[dt == chorus_bfloat16](dst, src, count);
}

