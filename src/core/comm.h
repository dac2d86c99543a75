/* The communicator. Owned by core; other layers see only the parts handed to them (prims_t to algorithms,
 * connections to the progress engine). */
#ifndef CHORUS_COMM_H
#define CHORUS_COMM_H

#include <stdint.h>

#include "algo/prims_impl.h"
#include "util/params.h"

#define COMM_ERROR_BYTES 1024

struct chorus_comm {
    int rank;
    int nranks;
    int nhosts;
    int nshm, ntcp;           /* peers reached through each transport */
    int shm_fallback_logged;
    chorus_params_t params;
    transport_conn_t **conns; /* by rank; NULL for this rank */
    char (*hosts)[PRIMS_HOST_BYTES];
    progress_engine_t engine;
    prims_t prims;
    uint64_t coll_seq;     /* collectives issued so far */
    uint32_t *send_seq;    /* point-to-point messages sent to each peer */
    uint32_t *recv_seq;    /* and received from each */
    void *stage;           /* float32 staging of half-precision reductions */
    size_t stage_bytes;
    char last_error[COMM_ERROR_BYTES];
};

/* Record the detail of a failure (printf-style) and return res, for one-line error returns. */
chorus_result_t comm_error(chorus_comm_t comm, chorus_result_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
