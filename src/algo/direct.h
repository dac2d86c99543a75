/* Helpers shared by the direct-access algorithms (*_direct.c, *_cma.c, allreduce_oneshot.c, allreduce_twoshot.c). */
#ifndef CHORUS_DIRECT_H
#define CHORUS_DIRECT_H

#include "algo/algo.h"

/* Elements of `elem` bytes that fit a slot divided into `parts` equal pieces (at least 1). */
static inline size_t direct_chunk_elems(const prims_t *p, int parts, size_t elem)
{
    size_t n = prims_direct_bytes(p) / (size_t)parts / elem;
    return n ? n : 1;
}

/* The rank whose slot (or memory) this rank reads or writes i-th (i = 0 .. nranks - 1) where it visits
 * every rank's: its own first, then the next ranks round, so that no two ranks visit the same rank at
 * once. In rank order every rank pulls rank 0's slot out of rank 0's cache at once, then rank 1's: 2
 * ranks' two-shot AllReduce of 1 MiB took 81 us a call gathering its slices in rank order, 65 in this one
 * (docs/algorithms.md, "Reading the slots in turn"). */
static inline int direct_turn(int rank, int nranks, int i) { return (rank + i) % nranks; }

/* Part i of a combination (direct_reduce_own): from rank `first` round, slots[q] at byte offset off, but
 * part `mine` (a rank, or -1 for none) at own. */
static inline const void *direct_part(const void *const *slots, int nranks, size_t off, int first, int i, int mine,
                                      const void *own)
{
    int q = direct_turn(first, nranks, i);
    return q == mine ? own : (const char *)slots[q] + off;
}

/* dst = the nranks parts combined, part q being slots[q] at byte offset off but part `mine` (a rank, or -1
 * for none) `own`; then finish (avg). With mine, the parts are taken in turn from it (direct_turn), as
 * only this rank combines this data: its result is the same on every rank it reaches, and no two ranks
 * read one rank's slot first. Without (one-shot: every rank combines the same data), in rank order, so
 * that every rank gets the same bits. dst may be own: it is read first, element by element as written. */
static inline void direct_reduce_own(void *dst, const void *const *slots, int nranks, size_t off, size_t count,
                                     int mine, const void *own, const prims_reduce_t *red)
{
    int first = mine >= 0 ? mine : 0;
    reduce_apply3(dst, direct_part(slots, nranks, off, first, 0, mine, own),
                  direct_part(slots, nranks, off, first, 1, mine, own), count, red->dtype, red->op);
    for (int i = 2; i < nranks; i++)
        reduce_apply(dst, direct_part(slots, nranks, off, first, i, mine, own), count, red->dtype, red->op);
    reduce_finish(dst, count, red->dtype, red->op, nranks);
}

/* direct_reduce_own with every part read from the slots. */
static inline void direct_reduce(void *dst, const void *const *slots, int nranks, size_t off, size_t count,
                                 const prims_reduce_t *red)
{
    direct_reduce_own(dst, slots, nranks, off, count, -1, NULL, red);
}

/* A phase with nothing in it: this rank says it is done with the data of the phases before (a peer's
 * buffer it read, or its own that peers read) and waits until every rank has said so. */
chorus_result_t direct_empty_phase(prims_t *p);
/* Begin a phase, copy bytes from src into this rank's slot and publish them. */
chorus_result_t direct_put(prims_t *p, const void *src, size_t bytes);
/* Begin a phase and publish p pieces of cnt elements: piece q is buf's block q (of block_elems elements)
 * from element off on. Piece `skip` (a rank, or -1 for none) is left out: its place in the slot stays
 * unwritten, for the one piece nobody else reads. */
chorus_result_t direct_put_pieces(prims_t *p, const char *buf, size_t block_elems, size_t off, size_t cnt,
                                  size_t elem, int skip);
/* The reduce-scatter half of two-shot AllReduce, for a chunk of cnt elements at in: phase 1 publishes the
 * chunk but for this rank's slice of it (prims_partition), phase 2 that slice combined from all p chunks
 * (its own part read from in). */
chorus_result_t direct_reduce_scatter_chunk(prims_t *p, const char *in, size_t cnt, const prims_reduce_t *red);
/* Wait for the phase's p slices of a chunk of cnt elements and copy them to their places in out (this
 * rank's first: direct_turn), a piece of an output of `whole` bytes (copy_out_part; 0 where out is in
 * cache). */
chorus_result_t direct_gather_slices(prims_t *p, char *out, size_t cnt, size_t elem, size_t whole);

/* The single-copy combination of this rank's slice of a reduction, cnt elements, a chunk at a time
 * (prims_chunk_bytes): rank q's part of the slice is at addrs[stride q] + at in its address space (read
 * with process_vm_readv into scratch, or in place where it is a chorus_mem_alloc buffer this rank has
 * mapped), this rank's at own; the p parts are combined in rank order into dst, so that every rank that
 * combines the same data gets the same bits. Each combined chunk, while it is in this rank's cache, is
 * also written into the output at addrs[stride q + 1] + at of rank `to` (DIRECT_TO_NONE: of no rank;
 * DIRECT_TO_ALL: of every peer). dst == own is in place; dst NULL keeps no result here (the chunks are
 * combined in scratch); out of place, where dst is a piece of an output of `whole` bytes that streams
 * (copy_out_part), the chunks are combined in scratch and copied into dst. */
#define DIRECT_TO_NONE (-1)
#define DIRECT_TO_ALL (-2)
chorus_result_t direct_combine_peers(prims_t *p, const uint64_t *addrs, int stride, uint64_t at, const char *own,
                                     char *dst, size_t cnt, const prims_reduce_t *red, int to, size_t whole);

/* The one-shot and two-shot reductions (AllReduce when everyone, Reduce to a->root otherwise), chunk by
 * slot-sized chunk. One-shot: every rank publishes its chunk and the receivers combine all p of them. Two-
 * shot: direct_reduce_scatter_chunk, then the receivers gather the p combined slices. */
chorus_result_t direct_oneshot(prims_t *p, const coll_args_t *a, int everyone);
chorus_result_t direct_twoshot(prims_t *p, const coll_args_t *a, int everyone);

#endif
