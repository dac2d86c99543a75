/* For tools: a one-line description of a communicator's layout (chorus-perf's header), and the cost
 * model's view of a call (chorus-perf's model column). */
#ifndef CHORUS_COMM_INFO_H
#define CHORUS_COMM_INFO_H

#include <stddef.h>

#include "chorus/chorus.h"
#include "tune/tune.h"

/* Writes e.g. "hosts 2, transport tcp" into buf. */
void comm_describe(chorus_comm_t comm, char *buf, size_t len);

/* What the communicator offers algorithms (algo_supported: which of them it can run). */
const algo_caps_t *comm_algo_caps(chorus_comm_t comm);

/* The communicator as the cost model sees it (its ranks, hosts, link and capabilities). */
const tune_comm_t *comm_tune_comm(chorus_comm_t comm);

/* The algorithm a call would run and the model's predicted seconds for it (*seconds_p; NaN when the
 * collective has none, e.g. send/recv). A coll_args_t's fields, without buffers: in_place says whether
 * they would be the same; shared, that every rank's would lie in chorus_mem_alloc memory (algo_shared_twin,
 * from the size the communicator's calls agree from now). */
const char *comm_model_predict(chorus_comm_t comm, int coll, size_t count, chorus_datatype_t dtype, chorus_redop_t op,
                               int root, int in_place, int shared, double *seconds_p);

/* chorus-tune: the thorough measurement (tune_measure), on every rank together; *tp_p holds the results on
 * rank 0, *link_p the link it measured (with the first rank on another host, else rank 1), *share_p the
 * share of the cores the figures were measured at (tune_share). */
chorus_result_t comm_tune_measure(chorus_comm_t comm, tune_params_t *tp_p, tune_link_t *link_p, double *share_p);

/* chorus-tune: the median of k passes' results (tune_params_median), the arena's rates derived again from
 * the median times (tune_derive_arena) for this communicator's layout. */
void comm_tune_median(chorus_comm_t comm, tune_params_t *tp, const tune_params_t *runs, int k);

/* chorus-tune: what calls may choose from now on, in CHORUS_ALGO's syntax (NULL or "": anything), as if
 * the communicator had been made with it. On every rank alike, between calls, with nothing in flight. */
chorus_result_t comm_set_algo(chorus_comm_t comm, const char *text);

#endif
