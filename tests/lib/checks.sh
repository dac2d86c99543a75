# shellcheck shell=bash
# The small harness of the shell tests (sourced): named checks counted and reported, the output of the
# command under test in $TMP/out and $TMP/err, and the ranks a test started, each of which records its
# pid in $TMP/pid.RANK. The sourcing script sets TMP.

passed=0
failed=0
current=

# check WHAT COMMAND...: run COMMAND; count it, and name it with the current section where it fails.
check() {
    local what=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL [$current] $what" >&2
    fi
}

# The summary line; the test's status: 0 when nothing failed.
report() {
    echo "$passed checks passed, $failed failed (${SECONDS}s)"
    [ "$failed" -eq 0 ]
}

quiet() { "$@" >/dev/null; }
now_ms() { date +%s%3N; }

# timed COMMAND...: run COMMAND with its stdout and stderr in $TMP/out and $TMP/err; sets $rc and
# $elapsed_ms.
timed() {
    local start
    start=$(now_ms)
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    elapsed_ms=$(($(now_ms) - start))
}

# hosts_up K [OPTIONS]: bring up K emulated hosts with $CLUSTER (tests/cluster/cluster.sh); the test
# exits 77 (skipped) where namespaces cannot be made, and fails where up fails otherwise.
hosts_up() {
    "$CLUSTER" up "$@"
    local status=$?
    [ "$status" = 77 ] && exit 77
    if [ "$status" != 0 ]; then
        echo "FAIL up $* exited with $status" >&2
        exit 1
    fi
}
err_has() { grep -q -- "$1" "$TMP/err"; }

# A process is gone once it has exited, even if its parent has not reaped it yet.
gone() { [ ! -e "/proc/$1" ] || [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" = Z ]; }

# True when none of the pids written to $TMP/pid.* still runs.
ranks_gone() {
    local f
    for f in "$TMP"/pid.*; do
        [ -e "$f" ] || continue
        gone "$(cat "$f")" || return 1
    done
    return 0
}

# Wait up to $2 tenths of a second for $1 files $TMP/pid.*.
wait_pid_files() {
    local i files
    for ((i = 0; i < $2; i++)); do
        files=("$TMP"/pid.*)
        [ -e "${files[0]}" ] && [ "${#files[@]}" -ge "$1" ] && return 0
        sleep 0.1
    done
    return 1
}
