#!/usr/bin/env bash
# Which transport each pair of ranks uses across emulated hosts: ranks of one host must talk over shared
# memory, ranks of different hosts over TCP. 3 hosts x 2 ranks; every rank logs its choice per peer at
# INFO ("rank N (...) via shm|tcp"), and every one of the 30 (rank, peer) lines is checked. The cost model
# measures both levels at init: rank 0's link to another host (rank 2) and to its own host's other rank.
# usage: test_transports.sh RUN_SH UID_HELPER QUICKSTART
set -u
run=$1 uid=$2 prog=$3
hosts=3 per=2 n=6
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=INIT,TUNING bash "$run" --uid-helper "$uid" --timeout 90 --log-dir "$logs" \
    "$hosts" "$per" -- "$prog" > /dev/null
rc=$?
[ $rc = 77 ] && exit 77
pass=0 fail=0
[ $rc = 0 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "the run failed ($rc)"; }
for ((r = 0; r < n; r++)); do
    for ((p = 0; p < n; p++)); do
        [ $r = $p ] && continue
        want=tcp
        [ $((r / per)) = $((p / per)) ] && want=shm
        if grep -q "INIT rank $p (.*) via $want\( (.*)\)\?\$" "$logs/rank.$r.err"; then pass=$((pass + 1)); else
            fail=$((fail + 1))
            echo "rank $r: expected 'rank $p ... via $want'; it logged: $(grep "INIT rank $p (" "$logs/rank.$r.err")"
        fi
    done
done
want='measured at init (link tcp with rank 2, inside the host shm with rank 1;'
if grep -qF "TUNING cost model, $want" "$logs/rank.0.err"; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "rank 0: expected its parameters $want; it logged: $(grep 'TUNING cost model' "$logs/rank.0.err")"
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
