/* Streams: the queue of checked calls a stream's thread runs in their turns (stream.c). */
#ifndef CHORUS_STREAM_H
#define CHORUS_STREAM_H

#include "core/comm.h"

/* Refuse a stream chorus_stream_create did not make, naming the call (the detail on comm, as a call's
 * checks; on NULL, this thread's, as chorus_comm_last_error(NULL) shows). */
chorus_result_t stream_check(chorus_comm_t comm, chorus_stream_t stream, const char *name);
/* Queue a checked call: it takes its ticket in the communicator's order now, and runs in its turn. */
chorus_result_t stream_enqueue(chorus_stream_t stream, chorus_comm_t comm, const comm_call_t *c, const char *name);

#endif
