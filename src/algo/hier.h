/* Where the ranks sit, for the hierarchical algorithms (ranks on several hosts): each host's ranks, its
 * leader (its lowest rank), and the orders those algorithms walk. Computed from prims_host_of alone, so
 * every rank computes the same layout. */
#ifndef CHORUS_HIER_H
#define CHORUS_HIER_H

#include "algo/prims.h"

typedef struct hier {
    int nranks, nhosts;
    int host;         /* this rank's host */
    int pos;          /* this rank's place among its host's ranks (0: the leader) */
    int nlocal;       /* ranks on this rank's host */
    const int *local; /* those ranks, in order */
    int *order;       /* every rank, host by host (hosts by number, ranks in order within one) */
    int *start;       /* host h's ranks are order[start[h]] to order[start[h + 1] - 1] */
    int *host_of;     /* each rank's host */
    int *place;       /* each rank's index in order */
    int *leaders;     /* each host's leader, its lowest rank */
} hier_t;

chorus_result_t hier_init(prims_t *p, hier_t *h);
/* The same from every rank's host (numbered 0, 1, ... in the order of their lowest ranks), as rank me. */
chorus_result_t hier_init_hosts(hier_t *h, int n, int me, const int *host_of);
void hier_free(hier_t *h);

/* A chain through every rank that crosses between hosts only H - 1 times: `head`, the other ranks of
 * head's host, then each following host's ranks (hosts in turn from head's). This rank's predecessor and
 * successor there (-1 at the ends). */
void hier_chain(const hier_t *h, int head, int *prev_p, int *next_p);

/* The runs of consecutive ranks of one host, in order: *at starts at 0; each call gives the next run's
 * first rank and its length, and returns 0 when there are no more. A host whose ranks are consecutive
 * (the usual placement) is one run. */
int hier_run(const hier_t *h, int host, int *at, int *first_p, int *count_p);

#endif
