#!/usr/bin/env bash
# bench/compare-hosts as its users run it, on emulated hosts: the tables it prints (a row per size, with
# Chorus's time), both placements, Open MPI named as absent when not asked for, and bad usage. Exits 77
# (skipped) where namespaces cannot be made.
#
# usage: test_compare_hosts.sh BUILD_DIR

BUILD=${1:?usage: test_compare_hosts.sh BUILD_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
COMPARE=$HERE/../../bench/compare-hosts
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/lib/checks.sh
. "$HERE/../lib/checks.sh"

# compare-hosts with stdout and stderr in $TMP/out and $TMP/err; sets $rc.
compare() {
    "$COMPARE" -B "$BUILD" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
}

# The table of $1 has a row for each size in $2..., each with a positive time for Chorus.
table_has() {
    local coll=$1 size
    shift
    for size in "$@"; do
        awk -v c="## $coll:" -v s="$size" '
            index($0, c) == 1 { inside = 1; next }
            /^## / { inside = 0 }
            inside && $1 == s && $2 + 0 > 0 { found = 1 }
            END { exit !found }' "$TMP/out" || return 1
    done
}

current="host by host"
compare -c allgather,alltoall -H 2 -L 2 --rate none -r 1 -b 4K -e 64K -p none
if [ "$rc" = 77 ]; then exit 77; fi
check "exit status 0 (got $rc)" test "$rc" -eq 0
check "says the placement" grep -q "2 emulated hosts x 2 ranks, host by host" "$TMP/out"
check "names Open MPI as absent" grep -q "Open MPI  absent" "$TMP/out"
check "an AllGather row per size" table_has allgather 4096 16384 65536
check "an AllToAll row per size" table_has alltoall 4096 16384 65536

current="in turn, across the iteration segments"
compare -c reduce_scatter -H 2 -L 2 --rate 1gbit --round-robin -r 1 -b 64K -e 4M -p none
check "exit status 0 (got $rc)" test "$rc" -eq 0
check "says the placement" grep -q "dealt to the hosts in turn, links: 1gbit" "$TMP/out"
check "a row per size" table_has reduce_scatter 65536 262144 1048576 4194304

current="bad usage"
compare -H 1
check "one host: status 2 (got $rc)" test "$rc" -eq 2
check "says so" err_has "-H wants 2 hosts or more"
compare -p mpich
check "an unknown peer: status 2 (got $rc)" test "$rc" -eq 2
check "says so" err_has "-p: openmpi or none, not 'mpich'"
compare -b 1M -e 4K
check "-b above -e: status 2 (got $rc)" test "$rc" -eq 2

report
