#include "util/copy.h"

#include "util/util.h"

#include <stdint.h>
#include <string.h>

/* The sizes glibc moves with rep movsb on x86-64 (rep_movsb_threshold for AVX2 to about the L2 size, past
 * which it uses vector loops and non-temporal stores itself). */
#define COPY_LOOP_MIN 4096
#define COPY_LOOP_MAX (1u << 20)
#define COPY_PAGE 4096

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <x86intrin.h>

/* n >= 64. Unaligned loads, stores aligned to 32 bytes; the first and last 32 bytes are loaded before
 * anything is stored and written unaligned, which covers the ragged ends. */
__attribute__((target("avx2"))) static void copy_avx2(char *d, const char *s, size_t n)
{
    __m256i head = _mm256_loadu_si256((const __m256i *)s);
    __m256i tail = _mm256_loadu_si256((const __m256i *)(s + n - 32));
    char *end = d + n;
    size_t skip = 32 - ((uintptr_t)d & 31);
    _mm256_storeu_si256((__m256i *)d, head);
    d += skip;
    s += skip;
    n -= skip;
    for (; n >= 128; d += 128, s += 128, n -= 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)s);
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(s + 96));
        _mm256_store_si256((__m256i *)d, a);
        _mm256_store_si256((__m256i *)(d + 32), b);
        _mm256_store_si256((__m256i *)(d + 64), c);
        _mm256_store_si256((__m256i *)(d + 96), e);
    }
    for (; n >= 32; d += 32, s += 32, n -= 32)
        _mm256_store_si256((__m256i *)d, _mm256_loadu_si256((const __m256i *)s));
    _mm256_storeu_si256((__m256i *)(end - 32), tail);
}

/* One 128-byte row: unaligned loads, non-temporal stores to a 32-byte aligned d. */
__attribute__((target("avx2"))) static inline void stream_row(char *d, const char *s)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)s);
    __m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));
    __m256i c = _mm256_loadu_si256((const __m256i *)(s + 64));
    __m256i e = _mm256_loadu_si256((const __m256i *)(s + 96));
    _mm256_stream_si256((__m256i *)d, a);
    _mm256_stream_si256((__m256i *)(d + 32), b);
    _mm256_stream_si256((__m256i *)(d + 64), c);
    _mm256_stream_si256((__m256i *)(d + 96), e);
}

/* n >= COPY_SHARED_MIN. The head up to d's next page (up to its next line where n spans less than 8 pages)
 * and the ragged tail go through memcpy; in between, each step takes one row from each of four
 * consecutive pages, as glibc's large copy does, so the hardware prefetchers see four streams and the
 * stores fill four pages' write-combining buffers. */
__attribute__((target("avx2"))) static void copy_stream(char *d, const char *s, size_t n)
{
    size_t align = n >= 8 * COPY_PAGE ? COPY_PAGE : 64, head = (align - ((uintptr_t)d & (align - 1))) & (align - 1);
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 4 * COPY_PAGE; d += 4 * COPY_PAGE, s += 4 * COPY_PAGE, n -= 4 * COPY_PAGE)
        for (size_t row = 0; row < COPY_PAGE; row += 128)
            for (size_t page = 0; page < 4 * COPY_PAGE; page += COPY_PAGE) stream_row(d + page + row, s + page + row);
    for (; n >= 128; d += 128, s += 128, n -= 128) stream_row(d, s);
    _mm_sfence(); /* the streamed lines are visible before whatever signals the copy done */
    memcpy(d, s, n);
}

void copy_out_part(void *dst, const void *src, size_t n, size_t whole)
{
    if (whole >= COPY_STREAM_MIN && n >= COPY_PIECE_STREAM_MIN && __builtin_cpu_supports("avx2"))
        copy_stream(dst, src, n);
    else
        copy_bytes(dst, src, n);
}

void copy_out(void *dst, const void *src, size_t n) { copy_out_part(dst, src, n, n); }

/* The best of the chosen method's recent copies (0: none yet). */
static double copy_shared_best(const copy_shared_t *c)
{
    double best = 0;
    for (int i = 0; i < COPY_SHARED_RECENT; i++)
        if (c->recent[i] > 0 && (best == 0 || c->recent[i] < best)) best = c->recent[i];
    return best;
}

void copy_shared_begin(copy_shared_t *c, copy_shared_run_t *r, size_t n)
{
    *r = (copy_shared_run_t){.n = n, .timed = n >= COPY_SHARED_MIN && __builtin_cpu_supports("avx2")};
    if (c->fixed) {
        r->streamed = r->timed && c->streamed;
        r->timed = 0;
    }
    if (!r->timed) return;
    if (c->next == 0) c->next = COPY_SHARED_TRY_MIN;
    double best = copy_shared_best(c);
    int full = c->copies >= COPY_SHARED_RECENT; /* recent holds only copies since the last comparison */
    r->trial = c->copies >= c->next || (full && best > 2 * c->at_choice);
    r->streamed = r->trial ? !c->streamed : c->streamed;
    r->t0 = (int64_t)__rdtsc();
}

void copy_shared_piece(const copy_shared_run_t *r, void *dst, const void *src, size_t n)
{
    if (r->streamed && n >= COPY_SHARED_MIN)
        copy_stream(dst, src, n);
    else
        copy_bytes(dst, src, n);
}

void copy_shared_end(copy_shared_t *c, const copy_shared_run_t *r)
{
    if (!r->timed) return;
    double x = (double)((int64_t)__rdtsc() - r->t0) / (double)r->n, best = copy_shared_best(c);
    if (!r->trial) {
        c->recent[c->copies++ % COPY_SHARED_RECENT] = x;
        if (c->copies == COPY_SHARED_RECENT) c->at_choice = copy_shared_best(c);
        return;
    }
    /* Switch where the trial ran clearly faster (COPY_SHARED_STREAM_WIN to stream, just faster to stop),
     * then compare again soon; else later each time. */
    if (x < (r->streamed ? COPY_SHARED_STREAM_WIN : 1.0) * best) {
        c->streamed = r->streamed;
        c->next = COPY_SHARED_TRY_MIN;
        for (int i = 0; i < COPY_SHARED_RECENT; i++) c->recent[i] = 0;
        c->recent[0] = x;
        c->copies = 1;
    } else {
        c->next = CHORUS_MIN(2 * c->next, COPY_SHARED_TRY_MAX);
        c->copies = 0;
    }
}

void copy_shared_fix(copy_shared_t *c, int streamed)
{
    *c = (copy_shared_t){.fixed = 1, .streamed = streamed && __builtin_cpu_supports("avx2")};
}

void copy_shared(copy_shared_t *c, void *dst, const void *src, size_t n)
{
    copy_shared_run_t r;
    copy_shared_begin(c, &r, n);
    copy_shared_piece(&r, dst, src, n);
    copy_shared_end(c, &r);
}

void copy_bytes(void *dst, const void *src, size_t n)
{
    /* __builtin_cpu_supports reads what libgcc found at start-up: a load and a test. */
    if (n >= COPY_LOOP_MIN && n <= COPY_LOOP_MAX && (((uintptr_t)dst - (uintptr_t)src) & 63) != 0 &&
        __builtin_cpu_supports("avx2")) {
        copy_avx2(dst, src, n);
        return;
    }
    memcpy(dst, src, n);
}
#else
void copy_bytes(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
void copy_out(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
void copy_out_part(void *dst, const void *src, size_t n, size_t whole)
{
    (void)whole;
    memcpy(dst, src, n);
}
void copy_shared_fix(copy_shared_t *c, int streamed)
{
    (void)streamed;
    *c = (copy_shared_t){.fixed = 1};
}
void copy_shared_begin(copy_shared_t *c, copy_shared_run_t *r, size_t n)
{
    (void)c;
    *r = (copy_shared_run_t){.n = n};
}
void copy_shared_piece(const copy_shared_run_t *r, void *dst, const void *src, size_t n)
{
    (void)r;
    memcpy(dst, src, n);
}
void copy_shared_end(copy_shared_t *c, const copy_shared_run_t *r)
{
    (void)c;
    (void)r;
}
void copy_shared(copy_shared_t *c, void *dst, const void *src, size_t n)
{
    (void)c;
    memcpy(dst, src, n);
}
#endif
