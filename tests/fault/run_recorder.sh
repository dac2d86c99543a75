#!/usr/bin/env bash
# Drives test_recorder under chorusrun, checks every rank's verdict, then what chorus-trace makes of the
# dumps. usage: run_recorder.sh CHORUSRUN TEST_RECORDER CHORUS_TRACE skip|diverge|api
set -u
chorusrun=$1 prog=$2 trace=$3 mode=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The ring fixes who talks to whom, so that rank 2's stray receive (skip) meets no collective traffic.
export CHORUS_SOCKET_IFNAME=lo CHORUS_ALGO=allreduce:ring CHORUS_TIMEOUT=2s CHORUS_DUMP_DIR=$dir
case $mode in
skip) n=4 dumps=$dir args=(skip "$dir") ;;
diverge) n=4 dumps=$dir/api args=(diverge "$dir/api" 2); mkdir "$dir/api" ;;
api) n=3 dumps=$dir args=(api "$dir"); export CHORUS_RECORDER_SIZE=5 CHORUS_DUMP_ON_SIGNAL=1 ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
timeout 30 "$chorusrun" -n "$n" --grace 5 "$prog" "${args[@]}" > "$dir/out" 2>&1
ok=1
for ((r = 0; r < n; r++)); do grep -q "^rank $r: ok" "$dir/out" || ok=0; done
timeout 10 "$trace" "$dumps" > "$dir/trace" 2>&1 || ok=0
expect() { grep -qF -- "$1" "$dir/trace" || { echo "chorus-trace did not say: $1"; ok=0; }; }
expect "dumps from $n"
if [ "$mode" = diverge ]; then # every rank failed, so every rank also dumped by itself
    timeout 10 "$trace" "$dir" >> "$dir/trace" 2>&1 || ok=0
    [ "$(grep -c "dumps from $n\$" "$dir/trace")" = 2 ] || { echo "a rank did not dump on its failure"; ok=0; }
    [ "$(grep -c "divergence: collective #2: count" "$dir/trace")" = 2 ] || { echo "divergence missed"; ok=0; }
fi
case $mode in
skip)
    expect "behind: rank 2: entered 4 collective(s); ranks 0, 1, 3 entered collective #4 (allreduce)"
    expect "rank 2 is now in recv #0 with rank 3 failed CHORUS_ERR_TIMEOUT"
    expect "waiting: rank 2 waits on rank 3 (recv #0 step 1, CHORUS_ERR_TIMEOUT)"
    expect "waiting: rank 3 waits on rank 2 (allreduce #4 step 1, CHORUS_ERR_TIMEOUT)"
    expect "divergence: none" ;;
diverge)
    expect "divergence: collective #2: count differs: ranks 0, 2, 3 count=8; rank 1 count=12;" ;;
api)
    expect "behind: none: every rank entered 6 and completed 6 collective(s)"
    expect "divergence: none" ;;
esac
if [ $ok = 1 ]; then echo "recorder $mode: ok"; exit 0; fi
echo "--- ranks:"; grep -v " CHORUS " "$dir/out"
echo "--- chorus-trace:"; cat "$dir/trace"
exit 1
