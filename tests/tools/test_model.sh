#!/usr/bin/env bash
# chorus-model: the seed's crossover, tuning files read back and refused with a reason, bad input named.
# usage: test_model.sh CHORUS_MODEL
set -u
model=$1
fail=0
check() { # description, command's status (0 = as wanted)
    if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The seed (004): 8 ranks, alpha 5 us, beta 450 GB/s: ring and double binary tree cross at about 14.4 MB.
out=$("$model" allreduce -p 8 --alpha 5us --beta 450GB/s)
echo "$out" | grep "ring / dbt"
mb=$(echo "$out" | sed -n 's/.*ring \/ dbt at \([0-9.]*\) MB.*/\1/p')
check "ring/dbt crossover is 14.4 MB (got ${mb:-none})" "$([ "$mb" = 14.4 ] && echo 0 || echo 1)"
check "dbt is the faster one below it" "$(echo "$out" | grep -q 'ring / dbt at .*dbt faster below, ring above' && echo 0 || echo 1)"
# The crossover moves with alpha * beta, as the formula says: doubling alpha doubles it.
mb2=$("$model" allreduce -p 8 --alpha 10us --beta 450GB/s | sed -n 's/.*ring \/ dbt at \([0-9.]*\) MB.*/\1/p')
check "doubling alpha doubles the crossover (got ${mb2:-none})" "$([ "$mb2" = 28.8 ] && echo 0 || echo 1)"

# A tuning file's parameters are used, and its rules parse.
cat > "$tmp/good" <<'T'
chorus-tuning 1
machine test cores 2 cpu none
# a comment
alpha shm 5us
beta shm cache 450GB/s
beta shm memory 450GB/s
gamma cache 0
gamma memory 0
beta copy cache 1e30
beta copy memory 1e30
rule allreduce ring bytes>=64K
rule allgather bruck ranks>=4 bytes<=1M
T
mbf=$("$model" allreduce -p 8 --tuning-file "$tmp/good" | sed -n 's/.*ring \/ dbt at \([0-9.]*\) MB.*/\1/p')
check "a tuning file's alpha and beta give the same crossover (got ${mbf:-none})" "$([ "$mbf" = 14.4 ] && echo 0 || echo 1)"

bad() { # file contents, what the error must say
    printf '%s\n' "$1" > "$tmp/bad"
    err=$("$model" allreduce -p 4 --tuning-file "$tmp/bad" 2>&1 >/dev/null)
    status=$?
    echo "  $err"
    check "refused: $2" "$([ $status = 2 ] && echo "$err" | grep -q "$2" && echo 0 || echo 1)"
}
bad "alpha shm 5us" "must start with \"chorus-tuning 1\""
bad "chorus-tuning 2" "this library reads version 1"
bad $'chorus-tuning 1\nalpha nvlink 5us' "line 2"
bad $'chorus-tuning 1\noneway arena cache 5GB/s' "line 2"
bad $'chorus-tuning 1\nrule allreduce warp' "no algorithm \"warp\""
bad $'chorus-tuning 1\nrule allreduce ring bytes<=lots' "bytes<=lots"
# Sets per share of the cores: the ranks take the set measured at the share nearest theirs (8 ranks on 2
# cores: 4; on 8 cores: 1; on 3 cores, 2.67: 4 of 1 and 4; on 4 cores, 2, as near both: the lower), and
# bad share lines are refused, named.
figures() { grep -v '^chorus-tuning\|^machine\|^#\|^rule' "$tmp/good"; } # the figure lines of the file above
{ echo "chorus-tuning 1"; echo "share 1"; figures; echo "share 4"; figures | sed 's/^alpha shm 5us/alpha shm 10us/'
  echo "rule allreduce ring bytes>=64K"; } > "$tmp/shares"
for c in "8 2 28.8" "8 8 14.4" "8 3 28.8" "8 4 14.4"; do
    set -- $c
    mbs=$("$model" allreduce -p 8 --ranks-per-host "$1" --cores "$2" --tuning-file "$tmp/shares" |
        sed -n 's/.*ring \/ dbt at \([0-9.]*\) MB.*/\1/p')
    check "8 ranks on $2 cores take the set of their share (crossover ${mbs:-none}, the set's alpha gives $3)" \
        "$([ "$mbs" = "$3" ] && echo 0 || echo 1)"
done
bad $'chorus-tuning 1\nshare 0.5\nalpha shm 5us' "1 or more"
bad $'chorus-tuning 1\nshare 2\nalpha shm 5us\nshare 2\nalpha shm 6us' "a second set of figures for share 2"
bad $'chorus-tuning 1\nshare 2\nshare 4\nalpha shm 5us' "no figures for share 2"
bad $'chorus-tuning 1\nalpha shm 5us\nshare 4' "no figures for share 4 after its share line"
# A connection's one-way rate prices what a rank only sends: the 2-rank chain broadcast (the head only
# sends, the tail only receives) takes half the time at twice the rate; the ring allgather (exchanges)
# does not move.
predicted() { # algorithm, then chorus-model's arguments: the algorithm's prediction in us (one size)
    local algo=$1
    shift
    "$model" "$@" | awk -v a="$algo" '
        /^# +bytes/ { for (i = 3; i <= NF; i++) if ($i == a) col = i - 1; next }
        !/^#/ && col { v = $col; print (v ~ /ms$/ ? v * 1000 : v ~ /us$/ ? v + 0 : v * 1e6) }'
}
at64m() { # collective, algorithm, file
    predicted "$2" "$1" -p 2 -b 64M -e 64M --tuning-file "$3"
}
printf '%s\n' "chorus-tuning 1" "alpha shm 0" "beta shm cache 10GB/s" "beta shm memory 10GB/s" \
    "oneway shm cache 10GB/s" "oneway shm memory 10GB/s" "beta copy cache 1e30" "beta copy memory 1e30" > "$tmp/one"
sed 's/^oneway \(.*\) 10GB/oneway \1 20GB/' "$tmp/one" > "$tmp/two"
c1=$(at64m broadcast chain "$tmp/one") c2=$(at64m broadcast chain "$tmp/two")
r1=$(at64m allgather ring "$tmp/one") r2=$(at64m allgather ring "$tmp/two")
echo "  chain broadcast 64M: ${c1:-?} us at 10 GB/s one way, ${c2:-?} at 20; ring allgather ${r1:-?}, ${r2:-?}"
check "the one-way rate halves the 2-rank chain, not the ring" "$(awk -v a="$c1" -v b="$c2" -v r="$r1" -v s="$r2" \
    'BEGIN { print (b > 0 && a / b > 1.9 && a / b < 2.1 && r == s) ? 0 : 1 }')"
# A file written before the oneway lines prices one way at the exchange's rate, as the model then did.
grep -v '^oneway' "$tmp/one" > "$tmp/old"
c0=$(at64m broadcast chain "$tmp/old")
check "a file without oneway lines: one way at the exchange's rate (${c0:-?} us, ${c1:-?} with them)" \
    "$([ -n "$c0" ] && [ "$c0" = "$c1" ] && echo 0 || echo 1)"

# The single-copy AllToAll's reads (out of a peer's buffer into the output) take their own rate, beta
# cma-read: halving it doubles the time of its reads (64 MiB on 2 ranks: 32 MiB read, its own 32 MiB
# copied for free here), and leaves the single-copy AllGather, whose copies are writes, where it was;
# a file without cma-read lines prices the reads at beta cma's.
printf '%s\n' "chorus-tuning 1" "alpha arena 0" "beta cma cache 10GB/s" "beta cma memory 10GB/s" \
    "beta cma-read cache 10GB/s" "beta cma-read memory 10GB/s" "beta copy cache 1e30" "beta copy memory 1e30" \
    "beta stream memory 1e30" > "$tmp/cmaread"
sed 's/^beta cma-read \(.*\) 10GB/beta cma-read \1 5GB/' "$tmp/cmaread" > "$tmp/cmaread.half"
grep -v '^beta cma-read' "$tmp/cmaread" > "$tmp/cmaread.old"
cma64m() { # collective, file: the single-copy algorithm's predicted us at 64 MiB on 2 ranks
    predicted cma "$1" -p 2 -b 64M -e 64M --arena --tuning-file "$2"
}
a1=$(cma64m alltoall "$tmp/cmaread") a2=$(cma64m alltoall "$tmp/cmaread.half") a0=$(cma64m alltoall "$tmp/cmaread.old")
g1=$(cma64m allgather "$tmp/cmaread") g2=$(cma64m allgather "$tmp/cmaread.half")
echo "  single-copy alltoall 64M: ${a1:-?} us, ${a2:-?} at half the read rate, ${a0:-?} without it; allgather ${g1:-?}, ${g2:-?}"
check "the read rate prices the single-copy AllToAll's reads, not the AllGather's copies" "$(awk -v a="$a1" -v b="$a2" \
    -v c="$a0" -v g="$g1" -v h="$g2" 'BEGIN { print (a > 0 && b / a > 1.99 && b / a < 2.01 && c == a && g == h) ? 0 : 1 }')"

# A profile sets the memory share: flat from 2 to 64 MiB of working set (the ranks' buffers,
# algo_buffer_bytes), a 2-rank ring AllReduce (2 n of buffers per rank) of 16 and of 32 MiB runs at the
# cache rate (twice the time for twice the bytes); at 64 MiB, 128 MiB of buffers, the profile's memory
# end, at the memory rate (half of it: four times 32 MiB's time). An AllGather's buffers are one block in
# and all out (1.5 n on 2 ranks): at 64 MiB, 96 MiB of buffers, it is priced between the two.
printf '%s\n' "chorus-tuning 1" "alpha shm 0" "beta shm cache 10GB/s" "beta shm memory 5GB/s" \
    "beta copy cache 1e30" "beta copy memory 1e30" "gamma cache 0" "gamma memory 0" \
    "profile 2097152 10GB/s" "profile 67108864 10GB/s" "profile 134217728 5GB/s" > "$tmp/profile"
at() { # collective, size, file: the ring's predicted us
    predicted ring "$1" -p 2 -b "$2" -e "$2" --tuning-file "$3"
}
p16=$(at allreduce 16M "$tmp/profile") p32=$(at allreduce 32M "$tmp/profile") p64=$(at allreduce 64M "$tmp/profile")
echo "  ring allreduce with the profile: 16M ${p16:-?} us, 32M ${p32:-?}, 64M ${p64:-?}"
check "the profile's flat part prices at the cache rate, its end at the memory rate" "$(awk -v a="$p16" -v b="$p32" \
    -v c="$p64" 'BEGIN { print (a > 0 && b / a > 1.99 && b / a < 2.01 && c / b > 3.99 && c / b < 4.01) ? 0 : 1 }')"
g32=$(at allgather 32M "$tmp/profile") g64=$(at allgather 64M "$tmp/profile")
echo "  ring allgather with the profile: 32M ${g32:-?} us, 64M ${g64:-?}"
check "an AllGather's buffers are 1.5 n on 2 ranks: 64 MiB priced between the two rates" "$(awk -v b="$g32" \
    -v c="$g64" 'BEGIN { print (b > 0 && c / b > 2.1 && c / b < 3.9) ? 0 : 1 }')"
bad $'chorus-tuning 1\nprofile 4M 1GB/s\nprofile 2M 1GB/s' "increasing bytes"

# The single-copy reads take the memory share of their own profile (profile cma) where the file has one:
# the 2-rank single-copy AllGather of 32 MiB reads 16 MiB from the peer with 48 MiB of buffers per rank,
# the flat part of the profile above (cache rate, 10 GB/s: 1678 us) but past the knee of a cma profile
# that falls at 4 MiB (memory rate, 5 GB/s: 3355 us); the direct AllGather, through the arena, keeps the
# first profile's share.
sed -e '/^beta shm/d' "$tmp/profile" > "$tmp/reads"
printf '%s\n' "alpha arena 0" "beta cma cache 10GB/s" "beta cma memory 5GB/s" "beta arena cache 10GB/s" \
    "beta arena memory 5GB/s" "beta stream memory 1e30" >> "$tmp/reads"
printf '%s\n' "profile cma 2097152 10GB/s" "profile cma 4194304 5GB/s" "profile cma 134217728 5GB/s" |
    cat "$tmp/reads" - > "$tmp/reads.cma"
r0=$(predicted cma allgather -p 2 -b 32M -e 32M --arena --tuning-file "$tmp/reads")
r1=$(predicted cma allgather -p 2 -b 32M -e 32M --arena --tuning-file "$tmp/reads.cma")
d0=$(predicted direct allgather -p 2 -b 32M -e 32M --arena --tuning-file "$tmp/reads")
d1=$(predicted direct allgather -p 2 -b 32M -e 32M --arena --tuning-file "$tmp/reads.cma")
echo "  single-copy allgather 32M: ${r0:-?} us with one profile, ${r1:-?} with a cma profile; direct ${d0:-?}, ${d1:-?}"
check "single-copy reads priced by their own profile (1678 us, then 3355), the direct AllGather not" "$(awk \
    -v a="$r0" -v b="$r1" -v c="$d0" -v d="$d1" \
    'BEGIN { print (a > 1675 && a < 1681 && b > 3350 && b < 3360 && c > 0 && c == d) ? 0 : 1 }')"
bad $'chorus-tuning 1\nprofile cma 4M 1GB/s\nprofile cma 2M 1GB/s' "increasing bytes"
bad $'chorus-tuning 1\nprofile dma 4M 1GB/s' "profile \\[cma|copy\\] SIZE RATE"

# The local copies take the memory share of their own profile (profile copy) where the file has one: the
# 2-rank ring AllGather of 2 MiB copies its own block of 1 MiB and sends 1 MiB, with 3 MiB of buffers per
# rank, in the flat part of the first profile (cache rates, 10 GB/s: 105 us each) but past the knee of a
# copy profile that falls at 3 MiB: its copy then takes the memory rate (5 GB/s: 210 us), its link the
# cache rate still.
printf '%s\n' "chorus-tuning 1" "alpha shm 0" "beta shm cache 10GB/s" "beta shm memory 5GB/s" \
    "beta copy cache 10GB/s" "beta copy memory 5GB/s" "gamma cache 0" "gamma memory 0" \
    "profile 2097152 10GB/s" "profile 67108864 10GB/s" "profile 134217728 5GB/s" > "$tmp/copies"
printf '%s\n' "profile copy 2097152 10GB/s" "profile copy 3145728 5GB/s" "profile copy 134217728 5GB/s" |
    cat "$tmp/copies" - > "$tmp/copies.copy"
c0=$(predicted ring allgather -p 2 -b 2M -e 2M --tuning-file "$tmp/copies")
c1=$(predicted ring allgather -p 2 -b 2M -e 2M --tuning-file "$tmp/copies.copy")
echo "  ring allgather 2M: ${c0:-?} us with one profile, ${c1:-?} with a copy profile"
check "local copies priced by their own profile (210 us, then 315), the link not" "$(awk -v a="$c0" -v b="$c1" \
    'BEGIN { print (a > 208 && a < 212 && b > 312 && b < 317) ? 0 : 1 }')"
# The local reductions too, measured as the copies are, on one rank: a 2-rank ring AllReduce of 2 MiB
# (4 MiB of buffers per rank) combines 1 MiB, at gamma's cache figure (0.1 ns/B: 105 us) with the first
# profile alone, at its memory figure (0.2 ns/B: 210 us) past the copy profile's knee; links and copies free.
printf '%s\n' "chorus-tuning 1" "alpha shm 0" "beta shm cache 1e30" "beta shm memory 1e30" "beta copy cache 1e30" \
    "beta copy memory 1e30" "gamma cache 0.1ns" "gamma memory 0.2ns" "profile 2097152 10GB/s" \
    "profile 67108864 10GB/s" "profile 134217728 5GB/s" > "$tmp/sums"
cat "$tmp/sums" - > "$tmp/sums.copy" < <(tail -3 "$tmp/copies.copy")
s0=$(predicted ring allreduce -p 2 -b 2M -e 2M --tuning-file "$tmp/sums")
s1=$(predicted ring allreduce -p 2 -b 2M -e 2M --tuning-file "$tmp/sums.copy")
echo "  ring allreduce 2M, reductions only: ${s0:-?} us with one profile, ${s1:-?} with a copy profile"
check "local reductions priced by the copy profile (105 us, then 210)" "$(awk -v a="$s0" -v b="$s1" \
    'BEGIN { print (a > 103 && a < 107 && b > 207 && b < 212) ? 0 : 1 }')"
bad $'chorus-tuning 1\nprofile copy 4M 1GB/s\nprofile copy 4M 1GB/s' "increasing bytes"

# What stays in cache at any size is priced at the cache rate: two-shot's combine reads half of a 2-rank
# buffer from the peer's slot into its own, its gather the other half out to the output, so at 64 MiB
# (all memory regime) it takes n/2 at 10 GB/s and n/2 at 5; one-shot combines the peer's slot into a
# slot-sized chunk of the output, all n at 10.
printf '%s\n' "chorus-tuning 1" "alpha arena 0" "beta arena cache 10GB/s" "beta arena memory 5GB/s" \
    "beta copy cache 1e30" "beta copy memory 1e30" "gamma cache 0" "gamma memory 0" "cache 4096" > "$tmp/slots"
two=$(predicted twoshot allreduce -p 2 -b 64M -e 64M --arena --tuning-file "$tmp/slots")
one=$(predicted oneshot allreduce -p 2 -b 64M -e 64M --arena --tuning-file "$tmp/slots")
echo "  64 MiB through the arena: twoshot ${two:-?} us, oneshot ${one:-?} us"
check "two-shot's slot-to-slot half at the cache rate (10066 us), one-shot's all (6711)" \
    "$(awk -v a="$two" -v b="$one" 'BEGIN { print (a > 10060 && a < 10072 && b > 6705 && b < 6717) ? 0 : 1 }')"

# A copy that streams (copy_out, from 4 MiB) takes beta stream, the others beta copy: the single-copy
# AllGather of 2 ranks copies its own half, 32 MiB at 64 MiB (streamed), 2 MiB at 4 MiB (not), reads free.
printf '%s\n' "chorus-tuning 1" "alpha arena 0" "beta cma cache 1e30" "beta cma memory 1e30" \
    "beta copy cache 10GB/s" "beta copy memory 10GB/s" "beta stream memory 20GB/s" "cache 4096" > "$tmp/stream"
s64=$(predicted cma allgather -p 2 -b 64M -e 64M --arena --tuning-file "$tmp/stream")
s4=$(predicted cma allgather -p 2 -b 4M -e 4M --arena --tuning-file "$tmp/stream")
grep -v '^beta stream' "$tmp/stream" > "$tmp/nostream"
n64=$(predicted cma allgather -p 2 -b 64M -e 64M --arena --tuning-file "$tmp/nostream")
echo "  single-copy allgather: 64M ${s64:-?} us (without beta stream ${n64:-?}), 4M ${s4:-?}"
check "streamed own block at beta stream (1678 us), unstreamed at beta copy (210), no figure: beta copy's (3355)" \
    "$(awk -v a="$s64" -v b="$s4" -v c="$n64" 'BEGIN { print (a > 1675 && a < 1681 && b > 208 && b < 212 && c > 3350 && c < 3360) ? 0 : 1 }')"

# The direct Broadcast's two paths, side by side: the readers' (the first slot's copy in, then n read
# through the arena) and the root's (2 n copied); the call takes the longer. 64 MiB, arena reads at
# 20 GB/s, slots of 256 KiB: copies at 10 GB/s make the root's the longer (13422 us), at 100 GB/s the
# readers' (3358).
for rate in 10 100; do
    printf '%s\n' "chorus-tuning 1" "alpha arena 0" "beta arena cache 20GB/s" "beta arena memory 20GB/s" \
        "beta copy cache ${rate}GB/s" "beta copy memory ${rate}GB/s" "cache 4096" > "$tmp/bcast$rate"
done
b10=$(predicted direct broadcast -p 2 -b 64M -e 64M --arena --slot 256K --tuning-file "$tmp/bcast10")
b100=$(predicted direct broadcast -p 2 -b 64M -e 64M --arena --slot 256K --tuning-file "$tmp/bcast100")
echo "  direct broadcast of 64M: copies at 10 GB/s ${b10:-?} us, at 100 GB/s ${b100:-?}"
check "the root's copies when they are longer (13422 us), else the readers' path (3358)" \
    "$(awk -v a="$b10" -v b="$b100" 'BEGIN { print (a > 13415 && a < 13429 && b > 3355 && b < 3361) ? 0 : 1 }')"

err=$("$model" allreduce -p 4 --tuning-file "$tmp/missing" 2>&1 >/dev/null)
check "a missing file is named" "$(echo "$err" | grep -q "$tmp/missing" && echo 0 || echo 1)"
# Across hosts (--hosts), the hierarchical algorithms' two levels: 4 ranks on 2 hosts, 1 MiB, TCP at 10 us
# and 1 GB/s, shared memory at 1 us and 10 GB/s, copies and sums free. hier: the leaders' ring, 2 steps
# and 1 MiB (1068.6 us), and inside each host two one-way chains of 4 chunks, 8 steps and 2 MiB (217.7);
# hier2d: 2 steps and 512 KiB between hosts (544.3), 2 steps and 1 MiB inside (106.9). Shared memory 10
# times slower moves only them; the flat ring, all TCP, stays.
cat > "$tmp/levels" <<'T'
chorus-tuning 1
machine test cores 2 cpu none
alpha tcp 10us
beta tcp cache 1GB/s
beta tcp memory 1GB/s
oneway tcp cache 1GB/s
oneway tcp memory 1GB/s
alpha shm 1us
beta shm cache 10GB/s
beta shm memory 10GB/s
oneway shm cache 10GB/s
oneway shm memory 10GB/s
gamma cache 0
gamma memory 0
beta copy cache 1e30
beta copy memory 1e30
T
sed 's/^\(beta\|oneway\) shm \(cache\|memory\) 10GB/\1 shm \2 1GB/' "$tmp/levels" >"$tmp/levels.slow"
col() { # file, algorithm: its estimate of 1 MiB on 4 ranks across 2 hosts
    "$model" allreduce -p 4 --hosts 2 --tuning-file "$1" -b 1M -e 1M |
        awk -v a="$2" '/^# +bytes/ { for (i = 2; i <= NF; i++) if ($i == a) c = i } /^ +[0-9]/ { print $(c - 1) }'
}
got="$(col "$tmp/levels" hier) $(col "$tmp/levels" hier2d) $(col "$tmp/levels" ring)"
check "per level: hier 1.286ms, hier2d 651.15us, ring 1.633ms (got $got)" \
    "$([ "$got" = "1.286ms 651.15us 1.633ms" ] && echo 0 || echo 1)"
got="$(col "$tmp/levels.slow" hier) $(col "$tmp/levels.slow" hier2d) $(col "$tmp/levels.slow" ring)"
check "slower shared memory: hier 3.174ms, hier2d 1.595ms, ring 1.633ms (got $got)" \
    "$([ "$got" = "3.174ms 1.595ms 1.633ms" ] && echo 0 || echo 1)"
check "one host lists no hierarchical algorithm" \
    "$("$model" allreduce -p 4 | grep -q hier && echo 1 || echo 0)"
err=$("$model" allreduce -p 4 --hosts 2 --arena 2>&1 >/dev/null)
check "--hosts with --arena is refused, named" "$(echo "$err" | grep -q -- "--hosts" && echo 0 || echo 1)"
err=$("$model" allreduce -p 4 --hosts 5 2>&1 >/dev/null)
check "more hosts than ranks is refused" "$(echo "$err" | grep -q -- "--hosts" && echo 0 || echo 1)"

err=$("$model" allreduce -p 8 --alpha fast 2>&1 >/dev/null)
check "a bad value is named" "$(echo "$err" | grep -q -- "--alpha fast" && echo 0 || echo 1)"
err=$("$model" allshuffle -p 8 2>&1 >/dev/null)
check "an unknown collective is named" "$(echo "$err" | grep -q "allshuffle" && echo 0 || echo 1)"
exit $fail
