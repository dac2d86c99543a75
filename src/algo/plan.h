/*
 * Schedules: which peer and which block each rank handles at each step, computed without I/O so that
 * tests/unit/test_plans.c can check them symbolically for every rank count. The algorithm files run
 * these plans through the primitives.
 */
#ifndef CHORUS_PLAN_H
#define CHORUS_PLAN_H

static inline int plan_mod(int x, int n) { return ((x % n) + n) % n; }

/* Ring step `step`: rank sends block (rank + shift - step) to its right neighbour and receives block
 * (rank + shift - step - 1) from its left one. */
typedef struct plan_ring_step {
    int right, left, send_block, recv_block;
} plan_ring_step_t;

static inline plan_ring_step_t plan_ring(int rank, int n, int shift, int step)
{
    plan_ring_step_t s = {plan_mod(rank + 1, n), plan_mod(rank - 1, n), plan_mod(rank + shift - step, n),
                          plan_mod(rank + shift - step - 1, n)};
    return s;
}

/* A chain that starts at `head` and visits head + 1, head + 2, ... : the rank's predecessor and successor
 * (-1 at the ends). */
static inline void plan_chain(int rank, int n, int head, int *prev_p, int *next_p)
{
    int pos = plan_mod(rank - head, n);
    *prev_p = pos == 0 ? -1 : plan_mod(rank - 1, n);
    *next_p = pos == n - 1 ? -1 : plan_mod(rank + 1, n);
}

/* Pairwise exchange step `step` (1 <= step < n): send to rank + step, receive from rank - step. */
static inline void plan_pairwise(int rank, int n, int step, int *to_p, int *from_p)
{
    *to_p = plan_mod(rank + step, n);
    *from_p = plan_mod(rank - step, n);
}

/* Dissemination round with distance `dist` (1, 2, 4, ... < n): signal rank + dist, hear from rank - dist. */
static inline void plan_dissemination(int rank, int n, int dist, int *to_p, int *from_p)
{
    *to_p = plan_mod(rank + dist, n);
    *from_p = plan_mod(rank - dist, n);
}

static inline int plan_lowbit(int v) { return v & -v; }

/* The largest power of two <= n (n >= 1), the smallest >= n, and log2 of a power of two. */
static inline int plan_pow2_floor(int n)
{
    int v = 1;
    while (v <= n / 2) v *= 2;
    return v;
}

static inline int plan_pow2_ceil(int n)
{
    int v = 1;
    while (v < n) v *= 2;
    return v;
}

static inline int plan_log2(int pow2)
{
    int k = 0;
    while ((1 << k) < pow2) k++;
    return k;
}

/* ---- Recursive halving and doubling on any rank count ----
 * The ranks are folded onto pv, the largest power of two <= n (rem = n - pv), the usual way: taking ranks
 * relative to a root, the first 2 rem pair up; the even one of each pair stays, as vrank rel / 2, and the
 * odd one hands its data over before the power-of-two part and gets the result after. From 2 rem on,
 * relative rank rel is vrank rel - rem. */
typedef struct plan_fold {
    int pv, rem;
    int vrank;   /* -1: this rank is folded out */
    int partner; /* the other rank of this rank's pair, -1 if it has none */
} plan_fold_t;

/* The relative rank of vrank v (v == pv gives n). Virtual block v, in the layouts where blocks belong to
 * ranks, is the real blocks [plan_fold_rel(v), plan_fold_rel(v + 1)): the blocks of the ranks it stands for. */
static inline int plan_fold_rel(int v, int rem) { return v < rem ? 2 * v : v + rem; }

static inline plan_fold_t plan_fold(int rank, int n, int root)
{
    plan_fold_t f = {plan_pow2_floor(n), 0, 0, -1};
    f.rem = n - f.pv;
    int rel = plan_mod(rank - root, n);
    if (rel < 2 * f.rem) {
        f.vrank = rel % 2 ? -1 : rel / 2;
        f.partner = plan_mod((rel ^ 1) + root, n);
    } else {
        f.vrank = rel - f.rem;
    }
    return f;
}

/* The real rank behind vrank v. */
static inline int plan_fold_rank(int v, int n, int root)
{
    return plan_mod(plan_fold_rel(v, n - plan_pow2_floor(n)) + root, n);
}

/* One step between vranks: exchange with `partner`, sending the nblocks virtual blocks from send_lo and
 * receiving as many from recv_lo. */
typedef struct plan_rhd_step {
    int partner, send_lo, recv_lo, nblocks;
} plan_rhd_step_t;

/* Recursive halving, step s (0 <= s < log2 pv), distance d = pv / 2^(s+1): vrank v holds blocks
 * [lo, lo + 2d) (lo: v rounded down to a multiple of 2d), sends the half its partner v ^ d keeps and
 * receives, to reduce, the half that contains v. After the last step v holds block v alone. */
static inline plan_rhd_step_t plan_halving(int v, int pv, int s)
{
    int d = pv >> (s + 1), lo = v & ~(2 * d - 1);
    plan_rhd_step_t st = {v ^ d, v & d ? lo : lo + d, v & d ? lo + d : lo, d};
    return st;
}

/* Recursive doubling, step s, distance d = 2^s: vrank v holds blocks [v - v % d, + d), sends them to
 * v ^ d and receives that rank's d blocks. After log2 pv steps every vrank holds every block. */
static inline plan_rhd_step_t plan_doubling(int v, int s)
{
    int d = 1 << s;
    plan_rhd_step_t st = {v ^ d, v & ~(d - 1), (v ^ d) & ~(d - 1), d};
    return st;
}

/* ---- Binomial tree ----
 * Over relative ranks v = rank - root: the parent of v is v with its lowest set bit cleared; the children
 * are v + 2^k for every 2^k below v's lowest set bit (below n for the root) with v + 2^k < n. The subtree
 * of v is the relative ranks [v, v + plan_binomial_size(v, n)). */
static inline int plan_binomial_parent(int v) { return v ? v & (v - 1) : -1; }

static inline int plan_binomial_size(int v, int n)
{
    int span = v ? plan_lowbit(v) : plan_pow2_ceil(n);
    return span < n - v ? span : n - v;
}

/* Writes the children of v, largest subtree first, into kids (room for 31); returns how many. */
static inline int plan_binomial_children(int v, int n, int *kids)
{
    int k = 0;
    for (int d = (v ? plan_lowbit(v) : plan_pow2_ceil(n)) / 2; d >= 1; d /= 2)
        if (v + d < n) kids[k++] = v + d;
    return k;
}

/* ---- Binary trees of the double binary tree ----
 * plan_btree: NCCL's in-order binary tree. Rank 0 is the root, with a single child (the largest power of
 * two below n); a rank r with lowest set bit b > 1 has children r - b/2 and r + b/2, the latter replaced
 * by r + b/4, r + b/8, ... while it is not below n; odd ranks are leaves. kids: room for 2. */
static inline void plan_btree(int r, int n, int *parent_p, int *kids, int *nkids_p)
{
    int nk = 0;
    if (r == 0) {
        *parent_p = -1;
        if (n > 1) kids[nk++] = plan_pow2_floor(n - 1);
        *nkids_p = nk;
        return;
    }
    int b = plan_lowbit(r), up = (r ^ b) | (b << 1);
    *parent_p = up < n ? up : r ^ b;
    if (b > 1) {
        kids[nk++] = r - b / 2;
        int h = b / 2;
        while (h >= 1 && r + h >= n) h /= 2;
        if (h >= 1) kids[nk++] = r + h;
    }
    *nkids_p = nk;
}

/* Tree 0 or 1 of the double binary tree. Tree 1 is tree 0 mirrored (rank n - 1 - r) when n is even and
 * shifted by one (rank r - 1) when n is odd, so that the leaves of one tree are inner ranks of the other:
 * every rank (but rank 0 when n is odd) forwards for at most one of the two halves of the data. */
static inline void plan_dbt(int r, int n, int tree, int *parent_p, int *kids, int *nkids_p)
{
    if (tree == 0) {
        plan_btree(r, n, parent_p, kids, nkids_p);
        return;
    }
    int odd = n % 2;
    plan_btree(odd ? plan_mod(r - 1, n) : n - 1 - r, n, parent_p, kids, nkids_p);
    if (*parent_p >= 0) *parent_p = odd ? plan_mod(*parent_p + 1, n) : n - 1 - *parent_p;
    for (int i = 0; i < *nkids_p; i++) kids[i] = odd ? plan_mod(kids[i] + 1, n) : n - 1 - kids[i];
}

/* ---- Bruck ----
 * AllGather, distance d (1, 2, 4, ... < n): position j of rank r's buffer holds the block of rank r + j.
 * Holding positions [0, d), rank r sends the first min(d, n - d) to r - d and receives as many from r + d
 * into positions [d, ...). After ceil(log2 n) steps every position is filled. */
static inline void plan_bruck_allgather(int r, int n, int d, int *to_p, int *from_p, int *nblocks_p)
{
    *to_p = plan_mod(r - d, n);
    *from_p = plan_mod(r + d, n);
    *nblocks_p = d < n - d ? d : n - d;
}

/* AllToAll, distance d: position j of rank r's buffer starts with r's block for rank r + j. Each step
 * sends the positions j with j & d to rank r + d and receives the same positions from r - d, so a block
 * keeps its position and moves j ranks in total. At the end position j holds what rank r - j sent to r. */
static inline void plan_bruck_alltoall(int r, int n, int d, int *to_p, int *from_p)
{
    *to_p = plan_mod(r + d, n);
    *from_p = plan_mod(r - d, n);
}

/* ---- Ring AllToAll ----
 * Step s (1 <= s < n): rank r sends to r + 1 the n - s blocks that rank r - s + 1 addressed to r + 1,
 * ..., r + n - s, in that order, and receives from r - 1 the n - s blocks rank r - s addressed to r, ...,
 * r + n - s - 1. The first of those is r's own; r forwards the rest at step s + 1. *src_p: the rank whose
 * blocks arrive at step s. */
static inline void plan_ring_alltoall(int r, int n, int s, int *to_p, int *from_p, int *src_p, int *nblocks_p)
{
    *to_p = plan_mod(r + 1, n);
    *from_p = plan_mod(r - 1, n);
    *src_p = plan_mod(r - s, n);
    *nblocks_p = n - s;
}

#endif
