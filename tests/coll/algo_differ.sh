#!/usr/bin/env bash
# Ranks forced to different algorithms for one call (CHORUS_ALGO set differently per rank, a user error):
# both fail with CHORUS_ERR_MISMATCH naming the message sizes that differ, not fingerprint fields that
# are the same on both ranks. Usage: algo_differ.sh CHORUSRUN CHORUS_PERF
#
# Each rank finds the mismatch in the header of the message it receives. A rank often finds it while
# blocked in poll() (progress_block), not in its step: the step must still get to describe it from the
# receive that found it, or the rank reports only a failed connection. Under load that happened in a
# third of the runs.
set -u
chorusrun=$1 perf=$2
# The mismatch writes each rank's flight recorder (docs/recorder.md): into a directory of the test's own.
dumps=$(mktemp -d)
trap 'rm -rf "$dumps"' EXIT
out=$(CHORUS_DUMP_DIR=$dumps CHORUS_SOCKET_IFNAME=lo CHORUS_TRANSPORT=tcp CHORUS_TIMEOUT=20s timeout 60 "$chorusrun" -n 2 \
      sh -c 'if [ "$CHORUS_RANK" = 1 ]; then export CHORUS_ALGO=allreduce:mesh; else export CHORUS_ALGO=allreduce:ring; fi
             exec "$0" "$@"' "$perf" allreduce -b 4M -e 4M -n 1 -w 0 2>&1)
rc=$?
echo "$out" | grep 'chorus-perf:'
[ $rc != 0 ] || { echo "FAIL: the run succeeded"; exit 1; }
if echo "$out" | grep -q 'count: here'; then echo "FAIL: a rank names a fingerprint field the ranks share"; exit 1; fi
n=$(echo "$out" | grep -c 'chorus-perf: allreduce failed: CHORUS_ERR_MISMATCH: .*sent a message of [0-9]* bytes')
[ "$n" = 2 ] || { echo "FAIL: $n of 2 ranks name the message sizes"; exit 1; }
n=$(grep -l 'reason=mismatch' "$dumps"/chorus-dump.* 2>/dev/null | wc -l)
[ "$n" = 2 ] || { echo "FAIL: $n of 2 ranks wrote a flight-recorder dump naming the mismatch"; exit 1; }
