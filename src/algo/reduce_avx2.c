/* The reduction loops compiled for AVX2, plus float16 through the F16C conversion instructions and
 * bfloat16 by hand (reduce_impl.h has the semantics every table shares). */
#include "algo/reduce_impl.h"

#ifdef REDUCE_HAVE_X86
#include <cpuid.h>
#include <immintrin.h>

/* FMA is left out on purpose: contracting a multiply and an add would change results between tables. */
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

/* The avx2 test includes the OS saving the YMM registers; not every compiler knows "f16c" there, so that
 * bit comes from CPUID directly. */
static int reduce_runs_avx2(void)
{
    unsigned eax, ebx, ecx, edx;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}

const struct reduce_isa reduce_isa_avx2 = REDUCE_ISA_TABLE("avx2", reduce_runs_avx2, avx2, f16c, f16c, avx2);
#endif
