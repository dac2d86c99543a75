/* Every (collective, algorithm) pair, declared once; the default choice among them, as data; and
 * CHORUS_ALGO, which narrows the choice. */
#include "algo/algo.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"
#include "util/util.h"

static const algo_desc_t algo_table[] = {
    {COLL_ALLREDUCE, "ring", allreduce_ring, 0, allreduce_ring_cost},
    {COLL_ALLREDUCE, "rhd", allreduce_rhd, 0, allreduce_rhd_cost},
    {COLL_ALLREDUCE, "rd", allreduce_rd, 0, allreduce_rd_cost},
    {COLL_ALLREDUCE, "dbt", allreduce_dbt, 0, allreduce_dbt_cost},
    {COLL_ALLREDUCE, "tree", allreduce_tree, 0, allreduce_tree_cost},
    {COLL_ALLREDUCE, "mesh", allreduce_mesh, 0, allreduce_mesh_cost},
    {COLL_ALLREDUCE, "star", allreduce_star, 0, allreduce_star_cost},
    {COLL_ALLREDUCE, "oneshot", allreduce_oneshot, ALGO_NEEDS_DIRECT, allreduce_oneshot_cost},
    {COLL_ALLREDUCE, "twoshot", allreduce_twoshot, ALGO_NEEDS_DIRECT, allreduce_twoshot_cost},
    {COLL_ALLREDUCE, "cma", allreduce_cma, ALGO_NEEDS_DIRECT | ALGO_NEEDS_SINGLE_COPY, allreduce_cma_cost},
    {COLL_ALLREDUCE, "hier", allreduce_hier, ALGO_NEEDS_HOSTS, allreduce_hier_cost},
    {COLL_ALLREDUCE, "hier2d", allreduce_hier2d, ALGO_NEEDS_EVEN_HOSTS, allreduce_hier2d_cost},
    {COLL_ALLGATHER, "ring", allgather_ring, 0, allgather_ring_cost},
    {COLL_ALLGATHER, "rd", allgather_rd, 0, allgather_rd_cost},
    {COLL_ALLGATHER, "bruck", allgather_bruck, 0, allgather_bruck_cost},
    {COLL_ALLGATHER, "mesh", allgather_mesh, 0, allgather_mesh_cost},
    {COLL_ALLGATHER, "direct", allgather_direct, ALGO_NEEDS_DIRECT, allgather_direct_cost},
    {COLL_ALLGATHER, "cma", allgather_cma, ALGO_NEEDS_DIRECT | ALGO_NEEDS_SINGLE_COPY, allgather_cma_cost},
    {COLL_ALLGATHER, "hier", allgather_hier, ALGO_NEEDS_HOSTS, allgather_hier_cost},
    {COLL_REDUCE_SCATTER, "ring", reduce_scatter_ring, 0, reduce_scatter_ring_cost},
    {COLL_REDUCE_SCATTER, "rhd", reduce_scatter_rhd, 0, reduce_scatter_rhd_cost},
    {COLL_REDUCE_SCATTER, "mesh", reduce_scatter_mesh, 0, reduce_scatter_mesh_cost},
    {COLL_REDUCE_SCATTER, "direct", reduce_scatter_direct, ALGO_NEEDS_DIRECT, reduce_scatter_direct_cost},
    {COLL_REDUCE_SCATTER, "cma", reduce_scatter_cma, ALGO_NEEDS_DIRECT | ALGO_NEEDS_SINGLE_COPY, reduce_scatter_cma_cost},
    {COLL_REDUCE_SCATTER, "hier", reduce_scatter_hier, ALGO_NEEDS_HOSTS, reduce_scatter_hier_cost},
    {COLL_BROADCAST, "chain", broadcast_chain, 0, broadcast_chain_cost},
    {COLL_BROADCAST, "binomial", broadcast_binomial, 0, broadcast_binomial_cost},
    {COLL_BROADCAST, "scatter_allgather", broadcast_scatter_allgather, 0, broadcast_scatter_allgather_cost},
    {COLL_BROADCAST, "direct", broadcast_direct, ALGO_NEEDS_DIRECT, broadcast_direct_cost},
    {COLL_BROADCAST, "cma", broadcast_cma, ALGO_NEEDS_DIRECT | ALGO_NEEDS_SINGLE_COPY, broadcast_cma_cost},
    {COLL_BROADCAST, "hier", broadcast_hier, ALGO_NEEDS_HOSTS, broadcast_chain_cost}, /* as the chain: see its file */
    {COLL_REDUCE, "chain", reduce_chain, 0, reduce_chain_cost},
    {COLL_REDUCE, "binomial", reduce_binomial, 0, reduce_binomial_cost},
    {COLL_REDUCE, "rabenseifner", reduce_rabenseifner, 0, reduce_rabenseifner_cost},
    {COLL_REDUCE, "direct", reduce_direct, ALGO_NEEDS_DIRECT, reduce_direct_cost},
    {COLL_REDUCE, "oneshot", reduce_oneshot, ALGO_NEEDS_DIRECT, reduce_oneshot_cost},
    {COLL_REDUCE, "cma", reduce_cma, ALGO_NEEDS_DIRECT | ALGO_NEEDS_SINGLE_COPY, reduce_cma_cost},
    {COLL_REDUCE, "hier", reduce_hier, ALGO_NEEDS_HOSTS, reduce_chain_cost}, /* as the chain: see its file */
    {COLL_ALLTOALL, "pairwise", alltoall_pairwise, 0, alltoall_pairwise_cost},
    {COLL_ALLTOALL, "bruck", alltoall_bruck, 0, alltoall_bruck_cost},
    {COLL_ALLTOALL, "ring", alltoall_ring, 0, alltoall_ring_cost},
    {COLL_ALLTOALL, "mesh", alltoall_mesh, 0, alltoall_pairwise_cost}, /* as pairwise: see its file */
    {COLL_ALLTOALL, "direct", alltoall_direct, ALGO_NEEDS_DIRECT, alltoall_direct_cost},
    {COLL_ALLTOALL, "cma", alltoall_cma, ALGO_NEEDS_DIRECT | ALGO_NEEDS_SINGLE_COPY, alltoall_cma_cost},
    {COLL_ALLTOALL, "hier", alltoall_hier, ALGO_NEEDS_HOSTS, alltoall_hier_cost},
    {COLL_ALLTOALL, "hier2d", alltoall_hier2d, ALGO_NEEDS_EVEN_HOSTS, alltoall_hier2d_cost},
    {COLL_BARRIER, "dissemination", barrier_dissemination, 0, barrier_dissemination_cost},
    {COLL_BARRIER, "direct", barrier_direct, ALGO_NEEDS_DIRECT, barrier_direct_cost},
};
#define ALGO_COUNT CHORUS_ARRAY_SIZE(algo_table)
_Static_assert(CHORUS_ARRAY_SIZE(algo_table) <= 64, "algo_config_t has one bit per algorithm");
#define ALGO_ALL (ALGO_COUNT == 64 ? ~0ull : (1ull << ALGO_COUNT) - 1)

/* The built-in rules (CHORUS_TUNING=rules, after a tuning file's): for each collective, the first rule
 * that fits the call and whose algorithm is allowed and supported. n is the whole buffer (as in
 * docs/algorithms.md), p the number of ranks; a zero bound is no bound. The bounds come from chorus-perf
 * runs on one host (docs/algorithms.md): the direct algorithms win inside a host up to the sizes given;
 * across hosts, latency-bound sizes take the log p algorithms, the rest the bandwidth-optimal ring or
 * pipelined chain, except where ranks outnumber cores: there the mesh, whose exchanges do not each wait
 * on one neighbour, took half the ring's time for AllReduce over TCP at 2 to 16 MiB with 4 and 8 ranks
 * on 2 cores (level at 512 KiB to 1 MiB and from 64 MiB), and 0.6 to 0.85 of it for ReduceScatter and
 * AllGather at 4 MiB (level at 1 MiB; AllGather's ring was ahead again at 64 MiB on 4 ranks). On 2 ranks
 * the mesh's AllReduce moves the ring's bytes but in chunk-sized messages staged in a few reused buffers,
 * with both halves of the call in flight at once; from 8 MiB it took half the ring's time over TCP and
 * 0.7 to 0.9 of it over shared memory (alternating runs, and two bench/model-check runs over TCP). Small
 * AllReduce where ranks outnumber cores takes the star: rank 0 reduces whichever input has arrived, where
 * each of rhd's log p steps waits on one partner that is often not running; over TCP on 2 cores it took
 * 0.4 to 0.9 of rhd's time at 1 to 64 KiB on 4 and 8 ranks (measured up to 8 ranks only: rank 0 handles
 * p - 1 messages); at 256 KiB rhd took 0.67 of its time on 4 ranks and 0.93 on 8 (Xeon virtual machine,
 * medians of 5 and 3 alternating runs of 20 calls), so rhd takes 128 to 512 KiB there for a power-of-two
 * rank count (the mesh from 1 MiB, below). Small AllGather and Broadcast where ranks outnumber cores,
 * over TCP on 4 ranks (alternating runs of 200 and 1000 calls, and three bench/model-check runs):
 * recursive doubling took 0.55 to 0.85 of Bruck's time at 1 and 16 KiB (0.9 on 8 ranks, level at 64
 * KiB), for a power-of-two rank count, where it needs no folding, and from 256 KiB to 16 MiB it was
 * ahead of the ring and the mesh too (the ring 1.01 to 1.32 times its time on 4 ranks, the mesh 1.1 to
 * 1.21; on 8 ranks rd ahead or within 1.10 of the fastest: Xeon virtual machine, medians of 5 and 3); the
 * chain 0.65 to 0.75 of the binomial tree's (0.8 on 8 ranks at 16 KiB, level at 1 and 64 KiB; over shared
 * memory level or ahead), and on the Xeon machine ahead or level from 4 to 64 KiB on 4 and 8 ranks (the
 * binomial tree 1.00 to 1.12 times its time, medians of 5). On 2 ranks the two send the same one message,
 * but the chain's own loop costs less than the tree engine's: over TCP the binomial tree took 1.13, 1.15,
 * 1.08 and 1.03 times the chain's time at 1, 4, 16 and 64 KiB (medians of 5 alternating runs), and two
 * bench/model-check runs agreed (1.08 to 1.23), so 2 ranks take the chain; the Reduce too (the binomial
 * tree 1.13 to 1.15 times the chain's time from 1 to 64 KiB over TCP, 1.07 to 1.59 over shared memory,
 * where the direct Reduce took 1.7 to 2.8 times it). From 3 ranks on one host the direct Reduce runs from
 * 256 KiB (it ran from 4 ranks and 2 MiB): out of place it took 0.77 and 0.65 of the faster of the chain
 * and the binomial tree at 256 KiB and 1 MiB on 5 ranks, 0.86 and 0.77 on 4, 0.61 and 0.52 on 8, 0.67 and
 * 0.58 on 6, and on 3 ranks 0.88 and 0.93 (level at 4 MiB, 0.80 at 16; at 64 KiB mixed, in place the chain
 * ahead on 4 to 8 ranks; medians of 2 and 3 alternating runs, Xeon virtual machine). On one host the direct
 * Broadcast was ahead of both from 32 KiB on 4, 6 and 8 ranks (they took 1.01 to 4.4 times its time at 32
 * to 256 KiB, 1.01 on 4 ranks at 64 KiB; medians of 5 and 3 alternating runs of 20 calls, Xeon virtual
 * machine), but not on 3 (the chain ahead from 32 to 128 KiB, direct 1.12 to 1.6 times its time), so
 * from 4 ranks it takes those sizes too. On 2 ranks sharing a host the direct Broadcast is level with or ahead of the
 * binomial tree at every size (0.65 of its time at 1 KiB, 0.75 at 16 KiB); on more, up to what travels in
 * a stamp (PRIMS_DIRECT_INLINE_BYTES), its root runs ahead of the readers, and it took 0.43 us a call at
 * 8 B on 8 ranks and 2 cores against the chain's 1.48, 0.26 on 4 against 0.56 (runs of 1000 calls,
 * docs/algorithms.md); the direct AllGather is ahead
 * of the ring up to 64 KiB. Above, the order of direct, ring and single copy is the machine's: on the
 * reference machine the ring was ahead of direct (0.7 of its time at 128 KiB) and single copy of the
 * ring from 1 to 4 MiB (0.8 to 0.9 of its time; level at 8, behind at 16), on an AMD EPYC virtual machine
 * direct ahead of both at every size from 256 KiB to 64 MiB (0.3 to 0.75 of the ring's time, 0.45 to
 * 0.75 of single copy's; on a later day direct behind both at 128 and 256 KiB), and so the rule names the
 * three and leaves the model to choose; likewise the out-of-place AllToAll from 128 KiB on 2 ranks among
 * direct, pairwise and single copy. With more ranks
 * it had been the model's choice of direct and pairwise too (with the built-in figures it took pairwise,
 * as the rule before it did), but since the direct AllToAll streams its output from 4 MiB the model,
 * which priced a streamed byte at the memory copy's rate where the init calibration had no stream rate
 * (the built-in figures then had none), overpriced direct: on a Xeon virtual machine it chose pairwise on 4 ranks at 16 and 64 MiB in some
 * runs, at 1.5 to 2 times direct's time (forced there 0.60 and 0.68 of pairwise's time); on the AMD
 * machine direct took 0.65 to 0.9 of pairwise's time on 8 ranks from 1 to 64 MiB before it streamed
 * (docs/algorithms.md). So direct it is, where the ranks share the arena. The
 * one-shot AllReduce, where every rank combines all p slots, is ahead up to 64 KiB on 2 ranks (0.9 to
 * 0.95 of the ring's time) and 128 KiB on 4 (level with twoshot and star there); the ring and rhd took
 * 0.8 to 0.85 of its time on 2 ranks at 128 and 256 KiB (reference machine), but on 2 ranks of one host
 * two-shot takes over from 128 KiB: on an AMD EPYC virtual machine whose speed moves between two states
 * for minutes at a time it was level with the ring and the mesh, or ahead, in the fast one (4 MiB: 226
 * us against 251 and 224) and 0.55 to 0.85 of their time in the slow one (4 MiB: 515-549 against
 * 637-700; 64 MiB: 0.9-0.95), where the ring loses most (docs/tuning.md, "A fifth machine"); and twoshot
 * (level with the mesh) took 0.7 to 0.9 of one-shot's time on 4 ranks at 256 and 512 KiB, where the
 * star took 1.2 to 1.4 times twoshot's (alternating runs of 1000 and 2000 calls, and three
 * bench/model-check runs). On the AMD machine two-shot was ahead from 64 KiB on 4 ranks (0.65 of
 * one-shot's time at 64 and 128 KiB, mixed at 32) and from 32 KiB on 8 (0.4 to 0.7; level at 16 KiB,
 * one-shot ahead below), where the Sapphire Rapids machine's 8 ranks had it at half one-shot's time at
 * 64 KiB: 4 ranks take two-shot from 64 KiB, 8 and more from 32 KiB. The other rank counts had
 * taken one-shot while n p <= 1 MiB, and above it the ring or the mesh (two-shot only from 5 ranks and
 * 4 MiB), where two-shot took 0.57 to 0.71 of one-shot's time on 5 to 7 ranks at 64 KiB and 0.5 to 0.6
 * of the ring's at 256 KiB, 0.5 of the mesh's on 6 ranks at 1 MiB and 0.64 to 0.74 of it on 3 ranks
 * from 1 to 64 MiB (one-shot ahead on 3 ranks up to 64 KiB and on 5 to 7 up to 16 KiB; medians of 2 and
 * 3 alternating runs of 20 calls, Xeon virtual machine): so they take one-shot while n p <= 256 KiB and
 * two-shot above (3 ranks as 4 for single copy, below). In place, the pairwise and
 * single-copy AllToAll first copy their whole input to scratch, and the direct one took 0.4 to 0.65 of the pairwise one's time on 2 ranks from 4 to 64
 * MiB, 0.5 to 0.7 on 4 ranks at 16 and 64 MiB, and 0.6 to 0.65 on 8 at 16 MiB (alternating runs; out of
 * place they are level on 2 ranks from 4 MiB, and on 4 the pairwise one is level at 16 MiB and ahead at
 * 64). Small AllReduce on 2 ranks over connections takes recursive doubling, one exchange of the whole
 * buffer, where rhd makes two exchanges of half of it and the star two one-way hops through rank 0: over
 * loopback TCP it took 0.5 to 0.65 of rhd's time and 0.65 to 0.85 of the star's at 16 B to 16 KiB (level
 * with rhd at 64 KiB; alternating runs of 2000 calls), and between two emulated hosts (tests/cluster,
 * veth and a bridge) 0.3 to 0.7 of the star's time up to 4 KiB, level with both at 16 KiB and with rhd at
 * 64 KiB (alternating runs of 1000 calls). Where single-copy reads outrun the arena's (algo_caps_t; an
 * Intel Sapphire Rapids virtual machine, process_vm_readv at 18 to 24 GB/s in cache against the arena's
 * 12 to 14, where the reference machine has 11 against 23), 2 ranks of one host take the single-copy
 * algorithms: Broadcast, AllGather and AllToAll from 16 KiB, at 0.4 to 0.8 of the direct ones' time up
 * to 64 MiB (two bench/model-check runs), but for an in-place Broadcast from 16 MiB, where the direct
 * one was ahead; AllReduce from 32 KiB, in place or not (see below). On 4 ranks single
 * copy won too from 512 KiB, where the calibration, with ranks sharing the cores, does not find its reads
 * faster than the arena's (docs/algorithms.md, "Single copy"); since its batches end with a barrier it
 * finds them faster than a copy and an arena read together (single_copy_saves) in every init of 12 on 3
 * and 4 ranks, and where it does, 3 and 4 ranks take the single-copy AllGather from 512 KiB (to 8 MiB
 * then, 16 MiB now: see below) and 4 ranks the Broadcast from 256 KiB to 8 MiB (0.76 to 0.93 and 0.75 to
 * 0.86 of the direct ones' time there, medians of 5 alternating runs, Xeon virtual machine; on 3 ranks the Broadcast was behind from 4 MiB, on 8
 * ranks both at every size). Before that barrier the calibration did not reliably find them faster than a
 * copy and an arena read together, what the direct AllToAll spends per byte: on the Xeon
 * virtual machine 4 inits of 10 did, the two sides of that test within each other's noise, while forced
 * runs put the single-copy AllToAll at 0.56, 0.72, 0.78 and 0.76 of the direct one's time at 256 KiB, 1,
 * 4 and 8 MiB, and at 1.07 to 1.27 at 16 MiB (medians of 5 alternating runs; the direct one streams its
 * output from 4 MiB), and earlier runs on 4 ranks at 0.5 to 0.8 of the direct and pairwise ones' time
 * (three bench/model-check runs). So 3 and 4 ranks took it out of place from 256 KiB to 8 MiB without
 * asking; but on the AMD machine, where single copy passes neither test (below), the direct one took 0.35
 * to 0.65 of its time on 4 ranks at 256 KiB and 1 MiB and 0.6 to 0.85 at 4 MiB (4 alternating rounds of
 * 50 calls, Open MPI level with single copy or behind), and on 3 ranks 0.6 to 0.8 at 192 and 768 KiB and
 * 12 MiB (level at 3 MiB): so they take it where single copy saves a copy (which the calibration found
 * in every init on the Xeon, above), and direct elsewhere (the model prices it lower there too); above
 * 8 MiB, direct (see above). On 2 ranks the same test takes the single-copy Broadcast, AllGather
 * and AllToAll from 64 KiB (and the AllReduce, see below): it is what the direct ones spend
 * per byte (a copy into a slot and a read out of it, against one read), where whether single-copy reads
 * outrun the arena's is a close call that noise at init decides either way (on a Xeon virtual machine 2
 * inits of 30 found them slower, 6.8 and 9.5 GB/s against the arena's 8.1 and 9.6, where the others
 * found 9 to 18 against 7 to 12; 2 of 12 a stop later, which then ran the direct AllToAll of 256 KiB at
 * 1.95 times single copy's time and two-shot AllReduces of 1 and 4 MiB at 1.4). Forced there, single copy
 * took 0.46 to 0.71 of the direct Broadcast's, AllGather's and AllToAll's time from 64 KiB to 1 MiB (level
 * at 16 KiB, where a call's syscalls weigh), and 0.69 to 0.81 of the best other AllReduce's from 256 KiB
 * to 4 MiB (bench/model-check -n 2,4 -t shm -r 3, forced runs). The reference machine (single-copy reads
 * at 11 GB/s against the arena's 23 and copies at 53) and the AMD machine (13-15 against 46-58 and 53-73)
 * pass neither test. The single-copy AllToAll is
 * out of place only: in place it first stages its whole input in scratch, and on 2 ranks the direct one
 * took 0.20 to 0.63 of its time at every size from 16 KiB to 64 MiB (Xeon virtual machine, chorus-perf
 * -a). Since the direct algorithms stream their outputs past the cache from 4 MiB (util/copy.h), 2 ranks
 * take them again from 32 MiB: the direct AllGather, AllToAll and Broadcast took 0.71 to 0.87 of the
 * single-copy ones' time at 32, 64 and 256 MiB out of place (medians of 5 alternating runs each, Xeon
 * virtual machine), where at 16 MiB single copy was still ahead (bench/model-check); and so does the
 * two-shot AllReduce out of place (0.74 to 0.76 of the single-copy one's time at 32, 64 and 256 MiB,
 * 1.22 at 16 MiB; in place, which two-shot does not stream, single copy stays: 0.67 of two-shot's time at
 * 32 MiB). Since the single-copy AllGather and AllReduce write their blocks and result chunks into the
 * peers' outputs while those are in the writer's cache (allgather_cma.c, allreduce_cma.c), on the Xeon
 * virtual machine (medians of 3 to 5 alternating runs of each algorithm forced): on 2 ranks the
 * single-copy AllReduce took 0.64, 0.45, 0.48 and 0.62 of the best other's time at 64 KiB, 256 KiB, 1
 * and 4 MiB out of place (level with one-shot at 16 KiB) and 0.39 to 0.72 in place from 64 KiB to 256
 * MiB, so 2 ranks take it from 64 KiB, in place or not, where either test holds, and from 32 KiB where
 * single-copy reads are fast (0.70 / 0.68 of one-shot's time at 32 KiB out of place / in place, 0.95 /
 * 0.95 at 16 KiB, 1.68 / 1.44 at 8 KiB: medians of 5 after a bench/model-check run had it at 1.44 times
 * single copy's at 16 KiB; out of place from 32 MiB two-shot stays: 0.81 and 0.85 of its time at 64 and
 * 256 MiB); on 4 ranks 0.87, 0.86 and 0.88 of
 * two-shot's time at 256 KiB, 1 and 4 MiB out of place (1.38 at 16 MiB) and 0.72 to 0.88 in place from
 * 256 KiB to 64 MiB, so 4 ranks take it from 256 KiB to 4 MiB, and in place from 256 KiB, where it saves
 * a copy; so do 3 ranks (0.83 to 0.96 of two-shot's time out of place from 256 KiB to 4 MiB, 1.45 at 16
 * MiB, and 0.68 to 0.92 in place from 256 KiB to 64 MiB; two runs of 3). The 2-rank single-copy
 * AllGather took 0.62, 0.86, 0.98 and 0.93 of the direct one's time at
 * 32, 64, 128 and 256 MiB out of place (in place, where its block goes to the peer only and is read as
 * before, 0.62 and 0.86 at 32 and 64 MiB, 1.16 and 1.11 at 128 and 256), so 2 ranks take the direct one
 * only in place from 128 MiB; the 4-rank one 0.75 of the direct one's time at 16 MiB (level at 32, 1.31
 * at 64), so 3 and 4 ranks take it to 16 MiB. On 8 ranks both were level with two-shot and the direct
 * AllGather at 256 KiB and 1 MiB (0.95 to 1.10), the AllReduce behind at 4 MiB out of place (1.35), both
 * at 16 MiB (1.66, 1.77), and the rules there stay. From 8 ranks the single-copy AllToAll runs out of
 * place from 256 KiB (it ran from 4 MiB): on the Xeon virtual machine it took 0.67, 0.93, 0.73, 0.55 and 0.55 of the direct one's time at 256 KiB, 512
 * KiB, 1, 2 and 4 MiB (pairwise: slower than direct from 2 MiB), level from 16 MiB; four ranks to a core,
 * the calibration at init does not find its reads faster than a copy and an arena read, so the rule
 * does not ask (single_copy_saves). On an AMD EPYC machine it had taken
 * 1.08 to 1.33 times the direct one's time from 4 MiB (docs/tuning.md, "A fifth machine"), and there
 * later, alternating 3 runs each, 2.1, 1.13 and 1.40 times at 256 KiB, 2 and 16 MiB (medians): which
 * of the two wins is the machine's, and the rule leaves it to the model. From 64 MiB it took single copy,
 * where the direct one ran in a mode twice as slow on that machine; most of that mode was its slot copies
 * taking plain stores (docs/design.md, Copies), and since they time themselves the direct one took 38 to
 * 55 ms at 64 MiB where single copy took 44 to 66 and Open MPI 44 to 56 (8 alternating rounds; the model
 * without a tuning file prices single copy lower there), so from 64 MiB it was direct. At 256 MiB the three
 * were level (137 to 209 ms) and the rule took single copy there, until with the slot copies timed from 4
 * KiB the direct one took 150-159 ms in 4 alternating rounds in fast stretches against single copy's
 * 161-171 and Open MPI's 164-183 (in slow ones 152 and 174 against 146 and 164, Open MPI 142 and 151):
 * direct there too (docs/algorithms.md). A rule naming direct alone kept the watch from ever trying single
 * copy there (the model without a tuning file prices it at 2.5 to 4 times direct from 16 MiB; the watch
 * expects an untried algorithm at its own price outside a rule's several), and the direct one runs in a
 * mode twice as slow for minutes at a time (313 to 353 ms at 256 MiB in one hour, against single copy's
 * 159 to 189 and Open MPI's 150 to 187): the rule's several reach 256 MiB, the model choosing (direct, so
 * far) and the watch moving to single copy where direct runs that slow. The
 * single-copy ReduceScatter (medians of 3 alternating runs against the direct one, out of place / in place): on 2 ranks
 * 0.80 / 0.85 at 16 KiB and 0.51 to 0.89 / 0.35 to 0.49 from 64 KiB to 16 MiB, level out of place from 64
 * MiB (0.65 to 0.69 in place); on 3 and 4 ranks 0.96 to 0.98 / 0.57 to 0.85 at 1 MiB, 0.80 to 0.93 /
 * 0.66 to 0.75 at 4 and 16 MiB, behind at 64 KiB (1.3) and level at 256 KiB; on 8 ranks 0.71 to 0.91 from
 * 256 KiB to 4 MiB, behind at 64 KiB (1.6), level from 16 MiB; on 6 ranks mixed (0.98 at 256 KiB, 1.07 /
 * 1.16 at 1 MiB, 0.94 to 0.96 / 0.78 to 0.83 at 4 and 16 MiB), left to the direct one. So 2 ranks take
 * it from 16 KiB where it is fast (64 KiB where it saves a copy), 3 and 4 from 1 MiB, 8 from 256 KiB to 4
 * MiB (docs/algorithms.md, "The single-copy ReduceScatter"). The single-copy Reduce (same runs): on 2
 * ranks 0.95 / 0.86 of the chain's time at 64 KiB, 0.58 to 0.68 / 0.54 to 0.74 from 256 KiB to 16 MiB,
 * level at 64 MiB; on 3 and 4 ranks 0.81 to 0.84 / 0.81 to 0.82 of the direct one's at 1 MiB, 0.61 to
 * 0.76 / 0.72 to 0.89 at 4 MiB, 0.92 to 0.98 / 0.63 to 0.77 at 16 MiB, behind out of place at 64 MiB
 * (1.10 to 1.12) and at 256 KiB on 3 ranks (1.14); on 8 ranks level to 1 MiB, 0.90 at 4 MiB, behind
 * from 16 MiB. So 2 ranks take it from 64 KiB where single-copy reads are fast, 3 and 4 ranks from 1 to
 * 16 MiB where they save a copy. Where ranks
 * share hosts across several (ALGO_NEEDS_HOSTS), the hierarchical algorithms run: AllReduce at every size
 * (between emulated hosts it took 0.47 to 0.92 of the ring's time over 1 Gbit/s links, 2 and 3 hosts of 2
 * ranks, 4 KiB to 64 MiB, and 0.41 to 0.97 unshaped, level with rhd or ahead), from 1 MiB in its two-
 * dimensional form where every host has as many ranks (level with hier over 1 Gbit/s links on 2 x 2, 3 x
 * 2 and 2 x 3, 0.66 to 0.89 of its time unshaped on 2 x 2, where it was the only one ahead of the flat
 * ring and rhd; below 1 MiB the two swapped places from run to run); AllGather and
 * ReduceScatter from 256 KiB (0.65 to 0.69 of the ring's time on 2 hosts of 2 ranks from 1 MiB, 0.76 to
 * 0.93 on 3, level with Bruck's and rhd where ranks are dealt to hosts in turn), and from 4 KiB where each
 * host's ranks are consecutive (with the links' token buckets drained, 200 calls: over 1 Gbit/s links 0.5
 * to 0.8 of the best flat one's time on 2 x 2 from 4 KiB, 0.8 on 3 x 2 from 16 KiB; unshaped 0.7 to 1.0 on
 * 2 x 2, mixed on 3 x 2; dealt in turn Bruck's was ahead below 64 KiB, by 1.1 to 1.6); Broadcast and
 * Reduce at every size up to 8 ranks, and from 64 KiB beyond (their host-by-host chain is the flat chain
 * where each host's ranks are consecutive, and took half its time where ranks are dealt to hosts in turn;
 * above 8 ranks the chain's latency is left to the binomial tree's log p, unmeasured); AllToAll up to 16
 * KiB on two hosts, where its leaders send one message between the hosts for a flat algorithm's L x L
 * (0.4 to 0.9 of the faster of Bruck's and pairwise's time on 2 x 2 and 2 x 4 over 1 Gbit/s links, and on
 * 2 x 2 unshaped but at 64 B; on 3 hosts Bruck's log p steps were ahead from 1 or 4 KiB; from 64 KiB level
 * with pairwise over 1 Gbit/s links and 1.7 to 2.5 times its time unshaped, where the leader's trip through
 * shared memory binds). No rule takes the two-dimensional AllToAll (level with hier over 1 Gbit/s links,
 * behind the flat ones unshaped, where each emulated host's one core makes its copies) nor the mesh
 * AllToAll (mixed against pairwise) (docs/algorithms.md, "Across hosts"). */
#define RULE(c, n, ...) {.coll = c, .name = n, __VA_ARGS__}
static const struct algo_rule {
    coll_kind_t coll;
    const char *name;
    int min_ranks, max_ranks;
    int max_hosts; /* bound on the hosts the ranks are on (algo_caps_t) */
    int consecutive; /* 1: only where each host's ranks are consecutive (algo_caps_t) */
    size_t min_bytes, max_bytes;
    size_t max_total; /* bound on n * p */
    int oversubscribed; /* 1: only where ranks outnumber the busiest host's cores */
    int pow2;           /* 1: only for a power-of-two rank count */
    int in_place;       /* 1: only in place (sendbuf == recvbuf); -1: only out of place */
    int single_copy_fast; /* 1: only where single-copy reads outran the arena (algo_caps_t) */
    int single_copy_saves; /* 1: only where they beat a copy and an arena read together (algo_caps_t) */
} algo_rules[] = {
    RULE(COLL_ALLREDUCE, "twoshot", .max_ranks = 2, .min_bytes = 32 << 20, .in_place = -1),
    RULE(COLL_ALLREDUCE, "cma", .max_ranks = 2, .min_bytes = 32 << 10, .single_copy_fast = 1),
    RULE(COLL_ALLREDUCE, "cma", .max_ranks = 2, .min_bytes = 64 << 10, .single_copy_saves = 1),
    RULE(COLL_ALLREDUCE, "cma", .min_ranks = 3, .max_ranks = 4, .min_bytes = 256 << 10, .max_bytes = 4 << 20,
         .single_copy_saves = 1),
    RULE(COLL_ALLREDUCE, "cma", .min_ranks = 3, .max_ranks = 4, .min_bytes = 256 << 10, .in_place = 1,
         .single_copy_saves = 1),
    RULE(COLL_ALLREDUCE, "oneshot", .max_ranks = 2, .max_bytes = 64 << 10),
    RULE(COLL_ALLREDUCE, "twoshot", .max_ranks = 2, .min_bytes = 128 << 10),
    RULE(COLL_ALLREDUCE, "oneshot", .min_ranks = 4, .max_ranks = 4, .max_bytes = 32 << 10),
    RULE(COLL_ALLREDUCE, "twoshot", .min_ranks = 4, .max_ranks = 4, .min_bytes = 64 << 10),
    RULE(COLL_ALLREDUCE, "twoshot", .min_ranks = 8, .min_bytes = 32 << 10),
    RULE(COLL_ALLREDUCE, "oneshot", .min_ranks = 3, .max_total = 256 << 10),
    RULE(COLL_ALLREDUCE, "twoshot", .min_ranks = 3),
    RULE(COLL_ALLREDUCE, "hier2d", .min_bytes = 1 << 20),
    RULE(COLL_ALLREDUCE, "hier"),
    RULE(COLL_ALLREDUCE, "mesh", .max_ranks = 2, .min_bytes = 8 << 20),
    RULE(COLL_ALLREDUCE, "mesh", .min_bytes = 1 << 20, .oversubscribed = 1),
    RULE(COLL_ALLREDUCE, "star", .max_ranks = 8, .max_bytes = 64 << 10, .oversubscribed = 1),
    RULE(COLL_ALLREDUCE, "rhd", .max_bytes = 512 << 10, .oversubscribed = 1, .pow2 = 1),
    RULE(COLL_ALLREDUCE, "rd", .max_ranks = 2, .max_bytes = 16 << 10),
    RULE(COLL_ALLREDUCE, "rhd", .max_bytes = 64 << 10),
    RULE(COLL_ALLREDUCE, "ring"),
    RULE(COLL_ALLGATHER, "direct", .max_ranks = 2, .min_bytes = 128 << 20, .in_place = 1),
    RULE(COLL_ALLGATHER, "cma", .max_ranks = 2, .min_bytes = 16 << 10, .single_copy_fast = 1),
    RULE(COLL_ALLGATHER, "cma", .min_ranks = 3, .max_ranks = 4, .min_bytes = 512 << 10, .max_bytes = 16 << 20,
         .single_copy_saves = 1),
    RULE(COLL_ALLGATHER, "direct", .min_ranks = 3),
    RULE(COLL_ALLGATHER, "cma", .max_ranks = 2, .min_bytes = 64 << 10, .single_copy_saves = 1),
    RULE(COLL_ALLGATHER, "direct", .max_bytes = 64 << 10),
    RULE(COLL_ALLGATHER, "direct,ring,cma", .max_ranks = 2, .min_bytes = 128 << 10),
    RULE(COLL_ALLGATHER, "hier", .min_bytes = 4 << 10, .consecutive = 1),
    RULE(COLL_ALLGATHER, "hier", .min_bytes = 256 << 10),
    RULE(COLL_ALLGATHER, "rd", .max_bytes = 16 << 10, .oversubscribed = 1, .pow2 = 1),
    RULE(COLL_ALLGATHER, "rd", .min_bytes = 128 << 10, .max_bytes = 16 << 20, .oversubscribed = 1, .pow2 = 1),
    RULE(COLL_ALLGATHER, "bruck", .max_bytes = 64 << 10),
    RULE(COLL_ALLGATHER, "mesh", .min_bytes = 2 << 20, .max_bytes = 16 << 20, .oversubscribed = 1),
    RULE(COLL_ALLGATHER, "ring"),
    RULE(COLL_REDUCE_SCATTER, "cma", .max_ranks = 2, .min_bytes = 16 << 10, .single_copy_fast = 1),
    RULE(COLL_REDUCE_SCATTER, "cma", .max_ranks = 2, .min_bytes = 64 << 10, .single_copy_saves = 1),
    RULE(COLL_REDUCE_SCATTER, "cma", .min_ranks = 3, .max_ranks = 4, .min_bytes = 1 << 20, .single_copy_saves = 1),
    RULE(COLL_REDUCE_SCATTER, "cma", .min_ranks = 8, .min_bytes = 256 << 10, .max_bytes = 4 << 20),
    RULE(COLL_REDUCE_SCATTER, "direct"),
    RULE(COLL_REDUCE_SCATTER, "hier", .min_bytes = 4 << 10, .consecutive = 1),
    RULE(COLL_REDUCE_SCATTER, "hier", .min_bytes = 256 << 10),
    RULE(COLL_REDUCE_SCATTER, "rhd", .max_bytes = 64 << 10),
    RULE(COLL_REDUCE_SCATTER, "mesh", .min_bytes = 2 << 20, .oversubscribed = 1),
    RULE(COLL_REDUCE_SCATTER, "ring"),
    RULE(COLL_BROADCAST, "direct", .max_ranks = 2, .min_bytes = 32 << 20),
    RULE(COLL_BROADCAST, "cma", .max_ranks = 2, .min_bytes = 16 << 10, .max_bytes = 8 << 20, .single_copy_fast = 1),
    RULE(COLL_BROADCAST, "cma", .max_ranks = 2, .min_bytes = 16 << 10, .in_place = -1, .single_copy_fast = 1),
    RULE(COLL_BROADCAST, "cma", .max_ranks = 2, .min_bytes = 64 << 10, .max_bytes = 8 << 20, .single_copy_saves = 1),
    RULE(COLL_BROADCAST, "cma", .max_ranks = 2, .min_bytes = 64 << 10, .in_place = -1, .single_copy_saves = 1),
    RULE(COLL_BROADCAST, "direct", .max_ranks = 2),
    RULE(COLL_BROADCAST, "chain", .max_ranks = 2),
    RULE(COLL_BROADCAST, "direct", .max_bytes = PRIMS_DIRECT_INLINE_BYTES),
    RULE(COLL_BROADCAST, "cma", .min_ranks = 4, .max_ranks = 4, .min_bytes = 256 << 10, .max_bytes = 8 << 20,
         .single_copy_saves = 1),
    RULE(COLL_BROADCAST, "direct", .min_bytes = 256 << 10),
    RULE(COLL_BROADCAST, "direct", .min_ranks = 4, .min_bytes = 32 << 10),
    RULE(COLL_BROADCAST, "hier", .max_ranks = 8),
    RULE(COLL_BROADCAST, "chain", .max_bytes = 64 << 10, .oversubscribed = 1),
    RULE(COLL_BROADCAST, "binomial", .max_bytes = 64 << 10),
    RULE(COLL_BROADCAST, "hier"),
    RULE(COLL_BROADCAST, "chain"),
    RULE(COLL_REDUCE, "cma", .max_ranks = 2, .min_bytes = 64 << 10, .single_copy_fast = 1),
    RULE(COLL_REDUCE, "cma", .min_ranks = 3, .max_ranks = 4, .min_bytes = 1 << 20, .max_bytes = 16 << 20,
         .single_copy_saves = 1),
    RULE(COLL_REDUCE, "direct", .min_ranks = 3, .min_bytes = 256 << 10),
    RULE(COLL_REDUCE, "chain", .max_ranks = 2),
    RULE(COLL_REDUCE, "hier", .max_ranks = 8),
    RULE(COLL_REDUCE, "binomial", .max_bytes = 64 << 10),
    RULE(COLL_REDUCE, "hier"),
    RULE(COLL_REDUCE, "chain"),
    RULE(COLL_ALLTOALL, "direct", .max_ranks = 2, .min_bytes = 32 << 20),
    RULE(COLL_ALLTOALL, "cma", .max_ranks = 2, .min_bytes = 16 << 10, .in_place = -1, .single_copy_fast = 1),
    RULE(COLL_ALLTOALL, "cma", .max_ranks = 2, .min_bytes = 64 << 10, .in_place = -1, .single_copy_saves = 1),
    RULE(COLL_ALLTOALL, "cma", .min_ranks = 3, .max_ranks = 4, .min_bytes = 256 << 10, .max_bytes = 8 << 20,
         .in_place = -1, .single_copy_saves = 1),
    RULE(COLL_ALLTOALL, "direct,cma", .min_ranks = 8, .min_bytes = 256 << 10, .in_place = -1),
    RULE(COLL_ALLTOALL, "direct", .in_place = 1),
    RULE(COLL_ALLTOALL, "direct,pairwise,cma", .max_ranks = 2, .min_bytes = 128 << 10),
    RULE(COLL_ALLTOALL, "direct", .max_bytes = 1 << 20),
    RULE(COLL_ALLTOALL, "direct", .min_bytes = 1 << 20),
    RULE(COLL_ALLTOALL, "hier", .max_hosts = 2, .max_bytes = 16 << 10),
    RULE(COLL_ALLTOALL, "bruck", .max_bytes = 16 << 10),
    RULE(COLL_ALLTOALL, "pairwise"),
    RULE(COLL_BARRIER, "direct"),
    RULE(COLL_BARRIER, "dissemination"),
};

#undef RULE

static int rule_fits(const struct algo_rule *r, coll_kind_t coll, size_t bytes, int in_place, const algo_caps_t *caps)
{
    size_t total, nranks = (size_t)caps->nranks;
    return r->coll == coll && caps->nranks >= r->min_ranks && (!r->max_ranks || caps->nranks <= r->max_ranks) &&
           (!r->max_hosts || caps->hosts <= r->max_hosts) && (!r->consecutive || caps->hosts_consecutive) &&
           bytes >= r->min_bytes && (!r->in_place || (r->in_place > 0) == !!in_place) &&
           (!r->single_copy_fast || caps->single_copy_fast) && (!r->single_copy_saves || caps->single_copy_saves) &&
           (!r->oversubscribed || caps->oversubscribed) &&
           (!r->pow2 || (caps->nranks & (caps->nranks - 1)) == 0) &&
           (!r->max_bytes || bytes <= r->max_bytes) &&
           (!r->max_total || (!__builtin_mul_overflow(bytes, nranks, &total) && total <= r->max_total));
}

static const char *const coll_names[COLL_COUNT] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                                   "reduce",    "alltoall",  "barrier"};

const char *coll_name(coll_kind_t coll) { return coll < COLL_COUNT ? coll_names[coll] : "?"; }

const algo_desc_t *algo_registry(size_t *n_p)
{
    *n_p = ALGO_COUNT;
    return algo_table;
}

/* The entries of one collective (COLL_COUNT: of all). */
static uint64_t coll_mask(coll_kind_t coll)
{
    uint64_t m = 0;
    for (size_t i = 0; i < ALGO_COUNT; i++)
        if (coll == COLL_COUNT || algo_table[i].coll == coll) m |= 1ull << i;
    return m;
}

/* The names of the entries in mask, each once, comma-separated. */
static const char *names_list(uint64_t mask, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ALGO_COUNT; i++) {
        int dup = 0;
        for (size_t j = 0; j < i; j++) dup |= (mask >> j & 1) && strcmp(algo_table[j].name, algo_table[i].name) == 0;
        if (!(mask >> i & 1) || dup || used >= len) continue;
        used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", algo_table[i].name);
    }
    return buf;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

/* One segment, "[collective:][^]name[,name...]": narrow *allowed. */
static chorus_result_t config_segment(char *seg, uint64_t *allowed, char *err, size_t errlen)
{
    char names[512];
    coll_kind_t coll = COLL_COUNT;
    char *colon = strchr(seg, ':');
    if (colon) {
        *colon = 0;
        const char *cname = trim(seg);
        int c = 0;
        while (c < COLL_COUNT && strcasecmp(coll_names[c], cname) != 0) c++;
        if (c == COLL_COUNT) {
            snprintf(err, errlen, "CHORUS_ALGO: unknown collective \"%s\" (allreduce, allgather, reduce_scatter, "
                     "broadcast, reduce, alltoall, barrier)", cname);
            return CHORUS_ERR_INVALID_ARGUMENT;
        }
        coll = (coll_kind_t)c;
        seg = colon + 1;
    }
    seg = trim(seg);
    int exclude = *seg == '^';
    uint64_t scope = coll_mask(coll), named = 0;
    char *save, *name;
    for (name = strtok_r(seg + exclude, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        name = trim(name);
        uint64_t m = 0;
        for (size_t i = 0; i < ALGO_COUNT; i++)
            if ((scope >> i & 1) && strcasecmp(algo_table[i].name, name) == 0) m |= 1ull << i;
        if (!m && coll < COLL_COUNT)
            snprintf(err, errlen, "CHORUS_ALGO: %s has no algorithm \"%s\" (it has: %s)", coll_names[coll], name,
                     names_list(scope, names, sizeof(names)));
        else if (!m)
            snprintf(err, errlen, "CHORUS_ALGO: no algorithm is called \"%s\" (known: %s)", name,
                     names_list(ALGO_ALL, names, sizeof(names)));
        if (!m) return CHORUS_ERR_INVALID_ARGUMENT;
        named |= m;
    }
    if (!named) {
        snprintf(err, errlen, "CHORUS_ALGO: a setting names no algorithm");
        return CHORUS_ERR_INVALID_ARGUMENT;
    }
    if (exclude) {
        *allowed &= ~named;
        return CHORUS_SUCCESS;
    }
    /* A list without a collective applies to the collectives that have one of its algorithms. */
    for (int c = 0; c < COLL_COUNT; c++) {
        uint64_t cm = coll_mask((coll_kind_t)c);
        if (named & cm) *allowed = (*allowed & ~cm) | (named & cm);
    }
    return CHORUS_SUCCESS;
}

chorus_result_t algo_config_parse(const char *text, algo_config_t *cfg_p, char *err, size_t errlen)
{
    uint64_t allowed = ALGO_ALL;
    if (text && *text) {
        char *copy = strdup(text), *save, *seg;
        if (!copy) return CHORUS_ERR_NO_MEMORY;
        chorus_result_t res = CHORUS_SUCCESS;
        for (seg = strtok_r(copy, ";", &save); seg && res == CHORUS_SUCCESS; seg = strtok_r(NULL, ";", &save))
            res = config_segment(seg, &allowed, err, errlen);
        free(copy);
        if (res != CHORUS_SUCCESS) return res;
    }
    char names[512];
    for (int c = 0; c < COLL_COUNT; c++) {
        uint64_t cm = coll_mask((coll_kind_t)c);
        if (!(allowed & cm)) {
            snprintf(err, errlen, "CHORUS_ALGO=%s leaves %s no algorithm (it has: %s)", text, coll_names[c],
                     names_list(cm, names, sizeof(names)));
            return CHORUS_ERR_INVALID_ARGUMENT;
        }
        if ((allowed & cm) != cm)
            LOG_INFO(LOG_SUB_ALGO, "CHORUS_ALGO: %s may use %s", coll_names[c],
                     names_list(allowed & cm, names, sizeof(names)));
    }
    cfg_p->allowed = allowed;
    return CHORUS_SUCCESS;
}

int algo_config_allows(const algo_config_t *cfg, const algo_desc_t *d)
{
    return cfg->allowed >> (size_t)(d - algo_table) & 1;
}

const char *algo_needs_text(const algo_desc_t *d)
{
    if (d->needs & ALGO_NEEDS_SINGLE_COPY)
        return "every rank on one host, with shared memory, and reads of each other's memory (process_vm_readv)";
    if (d->needs & ALGO_NEEDS_DIRECT) return "every rank on one host, with shared memory";
    if (d->needs & ALGO_NEEDS_HOSTS) return "ranks on two hosts or more, some host with two ranks or more";
    if (d->needs & ALGO_NEEDS_EVEN_HOSTS) return "ranks on two hosts or more, the same number on each, two or more";
    return "";
}

/* ALGO_NEEDS_HOSTS: ranks on two hosts or more, some host with two ranks or more. */
static int caps_hosts(const algo_caps_t *caps) { return caps->hosts > 1 && caps->per_host > 1; }

/* ALGO_NEEDS_EVEN_HOSTS: that, and every host with as many ranks as the busiest. */
static int caps_even_hosts(const algo_caps_t *caps)
{
    return caps_hosts(caps) && (long)caps->hosts * caps->per_host == caps->nranks;
}

int algo_supported(const algo_desc_t *d, const algo_caps_t *caps)
{
    return (!(d->needs & ALGO_NEEDS_DIRECT) || caps->direct) &&
           (!(d->needs & ALGO_NEEDS_SINGLE_COPY) || caps->single_copy) &&
           (!(d->needs & ALGO_NEEDS_HOSTS) || caps_hosts(caps)) &&
           (!(d->needs & ALGO_NEEDS_EVEN_HOSTS) || caps_even_hosts(caps));
}

/* The collective's first algorithm that cfg (NULL: anything) allows and caps supports. */
static const algo_desc_t *algo_allowed(coll_kind_t coll, const algo_caps_t *caps, const algo_config_t *cfg)
{
    for (size_t i = 0; i < ALGO_COUNT; i++)
        if (algo_table[i].coll == coll && (!cfg || (cfg->allowed >> i & 1)) && algo_supported(&algo_table[i], caps))
            return &algo_table[i];
    return NULL;
}

/* Each rule's registry entries (one bit each), resolved once: selection runs on every call and compares no
 * strings. A rule names one algorithm, or several separated by commas for the model to choose among. */
static uint64_t rule_mask[CHORUS_ARRAY_SIZE(algo_rules)];
static uint64_t needs_direct_mask, needs_single_copy_mask, needs_hosts_mask, needs_even_hosts_mask; /* the entries with each restriction */
static pthread_once_t rule_masks_once = PTHREAD_ONCE_INIT;

/* Rule r's entries: its names in CHORUS_ALGO's syntax, "collective:name[,name...]", read as that parser
 * does; 0 if they do not resolve (why says how, where the parser tells). */
static uint64_t rule_entries(size_t r, char *why, size_t whylen)
{
    char seg[128];
    uint64_t allowed = ALGO_ALL;
    snprintf(seg, sizeof(seg), "%s:%s", coll_names[algo_rules[r].coll], algo_rules[r].name);
    if (config_segment(seg, &allowed, why, whylen) != CHORUS_SUCCESS) return 0;
    return allowed & coll_mask(algo_rules[r].coll);
}

static void resolve_rule_masks(void)
{
    for (size_t i = 0; i < ALGO_COUNT; i++) {
        if (algo_table[i].needs & ALGO_NEEDS_DIRECT) needs_direct_mask |= 1ull << i;
        if (algo_table[i].needs & ALGO_NEEDS_SINGLE_COPY) needs_single_copy_mask |= 1ull << i;
        if (algo_table[i].needs & ALGO_NEEDS_HOSTS) needs_hosts_mask |= 1ull << i;
        if (algo_table[i].needs & ALGO_NEEDS_EVEN_HOSTS) needs_even_hosts_mask |= 1ull << i;
    }
    char why[256];
    for (size_t r = 0; r < CHORUS_ARRAY_SIZE(algo_rules); r++) rule_mask[r] = rule_entries(r, why, sizeof(why));
}

int algo_rules_valid(char *err, size_t errlen)
{
    for (size_t r = 0; r < CHORUS_ARRAY_SIZE(algo_rules); r++) {
        char why[256] = "";
        if (!rule_entries(r, why, sizeof(why))) {
            snprintf(err, errlen, "built-in rule %zu (%s %s) resolves to no algorithm%s%s", r,
                     coll_names[algo_rules[r].coll], algo_rules[r].name, why[0] ? ": " : "", why);
            return 0;
        }
    }
    return 1;
}

uint64_t algo_rule_choice(coll_kind_t coll, size_t bytes, int in_place, const algo_caps_t *caps,
                          const algo_config_t *cfg)
{
    pthread_once(&rule_masks_once, resolve_rule_masks);
    /* algo_supported for every entry at once */
    uint64_t supported = ~((caps->direct ? 0 : needs_direct_mask) | (caps->single_copy ? 0 : needs_single_copy_mask) |
                           (caps_hosts(caps) ? 0 : needs_hosts_mask) |
                           (caps_even_hosts(caps) ? 0 : needs_even_hosts_mask));
    for (size_t r = 0; r < CHORUS_ARRAY_SIZE(algo_rules); r++) {
        uint64_t usable = rule_mask[r] & cfg->allowed & supported;
        if (usable && rule_fits(&algo_rules[r], coll, bytes, in_place, caps)) return usable;
    }
    return 0;
}

const algo_desc_t *algo_first_supported(coll_kind_t coll, const algo_caps_t *caps, const algo_config_t *cfg)
{
    const algo_desc_t *d = algo_allowed(coll, caps, cfg);
    return d ? d : algo_allowed(coll, caps, NULL);
}

int algo_in_place(const coll_args_t *a, int nranks)
{
    /* The API accepts buffers that are either the in-place layout or disjoint: overlap means in place.
     * Only rank 0's AllGather and ReduceScatter buffers start at the same address. */
    uintptr_t send = (uintptr_t)a->sendbuf, recv = (uintptr_t)a->recvbuf;
    size_t all = a->count * dtype_size(a->dtype) * (size_t)nranks;
    if (a->coll == COLL_ALLGATHER) return recv && send >= recv && send - recv < all;
    if (a->coll == COLL_REDUCE_SCATTER) return send && recv >= send && recv - send < all;
    return send == recv;
}

double algo_buffer_bytes(coll_kind_t coll, double n, int nranks)
{
    switch (coll) {
    case COLL_ALLGATHER:      /* one block in and all out */
    case COLL_REDUCE_SCATTER: /* all in and one block out */
    case COLL_BROADCAST:      /* the root's two buffers and the others' one, on average */
    case COLL_REDUCE: return n + n / nranks;
    case COLL_BARRIER: return 0;
    default: return 2 * n; /* AllReduce, AllToAll */
    }
}

size_t algo_call_bytes(const coll_args_t *a, int nranks)
{
    size_t bytes = a->count * dtype_size(a->dtype);
    if (a->coll == COLL_ALLGATHER || a->coll == COLL_REDUCE_SCATTER || a->coll == COLL_ALLTOALL)
        bytes *= (size_t)nranks; /* count is per rank */
    return bytes;
}
