/* For tools (chorus-perf's header): a one-line description of a communicator's layout. */
#ifndef CHORUS_COMM_INFO_H
#define CHORUS_COMM_INFO_H

#include <stddef.h>

#include "chorus/chorus.h"

/* Writes e.g. "hosts 2, transport tcp" into buf. */
void comm_describe(chorus_comm_t comm, char *buf, size_t len);

#endif
