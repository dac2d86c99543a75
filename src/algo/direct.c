/* Steps shared by the direct-access algorithms (see direct.h). */
#include "algo/direct.h"

#include "util/copy.h"
#include "util/util.h"

chorus_result_t direct_empty_phase(prims_t *p)
{
    void *slot;
    const void *const *slots;
    CHECK(prims_direct_begin(p, &slot));
    prims_direct_publish(p, 0);
    return prims_direct_wait_all(p, &slots);
}

chorus_result_t direct_put(prims_t *p, const void *src, size_t bytes)
{
    void *slot;
    CHECK(prims_direct_begin_placed(p, bytes, &slot));
    prims_copy_slot(p, slot, src, bytes);
    prims_direct_publish(p, bytes);
    return CHORUS_SUCCESS;
}

chorus_result_t direct_put_pieces(prims_t *p, const char *buf, size_t block_elems, size_t off, size_t cnt,
                                  size_t elem, int skip)
{
    char *slot;
    int n = prims_nranks(p);
    size_t piece = cnt * elem;
    CHECK(prims_direct_begin_placed(p, (size_t)n * piece, (void **)&slot));
    prims_copy_slot_pieces(p, slot, buf + off * elem, block_elems * elem, piece, n, skip);
    prims_direct_publish(p, (size_t)n * piece);
    return CHORUS_SUCCESS;
}

chorus_result_t direct_reduce_scatter_chunk(prims_t *p, const char *in, size_t cnt, const prims_reduce_t *red)
{
    int n = prims_nranks(p), rank = prims_rank(p);
    size_t soff, scnt, elem = red->elem;
    char *slot;
    const void *const *slots;
    prims_partition(cnt, n, rank, &soff, &scnt);
    /* This rank's own slice stays out of the slot: nobody else reads it, and the combine takes it from in. */
    CHECK(prims_direct_begin_placed(p, cnt * elem, (void **)&slot));
    prims_copy_slot(p, slot, in, soff * elem);
    prims_copy_slot(p, slot + (soff + scnt) * elem, in + (soff + scnt) * elem, (cnt - soff - scnt) * elem);
    prims_direct_publish(p, cnt * elem);
    CHECK(prims_direct_wait_all(p, &slots));
    CHECK(prims_direct_begin_placed(p, scnt * elem, (void **)&slot)); /* slots stays valid until a wait */
    /* Where this rank's copies into slots stream lately, its slice is combined in scratch and copied in
     * as they are: combined in the slot, its stores would first take each line back from the peer that
     * read it last (util/copy.h, copy_shared). */
    if (scnt && prims_slot_streams(p, scnt * elem)) {
        void *tmp;
        CHECK(prims_scratch(p, 0, scnt * elem, &tmp));
        direct_reduce_own(tmp, slots, n, soff * elem, scnt, rank, in + soff * elem, red);
        prims_copy_slot(p, slot, tmp, scnt * elem);
    } else if (scnt) {
        direct_reduce_own(slot, slots, n, soff * elem, scnt, rank, in + soff * elem, red);
    }
    prims_direct_publish(p, scnt * elem);
    return CHORUS_SUCCESS;
}

chorus_result_t direct_gather_slices(prims_t *p, char *out, size_t cnt, size_t elem, size_t whole)
{
    const void *const *slots;
    CHECK(prims_direct_wait_all(p, &slots));
    for (int i = 0; i < prims_nranks(p); i++) {
        int q = direct_turn(prims_rank(p), prims_nranks(p), i);
        size_t soff, scnt;
        prims_partition(cnt, prims_nranks(p), q, &soff, &scnt);
        copy_out_part(out + soff * elem, slots[q], scnt * elem, whole);
    }
    return CHORUS_SUCCESS;
}

chorus_result_t direct_oneshot(prims_t *p, const coll_args_t *a, int everyone)
{
    prims_reduce_t red = algo_reduction(a);
    size_t per = direct_chunk_elems(p, 1, red.elem);
    int receiver = everyone || prims_rank(p) == a->root;
    for (size_t off = 0; off < a->count; off += per) {
        size_t cnt = CHORUS_MIN(per, a->count - off);
        const void *const *slots;
        CHECK(direct_put(p, (const char *)a->sendbuf + off * red.elem, cnt * red.elem));
        if (!receiver) continue;
        CHECK(prims_direct_wait_all(p, &slots));
        direct_reduce((char *)a->recvbuf + off * red.elem, slots, prims_nranks(p), 0, cnt, &red);
    }
    return CHORUS_SUCCESS;
}

chorus_result_t direct_twoshot(prims_t *p, const coll_args_t *a, int everyone)
{
    prims_reduce_t red = algo_reduction(a);
    size_t per = direct_chunk_elems(p, 1, red.elem);
    int receiver = everyone || prims_rank(p) == a->root;
    /* In place, each chunk of the output was read into the slot just before: in cache, not streamed (4
     * ranks in place at 16 MiB: 8.5 ms streamed against 8.1). */
    size_t whole = a->sendbuf != a->recvbuf ? prims_stream_whole(p, a->count * red.elem) : 0;
    for (size_t off = 0; off < a->count; off += per) {
        size_t cnt = CHORUS_MIN(per, a->count - off);
        CHECK(direct_reduce_scatter_chunk(p, (const char *)a->sendbuf + off * red.elem, cnt, &red));
        if (receiver) CHECK(direct_gather_slices(p, (char *)a->recvbuf + off * red.elem, cnt, red.elem, whole));
    }
    return CHORUS_SUCCESS;
}

/* Peer q's len bytes at addr: in place where they are mapped (a chorus_mem_alloc buffer), else copied
 * into buf. */
static chorus_result_t peer_part(prims_t *p, int q, uint64_t addr, char *buf, size_t len, const char **part_p)
{
    const char *mapped = prims_direct_view(p, q, addr, len);
    if (mapped) {
        *part_p = mapped;
        return CHORUS_SUCCESS;
    }
    *part_p = buf;
    return prims_direct_read(p, q, addr, buf, len, 0);
}

chorus_result_t direct_combine_peers(prims_t *p, const uint64_t *addrs, int stride, uint64_t at, const char *own,
                                     char *dst, size_t cnt, const prims_reduce_t *red, int to, size_t whole)
{
    int rank = prims_rank(p), n = prims_nranks(p), in_place = dst == own;
    size_t elem = red->elem, chunk = prims_chunk_bytes(p) / elem;
    if (!chunk) chunk = 1;
    if (chunk > cnt) chunk = cnt;
    /* Out of place, a large output that is written once and not read back here: each chunk is combined in
     * scratch, which stays in cache for the writes into the peers' outputs, and copied into dst with
     * non-temporal stores (copy_out_part), so that dst's lines are not first read from memory. Without
     * dst the chunks are combined in scratch only. */
    int stream = dst && !in_place && whole >= COPY_STREAM_MIN, in_scratch = stream || !dst;
    /* buf[0] and buf[1]: the peers' parts (two at once for the first combination); buf[2]: this rank's
     * own part, in place, where it is combined after the output was first written, or the chunk's
     * combination where that is in scratch. */
    int need_own = in_place && rank >= 2;
    char *tmp;
    CHECK(prims_scratch(p, 0, chunk * elem * (size_t)(need_own || in_scratch ? 3 : 2), (void **)&tmp));
    char *buf[3] = {tmp, tmp + chunk * elem, tmp + 2 * chunk * elem};
    for (size_t done = 0; done < cnt; done += chunk) {
        size_t c = CHORUS_MIN(chunk, cnt - done), len = c * elem, from = done * elem;
        char *acc = in_scratch ? buf[2] : dst + from;
        const char *part[2];
        if (need_own) copy_bytes(buf[2], own + from, len);
        for (int q = 0; q < 2; q++) {
            if (q == rank)
                part[q] = own + from;
            else
                CHECK(peer_part(p, q, addrs[stride * q] + at + from, buf[q], len, &part[q]));
        }
        reduce_apply3(acc, part[0], part[1], c, red->dtype, red->op);
        for (int q = 2; q < n; q++) {
            const char *x = need_own ? buf[2] : own + from;
            if (q != rank) CHECK(peer_part(p, q, addrs[stride * q] + at + from, buf[0], len, &x));
            reduce_apply(acc, x, c, red->dtype, red->op);
        }
        reduce_finish(acc, c, red->dtype, red->op, n);
        if (stream) copy_out_part(dst + from, acc, len, whole);
        if (to >= 0 && to != rank) CHECK(prims_direct_write(p, to, addrs[stride * to + 1] + at + from, acc, len));
        for (int i = 1; to == DIRECT_TO_ALL && i < n; i++) {
            int q = direct_turn(rank, n, i);
            CHECK(prims_direct_write(p, q, addrs[stride * q + 1] + at + from, acc, len));
        }
    }
    return CHORUS_SUCCESS;
}
