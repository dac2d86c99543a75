#!/usr/bin/env bash
# chorusrun across hosts (-H, --agent) as its users see it, between emulated hosts: chorusrun runs on host
# 0 and starts every rank through agent.sh. Placement and environment (CHORUS_* variables passed on,
# arguments and the directory kept), the unique id kept off every command line, collectives across the
# hosts, a failing rank named with its host and the others stopped, nothing left behind when chorusrun is
# killed, and bad usage. Exits 77 (skipped) where namespaces cannot be made.
#
# usage: test_launch.sh CHORUSRUN QUICKSTART

# The snippets are single-quoted on purpose: the ranks expand them, with their own environment.
# shellcheck disable=SC2016

CHORUSRUN=${1:?usage: test_launch.sh CHORUSRUN QUICKSTART}
QUICKSTART=${2:?usage: test_launch.sh CHORUSRUN QUICKSTART}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$HERE/cluster.sh
TMP=$(mktemp -d)
export CHORUS_CLUSTER_NAME=launch-test-$$ CHORUS_CLUSTER_STATE=$TMP/state
# shellcheck source=tests/lib/checks.sh
. "$HERE/../lib/checks.sh"

teardown() {
    "$CLUSTER" down
    rm -rf "$TMP"
}
trap teardown EXIT


# The agent, told which instance to use (a host's environment holds no CHORUS_CLUSTER_ variables).
AGENT="env CHORUS_CLUSTER_NAME=$CHORUS_CLUSTER_NAME CHORUS_CLUSTER_STATE=$CHORUS_CLUSTER_STATE sh $HERE/agent.sh"

# chorusrun on host 0 with the agent, output in $TMP/out and $TMP/err; sets $rc and $elapsed_ms.
launch() {
    timed "$CLUSTER" exec 0 -- env CHORUS_SOCKET_IFNAME="$("$CLUSTER" ifname)" DIR="$TMP" \
        "$CHORUSRUN" --agent "$AGENT" "$@"
}

hosts_up 2 --ttl 180

current="placement and environment"
cd "$TMP" || exit 1
CHORUS_TEST_PASSED="it's \"quoted\" \$HOME" launch -H chorus-host-0:2,chorus-host-1:2 -- sh -c '
    printf "%s %s %s %s %s|%s|%s\n" "$CHORUS_RANK" "$CHORUS_NRANKS" "$CHORUS_LOCAL_RANK" "$(hostname)" "$PWD" \
        "$CHORUS_TEST_PASSED" "$*" >"$DIR/rank.$CHORUS_RANK"
    # Every command line of the rank'"'"'s ancestors on its host, which other users there could read.
    p=$$; lines=; while [ "$p" -gt 1 ]; do lines="$lines $(tr "\0" " " </proc/$p/cmdline)"; p=$(cut -d" " -f4 /proc/$p/stat); done
    case "$lines" in *"$CHORUS_UNIQUE_ID"*) echo leaked ;; *) echo kept ;; esac >"$DIR/id.$CHORUS_RANK"' \
    argv0 "two words" "it's"
check "exit status 0 (got $rc; $(cat "$TMP/err"))" test "$rc" -eq 0
for r in 0 1 2 3; do
    check "rank $r: rank, size, local rank, host, directory, a CHORUS_ variable, arguments ($(cat "$TMP/rank.$r" 2>&1))" \
        test "$(cat "$TMP/rank.$r" 2>/dev/null)" = \
        "$r 4 $((r % 2)) chorus-host-$((r / 2)) $TMP|it's \"quoted\" \$HOME|two words it's"
    check "rank $r: the unique id on no command line" test "$(cat "$TMP/id.$r" 2>/dev/null)" = kept
done

current="collectives across the hosts"
launch -H chorus-host-0:2,chorus-host-1:2 -- "$QUICKSTART"
check "exit status 0 (got $rc; $(tail -3 "$TMP/err"))" test "$rc" -eq 0
check "every rank's AllReduce correct" test "$(grep -c 'correct' "$TMP/out")" = 4

current="fewer ranks than slots"
launch -n 3 -H chorus-host-0:2,chorus-host-1:2 -- sh -c 'echo "$CHORUS_RANK $CHORUS_NRANKS $(hostname)"'
check "exit status 0 (got $rc)" test "$rc" -eq 0
check "ranks 0 and 1 on host 0, rank 2 on host 1" \
    test "$(sort "$TMP/out" | tr '\n' ,)" = "0 3 chorus-host-0,1 3 chorus-host-0,2 3 chorus-host-1,"

current="a host named more than once"
launch -H chorus-host-0,chorus-host-1,chorus-host-0,chorus-host-1:2 -- sh -c 'echo "$CHORUS_RANK $CHORUS_LOCAL_RANK $(hostname)"'
check "exit status 0 (got $rc)" test "$rc" -eq 0
check "ranks dealt in turn, local ranks counted per host ($(sort "$TMP/out" | tr '\n' ,))" \
    test "$(sort "$TMP/out" | tr '\n' ,)" = "0 0 chorus-host-0,1 0 chorus-host-1,2 1 chorus-host-0,3 1 chorus-host-1,4 2 chorus-host-1,"

current="a failing rank"
rm -f "$TMP"/pid.*
launch --grace 0.5 -H chorus-host-0:2,chorus-host-1:2 -- sh -c 'echo $$ >"$DIR/pid.$CHORUS_RANK"
    if [ "$CHORUS_RANK" = 3 ]; then echo "rank three gives up" >&2; exit 3; fi
    exec sleep 30'
check "exit status 3 (got $rc)" test "$rc" -eq 3
check "names the failing rank and its host" err_has "rank 3 (host chorus-host-1, agent pid [0-9]*) exited with status 3"
check "passes on its stderr" err_has "rank three gives up"
check "stops the others within seconds (${elapsed_ms} ms)" test "$elapsed_ms" -lt 10000
sleep 0.5
check "no rank left running on either host" ranks_gone

current="chorusrun killed"
rm -f "$TMP"/pid.*
"$CLUSTER" exec 0 -- env CHORUS_SOCKET_IFNAME="$("$CLUSTER" ifname)" DIR="$TMP" "$CHORUSRUN" --agent "$AGENT" \
    -H chorus-host-0,chorus-host-1 -- sh -c 'echo $$ >"$DIR/pid.$CHORUS_RANK"; exec sleep 30' >/dev/null 2>&1 &
disown # its death by SIGKILL is the point, not news
for _ in $(seq 50); do [ -e "$TMP/pid.1" ] && [ -e "$TMP/pid.0" ] && break; sleep 0.1; done
pkill -KILL -f "$CHORUSRUN --agent $AGENT"
gone=no
for _ in $(seq 50); do ranks_gone && gone=yes && break; sleep 0.1; done
check "both ranks had started" test -e "$TMP/pid.1"
check "no rank outlives chorusrun's SIGKILL" test "$gone" = yes

current="bad usage"
launch -n 5 -H chorus-host-0:2,chorus-host-1:2 -- true
check "more ranks than slots: status 2 (got $rc)" test "$rc" -eq 2
check "says so" err_has "-n 5 is more ranks than the 4 slots -H gives"
launch -H chorus-host-0:0 -- true
check "zero slots: status 2 (got $rc)" test "$rc" -eq 2
check "says so" err_has "SLOTS a number of at least 1, not 'chorus-host-0:0'"
"$CLUSTER" exec 0 -- "$CHORUSRUN" --agent "$TMP/no-such-agent" -H chorus-host-1 -- true >"$TMP/out" 2>"$TMP/err"
rc=$?
check "an agent that cannot run: status 127 (got $rc)" test "$rc" -eq 127
check "names it" err_has "cannot run the agent '$TMP/no-such-agent' for rank 0 on chorus-host-1"

report
