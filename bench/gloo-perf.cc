/* gloo-perf: chorus-perf's twin over Gloo and its TCP transport, for side-by-side runs (bench/compare).
 * Same flags, rows and checks through the shared driver; only the calls differ. Run it under chorusrun,
 * which gives each rank CHORUS_RANK and CHORUS_NRANKS:
 *     chorusrun -n 4 gloo-perf [--algo ring|bcube|hd] [--store DIR] allreduce -b 8 -e 256M -f 4
 * The ranks meet through a Gloo FileStore: DIR if given (shared by the ranks, left as it was), else a
 * directory under /tmp named after chorusrun's unique id, which the ranks make and remove themselves.
 *
 * What runs is what Gloo offers:
 *   allreduce       ring or bcube: gloo::allreduce, the API PyTorch uses; hd: the older
 *                   gloo::AllreduceHalvingDoubling, which works in place (out of place first copies
 *                   sendbuf to recvbuf, as a user of it would) and registers its buffers when built, so
 *                   one instance serves every call of a row.
 *   allgather, broadcast, reduce, barrier: gloo::allgather, broadcast, reduce, barrier.
 *   alltoall        gloo::alltoall has no in-place form: in place sends from a scratch copy.
 *   sendrecv        unbound buffers, send to the next rank and receive from the previous one.
 *   reduce_scatter  gloo::ReduceScatterHalvingDoubling, Gloo's only reduce-scatter (there is no
 *                   gloo::reduce_scatter), whatever --algo says. Like AllreduceHalvingDoubling it registers
 *                   its buffer when built and works in place on the whole buffer, which it also uses as
 *                   scratch, leaving the rank's block at the start: in place moves it to the rank's own
 *                   block afterwards (as mpi-perf does with MPI's in-place layout); out of place first copies
 *                   sendbuf to a scratch buffer and then the block to recvbuf, as a user of it would.
 *                   Known Gloo bug: in run(), every rank but 0 copies its result to the buffer's start before
 *                   it knows that its sends from there have left, so a peer may receive overwritten data and
 *                   -c 1 counts wrong values, now and then, from a few MiB per rank up (seen at 2 ranks
 *                   with 8 MiB); the work done, and so the time, is the same.
 * Gloo reports errors by throwing; they are caught per call and printed, and the rank exits, which makes
 * chorusrun stop the others. */
#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" {
#include "perf_common.h"
#include "util/params.h"
}

namespace {

enum class Algo { ring, bcube, hd };

const char *algo_name(Algo a)
{
    switch (a) {
    case Algo::ring: return "ring";
    case Algo::bcube: return "bcube";
    case Algo::hd: return "halving-doubling";
    }
    return "?";
}

// Slot prefix of the point-to-point exchange, clear of the prefixes Gloo's collectives use (gloo/types.h).
constexpr uint8_t kSendrecvSlotPrefix = 0x7f;
constexpr auto kTimeout = std::chrono::minutes(10);

struct GlooBench {
    std::shared_ptr<gloo::Context> context;
    Algo algo = Algo::ring;
    int rank = 0;
    int nranks = 1;
    uint32_t tag = 0; // every rank makes the same calls in the same order, so counting them matches tags
    std::vector<char> scratch;
    // The halving-doubling instance (allreduce hd, or reduce_scatter) of the current row and what it was
    // built for; for reduce_scatter hd_count is the whole buffer's.
    std::unique_ptr<gloo::Algorithm> hd;
    void *hd_ptr = nullptr;
    size_t hd_count = 0;
    chorus_datatype_t hd_dtype = chorus_num_datatypes;
    chorus_redop_t hd_op = chorus_num_ops;
};

size_t dsize(chorus_datatype_t dt)
{
    switch (dt) {
    case chorus_int8:
    case chorus_uint8: return 1;
    case chorus_float16:
    case chorus_bfloat16: return 2;
    case chorus_int32:
    case chorus_uint32:
    case chorus_float32: return 4;
    default: return 8;
    }
}

// Calls fn with a value of the C++ type of dt (bfloat16 is refused by gloo_unsupported before any call).
template <typename Fn>
void with_type(chorus_datatype_t dt, Fn &&fn)
{
    switch (dt) {
    case chorus_int8: fn(int8_t{}); break;
    case chorus_uint8: fn(uint8_t{}); break;
    case chorus_int32: fn(int32_t{}); break;
    case chorus_uint32: fn(uint32_t{}); break;
    case chorus_int64: fn(int64_t{}); break;
    case chorus_uint64: fn(uint64_t{}); break;
    case chorus_float16: fn(gloo::float16{}); break;
    case chorus_float32: fn(float{}); break;
    case chorus_float64: fn(double{}); break;
    default: throw std::invalid_argument("datatype without a Gloo counterpart");
    }
}

template <typename T>
gloo::AllreduceOptions::Func reduce_fn(chorus_redop_t op)
{
    using Fn = void (*)(void *, const void *, const void *, size_t);
    switch (op) {
    case chorus_prod: return static_cast<Fn>(&gloo::product<T>);
    case chorus_max: return static_cast<Fn>(&gloo::max<T>);
    case chorus_min: return static_cast<Fn>(&gloo::min<T>);
    default: return static_cast<Fn>(&gloo::sum<T>);
    }
}

template <typename T>
const gloo::ReductionFunction<T> *reduction(chorus_redop_t op)
{
    switch (op) {
    case chorus_prod: return gloo::ReductionFunction<T>::product;
    case chorus_max: return gloo::ReductionFunction<T>::max;
    case chorus_min: return gloo::ReductionFunction<T>::min;
    default: return gloo::ReductionFunction<T>::sum;
    }
}

extern "C" const char *gloo_unsupported(chorus_datatype_t dt, chorus_redop_t op, int has_op)
{
    if (dt == chorus_bfloat16) return "Gloo has no bfloat16";
    if (has_op && op == chorus_avg) return "Gloo has no avg";
    return nullptr;
}

void allreduce(GlooBench &b, const perf_call_t *c)
{
    with_type(c->dtype, [&](auto zero) {
        using T = decltype(zero);
        T *out = static_cast<T *>(c->recvbuf);
        if (b.algo == Algo::hd) {
            if (c->count > INT_MAX) throw std::length_error("halving-doubling takes an int count");
            if (!b.hd || b.hd_ptr != out || b.hd_count != c->count || b.hd_dtype != c->dtype || b.hd_op != c->op) {
                b.hd.reset();
                b.hd.reset(new gloo::AllreduceHalvingDoubling<T>(b.context, {out}, static_cast<int>(c->count),
                                                                  reduction<T>(c->op)));
                b.hd_ptr = out;
                b.hd_count = c->count;
                b.hd_dtype = c->dtype;
                b.hd_op = c->op;
            }
            if (!c->in_place) std::memcpy(static_cast<void *>(out), c->sendbuf, c->count * sizeof(T));
            b.hd->run();
            return;
        }
        gloo::AllreduceOptions opts(b.context);
        opts.setAlgorithm(b.algo == Algo::bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                                                : gloo::AllreduceOptions::Algorithm::RING);
        if (!c->in_place) opts.setInput(static_cast<T *>(const_cast<void *>(c->sendbuf)), c->count);
        opts.setOutput(out, c->count);
        opts.setReduceFunction(reduce_fn<T>(c->op));
        opts.setTag(b.tag);
        gloo::allreduce(opts);
    });
}

void reduce_scatter(GlooBench &b, const perf_call_t *c)
{
    with_type(c->dtype, [&](auto zero) {
        using T = decltype(zero);
        size_t count = c->count * static_cast<size_t>(b.nranks);
        if (count > INT_MAX / sizeof(T)) throw std::length_error("halving-doubling takes an int byte count");
        T *work = static_cast<T *>(const_cast<void *>(c->sendbuf));
        if (!c->in_place) {
            if (b.scratch.size() < count * sizeof(T)) {
                b.hd.reset(); // it may be bound to the scratch buffer about to move
                b.scratch.resize(count * sizeof(T));
            }
            work = reinterpret_cast<T *>(b.scratch.data());
        }
        if (!b.hd || b.hd_ptr != work || b.hd_count != count || b.hd_dtype != c->dtype || b.hd_op != c->op) {
            b.hd.reset();
            std::vector<int> block_counts(static_cast<size_t>(b.nranks), static_cast<int>(c->count));
            b.hd.reset(new gloo::ReduceScatterHalvingDoubling<T>(b.context, {work}, static_cast<int>(count),
                                                                  block_counts, reduction<T>(c->op)));
            b.hd_ptr = work;
            b.hd_count = count;
            b.hd_dtype = c->dtype;
            b.hd_op = c->op;
        }
        if (!c->in_place) std::memcpy(static_cast<void *>(work), c->sendbuf, count * sizeof(T));
        b.hd->run();
        if (c->recvbuf != work) std::memmove(c->recvbuf, static_cast<void *>(work), c->count * sizeof(T));
    });
}

void allgather(GlooBench &b, const perf_call_t *c)
{
    size_t block = c->count * dsize(c->dtype);
    gloo::AllgatherOptions opts(b.context);
    if (!c->in_place) opts.setInput(static_cast<char *>(const_cast<void *>(c->sendbuf)), block);
    opts.setOutput(static_cast<char *>(c->recvbuf), block * static_cast<size_t>(b.nranks));
    opts.setTag(b.tag);
    gloo::allgather(opts);
}

void broadcast(GlooBench &b, const perf_call_t *c)
{
    size_t bytes = c->count * dsize(c->dtype);
    gloo::BroadcastOptions opts(b.context);
    if (!c->in_place && b.rank == c->root) opts.setInput(static_cast<char *>(const_cast<void *>(c->sendbuf)), bytes);
    opts.setOutput(static_cast<char *>(c->recvbuf), bytes);
    opts.setRoot(c->root);
    opts.setTag(b.tag);
    gloo::broadcast(opts);
}

void reduce(GlooBench &b, const perf_call_t *c)
{
    with_type(c->dtype, [&](auto zero) {
        using T = decltype(zero);
        gloo::ReduceOptions opts(b.context);
        if (!c->in_place) opts.setInput(static_cast<T *>(const_cast<void *>(c->sendbuf)), c->count);
        opts.setOutput(static_cast<T *>(c->recvbuf), c->count);
        opts.setRoot(c->root);
        opts.setReduceFunction(reduce_fn<T>(c->op));
        opts.setTag(b.tag);
        gloo::reduce(opts);
    });
}

void alltoall(GlooBench &b, const perf_call_t *c)
{
    size_t bytes = c->count * dsize(c->dtype) * static_cast<size_t>(b.nranks);
    char *in = static_cast<char *>(const_cast<void *>(c->sendbuf));
    if (c->in_place) {
        b.scratch.resize(bytes);
        std::memcpy(b.scratch.data(), c->recvbuf, bytes);
        in = b.scratch.data();
    }
    gloo::AlltoallOptions opts(b.context);
    opts.setInput(in, bytes);
    opts.setOutput(static_cast<char *>(c->recvbuf), bytes);
    opts.setTag(b.tag);
    gloo::alltoall(opts);
}

void sendrecv(GlooBench &b, const perf_call_t *c)
{
    size_t bytes = c->count * dsize(c->dtype);
    auto send = b.context->createUnboundBuffer(const_cast<void *>(c->sendbuf), bytes);
    auto recv = b.context->createUnboundBuffer(c->recvbuf, bytes);
    uint64_t slot = gloo::Slot::build(kSendrecvSlotPrefix, b.tag);
    recv->recv((b.rank - 1 + b.nranks) % b.nranks, slot);
    send->send((b.rank + 1) % b.nranks, slot);
    recv->waitRecv(kTimeout);
    send->waitSend(kTimeout);
}

void barrier(GlooBench &b)
{
    gloo::BarrierOptions opts(b.context);
    opts.setTag(b.tag);
    gloo::barrier(opts);
}

extern "C" int gloo_run(void *ctx, const perf_call_t *c)
{
    GlooBench &b = *static_cast<GlooBench *>(ctx);
    b.tag++;
    try {
        // Nothing moves, and Gloo's argument checks reject some empty buffers.
        if (c->coll != PERF_BARRIER && c->count == 0) return 0;
        switch (c->coll) {
        case PERF_ALLREDUCE: allreduce(b, c); break;
        case PERF_ALLGATHER: allgather(b, c); break;
        case PERF_REDUCE_SCATTER: reduce_scatter(b, c); break;
        case PERF_BROADCAST: broadcast(b, c); break;
        case PERF_REDUCE: reduce(b, c); break;
        case PERF_ALLTOALL: alltoall(b, c); break;
        case PERF_SENDRECV: sendrecv(b, c); break;
        case PERF_BARRIER: barrier(b); break;
        default: throw std::invalid_argument("not offered by Gloo");
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gloo-perf: rank %d: %s failed: %s\n", b.rank, perf_coll_name(c->coll), e.what());
        return -1;
    }
    return 0;
}

template <typename T>
int allreduce_one(GlooBench &b, T *value, gloo::AllreduceOptions::Func fn)
{
    try {
        gloo::AllreduceOptions opts(b.context);
        opts.setOutput(value, 1);
        opts.setReduceFunction(fn);
        opts.setTag(++b.tag);
        gloo::allreduce(opts);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gloo-perf: rank %d: allreduce of a result failed: %s\n", b.rank, e.what());
        return -1;
    }
    return 0;
}

extern "C" int gloo_max_double(void *ctx, double *value)
{
    return allreduce_one(*static_cast<GlooBench *>(ctx), value, reduce_fn<double>(chorus_max));
}

extern "C" int gloo_sum_int64(void *ctx, int64_t *value)
{
    return allreduce_one(*static_cast<GlooBench *>(ctx), value, reduce_fn<int64_t>(chorus_sum));
}

// ---- Setup ----

struct Launch {
    Algo algo = Algo::ring;
    std::string store;
    bool own_store = false; // made here from the unique id, so removed here once the ranks are connected
    int rank = -1;
    int nranks = -1;
};

const char extra_usage[] =
    "       gloo-perf [--algo ring|bcube|hd] [--store DIR] [--rank R --nranks N] COLLECTIVE [flags]\n"
    "  --algo A    allreduce algorithm: ring or bcube (gloo::allreduce), hd (AllreduceHalvingDoubling);\n"
    "              reduce_scatter is always halving-doubling (ReduceScatterHalvingDoubling)\n"
    "  --store D   directory shared by the ranks for the FileStore rendezvous (default: one under /tmp\n"
    "              named after CHORUS_UNIQUE_ID, as chorusrun sets it)\n"
    "  --rank R, --nranks N   this rank and the rank count (default: CHORUS_RANK and CHORUS_NRANKS)\n";

// FNV-1a, to turn the unique id into a short directory name.
uint64_t text_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
    return h;
}

// Takes the leading --options off argv; returns how many words they took, or -1 after printing why not.
int parse_launch(int argc, char **argv, Launch &l)
{
    int i = 1;
    while (i + 1 < argc && std::strncmp(argv[i], "--", 2) == 0) {
        std::string opt = argv[i], val = argv[i + 1];
        if (opt == "--algo" && (val == "ring" || val == "bcube" || val == "hd"))
            l.algo = val == "ring" ? Algo::ring : val == "bcube" ? Algo::bcube : Algo::hd;
        else if (opt == "--store")
            l.store = val;
        else if (opt == "--rank" || opt == "--nranks")
            (opt == "--rank" ? l.rank : l.nranks) = std::atoi(val.c_str());
        else {
            std::fprintf(stderr, "gloo-perf: %s %s: unknown option or value (see -h)\n", argv[i], argv[i + 1]);
            return -1;
        }
        i += 2;
    }
    chorus_params_t params;
    char err[256] = "";
    if (params_load(&params, err, sizeof(err)) != CHORUS_SUCCESS) {
        std::fprintf(stderr, "gloo-perf: %s\n", err);
        return -1;
    }
    if (l.rank < 0) l.rank = static_cast<int>(params.rank);
    if (l.nranks < 0) l.nranks = static_cast<int>(params.nranks);
    if (l.store.empty() && *params.unique_id) {
        char dir[64];
        std::snprintf(dir, sizeof(dir), "%s/gloo-perf-%016llx", P_tmpdir,
                      static_cast<unsigned long long>(text_hash(params.unique_id)));
        l.store = dir;
        l.own_store = true;
    }
    params_free(&params);
    return i - 1;
}

// The store serves the rendezvous only: once every rank is connected, each removes the keys it wrote, then
// rank 0 the directory it may have made.
void remove_store(GlooBench &b, gloo::rendezvous::FileStore &store, const Launch &l)
{
    barrier(b);
    for (const auto &path : store.getAllKeyFilePaths()) unlink(path.c_str());
    barrier(b);
    if (l.own_store && b.rank == 0) rmdir(l.store.c_str());
}

} // namespace

int main(int argc, char **argv)
{
    Launch launch;
    int used = argc > 1 && std::strcmp(argv[1], "-h") == 0 ? 0 : parse_launch(argc, argv, launch);
    if (used < 0) return 2;
    std::vector<char *> rest(argv + used, argv + argc);
    rest[0] = argv[0];
    perf_opts_t opts;
    int rc = perf_parse_args(static_cast<int>(rest.size()), rest.data(), extra_usage, &opts);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (launch.rank < 0 || launch.nranks < 1 || launch.rank >= launch.nranks || launch.store.empty()) {
        std::fprintf(stderr, "gloo-perf: run under chorusrun, or give --store, --rank and --nranks\n");
        return 2;
    }
    if (launch.own_store && mkdir(launch.store.c_str(), 0700) != 0 && errno != EEXIST) {
        std::fprintf(stderr, "gloo-perf: cannot make %s: %s\n", launch.store.c_str(), std::strerror(errno));
        return 1;
    }

    GlooBench b;
    b.algo = launch.algo;
    b.rank = launch.rank;
    b.nranks = launch.nranks;
    try {
        gloo::rendezvous::FileStore store(launch.store);
        gloo::transport::tcp::attr attr("127.0.0.1");
        auto device = gloo::transport::tcp::CreateDevice(attr);
        auto context = std::make_shared<gloo::rendezvous::Context>(b.rank, b.nranks);
        context->setTimeout(kTimeout);
        context->connectFullMesh(store, device);
        b.context = context;
        remove_store(b, store, launch);

        // Which algorithm ran, where Gloo has more than one or the name does not say.
        std::string algo;
        if (opts.coll == PERF_ALLREDUCE || opts.coll == PERF_REDUCE_SCATTER)
            algo = std::string(", ") + perf_coll_name(opts.coll) + " " +
                   algo_name(opts.coll == PERF_ALLREDUCE ? b.algo : Algo::hd);
        char description[160];
        std::snprintf(description, sizeof(description), "hosts 1, transport tcp (127.0.0.1), Gloo %d.%d.%d%s",
                      GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH, algo.c_str());
        perf_backend_t be = {};
        be.rank = b.rank;
        be.nranks = b.nranks;
        be.description = description;
        be.ctx = &b;
        be.unsupported = gloo_unsupported;
        be.run = gloo_run;
        be.allreduce_max_double = gloo_max_double;
        be.allreduce_sum_int64 = gloo_sum_int64;
        rc = perf_main(&opts, &be);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gloo-perf: rank %d: %s\n", b.rank, e.what());
        return 1;
    }
    return rc;
}
