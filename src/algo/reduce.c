/* Reduction kernels: one plain C loop per (datatype, op), written so that gcc -O3 vectorises it, compiled
 * twice (baseline x86-64 or whatever the target is, and AVX2), with float16 going through F16C and bfloat16
 * through hand-written AVX2 where the CPU has them. The ISA is chosen once, at the first call; the choice is a
 * table of loops, so each call makes one lookup and never branches per element on the datatype or the op.
 *
 * Semantics every path shares bit for bit: integer sum and prod wrap modulo 2^bits; float max and min return
 * the first operand if it is NaN, else the second if it is NaN, else the larger / smaller (ties return the
 * second operand); float16 and bfloat16 widen to float32, combine, and round back to nearest even, with NaN
 * payloads kept and quieted exactly as the F16C instructions do. */
#include "algo/reduce.h"

#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define REDUCE_HAVE_X86 1
#endif

_Static_assert(chorus_sum == 0 && chorus_prod == 1 && chorus_max == 2 && chorus_min == 3 && chorus_avg == 4,
               "the loop tables index the combining ops 0..3 and fold avg onto sum");
#define REDUCE_NUM_COMBINE_OPS 4

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

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline float fp16_widen(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000 | mant << 13 | (mant ? 0x400000 : 0));
    if (exp != 0) return f32_from_bits(sign | (exp + 112) << 23 | mant << 13);
    /* Subnormal or zero: mant * 2^-24 is a normal float32, so the product is exact. */
    return f32_from_bits(sign | f32_bits((float)mant * 0x1p-24f));
}

static inline uint16_t fp16_narrow(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
    x &= 0x7FFFFFFF;
    if (x > 0x7F800000) return sign | 0x7E00 | (uint16_t)(x >> 13 & 0x3FF);
    if (x >= 0x47800000) return sign | 0x7C00; /* 2^16 and above; [65520, 2^16) overflow by the carry below */
    if (x >= 0x38800000) {
        /* Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even; a carry out of
         * the mantissa correctly bumps the exponent. */
        return sign | (uint16_t)((x + 0x0FFF + (x >> 13 & 1) - 0x38000000) >> 13);
    }
    if (x < 0x33000000) return sign; /* below 2^-25, half the smallest subnormal */
    /* Subnormal result: the value in units of 2^-24 is the 24-bit significand shifted right by 14..24. */
    uint32_t shift = 126 - (x >> 23), mant = (x & 0x7FFFFF) | 0x800000;
    uint32_t q = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    return sign | (uint16_t)(q + (rest > half || (rest == half && (q & 1))));
}

static inline float bf16_widen(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    if ((x & 0x7FFFFFFF) > 0x7F800000) x |= 0x400000;
    return f32_from_bits(x);
}

/* The reduction loops widen with this: narrowing quiets every NaN anyway, and skipping the check here
 * halves the cost of a bfloat16 loop. */
static inline float bf16_widen_raw(uint16_t b)
{
    return f32_from_bits((uint32_t)b << 16);
}

static inline uint16_t bf16_narrow(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)(x >> 16 | 0x40);
    /* Round the 16 dropped bits to nearest even; overflow carries into infinity as it should. */
    return (uint16_t)((x + 0x7FFF + (x >> 16 & 1)) >> 16);
}

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

/* ---- Loops ---- */

typedef void (*reduce_loop_fn)(void *dst, const void *a, const void *b, size_t count);
typedef void (*reduce_finish_fn)(void *buf, size_t count, int nranks);
typedef void (*reduce_widen_fn)(float *dst, const uint16_t *src, size_t count);
typedef void (*reduce_narrow_fn)(uint16_t *dst, const float *src, size_t count);

/* Bitwise | rather than || keeps the loop body branch-free, so it vectorises; x != x is NaN. */
#define OP_SUM(x, y) ((x) + (y))
#define OP_PROD(x, y) ((x) * (y))
#define OP_MAX(x, y) ((((x) > (y)) | ((x) != (x))) ? (x) : (y))
#define OP_MIN(x, y) ((((x) < (y)) | ((x) != (x))) ? (x) : (y))

/* dst may be a or b exactly (element i only reads and writes index i), which this pragma tells the
 * vectoriser instead of restrict, whose contract such aliasing would break. */
#if defined(__clang__)
/* assume_safety also demands vectorisation; float16 without F16C cannot be, and may stay scalar quietly. */
#pragma clang diagnostic ignored "-Wpass-failed"
#define REDUCE_NO_LOOP_DEPS _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define REDUCE_NO_LOOP_DEPS _Pragma("GCC ivdep")
#else
#define REDUCE_NO_LOOP_DEPS
#endif

/* Each loop is instantiated once per ISA; REDUCE_TARGET_<isa> is the function attribute that compiles it. */
#define REDUCE_TARGET_portable

#define DEFINE_LOOP(isa, name, T, OP)                                                                   \
    REDUCE_TARGET_##isa static void name##_##isa(void *dst, const void *a_v, const void *b_v, size_t n) \
    {                                                                                                   \
        T *d = dst;                                                                                     \
        const T *a = a_v, *b = b_v;                                                                     \
        REDUCE_NO_LOOP_DEPS for (size_t i = 0; i < n; i++) d[i] = (T)OP(a[i], b[i]);                    \
    }

#define DEFINE_HALF_LOOP(isa, name, widen, narrow, OP)                                                  \
    REDUCE_TARGET_##isa static void name##_##isa(void *dst, const void *a_v, const void *b_v, size_t n) \
    {                                                                                                   \
        uint16_t *d = dst;                                                                              \
        const uint16_t *a = a_v, *b = b_v;                                                              \
        REDUCE_NO_LOOP_DEPS for (size_t i = 0; i < n; i++) {                                            \
            float x = widen(a[i]), y = widen(b[i]);                                                     \
            d[i] = narrow(OP(x, y));                                                                    \
        }                                                                                               \
    }

/* D is the type the divisor is taken in: wide enough for nranks, and signed for signed elements. */
#define DEFINE_FINISH(isa, name, T, D)                                            \
    REDUCE_TARGET_##isa static void name##_##isa(void *buf, size_t n, int nranks) \
    {                                                                             \
        T *b = buf;                                                               \
        D div = (D)nranks;                                                        \
        for (size_t i = 0; i < n; i++) b[i] = (T)(b[i] / div);                    \
    }

#define DEFINE_HALF_FINISH(isa, name, widen, narrow)                              \
    REDUCE_TARGET_##isa static void name##_##isa(void *buf, size_t n, int nranks) \
    {                                                                             \
        uint16_t *b = buf;                                                        \
        float div = (float)nranks;                                                \
        for (size_t i = 0; i < n; i++) b[i] = narrow(widen(b[i]) / div);          \
    }

#define DEFINE_WIDEN(isa, name, fmt)                                                                          \
    REDUCE_TARGET_##isa static void name##_##isa(float *restrict dst, const uint16_t *restrict src, size_t n) \
    {                                                                                                         \
        for (size_t i = 0; i < n; i++) dst[i] = fmt##_widen(src[i]);                                          \
    }

#define DEFINE_NARROW(isa, name, fmt)                                                                         \
    REDUCE_TARGET_##isa static void name##_##isa(uint16_t *restrict dst, const float *restrict src, size_t n) \
    {                                                                                                         \
        for (size_t i = 0; i < n; i++) dst[i] = fmt##_narrow(src[i]);                                         \
    }

/* Signed sum and prod share the unsigned loops: wrap-around gives the same bits, and unsigned arithmetic
 * makes it defined behaviour. uint8 operands promote to int, where 255 * 255 cannot overflow. */
#define REDUCE_LOOPS(X, isa)                                              \
    X(isa, u8_sum, uint8_t, OP_SUM) X(isa, u8_prod, uint8_t, OP_PROD)     \
    X(isa, u32_sum, uint32_t, OP_SUM) X(isa, u32_prod, uint32_t, OP_PROD) \
    X(isa, u64_sum, uint64_t, OP_SUM) X(isa, u64_prod, uint64_t, OP_PROD) \
    X(isa, i8_max, int8_t, OP_MAX) X(isa, i8_min, int8_t, OP_MIN)         \
    X(isa, u8_max, uint8_t, OP_MAX) X(isa, u8_min, uint8_t, OP_MIN)       \
    X(isa, i32_max, int32_t, OP_MAX) X(isa, i32_min, int32_t, OP_MIN)     \
    X(isa, u32_max, uint32_t, OP_MAX) X(isa, u32_min, uint32_t, OP_MIN)   \
    X(isa, i64_max, int64_t, OP_MAX) X(isa, i64_min, int64_t, OP_MIN)     \
    X(isa, u64_max, uint64_t, OP_MAX) X(isa, u64_min, uint64_t, OP_MIN)   \
    X(isa, f32_sum, float, OP_SUM) X(isa, f32_prod, float, OP_PROD)       \
    X(isa, f32_max, float, OP_MAX) X(isa, f32_min, float, OP_MIN)         \
    X(isa, f64_sum, double, OP_SUM) X(isa, f64_prod, double, OP_PROD)     \
    X(isa, f64_max, double, OP_MAX) X(isa, f64_min, double, OP_MIN)

#define REDUCE_FINISHES(X, isa)                                           \
    X(isa, i8_avg, int8_t, int) X(isa, u8_avg, uint8_t, int)              \
    X(isa, i32_avg, int32_t, int32_t) X(isa, u32_avg, uint32_t, uint32_t) \
    X(isa, i64_avg, int64_t, int64_t) X(isa, u64_avg, uint64_t, uint64_t) \
    X(isa, f32_avg, float, float) X(isa, f64_avg, double, double)

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

struct reduce_isa {
    const char *name;
    reduce_loop_fn loop[chorus_num_datatypes][REDUCE_NUM_COMBINE_OPS];
    reduce_finish_fn avg[chorus_num_datatypes];
    reduce_widen_fn widen[2]; /* [0] float16, [1] bfloat16 */
    reduce_narrow_fn narrow[2];
};

#define REDUCE_ROW(sum, prod, max, min) \
    {[chorus_sum] = sum, [chorus_prod] = prod, [chorus_max] = max, [chorus_min] = min}
#define REDUCE_ISA_TABLE(isa, fp16)                                                                      \
    {                                                                                                    \
        .name = #isa,                                                                                    \
        .loop = {                                                                                        \
            [chorus_int8] = REDUCE_ROW(u8_sum_##isa, u8_prod_##isa, i8_max_##isa, i8_min_##isa),         \
            [chorus_uint8] = REDUCE_ROW(u8_sum_##isa, u8_prod_##isa, u8_max_##isa, u8_min_##isa),        \
            [chorus_int32] = REDUCE_ROW(u32_sum_##isa, u32_prod_##isa, i32_max_##isa, i32_min_##isa),    \
            [chorus_uint32] = REDUCE_ROW(u32_sum_##isa, u32_prod_##isa, u32_max_##isa, u32_min_##isa),   \
            [chorus_int64] = REDUCE_ROW(u64_sum_##isa, u64_prod_##isa, i64_max_##isa, i64_min_##isa),    \
            [chorus_uint64] = REDUCE_ROW(u64_sum_##isa, u64_prod_##isa, u64_max_##isa, u64_min_##isa),   \
            [chorus_float16] = REDUCE_ROW(fp16_sum_##fp16, fp16_prod_##fp16, fp16_max_##fp16,            \
                                          fp16_min_##fp16),                                              \
            [chorus_bfloat16] = REDUCE_ROW(bf16_sum_##isa, bf16_prod_##isa, bf16_max_##isa,              \
                                           bf16_min_##isa),                                              \
            [chorus_float32] = REDUCE_ROW(f32_sum_##isa, f32_prod_##isa, f32_max_##isa, f32_min_##isa),  \
            [chorus_float64] = REDUCE_ROW(f64_sum_##isa, f64_prod_##isa, f64_max_##isa, f64_min_##isa),  \
        },                                                                                               \
        .avg = {                                                                                         \
            [chorus_int8] = i8_avg_##isa, [chorus_uint8] = u8_avg_##isa, [chorus_int32] = i32_avg_##isa, \
            [chorus_uint32] = u32_avg_##isa, [chorus_int64] = i64_avg_##isa,                             \
            [chorus_uint64] = u64_avg_##isa, [chorus_float16] = fp16_avg_##fp16,                         \
            [chorus_bfloat16] = bf16_avg_##isa, [chorus_float32] = f32_avg_##isa,                        \
            [chorus_float64] = f64_avg_##isa,                                                            \
        },                                                                                               \
        .widen = {fp16_widen_##fp16, bf16_widen_##isa},                                                  \
        .narrow = {fp16_narrow_##fp16, bf16_narrow_##isa},                                               \
    }

static const struct reduce_isa reduce_isa_portable = REDUCE_ISA_TABLE(portable, portable);

#ifdef REDUCE_HAVE_X86
/* The same loops compiled for AVX2, plus float16 through the F16C conversion instructions. FMA is left out
 * on purpose: contracting a multiply and an add would change results between the two tables. */
#define REDUCE_TARGET_avx2 __attribute__((target("avx2,f16c")))

REDUCE_LOOPS(DEFINE_LOOP, avx2)
REDUCE_FINISHES(DEFINE_FINISH, avx2)

REDUCE_TARGET_avx2 static inline __m256 f16c_load(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

REDUCE_TARGET_avx2 static inline void f16c_store(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

REDUCE_TARGET_avx2 static inline __m256 avx2_sum(__m256 x, __m256 y)
{
    return _mm256_add_ps(x, y);
}

REDUCE_TARGET_avx2 static inline __m256 avx2_prod(__m256 x, __m256 y)
{
    return _mm256_mul_ps(x, y);
}

/* maxps/minps return the second operand when either is NaN, which would drop a NaN in x: blend instead, on
 * these masks of the lanes where x is the answer. */
REDUCE_TARGET_avx2 static inline __m256 avx2_max_takes_x(__m256 x, __m256 y)
{
    return _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_GT_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

REDUCE_TARGET_avx2 static inline __m256 avx2_min_takes_x(__m256 x, __m256 y)
{
    return _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_LT_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

REDUCE_TARGET_avx2 static inline __m256 avx2_max(__m256 x, __m256 y)
{
    return _mm256_blendv_ps(y, x, avx2_max_takes_x(x, y));
}

REDUCE_TARGET_avx2 static inline __m256 avx2_min(__m256 x, __m256 y)
{
    return _mm256_blendv_ps(y, x, avx2_min_takes_x(x, y));
}

/* The tail (count % 8 elements) goes through the same vector code via a padded copy, so no element is ever
 * computed by a different instruction sequence. */
#define DEFINE_F16C_LOOP(name, VOP)                                                                   \
    REDUCE_TARGET_avx2 static void name##_f16c(void *dst, const void *a_v, const void *b_v, size_t n) \
    {                                                                                                 \
        uint16_t *d = dst;                                                                            \
        const uint16_t *a = a_v, *b = b_v;                                                            \
        size_t i = 0;                                                                                 \
        for (; i + 8 <= n; i += 8) f16c_store(d + i, VOP(f16c_load(a + i), f16c_load(b + i)));        \
        if (i < n) {                                                                                  \
            uint16_t ta[8] = {0}, tb[8] = {0};                                                        \
            memcpy(ta, a + i, (n - i) * sizeof(*a));                                                  \
            memcpy(tb, b + i, (n - i) * sizeof(*b));                                                  \
            f16c_store(ta, VOP(f16c_load(ta), f16c_load(tb)));                                        \
            memcpy(d + i, ta, (n - i) * sizeof(*d));                                                  \
        }                                                                                             \
    }

DEFINE_F16C_LOOP(fp16_sum, avx2_sum)
DEFINE_F16C_LOOP(fp16_prod, avx2_prod)
DEFINE_F16C_LOOP(fp16_max, avx2_max)
DEFINE_F16C_LOOP(fp16_min, avx2_min)

REDUCE_TARGET_avx2 static void fp16_avg_f16c(void *buf, size_t n, int nranks)
{
    uint16_t *b = buf;
    __m256 div = _mm256_set1_ps((float)nranks);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) f16c_store(b + i, _mm256_div_ps(f16c_load(b + i), div));
    if (i < n) {
        uint16_t t[8] = {0};
        memcpy(t, b + i, (n - i) * sizeof(*b));
        f16c_store(t, _mm256_div_ps(f16c_load(t), div));
        memcpy(b + i, t, (n - i) * sizeof(*b));
    }
}

REDUCE_TARGET_avx2 static void fp16_widen_f16c(float *restrict dst, const uint16_t *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, f16c_load(src + i));
    if (i < n) {
        uint16_t t[8] = {0};
        float out[8];
        memcpy(t, src + i, (n - i) * sizeof(*src));
        _mm256_storeu_ps(out, f16c_load(t));
        memcpy(dst + i, out, (n - i) * sizeof(*dst));
    }
}

REDUCE_TARGET_avx2 static void fp16_narrow_f16c(uint16_t *restrict dst, const float *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) f16c_store(dst + i, _mm256_loadu_ps(src + i));
    if (i < n) {
        float t[8] = {0};
        uint16_t out[8];
        memcpy(t, src + i, (n - i) * sizeof(*src));
        f16c_store(out, _mm256_loadu_ps(t));
        memcpy(dst + i, out, (n - i) * sizeof(*dst));
    }
}

/* bfloat16 by hand as well: what gcc makes of the portable loop (bf16_narrow's NaN branch, 16 <-> 32-bit
 * moves) runs two to three times slower. A bfloat16 is the top half of a float32, so a block of 16 widens to
 * two float32 vectors in one instruction each: the even elements shifted up, the odd ones masked in place.
 * Element-wise ops do not mind that order, and narrowing gathers the halves back into element order. */
REDUCE_TARGET_avx2 static inline void bf16_widen16(__m256i v, __m256 *even_p, __m256 *odd_p)
{
    *even_p = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd_p = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000)));
}

/* The top and the bottom halves of the 16 float32s, each in element order. */
REDUCE_TARGET_avx2 static inline __m256i bf16_high16(__m256 even, __m256 odd)
{
    return _mm256_blend_epi16(_mm256_srli_epi32(_mm256_castps_si256(even), 16), _mm256_castps_si256(odd), 0xAA);
}

REDUCE_TARGET_avx2 static inline __m256i bf16_low16(__m256 even, __m256 odd)
{
    return _mm256_blend_epi16(_mm256_castps_si256(even), _mm256_slli_epi32(_mm256_castps_si256(odd), 16), 0xAA);
}

/* Round to nearest even, 16 lanes at once: the top half goes up by one when the dropped half plus the top
 * half's lowest bit exceeds 0x8000, tested as a signed comparison after flipping the dropped half's sign bit
 * (the add saturates, so 0xFFFF + 1 stays above). A NaN with a zero dropped half passes unchanged. */
REDUCE_TARGET_avx2 static inline __m256i bf16_round16(__m256i hi, __m256i lo)
{
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi16(1));
    __m256i above = _mm256_adds_epi16(_mm256_xor_si256(lo, _mm256_set1_epi16((short)0x8000)), lsb);
    return _mm256_sub_epi16(hi, _mm256_cmpgt_epi16(above, _mm256_setzero_si256()));
}

/* Set the quiet bit of every NaN among 16 bfloat16s (a top half above the infinity's, sign aside). */
REDUCE_TARGET_avx2 static inline __m256i bf16_quiet16(__m256i v)
{
    __m256i nan = _mm256_cmpgt_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7F80));
    return _mm256_or_si256(v, _mm256_and_si256(nan, _mm256_set1_epi16(0x40)));
}

/* bf16_narrow of sums, products or quotients of widened bfloat16s needs no NaN test: a NaN that x86 arithmetic
 * returns is an operand's, quieted, or the default NaN (0xFFC00000), so its bottom half is zero and rounding
 * passes it through already quiet, as bf16_narrow would. */
REDUCE_TARGET_avx2 static inline void bf16_store16(uint16_t *p, __m256 even, __m256 odd)
{
    _mm256_storeu_si256((__m256i *)p, bf16_round16(bf16_high16(even, odd), bf16_low16(even, odd)));
}

/* Each kernel is a function name##_x16 for one block of 16 and a loop around it (DEFINE_BF16_AVX2_LOOP). */
#define DEFINE_BF16_AVX2_ARITH(name, VOP)                                                              \
    REDUCE_TARGET_avx2 static inline void name##_x16(uint16_t *d, const uint16_t *a, const uint16_t *b) \
    {                                                                                                  \
        __m256 a_even, a_odd, b_even, b_odd;                                                           \
        bf16_widen16(_mm256_loadu_si256((const __m256i *)a), &a_even, &a_odd);                         \
        bf16_widen16(_mm256_loadu_si256((const __m256i *)b), &b_even, &b_odd);                         \
        bf16_store16(d, VOP(a_even, b_even), VOP(a_odd, b_odd));                                       \
    }

/* max and min answer with one operand per element, so they choose among the bfloat16s themselves (each 32-bit
 * lane of a mask covers an even element's 16 bits, then an odd one's) and need no rounding, only quieting. */
#define DEFINE_BF16_AVX2_CHOICE(name, TAKES_X)                                                                  \
    REDUCE_TARGET_avx2 static inline void name##_x16(uint16_t *d, const uint16_t *a, const uint16_t *b)        \
    {                                                                                                         \
        __m256i va = _mm256_loadu_si256((const __m256i *)a), vb = _mm256_loadu_si256((const __m256i *)b);     \
        __m256 a_even, a_odd, b_even, b_odd;                                                                  \
        bf16_widen16(va, &a_even, &a_odd);                                                                    \
        bf16_widen16(vb, &b_even, &b_odd);                                                                    \
        __m256i take_a = _mm256_blend_epi16(_mm256_castps_si256(TAKES_X(a_even, b_even)),                     \
                                            _mm256_castps_si256(TAKES_X(a_odd, b_odd)), 0xAA);                \
        _mm256_storeu_si256((__m256i *)d, bf16_quiet16(_mm256_blendv_epi8(vb, va, take_a)));                  \
    }

/* As for float16, the tail goes through the same block function via a padded copy. */
#define DEFINE_BF16_AVX2_LOOP(name)                                                                   \
    REDUCE_TARGET_avx2 static void name##_avx2(void *dst, const void *a_v, const void *b_v, size_t n) \
    {                                                                                                 \
        uint16_t *d = dst;                                                                            \
        const uint16_t *a = a_v, *b = b_v;                                                            \
        size_t i = 0;                                                                                 \
        for (; i + 16 <= n; i += 16) name##_x16(d + i, a + i, b + i);                                 \
        if (i < n) {                                                                                  \
            uint16_t ta[16] = {0}, tb[16] = {0};                                                      \
            memcpy(ta, a + i, (n - i) * sizeof(*a));                                                  \
            memcpy(tb, b + i, (n - i) * sizeof(*b));                                                  \
            name##_x16(ta, ta, tb);                                                                   \
            memcpy(d + i, ta, (n - i) * sizeof(*d));                                                  \
        }                                                                                             \
    }

DEFINE_BF16_AVX2_ARITH(bf16_sum, avx2_sum)
DEFINE_BF16_AVX2_ARITH(bf16_prod, avx2_prod)
DEFINE_BF16_AVX2_CHOICE(bf16_max, avx2_max_takes_x)
DEFINE_BF16_AVX2_CHOICE(bf16_min, avx2_min_takes_x)
DEFINE_BF16_AVX2_LOOP(bf16_sum)
DEFINE_BF16_AVX2_LOOP(bf16_prod)
DEFINE_BF16_AVX2_LOOP(bf16_max)
DEFINE_BF16_AVX2_LOOP(bf16_min)

REDUCE_TARGET_avx2 static inline void bf16_avg_x16(uint16_t *p, __m256 div)
{
    __m256 even, odd;
    bf16_widen16(_mm256_loadu_si256((const __m256i *)p), &even, &odd);
    bf16_store16(p, _mm256_div_ps(even, div), _mm256_div_ps(odd, div));
}

REDUCE_TARGET_avx2 static void bf16_avg_avx2(void *buf, size_t n, int nranks)
{
    uint16_t *b = buf;
    __m256 div = _mm256_set1_ps((float)nranks);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) bf16_avg_x16(b + i, div);
    if (i < n) {
        uint16_t t[16] = {0};
        memcpy(t, b + i, (n - i) * sizeof(*b));
        bf16_avg_x16(t, div);
        memcpy(b + i, t, (n - i) * sizeof(*b));
    }
}

/* The staging conversions: widen zero-extends 8 elements at a time, in order, quieting NaNs as bf16_widen
 * does. Narrow splits 16 floats into the even/odd form with shufps, which instead yields elements 0-3 and
 * 8-11 in the low lane and 4-7 and 12-15 in the high one; a cross-lane permute of the result restores the
 * order. */
REDUCE_TARGET_avx2 static inline __m256 bf16_widen8(const uint16_t *p)
{
    __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(_mm256_castsi256_ps(x), _mm256_castsi256_ps(x), _CMP_UNORD_Q));
    return _mm256_castsi256_ps(_mm256_or_si256(x, _mm256_and_si256(nan, _mm256_set1_epi32(0x400000))));
}

REDUCE_TARGET_avx2 static inline void bf16_narrow_ordered16(uint16_t *p, const float *src)
{
    __m256 x = _mm256_loadu_ps(src), y = _mm256_loadu_ps(src + 8);
    __m256 even = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0));
    __m256 odd = _mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1));
    /* Any float32 may arrive here, signalling NaNs whose payload lies only in the low half too: ask the FPU. */
    __m256i nan = _mm256_blend_epi16(_mm256_castps_si256(_mm256_cmp_ps(even, even, _CMP_UNORD_Q)),
                                     _mm256_castps_si256(_mm256_cmp_ps(odd, odd, _CMP_UNORD_Q)), 0xAA);
    __m256i hi = bf16_high16(even, odd);
    __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi16(0x40));
    __m256i v = _mm256_blendv_epi8(bf16_round16(hi, bf16_low16(even, odd)), quiet, nan);
    _mm256_storeu_si256((__m256i *)p, _mm256_permute4x64_epi64(v, _MM_SHUFFLE(3, 1, 2, 0)));
}

REDUCE_TARGET_avx2 static void bf16_widen_avx2(float *restrict dst, const uint16_t *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, bf16_widen8(src + i));
    if (i < n) {
        uint16_t t[8] = {0};
        float out[8];
        memcpy(t, src + i, (n - i) * sizeof(*src));
        _mm256_storeu_ps(out, bf16_widen8(t));
        memcpy(dst + i, out, (n - i) * sizeof(*dst));
    }
}

REDUCE_TARGET_avx2 static void bf16_narrow_avx2(uint16_t *restrict dst, const float *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) bf16_narrow_ordered16(dst + i, src + i);
    if (i < n) {
        float t[16] = {0};
        uint16_t out[16];
        memcpy(t, src + i, (n - i) * sizeof(*src));
        bf16_narrow_ordered16(out, t);
        memcpy(dst + i, out, (n - i) * sizeof(*dst));
    }
}

static const struct reduce_isa reduce_isa_avx2 = REDUCE_ISA_TABLE(avx2, f16c);
#endif

/* ---- Dispatch ---- */

static _Atomic(const struct reduce_isa *) reduce_isa_current;

static const struct reduce_isa *reduce_isa_best(void)
{
#ifdef REDUCE_HAVE_X86
    /* The avx2 test includes the OS saving the YMM registers; not every compiler knows "f16c" there, so
     * that bit comes from CPUID directly. */
    unsigned eax, ebx, ecx, edx;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C))
        return &reduce_isa_avx2;
#endif
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

const char *reduce_set_isa(int portable_only)
{
    const struct reduce_isa *isa = portable_only ? &reduce_isa_portable : reduce_isa_best();
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
