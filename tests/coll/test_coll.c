/*
 * Every collective x datatype x op x count x in/out of place, run as one rank of a real multi-process
 * communicator (under chorusrun), checked bit-exactly against values computed here from first principles.
 *
 * Inputs are small integers, so every sum, product, max and min is exact in every datatype and in any
 * order of combination: rank r's element i is v(r, i) in [-5, 5] ([0, 10] for unsigned types); for prod
 * the values are 1 or -1 except a single 2 per index. Guard bytes around every buffer prove nothing
 * outside it is written; non-root receive buffers must stay untouched where the API says so.
 */
#include <chorus/chorus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/reduce.h"

#define GUARD 64
#define GUARD_BYTE 0xA5

static int rank, nranks, failures, checks;
static chorus_comm_t comm;

static int is_unsigned(chorus_datatype_t dt) { return dt == chorus_uint8 || dt == chorus_uint32 || dt == chorus_uint64; }
static int is_float(chorus_datatype_t dt) { return dt >= chorus_float16; }

static int64_t value(int r, size_t i, chorus_datatype_t dt, chorus_redop_t op)
{
    if (op == chorus_prod) {
        int64_t v = (i % (size_t)nranks == (size_t)r) ? 2 : 1;
        return (!is_unsigned(dt) && (i + (size_t)r) % 5 == 0) ? -v : v;
    }
    int64_t v = (int64_t)((i * 7 + (size_t)r * 3) % 11);
    return is_unsigned(dt) ? v : v - 5;
}

static void store(void *buf, size_t i, chorus_datatype_t dt, double x)
{
    switch (dt) {
    case chorus_int8: ((int8_t *)buf)[i] = (int8_t)x; break;
    case chorus_uint8: ((uint8_t *)buf)[i] = (uint8_t)x; break;
    case chorus_int32: ((int32_t *)buf)[i] = (int32_t)x; break;
    case chorus_uint32: ((uint32_t *)buf)[i] = (uint32_t)x; break;
    case chorus_int64: ((int64_t *)buf)[i] = (int64_t)x; break;
    case chorus_uint64: ((uint64_t *)buf)[i] = (uint64_t)x; break;
    case chorus_float16: ((uint16_t *)buf)[i] = float_to_fp16((float)x); break;
    case chorus_bfloat16: ((uint16_t *)buf)[i] = float_to_bf16((float)x); break;
    case chorus_float32: ((float *)buf)[i] = (float)x; break;
    case chorus_float64: ((double *)buf)[i] = x; break;
    default: break;
    }
}

/* The exact result of reducing index i over all ranks, stored as the datatype represents it. */
static void store_reduced(void *buf, size_t at, size_t i, chorus_datatype_t dt, chorus_redop_t op)
{
    int64_t acc = value(0, i, dt, op);
    for (int r = 1; r < nranks; r++) {
        int64_t v = value(r, i, dt, op);
        switch (op) {
        case chorus_prod: acc *= v; break;
        case chorus_max: acc = v > acc ? v : acc; break;
        case chorus_min: acc = v < acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (op != chorus_avg) {
        store(buf, at, dt, (double)acc);
    } else if (!is_float(dt)) {
        store(buf, at, dt, (double)(acc / nranks));
    } else if (dt == chorus_float64) {
        store(buf, at, dt, (double)acc / (double)nranks);
    } else {
        store(buf, at, dt, (double)((float)acc / (float)nranks)); /* float32 division, then one rounding */
    }
}

/* A buffer with guard bytes on both sides. */
typedef struct gbuf {
    char *raw;
    char *p;
    size_t bytes;
} gbuf_t;

static gbuf_t gbuf_alloc(size_t bytes)
{
    gbuf_t g = {malloc(bytes + 2 * GUARD), NULL, bytes};
    memset(g.raw, GUARD_BYTE, bytes + 2 * GUARD);
    g.p = g.raw + GUARD;
    return g;
}

static int gbuf_guards_ok(const gbuf_t *g)
{
    for (size_t i = 0; i < GUARD; i++)
        if ((unsigned char)g->raw[i] != GUARD_BYTE || (unsigned char)g->p[g->bytes + i] != GUARD_BYTE) return 0;
    return 1;
}

static void report(int ok, const char *coll, chorus_datatype_t dt, chorus_redop_t op, size_t count, int inplace,
                   const char *what)
{
    checks++;
    if (ok) return;
    failures++;
    if (failures <= 20)
        fprintf(stderr, "rank %d/%d: %s %s %s count %zu %s: %s\n", rank, nranks, coll, dtype_name(dt), redop_name(op),
                count, inplace ? "in-place" : "out-of-place", what);
}

static int call_ok(chorus_result_t r, const char *coll)
{
    if (r == CHORUS_SUCCESS) return 1;
    fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, coll, chorus_result_name(r), chorus_comm_last_error(comm));
    return 0;
}

enum { ALLREDUCE, REDUCE, REDUCE_SCATTER, ALLGATHER, BROADCAST, ALLTOALL, NCOLLS };
static const char *const coll_names[NCOLLS] = {"allreduce", "reduce", "reduce_scatter", "allgather", "broadcast", "alltoall"};

/* A collective's index in coll_names, NCOLLS for the barrier, -1 if unknown. */
static int coll_parse(const char *name)
{
    for (int c = 0; c < NCOLLS; c++)
        if (strcmp(name, coll_names[c]) == 0) return c;
    return strcmp(name, "barrier") == 0 ? NCOLLS : -1;
}

/* One call: fill, run, compare every element of the output with the exact expectation. */
static void run_one(int coll, chorus_datatype_t dt, chorus_redop_t op, size_t count, int inplace, int root)
{
    size_t es = dtype_size(dt), p = (size_t)nranks, r = (size_t)rank;
    size_t in_elems = count, out_elems = count; /* per this rank */
    switch (coll) {
    case REDUCE_SCATTER: in_elems = count * p; break;
    case ALLGATHER: out_elems = count * p; break;
    case ALLTOALL: in_elems = out_elems = count * p; break;
    }
    gbuf_t out = gbuf_alloc(out_elems * es), in = gbuf_alloc(in_elems * es), want = gbuf_alloc(out_elems * es);
    /* The input as this rank contributes it. For alltoall, element k of the block from rank s to rank d
     * is value(s, k + d * count + s * p * count), so every (sender, receiver, k) is distinct. */
    for (size_t i = 0; i < in_elems; i++) {
        size_t gi = coll == ALLTOALL ? i + r * p * count : i;
        store(in.p, i, dt, (double)value(rank, gi, dt, op));
    }
    const void *send = in.p;
    void *recv = out.p;
    if (inplace) {
        /* Place the input where the API's in-place layout puts it inside the output buffer. */
        size_t off = coll == ALLGATHER ? r * count * es : 0;
        if (coll == REDUCE_SCATTER) {
            free(out.raw);
            out = gbuf_alloc(in_elems * es);
        }
        memcpy(out.p + off, in.p, in_elems * es);
        send = out.p + off;
        recv = coll == REDUCE_SCATTER ? out.p + r * count * es : out.p;
    }
    int expect_written = !(coll == REDUCE && rank != root);
    for (size_t i = 0; i < out_elems; i++) {
        switch (coll) {
        case ALLREDUCE:
        case REDUCE: store_reduced(want.p, i, i, dt, op); break;
        case REDUCE_SCATTER: store_reduced(want.p, i, r * count + i, dt, op); break;
        case ALLGATHER: store(want.p, i, dt, (double)value((int)(i / count), i % count, dt, op)); break;
        case BROADCAST: store(want.p, i, dt, (double)value(root, i, dt, op)); break;
        case ALLTOALL: {
            size_t from = i / count;
            store(want.p, i, dt, (double)value((int)from, i % count + r * count + from * p * count, dt, op));
            break;
        }
        }
    }
    if (!expect_written) memcpy(want.p, recv, out_elems * es); /* must stay as it was */
    chorus_result_t res = CHORUS_SUCCESS;
    switch (coll) {
    case ALLREDUCE: res = chorus_allreduce(send, recv, count, dt, op, comm, NULL); break;
    case REDUCE: res = chorus_reduce(send, recv, count, dt, op, root, comm, NULL); break;
    case REDUCE_SCATTER: res = chorus_reduce_scatter(send, recv, count, dt, op, comm, NULL); break;
    case ALLGATHER: res = chorus_allgather(send, recv, count, dt, comm, NULL); break;
    case BROADCAST: res = chorus_broadcast(send, recv, count, dt, root, comm, NULL); break;
    case ALLTOALL: res = chorus_alltoall(send, recv, count, dt, comm, NULL); break;
    }
    if (!call_ok(res, coll_names[coll])) {
        report(0, coll_names[coll], dt, op, count, inplace, "call failed");
    } else {
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < out_elems; i++)
            if (memcmp((char *)recv + i * es, want.p + i * es, es) != 0 && !bad++) first = i;
        char what[96];
        snprintf(what, sizeof(what), "%zu wrong elements, first at %zu", bad, first);
        report(bad == 0, coll_names[coll], dt, op, count, inplace, what);
        report(gbuf_guards_ok(&out) && gbuf_guards_ok(&in), coll_names[coll], dt, op, count, inplace,
               "bytes outside the buffers were written");
    }
    free(out.raw);
    free(in.raw);
    free(want.raw);
}

/* Whether -q keeps this datatype and op: for reductions every datatype once, with the ops in turn (float16
 * gets prod, staged in float32, and bfloat16 max, reduced natively); for data movement one datatype per
 * element size. */
static int sampled(int coll, chorus_datatype_t dt, chorus_redop_t op)
{
    if (coll == ALLREDUCE || coll == REDUCE || coll == REDUCE_SCATTER) return (int)op == (int)dt % chorus_num_ops;
    return dt == chorus_int8 || dt == chorus_float16 || dt == chorus_int32 || dt == chorus_float64;
}

/* test_coll [-c COLLECTIVE] [-q] [BIG]: BIG is the largest count (default about 1M elements); -c runs only
 * that collective (one of coll_names, or barrier) rather than every collective and point to point; -q runs
 * a sample of the datatypes and ops (see sampled()). */
int main(int argc, char **argv)
{
    int only = -1, quick = 0, opt;
    while ((opt = getopt(argc, argv, "c:q")) != -1) {
        if (opt == 'q') {
            quick = 1;
        } else if (opt != 'c' || (only = coll_parse(optarg)) < 0) {
            fprintf(stderr, "usage: test_coll [-c allreduce|reduce|reduce_scatter|allgather|broadcast|alltoall|"
                    "barrier] [-q] [largest count]\n");
            return 2;
        }
    }
    size_t big = optind < argc ? strtoull(argv[optind], NULL, 0) : (1u << 20);
    if (chorus_comm_init_from_env(&comm) != CHORUS_SUCCESS) {
        fprintf(stderr, "init failed: %s\n", chorus_comm_last_error(NULL));
        return 1;
    }
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &nranks);
    size_t p = (size_t)nranks;
    size_t counts[] = {0, 1, p > 1 ? p - 1 : 2, p + 1, 1009, big};
    for (int coll = 0; coll < NCOLLS; coll++)
        for (size_t c = 0; (only < 0 || only == coll) && c < sizeof(counts) / sizeof(counts[0]); c++) {
            /* "About 1M" is the whole buffer; per-rank counts shrink accordingly. */
            size_t count = counts[c];
            if (c == 5 && (coll == REDUCE_SCATTER || coll == ALLGATHER || coll == ALLTOALL)) count = big / p;
            int reducing = coll == ALLREDUCE || coll == REDUCE || coll == REDUCE_SCATTER;
            for (int dt = 0; dt < chorus_num_datatypes; dt++)
                for (int op = 0; op < (reducing ? chorus_num_ops : 1); op++)
                    for (int inplace = 0; inplace < 2 && (!quick || sampled(coll, dt, op)); inplace++) {
                        int root = (coll == REDUCE || coll == BROADCAST) ? (int)((c + (size_t)dt) % p) : 0;
                        run_one(coll, (chorus_datatype_t)dt, (chorus_redop_t)op, count, inplace, root);
                    }
        }
    /* Point to point around the ring (even ranks send first so blocking calls cannot deadlock), and barrier. */
    if (nranks > 1 && only < 0) {
        size_t n = 100003;
        int32_t *sbuf = malloc(n * 4), *rbuf = malloc(n * 4);
        for (size_t i = 0; i < n; i++) sbuf[i] = (int32_t)(i * 31 + (size_t)rank);
        int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
        int ok = 1;
        for (int phase = 0; phase < 2; phase++) {
            if ((phase == 0) == (rank % 2 == 0)) ok &= call_ok(chorus_send(sbuf, n, chorus_int32, to, comm, NULL), "send");
            else ok &= call_ok(chorus_recv(rbuf, n, chorus_int32, from, comm, NULL), "recv");
        }
        for (size_t i = 0; ok && i < n; i++) ok = rbuf[i] == (int32_t)(i * 31 + (size_t)from);
        report(ok, "sendrecv", chorus_int32, chorus_sum, n, 0, "wrong data");
        free(sbuf);
        free(rbuf);
    }
    if (only < 0 || only == NCOLLS)
        report(call_ok(chorus_barrier(comm, NULL), "barrier"), "barrier", chorus_uint8, chorus_sum, 0, 0, "failed");

    /* Every rank's verdict counts: sum the failures over the communicator. */
    int64_t totals[2] = {failures, checks};
    if (!call_ok(chorus_allreduce(totals, totals, 2, chorus_int64, chorus_sum, comm, NULL), "allreduce of results"))
        totals[0]++;
    if (rank == 0) printf("%lld passed, %lld failed\n", (long long)(totals[1] - totals[0]), (long long)totals[0]);
    chorus_comm_destroy(comm);
    return totals[0] ? 1 : 0;
}
