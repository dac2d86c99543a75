#!/bin/sh
# chorusrun's agent for the emulated hosts (chorusrun --agent "sh tests/cluster/agent.sh"): runs COMMAND,
# a line for a POSIX shell, on HOST, as ssh would; host chorus-host-I is the instance's host I.
#   agent.sh HOST COMMAND
host=$1
shift
exec bash "$(dirname "$0")/cluster.sh" exec "${host##*-}" -- sh -c "$*"
