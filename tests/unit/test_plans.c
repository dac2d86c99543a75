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
    }
    check_partition();
    return test_report();
}
