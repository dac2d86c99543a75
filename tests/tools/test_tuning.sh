#!/usr/bin/env bash
# Tuning end to end: chorus-tune writes a file that chorus-model and communicators read; a file's rule
# chooses the algorithm; a bad file or CHORUS_TUNING value fails init on every rank, naming what is wrong;
# CHORUS_TUNING=model runs correct collectives.
# usage: test_tuning.sh CHORUSRUN CHORUS_TUNE CHORUS_PERF CHORUS_MODEL
set -u
run=$1 tune=$2 perf=$3 model=$4
export CHORUS_SOCKET_IFNAME=lo
fail=0
check() { if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

timeout 60 "$run" -n 2 "$tune" -o "$tmp/tuned" > "$tmp/out" 2>&1
status=$?
cat "$tmp/out"
check "chorus-tune ran" "$status"
check "it wrote every parameter" "$(for k in 'alpha shm' 'alpha tcp' 'alpha arena' 'beta shm cache' 'beta tcp memory' \
    'beta arena cache' 'beta cma memory' 'oneway shm cache' 'oneway tcp memory' 'beta copy memory' 'gamma cache' \
    'cache '; do grep -q "^$k" "$tmp/tuned" || echo missing; done | grep -c missing | sed 's/^0$/0/')"
"$model" allreduce -p 4 --tuning-file "$tmp/tuned" > "$tmp/model" 2>&1
check "chorus-model reads it" "$?"

# A rule in the file picks the algorithm (star, which nothing else would choose), and results stay right.
cp "$tmp/tuned" "$tmp/rule"
echo "rule allreduce star bytes<=64K" >> "$tmp/rule"
CHORUS_TUNING_FILE=$tmp/rule timeout 60 "$run" -n 3 "$perf" allreduce -b 4K -e 256K -f 8 -n 2 -w 1 > "$tmp/perf" 2>&1
status=$?
grep -v '^#' "$tmp/perf" | head -5
check "chorus-perf under the file's rule ran and checked" "$status"
check "the rule chose star up to 64K" "$(awk '!/^#/ && $1 == 4096 && $(NF-2) == "star" { ok = 1 } END { print ok ? 0 : 1 }' "$tmp/perf")"
check "and not above it" "$(awk '!/^#/ && $1 == 262144 && $(NF-2) != "star" { ok = 1 } END { print ok ? 0 : 1 }' "$tmp/perf")"

# A bad file: every rank fails init and names the line.
printf 'chorus-tuning 1\nbeta shm cache fast\n' > "$tmp/bad"
CHORUS_TUNING_FILE=$tmp/bad timeout 60 "$run" -n 2 "$perf" allreduce -b 8 -e 8 > "$tmp/bad.out" 2>&1
status=$?
grep -i "tuning" "$tmp/bad.out" | head -4
check "a bad tuning file fails the run" "$([ $status != 0 ] && echo 0 || echo 1)"
check "both ranks name the file's line 2" "$([ "$(grep -c 'line 2' "$tmp/bad.out")" -ge 2 ] && echo 0 || echo 1)"

CHORUS_TUNING=guess timeout 60 "$run" -n 2 "$perf" allreduce -b 8 -e 8 > "$tmp/mode.out" 2>&1
status=$?
check "CHORUS_TUNING=guess is refused, named" "$([ $status != 0 ] && grep -q 'CHORUS_TUNING=guess' "$tmp/mode.out" && echo 0 || echo 1)"

# The init calibration measures only the cache regime: the memory figures keep the file's ratio to the
# cache figures (here a copy runs at a fifth of its cache rate in memory), whatever the cache rate found.
sed -e '/^beta copy /d' "$tmp/tuned" > "$tmp/ratio"
printf 'beta copy cache 100GB/s\nbeta copy memory 20GB/s\n' >> "$tmp/ratio"
CHORUS_TUNING_FILE=$tmp/ratio CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 "$run" -n 2 "$perf" barrier \
    -n 1 -w 0 -c 0 > "$tmp/ratio.out" 2>&1
copy=$(grep -o 'measured at init.* copy [0-9.]*/[0-9.]* GB/s' "$tmp/ratio.out" | head -1 | sed 's/.* copy //; s/ GB.s//')
echo "copy cache/memory at init: ${copy:-none}"
check "memory copy rate keeps the file's ratio to the measured cache rate (got ${copy:-none})" \
    "$(echo "$copy" | awk -F/ '$1 > 0 && $1 != 100 && $2 / $1 > 0.19 && $2 / $1 < 0.21 {ok = 1} END {print ok ? 0 : 1}')"

# The model alone chooses: every collective still right.
for c in allreduce allgather reduce_scatter broadcast reduce alltoall; do
    CHORUS_TUNING=model timeout 120 "$run" -n 3 "$perf" "$c" -b 8 -e 1M -f 32 -n 1 -w 0 > "$tmp/m.$c" 2>&1
    check "CHORUS_TUNING=model: $c correct" "$?"
done
exit $fail
