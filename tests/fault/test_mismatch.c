/*
 * Ranks that disagree on a collective: rank 1 changes one argument of the third call (mode: count,
 * dtype, op, coll, root). Every rank must fail with CHORUS_ERR_MISMATCH, by that call or the next one,
 * and its error must name the field that differs and a rank that disagrees (rank 1, or for rank 1 any
 * other). On one host this goes through the direct algorithms' fingerprints.
 * Each rank prints "rank R: ok" or what went wrong.
 */
#include <chorus/chorus.h>
#include <stdio.h>
#include <string.h>

#define COUNT 8

static int rank;
static chorus_comm_t comm;
static float buf[COUNT * 16];

static chorus_result_t call(const char *mode, int diverge)
{
    int odd = diverge && rank == 1;
    if (strcmp(mode, "count") == 0)
        return chorus_allreduce(buf, buf, odd ? COUNT + 4 : COUNT, chorus_float32, chorus_sum, comm, NULL);
    if (strcmp(mode, "dtype") == 0)
        return chorus_allreduce(buf, buf, COUNT, odd ? chorus_int32 : chorus_float32, chorus_sum, comm, NULL);
    if (strcmp(mode, "op") == 0)
        return chorus_allreduce(buf, buf, COUNT, chorus_float32, odd ? chorus_max : chorus_sum, comm, NULL);
    if (strcmp(mode, "coll") == 0)
        return odd ? chorus_allgather(buf, buf + COUNT, COUNT, chorus_float32, comm, NULL)
                   : chorus_allreduce(buf, buf, COUNT, chorus_float32, chorus_sum, comm, NULL);
    return chorus_broadcast(buf, buf, COUNT, chorus_float32, odd ? 1 : 0, comm, NULL); /* root */
}

int main(int argc, char **argv)
{
    static const struct { const char *mode, *field; } fields[] = {
        {"count", "count: here "}, {"dtype", "datatype: here "}, {"op", "op: here "},
        {"coll", "collective: here "}, {"root", "root: here "}};
    const char *mode = argc > 1 ? argv[1] : "count", *field = NULL;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strcmp(fields[i].mode, mode) == 0) field = fields[i].field;
    if (!field || chorus_comm_init_from_env(&comm) != CHORUS_SUCCESS) {
        printf("FAIL: bad mode %s or init failed: %s\n", mode, chorus_comm_last_error(NULL));
        return 1;
    }
    chorus_comm_rank(comm, &rank);
    chorus_result_t r = CHORUS_SUCCESS;
    int i;
    for (i = 0; i < 5 && r == CHORUS_SUCCESS; i++) r = call(mode, i == 2);
    const char *err = chorus_comm_last_error(comm);
    char culprit[32];
    snprintf(culprit, sizeof(culprit), "rank %d (", rank == 1 ? 0 : 1);
    int ok = r == CHORUS_ERR_MISMATCH && i - 1 >= 2 && i - 1 <= 3 && strstr(err, field) &&
             (rank == 1 ? strstr(err, "rank ") != NULL : strstr(err, culprit) != NULL);
    if (ok)
        printf("rank %d: ok\n", rank);
    else
        printf("rank %d: FAIL: call %d returned %s: %s (expected MISMATCH naming \"%s\" and %s)\n", rank, i - 1,
               chorus_result_name(r), err, field, rank == 1 ? "another rank" : culprit);
    chorus_comm_destroy(comm);
    return !ok;
}
