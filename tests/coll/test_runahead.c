/*
 * Back-to-back small broadcasts, where a root may run ahead of the ranks that read it (the direct
 * Broadcast's inline phases: algo/prims.h): long runs of one root and runs of roots in turn, sizes from
 * 0 to a little past what travels inline, now and then an AllReduce or a larger broadcast (phases that
 * meet every rank) in between, and more calls than the arena has stamps per rank, so that the ring of
 * stamps wraps many times. Every output is
 * checked right after its call, and the buffers of the last few calls are kept and checked again at
 * the end: a root that ran ahead must not have changed what its readers already took.
 * usage: test_runahead [CALLS]   (default 5000)
 */
#include <chorus/chorus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BYTES 200 /* past the 88 bytes that travel inline */
#define KEPT 16
/* Blocks of 1000 calls: first 700 from one root, all inline (more than the stamps, and nothing that meets
 * every rank in between, so that the root gets as far ahead as they let it); then roots in turn, sizes a
 * little past what travels inline, now and then a larger broadcast, and an AllReduce every 53 calls. */
static int root_of(int c, int nranks) { return (c % 1000 < 700 ? c / 1000 : c / 1000 + c % 1000) % nranks; }
static size_t bytes_of(int c)
{
    if (c % 1000 < 700) return (size_t)(c * 37) % 89;
    return c % 101 == 100 ? MAX_BYTES : (size_t)(c * 37) % 97;
}
static int sync_after(int c) { return c % 1000 >= 700 && c % 53 == 52; }

static uint8_t pattern(int call, int root, size_t i) { return (uint8_t)(call * 131 + root * 17 + (int)i * 7 + 1); }

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 5000, rank, nranks, bad = 0;
    chorus_comm_t comm;
    if (chorus_comm_init_from_env(&comm) != CHORUS_SUCCESS) {
        fprintf(stderr, "init failed: %s\n", chorus_comm_last_error(NULL));
        return 1;
    }
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &nranks);
    static uint8_t kept[KEPT][MAX_BYTES];
    for (int c = 0; c < calls && !bad; c++) {
        int root = root_of(c, nranks);
        size_t bytes = bytes_of(c);
        uint8_t *buf = kept[c % KEPT];
        for (size_t i = 0; i < MAX_BYTES; i++) buf[i] = rank == root ? pattern(c, root, i) : 0xee;
        chorus_result_t r = chorus_broadcast(buf, buf, bytes, chorus_uint8, root, comm, NULL);
        if (r != CHORUS_SUCCESS) {
            printf("rank %d: call %d (broadcast of %zu bytes from %d) failed: %s: %s\n", rank, c, bytes, root,
                   chorus_result_name(r), chorus_comm_last_error(comm));
            bad = 1;
            break;
        }
        for (size_t i = 0; i < MAX_BYTES && !bad; i++) {
            uint8_t want = i < bytes || rank == root ? pattern(c, root, i) : 0xee;
            if (buf[i] != want) {
                printf("rank %d: call %d (broadcast of %zu bytes from %d): byte %zu is %u, not %u\n", rank, c, bytes,
                       root, i, buf[i], want);
                bad = 1;
            }
        }
        if (sync_after(c)) {
            int64_t sum = rank + c;
            r = chorus_allreduce(&sum, &sum, 1, chorus_int64, chorus_sum, comm, NULL);
            int64_t want = (int64_t)nranks * (nranks - 1) / 2 + (int64_t)nranks * c;
            if (r != CHORUS_SUCCESS || sum != want) {
                printf("rank %d: allreduce after call %d: %s, %lld (want %lld)\n", rank, c, chorus_result_name(r),
                       (long long)sum, (long long)want);
                bad = 1;
            }
        }
    }
    /* The last KEPT calls' outputs, again: nothing wrote into them after their calls returned. */
    for (int c = calls > KEPT ? calls - KEPT : 0; c < calls && !bad; c++) {
        int root = root_of(c, nranks);
        size_t bytes = bytes_of(c);
        for (size_t i = 0; i < MAX_BYTES && !bad; i++) {
            uint8_t want = i < bytes || rank == root ? pattern(c, root, i) : 0xee;
            if (kept[c % KEPT][i] != want) {
                printf("rank %d: call %d's output changed after it returned (byte %zu)\n", rank, c, i);
                bad = 1;
            }
        }
    }
    int64_t failures = bad;
    if (chorus_allreduce(&failures, &failures, 1, chorus_int64, chorus_sum, comm, NULL) != CHORUS_SUCCESS) failures++;
    if (rank == 0) printf("%d calls on %d ranks: %s\n", calls, nranks, failures ? "FAILED" : "ok");
    chorus_comm_destroy(comm);
    return failures ? 1 : 0;
}
