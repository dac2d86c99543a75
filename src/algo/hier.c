/* The host layout of the hierarchical algorithms (hier.h). */
#include "algo/hier.h"

#include <stdlib.h>

#include "algo/plan.h"

chorus_result_t hier_init_hosts(hier_t *h, int n, int me, const int *host_of)
{
    *h = (hier_t){.nranks = n, .host = host_of[me]};
    for (int r = 0; r < n; r++)
        if (host_of[r] >= h->nhosts) h->nhosts = host_of[r] + 1;
    int nh = h->nhosts;
    h->order = malloc(sizeof(int) * (3 * (size_t)n + 3 * (size_t)nh + 2));
    if (!h->order) return CHORUS_ERR_NO_MEMORY;
    h->host_of = h->order + n;
    h->place = h->host_of + n;
    h->start = h->place + n;
    h->leaders = h->start + nh + 1;
    int *next = h->leaders + nh; /* where each host's next rank goes */
    for (int k = 0; k <= nh; k++) h->start[k] = 0;
    for (int r = 0; r < n; r++) h->start[(h->host_of[r] = host_of[r]) + 1]++;
    for (int k = 0; k < nh; k++) h->start[k + 1] += h->start[k];
    for (int k = 0; k < nh; k++) next[k] = h->start[k];
    for (int r = n - 1; r >= 0; r--) h->leaders[host_of[r]] = r;
    for (int r = 0; r < n; r++) {
        h->place[r] = next[host_of[r]]++;
        h->order[h->place[r]] = r;
    }
    h->local = h->order + h->start[h->host];
    h->nlocal = h->start[h->host + 1] - h->start[h->host];
    h->pos = h->place[me] - h->start[h->host];
    return CHORUS_SUCCESS;
}

chorus_result_t hier_init(prims_t *p, hier_t *h)
{
    int n = prims_nranks(p);
    int *host_of = malloc(sizeof(int) * (size_t)n);
    if (!host_of) return CHORUS_ERR_NO_MEMORY;
    for (int r = 0; r < n; r++) host_of[r] = prims_host_of(p, r);
    chorus_result_t res = hier_init_hosts(h, n, prims_rank(p), host_of);
    free(host_of);
    return res;
}

void hier_free(hier_t *h)
{
    free(h->order);
    *h = (hier_t){0};
}

/* Place i of hier_chain's order from head, whose host is k and index in order j: head's host first (head
 * moved to its front), then the hosts after it, wrapping around. The order's index of that rank. */
static int hier_chain_at(const hier_t *h, int k, int j, int i)
{
    int nk = h->start[k + 1] - h->start[k];
    if (i < nk) return i == 0 ? j : h->start[k] + (i <= j - h->start[k] ? i - 1 : i);
    return (h->start[k + 1] + i - nk) % h->nranks;
}

void hier_chain(const hier_t *h, int head, int *prev_p, int *next_p)
{
    int k = h->host_of[head], j = h->place[head], me = h->local[h->pos], at = h->place[me], i;
    int nk = h->start[k + 1] - h->start[k];
    if (h->host == k) /* in head's host: head first, the others after it in order */
        i = me == head ? 0 : at < j ? at - h->start[k] + 1 : at - h->start[k];
    else /* the hosts after head's: their index in order past head's host, wrapping around */
        i = nk + plan_mod(at - h->start[k + 1], h->nranks);
    *prev_p = i > 0 ? h->order[hier_chain_at(h, k, j, i - 1)] : -1;
    *next_p = i + 1 < h->nranks ? h->order[hier_chain_at(h, k, j, i + 1)] : -1;
}

int hier_run(const hier_t *h, int host, int *at, int *first_p, int *count_p)
{
    int j = h->start[host] + *at, end = h->start[host + 1];
    if (j >= end) return 0;
    int count = 1;
    while (j + count < end && h->order[j + count] == h->order[j] + count) count++;
    *first_p = h->order[j];
    *count_p = count;
    *at += count;
    return 1;
}
