/* The public collective and point-to-point entry points: check arguments, build the call, run it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "core/comm.h"
#include "core/stream.h"
#include "transport/shm/region.h"
#include "util/log.h"
#include "util/util.h"

/* Collective and point-to-point messages use distinct tag spaces, so one arriving where the other is
 * expected is reported as a mismatch rather than misread. */
#define TAG_COLLECTIVE 0x80000000u
#define TAG_SEQ_MASK 0x7fffffffu

static int ranges_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen && blen && x < y + blen && y < x + alen;
}

/* Checks shared by every call; on failure the detail names the argument. A call queued on a stream checks
 * with its detail on the calling thread (the communicator's own operations may be running on a stream's
 * thread); a call without a stream on a communicator that has streamed waits for its turn first, and so
 * owns the communicator from here on (api_submit ends the turn). */
static chorus_result_t api_check_common(chorus_comm_t comm, const char *name, chorus_datatype_t dtype, int check_op,
                                        chorus_redop_t op, chorus_stream_t stream, comm_call_t *c)
{
    if (!comm) return CHORUS_ERR_INVALID_ARGUMENT;
    log_set_rank(comm->rank);
    if (stream) {
        comm_queue_checks(comm);
        CHECK(stream_check(comm, stream, name));
    } else if (comm->streamed) {
        comm_turn_wait(comm, comm_turn_take(comm));
        c->turn = 1;
    }
    size_t elem = dtype_size(dtype);
    if (!elem)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "%s: datatype %d is not a chorus_datatype_t", name,
                          (int)dtype);
    if (check_op && (unsigned)op >= chorus_num_ops)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "%s: op %d is not a chorus_redop_t", name, (int)op);
    c->elem = elem;
    return CHORUS_SUCCESS;
}

/* Every public call ends here, checked (checked: the checks' result): run now without a stream, or queued. */
static chorus_result_t api_submit(chorus_comm_t comm, chorus_stream_t stream, const char *name, chorus_result_t checked,
                                  const comm_call_t *c)
{
    chorus_result_t res = checked;
    if (res == CHORUS_SUCCESS) res = stream ? stream_enqueue(stream, comm, c, name) : api_call_run(comm, c);
    if (stream) comm_queue_checks(NULL);
    if (c->turn) comm_turn_end(comm);
    return res;
}

/* bytes = count * elem * mult, refusing overflow. */
static chorus_result_t api_bytes(chorus_comm_t comm, const char *name, const char *what, size_t count, size_t elem,
                                 size_t mult, size_t *bytes_p)
{
    size_t b;
    if (__builtin_mul_overflow(count, elem, &b) || __builtin_mul_overflow(b, mult, &b) || b > (size_t)INT64_MAX)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "%s: %s %zu is too large: the buffer size overflows", name,
                          what, count);
    *bytes_p = b;
    return CHORUS_SUCCESS;
}

static chorus_result_t api_check_buf(chorus_comm_t comm, const char *name, const char *what, const void *buf,
                                     size_t bytes)
{
    if (!buf && bytes)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "%s: %s is NULL but %zu bytes are needed", name, what,
                          bytes);
    return CHORUS_SUCCESS;
}

static chorus_result_t api_check_root(chorus_comm_t comm, const char *name, const char *what, int root)
{
    if (root < 0 || root >= comm->nranks)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "%s: %s %d is out of range [0, %d)", name, what, root,
                          comm->nranks);
    return CHORUS_SUCCESS;
}

/* Buffers may be the same (in place, at the position the collective defines) or disjoint, never partly shared. */
static chorus_result_t api_check_alias(chorus_comm_t comm, const char *name, const void *send, size_t sbytes,
                                       const void *recv, size_t rbytes, const void *inplace_send)
{
    if (send == inplace_send || !ranges_overlap(send, sbytes, recv, rbytes)) return CHORUS_SUCCESS;
    return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT,
                      "%s: sendbuf and recvbuf overlap without being the in-place layout (see chorus.h)", name);
}

/* A single rank: the result is the input. */
static void coll_local(const coll_args_t *a, size_t elem)
{
    size_t bytes = a->count * elem;
    if (a->coll == COLL_BARRIER || !a->recvbuf || a->sendbuf == a->recvbuf) return;
    memmove(a->recvbuf, a->sendbuf, bytes);
    if (a->coll == COLL_ALLREDUCE || a->coll == COLL_REDUCE || a->coll == COLL_REDUCE_SCATTER)
        reduce_finish(a->recvbuf, a->count, a->dtype, a->op, 1);
}

/* Returns when the operation started: one clock read serves the deadline and the flight recorder. */
static int64_t coll_begin(chorus_comm_t comm, const char *name, uint32_t tag, uint64_t seq)
{
    int64_t now = time_coarse_ns();
    prims_set_step(&comm->prims, 0);
    prims_set_waiting_on(&comm->prims, -1);
    comm->prims.why.res = CHORUS_SUCCESS;
    comm->prims.deadline_ns = comm->params.timeout > 0 ? now + comm->params.timeout * 1000000 : INT64_MAX;
    comm->prims.tag = tag;
    comm->prims.op_name = name;
    comm->prims.op_seq = seq;
    return now;
}

static chorus_result_t coll_run_algo(chorus_comm_t comm, const coll_args_t *a)
{
    tune_among_t among;
    const algo_desc_t *algo = tune_select_again(&comm->tune, a, &comm->algo, &among);
    if (!algo) return comm_error(comm, CHORUS_ERR_INTERNAL, "%s: no algorithm registered", coll_name(a->coll));
    if (!algo_config_allows(&comm->algo, algo) && !comm->algo_fallback_logged++)
        LOG_WARN(LOG_SUB_ALGO, "CHORUS_ALGO allows no %s algorithm this communicator supports (see docs/algorithms.md "
                 "for what each needs); using %s", coll_name(a->coll), algo->name);
    tune_watch_t *watch;
    chorus_result_t res = tune_watch_get(&comm->tune, a, among, &algo, &watch);
    const algo_desc_t *watched = algo;
    if (res == CHORUS_SUCCESS)
        res = algo_for_shared_buffers(&comm->prims, a, &comm->tune.comm.caps, &comm->algo, &comm->shared, &algo);
    if (algo != watched) watch = NULL; /* its twin for shared buffers, priced otherwise */
    recorder_algo(&comm->rec, algo->name);
    LOG_DEBUG(LOG_SUB_COLL, "%s #%llu: count %zu %s via %s", coll_name(a->coll), (unsigned long long)comm->coll_seq,
              a->count, dtype_name(a->dtype), algo->name);
    int64_t start = watch ? time_now_ns() : 0;
    if (res == CHORUS_SUCCESS) res = algo->run(&comm->prims, a);
    if (res == CHORUS_SUCCESS && watch)
        res = tune_watch_after(&comm->prims, &comm->tune, watch, a, (double)(time_now_ns() - start) / 1e9);
    if (res != CHORUS_SUCCESS && !comm->last_error[0])
        comm_error(comm, res, "%s #%llu failed: %s", coll_name(a->coll), (unsigned long long)comm->coll_seq,
                   chorus_strerror(res));
    return res;
}

static int coll_needs_float_stage(const coll_args_t *a)
{
    int half = a->dtype == chorus_float16 || a->dtype == chorus_bfloat16;
    int reducing = a->coll == COLL_ALLREDUCE || a->coll == COLL_REDUCE || a->coll == COLL_REDUCE_SCATTER;
    return half && reducing && (a->op == chorus_sum || a->op == chorus_prod || a->op == chorus_avg);
}

/* float16 / bfloat16 sums, products and averages run in float32 and round once at the end. in_elems: the
 * input's element count; out_elems: the output's. AllReduce and Reduce work in place in the stage;
 * ReduceScatter's output sits after its input. */
static chorus_result_t coll_run_staged(chorus_comm_t comm, const coll_args_t *a, size_t in_elems, size_t out_elems)
{
    size_t need = (in_elems + (a->coll == COLL_REDUCE_SCATTER ? out_elems : 0)) * sizeof(float);
    if (need > comm->stage_bytes) {
        free(comm->stage);
        comm->stage_bytes = 0;
        comm->stage = malloc(need);
        if (!comm->stage)
            return comm_error(comm, CHORUS_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes to reduce %s in float32",
                              coll_name(a->coll), need, dtype_name(a->dtype));
        comm->stage_bytes = need;
    }
    float *in = comm->stage, *out = in + in_elems;
    half_to_float_array(in, a->sendbuf, in_elems, a->dtype);
    coll_args_t f = *a;
    f.dtype = chorus_float32;
    f.sendbuf = in;
    f.recvbuf = a->coll == COLL_REDUCE_SCATTER ? out : in;
    CHECK(coll_run_algo(comm, &f));
    if (a->coll != COLL_REDUCE || comm->rank == a->root) float_to_half_array(a->recvbuf, f.recvbuf, out_elems, a->dtype);
    return CHORUS_SUCCESS;
}

/* A checked collective, on the thread that owns the communicator for it. */
static chorus_result_t coll_run(chorus_comm_t comm, const comm_call_t *c)
{
    const coll_args_t *a = &c->a;
    CHECK(comm_op_begin(comm));
    uint32_t tag = TAG_COLLECTIVE | (uint32_t)(comm->coll_seq & TAG_SEQ_MASK);
    int64_t start = coll_begin(comm, coll_name(a->coll), tag, comm->coll_seq);
    recorder_begin(&comm->rec, start, a->coll, comm->coll_seq, a->count, a->dtype, a->op, a->root);
    const prims_fingerprint_t fp = {.coll = a->coll, .dtype = a->dtype, .op = a->op, .root = a->root,
                                    .count = a->count, .seq = comm->coll_seq};
    comm->prims.fp = fp;
    comm->prims.fp_past[comm->coll_seq % PRIMS_FP_HISTORY] = fp;
    chorus_result_t res = CHORUS_SUCCESS;
    if (comm->nranks == 1)
        coll_local(a, c->elem);
    else if (a->coll != COLL_BARRIER && a->count == 0)
        ; /* nothing to move: every rank agrees, as counts must match */
    else if (coll_needs_float_stage(a))
        res = coll_run_staged(comm, a, c->in_elems, c->out_elems);
    else
        res = coll_run_algo(comm, a);
    comm->coll_seq++;
    recorder_end(&comm->rec, res, comm->prims.step, comm->prims.waiting_on);
    return comm_op_end(comm, res);
}

/* Point to point: each ordered pair of ranks numbers its messages, so the tags of a send and its receive
 * agree whatever collectives or other peers came in between. */
static chorus_result_t p2p_run(chorus_comm_t comm, const comm_call_t *c)
{
    int send = c->kind == CALL_SEND, peer = c->a.root;
    void *buf = send ? (void *)c->a.sendbuf : c->a.recvbuf;
    CHECK(comm_op_begin(comm));
    uint32_t *seq = send ? &comm->send_seq[peer] : &comm->recv_seq[peer];
    int64_t start = coll_begin(comm, send ? "send" : "recv", *seq & TAG_SEQ_MASK, *seq);
    recorder_begin(&comm->rec, start, send ? REC_SEND : REC_RECV, *seq, c->a.count, c->a.dtype, chorus_sum, peer);
    comm->prims.fp = (prims_fingerprint_t){.coll = COLL_COUNT, .dtype = c->a.dtype, .count = c->a.count, .seq = *seq};
    (*seq)++;
    size_t bytes = c->a.count * c->elem;
    chorus_result_t res = send ? prims_send(&comm->prims, peer, buf, bytes) : prims_recv(&comm->prims, peer, buf, bytes);
    recorder_end(&comm->rec, res, comm->prims.step, comm->prims.waiting_on);
    return comm_op_end(comm, res);
}

chorus_result_t api_call_run(chorus_comm_t comm, const comm_call_t *c)
{
    comm->last_error[0] = 0;
    return c->kind == CALL_COLL ? coll_run(comm, c) : p2p_run(comm, c);
}

/* Each public call: its checks fill the call (c->elem is api_check_common's), then api_submit runs it. */
static chorus_result_t allreduce_call(const void *sendbuf, void *recvbuf, size_t count, chorus_datatype_t datatype,
                                      chorus_redop_t op, chorus_comm_t comm, chorus_stream_t stream, comm_call_t *c)
{
    static const char name[] = "allreduce";
    size_t bytes = 0;
    CHECK(api_check_common(comm, name, datatype, 1, op, stream, c));
    CHECK(api_bytes(comm, name, "count", count, c->elem, 1, &bytes));
    CHECK(api_check_buf(comm, name, "sendbuf", sendbuf, bytes));
    CHECK(api_check_buf(comm, name, "recvbuf", recvbuf, bytes));
    CHECK(api_check_alias(comm, name, sendbuf, bytes, recvbuf, bytes, recvbuf));
    c->a = (coll_args_t){COLL_ALLREDUCE, sendbuf, recvbuf, count, datatype, op, 0};
    c->in_elems = c->out_elems = count;
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_allreduce(const void *sendbuf, void *recvbuf, size_t count, chorus_datatype_t datatype,
                                 chorus_redop_t op, chorus_comm_t comm, chorus_stream_t stream)
{
    comm_call_t c = {.kind = CALL_COLL};
    chorus_result_t res = allreduce_call(sendbuf, recvbuf, count, datatype, op, comm, stream, &c);
    return api_submit(comm, stream, "allreduce", res, &c);
}

static chorus_result_t allgather_call(const void *sendbuf, void *recvbuf, size_t sendcount, chorus_datatype_t datatype,
                                      chorus_comm_t comm, chorus_stream_t stream, comm_call_t *c)
{
    static const char name[] = "allgather";
    size_t bytes = 0, rbytes = 0;
    CHECK(api_check_common(comm, name, datatype, 0, chorus_sum, stream, c));
    CHECK(api_bytes(comm, name, "sendcount", sendcount, c->elem, 1, &bytes));
    CHECK(api_bytes(comm, name, "sendcount", sendcount, c->elem, (size_t)comm->nranks, &rbytes));
    CHECK(api_check_buf(comm, name, "sendbuf", sendbuf, bytes));
    CHECK(api_check_buf(comm, name, "recvbuf", recvbuf, rbytes));
    CHECK(api_check_alias(comm, name, sendbuf, bytes, recvbuf, rbytes, (char *)recvbuf + (size_t)comm->rank * bytes));
    c->a = (coll_args_t){COLL_ALLGATHER, sendbuf, recvbuf, sendcount, datatype, chorus_sum, 0};
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, chorus_datatype_t datatype,
                                 chorus_comm_t comm, chorus_stream_t stream)
{
    comm_call_t c = {.kind = CALL_COLL};
    chorus_result_t res = allgather_call(sendbuf, recvbuf, sendcount, datatype, comm, stream, &c);
    return api_submit(comm, stream, "allgather", res, &c);
}

static chorus_result_t reduce_scatter_call(const void *sendbuf, void *recvbuf, size_t recvcount,
                                           chorus_datatype_t datatype, chorus_redop_t op, chorus_comm_t comm,
                                           chorus_stream_t stream, comm_call_t *c)
{
    static const char name[] = "reduce_scatter";
    size_t bytes = 0, sbytes = 0;
    CHECK(api_check_common(comm, name, datatype, 1, op, stream, c));
    CHECK(api_bytes(comm, name, "recvcount", recvcount, c->elem, 1, &bytes));
    CHECK(api_bytes(comm, name, "recvcount", recvcount, c->elem, (size_t)comm->nranks, &sbytes));
    CHECK(api_check_buf(comm, name, "sendbuf", sendbuf, sbytes));
    CHECK(api_check_buf(comm, name, "recvbuf", recvbuf, bytes));
    CHECK(api_check_alias(comm, name, (const char *)sendbuf + (size_t)comm->rank * bytes, bytes, recvbuf, bytes,
                          recvbuf));
    if (recvbuf != (const char *)sendbuf + (size_t)comm->rank * bytes)
        CHECK(api_check_alias(comm, name, sendbuf, sbytes, recvbuf, bytes, NULL));
    c->a = (coll_args_t){COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, datatype, op, 0};
    c->in_elems = recvcount * (size_t)comm->nranks;
    c->out_elems = recvcount;
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, chorus_datatype_t datatype,
                                      chorus_redop_t op, chorus_comm_t comm, chorus_stream_t stream)
{
    comm_call_t c = {.kind = CALL_COLL};
    chorus_result_t res = reduce_scatter_call(sendbuf, recvbuf, recvcount, datatype, op, comm, stream, &c);
    return api_submit(comm, stream, "reduce_scatter", res, &c);
}

static chorus_result_t broadcast_call(const void *sendbuf, void *recvbuf, size_t count, chorus_datatype_t datatype,
                                      int root, chorus_comm_t comm, chorus_stream_t stream, comm_call_t *c)
{
    static const char name[] = "broadcast";
    size_t bytes = 0;
    CHECK(api_check_common(comm, name, datatype, 0, chorus_sum, stream, c));
    CHECK(api_check_root(comm, name, "root", root));
    CHECK(api_bytes(comm, name, "count", count, c->elem, 1, &bytes));
    if (comm->rank == root) {
        CHECK(api_check_buf(comm, name, "sendbuf", sendbuf, bytes));
        CHECK(api_check_alias(comm, name, sendbuf, bytes, recvbuf, bytes, recvbuf));
    }
    CHECK(api_check_buf(comm, name, "recvbuf", recvbuf, bytes));
    c->a = (coll_args_t){COLL_BROADCAST, sendbuf, recvbuf, count, datatype, chorus_sum, root};
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_broadcast(const void *sendbuf, void *recvbuf, size_t count, chorus_datatype_t datatype, int root,
                                 chorus_comm_t comm, chorus_stream_t stream)
{
    comm_call_t c = {.kind = CALL_COLL};
    chorus_result_t res = broadcast_call(sendbuf, recvbuf, count, datatype, root, comm, stream, &c);
    return api_submit(comm, stream, "broadcast", res, &c);
}

static chorus_result_t reduce_call(const void *sendbuf, void *recvbuf, size_t count, chorus_datatype_t datatype,
                                   chorus_redop_t op, int root, chorus_comm_t comm, chorus_stream_t stream,
                                   comm_call_t *c)
{
    static const char name[] = "reduce";
    size_t bytes = 0;
    CHECK(api_check_common(comm, name, datatype, 1, op, stream, c));
    CHECK(api_check_root(comm, name, "root", root));
    CHECK(api_bytes(comm, name, "count", count, c->elem, 1, &bytes));
    CHECK(api_check_buf(comm, name, "sendbuf", sendbuf, bytes));
    if (comm->rank == root) {
        CHECK(api_check_buf(comm, name, "recvbuf", recvbuf, bytes));
        CHECK(api_check_alias(comm, name, sendbuf, bytes, recvbuf, bytes, recvbuf));
    }
    c->a = (coll_args_t){COLL_REDUCE, sendbuf, recvbuf, count, datatype, op, root};
    c->in_elems = c->out_elems = count;
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_reduce(const void *sendbuf, void *recvbuf, size_t count, chorus_datatype_t datatype,
                              chorus_redop_t op, int root, chorus_comm_t comm, chorus_stream_t stream)
{
    comm_call_t c = {.kind = CALL_COLL};
    chorus_result_t res = reduce_call(sendbuf, recvbuf, count, datatype, op, root, comm, stream, &c);
    return api_submit(comm, stream, "reduce", res, &c);
}

static chorus_result_t alltoall_call(const void *sendbuf, void *recvbuf, size_t count, chorus_datatype_t datatype,
                                     chorus_comm_t comm, chorus_stream_t stream, comm_call_t *c)
{
    static const char name[] = "alltoall";
    size_t bytes = 0;
    CHECK(api_check_common(comm, name, datatype, 0, chorus_sum, stream, c));
    CHECK(api_bytes(comm, name, "count", count, c->elem, (size_t)comm->nranks, &bytes));
    CHECK(api_check_buf(comm, name, "sendbuf", sendbuf, bytes));
    CHECK(api_check_buf(comm, name, "recvbuf", recvbuf, bytes));
    CHECK(api_check_alias(comm, name, sendbuf, bytes, recvbuf, bytes, recvbuf));
    c->a = (coll_args_t){COLL_ALLTOALL, sendbuf, recvbuf, count, datatype, chorus_sum, 0};
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_alltoall(const void *sendbuf, void *recvbuf, size_t count, chorus_datatype_t datatype,
                                chorus_comm_t comm, chorus_stream_t stream)
{
    comm_call_t c = {.kind = CALL_COLL};
    chorus_result_t res = alltoall_call(sendbuf, recvbuf, count, datatype, comm, stream, &c);
    return api_submit(comm, stream, "alltoall", res, &c);
}

chorus_result_t chorus_barrier(chorus_comm_t comm, chorus_stream_t stream)
{
    comm_call_t c = {.kind = CALL_COLL, .a = {COLL_BARRIER, NULL, NULL, 0, chorus_uint8, chorus_sum, 0}};
    chorus_result_t res = api_check_common(comm, "barrier", chorus_uint8, 0, chorus_sum, stream, &c);
    return api_submit(comm, stream, "barrier", res, &c);
}

static chorus_result_t p2p_call(chorus_comm_t comm, const char *name, void *buf, size_t count,
                                chorus_datatype_t datatype, int peer, chorus_stream_t stream, comm_call_t *c)
{
    size_t bytes = 0;
    CHECK(api_check_common(comm, name, datatype, 0, chorus_sum, stream, c));
    CHECK(api_check_root(comm, name, "peer", peer));
    if (peer == comm->rank)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT,
                          "%s: peer %d is this rank; a blocking send to oneself cannot complete", name, peer);
    CHECK(api_bytes(comm, name, "count", count, c->elem, 1, &bytes));
    CHECK(api_check_buf(comm, name, c->kind == CALL_SEND ? "sendbuf" : "recvbuf", buf, bytes));
    c->a = (coll_args_t){COLL_COUNT, buf, buf, count, datatype, chorus_sum, peer};
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_send(const void *sendbuf, size_t count, chorus_datatype_t datatype, int peer, chorus_comm_t comm,
                            chorus_stream_t stream)
{
    comm_call_t c = {.kind = CALL_SEND};
    chorus_result_t res = p2p_call(comm, "send", (void *)sendbuf, count, datatype, peer, stream, &c);
    return api_submit(comm, stream, "send", res, &c);
}

chorus_result_t chorus_recv(void *recvbuf, size_t count, chorus_datatype_t datatype, int peer, chorus_comm_t comm,
                            chorus_stream_t stream)
{
    comm_call_t c = {.kind = CALL_RECV};
    chorus_result_t res = p2p_call(comm, "recv", recvbuf, count, datatype, peer, stream, &c);
    return api_submit(comm, stream, "recv", res, &c);
}

chorus_result_t chorus_mem_alloc(void **ptr_p, size_t bytes)
{
    if (!ptr_p) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "mem_alloc: ptr_p is NULL");
    if (!bytes) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "mem_alloc: bytes is 0; ask for at least one byte");
    int e = shm_region_alloc(bytes, ptr_p);
    if (e == ENOMEM || e == EFBIG || e == ENOSPC)
        return comm_error(NULL, CHORUS_ERR_NO_MEMORY, "mem_alloc: cannot allocate %zu bytes: %s", bytes, strerror(e));
    if (e)
        return comm_error(NULL, CHORUS_ERR_SYSTEM, "mem_alloc: cannot allocate %zu bytes of shared memory: %s", bytes,
                          strerror(e));
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_mem_free(void *ptr)
{
    if (!ptr || shm_region_free(ptr) == 0) return CHORUS_SUCCESS;
    return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT,
                      "mem_free: %p is not a buffer chorus_mem_alloc returned (or it was freed already)", ptr);
}
