/*
 * The measurement at init (CHORUS_TUNE_CALIBRATE=1) and the agreement that follows it. Every rank takes
 * part, in the same order:
 *   1. rank 0 times a local copy and a float32 sum (beta_copy, gamma);
 *   2. rank 0 and its partner (the first rank on another host, else rank 1) ping-pong 8 bytes and 256 KiB
 *      over their connection (alpha and beta of that link: shm on one host, tcp across hosts);
 *   3. with the host arena, every rank runs a few barriers through it, timed at rank 0 (alpha of the arena);
 *   4. rank 0 broadcasts its parameters and rules, so that every rank chooses the same algorithms.
 * Each figure is the best of its repetitions: the least disturbed run is the closest to what the hardware
 * does, and the share of the cores that ranks outnumbering them get is the model's own term.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune.h"
#include "util/log.h"
#include "util/util.h"

#define TUNE_SMALL 8
#define TUNE_LARGE (256u << 10)
#define TUNE_SMALL_TRIPS 32
#define TUNE_LARGE_TRIPS 4
#define TUNE_BARRIERS 16

/* Best one-way time of `trips` round trips of `bytes` between rank 0 (the timer) and partner. */
static chorus_result_t tune_pingpong(prims_t *p, int partner, void *buf, size_t bytes, int trips, double *oneway_p)
{
    int me = prims_rank(p);
    double best = INFINITY;
    for (int t = 0; t < trips; t++) {
        if (me == 0) {
            int64_t t0 = time_now_ns();
            CHECK(prims_send(p, partner, buf, bytes));
            CHECK(prims_recv(p, partner, buf, bytes));
            double rtt = (double)(time_now_ns() - t0) * 1e-9;
            if (rtt < best) best = rtt;
        } else {
            CHECK(prims_recv(p, 0, buf, bytes));
            CHECK(prims_send(p, 0, buf, bytes));
        }
    }
    *oneway_p = best / 2;
    return CHORUS_SUCCESS;
}

static chorus_result_t tune_measure_link(prims_t *p, tune_state_t *ts, int partner)
{
    int me = prims_rank(p);
    if (me != 0 && me != partner) return CHORUS_SUCCESS;
    char *buf = calloc(1, TUNE_LARGE);
    if (!buf) return CHORUS_ERR_NO_MEMORY;
    double small = 0, large = 0;
    chorus_result_t res = tune_pingpong(p, partner, buf, TUNE_SMALL, TUNE_SMALL_TRIPS, &small);
    if (res == CHORUS_SUCCESS) res = tune_pingpong(p, partner, buf, TUNE_LARGE, TUNE_LARGE_TRIPS, &large);
    free(buf);
    tune_params_t *tp = &ts->file.params;
    tune_link_t link = ts->comm.net;
    if (res == CHORUS_SUCCESS && me == 0 && small > 0) {
        tp->alpha[link] = small;
        if (large > small) tp->beta[link] = TUNE_LARGE / (large - small);
    }
    return res;
}

/* The mean of back-to-back barriers (a single one can find every peer there already), over the cores'
 * share, which the model applies itself. */
static chorus_result_t tune_measure_arena(prims_t *p, tune_state_t *ts)
{
    coll_args_t barrier = {.coll = COLL_BARRIER};
    CHECK(barrier_direct(p, &barrier));
    int64_t t0 = time_now_ns();
    for (int i = 0; i < TUNE_BARRIERS; i++) CHECK(barrier_direct(p, &barrier));
    double mean = (double)(time_now_ns() - t0) * 1e-9 / TUNE_BARRIERS;
    const tune_comm_t *tc = &ts->comm;
    double share = tc->cores > 0 && tc->ranks_per_host > tc->cores ? (double)tc->ranks_per_host / tc->cores : 1;
    if (prims_rank(p) == 0 && mean > 0) ts->file.params.alpha[TUNE_LINK_ARENA] = mean / share;
    return CHORUS_SUCCESS;
}

chorus_result_t tune_setup(prims_t *p, tune_state_t *ts, int calibrate, int partner)
{
    int me = prims_rank(p);
    if (prims_nranks(p) < 2) return CHORUS_SUCCESS;
    if (calibrate) {
        if (me == 0) tune_measure_local(&ts->file.params, 3);
        CHECK(tune_measure_link(p, ts, partner));
        if (ts->comm.caps.direct) CHECK(tune_measure_arena(p, ts));
        if (me == 0) {
            char was[sizeof(ts->file.params.source)];
            snprintf(was, sizeof(was), "%s", ts->file.params.source);
            snprintf(ts->file.params.source, sizeof(ts->file.params.source), "measured at init (link %s, rank 0 and %d; "
                     "the rest: %.100s)", tune_link_name(ts->comm.net), partner, was);
        }
    }
    coll_args_t share = {.coll = COLL_BROADCAST, .sendbuf = &ts->file, .recvbuf = &ts->file,
                         .count = sizeof(ts->file), .dtype = chorus_uint8, .root = 0};
    return broadcast_binomial(p, &share);
}
