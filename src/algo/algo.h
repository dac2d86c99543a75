/*
 * The algorithm registry: every (collective, algorithm) pair with its restrictions, declared once in
 * registry.c. Callers see algorithms only through this table.
 */
#ifndef CHORUS_ALGO_H
#define CHORUS_ALGO_H

#include <stdint.h>

#include "algo/prims.h"
#include "util/copy.h"

typedef enum {
    COLL_ALLREDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_ALLTOALL,
    COLL_BARRIER,
    COLL_COUNT
} coll_kind_t;

/* One collective call, after argument checks. count is in elements: the whole buffer for allreduce,
 * broadcast and reduce; per rank for allgather (sendcount), reduce_scatter (recvcount) and alltoall
 * (elements exchanged with each peer). */
typedef struct coll_args {
    coll_kind_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    chorus_datatype_t dtype;
    chorus_redop_t op;
    int root;
} coll_args_t;

typedef chorus_result_t (*algo_run_fn)(prims_t *p, const coll_args_t *a);

/* Restrictions, declared with each registry entry. */
enum {
    ALGO_NEEDS_DIRECT = 1u << 0,     /* every rank on one host, sharing the host arena (prims_direct_bytes() > 0) */
    ALGO_NEEDS_SINGLE_COPY = 1u << 1, /* and able to read each other's memory (prims_direct_single_copy()) */
    ALGO_NEEDS_HOSTS = 1u << 2,       /* ranks on two hosts or more, some host with two ranks or more */
    ALGO_NEEDS_EVEN_HOSTS = 1u << 3   /* ranks on two hosts or more, the same number on each, two or more */
};

/* The cost model's view of an algorithm (src/tune/ owns the parameters and the arithmetic): the terms
 * of its time on the critical path, for p ranks and n bytes (the whole buffer: for allgather,
 * reduce_scatter and alltoall, p times the per-rank count), read off the steps-and-bytes comment that
 * opens the algorithm's file. The time is
 *     T = steps alpha[link] + bytes / beta[link] + oneway / beta_oneway[link] + copied / beta_copy
 *         + reduced gamma
 * where link is the kind of hop the steps take: a connection (shared-memory ring or TCP), or a
 * synchronisation through the host arena, whose bytes are those read from other ranks' slots (data
 * another core wrote, which moves slower than a local copy), or read straight from their buffers
 * (single-copy reads, process_vm_readv: slower still, each call pins the pages it reads). A connection's
 * bytes are priced at an exchange's rate (the rank sends and receives at once, as ring and pairwise steps
 * do); oneway counts the bytes a rank only sends or only receives, its link idle the other way (a
 * broadcast's root), which where the cores are the bound (one host) run up to twice as fast. */
typedef enum { ALGO_LINK_NET = 0, ALGO_LINK_ARENA = 1, ALGO_LINK_CMA = 2 } algo_link_t;

typedef struct algo_shape {
    int p;
    double n;     /* bytes */
    double chunk; /* pipelining unit of the connection algorithms (CHORUS_CHUNK_SIZE) */
    double slot;  /* host arena slot (CHORUS_SHM_SLOT_SIZE) */
    int shared;   /* ranks outnumber the cores of their host: work that overlaps elsewhere adds up here */
    int hosts;    /* hosts the ranks are on (0: not known, one) */
    int per_host; /* ranks on the busiest host (0: not known) */
    double cache_share; /* the host's last-level cache over its ranks (copy_streams; 0: not known) */
} algo_shape_t;

typedef struct algo_cost {
    algo_link_t link;
    double steps;   /* latencies in sequence */
    double bytes;   /* bytes through the busiest rank's link (arena: read from peers), in sequence */
    double copied;  /* bytes copied in local memory (staging, packing, arena slots), in sequence */
    double reduced; /* bytes reduced, in sequence */
    double oneway;  /* further bytes the busiest rank only sends or only receives (connections only) */
    /* Of bytes and reduced: the part that stays in cache however large the call: a combine's reads of the
     * peers' slots, and its passes over a slot-sized chunk, of its own next slot (two-shot) or of the output,
     * which goes to memory once (one-shot; measured: see docs/tuning.md). */
    double slot_bytes, slot_reduced;
    /* Of bytes (single copy): the part read out of a peer's buffer into this rank's output, at the rate of
     * such reads (the single-copy AllToAll's, tune_params_t.beta_cma_read), not of the single-copy
     * AllGather's writes from the cache. */
    double read;
    /* Of copied: the part copy_out streams past the cache (algo_streamed), at its own rate. */
    double streamed;
    /* Bytes another rank copies beside this path, on a core of its own, while this path runs (a
     * Broadcast's root, whose copies in and out can outlast its readers' reads): the call takes the
     * longer of the two, that rank's steps included. */
    double beside_copied;
    /* Hierarchical algorithms, two levels: the terms above are the level among the hosts, these the one
     * inside each host (chains, gathers to and from the leader, exchanges between a host's ranks) over
     * the host's own connections, priced at that link's figures (shared memory, measured at init with a
     * rank of rank 0's host): steps, bytes as an exchange, bytes one way. */
    double inside_steps, inside_bytes, inside_oneway;
} algo_cost_t;

typedef algo_cost_t (*algo_cost_fn)(const algo_shape_t *s);

typedef struct algo_desc {
    coll_kind_t coll;
    const char *name;
    algo_run_fn run;
    unsigned needs; /* ALGO_NEEDS_* */
    algo_cost_fn cost;
} algo_desc_t;

/* Helpers for the cost functions. */
static inline double algo_log2_ceil(int p)
{
    int h = 0;
    while ((1 << h) < p) h++;
    return h;
}
static inline int algo_pow2_floor(int p)
{
    int v = 1;
    while (v * 2 <= p) v *= 2;
    return v;
}
/* What of `bytes` copied piece by piece into an output of `whole` bytes (copy_out_part with
 * prims_stream_whole) streams. */
static inline double algo_streamed_part(const algo_shape_t *s, double bytes, double whole)
{
    return copy_streams(whole, s->cache_share) ? bytes : 0;
}
/* What of one such copy of `bytes` streams: all of it or nothing. */
static inline double algo_streamed(const algo_shape_t *s, double bytes) { return algo_streamed_part(s, bytes, bytes); }
/* Pieces of at most `unit` bytes that n bytes take (at least 1). */
static inline double algo_pieces(double n, double unit) { return unit > 0 && n > unit ? __builtin_ceil(n / unit) : 1; }

/* What a communicator offers, against which restrictions are checked. */
typedef struct algo_caps {
    int nranks;
    int direct;      /* direct access inside the host */
    int single_copy; /* single-copy reads and writes inside the host */
    /* And they outran reads through the arena in the model's parameters (measured at init, or a tuning
     * file's): the kernel's one copy beats the arena's two (the same on every rank: rank 0's figures). */
    int single_copy_fast;
    /* Or at least they beat a copy into the arena and a read out of it, which is what the direct AllToAll
     * does with each byte (implied by single_copy_fast). */
    int single_copy_saves;
    /* Ranks outnumber the cores of the busiest host (the same on every rank: rank 0's core count). A
     * rank that waits is then often not running when its data arrives, and algorithms whose steps each
     * depend on one neighbour (a ring) stall where all-pairs exchanges find work from any peer. */
    int oversubscribed;
    int hosts;    /* hosts the ranks are on */
    int per_host; /* ranks on the busiest host */
    int hosts_consecutive; /* each host's ranks are consecutive (host by host, not dealt in turn) */
} algo_caps_t;

/* CHORUS_ALGO, parsed once per communicator: the registry entries calls may use (bit i: entry i). */
typedef struct algo_config {
    uint64_t allowed;
} algo_config_t;

const char *coll_name(coll_kind_t coll);
/* Every algorithm, in registry order; *n_p: how many. */
const algo_desc_t *algo_registry(size_t *n_p);
/* Parse CHORUS_ALGO, NCCL's syntax: "ring" or "ring,rhd" restricts every collective that has one of the
 * named algorithms to those; "^star" excludes; "allreduce:rhd;allgather:bruck" and "allreduce:^star" apply
 * to one collective. Segments separated by ';' apply in order. Names ignore case; NULL or "" allows every
 * algorithm. A name the registry lacks (for the collective, when one is given), or a setting that leaves a
 * collective no algorithm, is CHORUS_ERR_INVALID_ARGUMENT, with the valid names in err. */
chorus_result_t algo_config_parse(const char *text, algo_config_t *cfg_p, char *err, size_t errlen);
/* Whether CHORUS_ALGO allows the algorithm. */
int algo_config_allows(const algo_config_t *cfg, const algo_desc_t *d);
/* What the algorithm's restrictions ask of a communicator, in words, for messages ("" if nothing). */
const char *algo_needs_text(const algo_desc_t *d);
/* Whether the communicator meets the algorithm's restrictions. */
int algo_supported(const algo_desc_t *d, const algo_caps_t *caps);
/* Whether the call is in place, the same on every rank (AllGather's and ReduceScatter's in-place buffers
 * start at the same address only on rank 0). */
int algo_in_place(const coll_args_t *a, int nranks);
/* The bytes a call's cost is counted in: the whole buffer (algo_shape_t). */
size_t algo_call_bytes(const coll_args_t *a, int nranks);
/* The bytes of one rank's input and output buffers for a call of n bytes (as algo_call_bytes counts them)
 * out of place: what the call's data occupies in the caches, whichever algorithm runs it. */
double algo_buffer_bytes(coll_kind_t coll, double n, int nranks);
/* Whether every built-in rule names only algorithms of its collective that exist; if not, err says which
 * rule (by number and text) and why (a misspelled name would otherwise leave the rule silently empty). */
int algo_rules_valid(char *err, size_t errlen);
/* The built-in rules' choice (measured on one host, docs/algorithms.md): the registry entries (bit i:
 * entry i) of the first rule that fits the call and names an algorithm cfg allows and caps supports,
 * those of its algorithms only; 0 if none. More than one bit: the rule leaves the choice among them to
 * the cost model. */
uint64_t algo_rule_choice(coll_kind_t coll, size_t bytes, int in_place, const algo_caps_t *caps,
                          const algo_config_t *cfg);
/* The collective's first algorithm that cfg allows and caps supports; if cfg allows none that caps
 * supports, the first supported one. */
const algo_desc_t *algo_first_supported(coll_kind_t coll, const algo_caps_t *caps, const algo_config_t *cfg);

/* Buffers from chorus_mem_alloc (shared_buffers.c): from min_bytes up, where the chosen algorithm is not
 * a single-copy one, the collective's single-copy algorithm that cfg allows and caps supports (NULL if
 * none or not applicable). algo_for_shared_buffers: from algo_shared_min up (ALGO_SHARED_MIN, or
 * ALGO_SHARED_SEEN_MIN on up to ALGO_SHARED_SEEN_RANKS ranks once *seen, a communicator's flag set when
 * every rank's buffers were shared in a call), the ranks agree (one phase) whether every rank's buffers
 * lie in such memory, and if so *algo_p becomes that one. Until they once all said yes, they ask only at
 * some of those calls (algo_shared_ask): the agreement is a barrier, which keeps a rank from starting
 * its next call while its peers still read its last one. */
#define ALGO_SHARED_MIN ((size_t)1 << 20)
#define ALGO_SHARED_SEEN_MIN ((size_t)64 << 10)
#define ALGO_SHARED_SEEN_RANKS 4
#define ALGO_SHARED_ASK_EVERY 64
typedef struct algo_shared_state {
    int seen;           /* every rank's buffers were chorus_mem_alloc's in a call */
    uint64_t eligible;  /* calls so far where the ranks could have switched (before seen) */
} algo_shared_state_t;
size_t algo_shared_min(int nranks, int seen);
/* Whether the ranks ask at the call-th call (from 0) where they could switch, before they ever all said
 * yes: the 1st, 2nd, 3rd, 5th, 9th, 17th and 33rd, then every ALGO_SHARED_ASK_EVERY-th (the 65th, 129th,
 * ...). Every rank counts the same calls, so all ask at the same ones. */
int algo_shared_ask(uint64_t call);
const algo_desc_t *algo_shared_twin(const coll_args_t *a, int nranks, const algo_caps_t *caps,
                                    const algo_config_t *cfg, const algo_desc_t *chosen, size_t min_bytes);
chorus_result_t algo_for_shared_buffers(prims_t *p, const coll_args_t *a, const algo_caps_t *caps,
                                        const algo_config_t *cfg, algo_shared_state_t *st,
                                        const algo_desc_t **algo_p);

/* The prims_reduce_t for a call. */
static inline prims_reduce_t algo_reduction(const coll_args_t *a)
{
    prims_reduce_t r = {a->dtype, a->op, dtype_size(a->dtype)};
    return r;
}

/* Algorithms (one file each). */
chorus_result_t allreduce_ring(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_rhd(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_rd(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_dbt(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_tree(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_mesh(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_star(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_oneshot(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_twoshot(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_cma(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_hier(prims_t *p, const coll_args_t *a);
chorus_result_t allreduce_hier2d(prims_t *p, const coll_args_t *a);
chorus_result_t allgather_ring(prims_t *p, const coll_args_t *a);
chorus_result_t allgather_rd(prims_t *p, const coll_args_t *a);
chorus_result_t allgather_bruck(prims_t *p, const coll_args_t *a);
chorus_result_t allgather_mesh(prims_t *p, const coll_args_t *a);
chorus_result_t allgather_direct(prims_t *p, const coll_args_t *a);
chorus_result_t allgather_cma(prims_t *p, const coll_args_t *a);
chorus_result_t allgather_hier(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_scatter_ring(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_scatter_rhd(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_scatter_mesh(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_scatter_direct(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_scatter_cma(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_scatter_hier(prims_t *p, const coll_args_t *a);
chorus_result_t broadcast_chain(prims_t *p, const coll_args_t *a);
chorus_result_t broadcast_binomial(prims_t *p, const coll_args_t *a);
chorus_result_t broadcast_scatter_allgather(prims_t *p, const coll_args_t *a);
chorus_result_t broadcast_direct(prims_t *p, const coll_args_t *a);
chorus_result_t broadcast_cma(prims_t *p, const coll_args_t *a);
chorus_result_t broadcast_hier(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_chain(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_binomial(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_rabenseifner(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_direct(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_oneshot(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_cma(prims_t *p, const coll_args_t *a);
chorus_result_t reduce_hier(prims_t *p, const coll_args_t *a);
/* The blocks the pairwise and mesh AllToAlls send: sendbuf, its own block copied to recvbuf; in place, a
 * copy of the input in scratch slot 1 (the own block is already where it belongs). */
chorus_result_t alltoall_source(prims_t *p, const coll_args_t *a, const char **send_p);
chorus_result_t alltoall_pairwise(prims_t *p, const coll_args_t *a);
chorus_result_t alltoall_bruck(prims_t *p, const coll_args_t *a);
chorus_result_t alltoall_ring(prims_t *p, const coll_args_t *a);
chorus_result_t alltoall_direct(prims_t *p, const coll_args_t *a);
chorus_result_t alltoall_cma(prims_t *p, const coll_args_t *a);
chorus_result_t alltoall_hier(prims_t *p, const coll_args_t *a);
chorus_result_t alltoall_mesh(prims_t *p, const coll_args_t *a);
chorus_result_t alltoall_hier2d(prims_t *p, const coll_args_t *a);
chorus_result_t barrier_dissemination(prims_t *p, const coll_args_t *a);
chorus_result_t barrier_direct(prims_t *p, const coll_args_t *a);

/* Their cost terms (each in its algorithm's file, beside the comment they come from). */
algo_cost_t allreduce_ring_cost(const algo_shape_t *s);
algo_cost_t allreduce_rhd_cost(const algo_shape_t *s);
algo_cost_t allreduce_rd_cost(const algo_shape_t *s);
algo_cost_t allreduce_dbt_cost(const algo_shape_t *s);
algo_cost_t allreduce_tree_cost(const algo_shape_t *s);
algo_cost_t allreduce_mesh_cost(const algo_shape_t *s);
algo_cost_t allreduce_star_cost(const algo_shape_t *s);
algo_cost_t allreduce_oneshot_cost(const algo_shape_t *s);
algo_cost_t allreduce_twoshot_cost(const algo_shape_t *s);
algo_cost_t allreduce_cma_cost(const algo_shape_t *s);
algo_cost_t allreduce_hier_cost(const algo_shape_t *s);
algo_cost_t allreduce_hier2d_cost(const algo_shape_t *s);
algo_cost_t allgather_ring_cost(const algo_shape_t *s);
algo_cost_t allgather_rd_cost(const algo_shape_t *s);
algo_cost_t allgather_bruck_cost(const algo_shape_t *s);
algo_cost_t allgather_mesh_cost(const algo_shape_t *s);
algo_cost_t allgather_direct_cost(const algo_shape_t *s);
algo_cost_t allgather_cma_cost(const algo_shape_t *s);
algo_cost_t allgather_hier_cost(const algo_shape_t *s);
algo_cost_t reduce_scatter_ring_cost(const algo_shape_t *s);
algo_cost_t reduce_scatter_rhd_cost(const algo_shape_t *s);
algo_cost_t reduce_scatter_mesh_cost(const algo_shape_t *s);
algo_cost_t reduce_scatter_direct_cost(const algo_shape_t *s);
algo_cost_t reduce_scatter_cma_cost(const algo_shape_t *s);
algo_cost_t reduce_scatter_hier_cost(const algo_shape_t *s);
algo_cost_t broadcast_chain_cost(const algo_shape_t *s);
algo_cost_t broadcast_binomial_cost(const algo_shape_t *s);
algo_cost_t broadcast_scatter_allgather_cost(const algo_shape_t *s);
algo_cost_t broadcast_direct_cost(const algo_shape_t *s);
algo_cost_t broadcast_cma_cost(const algo_shape_t *s);
algo_cost_t reduce_chain_cost(const algo_shape_t *s);
algo_cost_t reduce_binomial_cost(const algo_shape_t *s);
algo_cost_t reduce_rabenseifner_cost(const algo_shape_t *s);
algo_cost_t reduce_direct_cost(const algo_shape_t *s);
algo_cost_t reduce_oneshot_cost(const algo_shape_t *s);
algo_cost_t reduce_cma_cost(const algo_shape_t *s);
algo_cost_t alltoall_pairwise_cost(const algo_shape_t *s);
algo_cost_t alltoall_bruck_cost(const algo_shape_t *s);
algo_cost_t alltoall_ring_cost(const algo_shape_t *s);
algo_cost_t alltoall_direct_cost(const algo_shape_t *s);
algo_cost_t alltoall_cma_cost(const algo_shape_t *s);
algo_cost_t alltoall_hier_cost(const algo_shape_t *s);
algo_cost_t alltoall_hier2d_cost(const algo_shape_t *s);
algo_cost_t barrier_dissemination_cost(const algo_shape_t *s);
algo_cost_t barrier_direct_cost(const algo_shape_t *s);

#endif
