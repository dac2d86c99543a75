/* The host layout of the hierarchical algorithms (src/algo/hier.c), for many placements of ranks on
 * hosts: the chain from any head visits every rank once, starts at the head and crosses between hosts
 * H - 1 times, as every rank sees it; each host's runs cover its ranks, in order, each run consecutive. */
#include <stdlib.h>

#include "algo/hier.h"
#include "test.h"

#define MAXP 13

/* Hosts numbered in the order of their lowest ranks, as prims_host_of numbers them. */
static void number_hosts(int n, int *host_of)
{
    int map[MAXP], next = 0;
    for (int k = 0; k < MAXP; k++) map[k] = -1;
    for (int r = 0; r < n; r++) {
        if (map[host_of[r]] < 0) map[host_of[r]] = next++;
        host_of[r] = map[host_of[r]];
    }
}

static void check_layout(int n, const int *host_of, const char *what)
{
    hier_t h[MAXP];
    int nhosts = 0;
    for (int r = 0; r < n; r++) {
        TEST_ASSERT(hier_init_hosts(&h[r], n, r, host_of) == CHORUS_SUCCESS, "%s n %d: init", what, n);
        if (host_of[r] + 1 > nhosts) nhosts = host_of[r] + 1;
    }
    for (int r = 0; r < n; r++) {
        TEST_ASSERT(h[r].nhosts == nhosts && h[r].host == host_of[r], "%s n %d: rank %d's hosts", what, n, r);
        TEST_ASSERT(h[r].local[h[r].pos] == r, "%s n %d: rank %d not at its own place", what, n, r);
        TEST_ASSERT(h[r].leaders[h[r].host] == h[r].local[0], "%s n %d: rank %d's leader", what, n, r);
        for (int i = 1; i < h[r].nlocal; i++)
            TEST_ASSERT(h[r].local[i] > h[r].local[i - 1] && host_of[h[r].local[i]] == host_of[r],
                        "%s n %d: rank %d's host's ranks out of order", what, n, r);
    }
    /* The runs of every host, as rank 0 sees them: every rank of the host, in order, once. */
    for (int k = 0; k < nhosts; k++) {
        int at = 0, first, count, expect = 0;
        while (hier_run(&h[0], k, &at, &first, &count)) {
            TEST_ASSERT(count >= 1, "%s n %d: empty run", what, n);
            for (int r = first; r < first + count; r++) {
                while (expect < n && host_of[expect] != k) expect++;
                TEST_ASSERT(r == expect && host_of[r] == k, "%s n %d host %d: run has rank %d, expected %d", what, n,
                            k, r, expect);
                expect++;
            }
            /* A run ends where the host's next rank is not the next rank. */
            TEST_ASSERT(first + count >= n || host_of[first + count] != k, "%s n %d: run of host %d cut short at %d",
                        what, n, k, first + count);
        }
        while (expect < n && host_of[expect] != k) expect++;
        TEST_ASSERT(expect == n, "%s n %d host %d: runs miss rank %d", what, n, k, expect);
    }
    /* The chain from every head: follow next from the head; prev must agree. */
    for (int head = 0; head < n; head++) {
        int seen[MAXP] = {0}, r = head, steps = 0, crossings = 0, prev, next;
        hier_chain(&h[head], head, &prev, &next);
        TEST_ASSERT(prev == -1, "%s n %d head %d: the head has a predecessor %d", what, n, head, prev);
        while (r >= 0 && steps <= n) {
            TEST_ASSERT(!seen[r], "%s n %d head %d: rank %d visited twice", what, n, head, r);
            seen[r] = 1;
            steps++;
            hier_chain(&h[r], head, &prev, &next);
            if (next >= 0) {
                int p2, n2;
                hier_chain(&h[next], head, &p2, &n2);
                TEST_ASSERT(p2 == r, "%s n %d head %d: %d -> %d but %d's predecessor is %d", what, n, head, r, next,
                            next, p2);
                crossings += host_of[next] != host_of[r];
            }
            r = next;
        }
        TEST_ASSERT(steps == n, "%s n %d head %d: the chain visits %d ranks", what, n, head, steps);
        TEST_ASSERT(crossings == nhosts - 1, "%s n %d head %d: the chain crosses hosts %d times", what, n, head,
                    crossings);
    }
    for (int r = 0; r < n; r++) hier_free(&h[r]);
}

int main(void)
{
    test_set_timeout(60);
    int host_of[MAXP];
    for (int n = 1; n <= MAXP; n++)
        for (int nh = 1; nh <= n && nh <= 5; nh++) {
            for (int r = 0; r < n; r++) host_of[r] = r % nh; /* interleaved */
            number_hosts(n, host_of);
            check_layout(n, host_of, "interleaved");
            for (int r = 0; r < n; r++) host_of[r] = r * nh / n; /* blocks */
            number_hosts(n, host_of);
            check_layout(n, host_of, "blocks");
            srand((unsigned)(n * 31 + nh));
            for (int trial = 0; trial < 5; trial++) {
                for (int r = 0; r < n; r++) host_of[r] = r < nh ? r : rand() % nh; /* uneven, mixed */
                for (int r = n - 1; r > 0; r--) {
                    int j = rand() % (r + 1), t = host_of[r];
                    host_of[r] = host_of[j];
                    host_of[j] = t;
                }
                number_hosts(n, host_of);
                check_layout(n, host_of, "mixed");
            }
        }
    return test_report();
}
