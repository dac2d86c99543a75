#!/usr/bin/env bash
# chorusrun as its users see it: the ranks' environment, exit statuses, the messages that name a failing
# rank, the grace period, signals, and that no rank outlives a run. The ranks are `sh -c` snippets; the
# ones meant to be stopped `exec sleep`, so that the rank itself is what gets stopped, not a child of it.
#
# usage: test_chorusrun.sh PATH_TO_CHORUSRUN

# The snippets are single-quoted on purpose: the ranks expand them, with their own environment.
# shellcheck disable=SC2016

CHORUSRUN=${1:?usage: test_chorusrun.sh PATH_TO_CHORUSRUN}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/lib/checks.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/checks.sh"

# Run chorusrun with stdout and stderr in $TMP/out and $TMP/err; sets $rc and $elapsed_ms.
run() { timed "$CHORUSRUN" "$@"; }

err_count() { grep -c -- "$1" "$TMP/err"; }

# Each rank records its pid, so a test can tell afterwards whether it is gone; exec keeps the pid.
RECORD='echo $$ >"$DIR/pid.$CHORUS_RANK";'

begin() {
    current=$1
    rm -f "$TMP"/pid.* "$TMP"/rank.*
}

begin "all ranks succeed"
export DIR=$TMP CHORUSRUN_TEST_INHERITED=yes CHORUS_RANK=99 CHORUS_UNIQUE_ID=stale
run -n 4 sh -c 'printf "%s %s %s %s %s\n" "$CHORUS_RANK" "$CHORUS_NRANKS" "$CHORUS_LOCAL_RANK" \
    "$CHORUSRUN_TEST_INHERITED" "$CHORUS_UNIQUE_ID" >"$DIR/rank.$CHORUS_RANK"'
unset CHORUS_RANK CHORUS_UNIQUE_ID
check "exit status 0 (got $rc)" test "$rc" -eq 0
check "nothing on stderr" test ! -s "$TMP/err"
for r in 0 1 2 3; do
    read -r rank nranks local inherited id <"$TMP/rank.$r"
    check "rank $r: CHORUS_RANK=$rank" test "$rank" = "$r"
    check "rank $r: CHORUS_NRANKS=$nranks" test "$nranks" = 4
    check "rank $r: CHORUS_LOCAL_RANK=$local" test "$local" = "$r"
    check "rank $r: inherited environment" test "$inherited" = yes
    check "rank $r: CHORUS_UNIQUE_ID is 256 hex digits" grep -Eqx '[0-9a-f]{256}' <<<"$id"
done
check "every rank has the same unique id" test "$(cut -d' ' -f5 "$TMP"/rank.* | sort -u | wc -l)" -eq 1

begin "one rank"
run -n 1 true
check "exit status 0 (got $rc)" test "$rc" -eq 0

begin "arguments after PROGRAM are the program's"
run -n 1 -- sh -c 'printf "%s|" "$@" >"$DIR/rank.args"' sh -n 7 --grace x -- "a b"
check "exit status 0 (got $rc)" test "$rc" -eq 0
check "arguments passed unchanged" test "$(cat "$TMP/rank.args")" = "-n|7|--grace|x|--|a b|"

begin "one rank exits 3"
run -n 3 --grace 0.5 sh -c "$RECORD"'[ "$CHORUS_RANK" = 1 ] && exit 3; exec sleep 30'
check "exit status 3 (got $rc)" test "$rc" -eq 3
check "names rank 1 and its status" err_has "chorusrun: rank 1 (pid $(cat "$TMP/pid.1")) exited with status 3"
check "stops the sleeping ranks in grace + 2 s (took $elapsed_ms ms)" test "$elapsed_ms" -lt 2500
check "no rank left" ranks_gone

begin "grace lets the other ranks fail on their own"
run -n 2 --grace 5 sh -c '[ "$CHORUS_RANK" = 1 ] && exit 3; sleep 0.3; echo "rank 0 saw it" >&2; exit 1'
check "exit status of the first failure, 3 (got $rc)" test "$rc" -eq 3
check "only the first failure is reported" test "$(err_count '^chorusrun: rank')" -eq 1
check "rank 0 printed its own error" err_has "rank 0 saw it"
check "no SIGTERM needed" test "$(err_count SIGTERM)" -eq 0
check "ends when the ranks do, not after the grace (took $elapsed_ms ms)" test "$elapsed_ms" -lt 3000

begin "one rank kills itself with SIGKILL (default grace)"
run -n 3 sh -c "$RECORD"'[ "$CHORUS_RANK" = 2 ] && kill -KILL $$; exec sleep 30'
check "exit status 137 (got $rc)" test "$rc" -eq 137
check "names rank 2 and the signal" err_has "chorusrun: rank 2 (pid $(cat "$TMP/pid.2")) was killed by signal 9 (Killed)"
check "waits the 3 s grace (took $elapsed_ms ms)" test "$elapsed_ms" -ge 2900
check "stops the sleeping ranks in grace + 2 s (took $elapsed_ms ms)" test "$elapsed_ms" -lt 5000
check "no rank left" ranks_gone

begin "a rank that ignores SIGTERM gets SIGKILL"
run -n 2 --grace 0.2 sh -c "$RECORD"'[ "$CHORUS_RANK" = 0 ] && exit 1; trap "" TERM; exec sleep 30'
check "exit status 1 (got $rc)" test "$rc" -eq 1
check "says it sent SIGKILL" err_has "SIGKILL"
check "done in grace + 1 s + slack (took $elapsed_ms ms)" test "$elapsed_ms" -lt 3000
check "no rank left" ranks_gone

begin "SIGTERM to chorusrun"
"$CHORUSRUN" -n 3 --grace 1 sh -c "$RECORD"'exec sleep 30' 2>"$TMP/err" &
pid=$!
check "ranks started" wait_pid_files 3 50
start=$(now_ms)
kill -TERM "$pid"
wait "$pid"
rc=$?
elapsed_ms=$(($(now_ms) - start))
check "exit status 143 (got $rc)" test "$rc" -eq 143
check "stopped in time (took $elapsed_ms ms)" test "$elapsed_ms" -lt 3000
check "no rank left" ranks_gone

begin "SIGKILL to chorusrun"
"$CHORUSRUN" -n 3 sh -c "$RECORD"'exec sleep 30' 2>"$TMP/err" &
pid=$!
check "ranks started" wait_pid_files 3 50
# bash reports a job killed by a signal on its own stderr; that is the point here, not news.
{
    kill -KILL "$pid"
    wait "$pid"
} 2>/dev/null
for ((i = 0; i < 20; i++)); do
    ranks_gone && break
    sleep 0.1
done
check "the ranks die with chorusrun" ranks_gone

begin "missing program"
run -n 3 chorusrun-test-no-such-program
check "exit status 127 (got $rc)" test "$rc" -eq 127
check "says which program and why" \
    err_has "chorusrun: cannot run 'chorusrun-test-no-such-program': No such file or directory"
check "says it once" test "$(err_count 'cannot run')" -eq 1

begin "bad usage"
for args in "" "sh -c true" "-n 0 true" "-n -2 true" "-n x true" "-n 3" "-n 2 --grace -1 true" \
    "-n 2 --grace x true" "--no-such-option -n 1 true" "-n"; do
    run $args
    check "'chorusrun $args' exits 2 (got $rc)" test "$rc" -eq 2
    check "'chorusrun $args' prints the usage" err_has "^usage: chorusrun -n N"
done
run --help
check "--help exits 0" test "$rc" -eq 0
check "--help prints the usage" grep -q "^usage: chorusrun -n N" "$TMP/out"
run --version
check "--version exits 0" test "$rc" -eq 0
check "--version prints a version" grep -Eq '^chorusrun .*[0-9]+\.[0-9]+\.[0-9]+$' "$TMP/out"

report
