/* copy_bytes against memcpy, byte for byte: every size around the loop's thresholds and every relative
 * offset of source and destination within a cache line (the loop's ragged head and tail), with guard
 * bytes around the destination that must stay untouched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/copy.h"

static int check_one(size_t n, size_t soff, size_t doff, unsigned char *src, unsigned char *dst)
{
    const size_t guard = 64;
    memset(dst, 0xA5, n + doff + 2 * guard);
    for (size_t i = 0; i < n; i++) src[soff + i] = (unsigned char)(i * 131u + soff * 7u + 1u);
    copy_bytes(dst + guard + doff, src + soff, n);
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
    const size_t max = (1u << 20) + 4096;
    unsigned char *src = NULL, *dst = NULL;
    TEST_ASSERT(posix_memalign((void **)&src, 4096, max + 128) == 0, "alloc");
    TEST_ASSERT(posix_memalign((void **)&dst, 4096, max + 256) == 0, "alloc");
    static const size_t sizes[] = {0, 1, 31, 32, 63, 64, 4095, 4096, 4097, 4127, 4159, 65536, 65537, 262144 + 77,
                                   (1u << 20) - 1, 1u << 20, (1u << 20) + 1};
    int bad = 0;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (size_t soff = 0; soff < 64; soff += (sizes[k] > 100000 ? 13 : 1))
            for (size_t doff = 0; doff < 64; doff += (sizes[k] > 100000 ? 17 : 3))
                if (!check_one(sizes[k], soff, doff, src, dst) && bad++ < 5)
                    TEST_ASSERT(0, "copy of %zu bytes, source +%zu, destination +%zu differs", sizes[k], soff, doff);
    TEST_ASSERT(bad == 0, "%d copies differed from memcpy", bad);
    free(src);
    free(dst);
    return test_report();
}
