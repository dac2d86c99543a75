/*
 * The primitives algorithms are written against. Peers are ranks; buffers are bytes; nothing here names a
 * transport. Every primitive returns when its part of the exchange is complete, the operation's deadline
 * passes, a peer fails, or the communicator is aborted; on failure the communicator's error detail names
 * the peer and the operation.
 *
 * Vocabulary (used by every algorithm file):
 *   block  - the part of a buffer that belongs to one rank in the collective's layout (allgather: the data
 *            of one rank; ring allreduce: the 1/p slice a rank ends up owning).
 *   chunk  - the pipelining unit (CHORUS_CHUNK_SIZE bytes): data is reduced or forwarded chunk by chunk
 *            while the next chunk is on the wire.
 * Messages between two ranks are matched in the order both sides post them.
 */
#ifndef CHORUS_PRIMS_H
#define CHORUS_PRIMS_H

#include <stddef.h>

#include "algo/reduce.h"

typedef struct prims prims_t;

/* What to reduce with: the datatype's element size keeps chunk boundaries on element boundaries. */
typedef struct prims_reduce {
    chorus_datatype_t dtype;
    chorus_redop_t op;
    size_t elem;
} prims_reduce_t;

int prims_rank(const prims_t *p);
int prims_nranks(const prims_t *p);
/* The host a rank runs on: hosts are numbered 0, 1, ... in the order of their lowest ranks. */
int prims_host_of(const prims_t *p, int rank);
size_t prims_chunk_bytes(const prims_t *p);
/* What an algorithm passes copy_out_part as the whole of an output of `whole` bytes per rank: whole where
 * it streams on this communicator's host (copy_streams), else 0. */
size_t prims_stream_whole(const prims_t *p, size_t whole);
/* copy_out on this communicator's host: n bytes into an output of `whole` bytes per rank that nothing
 * reads back within the collective, streamed where prims_stream_whole(whole) says so. */
void prims_copy_out(const prims_t *p, void *dst, const void *src, size_t n, size_t whole);
/* copy_bytes into this rank's slot of the phase it began (prims_direct_begin), which its peers read next:
 * by the method (plain or streamed stores) its copies into slots found faster lately (copy_shared). */
void prims_copy_slot(prims_t *p, void *slot, const void *src, size_t n);
/* The same for `count` pieces of `piece` bytes, piece q from src + q stride into slot + q piece, but for
 * piece `skip` (-1: none): one choice of stores for them all, timed as one copy of their total. */
void prims_copy_slot_pieces(prims_t *p, char *slot, const char *src, size_t stride, size_t piece, int count,
                            int skip);
/* Whether prims_copy_slot of n bytes streams now: then data computed for a slot (a combination) is better
 * computed in scratch and copied in with it than written into the slot in place. */
int prims_slot_streams(const prims_t *p, size_t n);
/* Whether this rank's latest copy into its slots of COPY_SHARED_MIN bytes or more (of any size class)
 * chose streamed stores: the sign of a slow stretch of the machine's caches, where each store would first
 * take its line back from the peer that read it (util/copy.h, copy_shared). */
int prims_slots_streaming(const prims_t *p);
/* Every copy into this rank's slots takes plain stores (streamed 0) or streamed ones (1), not timed. */
void prims_fix_slot_stores(prims_t *p, int streamed);
/* Scratch memory owned by the communicator, valid until the operation ends; slot 0 and 1 are independent
 * buffers (for double buffering). Contents are undefined. */
chorus_result_t prims_scratch(prims_t *p, int slot, size_t bytes, void **buf_p);

chorus_result_t prims_send(prims_t *p, int peer, const void *buf, size_t bytes);
chorus_result_t prims_recv(prims_t *p, int peer, void *buf, size_t bytes);
/* Send to one peer while receiving from another (or the same) peer. */
chorus_result_t prims_sendrecv(prims_t *p, int send_peer, const void *sbuf, size_t sbytes, int recv_peer, void *rbuf,
                               size_t rbytes);
/* Send sbuf to send_peer while receiving rbytes from recv_peer; as each chunk lands,
 * dst = local OP received (dst may alias local). send_peer < 0: only receive and reduce; recv_peer < 0:
 * only send, to a peer that reduces what it receives. Both sides must use this call: the data moves as
 * one message per chunk (see EXCH_REDUCE_WINDOW), not as one message. */
chorus_result_t prims_sendrecv_reduce(prims_t *p, int send_peer, const void *sbuf, size_t sbytes, int recv_peer,
                                      const void *local, void *dst, size_t rbytes, const prims_reduce_t *red);
/* A stage of a pipelined chain, one message per chunk. recv_peer < 0: the head, which sends src and,
 * when src is not buf, copies it to buf a chunk at a time whenever its link keeps it waiting (so the
 * chain starts at once). send_peer < 0: the tail, which only receives. Otherwise each chunk received
 * into buf is forwarded to send_peer as soon as it lands (src is not read). */
chorus_result_t prims_chain_copy(prims_t *p, int recv_peer, int send_peer, const void *src, void *buf, size_t bytes);
/* A stage of a pipelined reduction chain, one message per chunk. recv_peer < 0: the head, which sends
 * local. Otherwise each received chunk is combined, dst = local OP received, and forwarded to send_peer
 * (send_peer < 0: the tail keeps it in dst). */
chorus_result_t prims_chain_reduce(prims_t *p, int recv_peer, int send_peer, const void *local, void *dst,
                                   size_t bytes, const prims_reduce_t *red);

/* One tree of prims_trees(), as this rank sees it. A tree spans at least two ranks. The messages between
 * two ranks go in the order of the trees they both list, so two ranks must list the trees they share in
 * the same order: every rank listing the same trees in the same order is one way; a rank lists only the
 * trees it is part of. */
typedef struct prims_tree {
    int parent;          /* -1: this rank is the root */
    int nchildren;
    const int *children; /* their data is combined in this order */
    const void *src;     /* reduce: this rank's contribution; broadcast: the data, at the root */
    void *dst;           /* where the result lands (unused at the leaves of a reduce) */
    size_t bytes;
} prims_tree_t;

typedef enum {
    PRIMS_TREE_REDUCE,    /* up: dst = src OP child 0 OP child 1 ..., sent to the parent (leaves send src) */
    PRIMS_TREE_BROADCAST, /* down: the root sends src; the others receive into dst and forward it */
    PRIMS_TREE_ALLREDUCE  /* up as REDUCE; the root finishes each chunk (avg); down into dst as BROADCAST */
} prims_tree_mode_t;

/* Run ntrees trees at once, with any number of peers, chunk by chunk: a chunk is combined as soon as every
 * child's copy of it has landed and forwarded as soon as it is complete, so in ALLREDUCE chunk i travels
 * down while chunk i+1 travels up. Children's chunks are staged in scratch slot 0, a few chunks ahead of
 * their combination. red: NULL for BROADCAST. */
chorus_result_t prims_trees(prims_t *p, prims_tree_mode_t mode, const prims_tree_t *trees, int ntrees,
                            const prims_reduce_t *red);

/*
 * Direct access, inside one host: when every rank of the communicator maps the host arena, each rank
 * owns a slot of prims_direct_bytes() bytes per phase that every other rank can read. An algorithm built
 * on it runs in phases, every rank the same phases in the same order:
 *     prims_direct_begin(&slot)  write this rank's part into slot  prims_direct_publish(bytes written)
 *     prims_direct_wait(peer, &theirs) for each peer whose part it needs, and read it
 * prims_direct_begin_placed(bytes, &slot) begins a phase that writes that many bytes: slot is where in
 * the rank's slot they go, away from lines the peers have read lately (prims_direct.c, direct_place);
 * the readers' pointers (wait, wait_all) point there.
 * A rank must finish reading a phase's slots before it begins the next phase (begin waits, where needed,
 * until every peer has finished reading this rank's slot of two phases ago), and waits only for phases it
 * has published. Every published phase carries the operation's fingerprint: a peer in a different
 * operation (another collective, count, datatype, op or root) fails the wait with CHORUS_ERR_MISMATCH
 * naming what differs; a peer not waited for (a broadcast's root waits for no one) is checked at the
 * next begin, so a divergence shows at the latest in the next direct operation.
 *
 * Inline phases carry up to PRIMS_DIRECT_INLINE_BYTES with the phase itself and write no slot:
 *     prims_direct_begin_inline()  prims_direct_publish_inline(data, bytes)  prims_direct_wait(...)
 * Their begin waits only until every peer is within the arena's ring of stamps (hundreds of phases) of
 * this rank, so a rank that waits for no one in them (a broadcast's root) runs ahead of its peers, as a
 * sender of small messages does, instead of meeting them at every phase; and it checks no fingerprints.
 * A divergence there is found by the ranks that read the odd one's phases, or whom it reads (a wait
 * also compares the phase before, if that was not read from the same peer): by at least one rank, in
 * the next operation at the latest, though not by every rank.
 */
/* 0 when direct access is unavailable (ranks on several hosts, or no shared memory). */
size_t prims_direct_bytes(const prims_t *p);
chorus_result_t prims_direct_begin(prims_t *p, void **slot_p);
#define PRIMS_DIRECT_PLACE_MIN ((size_t)4096) /* the smallest phase placed away from the slot's start */
chorus_result_t prims_direct_begin_placed(prims_t *p, size_t bytes, void **slot_p);
/* used: how many bytes of the slot readers need this phase (small amounts travel with the phase). */
void prims_direct_publish(prims_t *p, size_t used);
#define PRIMS_DIRECT_INLINE_BYTES 88
chorus_result_t prims_direct_begin_inline(prims_t *p);
void prims_direct_publish_inline(prims_t *p, const void *data, size_t bytes);
chorus_result_t prims_direct_wait(prims_t *p, int peer, const void **slot_p);
/* Wait for every peer (in rank order); *slots_p: the phase's slots by rank, this rank's included, valid
 * until the next call. */
chorus_result_t prims_direct_wait_all(prims_t *p, const void *const **slots_p);

/* Single copy, inside one host: whether every rank can read and write every other rank's memory
 * (process_vm_readv, process_vm_writev, where the kernel's ptrace policy allows; agreed at init). An
 * algorithm publishes a buffer's address in its slot, and peers copy straight out of that buffer (it
 * must keep it unchanged until every reader is done: a phase the readers publish when done) or into it
 * (prims_direct_write; it must not touch those bytes until every writer has said it is done). */
int prims_direct_single_copy(const prims_t *p);
/* The address to publish for peers' single-copy reads of buf's bytes. Where buf lies in memory from
 * chorus_mem_alloc, readers map it and copy out of the mapping instead (docs/algorithms.md, "Buffers
 * from chorus_mem_alloc"). */
uint64_t prims_direct_share(prims_t *p, const void *buf, size_t bytes);
/* Whether buf's bytes lie in memory from chorus_mem_alloc (this rank's view only). */
int prims_direct_in_shared_memory(const void *buf, size_t bytes);
/* One phase in which every rank says yes or no (mine); *all_p: whether every rank said yes. */
chorus_result_t prims_direct_agree(prims_t *p, int mine, int *all_p);
/* Where this rank can read peer's bytes at its published address addr in place (a mapping of its
 * chorus_mem_alloc buffer), or NULL: copy them with prims_direct_read. */
const void *prims_direct_view(prims_t *p, int peer, uint64_t addr, size_t bytes);
/* Copy bytes at peer's published address addr into dst. out: dst is an output that nothing reads back
 * within the call (large copies into it may stream past the cache, util/copy.h). */
chorus_result_t prims_direct_read(prims_t *p, int peer, uint64_t addr, void *dst, size_t bytes, int out);
/* Copy bytes from src to peer's published address addr (process_vm_writev, one copy). The peer must not
 * touch those bytes until the writer has said it is done (a phase it publishes after its writes). */
chorus_result_t prims_direct_write(prims_t *p, int peer, uint64_t addr, const void *src, size_t bytes);

/* Balanced partition of count elements into nblocks: block i starts at *off_p and has *cnt_p elements
 * (the first count % nblocks blocks get one more). */
static inline void prims_partition(size_t count, int nblocks, int i, size_t *off_p, size_t *cnt_p)
{
    size_t base = count / (size_t)nblocks, rem = count % (size_t)nblocks, ui = (size_t)i;
    *off_p = ui * base + (ui < rem ? ui : rem);
    *cnt_p = base + (ui < rem ? 1 : 0);
}

#endif
