#!/bin/sh
# Run a rank as if on one of HOSTS hosts (default 2), by rank modulo HOSTS, through CHORUS_HOSTID: ranks of
# one such host use shared memory, ranks of different ones TCP over loopback. Under chorusrun:
#   HOSTS=3 chorusrun -n 7 hostsplit.sh PROGRAM ARGS...
CHORUS_HOSTID=h$((CHORUS_RANK % ${HOSTS:-2})) exec "$@"
