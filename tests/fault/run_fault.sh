#!/usr/bin/env bash
# Drives test_fault under chorusrun and checks every survivor's verdict.
# usage: run_fault.sh CHORUSRUN TEST_FAULT MODE NRANKS [REPEAT]
set -u
chorusrun=$1 prog=$2 mode=$3 n=$4 repeat=${5:-1}
pass=0 failed=0
for ((i = 0; i < repeat; i++)); do
    victim=$((RANDOM % n))
    stamp=$(mktemp)
    out=$(mktemp)
    case $mode in
    kill) CHORUS_SOCKET_IFNAME=lo timeout 120 "$chorusrun" -n "$n" --grace 10 "$prog" kill "$victim" "$stamp" > "$out" 2>&1 ;;
    # The stopped victim never ends by itself: once the survivors are done, timeout(1) stops chorusrun,
    # which stops the ranks (SIGKILL reaches a stopped process).
    stop) CHORUS_SOCKET_IFNAME=lo CHORUS_TIMEOUT=2s timeout 20 "$chorusrun" -n "$n" --grace 1 "$prog" stop "$victim" "$stamp" > "$out" 2>&1 ;;
    abort) CHORUS_SOCKET_IFNAME=lo timeout 60 "$chorusrun" -n "$n" "$prog" abort > "$out" 2>&1; victim=-1 ;;
    esac
    ok=1
    for ((r = 0; r < n; r++)); do
        [ "$r" = "$victim" ] && continue
        grep -q "^rank $r: ok" "$out" || ok=0
    done
    if [ $ok = 1 ]; then pass=$((pass + 1)); else
        failed=$((failed + 1))
        echo "--- run $i ($mode, victim $victim of $n) failed:"
        grep -v " CHORUS " "$out"
    fi
    rm -f "$stamp" "$out"
done
echo "$pass passed, $failed failed"
[ $failed = 0 ]
