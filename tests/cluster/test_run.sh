#!/usr/bin/env bash
# run.sh as its users see it: the ranks' environment and placement, per-rank logs, the report that names a
# failing rank, the timeout, signals, and that neither a rank nor a host outlives a run. The ranks are
# `sh -c` snippets; the ones meant to be stopped `exec sleep`, so that the rank itself is what gets stopped.
# Exits 77 (skipped) where namespaces cannot be made.
#
# usage: test_run.sh PATH_TO_CLUSTER_UID

# The snippets are single-quoted on purpose: the ranks expand them, with their own environment.
# shellcheck disable=SC2016

UID_HELPER=${1:?usage: test_run.sh PATH_TO_CLUSTER_UID}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$HERE/cluster.sh
TMP=$(mktemp -d)
export DIR=$TMP CHORUS_CLUSTER_NAME=run-test-$$ CHORUS_CLUSTER_STATE=$TMP/state
# shellcheck source=tests/lib/checks.sh
. "$HERE/../lib/checks.sh"

teardown() {
    "$CLUSTER" down
    rm -rf "$TMP"
}
trap teardown EXIT



# run.sh with stdout and stderr in $TMP/out and $TMP/err; sets $rc and $elapsed_ms.
run() { timed bash "$HERE/run.sh" --uid-helper "$UID_HELPER" "$@"; }

# Each rank records its pid, so a test can tell afterwards whether it is gone; exec keeps the pid.
RECORD='echo $$ >"$DIR/pid.$CHORUS_RANK";'

begin() {
    current=$1
    rm -rf "$TMP"/pid.* "$TMP"/rank.* "$TMP/logs"
}

hosts_up 3 --ttl 180

begin "environment and placement"
export CHORUS_RANK=99 CHORUS_UNIQUE_ID=stale CHORUS_SOCKET_IFNAME=eth0
run 3 2 -- sh -c 'printf "%s %s %s %s %s %s\n" "$CHORUS_RANK" "$CHORUS_NRANKS" "$CHORUS_LOCAL_RANK" \
    "$(hostname)" "$CHORUS_SOCKET_IFNAME" "$(env | grep -c ^CHORUS_CLUSTER_)" >"$DIR/rank.$CHORUS_RANK"
    echo "$CHORUS_UNIQUE_ID" >"$DIR/rank.$CHORUS_RANK.id"'
unset CHORUS_RANK CHORUS_UNIQUE_ID CHORUS_SOCKET_IFNAME
check "exit status 0 (got $rc)" test "$rc" -eq 0
check "nothing on stderr" test ! -s "$TMP/err"
for r in 0 1 2 3 4 5; do
    check "rank $r: rank, size, local rank, host, interface, no cluster variables" \
        test "$(cat "$TMP/rank.$r" 2>/dev/null)" = "$r 6 $((r % 2)) chorus-host-$((r / 2)) chorus0 0"
done
check "one unique id for all, fresh, in text form" \
    test "$(sort -u "$TMP"/rank.*.id | grep -cE '^[0-9a-f]{256}$')" = 1 -a "$(sort -u "$TMP"/rank.*.id | wc -l)" = 1

begin "round-robin placement, processors pinned per host"
run --round-robin --pin 3 2 -- sh -c 'printf "%s %s %s\n" "$CHORUS_LOCAL_RANK" "$(hostname)" \
    "$(taskset -cp $$ | sed "s/.*: //")" >"$DIR/rank.$CHORUS_RANK"'
check "exit status 0 (got $rc)" test "$rc" -eq 0
ncpu=$(nproc)
share=$((ncpu / 3 > 0 ? ncpu / 3 : 1))
for r in 0 1 2 3 4 5; do
    h=$((r % 3))
    cpus=$(for ((c = 0; c < share; c++)); do echo $(((h * share + c) % ncpu)); done | sort -n | paste -sd,)
    got=$(cat "$TMP/rank.$r" 2>/dev/null)
    got_cpus=$(echo "${got##* }" | tr ',' '\n' | while IFS=- read -r lo hi; do seq "$lo" "${hi:-$lo}"; done |
        sort -n | paste -sd,)
    check "rank $r: local rank $((r / 3)) on chorus-host-$h, processors $cpus (got: $got)" \
        test "${got% *} $got_cpus" = "$((r / 3)) chorus-host-$h $cpus"
done

begin "log directory"
run --log-dir "$TMP/logs" 2 1 -- sh -c 'echo "out $CHORUS_RANK"; echo "err $CHORUS_RANK" >&2'
check "exit status 0 (got $rc)" test "$rc" -eq 0
for r in 0 1; do
    check "rank $r's stdout in rank.$r.out" test "$(cat "$TMP/logs/rank.$r.out")" = "out $r"
    check "rank $r's stderr in rank.$r.err" test "$(cat "$TMP/logs/rank.$r.err")" = "err $r"
done
check "nothing on run.sh's own stdout" test ! -s "$TMP/out"
check "the id helper's stderr has a file" test -e "$TMP/logs/uid.err"

begin "a failing rank"
run --grace 0.5 --log-dir "$TMP/logs" 3 2 -- sh -c "$RECORD"'
    if [ "$CHORUS_RANK" = 3 ]; then echo "rank three gives up" >&2; exit 3; fi
    exec sleep 30'
check "exit status 1 (got $rc)" test "$rc" -eq 1
check "names the failing rank and its host" err_has "rank 3 (host 1) exited with status 3"
check "shows the end of its stderr" err_has "rank 3: rank three gives up"
check "counts the failures" err_has "1 of 6 ranks failed: 3"
check "does not blame the ranks it stopped" test "$(grep -c 'exited\|killed' "$TMP/err")" = 1
check "stops the others within seconds (${elapsed_ms} ms)" test "$elapsed_ms" -lt 10000
check "no rank left running" ranks_gone

begin "a rank killed by a signal"
run --grace 0.5 2 1 -- sh -c 'if [ "$CHORUS_RANK" = 1 ]; then kill -9 $$; fi; exec sleep 30'
check "exit status 1 (got $rc)" test "$rc" -eq 1
check "names the signal" err_has "rank 1 (host 1) was killed by signal KILL"

begin "a rank that exits 77 is a failure, not a skip"
run 1 1 -- sh -c 'exit 77'
check "exit status 1 (got $rc)" test "$rc" -eq 1

begin "a program that cannot be run"
run 1 2 -- "$TMP/no-such-program"
check "exit status 1 (got $rc)" test "$rc" -eq 1
check "names the status" err_has "exited with status 127"

begin "timeout"
run --timeout 2 2 2 -- sh -c "$RECORD"' exec sleep 30'
check "exit status 124 (got $rc)" test "$rc" -eq 124
check "says so, with the ranks still running" err_has "timed out after 2s; ranks still running: "
check "ends soon after the timeout (${elapsed_ms} ms)" test "$elapsed_ms" -lt 8000
check "no rank left running" ranks_gone

begin "SIGTERM to run.sh"
bash "$HERE/run.sh" --uid-helper "$UID_HELPER" 3 1 -- sh -c "$RECORD"' exec sleep 30' 2>"$TMP/err" &
launcher=$!
check "ranks started" wait_pid_files 3 100
kill -TERM "$launcher"
wait "$launcher"
rc=$?
check "exit status 130 (got $rc)" test "$rc" -eq 130
check "says it was interrupted" err_has "interrupted"
check "no rank left running" ranks_gone

begin "SIGKILL to run.sh"
bash "$HERE/run.sh" --uid-helper "$UID_HELPER" 2 1 -- sh -c "$RECORD"' exec sleep 30' 2>"$TMP/err" &
launcher=$!
check "ranks started" wait_pid_files 2 100
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null
sleep 0.5
check "every rank dies with run.sh" ranks_gone

begin "usage"
run 0 1 -- true
check "0 hosts: exit status 2 (got $rc)" test "$rc" -eq 2
run 2 2 true
check "no --: exit status 2 (got $rc)" test "$rc" -eq 2
run 4 1 -- true
check "more hosts than the instance has: exit status 2 (got $rc)" test "$rc" -eq 2
check "says so" err_has "has 3 hosts, not the 4"

# Without an instance that is up, run.sh brings up hosts of its own and takes them down after.
begin "hosts of its own"
(
    unset CHORUS_CLUSTER_NAME CHORUS_CLUSTER_STATE
    export TMPDIR=$TMP
    bash "$HERE/run.sh" --uid-helper "$UID_HELPER" 2 1 -- sh -c 'hostname >"$DIR/rank.$CHORUS_RANK"' 2>"$TMP/err" &
    launcher=$!
    wait "$launcher"
    echo "$? $launcher" >"$TMP/own"
)
read -r rc launcher <"$TMP/own"
check "exit status 0 (got $rc)" test "$rc" -eq 0
check "the ranks ran on the hosts" test "$(cat "$TMP/rank.0" "$TMP/rank.1" | tr '\n' ' ')" = "chorus-host-0 chorus-host-1 "
check "the hosts are gone" test ! -e "$TMP/chorus-cluster-run-$launcher"
check "the instance that was up is untouched" quiet "$CLUSTER" hosts

report
