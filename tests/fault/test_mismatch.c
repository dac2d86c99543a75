/*
 * Ranks that disagree on a collective: rank 1 changes one argument of the third call (mode: count, dtype,
 * op, coll, root: the root of a broadcast of 32 bytes, root_slot: of 96), or swaps the third and fourth
 * calls (order).
 *   strict (the direct algorithms, where every rank sees every fingerprint): every rank fails the third or
 *     fourth call with CHORUS_ERR_MISMATCH naming the field that differs and a rank that disagrees. (Not
 *     for the direct Broadcast of up to 88 bytes, whose root runs ahead of the others as the chain's does:
 *     algo/prims.h, inline phases.)
 *   otherwise (message-passing algorithms): a rank that fails, fails with MISMATCH naming the field that
 *     differs and a rank: a rank that received from the odd rank finds it itself (a message of an
 *     earlier call compared with this rank's own call of that number: a root that differs is named as
 *     the root, not as a call number); a rank that only sent to it learns it
 *     from the receiver's notice, and a rank waiting on a rank that gave up from that rank's farewell
 *     (never REMOTE or TIMEOUT). It fails the third or fourth call, or, having only sent, a later one;
 *     or it finishes every call (its own data is right: what it received came from ranks that agree
 *     with it). At least one rank names a field.
 * Buffers end where an inaccessible page begins, so a write past them (a peer's larger count landing
 * here) kills the rank instead of passing unseen.
 * Each rank prints "rank R: ok" or what went wrong, and whether it named the field (run_mismatch.sh
 * checks that one did).
 * No rank destroys its communicator before every rank has made its calls (a marker file per rank in
 * SYNC_DIR): a rank that finished and left in good order cannot tell a later rank anything, and a rank
 * whose first message to it comes after it left learns only that it left.
 * usage: test_mismatch MODE [strict]   (environment: SYNC_DIR, a directory of its own)
 */
#include <chorus/chorus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define COUNT 8
#define BIG (COUNT + 4)

static int rank, nranks;
static chorus_comm_t comm;
static float *buf; /* BIG * nranks floats, ending at a guard page */

/* Room for `floats` floats, ending exactly where a PROT_NONE page begins. */
static float *guarded(size_t floats)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = floats * sizeof(float);
    size_t span = (bytes + page - 1) / page * page;
    char *m = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m + span, page, PROT_NONE) != 0) return NULL;
    return (float *)(m + span - bytes);
}

/* Mark this rank done in SYNC_DIR and wait (10 s at most) until every rank is. */
static void wait_for_all(void)
{
    const char *dir = getenv("SYNC_DIR");
    char path[512];
    if (!dir) return;
    snprintf(path, sizeof(path), "%s/rank%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
    for (int waited = 0; waited < 1000; waited++) {
        int done = 0;
        for (int r = 0; r < nranks; r++) {
            snprintf(path, sizeof(path), "%s/rank%d", dir, r);
            done += access(path, F_OK) == 0;
        }
        if (done == nranks) return;
        usleep(10000);
    }
}

static chorus_result_t call(const char *mode, int i)
{
    int odd = rank == 1 && i == 2;
    if (strcmp(mode, "order") == 0 && rank == 1 && (i == 2 || i == 3)) i = 5 - i; /* swap calls 2 and 3 */
    if (strcmp(mode, "order") == 0)
        return i == 3 ? chorus_allgather(buf + rank * COUNT, buf, COUNT, chorus_float32, comm, NULL)
                      : chorus_allreduce(buf, buf, COUNT, chorus_float32, chorus_sum, comm, NULL);
    if (strcmp(mode, "count") == 0)
        return chorus_allreduce(buf, buf, odd ? BIG : COUNT, chorus_float32, chorus_sum, comm, NULL);
    if (strcmp(mode, "dtype") == 0)
        return chorus_allreduce(buf, buf, COUNT, odd ? chorus_int32 : chorus_float32, chorus_sum, comm, NULL);
    if (strcmp(mode, "op") == 0)
        return chorus_allreduce(buf, buf, COUNT, chorus_float32, odd ? chorus_max : chorus_sum, comm, NULL);
    if (strcmp(mode, "coll") == 0)
        return odd ? chorus_allgather(buf + rank * COUNT, buf, COUNT, chorus_float32, comm, NULL)
                   : chorus_allreduce(buf, buf, COUNT, chorus_float32, chorus_sum, comm, NULL);
    size_t count = strcmp(mode, "root_slot") == 0 ? 2 * BIG : COUNT; /* BIG * nranks fit, nranks >= 2 */
    return chorus_broadcast(buf, buf, count, chorus_float32, odd ? 1 : 0, comm, NULL); /* root, root_slot */
}

int main(int argc, char **argv)
{
    static const struct {
        const char *mode, *field;
    } fields[] = {{"count", "count: here "}, {"dtype", "datatype: here "}, {"op", "op: here "},
                  {"coll", "collective: here "}, {"root", "root: here "}, {"root_slot", "root: here "},
                  {"order", "collective: here "}};
    const char *mode = argc > 1 ? argv[1] : "count", *field = NULL;
    int strict = argc > 2 && strcmp(argv[2], "strict") == 0;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strcmp(fields[i].mode, mode) == 0) field = fields[i].field;
    if (!field || chorus_comm_init_from_env(&comm) != CHORUS_SUCCESS) {
        printf("FAIL: bad mode %s or init failed: %s\n", mode, chorus_comm_last_error(NULL));
        return 1;
    }
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &nranks);
    buf = guarded((size_t)BIG * (size_t)nranks);
    if (!buf) return printf("FAIL: no guarded buffer\n"), 1;
    chorus_result_t r = CHORUS_SUCCESS;
    int i;
    for (i = 0; i < 6 && r == CHORUS_SUCCESS; i++) r = call(mode, i);
    i--; /* the last call made */
    const char *err = chorus_comm_last_error(comm);
    char culprit[32];
    snprintf(culprit, sizeof(culprit), "rank %d (", rank == 1 ? 0 : 1);
    int named = r == CHORUS_ERR_MISMATCH && strstr(err, field) &&
                (rank == 1 ? strstr(err, "rank ") != NULL : strstr(err, culprit) != NULL);
    int failed_as_expected = (i == 2 || i == 3 || (rank != 1 && i > 3)) && named;
    int ok = strict ? (i == 2 || i == 3) && named : r == CHORUS_SUCCESS ? rank != 1 : failed_as_expected;
    if (ok)
        printf("rank %d: ok (call %d: %s%s%s)\n", rank, i, chorus_result_name(r), r ? ": " : "", r ? err : "");
    else
        printf("rank %d: FAIL: call %d returned %s: %s (expected MISMATCH naming \"%s\" and %s)\n", rank, i,
               chorus_result_name(r), err, field, rank == 1 ? "another rank" : culprit);
    printf("rank %d: %s the field\n", rank, named ? "named" : "did not name");
    fflush(stdout);
    wait_for_all();
    chorus_comm_destroy(comm);
    return !ok;
}
