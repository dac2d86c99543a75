/*
 * The host arena: one shared-memory segment that every rank of a single-host communicator maps, so that
 * every rank can read every other rank's data directly. It moves no bytes itself; it gives each rank
 * two slots and a ring of stamps it alone writes, and a phase counter it alone advances.
 *
 * Phases. Ranks go through the same numbered phases (1, 2, ...). In phase k a rank writes its slot for k
 * (the slot of k's parity), publishes k with a 32-byte tag (what the rank is doing, compared by readers),
 * then reads the slots of phase k of the peers that published k. A rank publishes k + 1 only after it has
 * finished reading phase k's slots, so a slot written in phase k may be written again in phase k + 2 once
 * every peer has published k + 1. Counters are 32-bit and compared modulo 2^32.
 *
 * Each published phase has a stamp holding the phase number, the tag and, when the phase's data is at
 * most SHM_ARENA_LINE_BYTES, a copy of it: a reader polling the stamp gets all three in one cache-line
 * transfer, which is what small-message latency is made of. Larger data stays in the slot, at the offset
 * the writer chose there (the stamp says which). A rank has shm_arena_stamps() stamps, used
 * in turn. A phase whose data (up to SHM_ARENA_INLINE_BYTES) travels in its stamp alone
 * (shm_arena_publish_inline: no slot written) may be published once every peer has published the phase
 * after the one that stamp held last: through such phases a rank can run that many phases ahead of its
 * slowest peer (a broadcast's root does), where a phase that writes a slot waits for every peer to have
 * published the one before.
 *
 * Waiting. The phase word is also a futex: a reader that has spun long enough counts itself in the
 * writer's waiters word and sleeps on the phase word; a writer that sees waiters after publishing wakes
 * them. A seq-cst store/load pair on each side makes a lost wake-up impossible.
 *
 * Single copy. Each rank may also publish its process id and the address of a probe in its own memory,
 * so that peers can read and write its private memory directly (process_vm_readv, process_vm_writev)
 * where the kernel allows it. A buffer in memory from chorus_mem_alloc (transport/shm/region.h) is shared
 * instead: its owner lists the region in the arena before publishing its address, and a reader maps the
 * region (pidfd_getfd, the same permission) on its first read and copies out of the mapping from then on,
 * with no pages pinned per call.
 *
 * Set-up. One rank creates the segment (O_EXCL, 0600, its name derived from the communicator's secret)
 * with a random token in its header; the others open it and check the token they were told over their
 * authenticated connections; the creator unlinks it once everyone has mapped it.
 */
#ifndef CHORUS_ARENA_H
#define CHORUS_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "chorus/chorus.h"

#define SHM_ARENA_TAG_BYTES 32
#define SHM_ARENA_TOKEN_BYTES 16
#define SHM_ARENA_INLINE_BYTES 88 /* in a stamp: up to SHM_ARENA_LINE_BYTES in its first cache line */
#define SHM_ARENA_LINE_BYTES 24
/* Stamps per rank (a power of two), fewer where nranks of them would pass the budget. */
#define SHM_ARENA_STAMPS_MAX 256u
#define SHM_ARENA_STAMP_BUDGET ((size_t)4 << 20)

typedef struct shm_arena shm_arena_t;

/* Create and map the arena for nranks ranks with slots of at least slot_bytes (rounded up to pages);
 * token_p receives the random token the openers must check. NOT_SUPPORTED with the reason in err when
 * shared memory cannot be had. */
chorus_result_t shm_arena_create(const char *name, int nranks, size_t slot_bytes,
                                 uint8_t token_p[SHM_ARENA_TOKEN_BYTES], shm_arena_t **arena_p, char *err,
                                 size_t errlen);
/* Open and map an arena another rank created, checking its geometry and token. NOT_SUPPORTED with the
 * reason in err on failure. */
chorus_result_t shm_arena_open(const char *name, int nranks, size_t slot_bytes,
                               const uint8_t token[SHM_ARENA_TOKEN_BYTES], shm_arena_t **arena_p, char *err,
                               size_t errlen);
void shm_arena_unlink(const char *name);
void shm_arena_close(shm_arena_t *arena);

/* The slot size CHORUS_SHM_SLOT_SIZE=auto stands for, given the per-core L2 (0 when unknown), the ranks
 * and the cores they run on: the L2, within SHM_ARENA_AUTO_MIN..SHM_ARENA_AUTO_MAX, halved while the
 * arena's 2 nranks slots would pass SHM_ARENA_AUTO_BUDGET (but not below the minimum). A chunk that a rank
 * writes and a peer on another core then reads crosses fastest once it no longer fits the writer's L2:
 * the lines written first have gone to the shared cache by the time the reader asks, instead of being
 * fetched one by one out of the writer's private cache. Where ranks outnumber the cores more than twice
 * over, most of a rank's peers share its core, and the slots are at most SHM_ARENA_AUTO_SHARED: there
 * the gain of a slot past the L2 fades, and fewer phases count (8 ranks on 2 cores: 512 KiB against 256
 * took 0.55 to 1.0 of the two-shot AllReduce's time, 0.8 to 0.95 of the direct AllToAll's from 4 MiB,
 * level at 1 MiB; docs/algorithms.md, "Slots of the L2's size"). */
#define SHM_ARENA_AUTO_MIN ((size_t)256 << 10)
#define SHM_ARENA_AUTO_SHARED ((size_t)512 << 10)
#define SHM_ARENA_AUTO_MAX ((size_t)4 << 20)
#define SHM_ARENA_AUTO_BUDGET ((size_t)16 << 20)
size_t shm_arena_auto_slot_bytes(size_t l2_bytes, int nranks, int cores);

/* The bytes an arena of nranks ranks and slots of slot_bytes maps (0 if it overflows). */
size_t shm_arena_map_bytes(int nranks, size_t slot_bytes);

size_t shm_arena_slot_bytes(const shm_arena_t *arena);
/* How many phases a rank may publish ahead of its slowest peer through phases published inline. */
uint32_t shm_arena_stamps(const shm_arena_t *arena);
/* rank's slot for phase (one of its two, by the phase's parity). */
void *shm_arena_slot(const shm_arena_t *arena, int rank, uint32_t phase);
/* Make this rank's writes so far visible with phase and its tag, and wake the peers sleeping on it. The
 * readers need used bytes of the slot from offset on (up to SHM_ARENA_LINE_BYTES travel in the stamp). */
void shm_arena_publish(shm_arena_t *arena, int rank, uint32_t phase, const void *tag, size_t offset, size_t used);
/* Publish phase with up to SHM_ARENA_INLINE_BYTES of data in its stamp alone, leaving the slots alone. */
void shm_arena_publish_inline(shm_arena_t *arena, int rank, uint32_t phase, const void *tag, const void *data,
                              size_t bytes);
/* Whether rank's stamp of phase holds phase: asked only while rank cannot have published
 * phase + shm_arena_stamps() (the caller has not published phase + 1). */
int shm_arena_reached(const shm_arena_t *arena, int rank, uint32_t phase);
/* Whether rank has published phase or a later one; shm_arena_phase: the last it published. */
int shm_arena_passed(const shm_arena_t *arena, int rank, uint32_t phase);
uint32_t shm_arena_phase(const shm_arena_t *arena, int rank);
/* Copy the tag rank published with phase into tag, if its stamp still holds it (a stamp of an older phase
 * than the caller's may be rewritten meanwhile); 0 if it does not. */
int shm_arena_tag_copy(const shm_arena_t *arena, int rank, uint32_t phase, void *tag);
/* The tag rank published with phase, and the phase's data (the stamp's copy, or the slot at the offset
 * published); valid once
 * reached, for as long as the caller has not published phase + 1 (rank cannot rewrite them before). */
const void *shm_arena_tag(const shm_arena_t *arena, int rank, uint32_t phase);
const void *shm_arena_data(const shm_arena_t *arena, int rank, uint32_t phase);
/* Sleep until rank publishes phase, at most timeout_ms (it may return earlier). */
void shm_arena_sleep(shm_arena_t *arena, int rank, uint32_t phase, int timeout_ms);

/* Publish this rank's process id and the address of a probe (SHM_ARENA_TOKEN_BYTES of its memory that
 * hold the arena's token), for single-copy reads and writes. */
void shm_arena_set_self(shm_arena_t *arena, int rank, const uint8_t *probe);
/* Whether rank's memory can be read and written directly: its probe holds the token (process_vm_readv), and
 * the token can be written back there (process_vm_writev). err says why not. */
int shm_arena_can_copy(const shm_arena_t *arena, int rank, char *err, size_t errlen);
/* Before publishing buf's address for single-copy reads (every such address must pass here): if buf lies
 * in a region of chorus_mem_alloc memory, list the region (rank is this rank) so that readers can map it;
 * if not, unlist any freed region that [buf, buf + bytes) overlaps, whose old pages readers would
 * otherwise still find mapped. */
void shm_arena_share(shm_arena_t *arena, int rank, const void *buf, size_t bytes);
/* Where this process sees [addr, addr + bytes) of rank's memory, if rank shared the region holding it
 * (shm_arena_share) and it could be mapped; else NULL (read it with shm_arena_read). */
const void *shm_arena_view(shm_arena_t *arena, int rank, uint64_t addr, size_t bytes);
/* Copy bytes at address addr of rank's memory into dst (one copy): out of the mapping where rank shared
 * the region, else with process_vm_readv. out: dst is an output nothing reads back soon (copy_out). Returns 0
 * or the errno. */
int shm_arena_read(shm_arena_t *arena, int rank, uint64_t addr, void *dst, size_t bytes, int out);
/* Copy bytes from src to address addr of rank's memory (process_vm_writev). Returns 0 or the errno. */
int shm_arena_write(shm_arena_t *arena, int rank, uint64_t addr, const void *src, size_t bytes);

#endif
