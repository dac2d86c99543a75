/* The two ring phases shared by the ring algorithms. Blocks are the prims_partition() of count elements
 * into p blocks; `shift` rotates which block a rank handles at each step. */
#ifndef CHORUS_RING_H
#define CHORUS_RING_H

#include "algo/plan.h"
#include "algo/prims.h"

/* Where the reduced block `block` received at ring step `step` is stored (send + offset for in-place
 * layouts, or a scratch buffer). */
typedef char *(*ring_out_fn)(void *ctx, int block, int step);

/* p-1 steps: at step s rank r sends block (r + shift - s) and receives block (r + shift - s - 1), storing
 * out = send[block] OP received; the block sent at step s > 0 is the one stored at step s - 1. Rank r ends
 * holding the full reduction of block (r + shift + 1) mod p, at out(block, p - 2). */
chorus_result_t ring_reduce_scatter(prims_t *p, const char *send, size_t count, const prims_reduce_t *red, int shift,
                                    ring_out_fn out, void *ctx);

/* p-1 steps: rank r starts holding block (r + shift) of buf; at step s it sends block (r + shift - s) and
 * receives block (r + shift - s - 1). Every rank ends with every block. */
chorus_result_t ring_allgather(prims_t *p, char *buf, size_t count, size_t elem, int shift);

/* The same over a subset of the ranks: member i of the ring is ranks[i] (NULL: rank i), this rank is
 * member me; blocks are the partition into n (the hierarchical AllReduce's ring of host leaders). */
typedef struct ring_group {
    const int *ranks;
    int n;
    int me;
} ring_group_t;
chorus_result_t ring_reduce_scatter_in(prims_t *p, const ring_group_t *g, const char *send, size_t count,
                                       const prims_reduce_t *red, int shift, ring_out_fn out, void *ctx);
chorus_result_t ring_allgather_in(prims_t *p, const ring_group_t *g, char *buf, size_t count, size_t elem, int shift);

/* The ring_out_fn of in-place layouts: block b is stored at its own offset in base. ctx: ring_layout_t. */
typedef struct ring_layout {
    char *base;
    size_t count;
    int nranks;
    size_t elem;
} ring_layout_t;
char *ring_out_inplace(void *ctx, int block, int step);

#endif
