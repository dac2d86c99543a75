/*
 * Hierarchical AllToAll, for ranks on several hosts: every block for a rank of another host travels
 * between hosts inside one message per pair of hosts, which the hosts' leaders (their lowest ranks)
 * exchange, where a flat AllToAll sends one message per pair of ranks (L x L per pair of hosts of L
 * ranks). Each rank sends its leader its blocks for the other hosts' ranks (one message per run of
 * consecutive ranks of other hosts: one or two where each host's ranks are consecutive); the ranks of a
 * host exchange their blocks for each other pairwise; the leader sorts what it gathered by destination
 * host, exchanges each host's part with that host's leader pairwise (at step s, leader of host h sends to
 * host h + s and receives from host h - s), sorts what it received by destination rank and sends each of
 * its ranks its blocks from the other hosts (again one message per run).
 *
 * The bytes between hosts are a flat AllToAll's, (p - L)/p n per rank, all of them from the leader: L (p
 * - L)/p n each way. What it saves is messages between hosts, H - 1 per leader against p - 1 per rank;
 * what it costs is the trip through the leader, whose link carries all of its host's traffic.
 *
 * Steps: L - 1 receives at the leader, L - 1 pairwise steps in the host, H - 1 exchanges, L - 1 sends
 * from the leader (L ranks on the largest host). Bytes between hosts: L (p - L)/p n each way per leader.
 * Copied, at the leader: its host's blocks for other hosts in and out of it through shared memory, (L -
 * 1) (p - L)/p n each way, two copies of each byte; the two sorts, L (p - L)/p n each; the pairwise steps,
 * (L - 1)/p n each way. Restrictions: ranks on two hosts or more, some host with two ranks or more
 * (ALGO_NEEDS_HOSTS). The leader's scratch holds 3 L (p - L)/p n.
 */
#include <string.h>

#include "algo/algo.h"
#include "algo/hier.h"
#include "algo/plan.h"
#include "util/copy.h"
#include "util/util.h"

/* The runs of consecutive ranks on other hosts than this rank's, in rank order: *at starts at 0; each
 * call gives the next run's first rank and length and returns 0 when there are no more. */
static int alltoall_hier_away_run(const hier_t *h, int *at, int *first_p, int *count_p)
{
    int r = *at;
    while (r < h->nranks && h->host_of[r] == h->host) r++;
    if (r >= h->nranks) return 0;
    int count = 1;
    while (r + count < h->nranks && h->host_of[r + count] != h->host) count++;
    *first_p = r;
    *count_p = count;
    *at = r + count;
    return 1;
}

/* The blocks for the other hosts' ranks to `peer` from sbuf, or else from it into rbuf, run by run in rank
 * order: at rank * block (a rank's own buffers), or at c * block for the c-th of those ranks (`packed`: a
 * leader's rows). */
static chorus_result_t alltoall_hier_away(prims_t *p, const hier_t *h, int peer, const char *sbuf, char *rbuf,
                                          int packed, size_t block)
{
    int at = 0, first, count;
    size_t c = 0;
    while (alltoall_hier_away_run(h, &at, &first, &count)) {
        size_t off = (packed ? c : (size_t)first) * block, bytes = (size_t)count * block;
        CHECK(sbuf ? prims_send(p, peer, sbuf + off, bytes) : prims_recv(p, peer, rbuf + off, bytes));
        c += (size_t)count;
    }
    return CHORUS_SUCCESS;
}

/* The host's ranks' blocks for each other, pairwise (step s: to the rank s places on, from the one s
 * places back): the block for the host's i-th rank at staged + i * block where the host's blocks were
 * staged in its order, else in sendbuf. */
static chorus_result_t alltoall_hier_local(prims_t *p, const hier_t *h, const char *send, const char *staged,
                                           char *recv, size_t block)
{
    int me = h->local[h->pos];
    const char *mine = staged ? staged + (size_t)h->pos * block : send + (size_t)me * block;
    if (mine != recv + (size_t)me * block)
        prims_copy_out(p, recv + (size_t)me * block, mine, block, block * (size_t)prims_nranks(p));
    for (int s = 1; s < h->nlocal; s++) {
        int ti = (h->pos + s) % h->nlocal, fi = plan_mod(h->pos - s, h->nlocal), to = h->local[ti];
        const char *block_to = staged ? staged + (size_t)ti * block : send + (size_t)to * block;
        CHECK(prims_sendrecv(p, to, block_to, block, h->local[fi], recv + (size_t)h->local[fi] * block, block));
    }
    return CHORUS_SUCCESS;
}

/* Where host k's part starts among the other hosts' ranks, host by host (k is not this rank's host). */
static size_t alltoall_hier_section(const hier_t *h, int k)
{
    return (size_t)(h->start[k] - (k > h->host ? h->nlocal : 0));
}

/*
 * The leader's part, in its scratch of 3 L M blocks (M = p - L, the other hosts' ranks):
 * - `away` (rows 1 to L - 1): what its ranks sent, row i - 1 the blocks of the host's i-th rank for the
 *   other hosts' ranks in rank order (index c: the rank's place among them); then what goes back to them,
 *   the same way;
 * - `out`: host k's part at L section(k) blocks, [i][j]: from the host's i-th rank to host k's j-th rank;
 * - `in`: host k's part at L section(k) blocks, [j][i]: from host k's j-th rank to the host's i-th rank.
 */
static chorus_result_t alltoall_hier_leader(prims_t *p, const hier_t *h, const char *send, char *recv,
                                            const char *staged, size_t block)
{
    int L = h->nlocal;
    size_t M = (size_t)(h->nranks - L), rows = (size_t)L * M;
    char *away, *out, *in;
    CHECK(prims_scratch(p, 1, rows ? 3 * rows * block : 1, (void **)&away));
    out = away + rows * block;
    in = out + rows * block;
    for (int i = 1; i < L; i++)
        CHECK(alltoall_hier_away(p, h, h->local[i], NULL, away + (size_t)(i - 1) * M * block, 1, block));
    CHECK(alltoall_hier_local(p, h, send, staged, recv, block));
    /* Sorted by destination host: row 0 from sendbuf, the others from `away`. */
    for (int r = 0, c = 0; r < h->nranks; r++) {
        int k = h->host_of[r];
        if (k == h->host) continue;
        size_t lk = (size_t)(h->start[k + 1] - h->start[k]), j = (size_t)(h->place[r] - h->start[k]);
        char *to = out + ((size_t)L * alltoall_hier_section(h, k) + j) * block;
        memcpy(to, send + (size_t)r * block, block);
        for (int i = 1; i < L; i++)
            memcpy(to + (size_t)i * lk * block, away + ((size_t)(i - 1) * M + (size_t)c) * block, block);
        c++;
    }
    for (int s = 1; s < h->nhosts; s++) {
        int kt = plan_mod(h->host + s, h->nhosts), kf = plan_mod(h->host - s, h->nhosts);
        size_t lt = (size_t)(h->start[kt + 1] - h->start[kt]), lf = (size_t)(h->start[kf + 1] - h->start[kf]);
        CHECK(prims_sendrecv(p, h->leaders[kt], out + (size_t)L * alltoall_hier_section(h, kt) * block,
                             (size_t)L * lt * block, h->leaders[kf],
                             in + (size_t)L * alltoall_hier_section(h, kf) * block, lf * (size_t)L * block));
    }
    /* Sorted by destination rank: the leader's own blocks straight into recvbuf, the others' into `away`
     * in rank order, as their messages take them. */
    for (int r = 0, c = 0; r < h->nranks; r++) {
        int k = h->host_of[r];
        if (k == h->host) continue;
        size_t j = (size_t)(h->place[r] - h->start[k]);
        const char *from = in + ((size_t)L * alltoall_hier_section(h, k) + j * (size_t)L) * block;
        memcpy(recv + (size_t)r * block, from, block);
        for (int i = 1; i < L; i++)
            memcpy(away + ((size_t)(i - 1) * M + (size_t)c) * block, from + (size_t)i * block, block);
        c++;
    }
    for (int i = 1; i < L; i++)
        CHECK(alltoall_hier_away(p, h, h->local[i], away + (size_t)(i - 1) * M * block, NULL, 1, block));
    return CHORUS_SUCCESS;
}

chorus_result_t alltoall_hier(prims_t *p, const coll_args_t *a)
{
    size_t block = a->count * dtype_size(a->dtype);
    const char *send = a->sendbuf;
    char *recv = a->recvbuf;
    hier_t h;
    CHECK(hier_init(p, &h));
    /* In place, the host's blocks are staged first: the pairwise steps write over blocks still to send.
     * The other hosts' blocks leave (to the leader, or into its sort) before anything arrives over them. */
    char *staged = NULL;
    size_t staged_bytes = (size_t)h.nlocal * block;
    chorus_result_t res = CHORUS_SUCCESS;
    if (send == recv) {
        res = prims_scratch(p, 0, staged_bytes ? staged_bytes : 1, (void **)&staged);
        for (int i = 0; i < h.nlocal && res == CHORUS_SUCCESS; i++)
            memcpy(staged + (size_t)i * block, send + (size_t)h.local[i] * block, block);
    }
    if (res == CHORUS_SUCCESS && h.pos == 0) {
        res = alltoall_hier_leader(p, &h, send, recv, staged, block);
    } else if (res == CHORUS_SUCCESS) {
        res = alltoall_hier_away(p, &h, h.local[0], send, NULL, 0, block);
        if (res == CHORUS_SUCCESS) res = alltoall_hier_local(p, &h, send, staged, recv, block);
        if (res == CHORUS_SUCCESS) res = alltoall_hier_away(p, &h, h.local[0], NULL, recv, 0, block);
    }
    hier_free(&h);
    return res;
}

/* The terms of the comment above, for the cost model (algo.h): the leader's path, its shared-memory
 * traffic priced as the two copies a connection makes of each byte, every step at the link's latency. */
algo_cost_t alltoall_hier_cost(const algo_shape_t *s)
{
    double n = s->n, l = CHORUS_MAX(s->per_host, 1), h = CHORUS_MAX(s->hosts, 1), away = (s->p - l) / s->p * n;
    /* By level: the leaders' exchanges and sorts; inside each host the blocks for other hosts into the
     * leader and back out (one way at the leader) and the pairwise steps. */
    return (algo_cost_t){.link = ALGO_LINK_NET, .steps = h - 1, .bytes = l * away, .copied = 2 * l * away,
                         .inside_steps = 3 * (l - 1), .inside_bytes = (l - 1) / s->p * n,
                         .inside_oneway = 2 * (l - 1) * away};
}
