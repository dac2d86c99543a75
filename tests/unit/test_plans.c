/* The schedules of src/algo/plan.h, checked symbolically for every rank count from 1 to 64: each step's
 * sends meet the matching receives, reductions never count a rank twice, and every rank ends with what
 * the collective promises. Also the block partition behind uneven counts. */
#include <stdint.h>
#include <string.h>

#include "algo/plan.h"
#include "algo/prims.h"
#include "test.h"

#define MAXP 64

/* Ring reduce-scatter: partial[r][b] is the set of ranks whose block b rank r has folded in. */
static void check_ring_reduce_scatter(int n, int shift)
{
    static uint64_t partial[MAXP][MAXP], next[MAXP][MAXP];
    for (int r = 0; r < n; r++)
        for (int b = 0; b < n; b++) partial[r][b] = 1ull << r;
    for (int s = 0; s < n - 1; s++) {
        memcpy(next, partial, sizeof(partial));
        for (int r = 0; r < n; r++) {
            plan_ring_step_t st = plan_ring(r, n, shift, s);
            plan_ring_step_t rs = plan_ring(st.right, n, shift, s);
            TEST_ASSERT(rs.left == r && rs.recv_block == st.send_block, "n %d step %d: rank %d's send is not what %d receives", n, s, r, st.right);
            uint64_t in = partial[r][st.send_block];
            TEST_ASSERT(!(in & (1ull << st.right)), "n %d: rank %d would count itself twice", n, st.right);
            /* The receiver combines with its own input, untouched so far. */
            TEST_ASSERT(partial[st.right][st.send_block] == 1ull << st.right, "n %d: block reused", n);
            next[st.right][st.send_block] = in | (1ull << st.right);
        }
        memcpy(partial, next, sizeof(partial));
    }
    uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
    for (int r = 0; r < n; r++)
        TEST_ASSERT(partial[r][plan_mod(r + shift + 1, n)] == all, "n %d shift %d: rank %d does not own a full block", n, shift, r);
}

static void check_ring_allgather(int n, int shift)
{
    static uint64_t have[MAXP];
    for (int r = 0; r < n; r++) have[r] = 1ull << plan_mod(r + shift, n);
    for (int s = 0; s < n - 1; s++) {
        uint64_t next[MAXP];
        memcpy(next, have, sizeof(next));
        for (int r = 0; r < n; r++) {
            plan_ring_step_t st = plan_ring(r, n, shift, s);
            TEST_ASSERT(have[r] & (1ull << st.send_block), "n %d step %d: rank %d sends a block it lacks", n, s, r);
            TEST_ASSERT(plan_ring(st.right, n, shift, s).recv_block == st.send_block, "n %d: mismatched step", n);
            next[st.right] |= 1ull << st.send_block;
        }
        memcpy(have, next, sizeof(next));
    }
    uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
    for (int r = 0; r < n; r++) TEST_ASSERT(have[r] == all, "n %d: rank %d misses blocks", n, r);
}

static void check_chain(int n, int head)
{
    int visited = 0, r = head, prev, next;
    plan_chain(head, n, head, &prev, &next);
    TEST_ASSERT(prev == -1, "n %d: the head has a predecessor", n);
    for (;;) {
        visited++;
        plan_chain(r, n, head, &prev, &next);
        if (next < 0) break;
        int nprev, nnext;
        plan_chain(next, n, head, &nprev, &nnext);
        TEST_ASSERT(nprev == r, "n %d: %d -> %d but %d's predecessor is %d", n, r, next, next, nprev);
        r = next;
        if (visited > n) break;
    }
    TEST_ASSERT(visited == n && r == plan_mod(head - 1, n), "n %d head %d: chain covers %d ranks, ends at %d", n, head, visited, r);
}

static void check_pairwise_and_dissemination(int n)
{
    for (int s = 1; s < n; s++) {
        uint64_t got = 0;
        for (int r = 0; r < n; r++) {
            int to, from, to2, from2;
            plan_pairwise(r, n, s, &to, &from);
            plan_pairwise(to, n, s, &to2, &from2);
            TEST_ASSERT(from2 == r && to != r, "n %d step %d: pairwise mismatch at %d", n, s, r);
            got |= 1ull << to;
        }
        TEST_ASSERT(got == (n == 64 ? ~0ull : (1ull << n) - 1), "n %d step %d: not a permutation", n, s);
    }
    uint64_t heard[MAXP];
    for (int r = 0; r < n; r++) heard[r] = 1ull << r;
    for (int d = 1; d < n; d *= 2) {
        uint64_t next[MAXP];
        memcpy(next, heard, sizeof(next));
        for (int r = 0; r < n; r++) {
            int to, from;
            plan_dissemination(r, n, d, &to, &from);
            next[to] |= heard[r];
        }
        memcpy(heard, next, sizeof(next));
    }
    for (int r = 0; r < n; r++)
        TEST_ASSERT(heard[r] == (n == 64 ? ~0ull : (1ull << n) - 1), "n %d: barrier leaves rank %d early", n, r);
}

static uint64_t all_ranks(int n) { return n == 64 ? ~0ull : (1ull << n) - 1; }

/* Recursive halving then doubling over the fold, as AllReduce rhd runs them, for every root: every
 * virtual block is reduced over every rank exactly once, then reaches every rank. Also the block layout
 * of ReduceScatter / AllGather rhd: virtual block v is the real blocks of exactly the ranks it stands for. */
static void check_fold_halving_doubling(int n, int root)
{
    static uint64_t have[MAXP][MAXP], next[MAXP][MAXP]; /* have[vrank][vblock]: ranks folded in */
    plan_fold_t f0 = plan_fold(root, n, root);
    int pv = f0.pv, steps = plan_log2(pv);
    TEST_ASSERT(pv <= n && 2 * pv > n && f0.vrank == 0, "n %d: pv %d, root's vrank %d", n, pv, f0.vrank);
    int seen[MAXP] = {0};
    for (int r = 0; r < n; r++) {
        plan_fold_t f = plan_fold(r, n, root);
        if (f.vrank < 0) {
            plan_fold_t g = plan_fold(f.partner, n, root);
            TEST_ASSERT(g.vrank >= 0 && g.partner == r, "n %d: folded rank %d's partner %d does not keep it", n, r, f.partner);
            continue;
        }
        TEST_ASSERT(f.vrank < pv && plan_fold_rank(f.vrank, n, root) == r, "n %d: vrank %d of rank %d maps back wrong", n, f.vrank, r);
        seen[f.vrank]++;
        for (int b = 0; b < pv; b++) have[f.vrank][b] = (1ull << r) | (f.partner >= 0 ? 1ull << f.partner : 0);
        /* The real blocks of vblock v (relative ranks) hold this rank and its partner. */
        int lo = plan_fold_rel(f.vrank, f.rem), hi = plan_fold_rel(f.vrank + 1, f.rem);
        int rel = plan_mod(r - root, n);
        TEST_ASSERT(rel >= lo && rel < hi && hi - lo == (f.partner >= 0 ? 2 : 1), "n %d: vblock %d is [%d, %d)", n, f.vrank, lo, hi);
    }
    TEST_ASSERT(plan_fold_rel(pv, n - pv) == n, "n %d: the vblocks do not end at n", n);
    for (int v = 0; v < pv; v++) TEST_ASSERT(seen[v] == 1, "n %d: vrank %d taken %d times", n, v, seen[v]);
    for (int s = 0; s < steps; s++) {
        memcpy(next, have, sizeof(have));
        for (int v = 0; v < pv; v++) {
            plan_rhd_step_t st = plan_halving(v, pv, s), ps = plan_halving(st.partner, pv, s);
            TEST_ASSERT(ps.partner == v && ps.send_lo == st.recv_lo && ps.nblocks == st.nblocks, "n %d step %d: vranks %d and %d disagree", n, s, v, st.partner);
            for (int b = st.recv_lo; b < st.recv_lo + st.nblocks; b++) {
                TEST_ASSERT(!(have[v][b] & have[st.partner][b]), "n %d: block %d counts a rank twice", n, b);
                next[v][b] = have[v][b] | have[st.partner][b];
            }
        }
        memcpy(have, next, sizeof(have));
    }
    for (int v = 0; v < pv; v++) TEST_ASSERT(have[v][v] == all_ranks(n), "n %d: vrank %d's block is not complete", n, v);
    uint64_t got[MAXP];
    for (int v = 0; v < pv; v++) got[v] = 1ull << v;
    for (int s = 0; s < steps; s++) {
        uint64_t nxt[MAXP];
        memcpy(nxt, got, sizeof(got));
        for (int v = 0; v < pv; v++) {
            plan_rhd_step_t st = plan_doubling(v, s), ps = plan_doubling(st.partner, s);
            TEST_ASSERT(ps.partner == v && ps.recv_lo == st.send_lo && ps.nblocks == st.nblocks, "n %d: doubling mismatch", n);
            for (int b = st.send_lo; b < st.send_lo + st.nblocks; b++) {
                TEST_ASSERT(got[v] & (1ull << b), "n %d: vrank %d sends block %d it lacks", n, v, b);
                nxt[st.partner] |= 1ull << b;
            }
        }
        memcpy(got, nxt, sizeof(got));
    }
    for (int v = 0; v < pv; v++) TEST_ASSERT(got[v] == all_ranks(pv), "n %d: vrank %d misses blocks", n, v);
}

/* Binomial tree: parents and children agree, subtrees are the contiguous ranges the scatter and gather
 * move, and the depth is at most ceil(log2 n). */
static void check_binomial(int n)
{
    int depth_max = 0;
    for (int v = 0; v < n; v++) {
        int kids[32], nk = plan_binomial_children(v, n, kids), next = v + 1, depth = 0;
        for (int i = nk - 1; i >= 0; i--) {
            TEST_ASSERT(plan_binomial_parent(kids[i]) == v, "n %d: %d's child %d has parent %d", n, v, kids[i], plan_binomial_parent(kids[i]));
            TEST_ASSERT(kids[i] == next, "n %d: subtree of %d not contiguous at child %d", n, v, kids[i]);
            next += plan_binomial_size(kids[i], n);
        }
        TEST_ASSERT(next == v + plan_binomial_size(v, n), "n %d: subtree of %d ends at %d", n, v, next);
        for (int u = v; u > 0; u = plan_binomial_parent(u)) depth++;
        depth_max = depth > depth_max ? depth : depth_max;
    }
    TEST_ASSERT(plan_binomial_size(0, n) == n && depth_max <= plan_log2(plan_pow2_ceil(n)), "n %d: depth %d", n, depth_max);
}

/* A tree given as parent and children per rank: consistent, rooted, spanning, at most ceil(log2 n) deep. */
static void check_tree(int n, int tree, int *inner)
{
    int parent[MAXP], roots = 0;
    for (int r = 0; r < n; r++) {
        int kids[2], nk, up;
        plan_dbt(r, n, tree, &parent[r], kids, &nk);
        if (parent[r] < 0) roots++;
        if (nk) inner[r]++;
        for (int i = 0; i < nk; i++) {
            int kp, kk[2], knk;
            plan_dbt(kids[i], n, tree, &kp, kk, &knk);
            TEST_ASSERT(kp == r && kids[i] != r, "n %d tree %d: %d's child %d has parent %d", n, tree, r, kids[i], kp);
        }
        up = parent[r];
        if (up >= 0) {
            int pk[2], pnk, pp, found = 0;
            plan_dbt(up, n, tree, &pp, pk, &pnk);
            for (int i = 0; i < pnk; i++) found |= pk[i] == r;
            TEST_ASSERT(found, "n %d tree %d: %d's parent %d does not list it", n, tree, r, up);
        }
    }
    TEST_ASSERT(roots == 1, "n %d tree %d: %d roots", n, tree, roots);
    for (int r = 0; r < n; r++) {
        int depth = 0;
        for (int u = r; parent[u] >= 0 && depth <= n; u = parent[u]) depth++;
        TEST_ASSERT(depth <= plan_log2(plan_pow2_ceil(n)), "n %d tree %d: rank %d at depth %d", n, tree, r, depth);
    }
}

static void check_dbt(int n)
{
    int inner[MAXP] = {0};
    check_tree(n, 0, inner);
    check_tree(n, 1, inner);
    for (int r = 0; r < n; r++)
        TEST_ASSERT(inner[r] <= 1 || (r == 0 && n % 2), "n %d: rank %d forwards in both trees", n, r);
}

static void check_bruck(int n)
{
    static int pos[MAXP][MAXP], next[MAXP][MAXP]; /* allgather: the rank whose block sits at position j */
    for (int r = 0; r < n; r++)
        for (int j = 0; j < n; j++) pos[r][j] = j == 0 ? r : -1;
    for (int d = 1; d < n; d *= 2) {
        memcpy(next, pos, sizeof(pos));
        for (int r = 0; r < n; r++) {
            int to, from, m, to2, from2, m2;
            plan_bruck_allgather(r, n, d, &to, &from, &m);
            plan_bruck_allgather(to, n, d, &to2, &from2, &m2);
            TEST_ASSERT(from2 == r && m2 == m, "n %d d %d: bruck allgather mismatch at %d", n, d, r);
            for (int j = 0; j < m; j++) {
                TEST_ASSERT(pos[r][j] >= 0, "n %d: rank %d sends position %d it lacks", n, r, j);
                next[to][d + j] = pos[r][j];
            }
        }
        memcpy(pos, next, sizeof(pos));
    }
    for (int r = 0; r < n; r++)
        for (int j = 0; j < n; j++) TEST_ASSERT(pos[r][j] == plan_mod(r + j, n), "n %d: allgather rank %d position %d", n, r, j);

    /* AllToAll: pos holds src * MAXP + dst of the block at each position. */
    for (int r = 0; r < n; r++)
        for (int j = 0; j < n; j++) pos[r][j] = r * MAXP + plan_mod(r + j, n);
    for (int d = 1; d < n; d *= 2) {
        memcpy(next, pos, sizeof(pos));
        for (int r = 0; r < n; r++) {
            int to, from, to2, from2;
            plan_bruck_alltoall(r, n, d, &to, &from);
            plan_bruck_alltoall(to, n, d, &to2, &from2);
            TEST_ASSERT(from2 == r, "n %d: bruck alltoall mismatch", n);
            for (int j = 0; j < n; j++)
                if (j & d) next[to][j] = pos[r][j];
        }
        memcpy(pos, next, sizeof(pos));
    }
    for (int r = 0; r < n; r++)
        for (int j = 0; j < n; j++)
            TEST_ASSERT(pos[r][j] == plan_mod(r - j, n) * MAXP + r, "n %d: alltoall rank %d position %d", n, r, j);
}

static void check_ring_alltoall(int n)
{
    /* bundle[r]: the (src, first dst) of the bundle rank r forwards next; got[r]: sources delivered. */
    int src_next[MAXP], first_dst[MAXP];
    uint64_t got[MAXP];
    for (int r = 0; r < n; r++) {
        src_next[r] = r;
        first_dst[r] = plan_mod(r + 1, n);
        got[r] = 1ull << r;
    }
    for (int s = 1; s < n; s++) {
        int nsrc[MAXP], nfirst[MAXP];
        for (int r = 0; r < n; r++) {
            int to, from, src, m, to2, from2, src2, m2;
            plan_ring_alltoall(r, n, s, &to, &from, &src, &m);
            plan_ring_alltoall(to, n, s, &to2, &from2, &src2, &m2);
            TEST_ASSERT(from2 == r && m2 == m && src2 == src_next[r] && first_dst[r] == to, "n %d step %d: ring alltoall mismatch at %d", n, s, r);
            TEST_ASSERT(!(got[to] & (1ull << src_next[r])), "n %d: rank %d gets source %d twice", n, to, src_next[r]);
            got[to] |= 1ull << src_next[r];
            nsrc[to] = src_next[r];
            nfirst[to] = plan_mod(to + 1, n);
        }
        memcpy(src_next, nsrc, sizeof(nsrc));
        memcpy(first_dst, nfirst, sizeof(nfirst));
    }
    for (int r = 0; r < n; r++) TEST_ASSERT(got[r] == all_ranks(n), "n %d: ring alltoall leaves rank %d short", n, r);
}

static void check_partition(void)
{
    size_t counts[] = {0, 1, 2, 7, 63, 64, 65, 1000003};
    for (int n = 1; n <= MAXP; n++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            size_t expect_off = 0, lo = SIZE_MAX, hi = 0;
            for (int i = 0; i < n; i++) {
                size_t off, cnt;
                prims_partition(counts[c], n, i, &off, &cnt);
                TEST_ASSERT(off == expect_off, "partition %zu/%d: block %d at %zu, expected %zu", counts[c], n, i, off, expect_off);
                expect_off += cnt;
                lo = cnt < lo ? cnt : lo;
                hi = cnt > hi ? cnt : hi;
            }
            TEST_ASSERT(expect_off == counts[c] && hi - lo <= 1, "partition %zu/%d: covers %zu, sizes %zu..%zu", counts[c], n, expect_off, lo, hi);
        }
}

int main(void)
{
    test_set_timeout(60);
    for (int n = 1; n <= MAXP; n++) {
        check_ring_reduce_scatter(n, 0);
        check_ring_reduce_scatter(n, -1);
        check_ring_allgather(n, 0);
        check_ring_allgather(n, 1);
        check_chain(n, 0);
        check_chain(n, n / 2);
        check_chain(n, n - 1);
        check_pairwise_and_dissemination(n);
        for (int root = 0; root < n; root += n / 3 + 1) check_fold_halving_doubling(n, root);
        check_binomial(n);
        check_dbt(n);
        check_bruck(n);
        check_ring_alltoall(n);
    }
    check_partition();
    return test_report();
}
