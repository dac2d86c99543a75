/* copy_bytes, copy_out and copy_out_part against memcpy, byte for byte: every size around the loop's and the streaming
 * copy's thresholds and every relative offset of source and destination within a cache line (the loop's ragged
 * head and tail), destinations at several offsets within a page (the streaming copy's head), with guard
 * bytes around the destination that must stay untouched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/copy.h"

typedef void copy_fn(void *, const void *, size_t);

/* A piece of a large output: streamed whatever its own size, from COPY_PIECE_STREAM_MIN. */
static void copy_piece(void *dst, const void *src, size_t n) { copy_out_part(dst, src, n, COPY_STREAM_MIN); }

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
                                   (1u << 20) - 1, 1u << 20, (1u << 20) + 1, (4u << 20) - 1, 4u << 20,
                                   (4u << 20) + 1, (4u << 20) + 4 * 4096 + 77, (4u << 20) + 5 * 4096};
    int bad = 0;
    copy_fn *const copies[] = {copy_bytes, copy_out, copy_piece};
    const char *const names[] = {"copy_bytes", "copy_out", "copy_out_part"};
    for (int c = 0; c < 3; c++) {
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
    free(src);
    free(dst);
    return test_report();
}
