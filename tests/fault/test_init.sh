#!/usr/bin/env bash
# Init failures: every rank that did start must fail within the connect timeout, naming what is missing.
#   never   rank 2 of 4 never starts: the others fail with CHORUS_ERR_TIMEOUT naming rank 2.
#   root    the process holding the rendezvous root dies while 3 of 4 ranks wait for the 4th: those 3 fail
#           (they must not wait past the connect timeout).
# usage: test_init.sh CHORUSRUN QUICKSTART UID_HELPER
set -u
chorusrun=$1 prog=$2 uid=$3
export CHORUS_SOCKET_IFNAME=lo CHORUS_CONNECT_TIMEOUT=3s
pass=0 fail=0
check() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $2"; fi; }

out=$(timeout 30 "$chorusrun" -n 4 sh -c 'if [ "$CHORUS_RANK" = 2 ]; then exit 0; fi; exec "$0"' "$prog" 2>&1)
for r in 0 1 3; do
    check 'grep -q "rank $r: rank 2 of 4 never reached the root" <<< "$out"' "never: rank $r does not name rank 2: $out"
done

# The root lives in a helper process; kill it while three ranks wait for a fourth that never comes.
coproc HOLDER { "$uid" 60 2> /dev/null; } # its stdin, the coprocess pipe, stays open: it keeps serving
holder=$HOLDER_PID # bash unsets HOLDER_PID as soon as it reaps the coprocess
read -r id <&"${HOLDER[0]}"
pids=()
start=$(date +%s)
for r in 0 1 3; do
    CHORUS_RANK=$r CHORUS_NRANKS=4 CHORUS_UNIQUE_ID=$id timeout 30 "$prog" > /dev/null 2> "${TMPDIR:-/tmp}/init.$$.$r" &
    pids+=($!)
done
sleep 1
kill -9 "$holder"
wait "$holder" 2> /dev/null
for i in 0 1 2; do
    wait "${pids[$i]}"
    rc=$?
    check '[ $rc -ne 0 ] && [ $rc -ne 124 ]' "root: rank of pid ${pids[$i]} ended with $rc (0: it succeeded; 124: it hung)"
done
elapsed=$(($(date +%s) - start))
check '[ $elapsed -le 8 ]' "root: the ranks took ${elapsed} s to fail (connect timeout 3 s)"
for r in 0 1 3; do
    check 'grep -q "root\|rank 2" "${TMPDIR:-/tmp}/init.$$.$r"' "root: rank $r's error says nothing of the root: $(cat "${TMPDIR:-/tmp}/init.$$.$r")"
    rm -f "${TMPDIR:-/tmp}/init.$$.$r"
done
echo "$pass passed, $fail failed"
[ $fail = 0 ]
