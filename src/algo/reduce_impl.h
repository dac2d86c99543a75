/* What the reduction kernels' files share (reduce.c and one file per instruction set): the scalar
 * half-precision conversions, the element-wise loops as macros that each file instantiates with its own
 * target attribute, and the table of loops an instruction set fills.
 *
 * Semantics every table shares bit for bit: integer sum and prod wrap modulo 2^bits; float max and min
 * return the first operand if it is NaN, else the second if it is NaN, else the larger / smaller (ties
 * return the second operand); float16 and bfloat16 widen to float32, combine, and round back to nearest
 * even, with NaN payloads kept and quieted exactly as the F16C instructions do. */
#ifndef CHORUS_REDUCE_IMPL_H
#define CHORUS_REDUCE_IMPL_H

#include <stdint.h>
#include <string.h>

#include "algo/reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#define REDUCE_HAVE_X86 1
#endif

_Static_assert(chorus_sum == 0 && chorus_prod == 1 && chorus_max == 2 && chorus_min == 3 && chorus_avg == 4,
               "the loop tables index the combining ops 0..3 and fold avg onto sum");
#define REDUCE_NUM_COMBINE_OPS 4

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

/* Each loop is instantiated once per instruction set; REDUCE_TARGET_<isa>, defined by the file that
 * instantiates it, is the function attribute that compiles it. */
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

struct reduce_isa {
    const char *name;
    int (*runs_here)(void); /* whether this CPU (and its OS) can run the table; NULL: any */
    reduce_loop_fn loop[chorus_num_datatypes][REDUCE_NUM_COMBINE_OPS];
    reduce_finish_fn avg[chorus_num_datatypes];
    reduce_widen_fn widen[2]; /* [0] float16, [1] bfloat16 */
    reduce_narrow_fn narrow[2];
};

/* A table: label names it, runs tells whether the CPU runs it; the loops are those with the suffix isa
 * (integers, float32, float64), fp16 (float16 combining), fp16cvt (float16 avg and conversions) and bf16
 * (everything bfloat16). */
#define REDUCE_ROW(sum, prod, max, min) \
    {[chorus_sum] = sum, [chorus_prod] = prod, [chorus_max] = max, [chorus_min] = min}
#define REDUCE_ISA_TABLE(label, runs, isa, fp16, fp16cvt, bf16)                                         \
    {                                                                                                   \
        .name = label, .runs_here = runs,                                                               \
        .loop = {                                                                                       \
            [chorus_int8] = REDUCE_ROW(u8_sum_##isa, u8_prod_##isa, i8_max_##isa, i8_min_##isa),        \
            [chorus_uint8] = REDUCE_ROW(u8_sum_##isa, u8_prod_##isa, u8_max_##isa, u8_min_##isa),       \
            [chorus_int32] = REDUCE_ROW(u32_sum_##isa, u32_prod_##isa, i32_max_##isa, i32_min_##isa),   \
            [chorus_uint32] = REDUCE_ROW(u32_sum_##isa, u32_prod_##isa, u32_max_##isa, u32_min_##isa),  \
            [chorus_int64] = REDUCE_ROW(u64_sum_##isa, u64_prod_##isa, i64_max_##isa, i64_min_##isa),   \
            [chorus_uint64] = REDUCE_ROW(u64_sum_##isa, u64_prod_##isa, u64_max_##isa, u64_min_##isa),  \
            [chorus_float16] = REDUCE_ROW(fp16_sum_##fp16, fp16_prod_##fp16, fp16_max_##fp16,           \
                                          fp16_min_##fp16),                                             \
            [chorus_bfloat16] = REDUCE_ROW(bf16_sum_##bf16, bf16_prod_##bf16, bf16_max_##bf16,          \
                                           bf16_min_##bf16),                                            \
            [chorus_float32] = REDUCE_ROW(f32_sum_##isa, f32_prod_##isa, f32_max_##isa, f32_min_##isa), \
            [chorus_float64] = REDUCE_ROW(f64_sum_##isa, f64_prod_##isa, f64_max_##isa, f64_min_##isa), \
        },                                                                                              \
        .avg = {                                                                                        \
            [chorus_int8] = i8_avg_##isa, [chorus_uint8] = u8_avg_##isa, [chorus_int32] = i32_avg_##isa, \
            [chorus_uint32] = u32_avg_##isa, [chorus_int64] = i64_avg_##isa,                            \
            [chorus_uint64] = u64_avg_##isa, [chorus_float16] = fp16_avg_##fp16cvt,                     \
            [chorus_bfloat16] = bf16_avg_##bf16, [chorus_float32] = f32_avg_##isa,                      \
            [chorus_float64] = f64_avg_##isa,                                                           \
        },                                                                                              \
        .widen = {fp16_widen_##fp16cvt, bf16_widen_##bf16},                                             \
        .narrow = {fp16_narrow_##fp16cvt, bf16_narrow_##bf16},                                          \
    }

extern const struct reduce_isa reduce_isa_portable;
#ifdef REDUCE_HAVE_X86
extern const struct reduce_isa reduce_isa_avx2, reduce_isa_avx512;
#ifdef CHORUS_HAVE_AVX512BF16
extern const struct reduce_isa reduce_isa_avx512_bf16;
#endif
#ifdef CHORUS_HAVE_AVX512FP16
extern const struct reduce_isa reduce_isa_avx512_fp16;
#endif
#endif

#endif
