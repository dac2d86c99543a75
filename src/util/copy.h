/*
 * Bulk copies of the data path (slots, rings, a rank's own block): memcpy, except where memcpy is slow.
 *
 * glibc's memcpy moves mid-sized blocks (from a few KiB to about the L2 size) with `rep movsb`. On an AMD
 * EPYC virtual machine that ran 4-8x slower when source and destination sit at different offsets within
 * a cache line than when they share one: a 2-rank direct Broadcast of 1 MiB from a buffer 16 bytes past
 * a page (where malloc puts large blocks) took 640-730 us against 94-140 us from a page-aligned one, and
 * glibc's own vector loop (rep movsb turned off with GLIBC_TUNABLES) took 94. So copies of that size
 * between mutually misaligned buffers take a vector loop of our own (AVX2 where the CPU has it); every
 * other copy is memcpy's.
 */
#ifndef CHORUS_UTIL_COPY_H
#define CHORUS_UTIL_COPY_H

#include <stddef.h>

/* memcpy(dst, src, n): the regions must not overlap. */
void copy_bytes(void *dst, const void *src, size_t n);

#endif
