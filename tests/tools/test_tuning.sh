#!/usr/bin/env bash
# Tuning end to end: chorus-tune writes a file that chorus-model and communicators read; a file's rule
# chooses the algorithm; chorus-tune --rules derives rules that communicators follow; chorus-tune --fit
# writes efficiencies that scale the model's prices; a bad file or CHORUS_TUNING value fails init on every
# rank, naming what is wrong;
# CHORUS_TUNING=model runs correct collectives.
# usage: test_tuning.sh CHORUSRUN CHORUS_TUNE CHORUS_PERF CHORUS_MODEL
set -u
run=$1 tune=$2 perf=$3 model=$4
export CHORUS_SOCKET_IFNAME=lo
fail=0
check() { if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 "$run" -n 2 "$tune" -o "$tmp/tuned" > "$tmp/out" 2>&1
status=$?
cat "$tmp/out"
check "chorus-tune ran" "$status"
# Where ranks can read each other's memory, the single-copy reads' profile has the profile's working sets.
# (chorus-tune's shared-memory communicator says so at INFO TUNING; its TCP one never reads that way.)
single_copy=$(grep 'cost model' "$tmp/out" | grep '(link shm' | grep -q 'single-copy reads [fs]' && echo on || echo off)
check "its single-copy profile (single copy $single_copy) has the profile's points" "$(diff \
    <(awk '$1 == "profile" && NF == 3 { print $2 }' "$tmp/tuned") \
    <(awk '$1 == "profile" && $2 == "cma" { print $3 }' "$tmp/tuned") > /dev/null
    r=$?; if [ $single_copy = on ]; then echo $r; else grep -c '^profile cma' "$tmp/tuned"; fi)"
check "it wrote every parameter" "$(for k in 'alpha shm' 'alpha tcp' 'alpha arena' 'beta shm cache' 'beta tcp memory' \
    'beta arena cache' 'beta cma memory' 'beta cma-read memory' 'oneway shm cache' 'oneway tcp memory' 'beta copy memory' 'beta stream memory' 'gamma cache' \
    'cache ' 'profile '; do grep -q "^$k" "$tmp/tuned" || echo missing; done | grep -c missing | sed 's/^0$/0/')"
# Efficiencies come from timing the algorithms (--fit), not from the built-in set the measurement began with.
check "and no efficiency without --fit" "$(grep -c '^efficiency' "$tmp/tuned")"
"$model" allreduce -p 4 --tuning-file "$tmp/tuned" > "$tmp/model" 2>&1
check "chorus-model reads it" "$?"

# --passes and --spread: two passes per link, the second 2 s after the first (shared memory, then TCP:
# 4 s at least), still a whole file; out-of-range values are refused, naming them.
start=$(date +%s)
timeout 60 "$run" -n 2 "$tune" --passes 2 --spread 2 -o "$tmp/spread" > "$tmp/spread.out" 2>&1
status=$? took=$(($(date +%s) - start))
check "chorus-tune --passes 2 --spread 2 ran (${took} s)" "$status"
check "its passes were spread: 4 s or more" "$([ "$took" -ge 4 ] && echo 0 || echo 1)"
check "and it wrote the same parameters" "$(diff <(grep -v '^#\|^date' "$tmp/tuned" | awk '{ $NF = ""; print }') \
    <(grep -v '^#\|^date' "$tmp/spread" | awk '{ $NF = ""; print }') > /dev/null && echo 0 || echo 1)"
for bad in "--passes 0" "--passes 10" "--passes x" "--spread -1"; do
    err=$(timeout 30 "$run" -n 2 "$tune" $bad -o "$tmp/never" 2>&1)
    check "chorus-tune $bad is refused, naming it" "$( [ ! -e "$tmp/never" ] && echo "$err" | grep -q -- "cannot use \"$bad\"" && echo 0 || echo 1)"
done

# A rule in the file picks the algorithm (star, which nothing else would choose), and results stay right.
cp "$tmp/tuned" "$tmp/rule"
echo "rule allreduce star bytes<=64K" >> "$tmp/rule"
CHORUS_TUNING_FILE=$tmp/rule timeout 60 "$run" -n 3 "$perf" allreduce -b 4K -e 256K -f 8 -n 2 -w 1 > "$tmp/perf" 2>&1
status=$?
grep -v '^#' "$tmp/perf" | head -5
check "chorus-perf under the file's rule ran and checked" "$status"
check "the rule chose star up to 64K" "$(awk '!/^#/ && $1 == 4096 && $(NF-2) == "star" { ok = 1 } END { print ok ? 0 : 1 }' "$tmp/perf")"
check "and not above it" "$(awk '!/^#/ && $1 == 262144 && $(NF-2) != "star" { ok = 1 } END { print ok ? 0 : 1 }' "$tmp/perf")"

# A file's memory figures: the calibration at init scales them by its cache figures' ratio to the file's
# (the machine's phase now against the file's), but keeps them where the ranks outnumber the cores (the
# init's figures then carry the sharing of the cores, which calls bound by the memory do not pay in full).
# Read on the local copy's figures, which the init always measures (the links' and the arena's keep the
# file's where a loaded machine disturbs their subtraction of the latency).
sed -e 's/^beta copy cache .*/beta copy cache 1000GB\/s/' -e 's/^beta copy memory .*/beta copy memory 1.234GB\/s/' \
    "$tmp/tuned" > "$tmp/memory"
model_line() { # cpus for taskset, tuning file, then more VAR=value: the init's "cost model" line
    local cpus=$1 file=$2
    shift 2
    env CHORUS_TUNING_FILE="$file" CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING "$@" timeout 60 taskset -c "$cpus" \
        "$run" -n 2 "$perf" allreduce -b 8 -e 8 -n 1 -w 0 2>&1 | grep -m1 'cost model'
}
copy_memory() { # cpus for taskset: the local copy's memory rate in use, as the init logs it (measuring)
    model_line "$1" "$tmp/memory" CHORUS_TUNE_CALIBRATE=1 | sed -n 's/.* copy [0-9.]*\/\([0-9.]*\) GB\/s.*/\1/p'
}
one=$(copy_memory 0)
check "2 ranks on one core keep the file's memory rate of the copy (1.23 GB/s, got ${one:-none})" \
    "$([ "$one" = 1.23 ] && echo 0 || echo 1)"
if [ "$(nproc)" -ge 2 ]; then
    two=$(copy_memory 0,1)
    check "2 ranks on two cores scale it by the init's cache rate over the file's 1000 GB/s (got ${two:-none})" \
        "$([ -n "$two" ] && [ "$two" != 1.23 ] && echo 0 || echo 1)"
fi

# By default (CHORUS_TUNE_CALIBRATE=auto) the init measures nothing where the tuning file was measured on
# this machine at the communicator's share of the cores and the host arena runs as the file prices it
# (a quick look: within a factor 1.6), and says so; it measures where the arena strays from the file's
# price (a machine in another state than when the file was made; here a file whose arena figures are
# a thousandth of the machine's), where the file names another machine, or where asked to (1). Without
# the arena (TCP) the look is at rank 0's link. A value other than auto, 1 or 0 is refused, named.
if [ "$(nproc)" -ge 2 ]; then
    out=$(CHORUS_TUNING_FILE=$tmp/tuned CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 taskset -c 0,1 \
        "$run" -n 2 "$perf" allreduce -b 8 -e 8 -n 1 -w 0 2>&1)
    # The machine may have changed its state since the file was made a few seconds ago: then the init
    # says so and measures.
    check "a file of this machine and share: its figures, or measured where the arena strayed, saying so" \
        "$( (grep -q 'no calibration at init: .* the host arena runs as it says' <<< "$out" &&
            grep -q 'cost model, tuning file' <<< "$out") ||
            (grep -q 'calibration at init: .* the host arena runs at [0-9.]* times its price now' <<< "$out" &&
            grep -q 'cost model, measured at init' <<< "$out") && echo 0 || echo 1)"
    sed -e 's/^beta arena cache .*/beta arena cache 0.01GB\/s/' \
        -e 's/^beta arena memory .*/beta arena memory 0.01GB\/s/' "$tmp/tuned" > "$tmp/strayed"
    out=$(CHORUS_TUNING_FILE=$tmp/strayed CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 taskset -c 0,1 \
        "$run" -n 2 "$perf" allreduce -b 8 -e 8 -n 1 -w 0 2>&1)
    check "a file of this machine whose arena figures stray from the arena's times: measured at init, saying why" \
        "$(grep -q 'calibration at init: .* the host arena runs at 0.0[0-9]* times its price now' <<< "$out" &&
            grep -q 'cost model, measured at init' <<< "$out" && echo 0 || echo 1)"
    sed -e 's/^beta tcp cache .*/beta tcp cache 0.001GB\/s/' "$tmp/tuned" > "$tmp/strayed_tcp"
    out=$(CHORUS_TRANSPORT=tcp CHORUS_TUNING_FILE=$tmp/strayed_tcp CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING \
        timeout 60 taskset -c 0,1 "$run" -n 2 "$perf" allreduce -b 8 -e 8 -n 1 -w 0 2>&1)
    check "over TCP, a file whose link figures stray from the link's times: measured at init, saying why" \
        "$(grep -q 'calibration at init: .* the tcp link with rank 1 runs at 0.0[0-9]* times its price' <<< "$out" &&
            grep -q 'cost model, measured at init' <<< "$out" && echo 0 || echo 1)"
    sed 's/^machine [^ ]* /machine elsewhere /' "$tmp/tuned" > "$tmp/elsewhere"
    check "a file of another machine: measured at init" \
        "$(model_line 0,1 "$tmp/elsewhere" | grep -q 'cost model, measured at init' && echo 0 || echo 1)"
    check "CHORUS_TUNE_CALIBRATE=1: measured at init" \
        "$(model_line 0,1 "$tmp/tuned" CHORUS_TUNE_CALIBRATE=1 | grep -q 'cost model, measured at init' && echo 0 || echo 1)"
fi
CHORUS_TUNE_CALIBRATE=sometimes timeout 60 "$run" -n 2 "$perf" allreduce -b 8 -e 8 > "$tmp/cal.out" 2>&1
status=$?
check "CHORUS_TUNE_CALIBRATE=sometimes is refused, named" \
    "$([ $status != 0 ] && grep -q 'CHORUS_TUNE_CALIBRATE=sometimes: use auto, 1 or 0' "$tmp/cal.out" && echo 0 || echo 1)"

# Figures per share of the cores: chorus-tune on 2 ranks pinned to one processor (2 ranks per core) adds
# the set of share 2 to the file and keeps its set of share 1; a communicator takes the set measured at
# the share nearest its own (a figure of each set marked, the calibration at init off so that it stays).
set_of() { # file, share: that set's figure lines
    awk -v s="$2" '$1 == "share" { on = $2 == s; next } on && !/^#/ && $1 != "rule"' "$1"
}
cp "$tmp/tuned" "$tmp/shares"
timeout 60 taskset -c 0 "$run" -n 2 "$tune" -o "$tmp/shares" > "$tmp/shares.out" 2>&1
check "chorus-tune on 2 ranks of one processor ran" "$?"
check "the file holds the sets of shares 1 and 2" \
    "$([ "$(grep '^share' "$tmp/shares" | tr '\n' ' ')" = "share 1 share 2 " ] && echo 0 || echo 1)"
check "the set of share 1 is the file's before" \
    "$(diff <(set_of "$tmp/tuned" 1) <(set_of "$tmp/shares" 1) > /dev/null && [ -n "$(set_of "$tmp/shares" 2)" ] && echo 0 || echo 1)"
awk '$1 == "share" { s = $2 } $1 == "alpha" && $2 == "tcp" { $3 = (s == 2 ? "77us" : "33us") } { print }' \
    "$tmp/shares" > "$tmp/marked"
alpha_tcp() { # cpus for taskset: the TCP alpha in use, as the init logs it
    model_line "$1" "$tmp/marked" CHORUS_TUNE_CALIBRATE=0 | sed -n 's/.* tcp \([0-9.]*\)us,.*/\1/p'
}
got=$(alpha_tcp 0)
check "2 ranks on one core take the set of share 2 (alpha tcp 77.00us, got ${got:-none})" \
    "$([ "$got" = 77.00 ] && echo 0 || echo 1)"
if [ "$(nproc)" -ge 2 ]; then
    got=$(alpha_tcp 0,1)
    check "2 ranks on two cores take the set of share 1 (alpha tcp 33.00us, got ${got:-none})" \
        "$([ "$got" = 33.00 ] && echo 0 || echo 1)"
    # Its machine line now says cores 1 (chorus-tune ran pinned): still this machine (no measurement at
    # init, or one because the arena strayed from the file's price, which names the file as this machine's).
    out=$(CHORUS_TUNING_FILE=$tmp/shares CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 taskset -c 0,1 \
        "$run" -n 2 "$perf" allreduce -b 8 -e 8 -n 1 -w 0 2>&1)
    check "a file last written on one processor still names this machine" \
        "$(grep -q '^machine .* cores 1 cpu' "$tmp/shares" &&
            grep -q 'calibration at init: the tuning file was measured on this machine' <<< "$out" && echo 0 || echo 1)"
fi

# Ranks crowded on one processor while the init measures the host arena (here three of four pinned to
# CPU 0, rank 0 free on both): the calibration finds the busiest processor's count and takes the arena's
# figures at that share, saying so, and the collectives still run.
if [ "$(nproc)" -ge 2 ]; then
    out=$(CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 "$run" -n 4 sh -c \
        'if [ "$CHORUS_RANK" = 0 ]; then exec taskset -c 0,1 "$@"; fi; exec taskset -c 0 "$@"' \
        sh "$perf" allreduce -b 1M -e 1M -n 2 -w 1 2>&1)
    check "4 ranks, three pinned to one processor, ran" "$?"
    check "the calibration took the arena's figures at the share the ranks had (3 of 4 on one processor)" \
        "$(grep -q '\[0\] CHORUS INFO TUNING calibration: [34] of the 4 ranks on one processor' <<< "$out" && echo 0 || echo 1)"
fi

# --rules: every algorithm timed over a sweep, the fastest written as rules for this rank count and link,
# out of place; a run with another rank count keeps them; communicators follow them, and in-place calls
# (not measured) keep the built-in rules.
timeout 120 "$run" -n 2 "$tune" --rules --max-bytes 16K -o "$tmp/rules" > "$tmp/rules2.out" 2>&1
check "chorus-tune --rules on 2 ranks ran" "$?"
timeout 120 "$run" -n 3 "$tune" --rules --max-bytes 16K -o "$tmp/rules" > "$tmp/rules3.out" 2>&1
check "chorus-tune --rules on 3 ranks ran" "$?"
# Each algorithm forced in turn is the one that runs (a memo of the last call's choice once kept the first).
ran=$(CHORUS_LOG_LEVEL=DEBUG CHORUS_LOG_SUBSYS=COLL timeout 120 "$run" -n 2 "$tune" --rules --max-bytes 1K \
          -o "$tmp/rules_1k" 2>&1 | grep '\[0\] CHORUS DEBUG COLL allreduce #.* via ' | awk '{print $NF}' |
      sort -u | wc -l)
check "chorus-tune --rules ran 5 or more AllReduce algorithms (ran $ran)" "$([ "$ran" -ge 5 ] && echo 0 || echo 1)"
grep '^rule' "$tmp/rules"
missing=0
for c in allreduce allgather reduce_scatter broadcast reduce alltoall; do
    for p in 2 3; do
        for l in shm tcp; do
            grep -q "^rule $c [a-z_]* ranks=$p link=$l place=out" "$tmp/rules" || { echo "no $c rule for $p ranks over $l"; missing=1; }
        done
    done
done
check "rules for every collective, both rank counts and both links" "$missing"
# Each collective's first rule over shm names the fastest algorithm of the first row of its table.
check "the rules name what the tables measured fastest" "$(awk '
    /^# every algorithm on 3 ranks over shm/ { on = 1; next } /^# every algorithm on/ { on = 0 }
    on && /^# [a-z_]+ on 3 ranks/ { c = $2; first = 1; next }
    on && first && $1 == 1024 { fastest[c] = $NF; first = 0 }
    END { for (c in fastest) print c, fastest[c] }' "$tmp/rules3.out" | while read -r c a; do
        grep -m1 "^rule $c [a-z_]* ranks=3 link=shm" "$tmp/rules" | grep -q "^rule $c $a " || echo "$c: table $a"
    done | tee /dev/stderr | grep -c . | sed 's/^0$/0/')"
algo=$(grep -m1 '^rule allreduce [a-z_]* ranks=3 link=shm place=out' "$tmp/rules" | awk '{print $3}')
CHORUS_TUNING_FILE=$tmp/rules CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 "$run" -n 3 "$perf" allreduce \
    -b 1K -e 1K -n 2 -w 1 > "$tmp/follow.out" 2>&1
check "3-rank AllReduce of 1K ran under the derived rules" "$?"
check "out of place it takes the file's rule ($algo)" \
    "$(grep -q "allreduce of 1024 bytes on 3 ranks: $algo (tuning file rule)" "$tmp/follow.out" && echo 0 || echo 1)"
check "in place the built-in rules" \
    "$(grep -q 'allreduce of 1024 bytes on 3 ranks, in place: [a-z_]* (built-in rule)' "$tmp/follow.out" && echo 0 || echo 1)"
algo=$(grep -m1 '^rule alltoall [a-z_]* ranks=2 link=tcp place=out' "$tmp/rules" | awk '{print $3}')
CHORUS_TRANSPORT=tcp CHORUS_TUNING_FILE=$tmp/rules CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 "$run" -n 2 \
    "$perf" alltoall -b 1K -e 1K -n 2 -w 1 > "$tmp/follow.out" 2>&1
check "over TCP the link=tcp rule ($algo)" \
    "$(grep -q "alltoall of 1024 bytes on 2 ranks: $algo (tuning file rule)" "$tmp/follow.out" && echo 0 || echo 1)"
# In place is the same call on every rank, though only rank 0's AllGather and ReduceScatter buffers
# start at the same address: place= rules must not split the ranks (they would wait on each other until
# the timeout).
printf 'chorus-tuning 1\nrule allgather ring place=out\nrule allgather rd place=in\nrule reduce_scatter ring place=out
rule reduce_scatter rhd place=in\n' > "$tmp/place"
for c in allgather reduce_scatter; do
    in=$([ $c = allgather ] && echo rd || echo rhd)
    CHORUS_TIMEOUT=20s CHORUS_TUNING_FILE=$tmp/place CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 "$run" -n 2 \
        "$perf" $c -b 64K -e 64K -n 2 -w 1 > "$tmp/place.out" 2>&1
    check "$c under place= rules ran and checked on both ranks" "$?"
    check "$c in place took the place=in rule ($in) on both ranks" \
        "$([ "$(grep -c "on 2 ranks, in place: $in (tuning file rule)" "$tmp/place.out")" = 2 ] && echo 0 || echo 1)"
done
# --fit: every algorithm timed at 1 MiB (its sweep starts there, where the bytes' terms dominate), each
# one's efficiency written per link, no rules; the model multiplies those terms by it, and the init says
# which it uses.
timeout 120 "$run" -n 2 "$tune" --fit --passes 1 --max-bytes 1M -o "$tmp/fit" > "$tmp/fit.out" 2>&1
check "chorus-tune --fit on 2 ranks ran" "$?"
grep '^# efficiency' "$tmp/fit.out"
factor='[0-9.e+-]*'
check "it wrote AllReduce efficiencies over shm and tcp, and no rules" \
    "$(grep -q "^efficiency allreduce [a-z]* shm $factor $factor\$" "$tmp/fit" &&
       grep -q "^efficiency allreduce [a-z]* tcp $factor $factor\$" "$tmp/fit" && ! grep -q '^rule' "$tmp/fit" &&
       echo 0 || echo 1)"
CHORUS_TUNING_FILE=$tmp/fit CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 "$run" -n 2 "$perf" allreduce \
    -b 1M -e 1M -n 2 -w 1 > "$tmp/fit_perf.out" 2>&1
check "a communicator under the fitted file ran and checked its results" "$?"
logged='CHORUS INFO TUNING efficiencies over shm in cache/memory (.*): allreduce:[a-z]* [0-9.]*/[0-9.]*'
check "and logged its efficiencies" "$(grep -q "$logged" "$tmp/fit_perf.out" && echo 0 || echo 1)"
# An algorithm the sweep stops timing (over --drop-over times the fastest at a size) is still timed at
# its first size mostly in memory, so that its efficiency there is measured, not copied from the cache's:
# with --drop-over 1 every algorithm but the fastest is dropped, and each table says which of its sizes
# lie mostly in memory. Per column with a "-": where no size it was timed at before the first "-" is in
# memory, exactly one time after it, at the first size in memory after it (where there is one); else none;
# and a time at some size in memory, where the table has one.
timeout 240 "$run" -n 2 "$tune" --fit --passes 1 --max-bytes 64M --drop-over 1 -o "$tmp/drop" > "$tmp/drop.out" 2>&1
check "chorus-tune --fit --drop-over 1 on 2 ranks ran" "$?"
dropped=$(awk '
    /^# [a-z_]+ on 2 ranks, us per call/ { t = $2; rows = 0; head = 1; next }
    head { for (i = 2; i < NF; i++) name[i] = $i; ncol = NF - 1; head = 0; next }
    /^ *[0-9]/ && t != "" { rows++; size[rows] = $1; for (i = 2; i <= ncol; i++) v[rows, i] = $i; next }
    /^# mostly in memory/ && t != "" {
        delete mem; sub(/^[^:]*:/, ""); for (i = 1; i <= NF; i++) mem[$i] = 1
        for (i = 2; i <= ncol; i++) {
            first = 0; before = 0
            for (r = 1; r <= rows && !first; r++) if (v[r, i] == "-") first = r; else if (size[r] in mem) before = 1
            if (!first) continue
            want = 0; later = 0; at = ""; inmem = before; anymem = 0
            for (r = 1; r <= rows; r++) anymem += size[r] in mem
            for (r = first; r <= rows; r++) {
                if (!before && !want && (size[r] in mem)) want = size[r]
                if (v[r, i] != "-") { later++; at = size[r]; if (size[r] in mem) inmem = 1 }
            }
            good = (want ? (later == 1 && at == want) : later == 0) && (inmem || !anymem)
            print t, name[i], good ? "ok" : "wrong", later, at, want
        }
        t = ""
    }' "$tmp/drop.out")
printf '%s\n' "$dropped" | grep -v ' ok ' | head -4
check "algorithms were dropped, and each was timed again at its first size in memory alone" \
    "$([ -n "$dropped" ] && ! grep -q ' wrong ' <<< "$dropped" && echo 0 || echo 1)"
model_us() { # file, algorithm: chorus-model's 2-rank AllReduce of 64 MiB by that algorithm, in us
    "$model" allreduce -p 2 -b 64M -e 64M --tuning-file "$1" | awk -v a="$2" '
        /^# +bytes/ { for (i = 3; i <= NF; i++) if ($i == a) col = i - 1; next }
        !/^#/ && col { v = $col; print (v ~ /ms$/ ? v * 1000 : v ~ /us$/ ? v + 0 : v * 1e6) }'
}
{ cat "$tmp/tuned"; echo "efficiency allreduce ring shm 2 2"; } > "$tmp/eff2"
ring1=$(model_us "$tmp/tuned" ring) ring2=$(model_us "$tmp/eff2" ring)
rhd1=$(model_us "$tmp/tuned" rhd) rhd2=$(model_us "$tmp/eff2" rhd)
check "efficiencies of 2 double the ring's price at 64 MiB ($ring1 -> $ring2 us), not rhd's ($rhd1 -> $rhd2)" \
    "$(awk -v a="$ring1" -v b="$ring2" -v c="$rhd1" -v d="$rhd2" \
        'BEGIN { print (a > 0 && b / a > 1.98 && b / a < 2.02 && c == d) ? 0 : 1 }')"
check "chorus-model names the file's efficiency" \
    "$("$model" allreduce -p 2 --tuning-file "$tmp/eff2" | grep -q '^# .*efficiencies in cache/memory (docs/tuning.md): ring 2.00/2.00' &&
       echo 0 || echo 1)"
for bad in "efficiency allreduce ring arena 2 2" "efficiency allreduce ring shm 1 0" "efficiency allreduce nosuch shm 1 1" \
           "efficiency allreduce ring shm 1"; do
    { cat "$tmp/tuned"; echo "$bad"; } > "$tmp/badeff"
    err=$("$model" allreduce -p 2 --tuning-file "$tmp/badeff" 2>&1)
    check "\"$bad\" is refused, naming what is wrong" \
        "$(grep -q 'line [0-9]*: .*\(the link is shm or tcp\|no algorithm "nosuch"\|two factors\)' <<< "$err" && echo 0 || echo 1)"
done

printf 'chorus-tuning 1\nrule allreduce ring link=ib\n' > "$tmp/badlink"
CHORUS_TUNING_FILE=$tmp/badlink timeout 60 "$run" -n 2 "$perf" allreduce -b 8 -e 8 > "$tmp/badlink.out" 2>&1
check "a rule with an unknown link is refused, naming what a rule may say" \
    "$(grep -q 'line 2: "link=ib": .*link=shm|tcp' "$tmp/badlink.out" && echo 0 || echo 1)"

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
CHORUS_TUNING_FILE=$tmp/ratio CHORUS_TUNE_CALIBRATE=1 CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=TUNING timeout 60 \
    "$run" -n 2 "$perf" barrier -n 1 -w 0 -c 0 > "$tmp/ratio.out" 2>&1
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
