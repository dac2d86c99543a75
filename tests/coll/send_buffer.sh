#!/usr/bin/env bash
# The TCP send buffer each connection asks for (CHORUS_SOCKET_SEND_BUFFER, logged per peer at INFO as
# "via tcp (send buffer N bytes)"): auto is 256 KiB between ranks of one host that each have a processor,
# 128 KiB where they share one (both ranks pinned to one CPU); a size given is used as it is.
# Usage: send_buffer.sh CHORUSRUN CHORUS_PERF
set -u
chorusrun=$1 perf=$2
pass=0 fail=0
# expect WANT_BYTES LABEL [PREFIX...]: 2 ranks over TCP, each must log WANT_BYTES for its peer.
expect() {
    local want=$1 label=$2
    shift 2
    local out
    out=$(CHORUS_SOCKET_IFNAME=lo CHORUS_TRANSPORT=tcp CHORUS_TIMEOUT=20s CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=INIT \
          timeout 60 "$@" "$chorusrun" -n 2 "$perf" allreduce -b 1M -e 1M -n 1 -w 0 2>&1)
    local n
    n=$(echo "$out" | grep -c "INIT rank [01] (.*) via tcp (send buffer $want bytes)\$")
    if [ "$n" = 2 ]; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL $label: expected both ranks to ask for $want bytes; they logged:"
        echo "$out" | grep 'via tcp'
    fi
}
if [ "$(nproc)" -ge 2 ]; then expect 262144 "auto, a processor each"; else echo "skip: one processor"; fi
expect 131072 "auto, both ranks on one processor" taskset -c 0
expect 65536 "64K given" env CHORUS_SOCKET_SEND_BUFFER=64K
echo "$pass passed, $fail failed"
[ $fail = 0 ]
