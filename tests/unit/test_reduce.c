/* Reduction kernels against a slow, element-at-a-time reference that shares no code with them
 * (src/algo/reduce*.c): integers go through 64-bit arithmetic and are truncated, float16 / bfloat16 are
 * decoded with ldexp and rounded by searching the sorted table of representable values. Every instruction
 * set the machine runs is checked, the portable loops always. All comparisons are bit-exact. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/reduce.h"
#include "test.h"

/* Around the vector widths (8 and 16 float32s, 16 and 32 half-precision values, 32 and 64 bytes): all tail,
 * whole vectors, a vector and a tail. */
static const size_t counts[] = {0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4097};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint32_t bits_of_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float float_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* ---- Reference half-precision formats ---- */

struct half_format {
    int mant_bits;     /* 10 for float16, 7 for bfloat16 */
    int min_exp;       /* exponent of the least subnormal: -24, -133 */
    uint16_t inf_bits; /* 0x7C00, 0x7F80 */
};

static const struct half_format fmt_fp16 = {10, -24, 0x7C00};
static const struct half_format fmt_bf16 = {7, -133, 0x7F80};

/* Magnitude of a non-negative pattern up to inf_bits; inf_bits itself decodes to the next power of two
 * above the largest finite value, the bound that rounding to infinity is measured against. */
static double ref_magnitude(const struct half_format *f, uint16_t p)
{
    int e = p >> f->mant_bits;
    int m = p & ((1 << f->mant_bits) - 1);
    if (e == 0) return ldexp(m, f->min_exp);
    return ldexp(m + (1 << f->mant_bits), f->min_exp + e - 1);
}

static int ref_is_nan(const struct half_format *f, uint16_t p)
{
    return (p & 0x7FFF) > f->inf_bits;
}

static float ref_widen(const struct half_format *f, uint16_t p)
{
    int neg = p >> 15;
    uint16_t mag = p & 0x7FFF;
    if (ref_is_nan(f, p)) {
        uint32_t payload = (uint32_t)(p & ((1 << f->mant_bits) - 1)) << (23 - f->mant_bits);
        return float_of_bits((uint32_t)neg << 31 | 0x7F800000 | 0x400000 | payload);
    }
    if (mag == f->inf_bits) return neg ? -INFINITY : INFINITY;
    float v = (float)ref_magnitude(f, mag);
    return neg ? -v : v;
}

static uint16_t ref_narrow(const struct half_format *f, float x)
{
    uint32_t xb = bits_of_float(x);
    uint16_t sign = (uint16_t)(xb >> 31 << 15);
    if (isnan(x)) {
        uint32_t top = (xb & 0x7FFFFF) >> (23 - f->mant_bits);
        return sign | f->inf_bits | (uint16_t)(1u << (f->mant_bits - 1)) | (uint16_t)top;
    }
    double a = fabs((double)x);
    uint16_t lo = 0, hi = f->inf_bits; /* largest pattern with magnitude <= a lies in [lo, hi] */
    if (a >= ref_magnitude(f, hi)) return sign | f->inf_bits;
    while (hi - lo > 1) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (ref_magnitude(f, mid) <= a) lo = mid;
        else hi = mid;
    }
    double below = a - ref_magnitude(f, lo), above = ref_magnitude(f, (uint16_t)(lo + 1)) - a;
    uint16_t r = below < above ? lo : above < below ? (uint16_t)(lo + 1) : (lo & 1) ? (uint16_t)(lo + 1) : lo;
    return sign | r;
}

/* ---- Reference element-wise reduction ---- */

static int is_signed_int(chorus_datatype_t dt)
{
    return dt == chorus_int8 || dt == chorus_int32 || dt == chorus_int64;
}

static int is_int(chorus_datatype_t dt)
{
    return dt <= chorus_uint64;
}

static size_t elem_size(chorus_datatype_t dt)
{
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
    return sizes[dt];
}

/* Integer elements as raw unsigned bits, and back (truncating keeps the value modulo 2^bits). */
static uint64_t load_bits(chorus_datatype_t dt, const void *p)
{
    switch (elem_size(dt)) {
    case 1: return *(const uint8_t *)p;
    case 2: return *(const uint16_t *)p;
    case 4: return *(const uint32_t *)p;
    default: return *(const uint64_t *)p;
    }
}

static void store_bits(chorus_datatype_t dt, void *p, uint64_t v)
{
    switch (elem_size(dt)) {
    case 1: *(uint8_t *)p = (uint8_t)v; break;
    case 2: *(uint16_t *)p = (uint16_t)v; break;
    case 4: *(uint32_t *)p = (uint32_t)v; break;
    default: *(uint64_t *)p = v; break;
    }
}

static int64_t load_signed(chorus_datatype_t dt, const void *p)
{
    switch (dt) {
    case chorus_int8: return *(const int8_t *)p;
    case chorus_int32: return *(const int32_t *)p;
    default: return *(const int64_t *)p;
    }
}

static int64_t ref_int_combine(chorus_datatype_t dt, chorus_redop_t op, const void *x, const void *y)
{
    uint64_t ux = load_bits(dt, x), uy = load_bits(dt, y);
    int bigger;
    switch (op) {
    case chorus_sum:
    case chorus_avg: return (int64_t)(ux + uy);
    case chorus_prod: return (int64_t)(ux * uy);
    default:
        bigger = is_signed_int(dt) ? load_signed(dt, x) > load_signed(dt, y) : ux > uy;
        if (op == chorus_max) return (int64_t)(bigger ? ux : uy);
        return (int64_t)(bigger ? uy : ux);
    }
}

static double ref_float_combine(chorus_redop_t op, double x, double y)
{
    switch (op) {
    case chorus_sum:
    case chorus_avg: return x + y;
    case chorus_prod: return x * y;
    case chorus_max: return isnan(x) ? x : isnan(y) ? y : x > y ? x : y;
    default: return isnan(x) ? x : isnan(y) ? y : x < y ? x : y;
    }
}

static float ref_float32_combine(chorus_redop_t op, float x, float y)
{
    switch (op) {
    case chorus_sum:
    case chorus_avg: return x + y;
    case chorus_prod: return x * y;
    case chorus_max: return isnan(x) ? x : isnan(y) ? y : x > y ? x : y;
    default: return isnan(x) ? x : isnan(y) ? y : x < y ? x : y;
    }
}

static void ref_combine(chorus_datatype_t dt, chorus_redop_t op, const void *x, const void *y, void *out)
{
    if (is_int(dt)) {
        store_bits(dt, out, (uint64_t)ref_int_combine(dt, op, x, y));
    } else if (dt == chorus_float16 || dt == chorus_bfloat16) {
        const struct half_format *f = dt == chorus_float16 ? &fmt_fp16 : &fmt_bf16;
        float r = ref_float32_combine(op, ref_widen(f, *(const uint16_t *)x), ref_widen(f, *(const uint16_t *)y));
        *(uint16_t *)out = ref_narrow(f, r);
    } else if (dt == chorus_float32) {
        *(float *)out = ref_float32_combine(op, *(const float *)x, *(const float *)y);
    } else {
        *(double *)out = ref_float_combine(op, *(const double *)x, *(const double *)y);
    }
}

static void ref_finish(chorus_datatype_t dt, void *p, int nranks)
{
    if (is_signed_int(dt)) {
        store_bits(dt, p, (uint64_t)(load_signed(dt, p) / nranks));
    } else if (is_int(dt)) {
        store_bits(dt, p, load_bits(dt, p) / (uint64_t)nranks);
    } else if (dt == chorus_float16 || dt == chorus_bfloat16) {
        const struct half_format *f = dt == chorus_float16 ? &fmt_fp16 : &fmt_bf16;
        *(uint16_t *)p = ref_narrow(f, ref_widen(f, *(uint16_t *)p) / (float)nranks);
    } else if (dt == chorus_float32) {
        *(float *)p = *(float *)p / (float)nranks;
    } else {
        *(double *)p = *(double *)p / (double)nranks;
    }
}

/* ---- Inputs ---- */

static int elem_is_nan(chorus_datatype_t dt, const void *p)
{
    switch (dt) {
    case chorus_float16: return ref_is_nan(&fmt_fp16, *(const uint16_t *)p);
    case chorus_bfloat16: return ref_is_nan(&fmt_bf16, *(const uint16_t *)p);
    case chorus_float32: return isnan(*(const float *)p);
    case chorus_float64: return isnan(*(const double *)p);
    default: return 0;
    }
}

static const uint32_t special_f32[] = {
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FA02000,
    0x00000001, 0x807FFFFF, 0x00400000, 0x7F7FFFFF, 0xFF7FFFFF, 0x33000000, 0x477FF000, 0x00800000,
};
static const uint64_t special_f64[] = {
    0x0000000000000000, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000,
    0x7FF0000000000001, 0x0000000000000001, 0x800FFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF, 0x0010000000000000,
};

/* Integers: uniform bits, which wrap often. Floats: mostly moderate values (so sums and products round
 * rather than saturate), with a sprinkling of zeros, infinities, NaNs (signalling too) and subnormals. */
static void fill_random(chorus_datatype_t dt, void *buf, size_t n)
{
    size_t sz = elem_size(dt);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_next(), kind = r >> 60;
        char *p = (char *)buf + i * sz;
        if (is_int(dt)) {
            store_bits(dt, p, rng_next());
        } else if (dt == chorus_float16 || dt == chorus_bfloat16) {
            uint16_t h = (uint16_t)r;
            if (kind < 8) {
                /* exponent field near the middle of the range */
                int mb = dt == chorus_float16 ? 10 : 7, bias = dt == chorus_float16 ? 15 : 127;
                int e = bias - 6 + (int)(r >> 32) % 12;
                h = (uint16_t)((h & 0x8000) | e << mb | (h & ((1 << mb) - 1)));
            }
            memcpy(p, &h, 2);
        } else if (dt == chorus_float32) {
            uint32_t u = (uint32_t)r;
            if (kind == 0) u = special_f32[(r >> 32) % (sizeof(special_f32) / sizeof(special_f32[0]))];
            else if (kind < 12) u = (u & 0x807FFFFF) | (uint32_t)(127 - 20 + (r >> 32) % 40) << 23;
            memcpy(p, &u, 4);
        } else {
            uint64_t u = rng_next();
            if (kind == 0) u = special_f64[(r >> 32) % (sizeof(special_f64) / sizeof(special_f64[0]))];
            else if (kind < 12) u = (u & 0x800FFFFFFFFFFFFFull) | (uint64_t)(1023 - 40 + (r >> 32) % 80) << 52;
            memcpy(p, &u, 8);
        }
    }
}

/* Which NaN a sum or product of two NaNs returns is the hardware's and the compiler's choice, not ours:
 * keep at most one NaN operand per element so that every result has one defined bit pattern. */
static void break_nan_pairs(chorus_datatype_t dt, const void *a, void *b, size_t n)
{
    size_t sz = elem_size(dt);
    for (size_t i = 0; i < n; i++) {
        if (elem_is_nan(dt, (const char *)a + i * sz) && elem_is_nan(dt, (char *)b + i * sz))
            memset((char *)b + i * sz, 0, sz);
    }
}

/* ---- Checks ---- */

static const chorus_redop_t all_ops[] = {chorus_sum, chorus_prod, chorus_max, chorus_min, chorus_avg};

/* Compare n elements; report only the first mismatch of a case so one bug does not flood the log. */
static void expect_equal(const char *what, const char *isa, chorus_datatype_t dt, chorus_redop_t op, size_t n,
                         const void *got, const void *want, const void *a, const void *b)
{
    size_t sz = elem_size(dt);
    size_t bad = 0;
    while (bad < n && memcmp((const char *)got + bad * sz, (const char *)want + bad * sz, sz) == 0) bad++;
    unsigned long long av = 0, bv = 0, gv = 0, wv = 0;
    if (bad < n) {
        av = a ? load_bits(dt, (const char *)a + bad * sz) : 0;
        bv = b ? load_bits(dt, (const char *)b + bad * sz) : 0;
        gv = load_bits(dt, (const char *)got + bad * sz);
        wv = load_bits(dt, (const char *)want + bad * sz);
    }
    TEST_ASSERT(bad == n, "%s [%s] %s %s n=%zu: element %zu: a=%#llx b=%#llx got %#llx want %#llx", what, isa,
                dtype_name(dt), redop_name(op), n, bad, av, bv, gv, wv);
}

static const unsigned char guard_byte = 0xA5;

/* dst gets one guard element on each side, and starts one element past an aligned allocation so the
 * vector loops also meet misaligned data. */
static void check_case(const char *isa, chorus_datatype_t dt, chorus_redop_t op, size_t n)
{
    size_t sz = elem_size(dt), bytes = (n + 2) * sz;
    char *a_buf = malloc(bytes), *b_buf = malloc(bytes), *want = malloc(bytes), *d_buf = malloc(bytes);
    char *a = a_buf + sz, *b = b_buf + sz, *d = d_buf + sz;
    fill_random(dt, a, n);
    fill_random(dt, b, n);
    break_nan_pairs(dt, a, b, n);
    for (size_t i = 0; i < n; i++) ref_combine(dt, op, a + i * sz, b + i * sz, want + i * sz);

    memset(d_buf, guard_byte, bytes);
    reduce_apply3(d, a, b, n, dt, op);
    expect_equal("apply3", isa, dt, op, n, d, want, a, b);
    int guards_ok = 1;
    for (size_t i = 0; i < sz; i++) guards_ok &= d_buf[i] == (char)guard_byte && d[n * sz + i] == (char)guard_byte;
    TEST_ASSERT(guards_ok, "apply3 [%s] %s %s n=%zu wrote outside dst", isa, dtype_name(dt), redop_name(op), n);

    memcpy(d, a, n * sz);
    reduce_apply(d, b, n, dt, op);
    expect_equal("apply", isa, dt, op, n, d, want, a, b);

    memcpy(d, a, n * sz);
    reduce_apply3(d, d, b, n, dt, op);
    expect_equal("apply3 dst==a", isa, dt, op, n, d, want, a, b);

    memcpy(d, b, n * sz);
    reduce_apply3(d, a, d, n, dt, op);
    expect_equal("apply3 dst==b", isa, dt, op, n, d, want, a, b);

    /* finish: the divisor 200 does not fit int8, 3 leaves remainders of both signs */
    static const int nranks_list[] = {1, 3, 200};
    for (size_t k = 0; k < sizeof(nranks_list) / sizeof(nranks_list[0]); k++) {
        int nranks = nranks_list[k];
        memcpy(d, want, n * sz);
        reduce_finish(d, n, dt, op, nranks);
        if (op == chorus_avg) {
            for (size_t i = 0; i < n; i++) ref_finish(dt, want + i * sz, nranks);
            expect_equal("finish", isa, dt, op, n, d, want, NULL, NULL);
            for (size_t i = 0; i < n; i++) ref_combine(dt, op, a + i * sz, b + i * sz, want + i * sz);
        } else {
            expect_equal("finish (no-op)", isa, dt, op, n, d, want, NULL, NULL);
        }
    }
    free(a_buf);
    free(b_buf);
    free(want);
    free(d_buf);
}

static void check_all_kernels(const char *isa)
{
    for (int dt = 0; dt < chorus_num_datatypes; dt++)
        for (size_t o = 0; o < sizeof(all_ops) / sizeof(all_ops[0]); o++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                check_case(isa, (chorus_datatype_t)dt, all_ops[o], counts[c]);
    reduce_apply3(NULL, NULL, NULL, 0, chorus_float16, chorus_max);
    reduce_finish(NULL, 0, chorus_bfloat16, chorus_avg, 4);
}

/* Known answers, each repeated across a vector's worth of elements so the vector body sees it too. */
#define REPEAT 37
#define EXPECT_OP(T, dt, op, x, y, want)                                                    \
    do {                                                                                    \
        T a_[REPEAT], b_[REPEAT], d_[REPEAT], w_ = (want);                                  \
        int ok_ = 1;                                                                        \
        for (int i_ = 0; i_ < REPEAT; i_++) a_[i_] = (x), b_[i_] = (y);                     \
        reduce_apply3(d_, a_, b_, REPEAT, dt, op);                                          \
        for (int i_ = 0; i_ < REPEAT; i_++) ok_ &= memcmp(&d_[i_], &w_, sizeof(T)) == 0;    \
        TEST_ASSERT(ok_, "[%s] %s %s %s", isa, dtype_name(dt), redop_name(op), #x ", " #y " -> " #want); \
    } while (0)

#define EXPECT_FINISH(T, dt, x, nranks, want)                                                          \
    do {                                                                                               \
        T b_[REPEAT], w_ = (want);                                                                     \
        int ok_ = 1;                                                                                   \
        for (int i_ = 0; i_ < REPEAT; i_++) b_[i_] = (x);                                              \
        reduce_finish(b_, REPEAT, dt, chorus_avg, nranks);                                             \
        for (int i_ = 0; i_ < REPEAT; i_++) ok_ &= memcmp(&b_[i_], &w_, sizeof(T)) == 0;               \
        TEST_ASSERT(ok_, "[%s] %s avg finish %s / %d -> %s", isa, dtype_name(dt), #x, nranks, #want); \
    } while (0)

static void check_known_answers(const char *isa)
{
    EXPECT_OP(int8_t, chorus_int8, chorus_sum, 127, 1, -128);
    EXPECT_OP(int8_t, chorus_int8, chorus_sum, -128, -1, 127);
    EXPECT_OP(int8_t, chorus_int8, chorus_prod, 16, 16, 0);
    EXPECT_OP(int8_t, chorus_int8, chorus_prod, -128, -1, -128);
    EXPECT_OP(int8_t, chorus_int8, chorus_max, -1, 1, 1);
    EXPECT_OP(uint8_t, chorus_uint8, chorus_sum, 255, 1, 0);
    EXPECT_OP(uint8_t, chorus_uint8, chorus_prod, 255, 255, 1);
    EXPECT_OP(uint8_t, chorus_uint8, chorus_max, 255, 1, 255);
    EXPECT_OP(int32_t, chorus_int32, chorus_sum, INT32_MAX, 1, INT32_MIN);
    EXPECT_OP(int32_t, chorus_int32, chorus_prod, INT32_MIN, -1, INT32_MIN);
    EXPECT_OP(int32_t, chorus_int32, chorus_min, -5, 3, -5);
    EXPECT_OP(uint32_t, chorus_uint32, chorus_prod, UINT32_MAX, UINT32_MAX, 1);
    EXPECT_OP(uint32_t, chorus_uint32, chorus_min, UINT32_MAX, 3, 3);
    EXPECT_OP(int64_t, chorus_int64, chorus_sum, INT64_MAX, 1, INT64_MIN);
    EXPECT_OP(int64_t, chorus_int64, chorus_prod, INT64_MIN, -1, INT64_MIN);
    EXPECT_OP(int64_t, chorus_int64, chorus_max, INT64_MIN, -1, -1);
    EXPECT_OP(uint64_t, chorus_uint64, chorus_sum, UINT64_MAX, 2, 1);
    EXPECT_OP(uint64_t, chorus_uint64, chorus_prod, 1ull << 32, 1ull << 32, 0);
    EXPECT_OP(uint64_t, chorus_uint64, chorus_max, UINT64_MAX, 0, UINT64_MAX);

    float qnan = float_of_bits(0x7FC00123), snan = float_of_bits(0x7F800001);
    EXPECT_OP(float, chorus_float32, chorus_max, qnan, 1.0f, qnan);
    EXPECT_OP(float, chorus_float32, chorus_max, 1.0f, qnan, qnan);
    EXPECT_OP(float, chorus_float32, chorus_min, -INFINITY, qnan, qnan);
    EXPECT_OP(float, chorus_float32, chorus_max, snan, qnan, snan);
    EXPECT_OP(float, chorus_float32, chorus_min, -INFINITY, 0.0f, -INFINITY);
    EXPECT_OP(float, chorus_float32, chorus_max, 0.0f, -0.0f, -0.0f);
    EXPECT_OP(float, chorus_float32, chorus_sum, 1.0f, 0x1p-24f, 1.0f);
    EXPECT_OP(double, chorus_float64, chorus_max, NAN, -INFINITY, NAN);
    EXPECT_OP(double, chorus_float64, chorus_prod, 0x1p1000, 0x1p100, INFINITY);

    /* float16: 1 + 2^-11 is a tie that rounds to even (1.0); 65504 + 16 ties to infinity; NaNs come back quiet */
    EXPECT_OP(uint16_t, chorus_float16, chorus_sum, 0x3C00, 0x1000, 0x3C00);
    EXPECT_OP(uint16_t, chorus_float16, chorus_sum, 0x3C01, 0x1000, 0x3C02);
    EXPECT_OP(uint16_t, chorus_float16, chorus_sum, 0x7BFF, 0x4C00, 0x7C00);
    EXPECT_OP(uint16_t, chorus_float16, chorus_prod, 0x0001, 0x3800, 0x0000);
    EXPECT_OP(uint16_t, chorus_float16, chorus_prod, 0x0003, 0x3800, 0x0002);
    EXPECT_OP(uint16_t, chorus_float16, chorus_max, 0x7C01, 0x3C00, 0x7E01);
    EXPECT_OP(uint16_t, chorus_float16, chorus_min, 0x3C00, 0xFE05, 0xFE05);
    EXPECT_OP(uint16_t, chorus_float16, chorus_sum, 0x7C00, 0xFC00, 0xFE00);
    EXPECT_OP(uint16_t, chorus_float16, chorus_max, 0x7E01, 0xFE02, 0x7E01);
    EXPECT_OP(uint16_t, chorus_float16, chorus_max, 0x0000, 0x8000, 0x8000);
    EXPECT_OP(uint16_t, chorus_float16, chorus_min, 0x8000, 0x0000, 0x0000);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_min, 0xFFC1, 0x7FC2, 0xFFC1);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_max, 0x0000, 0x8000, 0x8000);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_sum, 0x3F80, 0x3B80, 0x3F80);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_sum, 0x3F81, 0x3B80, 0x3F82);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_max, 0x7F81, 0x3F80, 0x7FC1);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_prod, 0x7F7F, 0x4000, 0x7F80);
    /* bfloat16: arithmetic quiets a signalling NaN in either operand; inf - inf is the default NaN; ties
     * carry into the exponent and into infinity; subnormal ties round to even; a NaN second operand wins
     * max and min. */
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_sum, 0x7F81, 0x3F80, 0x7FC1);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_prod, 0x3F80, 0xFF81, 0xFFC1);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_sum, 0x7F80, 0xFF80, 0xFFC0);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_sum, 0x3FFF, 0x3B80, 0x4000);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_sum, 0x7F7F, 0x7B00, 0x7F80);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_sum, 0xFF7F, 0xFB00, 0xFF80);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_sum, 0x007F, 0x0001, 0x0080);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_prod, 0x0001, 0x3F00, 0x0000);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_prod, 0x0003, 0x3F00, 0x0002);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_prod, 0x8003, 0x3F00, 0x8002);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_max, 0x3F80, 0xFF81, 0xFFC1);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_min, 0x7F81, 0xFF80, 0x7FC1);
    EXPECT_OP(uint16_t, chorus_bfloat16, chorus_min, 0xFF80, 0x7F80, 0xFF80);

    /* avg's division: signalling NaNs come back quiet, exact halves of subnormals tie to even */
    EXPECT_FINISH(uint16_t, chorus_bfloat16, 0xFF81, 3, 0xFFC1);
    EXPECT_FINISH(uint16_t, chorus_bfloat16, 0x0003, 2, 0x0002);
    EXPECT_FINISH(uint16_t, chorus_bfloat16, 0x0001, 2, 0x0000);
    EXPECT_FINISH(uint16_t, chorus_bfloat16, 0x3F83, 2, 0x3F03);
    EXPECT_FINISH(uint16_t, chorus_float16, 0x7C01, 3, 0x7E01);
    EXPECT_FINISH(uint16_t, chorus_float16, 0x0003, 2, 0x0002);
}

/* ---- Conversions ---- */

static int same_float(float x, float y)
{
    return bits_of_float(x) == bits_of_float(y);
}

/* Every pattern decodes to the reference value, and re-encodes to itself (NaNs to their quiet form). */
static void check_exhaustive(const char *isa, const struct half_format *f, chorus_datatype_t dt)
{
    static uint16_t pats[65536], back[65536];
    static float wide[65536];
    int bad_scalar = 0, bad_trip = 0;
    for (uint32_t p = 0; p < 65536; p++) pats[p] = (uint16_t)p;
    half_to_float_array(wide, pats, 65536, dt);
    float_to_half_array(back, wide, 65536, dt);
    uint32_t first_bad = 0;
    for (uint32_t p = 0; p < 65536; p++) {
        uint16_t h = (uint16_t)p;
        float want = ref_widen(f, h);
        float got = dt == chorus_float16 ? fp16_to_float(h) : bf16_to_float(h);
        uint16_t trip_want = ref_is_nan(f, h) ? (uint16_t)(h | 1u << (f->mant_bits - 1)) : h;
        uint16_t trip = dt == chorus_float16 ? float_to_fp16(got) : float_to_bf16(got);
        if (!same_float(got, want) || !same_float(wide[p], want)) bad_scalar++, first_bad = p;
        if (trip != trip_want || back[p] != trip_want) bad_trip++, first_bad = p;
    }
    TEST_ASSERT(bad_scalar == 0 && bad_trip == 0, "[%s] %s: %d decode and %d round-trip mismatches (e.g. %#x)",
                isa, dtype_name(dt), bad_scalar, bad_trip, first_bad);
}

/* Every representable value, every midpoint between neighbours (the ties), one float ulp either side of
 * each midpoint, both signs; then the float32 specials and random bit patterns. */
static size_t rounding_inputs(const struct half_format *f, float *out)
{
    size_t n = 0;
    for (uint16_t p = 0; p < f->inf_bits; p++) {
        float v = (float)ref_magnitude(f, p);
        float mid = (float)((ref_magnitude(f, p) + ref_magnitude(f, (uint16_t)(p + 1))) / 2);
        float vals[4] = {v, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 4; k++) out[n++] = vals[k], out[n++] = -vals[k];
    }
    for (size_t k = 0; k < sizeof(special_f32) / sizeof(special_f32[0]); k++) out[n++] = float_of_bits(special_f32[k]);
    for (int k = 0; k < 100000; k++) out[n++] = float_of_bits((uint32_t)rng_next());
    return n;
}

static void check_rounding(const char *isa, const struct half_format *f, chorus_datatype_t dt)
{
    size_t cap = (size_t)f->inf_bits * 8 + 100000 + 64;
    float *in = malloc(cap * sizeof(float));
    uint16_t *bulk = malloc(cap * sizeof(uint16_t));
    size_t n = rounding_inputs(f, in);
    float_to_half_array(bulk, in, n, dt);
    int bad = 0;
    uint32_t first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = ref_narrow(f, in[i]);
        uint16_t got = dt == chorus_float16 ? float_to_fp16(in[i]) : float_to_bf16(in[i]);
        if (got != want || bulk[i] != want) bad++, first_bad = bits_of_float(in[i]);
    }
    TEST_ASSERT(bad == 0, "[%s] float32 -> %s: %d of %zu mismatches (e.g. input %#x)", isa, dtype_name(dt), bad, n,
                first_bad);

    /* Hand-picked ties, so a reference bug cannot hide a kernel bug. */
    if (dt == chorus_float16) {
        TEST_ASSERT(float_to_fp16(1.0f + 0x1p-11f) == 0x3C00, "fp16 tie 1+2^-11 rounds to even");
        TEST_ASSERT(float_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02, "fp16 tie 1+3*2^-11 rounds to even");
        TEST_ASSERT(float_to_fp16(65520.0f) == 0x7C00, "fp16 65520 rounds to infinity");
        TEST_ASSERT(float_to_fp16(nextafterf(65520.0f, 0.0f)) == 0x7BFF, "fp16 just below 65520 stays finite");
        TEST_ASSERT(float_to_fp16(0x1p-25f) == 0x0000, "fp16 2^-25 ties to zero");
        TEST_ASSERT(float_to_fp16(-0x1.8p-25f) == 0x8001, "fp16 -1.5*2^-25 rounds to the least subnormal");
        TEST_ASSERT(float_to_fp16(3 * 0x1p-25f) == 0x0002, "fp16 3*2^-25 ties to even");
        TEST_ASSERT(float_to_fp16(0x1.ffcp-15f) == 0x0400, "fp16 rounding up out of the subnormals");
    } else {
        TEST_ASSERT(float_to_bf16(1.0f + 0x1p-8f) == 0x3F80, "bf16 tie 1+2^-8 rounds to even");
        TEST_ASSERT(float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82, "bf16 tie 1+3*2^-8 rounds to even");
        TEST_ASSERT(float_to_bf16(float_of_bits(0x7F7FFFFF)) == 0x7F80, "bf16 FLT_MAX rounds to infinity");
        TEST_ASSERT(float_to_bf16(float_of_bits(0x00008000)) == 0x0000, "bf16 subnormal tie rounds to even");
        TEST_ASSERT(float_to_bf16(float_of_bits(0x00018000)) == 0x0002, "bf16 subnormal tie rounds to even");
        TEST_ASSERT(float_to_bf16(float_of_bits(0xFF800001)) == 0xFFC0, "bf16 signalling NaN comes back quiet");
    }
    free(in);
    free(bulk);
}

/* The bulk conversions at every length up to a few vectors, with every edge case at every position (so in
 * every tail: the checks above convert whole vectors only), into a misaligned dst with a guard at each end. */
static void check_conversion_tails(const char *isa, const struct half_format *f, chorus_datatype_t dt)
{
    enum { MAX_N = 40, NARROW_AROUND = 10, MAX_EDGES = NARROW_AROUND * 8 + 32 };
    const uint16_t mant = (uint16_t)((1 << f->mant_bits) - 1), one = (uint16_t)(f->inf_bits >> 1 & ~mant);
    const uint16_t inf = f->inf_bits, quiet = (uint16_t)(1 << (f->mant_bits - 1));
    /* narrowing: each value, its midpoint to the next (a tie) and a float ulp either side, both signs, around
     * zero, the subnormal/normal boundary, 1.0 and the largest finite value; then the float32 specials */
    const uint16_t around[NARROW_AROUND] = {0, 1, 2, 3, mant, (uint16_t)(mant + 1), one, (uint16_t)(one + 1),
                                            (uint16_t)(inf - 2), (uint16_t)(inf - 1)};
    float narrow_in[MAX_EDGES];
    size_t n_narrow = 0;
    for (size_t k = 0; k < NARROW_AROUND; k++) {
        float v = (float)ref_magnitude(f, around[k]);
        float mid = (float)((ref_magnitude(f, around[k]) + ref_magnitude(f, (uint16_t)(around[k] + 1))) / 2);
        float vals[4] = {v, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int j = 0; j < 4; j++) narrow_in[n_narrow++] = vals[j], narrow_in[n_narrow++] = -vals[j];
    }
    for (size_t k = 0; k < sizeof(special_f32) / sizeof(special_f32[0]); k++)
        narrow_in[n_narrow++] = float_of_bits(special_f32[k]);
    /* widening: zeros, subnormals, the least normal, 1.0, the largest finite, infinities, NaNs of both kinds */
    const uint16_t widen_in[] = {0x0000, 0x8000, 0x0001, (uint16_t)(0x8000 | mant), (uint16_t)(mant + 1), one,
                                 (uint16_t)(inf - 1), inf, (uint16_t)(0x8000 | inf), (uint16_t)(inf + 1),
                                 (uint16_t)(0x8000 | (inf + 1)), (uint16_t)(inf | quiet), 0xFFFF};
    const size_t n_widen = sizeof(widen_in) / sizeof(widen_in[0]);

    float in[MAX_N], wide[MAX_N + 2];
    uint16_t pats[MAX_N], half[MAX_N + 2];
    const uint32_t float_guard = 0xA5A5A5A5u;
    const uint16_t half_guard = 0xA5A5;
    int bad_narrow = 0, bad_widen = 0, bad_guard = 0;
    size_t first_bad_n = 0;
    for (size_t n = 1; n <= MAX_N; n++) {
        for (size_t start = 0; start < n_narrow; start++) {
            for (size_t i = 0; i < n; i++) in[i] = narrow_in[(start + i) % n_narrow];
            for (size_t i = 0; i < n + 2; i++) half[i] = half_guard;
            float_to_half_array(half + 1, in, n, dt);
            for (size_t i = 0; i < n; i++)
                if (half[i + 1] != ref_narrow(f, in[i])) bad_narrow++, first_bad_n = n;
            if (half[0] != half_guard || half[n + 1] != half_guard) bad_guard++, first_bad_n = n;
        }
        for (size_t start = 0; start < n_widen; start++) {
            for (size_t i = 0; i < n; i++) pats[i] = widen_in[(start + i) % n_widen];
            for (size_t i = 0; i < n + 2; i++) wide[i] = float_of_bits(float_guard);
            half_to_float_array(wide + 1, pats, n, dt);
            for (size_t i = 0; i < n; i++)
                if (!same_float(wide[i + 1], ref_widen(f, pats[i]))) bad_widen++, first_bad_n = n;
            if (bits_of_float(wide[0]) != float_guard || bits_of_float(wide[n + 1]) != float_guard)
                bad_guard++, first_bad_n = n;
        }
    }
    TEST_ASSERT(bad_narrow == 0 && bad_widen == 0 && bad_guard == 0,
                "[%s] %s bulk conversions: %d narrow, %d widen mismatches, %d writes outside dst (e.g. n=%zu)", isa,
                dtype_name(dt), bad_narrow, bad_widen, bad_guard, first_bad_n);
}

/* ---- Names ---- */

static void check_names(void)
{
    static const char *const names[] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
                                        "uint64", "float16", "bfloat16", "float32", "float64"};
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
    for (int i = 0; i < chorus_num_datatypes; i++) {
        chorus_datatype_t dt = (chorus_datatype_t)-1;
        TEST_ASSERT(dtype_size((chorus_datatype_t)i) == sizes[i], "size of %s", names[i]);
        TEST_ASSERT(dtype_name((chorus_datatype_t)i) && strcmp(dtype_name((chorus_datatype_t)i), names[i]) == 0,
                    "name of datatype %d", i);
        TEST_ASSERT(dtype_parse(names[i], &dt) == 0 && dt == (chorus_datatype_t)i, "parse %s", names[i]);
    }
    static const struct {
        const char *alias;
        chorus_datatype_t dt;
    } aliases[] = {{"half", chorus_float16},  {"fp16", chorus_float16},   {"bf16", chorus_bfloat16},
                   {"float", chorus_float32}, {"fp32", chorus_float32},   {"double", chorus_float64},
                   {"fp64", chorus_float64},  {"int", chorus_int32},      {"FLOAT32", chorus_float32}};
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        chorus_datatype_t dt = (chorus_datatype_t)-1;
        TEST_ASSERT(dtype_parse(aliases[i].alias, &dt) == 0 && dt == aliases[i].dt, "parse %s", aliases[i].alias);
    }
    chorus_datatype_t untouched = chorus_float64;
    TEST_ASSERT(dtype_parse("float128", &untouched) == -1 && untouched == chorus_float64, "unknown datatype");
    TEST_ASSERT(dtype_parse("", &untouched) == -1, "empty datatype name");
    TEST_ASSERT(dtype_size(chorus_num_datatypes) == 0 && dtype_name(chorus_num_datatypes) == NULL,
                "out-of-range datatype");

    static const char *const ops[] = {"sum", "prod", "max", "min", "avg"};
    for (int i = 0; i < chorus_num_ops; i++) {
        chorus_redop_t op = (chorus_redop_t)-1;
        TEST_ASSERT(redop_name((chorus_redop_t)i) && strcmp(redop_name((chorus_redop_t)i), ops[i]) == 0,
                    "name of op %d", i);
        TEST_ASSERT(redop_parse(ops[i], &op) == 0 && op == (chorus_redop_t)i, "parse %s", ops[i]);
    }
    chorus_redop_t op_untouched = chorus_min;
    TEST_ASSERT(redop_parse("mean", &op_untouched) == -1 && op_untouched == chorus_min, "unknown op");
    TEST_ASSERT(redop_name(chorus_num_ops) == NULL, "out-of-range op");
}

static void check_isa(const char *isa)
{
    check_all_kernels(isa);
    check_known_answers(isa);
    check_exhaustive(isa, &fmt_fp16, chorus_float16);
    check_exhaustive(isa, &fmt_bf16, chorus_bfloat16);
    check_rounding(isa, &fmt_fp16, chorus_float16);
    check_rounding(isa, &fmt_bf16, chorus_bfloat16);
    check_conversion_tails(isa, &fmt_fp16, chorus_float16);
    check_conversion_tails(isa, &fmt_bf16, chorus_bfloat16);
}

int main(void)
{
    test_set_timeout(120);
    check_names();
    const char *isas[REDUCE_MAX_ISAS];
    int n = reduce_isa_list(isas, REDUCE_MAX_ISAS);
    TEST_ASSERT(n >= 1 && n <= REDUCE_MAX_ISAS && strcmp(isas[0], "portable") == 0,
                "%d instruction sets, the first %s (want portable first)", n, n > 0 ? isas[0] : "none");
    TEST_ASSERT(reduce_set_isa("no-such-isa") == NULL, "an unknown instruction set is refused");
    for (int i = 0; i < n; i++) {
        const char *in_use = reduce_set_isa(isas[i]);
        TEST_ASSERT(in_use && strcmp(in_use, isas[i]) == 0, "switching to %s gave %s", isas[i],
                    in_use ? in_use : "NULL");
        check_isa(isas[i]);
        printf("kernels checked: %s\n", isas[i]);
    }
    const char *best = reduce_set_isa(NULL);
    TEST_ASSERT(best && strcmp(best, isas[n - 1]) == 0, "the best instruction set is %s, the last listed %s",
                best ? best : "NULL", isas[n - 1]);
    return test_report();
}
