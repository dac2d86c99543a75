/* Communicator life cycle: init (knobs, bootstrap, transports, engine) and destroy. */
#include "core/comm.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/comm_info.h"
#include "platform/host.h"
#include "platform/shmem.h"
#include "util/log.h"
#include "util/util.h"

/* How long chorus_comm_abort() waits for a blocked call to leave the data path. */
#define COMM_ABORT_WAIT_MS 2000
/* How long destroy keeps a failed communicator's connections open for the other survivors (comm_linger). */
#define COMM_FAILED_LINGER_MS 1000

/* Detail of the last failed init on this thread: there is no communicator to hold it. */
static __thread char comm_init_error[COMM_ERROR_BYTES];

/* Detail of a failed call that may run beside the communicator's operations (comm_side_error): shown by
 * chorus_comm_last_error to the thread that made it, until that thread's next call on the communicator. */
static __thread uint64_t comm_side_serial; /* the communicator's serial; 0: none */
static __thread char comm_side_text[COMM_ERROR_BYTES];
static __thread uint64_t comm_queueing; /* the serial of the communicator whose queued call this thread checks */
static _Atomic uint64_t comm_serials;

void comm_queue_checks(chorus_comm_t comm)
{
    comm_queueing = comm ? comm->serial : 0;
    if (!comm) return;
    /* This thread's last_error shows this call's own detail from now on: none yet. */
    comm_side_text[0] = 0;
    comm_side_serial = comm->serial;
}

chorus_result_t comm_error(chorus_comm_t comm, chorus_result_t res, const char *fmt, ...)
{
    char *buf = comm ? comm->last_error : comm_init_error;
    comm_side_serial = 0;
    if (comm && comm_queueing == comm->serial) {
        buf = comm_side_text;
        comm_side_serial = comm->serial;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, COMM_ERROR_BYTES, fmt, ap);
    va_end(ap);
    return res;
}

chorus_result_t comm_side_error(chorus_comm_t comm, chorus_result_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(comm_side_text, sizeof(comm_side_text), fmt, ap);
    va_end(ap);
    comm_side_serial = comm->serial;
    return res;
}

const char *chorus_comm_last_error(chorus_comm_t comm)
{
    if (!comm) return comm_init_error;
    return comm_side_serial == comm->serial ? comm_side_text : comm->last_error;
}

int chorus_version(void) { return CHORUS_VERSION_CODE; }

static void comm_free(chorus_comm_t comm)
{
    recorder_fini(comm); /* first: the SIGUSR1 helper may be dumping this communicator */
    if (comm->conns)
        for (int i = 0; i < comm->nranks; i++)
            if (comm->conns[i]) comm->conns[i]->ops->close(comm->conns[i]);
    prims_fini(&comm->prims);
    tune_state_free(&comm->tune);
    progress_engine_fini(&comm->engine);
    params_free(&comm->params);
    free(comm->conns);
    free(comm->hosts);
    free(comm->host_of);
    free(comm->send_seq);
    free(comm->recv_seq);
    free(comm->stage);
    pthread_mutex_destroy(&comm->fail_lock);
    pthread_mutex_destroy(&comm->turn_lock);
    pthread_cond_destroy(&comm->turn_cv);
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

/* The processors this process may run on. */
static int comm_cpus(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
}

/* The host arena's slot size: CHORUS_SHM_SLOT_SIZE, or for auto (-1) what this machine's L2 and cores
 * make of it for the communicator's ranks (0: no arena). Rank 0's answer is the one all ranks use. */
static size_t comm_arena_slot_bytes(chorus_comm_t comm)
{
    if (comm->params.shm_slot_size >= 0) return (size_t)comm->params.shm_slot_size;
    return shm_arena_auto_slot_bytes(host_l2_bytes(), comm->nranks, comm_cpus());
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
    uint64_t arena = 0; /* the host arena too, when every rank is here (comm_setup_arena) */
    if (local == comm->nranks) arena = shm_arena_map_bytes(local, comm_arena_slot_bytes(comm));
    struct statvfs st;
    if (statvfs("/dev/shm", &st) != 0) return;
    uint64_t avail = (uint64_t)st.f_bavail * st.f_frsize;
    if (avail < need + arena)
        LOG_WARN(LOG_SUB_SHM, "/dev/shm has %llu MiB free; %d ranks on this host need %llu MiB for shared memory "
                 "(CHORUS_SHM_RING_SIZE=%lld per direction and pair, and %llu MiB of host arena): pairs "
                 "that do not fit use TCP, and without the arena the direct algorithms are off. Enlarge "
                 "/dev/shm (docker --shm-size), or lower CHORUS_SHM_RING_SIZE and CHORUS_SHM_SLOT_SIZE",
                 (unsigned long long)(avail >> 20), local,
                 (unsigned long long)((need + arena + (1 << 20) - 1) >> 20), (long long)comm->params.shm_ring_size,
                 (unsigned long long)((arena + (1 << 20) - 1) >> 20));
}

static void comm_decide_yield(chorus_comm_t comm, const bootstrap_t *bs)
{
    int local = 0;
    for (int i = 0; i < comm->nranks; i++) local += comm_same_host(bs, i, comm->rank);
    int cpus = comm_cpus();
    comm->engine.yield = local > cpus;
    LOG_INFO(LOG_SUB_INIT, "%d ranks on this host, %d processors: %s while waiting", local, cpus,
             comm->engine.yield ? "yield" : "spin");
}

/* What the cost model needs of the layout: the most ranks any host has, the rank rank 0 measures its
 * link with (the first rank on another host, else rank 1), and across hosts the one it measures its own
 * host's link with (the next rank on its host), with whether the two share memory (both know: they set
 * up their connection together). */
static chorus_result_t comm_setup_tuning(chorus_comm_t comm)
{
    int *count = calloc((size_t)comm->nhosts, sizeof(int));
    if (!count) return comm_error(comm, CHORUS_ERR_NO_MEMORY, "init: out of memory");
    int most = 0, partner = comm->nranks > 1 ? 1 : 0, inside = -1;
    for (int i = comm->nranks - 1; i >= 0; i--) {
        int h = comm->host_of[i];
        count[h]++;
        most = CHORUS_MAX(most, count[h]);
        if (h == 1) partner = i; /* host 1's lowest rank, last seen going down */
        if (i > 0 && h == comm->host_of[0] && comm->nhosts > 1) inside = i;
    }
    free(count);
    int shm = 1;
    if (inside >= 0 && (comm->rank == 0 || comm->rank == inside)) {
        const transport_conn_t *conn = comm->conns[comm->rank == 0 ? inside : 0];
        shm = conn && strcmp(conn->ops->name, "shm") == 0;
    }
    return comm_tune_init(comm, most, partner, shm ? inside : -1, shm, comm_cpus());
}

/* CHORUS_SOCKET_SEND_BUFFER=auto: 128 KiB, and 256 KiB to a peer on this host where each of the host's
 * ranks has a processor (docs/design.md, Data path: over loopback the larger buffer lets one send take
 * twice the bytes, while the two copies, into the socket and out of it, run on cores of their own; with
 * more ranks than processors, or across hosts, it queued more than it moved). */
#define COMM_SEND_BUFFER (128u << 10)
#define COMM_SEND_BUFFER_LOCAL (256u << 10)

/* The TCP send buffer to request towards peer. */
static size_t comm_send_buffer_bytes(chorus_comm_t comm, const bootstrap_t *bs, int peer)
{
    if (comm->params.socket_send_buffer >= 0) return (size_t)comm->params.socket_send_buffer;
    return comm_same_host(bs, peer, comm->rank) && !comm->engine.yield ? COMM_SEND_BUFFER_LOCAL : COMM_SEND_BUFFER;
}

/* The transport to one peer: shared memory when it shares this host (and CHORUS_TRANSPORT allows), proven
 * to work by shm_conn_open's token exchange; TCP otherwise or when that fails. socks: every peer's socket
 * by rank (-1 for none), watched during the exchange so that a rank that dies anywhere ends it at once and
 * is the one named, not the peer of the exchange. Takes ownership of socks[peer] when it succeeds; sets it
 * to -1 when it is closed. */
static chorus_result_t comm_open_transport(chorus_comm_t comm, const bootstrap_t *bs, int peer, int *socks,
                                           int64_t deadline)
{
    int fd = socks[peer], closed = -1;
    int64_t left_ms = deadline == INT64_MAX ? 0 : CHORUS_MAX(time_left_ms(deadline, INT32_MAX), 1);
    transport_options_t topt = {.chunk_bytes = (size_t)comm->params.chunk_size,
                                .socket_buffer = (size_t)comm->params.socket_buffer,
                                .socket_send_buffer = comm_send_buffer_bytes(comm, bs, peer),
                                .shm_ring_bytes = (size_t)comm->params.shm_ring_size,
                                .shm_setup_timeout_ms = left_ms,
                                .watch_fds = socks,
                                .nwatch = comm->nranks,
                                .watch_closed = &closed};
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
        /* The socket stays open (the caller closes it) for comm_init_linger. */
        if (closed >= 0)
            return comm_error(comm, res, "init: rank %d (%s) closed its connection while this rank was setting up "
                              "shared memory with rank %d: it exited, crashed or gave up on init", closed,
                              comm->hosts[closed], peer);
        if (res == CHORUS_ERR_REMOTE)
            return comm_error(comm, res, "init: rank %d (%s) closed its connection during the shared-memory set-up "
                              "with this rank: it exited, crashed or gave up on init", peer, comm->hosts[peer]);
        if (res == CHORUS_ERR_TIMEOUT)
            return comm_error(comm, res, "init: rank %d (%s) did not complete the shared-memory set-up with this "
                              "rank within CHORUS_CONNECT_TIMEOUT (%lld ms)", peer, comm->hosts[peer],
                              (long long)comm->params.connect_timeout);
        if (res != CHORUS_ERR_NOT_SUPPORTED)
            return comm_error(comm, res, "init: shared-memory set-up with rank %d (%s) failed: %s", peer,
                              comm->hosts[peer], why);
        if (!comm->shm_fallback_logged++)
            LOG_INFO(LOG_SUB_SHM, "shared memory with rank %d unavailable (%s); using TCP", peer, why);
    }
    chorus_result_t res = tcp_conn_open(fd, &topt, &comm->conns[peer]);
    if (res != CHORUS_SUCCESS) {
        socks[peer] = -1; /* tcp_conn_open closed it */
        return comm_error(comm, res, "init: cannot set up the connection to rank %d", peer);
    }
    comm->ntcp++;
    LOG_INFO(LOG_SUB_INIT, "rank %d (%s) via tcp (send buffer %zu bytes)", peer, comm->hosts[peer],
             topt.socket_send_buffer);
    return CHORUS_SUCCESS;
}

/* The host arena's set-up messages, over the connections to rank 0 (which creates the arena). */
typedef struct arena_offer {
    uint32_t ok;
    uint32_t reserved;
    uint64_t slot_bytes;
    uint8_t token[SHM_ARENA_TOKEN_BYTES];
} arena_offer_t;

/* A tag no collective or point-to-point message of init can carry: nothing else is in flight yet. */
#define ARENA_SETUP_TAG 0xfffffffeu

/* Every rank says yes or no; all learn whether all said yes (through rank 0). */
static chorus_result_t comm_agree(chorus_comm_t comm, uint32_t mine, uint32_t *all_p, int *first_no_p)
{
    prims_t *p = &comm->prims;
    if (comm->rank != 0) {
        CHECK(prims_send(p, 0, &mine, sizeof(mine)));
        return prims_recv(p, 0, all_p, sizeof(*all_p));
    }
    uint32_t all = mine;
    *first_no_p = mine ? -1 : 0;
    for (int q = 1; q < comm->nranks; q++) {
        uint32_t ok = 0;
        CHECK(prims_recv(p, q, &ok, sizeof(ok)));
        if (!ok && all) *first_no_p = q;
        all &= ok;
    }
    for (int q = 1; q < comm->nranks; q++) CHECK(prims_send(p, q, &all, sizeof(all)));
    *all_p = all;
    return CHORUS_SUCCESS;
}

/* Whether every peer's memory can be read and written directly (process_vm_readv, process_vm_writev),
 * agreed by all. */
static chorus_result_t comm_setup_single_copy(chorus_comm_t comm)
{
    prims_t *p = &comm->prims;
    char why[256] = "";
    uint32_t mine = 1, all = 0;
    for (int q = 0; q < comm->nranks && mine; q++)
        if (q != comm->rank) mine = (uint32_t)shm_arena_can_copy(p->arena, q, why, sizeof(why));
    int first_no = -1;
    CHECK(comm_agree(comm, mine, &all, &first_no));
    p->single_copy = (int)all;
    if (!all && (!mine || comm->rank == 0))
        LOG_INFO(LOG_SUB_SHM, "no single-copy reads between ranks (%s): the cma algorithms are off",
                 !mine ? why : "another rank cannot read or write its peers' memory");
    return CHORUS_SUCCESS;
}

/* Agree on the host arena, when every rank is on this host: rank 0 creates it and offers its name's
 * token; every rank that wants it (CHORUS_SHM_SLOT_SIZE not 0, CHORUS_TRANSPORT not tcp) maps it, publishes
 * its process id for single-copy reads, and answers; rank 0 unlinks it once all have answered. Either
 * every rank uses it or none does (then the direct algorithms are simply not chosen); the same holds for
 * single-copy reads, checked next. */
static chorus_result_t comm_setup_arena(chorus_comm_t comm, const bootstrap_t *bs)
{
    prims_t *p = &comm->prims;
    const char *stores = comm->params.shm_slot_stores;
    if (strcmp(stores, "plain") == 0 || strcmp(stores, "streamed") == 0)
        prims_fix_slot_stores(p, stores[0] == 's');
    else if (strcmp(stores, "auto") != 0)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "CHORUS_SHM_SLOT_STORES=%s: use auto, plain or streamed",
                          stores);
    if (comm->nranks < 2 || comm->nhosts != 1) return CHORUS_SUCCESS;
    p->tag = ARENA_SETUP_TAG;
    p->fp = (prims_fingerprint_t){0};
    p->op_name = "init (host arena)";
    p->deadline_ns = comm->init_deadline_ns;
    int want = comm->params.shm_slot_size != 0 && strcmp(comm->params.transport, "tcp") != 0;
    char name[64], why[256] = "";
    arena_offer_t offer = {0};
    shm_arena_t *arena = NULL;
    chorus_result_t res = bootstrap_shm_name(bs, comm->nranks, comm->nranks, name, sizeof(name));
    if (res != CHORUS_SUCCESS) return comm_error(comm, res, "init: cannot name the host arena");
    if (comm->rank == 0) {
        offer.slot_bytes = (uint64_t)comm_arena_slot_bytes(comm); /* the offer carries it to all */
        if (want)
            offer.ok = shm_arena_create(name, comm->nranks, (size_t)offer.slot_bytes, offer.token, &arena, why,
                                        sizeof(why)) == CHORUS_SUCCESS;
        else
            snprintf(why, sizeof(why), "off on rank 0 (CHORUS_SHM_SLOT_SIZE=0 or CHORUS_TRANSPORT=tcp)");
        for (int q = 1; q < comm->nranks && res == CHORUS_SUCCESS; q++) res = prims_send(p, q, &offer, sizeof(offer));
    } else {
        res = prims_recv(p, 0, &offer, sizeof(offer));
        if (res == CHORUS_SUCCESS && offer.ok && want)
            offer.ok = shm_arena_open(name, comm->nranks, (size_t)offer.slot_bytes, offer.token, &arena, why,
                                      sizeof(why)) == CHORUS_SUCCESS;
        else if (!want)
            snprintf(why, sizeof(why), "off on this rank (CHORUS_SHM_SLOT_SIZE=0 or CHORUS_TRANSPORT=tcp)");
        else if (!offer.ok)
            snprintf(why, sizeof(why), "rank 0 could not make it");
        offer.ok &= (uint32_t)want;
    }
    if (arena) {
        memcpy(p->arena_probe, offer.token, sizeof(p->arena_probe));
        shm_arena_set_self(arena, comm->rank, p->arena_probe);
    }
    uint32_t all = 0;
    int first_no = -1;
    if (res == CHORUS_SUCCESS) res = comm_agree(comm, offer.ok, &all, &first_no);
    if (comm->rank == 0 && arena) shm_arena_unlink(name); /* mapped by all by now, or never to be */
    if (res == CHORUS_SUCCESS && !all && (!offer.ok || first_no > 0)) {
        if (offer.ok) snprintf(why, sizeof(why), "rank %d could not map it", first_no);
        LOG_INFO(LOG_SUB_SHM, "no host arena (%s): the direct algorithms are off", why);
    }
    if (res != CHORUS_SUCCESS || !all) {
        shm_arena_close(arena);
        return res;
    }
    p->direct_slots = calloc((size_t)comm->nranks, sizeof(*p->direct_slots));
    p->direct_seen = calloc((size_t)comm->nranks, sizeof(*p->direct_seen));
    p->direct_known = calloc((size_t)comm->nranks, sizeof(*p->direct_known));
    if (!p->direct_slots || !p->direct_seen || !p->direct_known) {
        shm_arena_close(arena);
        return comm_error(comm, CHORUS_ERR_NO_MEMORY, "init: out of memory");
    }
    p->arena = arena;
    p->direct_spread = comm->nranks <= comm_cpus();
    LOG_INFO(LOG_SUB_SHM, "host arena: %d ranks, slots of %zu bytes, %u stamps each", comm->nranks,
             shm_arena_slot_bytes(arena), shm_arena_stamps(arena));
    return comm_setup_single_copy(comm);
}

/* After init failed past the mesh because of a peer: keep this rank's connections open until every peer
 * has closed its side, at most COMM_FAILED_LINGER_MS and never past init's deadline, as comm_linger does
 * for a failed communicator. The ranks still waiting on this one watch all their connections: they then
 * find the rank that died and name it, instead of taking this rank's close for the first failure. Only
 * closes are asked for: bytes a peer sent meanwhile are not read. */
static void comm_init_linger(const chorus_comm_t comm, const int *socks)
{
    struct pollfd *pfd = calloc((size_t)comm->nranks, sizeof(*pfd));
    if (!pfd) return;
    int open = 0;
    for (int i = 0; i < comm->nranks; i++) {
        pfd[i] = (struct pollfd){.fd = socks[i], .events = POLLRDHUP};
        open += socks[i] >= 0;
    }
    int64_t until = CHORUS_MIN(time_deadline_ms(COMM_FAILED_LINGER_MS), comm->init_deadline_ns);
    while (open > 0 && time_now_ns() < until) {
        if (poll(pfd, (nfds_t)comm->nranks, time_left_ms(until, COMM_FAILED_LINGER_MS)) < 0 && errno != EINTR) break;
        for (int i = 0; i < comm->nranks; i++)
            if (pfd[i].fd >= 0 && (pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
                pfd[i].fd = -1;
                open--;
            }
    }
    free(pfd);
}

/* After a failed init: the segments this rank would share with the peers of its host, and the host arena,
 * are of no use now. Their maker unlinks each once the other side has mapped it, or when the exchange
 * fails; one that died in between left it in /dev/shm, where nothing else would remove it. So every rank
 * whose init fails unlinks every name it could share (most no longer exist). */
static void comm_unlink_leftovers(const chorus_comm_t comm, const bootstrap_t *bs)
{
    if (strcmp(comm->params.transport, "tcp") == 0) return;
    char name[64];
    int all_here = 1;
    for (int i = 0; i < comm->nranks; i++) {
        if (!comm_same_host(bs, i, comm->rank)) {
            all_here = 0;
            continue;
        }
        if (i != comm->rank && bootstrap_shm_name(bs, comm->rank, i, name, sizeof(name)) == CHORUS_SUCCESS)
            shmem_unlink(name);
    }
    if (all_here && comm->nranks > 1 &&
        bootstrap_shm_name(bs, comm->nranks, comm->nranks, name, sizeof(name)) == CHORUS_SUCCESS)
        shmem_unlink(name);
}

/* Rendezvous, mesh, and one transport connection per peer, all within CHORUS_CONNECT_TIMEOUT. */
static chorus_result_t comm_connect(chorus_comm_t comm, const chorus_unique_id_t *id)
{
    bootstrap_options_t opt;
    char hostid[HOST_ID_BYTES];
    comm_bootstrap_options(comm, &opt, hostid, sizeof(hostid));
    bootstrap_t *bs = NULL;
    int *fds = NULL, *socks = NULL, meshed = 0;
    comm->init_deadline_ns = time_deadline_ms(comm->params.connect_timeout);
    chorus_result_t res = bootstrap_init(id, comm->rank, comm->nranks, &opt, &bs, comm->last_error, COMM_ERROR_BYTES);
    if (res != CHORUS_SUCCESS) return res;
    fds = malloc(sizeof(int) * (size_t)comm->nranks);
    socks = malloc(sizeof(int) * (size_t)comm->nranks);
    if (!fds || !socks) {
        res = comm_error(comm, CHORUS_ERR_NO_MEMORY, "init: out of memory");
        goto out;
    }
    for (int i = 0; i < comm->nranks; i++) fds[i] = -1;
    CHECK_GOTO(bootstrap_connect_mesh(bs, fds, comm->last_error, COMM_ERROR_BYTES), res, out);
    meshed = 1;
    memcpy(socks, fds, sizeof(int) * (size_t)comm->nranks);
    for (int i = 0; i < comm->nranks; i++) {
        const bootstrap_peer_info_t *info = bootstrap_peer(bs, i);
        snprintf(comm->hosts[i], PRIMS_HOST_BYTES, "%.40s pid %d", info->host, info->pid);
        int same = -1;
        for (int j = 0; j < i && same < 0; j++)
            if (strcmp(info->hostid, bootstrap_peer(bs, j)->hostid) == 0) same = j;
        comm->host_of[i] = same < 0 ? comm->nhosts++ : comm->host_of[same];
    }
    comm_check_shm_space(comm, bs);
    comm_decide_yield(comm, bs);
    /* Peers in increasing rank order: shared-memory set-up is a blocking exchange per pair, and a common
     * order of pairs cannot deadlock. */
    for (int i = 0; i < comm->nranks; i++) {
        if (i == comm->rank) continue;
        res = comm_open_transport(comm, bs, i, socks, comm->init_deadline_ns);
        fds[i] = comm->conns[i] ? -1 : socks[i]; /* the transport's now, or still ours */
        if (res != CHORUS_SUCCESS) goto out;
    }
    CHECK_GOTO(comm_setup_arena(comm, bs), res, out);
    CHECK_GOTO(comm_setup_tuning(comm), res, out);
    /* The last exchanges need only some ranks (the tuning broadcast goes down a tree), and a rank spinning
     * on a quick reply does not look at the other connections: a rank that died while this one no longer
     * waited on it is looked for once more here, rather than left for the first collective to find. */
    int failed;
    res = progress_check(&comm->engine, comm->conns, comm->nranks, &failed);
    if (res != CHORUS_SUCCESS && failed >= 0)
        res = comm_error(comm, res, "init: rank %d (%s) closed its connection before init ended: it exited, crashed "
                         "or gave up on init", failed, comm->hosts[failed]);
    else if (res != CHORUS_SUCCESS)
        res = comm_error(comm, res, "init: checking the connections at the end of init failed");
out:
    if (res != CHORUS_SUCCESS) {
        if (meshed && (res == CHORUS_ERR_REMOTE || res == CHORUS_ERR_TIMEOUT)) comm_init_linger(comm, socks);
        comm_unlink_leftovers(comm, bs);
        for (int i = 0; fds && i < comm->nranks; i++)
            if (fds[i] >= 0 && !comm->conns[i]) close(fds[i]);
    }
    comm->init_deadline_ns = 0;
    free(fds);
    free(socks);
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
    pthread_mutex_init(&comm->fail_lock, NULL);
    pthread_mutex_init(&comm->turn_lock, NULL);
    pthread_cond_init(&comm->turn_cv, NULL);
    comm->serial = atomic_fetch_add(&comm_serials, 1) + 1;
    comm->rank = rank;
    comm->nranks = nranks;
    comm->engine.wake_fd = -1;
    log_set_rank(rank);
    chorus_result_t res = params_load(&comm->params, comm->last_error, COMM_ERROR_BYTES);
    if (res != CHORUS_SUCCESS) goto fail;
    const char *algo = comm->params.algo;
    if (config && config->size >= offsetof(chorus_config_t, algo) + sizeof(config->algo) && config->algo)
        algo = config->algo;
    res = algo_config_parse(algo, &comm->algo, comm->last_error, COMM_ERROR_BYTES);
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
    comm->host_of = calloc((size_t)nranks, sizeof(*comm->host_of));
    comm->send_seq = calloc((size_t)nranks, sizeof(*comm->send_seq));
    comm->recv_seq = calloc((size_t)nranks, sizeof(*comm->recv_seq));
    if (!comm->conns || !comm->hosts || !comm->host_of || !comm->send_seq || !comm->recv_seq) {
        res = comm_error(comm, CHORUS_ERR_NO_MEMORY, "init: out of memory for %d ranks", nranks);
        goto fail;
    }
    CHECK_GOTO(progress_engine_init(&comm->engine, comm->params.spin_us, nranks), res, fail);
    CHECK_GOTO(recorder_init(comm, id), res, fail);
    comm->prims = (prims_t){.rank = rank,
                            .nranks = nranks,
                            .conns = comm->conns,
                            .hosts = (const char(*)[PRIMS_HOST_BYTES])comm->hosts,
                            .host_of = comm->host_of,
                            .engine = &comm->engine,
                            .chunk_bytes = (size_t)comm->params.chunk_size,
                            .err = comm->last_error,
                            .errlen = COMM_ERROR_BYTES};
    CHECK_GOTO(comm_connect(comm, id), res, fail);
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

/* The step of comm_linger: done once every peer has closed its side. */
static chorus_result_t comm_linger_step(void *arg, progress_status_t *status)
{
    chorus_comm_t comm = arg;
    int open = 0;
    for (int i = 0; i < comm->nranks; i++) {
        transport_conn_t *c = comm->conns[i];
        int moved = 0;
        if (c && c->ops->progress(c, &moved) == CHORUS_SUCCESS) open++;
    }
    *status = open ? PROGRESS_IDLE : PROGRESS_DONE;
    return CHORUS_SUCCESS;
}

/* After a peer failed, keep this rank's connections open (bounded) until the other ranks have noticed
 * too: every survivor watches the dead rank's connection directly, and a survivor that closed at once
 * would look like a second casualty to a rank that has not yet noticed the first, which would then
 * blame the wrong rank. Ends as soon as every peer has closed. */
static void comm_linger(chorus_comm_t comm)
{
    chorus_result_t sticky = atomic_load(&comm->sticky);
    if (sticky == CHORUS_SUCCESS || sticky == CHORUS_ERR_ABORTED) return;
    int failed;
    (void)progress_run(&comm->engine, comm_linger_step, comm, comm->conns, comm->nranks,
                       time_deadline_ms(COMM_FAILED_LINGER_MS), &failed);
}

typedef struct comm_goodbye {
    chorus_comm_t comm;
    transport_xfer_t *xfers;
} comm_goodbye_t;

static chorus_result_t comm_goodbye_step(void *arg, progress_status_t *status)
{
    comm_goodbye_t *g = arg;
    int pending = 0, moved = 0;
    for (int i = 0; i < g->comm->nranks; i++) {
        transport_conn_t *c = g->comm->conns[i];
        if (!c || g->xfers[i].state != XFER_PENDING) continue;
        int m = 0;
        (void)c->ops->progress(c, &m);
        moved |= m;
        pending += g->xfers[i].state == XFER_PENDING;
    }
    *status = !pending ? PROGRESS_DONE : moved ? PROGRESS_MOVED : PROGRESS_IDLE;
    return CHORUS_SUCCESS;
}

/* A healthy communicator's last word to every peer: an empty message nobody receives (the transport's
 * goodbye). A peer still busy in its last operation watches this rank's connection while it waits; the
 * goodbye ahead of the close tells it this rank left in good order, whereas a close without it is how a
 * crash looks, and fails the connection at once, even behind messages the peer has not asked for yet.
 * So the goodbye must go out: it fits any socket buffer or ring unless a slow peer has not yet read what
 * this rank sent it, and then destroy waits for that peer to read, up to the operation timeout. */
static void comm_goodbye(chorus_comm_t comm)
{
    if (atomic_load(&comm->sticky) != CHORUS_SUCCESS || comm->nranks < 2) return;
    comm_goodbye_t g = {comm, calloc((size_t)comm->nranks, sizeof(transport_xfer_t))};
    if (!g.xfers) return;
    for (int i = 0; i < comm->nranks; i++) {
        g.xfers[i].tag = TRANSPORT_TAG_GOODBYE;
        if (comm->conns[i]) (void)comm->conns[i]->ops->post_send(comm->conns[i], &g.xfers[i]);
    }
    int failed;
    int64_t start = time_now_ns();
    chorus_result_t res = progress_run(&comm->engine, comm_goodbye_step, &g, comm->conns, comm->nranks,
                                       time_deadline_ms(COMM_FAILED_LINGER_MS), &failed);
    if (res == CHORUS_ERR_TIMEOUT) {
        for (int i = 0; i < comm->nranks; i++)
            if (g.xfers[i].state == XFER_PENDING)
                LOG_WARN(LOG_SUB_INIT, "destroy: rank %d has not yet read the last messages this rank sent it; "
                                       "waiting for it (up to CHORUS_TIMEOUT) so that it can tell this orderly "
                                       "exit from a crash", i);
        int64_t timeout_ns = comm->params.timeout > 0 ? comm->params.timeout * 1000000 : INT64_MAX - start;
        (void)progress_run(&comm->engine, comm_goodbye_step, &g, comm->conns, comm->nranks, start + timeout_ns,
                           &failed);
    }
    free(g.xfers);
}

chorus_result_t chorus_comm_destroy(chorus_comm_t comm)
{
    if (!comm) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "destroy: comm is NULL");
    if (comm->streamed) comm_turn_wait(comm, comm_turn_take(comm)); /* its queued operations first */
    comm_goodbye(comm);
    comm_linger(comm);
    comm_free(comm);
    return CHORUS_SUCCESS;
}

uint64_t comm_turn_take(chorus_comm_t comm)
{
    pthread_mutex_lock(&comm->turn_lock);
    uint64_t ticket = comm->turns_taken++;
    pthread_mutex_unlock(&comm->turn_lock);
    return ticket;
}

void comm_turn_wait(chorus_comm_t comm, uint64_t ticket)
{
    pthread_mutex_lock(&comm->turn_lock);
    while (comm->turns_done != ticket) pthread_cond_wait(&comm->turn_cv, &comm->turn_lock);
    pthread_mutex_unlock(&comm->turn_lock);
}

void comm_turn_end(chorus_comm_t comm)
{
    pthread_mutex_lock(&comm->turn_lock);
    comm->turns_done++;
    pthread_cond_broadcast(&comm->turn_cv);
    pthread_mutex_unlock(&comm->turn_lock);
}

/* Make res the communicator's sticky error, described by detail, unless it already has one; returns
 * whether it did. A failing operation and chorus_comm_abort() on other threads may race here: one wins,
 * and its description is complete before any thread can read it (comm_op_begin). */
static int comm_set_sticky(chorus_comm_t comm, chorus_result_t res, const char *detail)
{
    chorus_result_t expected = CHORUS_SUCCESS;
    pthread_mutex_lock(&comm->fail_lock);
    int first = atomic_compare_exchange_strong(&comm->sticky, &expected, res);
    if (first) snprintf(comm->sticky_error, sizeof(comm->sticky_error), "%s", detail);
    pthread_mutex_unlock(&comm->fail_lock);
    return first;
}

chorus_result_t comm_op_begin(chorus_comm_t comm)
{
    comm_side_serial = 0;
    chorus_result_t sticky = atomic_load(&comm->sticky);
    if (sticky != CHORUS_SUCCESS) {
        pthread_mutex_lock(&comm->fail_lock);
        comm_error(comm, sticky, "the communicator failed earlier and can only be destroyed: %s", comm->sticky_error);
        pthread_mutex_unlock(&comm->fail_lock);
        return sticky;
    }
    atomic_store(&comm->in_op, 1);
    if (atomic_load(&comm->sticky) != CHORUS_SUCCESS) { /* an abort slipped in between */
        atomic_store(&comm->in_op, 0);
        return comm_error(comm, CHORUS_ERR_ABORTED, "the communicator was aborted");
    }
    return CHORUS_SUCCESS;
}

/* Errors a peer or an abort caused leave the data path in an unknown state (messages half sent, streams
 * out of step), so they stick; a local error such as a failed allocation does not. */
chorus_result_t comm_op_end(chorus_comm_t comm, chorus_result_t res)
{
    if (res == CHORUS_ERR_REMOTE || res == CHORUS_ERR_TIMEOUT || res == CHORUS_ERR_MISMATCH ||
        res == CHORUS_ERR_ABORTED || res == CHORUS_ERR_SYSTEM) {
        if (comm_set_sticky(comm, res, comm->last_error)) recorder_on_failure(comm, res);
        /* The failed operation's transfers may still be posted, pointing at buffers the caller is about to
         * free: take them back from every connection, and tell every peer why (a peer waiting on this rank
         * then fails at once, naming the cause, instead of waiting for this rank to close or time out). */
        uint8_t words[TRANSPORT_NOTICE_BYTES];
        const uint8_t *farewell = prims_farewell(&comm->prims, words) ? words : NULL;
        for (int i = 0; i < comm->nranks; i++)
            if (comm->conns[i]) comm->conns[i]->ops->abandon(comm->conns[i], farewell);
    }
    /* Release, not sequentially consistent: the abort's wait needs only to see it, with what came before. */
    atomic_store_explicit(&comm->in_op, 0, memory_order_release);
    return res;
}

chorus_result_t chorus_comm_abort(chorus_comm_t comm)
{
    if (!comm) return comm_error(NULL, CHORUS_ERR_INVALID_ARGUMENT, "abort: comm is NULL");
    int first = comm_set_sticky(comm, CHORUS_ERR_ABORTED, "chorus_comm_abort() was called");
    progress_abort(&comm->engine);
    /* Wait (bounded) for a call blocked in another thread to leave the data path: after this returns, no
     * receive of this rank is still writing into a user buffer. The engine checks the abort flag every
     * turn and every 100 ms while blocked, so this ends within one such interval. */
    int64_t deadline = time_deadline_ms(COMM_ABORT_WAIT_MS);
    while (atomic_load(&comm->in_op) && time_now_ns() < deadline) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    if (first) recorder_on_failure(comm, CHORUS_ERR_ABORTED); /* after the blocked call recorded its end */
    LOG_INFO(LOG_SUB_INIT, "communicator aborted");
    return CHORUS_SUCCESS;
}

chorus_result_t chorus_comm_get_async_error(chorus_comm_t comm, chorus_result_t *result_p)
{
    if (!comm || !result_p)
        return comm_error(comm, CHORUS_ERR_INVALID_ARGUMENT, "get_async_error: %s is NULL", comm ? "result_p" : "comm");
    *result_p = atomic_load(&comm->sticky);
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

const algo_caps_t *comm_algo_caps(chorus_comm_t comm) { return &comm->tune.comm.caps; }

const tune_comm_t *comm_tune_comm(chorus_comm_t comm) { return &comm->tune.comm; }

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
