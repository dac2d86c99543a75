/* copy_bytes, copy_out, copy_out_part and copy_shared against memcpy, byte for byte: every size around the
 * loop's and the streaming copy's thresholds and every relative offset of source and destination within a
 * cache line (the loop's ragged head and tail), destinations at several offsets within a page (the
 * streaming copy's head), with guard bytes around the destination that must stay untouched; and
 * copy_shared's choice of method, for one copy and for a slot filled piece by piece. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/copy.h"

typedef void copy_fn(void *, const void *, size_t);

/* A piece of a large output: streamed whatever its own size, from COPY_PIECE_STREAM_MIN. */
static void copy_piece(void *dst, const void *src, size_t n) { copy_out_part(dst, src, n, COPY_STREAM_MIN); }

/* Into memory another core reads: by whichever method the copies so far found faster (both, over the run). */
static copy_shared_t shared_state;
static void copy_into_shared(void *dst, const void *src, size_t n) { copy_shared(&shared_state, dst, src, n); }

/* The same where streaming is the choice: every copy from COPY_SHARED_MIN streams (a page and up, a
 * destination anywhere in its page). */
static void copy_into_shared_streamed(void *dst, const void *src, size_t n)
{
    copy_shared_t c = {.streamed = 1, .next = 1000};
    copy_shared(&c, dst, src, n);
}

/* src holds a pattern written once (main): no two neighbouring bytes alike, nor two pages, so a copy from
 * the wrong offset differs. */
static int check_one(copy_fn *copy, size_t n, size_t soff, size_t doff, const unsigned char *src, unsigned char *dst)
{
    const size_t guard = 64;
    memset(dst, 0xA5, n + doff + 2 * guard);
    copy(dst + guard + doff, src + soff, n);
    if (memcmp(dst + guard + doff, src + soff, n) != 0) return 0;
    for (size_t i = 0; i < guard + doff; i++)
        if (dst[i] != 0xA5) return 0;
    for (size_t i = 0; i < guard; i++)
        if (dst[guard + doff + n + i] != 0xA5) return 0;
    return 1;
}

/* copy_shared's choice. Copies below COPY_SHARED_MIN are plain and count for nothing. A fresh state copies
 * plainly and tries streaming after COPY_SHARED_TRY_MIN copies: then it either switched (and tries the other
 * again soon) or waits twice as long for the next trial. */
static void check_shared_choice(unsigned char *dst, const unsigned char *src)
{
    copy_shared_t c = {0};
    for (int i = 0; i < 10; i++) copy_shared(&c, dst, src, COPY_SHARED_MIN - 1);
    TEST_ASSERT(c.copies == 0 && c.next == 0 && !c.streamed, "small copies counted: %u copies", c.copies);
    for (int i = 0; i < COPY_SHARED_TRY_MIN; i++) copy_shared(&c, dst, src, COPY_SHARED_MIN);
    TEST_ASSERT(c.copies == COPY_SHARED_TRY_MIN && !c.streamed && c.at_choice > 0,
                "before the first trial: %u copies, streamed %d", c.copies, c.streamed);
    copy_shared(&c, dst, src, COPY_SHARED_MIN);
    TEST_ASSERT((c.streamed && c.copies == 1 && c.next == COPY_SHARED_TRY_MIN) ||
                    (!c.streamed && c.copies == 0 && c.next == 2 * COPY_SHARED_TRY_MIN),
                "after the first trial: streamed %d, %u copies, next %u", c.streamed, c.copies, c.next);
    /* The rule, on figures no real copy comes near, under a sanitizer either: recent copies of a millisecond
     * per byte lose to any trial, of a femtosecond to none. */
    c = (copy_shared_t){.recent = {1e6, 1e6, 1e6, 1e6}, .at_choice = 1e6, .copies = 20, .next = 20};
    copy_shared(&c, dst, src, 1u << 20);
    TEST_ASSERT(c.streamed == 1 && c.next == COPY_SHARED_TRY_MIN && c.copies == 1,
                "a trial far faster than the recent copies: switched (streamed %d)", c.streamed);
    c = (copy_shared_t){.recent = {1e-6, 1e-6, 1e-6, 1e-6}, .at_choice = 1e-6, .copies = 20, .next = 20};
    copy_shared(&c, dst, src, 1u << 20);
    TEST_ASSERT(c.streamed == 0 && c.next == 40 && c.copies == 0, "a slower trial: kept, next trial later (next %u)",
                c.next);
    c = (copy_shared_t){.recent = {1e-6, 1e-6, 1e-6, 1e-6}, .at_choice = 1e-6, .copies = 1000,
                        .next = COPY_SHARED_TRY_MAX};
    copy_shared(&c, dst, src, 1u << 20);
    TEST_ASSERT(c.next == COPY_SHARED_TRY_MAX, "trials at most every COPY_SHARED_TRY_MAX copies: next %u", c.next);
    /* Where even the best recent copy took twice its time at the last comparison (the machine changed), the
     * other method is tried at once, long before its turn. */
    c = (copy_shared_t){.recent = {1e6, 1e6, 1e6, 1e6}, .at_choice = 1e5, .copies = 4, .next = 500, .streamed = 1};
    copy_shared(&c, dst, src, 1u << 20);
    TEST_ASSERT(c.streamed == 0 && c.copies == 1, "the chosen method twice as slow: tried the other and switched");
    TEST_ASSERT(copy_shared_streams(&(copy_shared_t){.streamed = 1}, COPY_SHARED_MIN) &&
                    !copy_shared_streams(&(copy_shared_t){.streamed = 1}, COPY_SHARED_MIN - 1) &&
                    !copy_shared_streams(&(copy_shared_t){.streamed = 0}, COPY_SHARED_MIN),
                "copy_shared_streams: the choice, from COPY_SHARED_MIN");
}

/* A slot filled piece by piece (copy_shared_begin, copy_shared_piece, copy_shared_end): the pieces count
 * as one copy of their total, by either method every piece lands where it should and the piece left out
 * stays untouched; a run whose total is below COPY_SHARED_MIN counts for nothing; and the size classes. */
static void check_shared_pieces(unsigned char *dst, const unsigned char *src)
{
    const size_t piece = 32u << 10, stride = 40u << 10;
    const int count = 8, skip = 3;
    for (int streamed = 0; streamed < 2; streamed++) {
        copy_shared_t c = {.streamed = streamed, .next = 1000};
        copy_shared_run_t run;
        memset(dst, 0xab, (size_t)count * piece);
        copy_shared_begin(&c, &run, piece * (count - 1));
        for (int q = 0; q < count; q++)
            if (q != skip) copy_shared_piece(&run, dst + (size_t)q * piece, src + (size_t)q * stride, piece);
        copy_shared_end(&c, &run);
        TEST_ASSERT(c.copies == 1 && c.recent[0] > 0 && c.streamed == streamed,
                    "%d pieces of 32 KiB (streamed %d): one copy counted, got %u", count - 1, streamed, c.copies);
        int wrong = 0;
        for (int q = 0; q < count; q++)
            for (size_t i = 0; i < piece; i++)
                wrong += dst[(size_t)q * piece + i] != (q == skip ? 0xab : src[(size_t)q * stride + i]);
        TEST_ASSERT(wrong == 0, "pieces (streamed %d): %d bytes wrong", streamed, wrong);
    }
    copy_shared_t c = {0};
    copy_shared_run_t run;
    const size_t half = COPY_SHARED_MIN / 2 - 1;
    copy_shared_begin(&c, &run, 2 * half);
    copy_shared_piece(&run, dst, src, half);
    copy_shared_piece(&run, dst + half, src, half);
    copy_shared_end(&c, &run);
    TEST_ASSERT(c.copies == 0 && c.next == 0, "a run below COPY_SHARED_MIN in all counted: %u copies", c.copies);
    /* Each size class keeps its own choice: from COPY_SHARED_MIN by factors of 4, the last open-ended. */
    TEST_ASSERT(copy_shared_class(COPY_SHARED_MIN) == 0 && copy_shared_class(4 * COPY_SHARED_MIN - 1) == 0 &&
                    copy_shared_class(4 * COPY_SHARED_MIN) == 1 && copy_shared_class(64u << 10) == 2 &&
                    copy_shared_class((1u << 20) - 1) == COPY_SHARED_CLASSES - 2 &&
                    copy_shared_class(1u << 20) == COPY_SHARED_CLASSES - 1 &&
                    copy_shared_class((size_t)1 << 40) == COPY_SHARED_CLASSES - 1,
                "copy_shared_class: 4 KiB to 16 KiB, ..., 1 MiB and up");
}

int main(void)
{
    test_set_timeout(60);
    const size_t max = (4u << 20) + 5 * 4096;
    unsigned char *src = NULL, *dst = NULL;
    TEST_ASSERT(posix_memalign((void **)&src, 4096, max + 128) == 0, "alloc");
    TEST_ASSERT(posix_memalign((void **)&dst, 4096, max + 4096 + 256) == 0, "alloc");
    for (size_t i = 0; i < max + 128; i++) src[i] = (unsigned char)(i * 131u + (i >> 12) * 7u + 1u);
    static const size_t sizes[] = {0, 1, 31, 32, 63, 64, 4095, 4096, 4097, 4127, 4159, 65536, 65537, 262144 + 77,
                                   COPY_PIECE_STREAM_MIN - 1, COPY_PIECE_STREAM_MIN, COPY_PIECE_STREAM_MIN + 4096 + 3,
                                   8 * 4096 - 1, 8 * 4096, 8 * 4096 + 5,
                                   (1u << 20) - 1, 1u << 20, (1u << 20) + 1, (4u << 20) - 1, 4u << 20,
                                   (4u << 20) + 1, (4u << 20) + 4 * 4096 + 77, (4u << 20) + 5 * 4096};
    int bad = 0;
    copy_fn *const copies[] = {copy_bytes, copy_out, copy_piece, copy_into_shared, copy_into_shared_streamed};
    const char *const names[] = {"copy_bytes", "copy_out", "copy_out_part", "copy_shared", "copy_shared streamed"};
    for (int c = 0; c < 5; c++) {
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
            for (size_t soff = 0; soff < 64; soff += (sizes[k] > 100000 ? 13 : 1))
                for (size_t doff = 0; doff < 64; doff += (sizes[k] > 100000 ? 17 : 3))
                    if (!check_one(copies[c], sizes[k], soff, doff, src, dst) && bad++ < 5)
                        TEST_ASSERT(0, "%s of %zu bytes, source +%zu, destination +%zu differs", names[c], sizes[k],
                                    soff, doff);
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
            for (size_t doff = 64; doff < 4096; doff += 1000)
                if (!check_one(copies[c], sizes[k], 5, doff, src, dst) && bad++ < 5)
                    TEST_ASSERT(0, "%s of %zu bytes, source +5, destination +%zu differs", names[c], sizes[k], doff);
    }
    TEST_ASSERT(bad == 0, "%d copies differed from memcpy", bad);

    /* Where outputs stream: a host's share of a last-level cache, never more than COPY_CACHE_MAX (a virtual
     * machine is told of its host's whole L3), and outputs from COPY_STREAM_MIN that fill that share. */
    const double mib = 1 << 20;
    TEST_ASSERT(copy_cache_share(32u << 20, 2) == 16 * mib, "a 32 MiB L3 among 2 ranks: %g",
                copy_cache_share(32u << 20, 2));
    TEST_ASSERT(copy_cache_share((size_t)480 << 20, 4) == COPY_CACHE_MAX / 4.0, "a VM's 480 MiB among 4 ranks: %g",
                copy_cache_share((size_t)480 << 20, 4));
    TEST_ASSERT(copy_cache_share(0, 1) == COPY_CACHE_MAX, "an unknown L3: %g", copy_cache_share(0, 1));
    TEST_ASSERT(copy_cache_share(8u << 20, 0) == 8 * mib, "no ranks counted as one: %g", copy_cache_share(8u << 20, 0));
    TEST_ASSERT(!copy_streams(8 * mib, 16 * mib) && copy_streams(16 * mib, 16 * mib), "2 ranks on 32 MiB: from 16 MiB");
    TEST_ASSERT(!copy_streams(COPY_STREAM_MIN - 1, 0) && copy_streams(COPY_STREAM_MIN, 0),
                "no cache known: from COPY_STREAM_MIN");
    TEST_ASSERT(!copy_streams(2 * mib, 1 * mib), "below COPY_STREAM_MIN, whatever the cache");

#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2")) { /* elsewhere every copy is plain */
        check_shared_choice(dst, src);
        check_shared_pieces(dst, src);
    }
#endif
    free(src);
    free(dst);
    return test_report();
}
