/* Chorus quick start: every rank contributes rank + 1 to each element; after the AllReduce every element
 * holds 1 + 2 + ... + nranks. Run with: chorusrun -n 4 ./quickstart */
#include <chorus/chorus.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK_CHORUS(call, comm)                                                                   \
    do {                                                                                           \
        chorus_result_t r_ = (call);                                                               \
        if (r_ != CHORUS_SUCCESS) {                                                                \
            fprintf(stderr, "%s failed: %s: %s\n", #call, chorus_strerror(r_), chorus_comm_last_error(comm)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(void)
{
    chorus_comm_t comm = NULL;
    CHECK_CHORUS(chorus_comm_init_from_env(&comm), NULL);
    int rank, nranks;
    CHECK_CHORUS(chorus_comm_rank(comm, &rank), comm);
    CHECK_CHORUS(chorus_comm_size(comm, &nranks), comm);

    const size_t count = 1 << 20;
    float *data = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) data[i] = (float)(rank + 1);

    /* In place: sendbuf == recvbuf. A NULL stream means "complete before returning". */
    CHECK_CHORUS(chorus_allreduce(data, data, count, chorus_float32, chorus_sum, comm, NULL), comm);

    float expected = (float)nranks * (nranks + 1) / 2;
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) wrong += data[i] != expected;
    printf("rank %d of %d: allreduce of %zu floats %s (every element %g)\n", rank, nranks, count,
           wrong ? "WRONG" : "correct", (double)data[0]);

    free(data);
    CHECK_CHORUS(chorus_comm_destroy(comm), NULL);
    return wrong ? 1 : 0;
}
