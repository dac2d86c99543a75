/*
 * Buffers from chorus_mem_alloc: the allocator's contract and bad input, then AllReduce (out of place and
 * in place), AllGather,
 * Broadcast and AllToAll with buffers in such memory on every rank (the single-copy algorithms read
 * them out of mappings, and above ALGO_SHARED_MIN the ranks switch to single copy together), on some
 * ranks only (they must agree not to), at an offset inside a larger buffer, after buffers were freed
 * and others allocated (a peer's old mapping must not be read for the new buffer), and in AllReduce slices
 * that the peers read back instead of being written into their outputs. Every output is checked
 * element by element. The wrapper (shared_buffers.sh) checks from the logs that the mappings and the
 * switch happened.
 * usage: test_shared_buffers [COUNT]   (float32 elements per rank; default a little past 4 MiB)
 */
#include <chorus/chorus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks, bad;

#define EXPECT(cond, ...)                                                                                             \
    do {                                                                                                           \
        if (!(cond)) {                                                                                             \
            printf("rank %d: ", rank);                                                                             \
            printf(__VA_ARGS__);                                                                                   \
            printf("\n");                                                                                          \
            bad = 1;                                                                                               \
        }                                                                                                          \
    } while (0)

/* Small integers, so that sums are exact in float32 in any order. */
static float value(int round, int r, size_t i) { return (float)((round * 7 + r * 13 + (int)(i % 1021)) % 97); }

static void *alloc_or(int shared, size_t bytes)
{
    void *p = NULL;
    if (shared) {
        chorus_result_t res = chorus_mem_alloc(&p, bytes);
        EXPECT(res == CHORUS_SUCCESS, "chorus_mem_alloc(%zu): %s: %s", bytes, chorus_result_name(res),
               chorus_comm_last_error(NULL));
    } else {
        p = malloc(bytes);
    }
    if (!p) {
        printf("rank %d: out of memory\n", rank);
        exit(1);
    }
    return p;
}

static void free_or(int shared, void *p)
{
    if (shared)
        EXPECT(chorus_mem_free(p) == CHORUS_SUCCESS, "chorus_mem_free: %s", chorus_comm_last_error(NULL));
    else
        free(p);
}

static void check_call(chorus_comm_t comm, chorus_result_t res, const char *what)
{
    EXPECT(res == CHORUS_SUCCESS, "%s: %s: %s", what, chorus_result_name(res), chorus_comm_last_error(comm));
}

/* One round of the six collectives on count elements per rank; send and recv sit `offset` floats into
 * buffers of that kind (shared or not). */
static void round_of(chorus_comm_t comm, int round, size_t count, int shared, size_t offset)
{
    size_t all = count * (size_t)nranks;
    float *sbase = alloc_or(shared, (all + offset) * sizeof(float)), *send = sbase + offset;
    float *rbase = alloc_or(shared, (all + offset) * sizeof(float)), *recv = rbase + offset;
    char what[96];
    snprintf(what, sizeof(what), "round %d (%zu elements, %s, offset %zu)", round, count,
             shared ? "shared" : "heap", offset);

    for (size_t i = 0; i < count; i++) send[i] = value(round, rank, i);
    check_call(comm, chorus_allreduce(send, recv, count, chorus_float32, chorus_sum, comm, NULL), what);
    for (size_t i = 0, wrong = 0; i < count && wrong < 3; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++) want += value(round, r, i);
        if (recv[i] != want) EXPECT(++wrong == 0, "%s: allreduce element %zu is %g, not %g", what, i, recv[i], want);
    }

    /* In place: the output is the input the peers read. */
    memcpy(recv, send, count * sizeof(float));
    check_call(comm, chorus_allreduce(recv, recv, count, chorus_float32, chorus_max, comm, NULL), what);
    for (size_t i = 0, wrong = 0; i < count && wrong < 3; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++) want = value(round, r, i) > want ? value(round, r, i) : want;
        if (recv[i] != want)
            EXPECT(++wrong == 0, "%s: allreduce max in place, element %zu is %g, not %g", what, i, recv[i], want);
    }

    check_call(comm, chorus_allgather(send, recv, count, chorus_float32, comm, NULL), what);
    for (size_t i = 0, wrong = 0; i < all && wrong < 3; i++)
        if (recv[i] != value(round, (int)(i / count), i % count))
            EXPECT(++wrong == 0, "%s: allgather element %zu is %g, not %g", what, i, recv[i],
                   value(round, (int)(i / count), i % count));

    int root = round % nranks;
    for (size_t i = 0; i < count; i++) recv[i] = -1;
    check_call(comm, chorus_reduce(send, recv, count, chorus_float32, chorus_sum, root, comm, NULL), what);
    for (size_t i = 0, wrong = 0; rank == root && i < count && wrong < 3; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++) want += value(round, r, i);
        if (recv[i] != want)
            EXPECT(++wrong == 0, "%s: reduce to %d, element %zu is %g, not %g", what, root, i, recv[i], want);
    }

    for (size_t i = 0; i < count; i++) recv[i] = -1;
    check_call(comm, chorus_broadcast(send, recv, count, chorus_float32, root, comm, NULL), what);
    for (size_t i = 0, wrong = 0; i < count && wrong < 3; i++)
        if (recv[i] != value(round, root, i))
            EXPECT(++wrong == 0, "%s: broadcast from %d, element %zu is %g, not %g", what, root, i, recv[i],
                   value(round, root, i));

    /* AllToAll: block q of rank r's input is value(round, r * nranks + q, i). */
    size_t per = count / (size_t)nranks;
    for (int q = 0; q < nranks; q++)
        for (size_t i = 0; i < per; i++) send[(size_t)q * per + i] = value(round, rank * nranks + q, i);
    check_call(comm, chorus_alltoall(send, recv, per, chorus_float32, comm, NULL), what);
    for (int q = 0, wrong = 0; q < nranks; q++)
        for (size_t i = 0; i < per && wrong < 3; i++)
            if (recv[(size_t)q * per + i] != value(round, q * nranks + rank, i))
                EXPECT(++wrong == 0, "%s: alltoall block %d element %zu is %g, not %g", what, q, i,
                       recv[(size_t)q * per + i], value(round, q * nranks + rank, i));

    /* ReduceScatter of the same input: block r of the result sums block r of every rank's input. */
    check_call(comm, chorus_reduce_scatter(send, recv, per, chorus_float32, chorus_sum, comm, NULL), what);
    for (size_t i = 0, wrong = 0; i < per && wrong < 3; i++) {
        float want = 0;
        for (int q = 0; q < nranks; q++) want += value(round, q * nranks + rank, i);
        if (recv[i] != want)
            EXPECT(++wrong == 0, "%s: reduce_scatter element %zu is %g, not %g", what, i, recv[i], want);
    }

    free_or(shared, sbase);
    free_or(shared, rbase);
}

static void allocator_contract(void)
{
    void *p = NULL;
    EXPECT(chorus_mem_alloc(NULL, 64) == CHORUS_ERR_INVALID_ARGUMENT, "mem_alloc(NULL, 64) was accepted");
    EXPECT(strstr(chorus_comm_last_error(NULL), "ptr_p"), "mem_alloc(NULL, 64): the detail does not name ptr_p: %s",
           chorus_comm_last_error(NULL));
    EXPECT(chorus_mem_alloc(&p, 0) == CHORUS_ERR_INVALID_ARGUMENT, "mem_alloc of 0 bytes was accepted");
    EXPECT(chorus_mem_alloc(&p, (size_t)-1) == CHORUS_ERR_NO_MEMORY, "mem_alloc of SIZE_MAX bytes: not NO_MEMORY");
    EXPECT(chorus_mem_alloc(&p, 10000) == CHORUS_SUCCESS, "mem_alloc(10000): %s", chorus_comm_last_error(NULL));
    long page = sysconf(_SC_PAGESIZE);
    EXPECT(((uintptr_t)p % (uintptr_t)page) == 0, "mem_alloc's buffer %p is not page-aligned", p);
    for (size_t i = 0; i < 10000; i++)
        if (((unsigned char *)p)[i]) {
            EXPECT(0, "mem_alloc's buffer is not zero-filled at byte %zu", i);
            break;
        }
    memset(p, 0xab, 10000);
    int local;
    EXPECT(chorus_mem_free((char *)p + 8) == CHORUS_ERR_INVALID_ARGUMENT, "mem_free inside a buffer was accepted");
    EXPECT(strstr(chorus_comm_last_error(NULL), "not a buffer chorus_mem_alloc returned"),
           "mem_free of a wrong pointer: detail %s", chorus_comm_last_error(NULL));
    EXPECT(chorus_mem_free(&local) == CHORUS_ERR_INVALID_ARGUMENT, "mem_free of a stack address was accepted");
    EXPECT(chorus_mem_free(p) == CHORUS_SUCCESS, "mem_free: %s", chorus_comm_last_error(NULL));
    EXPECT(chorus_mem_free(p) == CHORUS_ERR_INVALID_ARGUMENT, "a second mem_free of one buffer was accepted");
    EXPECT(chorus_mem_free(NULL) == CHORUS_SUCCESS, "mem_free(NULL) failed");
}

int main(int argc, char **argv)
{
    /* By default 4 MiB and a little per rank: above the sizes where 3 and 4 ranks take single copy whatever
     * the buffers (docs/algorithms.md), so that the shared buffers' rounds have something to switch. */
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 0) : (1u << 20) + 3 * 8 * 7 * 5;
    chorus_comm_t comm;
    if (chorus_comm_init_from_env(&comm) != CHORUS_SUCCESS) {
        fprintf(stderr, "init failed: %s\n", chorus_comm_last_error(NULL));
        return 1;
    }
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &nranks);
    allocator_contract();
    int round = 0;
    round_of(comm, round++, count / 16, 0, 0); /* the heap's, below 1 MiB on a fresh communicator */
    round_of(comm, round++, count, 0, 0); /* the heap's above: the ranks ask at some calls (algo_shared_ask) */
    for (int rep = 0; rep < 2; rep++) {       /* the second: new buffers where the freed ones were */
        round_of(comm, round++, count, 1, 0);  /* every rank's buffers shared */
        round_of(comm, round++, count / 32, 1, 0); /* below 1 MiB, on a communicator that saw them */
        round_of(comm, round++, count, 1, 40); /* at an offset inside them */
        round_of(comm, round++, count / 256 + 1, 1, 0); /* below the switch: as selected */
    }
    round_of(comm, round++, count, rank == 0, 0);          /* only rank 0's: no switch */
    round_of(comm, round++, count, rank == nranks - 1, 8); /* only the last rank's */
    /* AllReduce slices of 4 MiB and more (COPY_STREAM_MIN): out of place, a rank whose output is shared has
     * its peers read its slice out of their mapping of it; on every rank, then on rank 0 only (its slice
     * read back, the others' written into the peers' outputs). */
    size_t big = (size_t)nranks * ((4u << 20) / sizeof(float)) + 7;
    round_of(comm, round++, big, 1, 0);
    round_of(comm, round++, big, rank == 0, 0);
    round_of(comm, round++, count, 0, 0);
    round_of(comm, round++, count, 1, 0);
    chorus_result_t res = chorus_comm_destroy(comm);
    EXPECT(res == CHORUS_SUCCESS, "destroy: %s", chorus_result_name(res));
    if (!bad) printf("rank %d: shared buffers ok (%d rounds)\n", rank, round);
    return bad;
}
