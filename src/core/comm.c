/* Communicator life cycle: init (knobs, bootstrap, transports, engine) and destroy. */
#include "core/comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/comm_info.h"
#include "platform/host.h"
#include "util/log.h"
#include "util/util.h"

/* Detail of the last failed init on this thread: there is no communicator to hold it. */
static __thread char comm_init_error[COMM_ERROR_BYTES];

chorus_result_t comm_error(chorus_comm_t comm, chorus_result_t res, const char *fmt, ...)
{
    char *buf = comm ? comm->last_error : comm_init_error;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, COMM_ERROR_BYTES, fmt, ap);
    va_end(ap);
    return res;
}

const char *chorus_comm_last_error(chorus_comm_t comm) { return comm ? comm->last_error : comm_init_error; }

int chorus_version(void) { return CHORUS_VERSION_CODE; }

static void comm_free(chorus_comm_t comm)
{
    if (comm->conns)
        for (int i = 0; i < comm->nranks; i++)
            if (comm->conns[i]) comm->conns[i]->ops->close(comm->conns[i]);
    prims_fini(&comm->prims);
    progress_engine_fini(&comm->engine);
    params_free(&comm->params);
    free(comm->conns);
    free(comm->hosts);
    free(comm->send_seq);
    free(comm->recv_seq);
    free(comm->stage);
    free(comm);
}

static void comm_bootstrap_options(const chorus_comm_t comm, bootstrap_options_t *opt, char *hostid, size_t len)
{
    host_identity(comm->params.hostid, hostid, len);
    opt->hostid = hostid;
    opt->connect_timeout_ms = comm->params.connect_timeout;
    opt->handshake_timeout_ms = comm->params.handshake_timeout;
    opt->ifname = comm->params.socket_ifname;
    opt->family = comm->params.socket_family;
}

static int comm_same_host(const bootstrap_t *bs, int a, int b)
{
    return strcmp(bootstrap_peer(bs, a)->hostid, bootstrap_peer(bs, b)->hostid) == 0;
}

/* One shared-memory segment per pair of ranks on a host: warn once per host (from its lowest rank) when
 * /dev/shm cannot hold them all, naming the size needed; the pairs that do not fit fall back to TCP. */
static void comm_check_shm_space(chorus_comm_t comm, const bootstrap_t *bs)
{
    if (comm->params.transport[0] && strcmp(comm->params.transport, "auto") != 0) return;
    int local = 0, lowest = comm->rank;
    for (int i = 0; i < comm->nranks; i++)
        if (comm_same_host(bs, i, comm->rank)) {
            local++;
            lowest = CHORUS_MIN(lowest, i);
        }
    if (local < 2 || lowest != comm->rank) return;
    uint64_t need = (uint64_t)local * (uint64_t)(local - 1) / 2 * (2 * (uint64_t)comm->params.shm_ring_size + 8192);
    struct statvfs st;
    if (statvfs("/dev/shm", &st) != 0) return;
    uint64_t avail = (uint64_t)st.f_bavail * st.f_frsize;
    if (avail < need)
        LOG_WARN(LOG_SUB_SHM, "/dev/shm has %llu MiB free; %d ranks on this host need %llu MiB for shared memory "
                 "(CHORUS_SHM_RING_SIZE=%lld per direction and pair): pairs that do not fit use TCP. Enlarge "
                 "/dev/shm (docker --shm-size) or lower CHORUS_SHM_RING_SIZE",
                 (unsigned long long)(avail >> 20), local, (unsigned long long)((need + (1 << 20) - 1) >> 20),
                 (long long)comm->params.shm_ring_size);
}

/* The transport to one peer: shared memory when it shares this host (and CHORUS_TRANSPORT allows), proven
 * to work by shm_conn_open's token exchange; TCP otherwise or when that fails. Takes ownership of fd. */
static chorus_result_t comm_open_transport(chorus_comm_t comm, const bootstrap_t *bs, int peer, int fd)
{
    transport_options_t topt = {.chunk_bytes = (size_t)comm->params.chunk_size,
                                .socket_buffer = (size_t)comm->params.socket_buffer,
                                .shm_ring_bytes = (size_t)comm->params.shm_ring_size,
                                .shm_setup_timeout_ms = comm->params.connect_timeout};
    const char *mode = comm->params.transport;
    if (strcmp(mode, "tcp") != 0 && comm_same_host(bs, peer, comm->rank)) {
        char name[64], why[256] = "";
        chorus_result_t res = bootstrap_shm_name(bs, comm->rank, peer, name, sizeof(name));
        if (res == CHORUS_SUCCESS)
            res = shm_conn_open(fd, name, comm->rank < peer, &topt, &comm->conns[peer], why, sizeof(why));
        if (res == CHORUS_SUCCESS) {
            comm->nshm++;
            LOG_INFO(LOG_SUB_INIT, "rank %d (%s) via shm", peer, comm->hosts[peer]);
            return CHORUS_SUCCESS;
        }
        if (res != CHORUS_ERR_NOT_SUPPORTED) {
            close(fd);
            return comm_error(comm, res, "init: shared-memory set-up with rank %d (%s) failed: %s", peer,
                              comm->hosts[peer], why);
        }
        if (!comm->shm_fallback_logged++)
            LOG_INFO(LOG_SUB_SHM, "shared memory with rank %d unavailable (%s); using TCP", peer, why);
    }
    chorus_result_t res = tcp_conn_open(fd, &topt, &comm->conns[peer]);
    if (res != CHORUS_SUCCESS) return comm_error(comm, res, "init: cannot set up the connection to rank %d", peer);
    comm->ntcp++;
    LOG_INFO(LOG_SUB_INIT, "rank %d (%s) via tcp", peer, comm->hosts[peer]);
    return CHORUS_SUCCESS;
}

/* Rendezvous, mesh, and one transport connection per peer. */
static chorus_result_t comm_connect(chorus_comm_t comm, const chorus_unique_id_t *id)
{
    bootstrap_options_t opt;
    char hostid[HOST_ID_BYTES];
    comm_bootstrap_options(comm, &opt, hostid, sizeof(hostid));
    bootstrap_t *bs = NULL;
    int *fds = NULL;
    chorus_result_t res = bootstrap_init(id, comm->rank, comm->nranks, &opt, &bs, comm->last_error, COMM_ERROR_BYTES);
    if (res != CHORUS_SUCCESS) return res;
    fds = malloc(sizeof(int) * (size_t)comm->nranks);
    if (!fds) {
        res = comm_error(comm, CHORUS_ERR_NO_MEMORY, "init: out of memory");
        goto out;
    }
    CHECK_GOTO(bootstrap_connect_mesh(bs, fds, comm->last_error, COMM_ERROR_BYTES), res, out);
    for (int i = 0; i < comm->nranks; i++) {
        const bootstrap_peer_info_t *info = bootstrap_peer(bs, i);
        snprintf(comm->hosts[i], PRIMS_HOST_BYTES, "%.40s pid %d", info->host, info->pid);
        int same = 0;
        for (int j = 0; j < i && !same; j++) same = strcmp(info->hostid, bootstrap_peer(bs, j)->hostid) == 0;
        comm->nhosts += !same;
    }
    comm_check_shm_space(comm, bs);
    /* Peers in increasing rank order: shared-memory set-up is a blocking exchange per pair, and a common
     * order of pairs cannot deadlock. */
    for (int i = 0; i < comm->nranks; i++) {
        if (i == comm->rank) continue;
        CHECK_GOTO(comm_open_transport(comm, bs, i, fds[i]), res, out);
        fds[i] = -1;
    }
out:
    if (fds && res != CHORUS_SUCCESS)
        for (int i = 0; i < comm->nranks; i++)
            if (fds[i] >= 0 && !comm->conns[i]) close(fds[i]);
    free(fds);
    bootstrap_close(bs);
    return res;
}

static chorus_result_t comm_init(chorus_comm_t *comm_p, int nranks, const chorus_unique_id_t *id, int rank,
                                 const chorus_config_t *config)
{
    comm_init_error[0] = 0;
    if (!comm_p) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "init: comm_p is NULL");
    if (nranks < 1) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "init: nranks is %d; it must be at least 1", nranks);
    if (rank < 0 || rank >= nranks)
        return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "init: rank %d is out of range [0, %d)", rank, nranks);
    if (config && config->size < sizeof(size_t))
        return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT,
                          "init: config->size is %zu; set it to sizeof(chorus_config_t) (CHORUS_CONFIG_INITIALIZER)",
                          config->size);
    chorus_comm_t comm = calloc(1, sizeof(*comm));
    if (!comm) return comm_error(NULL, CHORUS_ERR_NO_MEMORY, "init: out of memory");
    comm->rank = rank;
    comm->nranks = nranks;
    comm->engine.wake_fd = -1;
    log_set_rank(rank);
    chorus_result_t res = params_load(&comm->params, comm->last_error, COMM_ERROR_BYTES);
    if (res != CHORUS_SUCCESS) goto fail;
    if (config && config->size >= offsetof(chorus_config_t, connect_timeout_ms) + sizeof(int64_t) &&
        config->connect_timeout_ms > 0)
        comm->params.connect_timeout = config->connect_timeout_ms;
    if (config && config->size >= offsetof(chorus_config_t, timeout_ms) + sizeof(int64_t) && config->timeout_ms > 0)
        comm->params.timeout = config->timeout_ms;
    if (comm->params.chunk_size < 64) {
        res = comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "CHORUS_CHUNK_SIZE=%lld is too small: use at least 64 bytes",
                         (long long)comm->params.chunk_size);
        goto fail;
    }
    comm->conns = calloc((size_t)nranks, sizeof(*comm->conns));
    comm->hosts = calloc((size_t)nranks, sizeof(*comm->hosts));
    comm->send_seq = calloc((size_t)nranks, sizeof(*comm->send_seq));
    comm->recv_seq = calloc((size_t)nranks, sizeof(*comm->recv_seq));
    if (!comm->conns || !comm->hosts || !comm->send_seq || !comm->recv_seq) {
        res = comm_error(comm, CHORUS_ERR_NO_MEMORY, "init: out of memory for %d ranks", nranks);
        goto fail;
    }
    CHECK_GOTO(progress_engine_init(&comm->engine, (int)comm->params.spin_count), res, fail);
    CHECK_GOTO(comm_connect(comm, id), res, fail);
    comm->prims = (prims_t){.rank = rank,
                            .nranks = nranks,
                            .conns = comm->conns,
                            .hosts = (const char(*)[PRIMS_HOST_BYTES])comm->hosts,
                            .engine = &comm->engine,
                            .chunk_bytes = (size_t)comm->params.chunk_size,
                            .err = comm->last_error,
                            .errlen = COMM_ERROR_BYTES};
    LOG_INFO(LOG_SUB_INIT, "communicator ready: rank %d of %d, %d host(s)", rank, nranks, comm->nhosts);
    *comm_p = comm;
    return CHORUS_SUCCESS;
fail:
    snprintf(comm_init_error, sizeof(comm_init_error), "%s", comm->last_error);
    LOG_WARN(LOG_SUB_INIT, "rank %d of %d: init failed: %s: %s", rank, nranks, chorus_result_name(res), comm_init_error);
    comm_free(comm);
    return res;
}

chorus_result_t chorus_comm_init_rank(chorus_comm_t *comm_p, int nranks, chorus_unique_id_t id, int rank)
{
    return comm_init(comm_p, nranks, &id, rank, NULL);
}

chorus_result_t chorus_comm_init_rank_config(chorus_comm_t *comm_p, int nranks, chorus_unique_id_t id, int rank,
                                             const chorus_config_t *config)
{
    return comm_init(comm_p, nranks, &id, rank, config);
}

chorus_result_t chorus_comm_init_from_env(chorus_comm_t *comm_p)
{
    chorus_params_t p;
    char err[COMM_ERROR_BYTES] = "";
    chorus_result_t res = params_load(&p, err, sizeof(err));
    if (res != CHORUS_SUCCESS) return comm_error(NULL, res, "%s", err);
    chorus_unique_id_t id;
    if (p.rank < 0 || p.nranks < 1 || !p.unique_id[0]) {
        res = comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT,
                         "init from env: CHORUS_RANK, CHORUS_NRANKS and CHORUS_UNIQUE_ID must all be set "
                         "(run the program under chorusrun, or set them yourself)");
    } else if (p.rank >= p.nranks || p.nranks > INT32_MAX) {
        res = comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "init from env: CHORUS_RANK=%lld is not below CHORUS_NRANKS=%lld",
                         (long long)p.rank, (long long)p.nranks);
    } else if ((res = bootstrap_id_from_string(p.unique_id, &id)) != CHORUS_SUCCESS) {
        comm_error(NULL, res, "init from env: CHORUS_UNIQUE_ID is not a valid unique id (it must be the text made by "
                              "chorus_unique_id_to_string, e.g. by chorusrun)");
    } else {
        res = comm_init(comm_p, (int)p.nranks, &id, (int)p.rank, NULL);
    }
    params_free(&p);
    return res;
}

chorus_result_t chorus_comm_destroy(chorus_comm_t comm)
{
    if (!comm) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "destroy: comm is NULL");
    comm_free(comm);
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_comm_rank(chorus_comm_t comm, int *rank_p)
{
    if (!comm || !rank_p) return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "comm_rank: %s is NULL", comm ? "rank_p" : "comm");
    *rank_p = comm->rank;
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_comm_size(chorus_comm_t comm, int *nranks_p)
{
    if (!comm || !nranks_p)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "comm_size: %s is NULL", comm ? "nranks_p" : "comm");
    *nranks_p = comm->nranks;
    return CHORUS_SUCCESS;
}

void comm_describe(chorus_comm_t comm, char *buf, size_t len)
{
    const char *t = comm->nshm && comm->ntcp ? "shm+tcp" : comm->nshm ? "shm" : comm->ntcp ? "tcp" : "none";
    snprintf(buf, len, "hosts %d, transport %s", comm->nhosts, t);
}

chorus_result_t chorus_get_unique_id(chorus_unique_id_t *id_p)
{
    comm_init_error[0] = 0;
    if (!id_p) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "get_unique_id: id_p is NULL");
    chorus_params_t p;
    chorus_result_t res = params_load(&p, comm_init_error, sizeof(comm_init_error));
    if (res != CHORUS_SUCCESS) return res;
    bootstrap_options_t opt = {.connect_timeout_ms = p.connect_timeout,
                               .handshake_timeout_ms = p.handshake_timeout,
                               .ifname = p.socket_ifname,
                               .family = p.socket_family};
    res = bootstrap_root_start(&opt, id_p, comm_init_error, sizeof(comm_init_error));
    if (res != CHORUS_SUCCESS) LOG_WARN(LOG_SUB_BOOTSTRAP, "get_unique_id failed: %s", comm_init_error);
    params_free(&p);
    return res;
}

chorus_result_t chorus_unique_id_to_string(const chorus_unique_id_t *id, char *str, size_t len)
{
    if (!id || !str) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "unique_id_to_string: %s is NULL", id ? "str" : "id");
    if (len < CHORUS_UNIQUE_ID_STRING_BYTES)
        return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT,
                          "unique_id_to_string: len %zu is too small; CHORUS_UNIQUE_ID_STRING_BYTES (%d) are needed", len,
                          CHORUS_UNIQUE_ID_STRING_BYTES);
    return bootstrap_id_to_string(id, str, len);
}

chorus_result_t chorus_unique_id_from_string(const char *str, chorus_unique_id_t *id_p)
{
    if (!str || !id_p)
        return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "unique_id_from_string: %s is NULL", str ? "id_p" : "str");
    chorus_result_t res = bootstrap_id_from_string(str, id_p);
    if (res != CHORUS_SUCCESS)
        comm_error(NULL, res, "unique_id_from_string: not a Chorus unique id (expected %d hex digits from "
                              "chorus_unique_id_to_string of the same Chorus version)", 2 * CHORUS_UNIQUE_ID_BYTES);
    return res;
}
