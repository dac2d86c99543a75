#!/usr/bin/env bash
# The watch over the cost model's choices (CHORUS_TUNE_WATCH, docs/tuning.md "Watching the choices"): with
# ring and rhd allowed (priced alike) and a look at every call, 4 ranks run 1 MiB AllReduces, checked, and
# half a second in all four are moved onto one processor, so whatever runs slows past its best. The model's
# figures are fixed by a tuning file (no calibration at init) that prices the shared-memory links at 50 and
# 25 GB/s, past what 4 ranks on two cores reach, and the arena's synchronisation at 0.3 us (the look's
# price, which a call must pass 32 times to be watched): the first choice runs over its price by more
# than the watch's margin, so the watch tries the other. (With figures measured at init the first move
# hung on the machine's speed in the moment: measured in a slow one, the ring ran under its price even
# pinned, and the watch rightly never moved.) Every rank must take the same decisions at the same calls
# (each logs them at INFO TUNING), results stay right, and the watch must have moved at least once. Over
# TCP with 3 ranks (the look's agreement then goes through the pair connections) the ranks must agree
# likewise. CHORUS_TUNE_WATCH=0 takes no look, and a value past 64 fails init naming the knob. A stretch of
# streamed copies into the arena's slots (CHORUS_SHM_SLOT_STORES=streamed stands in for one: no slow
# stretch comes on demand) starts the 8-rank AllToAll of 512 KiB, where a built-in rule leaves the direct
# and the single-copy one to the model, on single copy on every rank once a look has found it, the direct
# one held off two looks (then the watch may run it again); with plain stores it starts on the model's
# choice; an unknown value fails init.
# Usage: watch.sh CHORUSRUN CHORUS_PERF
set -u
chorusrun=$1 perf=$2
pass=0 fail=0
out=$(mktemp)
figures=$(mktemp)
trap 'rm -f "$out" "$figures"' EXIT
printf 'chorus-tuning 1\nbeta shm cache 50GB/s\nbeta shm memory 25GB/s\nalpha shm 0.36us\nalpha arena 0.3us\n' >"$figures"
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL $1"
    sed -n '1,40p' "$out"
}
# The decisions each rank logged, without its process and rank: one line per decision, in order.
decisions() { grep "CHORUS INFO TUNING .* running it from the next call" "$out" | grep "\[$1\]" | sed 's/^[^]]*] //'; }
# agree LABEL NRANKS: the run checked its results, and every rank took the decisions rank 0 took.
agree() {
    local label=$1 n=$2 r
    if ! grep -q "^# Out of bounds values : 0 OK" "$out"; then
        bad "$label: results not checked"
        return 1
    fi
    for r in $(seq 1 $((n - 1))); do
        if [ "$(decisions 0)" != "$(decisions "$r")" ]; then
            bad "$label: rank $r decided otherwise than rank 0"
            return 1
        fi
    done
    return 0
}
# The processes under PID, PID's children first.
descendants() {
    local c
    for c in $(pgrep -P "$1"); do
        echo "$c"
        descendants "$c"
    done
}

# 1. Shared memory, 4 ranks, slowed half a second in.
CHORUS_TUNING_FILE=$figures CHORUS_TUNE_CALIBRATE=0 \
CHORUS_TUNE_WATCH=1 CHORUS_ALGO=allreduce:ring,rhd CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING CHORUS_TIMEOUT=60s \
    timeout 120 "$chorusrun" -n 4 "$perf" allreduce -b 1M -e 1M -n 2000 -w 0 -c 1 >"$out" 2>&1 &
run=$!
if [ "$(nproc)" -ge 2 ]; then
    sleep 0.5
    for pid in $(descendants $run); do taskset -a -p -c 0 "$pid" >/dev/null 2>&1; done
fi
wait $run
rc=$?
if [ $rc != 0 ]; then bad "shm: exit status $rc"
elif agree shm 4; then
    moves=$(decisions 0 | wc -l)
    if [ "$moves" -ge 1 ]; then ok; else bad "shm: the watch never moved (rank 0 logged no decision)"; fi
fi

# 2. TCP, 3 ranks: the same decisions on every rank.
CHORUS_TUNE_WATCH=1 CHORUS_TRANSPORT=tcp CHORUS_SOCKET_IFNAME=lo CHORUS_ALGO=allreduce:ring,rhd CHORUS_LOG_LEVEL=INFO \
    CHORUS_LOG_SUBSYS=TUNING CHORUS_TIMEOUT=60s \
    timeout 120 "$chorusrun" -n 3 "$perf" allreduce -b 1M -e 1M -n 300 -w 0 -c 1 >"$out" 2>&1
rc=$?
if [ $rc != 0 ]; then bad "tcp: exit status $rc"; elif agree tcp 3; then ok; fi

# 3. Off: no look is taken.
CHORUS_TUNE_WATCH=0 CHORUS_ALGO=allreduce:ring,rhd CHORUS_LOG_LEVEL=DEBUG CHORUS_LOG_SUBSYS=TUNING \
    timeout 60 "$chorusrun" -n 2 "$perf" allreduce -b 1M -e 1M -n 50 -w 0 >"$out" 2>&1
rc=$?
if [ $rc != 0 ]; then bad "off: exit status $rc"
elif grep -q "the fastest rank's lower quartile" "$out"; then bad "off: a look was taken"
else ok; fi

# 4. Out of range: init fails and says which knob.
CHORUS_TUNE_WATCH=65 timeout 60 "$chorusrun" -n 2 "$perf" allreduce -b 1M -e 1M -n 1 -w 0 >"$out" 2>&1
if grep -q "CHORUS_TUNE_WATCH=65: use 0 (off) to 64" "$out"; then ok; else bad "65: no error naming the knob"; fi

# 5. A stretch of streamed slot copies, 8 ranks (more than the cores: where the rule applies).
stretch() {
    grep "CHORUS INFO TUNING .*copies into the arena's slots stream" "$out" | grep "\[$1\]" | sed 's/^[^]]*] //'
}
# Figures for the arena and single copy that make every call watched and the direct one the model's
# choice; no measurement at init, so the first look of 256 KiB finds the stretch, and 512 KiB starts in it.
{
    echo 'chorus-tuning 1'
    echo 'alpha arena 0.1us'
    for r in cache memory; do
        printf 'beta arena %s 1GB/s\nbeta cma %s 0.1GB/s\nbeta cma-read %s 0.1GB/s\n' $r $r $r
    done
} >"$figures"
stretch_run() {
    CHORUS_TUNING_FILE=$figures CHORUS_TUNE_CALIBRATE=0 CHORUS_SHM_SLOT_STORES=$1 CHORUS_LOG_LEVEL=DEBUG \
        CHORUS_LOG_SUBSYS=TUNING,SHM CHORUS_TIMEOUT=60s \
        timeout 180 "$chorusrun" -n 8 "$perf" alltoall -b 256K -e 512K -f 2 -n 40 -w 0 -c 1 >"$out" 2>&1
}
if [ "$(nproc)" -ge 8 ]; then
    echo "skipped: stretch (8 ranks do not outnumber the $(nproc) cores here)"
else
    stretch_run streamed
    rc=$?
    if [ $rc != 0 ]; then bad "stretch: exit status $rc"
    elif grep -q "no single-copy reads" "$out"; then echo "skipped: stretch (no single-copy reads here)"
    elif ! agree stretch 8; then :
    elif [ "$(stretch 0 | grep -c "alltoall of 524288 bytes on 8 ranks: .*: cma, and direct after 2 looks")" != 1 ]
    then
        bad "stretch: rank 0 did not start the AllToAll on single copy"
    else
        same=1
        for r in 1 2 3 4 5 6 7; do [ "$(stretch 0)" = "$(stretch $r)" ] || same=0; done
        if [ $same = 0 ]; then bad "stretch: the ranks did not all start alike"
        elif ! grep "\[0\] CHORUS DEBUG TUNING" "$out" | grep -q "alltoall of 524288 bytes: direct is no longer held"
        then
            bad "stretch: direct was never let run again"
        else ok; fi
    fi
    stretch_run plain
    rc=$?
    if [ $rc != 0 ]; then bad "plain: exit status $rc"
    elif [ -n "$(stretch 0)" ]; then bad "plain: a stretch was found with plain stores"
    else ok; fi
fi
CHORUS_SHM_SLOT_STORES=fast timeout 60 "$chorusrun" -n 2 "$perf" alltoall -b 1M -e 1M -n 1 -w 0 >"$out" 2>&1
if grep -q "CHORUS_SHM_SLOT_STORES=fast: use auto, plain or streamed" "$out"; then ok
else bad "fast: no error naming the knob"; fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
