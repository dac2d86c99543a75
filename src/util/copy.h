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
 *
 * copy_out is for copies whose destination nothing reads back within the collective: a rank's own block
 * into its output, the last copy of a result. From COPY_STREAM_MIN up it streams: non-temporal stores,
 * four pages at a time, so the destination's lines are written without first being read into the cache,
 * a third less memory traffic. The direct algorithms write their outputs a slot-sized chunk at a time, each
 * chunk a piece of one large output: copy_out_part streams the pieces of an output of COPY_STREAM_MIN and
 * up (streamed, 4 ranks' direct AllGather and AllToAll of 16 and 64 MiB out of place took 0.6 to 0.8 of
 * their time with plain stores on a Xeon virtual machine; docs/design.md, Copies). The algorithms pass
 * as `whole` what prims_stream_whole leaves of their output's size: 0 where the host's outputs fit its
 * last-level cache (copy_streams below), where plain stores are faster.
 * glibc does the same only past its non-temporal threshold, three quarters of the shared cache a thread
 * may claim; a virtual machine reports its host's whole L3 (260 MiB on one Xeon VM, a threshold of
 * 99 MiB), so copies of 4 to 64 MiB ran at 6-7 GB/s there with plain stores against 10 streamed, and a
 * 2-rank AllGather of 64 MiB, whose own-block copy is 32 MiB, took 10.8 ms against 8.9 (medians of 7).
 * Streaming where the destination is read soon loses: the in-place single-copy AllToAll stages its input
 * in scratch that the peers then read, and of 4 and 16 MiB streamed that took 17-23 % longer, the peers
 * reading from memory what they had found in L3. Below the threshold memcpy stays (a 1 MiB copy between
 * buffers that sit in L2: 26 GB/s against 20 streamed).
 */
#ifndef CHORUS_UTIL_COPY_H
#define CHORUS_UTIL_COPY_H

#include <stddef.h>
#include <stdint.h>

/* memcpy(dst, src, n): the regions must not overlap. */
void copy_bytes(void *dst, const void *src, size_t n);

/* From here copy_out streams: twice the largest per-core L2 measured (2 MiB). */
#define COPY_STREAM_MIN (4u << 20)

/* Whether the outputs of a collective whose output on each rank is `whole` bytes stream: from
 * COPY_STREAM_MIN, once the host's outputs fill its last-level cache: whole at least cache_share, that
 * cache over the ranks on the host (copy_cache_share; 0 where not known). Below, plain stores win, the
 * outputs staying in cache for whoever reads them next: on an AMD EPYC virtual machine (32 MiB of L3),
 * 2 ranks' direct AllGather, Broadcast and AllToAll of 4 MiB took 0.4 to 0.5 of the time with plain
 * stores, of 8 MiB 0.6 to 0.8, while from 16 MiB (4 ranks: from 8 MiB) streaming won as before
 * (docs/design.md, Copies). */
static inline int copy_streams(double whole, double cache_share)
{
    return whole >= COPY_STREAM_MIN && whole >= cache_share;
}

/* The largest last-level cache copy_cache_share believes: a virtual machine is told of its host's whole
 * L3 (host_l3_bytes), of which it sees a share. */
#define COPY_CACHE_MAX (32u << 20)

/* A rank's share of its host's last-level cache of l3_bytes (0: not known, taken as COPY_CACHE_MAX), at
 * most COPY_CACHE_MAX, among `ranks` ranks. */
static inline double copy_cache_share(size_t l3_bytes, int ranks)
{
    double cache = l3_bytes > 0 && l3_bytes < COPY_CACHE_MAX ? (double)l3_bytes : (double)COPY_CACHE_MAX;
    return cache / (ranks > 1 ? ranks : 1);
}

/* copy_bytes into a destination nothing reads back soon: large copies stream past the cache. */
void copy_out(void *dst, const void *src, size_t n);

/* One piece of n bytes of a larger copy_out of `whole` bytes made piece by piece (a chunk at a time through
 * arena slots): it streams when the whole would, once the piece spans a few pages (COPY_PIECE_STREAM_MIN).
 * A destination the collective has just read (an in-place call's chunk, in cache) is not such a copy:
 * pass whole = 0 there. */
#define COPY_PIECE_STREAM_MIN (16u << 10)
void copy_out_part(void *dst, const void *src, size_t n, size_t whole);

/* Copies into memory that another core reads next and this one writes again soon: the host arena's slots.
 * Each such write must take its lines back from the reader's cache first, and what that costs depends on
 * where the two cores sit: on an AMD EPYC virtual machine, for stretches of seconds to minutes, writing
 * 1 MiB into a slot the peer had just read took 430 us with plain stores against 22 otherwise, while
 * non-temporal stores took 37 (and 73 otherwise; the reader's copy out took 41 either way in the slow
 * stretches, 22 after plain stores and 52 after streamed ones in the others). Neither is right in both, and
 * nothing but the times tells them apart, so the writer times its copies of COPY_SHARED_MIN and up and
 * keeps the method that ran faster lately, one choice per size class (copy_shared_class: a small copy's
 * clock reads weigh more per byte). It counts time stamp counter ticks per byte: streaming needs x86-64
 * with AVX2, whose counters run at one constant rate, and a read takes 10 ns where clock_gettime takes
 * 23 (AMD EPYC virtual machine). A copy preempted by another rank on
 * the core only looks slow, so the chosen method counts by the best of its last COPY_SHARED_RECENT copies.
 * The other method is tried once after COPY_SHARED_TRY_MIN copies, then after twice as many each time the
 * choice holds (up to COPY_SHARED_TRY_MAX), and at once where even the best of the chosen one's recent
 * copies took twice its time at the last comparison. A trial of plain stores that runs faster than the
 * streamed copies' recent best switches back; one of streamed stores must run under COPY_SHARED_STREAM_WIN
 * of the plain copies' best: the readers of a streamed slot pay too, which the writer does not see (52
 * us for 1 MiB out of memory against 22 out of the writer's cache in the fast stretches): there, streamed
 * copies of 128 KiB took 0.37 to 0.59 of the time of plain ones into lines still in the reader's L2, yet
 * streaming made the 2-rank direct AllGather of 512 KiB 1.6 times as long. docs/design.md, Copies. */
#define COPY_SHARED_MIN (4u << 10)
#define COPY_SHARED_STREAM_WIN 0.25
#define COPY_SHARED_RECENT 4
#define COPY_SHARED_TRY_MIN 16
#define COPY_SHARED_TRY_MAX 1024
typedef struct copy_shared {
    double recent[COPY_SHARED_RECENT]; /* the chosen method's last copies, ticks per byte (0: none yet) */
    double at_choice; /* the chosen method's recent best when the two were last compared */
    unsigned copies;  /* copies by the chosen method since the last comparison */
    unsigned next;    /* the copy at which the other method is tried (0: not begun) */
    int streamed;     /* the method chosen: plain (0) or non-temporal (1) stores */
    int fixed;        /* 1: streamed holds the method, neither chosen nor timed (copy_shared_fix) */
} copy_shared_t;

/* The size classes that keep a choice each: from COPY_SHARED_MIN, by factors of 4 (4-16 KiB, 16-64 KiB, ...,
 * 1 MiB and up). A page and up: in the slow stretches plain stores of 4 to 64 KiB into slots lost as large
 * ones did (docs/design.md, Copies). */
#define COPY_SHARED_CLASSES 5
static inline int copy_shared_class(size_t n)
{
    int k = 0;
    while (k < COPY_SHARED_CLASSES - 1 && n >= (size_t)COPY_SHARED_MIN << (2 * (k + 1))) k++;
    return k;
}

/* copy_bytes(dst, src, n) into memory another core reads next, by the method c found faster lately (c: the
 * state of n's class). */
void copy_shared(copy_shared_t *c, void *dst, const void *src, size_t n);
/* The same for a slot filled by several copies (an AllToAll's pieces, one per peer, a slot's share each):
 * copy_shared_begin with their total, copy_shared_piece for each, copy_shared_end; the method is chosen
 * and timed for the whole, as one copy of the total would be (pieces below COPY_SHARED_MIN take plain
 * stores either way). */
typedef struct copy_shared_run {
    int64_t t0;   /* when it began: the time stamp counter */
    size_t n;     /* the total */
    int timed;    /* the total is COPY_SHARED_MIN or more (and the processor can stream): chosen and timed */
    int streamed; /* the method of this run */
    int trial;    /* the run tries the method not chosen */
} copy_shared_run_t;
void copy_shared_begin(copy_shared_t *c, copy_shared_run_t *r, size_t n);
void copy_shared_piece(const copy_shared_run_t *r, void *dst, const void *src, size_t n);
void copy_shared_end(copy_shared_t *c, const copy_shared_run_t *r);
/* Every copy by c takes plain stores (streamed 0) or streamed ones (1, where the processor can stream), no
 * longer timed: the knob CHORUS_SHM_SLOT_STORES. */
void copy_shared_fix(copy_shared_t *c, int streamed);
/* Whether copy_shared of n bytes streams now, but for a trial of plain stores. */
static inline int copy_shared_streams(const copy_shared_t *c, size_t n) { return n >= COPY_SHARED_MIN && c->streamed; }

#endif
