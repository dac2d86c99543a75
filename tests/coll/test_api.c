/* Bad input gets CHORUS_ERR_INVALID_ARGUMENT (or NOT_SUPPORTED) with a message naming what is wrong, and
 * leaves the communicator usable: every rank makes the same bad calls (they fail locally, before any
 * communication) and then a real AllReduce must still be right. Run under chorusrun. */
#include <chorus/chorus.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "test.h"

static chorus_comm_t comm;

#define EXPECT_ERR(call, code, needle)                                                                        \
    do {                                                                                                      \
        chorus_result_t r_ = (call);                                                                          \
        const char *msg_ = chorus_comm_last_error(comm);                                                      \
        TEST_ASSERT(r_ == (code), "%s returned %s", #call, chorus_result_name(r_));                           \
        TEST_ASSERT(strstr(msg_, needle) != NULL, "%s: message \"%s\" does not mention \"%s\"", #call, msg_, needle); \
    } while (0)

int main(void)
{
    test_set_timeout(120);
    TEST_ASSERT(chorus_comm_init_from_env(&comm) == CHORUS_SUCCESS, "init: %s", chorus_comm_last_error(NULL));
    int rank, n;
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &n);
    float buf[64] = {0}, out[64 * 16];
    const chorus_result_t INV = CHORUS_ERR_INVALID_ARGUMENT;

    EXPECT_ERR(chorus_allreduce(NULL, buf, 4, chorus_float32, chorus_sum, comm, NULL), INV, "sendbuf");
    EXPECT_ERR(chorus_allreduce(buf, NULL, 4, chorus_float32, chorus_sum, comm, NULL), INV, "recvbuf");
    EXPECT_ERR(chorus_allreduce(buf, buf, 4, (chorus_datatype_t)42, chorus_sum, comm, NULL), INV, "datatype 42");
    EXPECT_ERR(chorus_allreduce(buf, buf, 4, chorus_float32, (chorus_redop_t)-1, comm, NULL), INV, "op -1");
    EXPECT_ERR(chorus_allreduce(buf, buf, SIZE_MAX / 2, chorus_float32, chorus_sum, comm, NULL), INV, "overflow");
    EXPECT_ERR(chorus_allreduce(buf, buf + 1, 8, chorus_float32, chorus_sum, comm, NULL), INV, "overlap");
    EXPECT_ERR(chorus_broadcast(buf, buf, 4, chorus_float32, n, comm, NULL), INV, "root");
    EXPECT_ERR(chorus_reduce(buf, buf, 4, chorus_float32, chorus_sum, -1, comm, NULL), INV, "root -1");
    EXPECT_ERR(chorus_send(buf, 4, chorus_float32, n + 3, comm, NULL), INV, "peer");
    EXPECT_ERR(chorus_recv(buf, 4, chorus_float32, rank, comm, NULL), INV, "peer");
    EXPECT_ERR(chorus_allgather(buf, NULL, 4, chorus_float32, comm, NULL), INV, "recvbuf");
    EXPECT_ERR(chorus_alltoall(buf, out, SIZE_MAX / 2, chorus_float32, comm, NULL), INV, "count");
    EXPECT_ERR(chorus_reduce_scatter(NULL, out, 4, chorus_float32, chorus_sum, comm, NULL), INV, "sendbuf");
    memset(out, 0, sizeof(out)); /* not a stream: no magic */
    EXPECT_ERR(chorus_barrier(comm, (chorus_stream_t)out), INV, "stream");
    TEST_ASSERT(chorus_allreduce(NULL, NULL, 0, chorus_float32, chorus_sum, comm, NULL) == CHORUS_SUCCESS,
                "count 0 with NULL buffers must be valid");

    chorus_comm_t other = NULL;
    chorus_unique_id_t id;
    memset(&id, 0, sizeof(id));
    TEST_ASSERT(chorus_comm_init_rank(&other, 0, id, 0) == INV && strstr(chorus_comm_last_error(NULL), "nranks"),
                "nranks 0: %s", chorus_comm_last_error(NULL));
    TEST_ASSERT(chorus_comm_init_rank(&other, 2, id, 2) == INV && strstr(chorus_comm_last_error(NULL), "rank 2"),
                "rank out of range: %s", chorus_comm_last_error(NULL));
    TEST_ASSERT(chorus_comm_init_rank(NULL, 2, id, 0) == INV, "NULL comm_p accepted");
    TEST_ASSERT(other == NULL, "failed init wrote its output");
    TEST_ASSERT(chorus_unique_id_from_string("not an id", &id) == INV, "bad id text accepted");
    chorus_config_t bad_config = {0};
    TEST_ASSERT(chorus_comm_init_rank_config(&other, 1, id, 0, &bad_config) == INV &&
                    strstr(chorus_comm_last_error(NULL), "config->size"),
                "config without size: %s", chorus_comm_last_error(NULL));

    /* The config's algorithm choice overrides CHORUS_ALGO, with the same checks. */
    chorus_config_t cfg = CHORUS_CONFIG_INITIALIZER;
    cfg.algo = "allreduce:nosuch";
    TEST_ASSERT(chorus_comm_init_rank_config(&other, 1, id, 0, &cfg) == INV &&
                    strstr(chorus_comm_last_error(NULL), "nosuch") && strstr(chorus_comm_last_error(NULL), "ring"),
                "unknown algorithm in config: %s", chorus_comm_last_error(NULL));
    cfg.algo = "allreduce:rhd";
    chorus_unique_id_t solo;
    TEST_ASSERT(chorus_get_unique_id(&solo) == CHORUS_SUCCESS, "get_unique_id: %s", chorus_comm_last_error(NULL));
    TEST_ASSERT(chorus_comm_init_rank_config(&other, 1, solo, 0, &cfg) == CHORUS_SUCCESS, "config init: %s",
                chorus_comm_last_error(NULL));
    if (other) chorus_comm_destroy(other);

    /* Still usable. */
    for (int i = 0; i < 64; i++) buf[i] = (float)(rank + i);
    TEST_ASSERT(chorus_allreduce(buf, buf, 64, chorus_float32, chorus_sum, comm, NULL) == CHORUS_SUCCESS,
                "allreduce after errors: %s", chorus_comm_last_error(comm));
    int wrong = 0;
    for (int i = 0; i < 64; i++) wrong += buf[i] != (float)(n * (n - 1) / 2 + n * i);
    TEST_ASSERT(!wrong, "allreduce after errors: %d wrong values", wrong);
    TEST_ASSERT(chorus_comm_last_error(comm)[0] == 0, "a success leaves an error message behind");
    chorus_comm_destroy(comm);
    return test_report();
}
