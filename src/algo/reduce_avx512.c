/* The reduction loops compiled for AVX-512 (F, BW, DQ and VL, which every AVX-512 CPU since Skylake-SP
 * has), and float16 and bfloat16 by hand in blocks of 16 or 32 elements, the tail through the same
 * instructions under a mask (reduce_impl.h has the semantics every table shares). Three tables:
 *
 * - avx512: float16 through AVX-512F's conversions (vcvtph2ps, vcvtps2ph), bfloat16 rounded back with
 *   integer arithmetic.
 * - avx512_bf16 (AVX512_BF16: Cooper Lake, Zen 4, Sapphire Rapids): bfloat16 narrowed by vcvtne2ps2bf16.
 *   That instruction flushes subnormal inputs to zero, so a block that holds a subnormal float32 takes
 *   the integer rounding instead (a branch that sums of normal numbers rarely take).
 * - avx512_fp16 (AVX512_FP16 and AVX512_BF16: Sapphire Rapids): float16 sum, prod, max and min in float16
 *   arithmetic, 32 to a vector. One float16 sum or product rounded once equals the same computed in float32
 *   and rounded back: float32's 24 bits are at least 2 * 11 + 2, where rounding twice is known to be
 *   harmless for +, -, * and /. avg stays in float32, since float16 holds nranks exactly only up to 2048.
 *
 * Measured with chorus-kernels on 256 KiB operands (in cache) on a Sapphire Rapids virtual machine, against
 * the AVX2 table: float16 sum 128 GB/s of traffic (AVX2 100), max 123 (55); bfloat16 sum 87-91 (73),
 * narrowing 119 with vcvtne2ps2bf16 and 70 without (56). From memory (64 MiB) every table runs at memcpy's
 * rate.
 */
#include "algo/reduce_impl.h"

#ifdef REDUCE_HAVE_X86
#include <cpuid.h>
#include <immintrin.h>

/* FMA is left out as in AVX2, although no loop multiplies and adds in one expression. */
#define REDUCE_AVX512_BASE "avx512f,avx512bw,avx512dq,avx512vl"
#define REDUCE_TARGET_avx512 __attribute__((target(REDUCE_AVX512_BASE)))
#define REDUCE_TARGET_avx512bf16 __attribute__((target(REDUCE_AVX512_BASE ",avx512bf16")))
#define REDUCE_TARGET_avx512fp16 __attribute__((target(REDUCE_AVX512_BASE ",avx512bf16,avx512fp16")))

REDUCE_LOOPS(DEFINE_LOOP, avx512)
REDUCE_FINISHES(DEFINE_FINISH, avx512)

/* A loop over blocks of W elements, which runs BLOCK(i, m) on the block at element i with the mask m of its
 * lanes that hold elements: all ones on every whole block (the compiler folds the masks away there), the
 * tail's lanes once at the end. */
#define AVX512_BLOCKS(n, W, MASK_T, BLOCK)                                                  \
    do {                                                                                    \
        size_t i_ = 0;                                                                      \
        for (; i_ + (W) <= (n); i_ += (W)) BLOCK(i_, (MASK_T) ~(MASK_T)0);                  \
        if (i_ < (n)) BLOCK(i_, (MASK_T)(((MASK_T)1 << ((n) - i_)) - 1));                   \
    } while (0)

/* ---- float32 arithmetic on 16 lanes, as the AVX2 table's (reduce_avx2.c) ---- */

REDUCE_TARGET_avx512 static inline __m512 v16_sum(__m512 x, __m512 y)
{
    return _mm512_add_ps(x, y);
}

REDUCE_TARGET_avx512 static inline __m512 v16_prod(__m512 x, __m512 y)
{
    return _mm512_mul_ps(x, y);
}

/* The lanes where x is the answer: larger (smaller), or NaN, which maxps/minps would drop. */
REDUCE_TARGET_avx512 static inline __mmask16 v16_max_takes_x(__m512 x, __m512 y)
{
    return _mm512_cmp_ps_mask(x, y, _CMP_GT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
}

REDUCE_TARGET_avx512 static inline __mmask16 v16_min_takes_x(__m512 x, __m512 y)
{
    return _mm512_cmp_ps_mask(x, y, _CMP_LT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
}

REDUCE_TARGET_avx512 static inline __m512 v16_max(__m512 x, __m512 y)
{
    return _mm512_mask_blend_ps(v16_max_takes_x(x, y), y, x);
}

REDUCE_TARGET_avx512 static inline __m512 v16_min(__m512 x, __m512 y)
{
    return _mm512_mask_blend_ps(v16_min_takes_x(x, y), y, x);
}

/* ---- float16 through AVX-512F's conversions, 16 to a block ---- */

REDUCE_TARGET_avx512 static inline __m512 f16x16_load(const uint16_t *p, __mmask16 m)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

REDUCE_TARGET_avx512 static inline void f16x16_store(uint16_t *p, __mmask16 m, __m512 v)
{
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* A loop of blocks over 16-bit elements: BLOCK(i, m) combines a + i and b + i into d + i. */
#define DEFINE_BLOCK_LOOP(isa, name, W, MASK_T, BLOCK)                                                  \
    REDUCE_TARGET_##isa static void name##_##isa(void *dst, const void *a_v, const void *b_v, size_t n) \
    {                                                                                                   \
        uint16_t *d = dst;                                                                              \
        const uint16_t *a = a_v, *b = b_v;                                                              \
        AVX512_BLOCKS(n, W, MASK_T, BLOCK);                                                             \
    }

#define F16X16_BLOCK(VOP, i, m) f16x16_store(d + i, m, VOP(f16x16_load(a + i, m), f16x16_load(b + i, m)))
#define fp16_sum_BLOCK(i, m) F16X16_BLOCK(v16_sum, i, m)
#define fp16_prod_BLOCK(i, m) F16X16_BLOCK(v16_prod, i, m)
#define fp16_max_BLOCK(i, m) F16X16_BLOCK(v16_max, i, m)
#define fp16_min_BLOCK(i, m) F16X16_BLOCK(v16_min, i, m)
DEFINE_BLOCK_LOOP(avx512, fp16_sum, 16, __mmask16, fp16_sum_BLOCK)
DEFINE_BLOCK_LOOP(avx512, fp16_prod, 16, __mmask16, fp16_prod_BLOCK)
DEFINE_BLOCK_LOOP(avx512, fp16_max, 16, __mmask16, fp16_max_BLOCK)
DEFINE_BLOCK_LOOP(avx512, fp16_min, 16, __mmask16, fp16_min_BLOCK)

REDUCE_TARGET_avx512 static void fp16_avg_avx512(void *buf, size_t n, int nranks)
{
    uint16_t *b = buf;
    __m512 div = _mm512_set1_ps((float)nranks);
#define AVG_BLOCK(i, m) f16x16_store(b + i, m, _mm512_div_ps(f16x16_load(b + i, m), div))
    AVX512_BLOCKS(n, 16, __mmask16, AVG_BLOCK);
#undef AVG_BLOCK
}

REDUCE_TARGET_avx512 static void fp16_widen_avx512(float *restrict dst, const uint16_t *restrict src, size_t n)
{
#define WIDEN_BLOCK(i, m) _mm512_mask_storeu_ps(dst + i, m, f16x16_load(src + i, m))
    AVX512_BLOCKS(n, 16, __mmask16, WIDEN_BLOCK);
#undef WIDEN_BLOCK
}

REDUCE_TARGET_avx512 static void fp16_narrow_avx512(uint16_t *restrict dst, const float *restrict src, size_t n)
{
#define NARROW_BLOCK(i, m) f16x16_store(dst + i, m, _mm512_maskz_loadu_ps(m, src + i))
    AVX512_BLOCKS(n, 16, __mmask16, NARROW_BLOCK);
#undef NARROW_BLOCK
}

/* ---- bfloat16, 32 to a block ---- */

/* A bfloat16 is the top half of a float32, so a block widens to two vectors of float32 in one instruction
 * each: the even elements shifted up, the odd ones masked in place. Element-wise ops do not mind that
 * order; narrowing gathers the halves back into element order. */
#define BF16_ODD_LANES ((__mmask32)0xAAAAAAAAu)

REDUCE_TARGET_avx512 static inline void bf16x32_widen(__m512i v, __m512 *even_p, __m512 *odd_p)
{
    *even_p = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd_p = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000)));
}

/* Round to nearest even, 32 lanes at once, as the AVX2 table's bf16_round16: the top half goes up by one
 * when the dropped half plus the top half's lowest bit exceeds 0x8000 (subnormals included; a carry bumps
 * the exponent, or overflows into infinity). Only for results of arithmetic on widened bfloat16s: a NaN
 * that x86 arithmetic returns is an operand's, quieted, or the default NaN, so its dropped half is zero and
 * it passes unchanged. */
REDUCE_TARGET_avx512 static inline __m512i bf16x32_round_soft(__m512 even, __m512 odd)
{
    __m512i e = _mm512_castps_si512(even), o = _mm512_castps_si512(odd);
    __m512i hi = _mm512_mask_blend_epi16(BF16_ODD_LANES, _mm512_srli_epi32(e, 16), o);
    __m512i lo = _mm512_mask_blend_epi16(BF16_ODD_LANES, e, _mm512_slli_epi32(o, 16));
    __m512i above = _mm512_adds_epi16(_mm512_xor_si512(lo, _mm512_set1_epi16((short)0x8000)),
                                      _mm512_and_si512(hi, _mm512_set1_epi16(1)));
    return _mm512_mask_add_epi16(hi, _mm512_cmpgt_epi16_mask(above, _mm512_setzero_si512()), hi,
                                 _mm512_set1_epi16(1));
}

/* Any 16 float32s in order, NaNs (signalling ones too) among them: those keep their top half and are
 * quieted, as bf16_narrow does. */
REDUCE_TARGET_avx512 static inline __m256i bf16x16_narrow_soft(__m512 x)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i bias = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)),
                                    _mm512_set1_epi32(0x7FFF));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), rounded, quiet));
}

REDUCE_TARGET_avx512 static inline __m512i bf16x32_narrow_soft(__m512 x, __m512 y)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(bf16x16_narrow_soft(x)), bf16x16_narrow_soft(y), 1);
}

#define bf16x32_round_avx512 bf16x32_round_soft
#define bf16x32_narrow_avx512 bf16x32_narrow_soft

#ifdef CHORUS_HAVE_AVX512BF16
/* vcvtne2ps2bf16 rounds to nearest even and quiets NaNs as bf16_narrow does, but flushes subnormal inputs
 * to zero: a block that holds a subnormal float32 (rare: sums of normal numbers seldom are) takes the
 * integer rounding instead. */
#define BF16_DENORMAL 0x20 /* vfpclassps category */

/* The instruction puts its second operand's 16 results below the first's: the even elements, then the odd
 * ones. This permutation interleaves them again. */
static const uint16_t bf16_interleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                             8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

REDUCE_TARGET_avx512bf16 static inline __m512i bf16x32_round_hw(__m512 even, __m512 odd)
{
    if (_mm512_fpclass_ps_mask(even, BF16_DENORMAL) | _mm512_fpclass_ps_mask(odd, BF16_DENORMAL))
        return bf16x32_round_soft(even, odd);
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(bf16_interleave), (__m512i)_mm512_cvtne2ps_pbh(odd, even));
}

REDUCE_TARGET_avx512bf16 static inline __m512i bf16x32_narrow_hw(__m512 x, __m512 y)
{
    if (_mm512_fpclass_ps_mask(x, BF16_DENORMAL) | _mm512_fpclass_ps_mask(y, BF16_DENORMAL))
        return bf16x32_narrow_soft(x, y);
    return (__m512i)_mm512_cvtne2ps_pbh(y, x);
}

#define bf16x32_round_avx512bf16 bf16x32_round_hw
#define bf16x32_narrow_avx512bf16 bf16x32_narrow_hw
#endif

/* max and min answer with one operand per element, so they choose among the bfloat16s themselves and need
 * no rounding, only quieting; widened in order, 16 to a block, the same in every bfloat16 family. */
REDUCE_TARGET_avx512 static inline __m512 bf16x16_widen(__m256i v)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

REDUCE_TARGET_avx512 static inline __m256i bf16x16_quiet(__m256i v)
{
    __mmask16 nan = _mm256_cmpgt_epi16_mask(_mm256_and_si256(v, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7F80));
    return _mm256_mask_blend_epi16(nan, v, _mm256_or_si256(v, _mm256_set1_epi16(0x40)));
}

#define BF16_CHOICE_BLOCK(TAKES_X, i, m)                                                                 \
    do {                                                                                                 \
        __m256i va = _mm256_maskz_loadu_epi16(m, a + i), vb = _mm256_maskz_loadu_epi16(m, b + i);        \
        __mmask16 take_a = TAKES_X(bf16x16_widen(va), bf16x16_widen(vb));                                \
        _mm256_mask_storeu_epi16(d + i, m, bf16x16_quiet(_mm256_mask_blend_epi16(take_a, vb, va)));     \
    } while (0)
#define bf16_max_BLOCK(i, m) BF16_CHOICE_BLOCK(v16_max_takes_x, i, m)
#define bf16_min_BLOCK(i, m) BF16_CHOICE_BLOCK(v16_min_takes_x, i, m)

#define BF16_ARITH_BLOCK(VOP, ROUND, i, m)                                                               \
    do {                                                                                                 \
        __m512 a_even, a_odd, b_even, b_odd;                                                             \
        bf16x32_widen(_mm512_maskz_loadu_epi16(m, a + i), &a_even, &a_odd);                              \
        bf16x32_widen(_mm512_maskz_loadu_epi16(m, b + i), &b_even, &b_odd);                              \
        _mm512_mask_storeu_epi16(d + i, m, ROUND(VOP(a_even, b_even), VOP(a_odd, b_odd)));               \
    } while (0)

/* One family of bfloat16 loops per way of narrowing: bf16x32_round_<isa> for results of arithmetic,
 * bf16x32_narrow_<isa> for any float32s in order. */
#define DEFINE_BF16_FAMILY(isa)                                                                           \
    DEFINE_BLOCK_LOOP(isa, bf16_sum, 32, __mmask32, bf16_sum_BLOCK_##isa)                                  \
    DEFINE_BLOCK_LOOP(isa, bf16_prod, 32, __mmask32, bf16_prod_BLOCK_##isa)                                \
    DEFINE_BLOCK_LOOP(isa, bf16_max, 16, __mmask16, bf16_max_BLOCK)                                        \
    DEFINE_BLOCK_LOOP(isa, bf16_min, 16, __mmask16, bf16_min_BLOCK)                                        \
    REDUCE_TARGET_##isa static void bf16_avg_##isa(void *buf, size_t n, int nranks)                       \
    {                                                                                                     \
        uint16_t *d = buf;                                                                                \
        __m512 div = _mm512_set1_ps((float)nranks);                                                       \
        AVX512_BLOCKS(n, 32, __mmask32, bf16_avg_BLOCK_##isa);                                            \
    }                                                                                                     \
    /* The staging conversions: widening quiets NaNs as bf16_widen does. */                              \
    REDUCE_TARGET_##isa static void bf16_widen_##isa(float *restrict dst, const uint16_t *restrict src,   \
                                                     size_t n)                                            \
    {                                                                                                     \
        AVX512_BLOCKS(n, 16, __mmask16, bf16_widen_BLOCK);                                                \
    }                                                                                                     \
    REDUCE_TARGET_##isa static void bf16_narrow_##isa(uint16_t *restrict dst, const float *restrict src,  \
                                                      size_t n)                                           \
    {                                                                                                     \
        AVX512_BLOCKS(n, 32, __mmask32, bf16_narrow_BLOCK_##isa);                                         \
    }

#define bf16_avg_BLOCK(ROUND, i, m)                                                                       \
    do {                                                                                                  \
        __m512 even, odd;                                                                                 \
        bf16x32_widen(_mm512_maskz_loadu_epi16(m, d + i), &even, &odd);                                   \
        _mm512_mask_storeu_epi16(d + i, m, ROUND(_mm512_div_ps(even, div), _mm512_div_ps(odd, div)));     \
    } while (0)
#define bf16_widen_BLOCK(i, m)                                                                            \
    do {                                                                                                  \
        __m512 x = bf16x16_widen(_mm256_maskz_loadu_epi16(m, src + i));                                   \
        __m512i q = _mm512_mask_or_epi32(_mm512_castps_si512(x), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q),  \
                                         _mm512_castps_si512(x), _mm512_set1_epi32(0x400000));            \
        _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(q));                                        \
    } while (0)
/* The float32s of a block of 32 bfloat16s: the whole first vector and the rest of the mask in the second. */
#define bf16_narrow_BLOCK(NARROW, i, m)                                                                   \
    _mm512_mask_storeu_epi16(dst + i, m,                                                                  \
                             NARROW(_mm512_maskz_loadu_ps((__mmask16)(m), src + i),                       \
                                    _mm512_maskz_loadu_ps((__mmask16)((m) >> 16), src + i + 16)))

#define bf16_sum_BLOCK_avx512(i, m) BF16_ARITH_BLOCK(v16_sum, bf16x32_round_avx512, i, m)
#define bf16_prod_BLOCK_avx512(i, m) BF16_ARITH_BLOCK(v16_prod, bf16x32_round_avx512, i, m)
#define bf16_avg_BLOCK_avx512(i, m) bf16_avg_BLOCK(bf16x32_round_avx512, i, m)
#define bf16_narrow_BLOCK_avx512(i, m) bf16_narrow_BLOCK(bf16x32_narrow_avx512, i, m)
DEFINE_BF16_FAMILY(avx512)

#ifdef CHORUS_HAVE_AVX512BF16
#define bf16_sum_BLOCK_avx512bf16(i, m) BF16_ARITH_BLOCK(v16_sum, bf16x32_round_avx512bf16, i, m)
#define bf16_prod_BLOCK_avx512bf16(i, m) BF16_ARITH_BLOCK(v16_prod, bf16x32_round_avx512bf16, i, m)
#define bf16_avg_BLOCK_avx512bf16(i, m) bf16_avg_BLOCK(bf16x32_round_avx512bf16, i, m)
#define bf16_narrow_BLOCK_avx512bf16(i, m) bf16_narrow_BLOCK(bf16x32_narrow_avx512bf16, i, m)
DEFINE_BF16_FAMILY(avx512bf16)
#endif

/* ---- float16 arithmetic (AVX512_FP16), 32 to a block ---- */

#ifdef CHORUS_HAVE_AVX512FP16
REDUCE_TARGET_avx512fp16 static inline __m512h h32_load(const uint16_t *p, __mmask32 m)
{
    return _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, p));
}

#define FP16_NATIVE_ARITH_BLOCK(OP, i, m) \
    _mm512_mask_storeu_epi16(d + i, m, _mm512_castph_si512(OP(h32_load(a + i, m), h32_load(b + i, m))))

/* As for bfloat16, max and min choose an operand, then quiet it if it is a NaN, as the other tables'
 * conversions do. */
#define FP16_NATIVE_CHOICE_BLOCK(CMP, i, m)                                                                 \
    do {                                                                                                    \
        __m512h x = h32_load(a + i, m), y = h32_load(b + i, m);                                             \
        __mmask32 take_x = _mm512_cmp_ph_mask(x, y, CMP) | _mm512_cmp_ph_mask(x, x, _CMP_UNORD_Q);          \
        __m512i r = _mm512_mask_blend_epi16(take_x, _mm512_castph_si512(y), _mm512_castph_si512(x));        \
        __mmask32 nan = _mm512_cmp_ph_mask(_mm512_castsi512_ph(r), _mm512_castsi512_ph(r), _CMP_UNORD_Q);   \
        r = _mm512_mask_blend_epi16(nan, r, _mm512_or_si512(r, _mm512_set1_epi16(0x200)));                 \
        _mm512_mask_storeu_epi16(d + i, m, r);                                                              \
    } while (0)

#define fp16_sum_BLOCK_native(i, m) FP16_NATIVE_ARITH_BLOCK(_mm512_add_ph, i, m)
#define fp16_prod_BLOCK_native(i, m) FP16_NATIVE_ARITH_BLOCK(_mm512_mul_ph, i, m)
#define fp16_max_BLOCK_native(i, m) FP16_NATIVE_CHOICE_BLOCK(_CMP_GT_OQ, i, m)
#define fp16_min_BLOCK_native(i, m) FP16_NATIVE_CHOICE_BLOCK(_CMP_LT_OQ, i, m)
DEFINE_BLOCK_LOOP(avx512fp16, fp16_sum, 32, __mmask32, fp16_sum_BLOCK_native)
DEFINE_BLOCK_LOOP(avx512fp16, fp16_prod, 32, __mmask32, fp16_prod_BLOCK_native)
DEFINE_BLOCK_LOOP(avx512fp16, fp16_max, 32, __mmask32, fp16_max_BLOCK_native)
DEFINE_BLOCK_LOOP(avx512fp16, fp16_min, 32, __mmask32, fp16_min_BLOCK_native)
#endif

/* ---- Which CPUs run them ---- */

/* __builtin_cpu_supports includes the OS saving the ZMM and mask registers. */
static int reduce_runs_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

const struct reduce_isa reduce_isa_avx512 =
    REDUCE_ISA_TABLE("avx512", reduce_runs_avx512, avx512, avx512, avx512, avx512);

/* Not every compiler's __builtin_cpu_supports knows these two: CPUID leaf 7 tells, AVX512_BF16 in EAX bit 5
 * of sub-leaf 1, AVX512_FP16 in EDX bit 23 of sub-leaf 0. */
#ifdef CHORUS_HAVE_AVX512BF16
static int reduce_runs_avx512_bf16(void)
{
    unsigned eax, ebx, ecx, edx;
    return reduce_runs_avx512() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5));
}

const struct reduce_isa reduce_isa_avx512_bf16 =
    REDUCE_ISA_TABLE("avx512_bf16", reduce_runs_avx512_bf16, avx512, avx512, avx512, avx512bf16);
#endif

#ifdef CHORUS_HAVE_AVX512FP16
static int reduce_runs_avx512_fp16(void)
{
    unsigned eax, ebx, ecx, edx;
    return reduce_runs_avx512_bf16() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 23));
}

const struct reduce_isa reduce_isa_avx512_fp16 =
    REDUCE_ISA_TABLE("avx512_fp16", reduce_runs_avx512_fp16, avx512, avx512fp16, avx512, avx512bf16);
#endif
#endif
