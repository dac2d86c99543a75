#!/usr/bin/env bash
# Single-copy reads need every rank to see every other's process: with rank 1 in a pid namespace of its
# own, the init check must find that out (rank 1 cannot see its peers' pids, and its own pid means
# another process to them), turn the cma algorithms off on every rank with an INFO line naming why, and
# the forced cma algorithms must fall back and still give right results.
# usage: cma_fallback.sh CHORUSRUN TEST_COLL
set -u
chorusrun=$1 prog=$2
if ! unshare --pid --fork true 2> /dev/null; then
    echo "cannot make a pid namespace here: skipped"
    exit 77
fi
out=$(CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=SHM CHORUS_ALGO="allreduce:cma;allgather:cma;reduce_scatter:cma;reduce:cma;broadcast:cma;alltoall:cma" \
    timeout 120 "$chorusrun" -n 3 sh -c 'if [ "$CHORUS_RANK" = 1 ]; then exec unshare --pid --fork "$@"; fi; exec "$@"' \
    sh "$prog" -q 1009 2>&1)
rc=$?
fail=0
[ $rc = 0 ] || { echo "FAILED: test_coll exited with $rc"; fail=1; }
grep -q "no single-copy reads between ranks" <<< "$out" || { echo "FAILED: no INFO line about single copy"; fail=1; }
grep -q "host arena: 3 ranks" <<< "$out" || { echo "FAILED: the arena itself should still work"; fail=1; }
[ $fail = 0 ] || echo "$out" | tail -20
[ $fail = 0 ] && echo "cma fallback: ok"
exit $fail
