#!/usr/bin/env bash
# Chorus against Open MPI, AllReduce over TCP on the loopback interface, side by side. For each rank count
# the two benchmarks run alternately REPS times, so that both see the same noise, and the table gives the
# median out-of-place busbw per size and the ratio Chorus / Open MPI (above 1: Chorus is faster).
#
# usage: bench/compare-tcp.sh [BUILD_DIR]        (default: build)
# environment: REPS (default 3), RANKS (default "2 4"), ITERS (default 5), WARMUP (default 1),
#              MAX (largest size, default 256M)
set -euo pipefail

build=${1:-build}
reps=${REPS:-3}
ranks=${RANKS:-2 4}
chorusrun=$build/tools/chorusrun
chorus_perf=$build/tools/chorus-perf
mpi_perf=$build/bench/mpi-perf

die() {
    echo "compare-tcp.sh: $*" >&2
    exit 1
}
for bin in "$chorusrun" "$chorus_perf" "$mpi_perf"; do
    [[ -x $bin ]] || die "$bin is missing: build it first (cmake --build $build; mpi-perf needs MPI installed)"
done
command -v mpirun >/dev/null || die "mpirun not found in PATH"

# Few iterations: the large sizes dominate, and the repetitions already average the noise.
flags=(allreduce -b 8 -e "${MAX:-256M}" -f 4 -n "${ITERS:-5}" -w "${WARMUP:-1}" -c 0)

run_chorus() {
    CHORUS_SOCKET_IFNAME=lo "$chorusrun" -n "$1" "$chorus_perf" "${flags[@]}"
}

run_mpi() {
    mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo \
        -np "$1" "$mpi_perf" "${flags[@]}"
}

# "size time busbw" of each row's out-of-place columns.
rows() {
    awk '!/^#/ && NF >= 8 { print $1, $6, $8 }'
}

# Per size, the median of column $1 (2: time, 3: busbw) over the files that follow.
median() {
    local col=$1
    shift
    cat "$@" | awk -v c="$col" '{ print $1, $c }' | sort -k1,1n -k2,2g | awk '
        !($1 in n) { order[++sizes] = $1 }
        { v[$1, ++n[$1]] = $2 }
        END {
            for (i = 1; i <= sizes; i++) {
                s = order[i]; k = n[s]
                m = k % 2 ? v[s, (k + 1) / 2] : (v[s, k / 2] + v[s, k / 2 + 1]) / 2
                print s, m
            }
        }'
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for n in $ranks; do
    for ((r = 1; r <= reps; r++)); do
        echo "# $n ranks, round $r of $reps: chorus-perf" >&2
        run_chorus "$n" | rows >"$tmp/chorus.$n.$r" || die "chorus-perf failed with $n ranks"
        echo "# $n ranks, round $r of $reps: mpi-perf" >&2
        run_mpi "$n" | rows >"$tmp/mpi.$n.$r" || die "mpi-perf failed with $n ranks"
    done
    median 3 "$tmp"/chorus."$n".* >"$tmp/chorus.bw"
    median 3 "$tmp"/mpi."$n".* >"$tmp/mpi.bw"
    median 2 "$tmp"/chorus."$n".* >"$tmp/chorus.time"
    median 2 "$tmp"/mpi."$n".* >"$tmp/mpi.time"
    echo
    echo "# AllReduce over TCP (lo), $n ranks: median busbw (GB/s) of $reps runs"
    # The ratio comes from the times, so that it stays meaningful where busbw rounds to 0.00.
    awk '
        FILENAME == ARGV[1] { cbw[$1] = $2; next }
        FILENAME == ARGV[2] { mbw[$1] = $2; next }
        FILENAME == ARGV[3] { mt[$1] = $2; next }
        FNR == 1 { printf "%12s  %10s  %10s  %7s\n", "size (B)", "Chorus", "Open MPI", "ratio" }
        { printf "%12s  %10.2f  %10.2f  %7.2f\n", $1, cbw[$1], mbw[$1], ($2 > 0 ? mt[$1] / $2 : 0) }
    ' "$tmp/chorus.bw" "$tmp/mpi.bw" "$tmp/mpi.time" "$tmp/chorus.time"
done
