#!/bin/sh
# chorusrun's agent for the emulated hosts (chorusrun --agent "sh tests/cluster/agent.sh"): runs COMMAND,
# a line for a POSIX shell, on HOST, as ssh would; host chorus-host-I is the instance's host I. With
# --pin, on processor I (modulo this machine's count) alone, as run.sh --pin gives each of 2 hosts on 2
# processors its own. Open MPI's mpirun takes it too (--mca plm_rsh_agent).
#   agent.sh [--pin] HOST COMMAND
pin=
if [ "$1" = --pin ]; then
    pin=yes
    shift
fi
host=$1
shift
i=${host##*-}
if [ -n "$pin" ]; then
    exec bash "$(dirname "$0")/cluster.sh" exec "$i" -- taskset -c $((i % $(nproc))) sh -c "$*"
fi
exec bash "$(dirname "$0")/cluster.sh" exec "$i" -- sh -c "$*"
