#!/usr/bin/env bash
# Drives test_fault under chorusrun and checks every survivor's verdict.
# usage: run_fault.sh CHORUSRUN TEST_FAULT MODE NRANKS [REPEAT [FULL_REPEAT]]
# Each run picks a random victim (and for init, a random moment). With TEST_FULL=1 in the
# environment (make test-full), FULL_REPEAT runs instead of REPEAT, when given.
#   init: the victim is SIGKILLed inside chorus_comm_init after the rendezvous by initkill.so ($INITKILL_LIB,
#   preloaded into the victim only; see initkill.c): right after one of init's steps (rendezvous, mesh, a
#   peer's transport, the host arena), or some clock reads into what follows (+N), or with a shared memory
#   segment just made (shm:K). The survivors must fail within the connect timeout (5 s here) naming it, and
#   no chorus-* segment may be left in /dev/shm once every rank has ended.
set -u
chorusrun=$1 prog=$2 mode=$3 n=$4 repeat=${5:-1}
[ "${TEST_FULL:-0}" = 1 ] && [ -n "${6:-}" ] && repeat=$6
connect_timeout=5
shm_list() { ls /dev/shm 2> /dev/null | grep '^chorus-' | sort; }
# One moment in init at random: the steps every transport has, and shm_open() where shared memory is used.
# Only where every other rank still needs the victim (initkill.c): over TCP, the arena point and anything
# later are for ranks 0 and 1 (tuning's link measurement) only.
init_point() {
    local points=(table mesh "peer:$((1 + RANDOM % (n - 1)))")
    [ "${CHORUS_TRANSPORT:-auto}" = tcp ] || points+=("shm:$((1 + RANDOM % n))")
    [ "${CHORUS_TRANSPORT:-auto}" != tcp ] || [ "$victim" -le 1 ] && points+=(arena)
    local p=${points[$((RANDOM % ${#points[@]}))]}
    if [ "$p" = arena ]; then
        [ "$victim" -le 1 ] && ((RANDOM % 2)) && p+="+$((1 + RANDOM % 60))"
    elif [ "${p%%:*}" != shm ] && ((RANDOM % 2)); then
        p+="+$((1 + RANDOM % 20))"
    fi
    echo "$p"
}
pass=0 failed=0
start=$(date +%s)
for ((i = 0; i < repeat; i++)); do
    victim=$((RANDOM % n))
    stamp=$(mktemp)
    out=$(mktemp)
    what=
    case $mode in
    kill) CHORUS_SOCKET_IFNAME=lo timeout 120 "$chorusrun" -n "$n" --grace 10 "$prog" kill "$victim" "$stamp" > "$out" 2>&1 ;;
    # The stopped victim never ends by itself: once the survivors are done, timeout(1) stops chorusrun,
    # which stops the ranks (SIGKILL reaches a stopped process).
    stop) CHORUS_SOCKET_IFNAME=lo CHORUS_TIMEOUT=2s timeout 20 "$chorusrun" -n "$n" --grace 1 "$prog" stop "$victim" "$stamp" > "$out" 2>&1 ;;
    abort) CHORUS_SOCKET_IFNAME=lo timeout 60 "$chorusrun" -n "$n" "$prog" abort > "$out" 2>&1; victim=-1 ;;
    # The victim alone gets the preload and INFO logs (initkill finds init's steps in them). ASan wants its
    # runtime first among the libraries, which a preload is not: that check is turned off for the victim.
    init)
        point=$(init_point)
        what=", INITKILL=$point"
        shm_before=$(shm_list)
        CHORUS_SOCKET_IFNAME=lo CHORUS_CONNECT_TIMEOUT=${connect_timeout}s timeout 60 "$chorusrun" -n "$n" --grace 10 \
            sh -c 'if [ "$CHORUS_RANK" = "$2" ]; then
                       export LD_PRELOAD="$INITKILL_LIB" INITKILL="$3" CHORUS_LOG_LEVEL=INFO \
                              ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
                   fi
                   exec "$1" init "$2" "$4"' sh "$prog" "$victim" "$point" "$((connect_timeout + 1))" > "$out" 2>&1 ;;
    esac
    ok=1
    for ((r = 0; r < n; r++)); do
        [ "$r" = "$victim" ] && continue
        grep -q "^rank $r: ok" "$out" || ok=0
    done
    if [ "$mode" = init ]; then
        grep -q "rank $victim (pid [0-9]*) was killed by signal 9" "$out" ||
            { ok=0; echo "rank $victim was not killed during init"; }
        # Segments appear and go within milliseconds; one still there a second after every rank ended is left.
        left=$(comm -13 <(echo "$shm_before") <(shm_list))
        [ -n "$left" ] && sleep 1 && left=$(comm -12 <(echo "$left") <(shm_list))
        [ -n "$left" ] && { ok=0; echo "left in /dev/shm:" $left; }
        echo "run $i: victim $victim of $n, INITKILL=$point: $([ $ok = 1 ] && echo ok || echo FAILED)"
    fi
    if [ $ok = 1 ]; then pass=$((pass + 1)); else
        failed=$((failed + 1))
        echo "--- run $i ($mode, victim $victim of $n$what) failed:"
        grep -v " CHORUS " "$out"
        [ "$mode" = init ] && grep " CHORUS WARN " "$out"
    fi
    rm -f "$stamp" "$out"
done
echo "$pass passed, $failed failed ($(($(date +%s) - start)) s)"
[ $failed = 0 ]
