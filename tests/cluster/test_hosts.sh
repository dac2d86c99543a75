#!/usr/bin/env bash
# The emulated hosts of cluster.sh as Chorus sees them: each has its own hostname, boot id, /dev/shm and
# network stack; they reach each other and nothing else; two instances coexist; `down` leaves nothing
# behind, whether `up` finished, failed half-way, or the holders are already gone. Exits 77 (skipped)
# where namespaces cannot be made.
#
# usage: test_hosts.sh

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$HERE/cluster.sh
TMP=$(mktemp -d)
export CHORUS_CLUSTER_NAME=hosts-$$ CHORUS_CLUSTER_STATE=$TMP/state
OTHER=(env "CHORUS_CLUSTER_NAME=hosts-b-$$" "CHORUS_CLUSTER_STATE=$TMP/state-b")
# shellcheck source=tests/lib/checks.sh
. "$HERE/../lib/checks.sh"

teardown() {
    "$CLUSTER" down
    "${OTHER[@]}" "$CLUSTER" down
    rm -rf "$TMP"
}
trap teardown EXIT


in_host() { "$CLUSTER" exec "$@"; }
all_distinct() { [ "$(printf '%s\n' "$@" | sort -u | wc -l)" -eq $# ]; }
not() { ! "$@"; }
# Does the root namespace hold a link or a named namespace by one of the names the hosts use inside?
our_names_outside() {
    ip -o link show | grep -qE '^[0-9]+: (vh[0-9]+|chorus0|br0)[@:]' && return 0
    ip netns list 2>/dev/null | grep -q -- "$CHORUS_CLUSTER_NAME"
}

current="before up"
check "down with nothing up succeeds" "$CLUSTER" down
check "status says not up" test "$("$CLUSTER" status)" = "instance '$CHORUS_CLUSTER_NAME': not up"
check "status fails when not up" test "$("$CLUSTER" status >/dev/null; echo $?)" != 0

hosts_up 3 --ttl 180

current="identity"
names=() boots=()
for i in 0 1 2; do
    names+=("$(in_host "$i" -- hostname)")
    boots+=("$(in_host "$i" -- cat /proc/sys/kernel/random/boot_id)")
    check "host $i is chorus-host-$i (got ${names[i]})" test "${names[i]}" = "chorus-host-$i"
    check "host $i's boot id is a UUID (got ${boots[i]})" \
        grep -qE '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' <<<"${boots[i]}"
    check "host $i's network namespace is not ours" \
        test "$(in_host "$i" -- readlink /proc/self/ns/net)" != "$(readlink /proc/self/ns/net)"
    check "host $i's IPC namespace is not ours" \
        test "$(in_host "$i" -- readlink /proc/self/ns/ipc)" != "$(readlink /proc/self/ns/ipc)"
done
check "hostnames differ from each other and from the real one" all_distinct "${names[@]}" "$(hostname)"
check "boot ids differ from each other and from the real one" \
    all_distinct "${boots[@]}" "$(cat /proc/sys/kernel/random/boot_id)"
check "the hostname does not leak out" test "$(hostname)" != chorus-host-0

current="/dev/shm"
marker=chorus-cluster-test-$$
check "host 0 can write its /dev/shm" in_host 0 -- sh -c "echo hi >/dev/shm/$marker"
check "host 0 sees its own file" in_host 0 -- test -e "/dev/shm/$marker"
check "host 1 does not see host 0's file" in_host 1 -- test ! -e "/dev/shm/$marker"
check "the real /dev/shm does not see it" test ! -e "/dev/shm/$marker"
: >"/dev/shm/$marker.outside"
check "no host sees the real /dev/shm" in_host 2 -- test ! -e "/dev/shm/$marker.outside"
rm -f "/dev/shm/$marker.outside"
check "/dev/shm is a tmpfs of its own" in_host 1 -- sh -c 'grep -q " /dev/shm tmpfs " /proc/self/mounts'

current="network"
for i in 0 1 2; do
    routes=$(in_host "$i" -- ip -4 route show table all)
    check "host $i has no default route" test -z "$(grep -E '^default|0\.0\.0\.0/0' <<<"$routes")"
    check "host $i has a route into 10.231.0.0/24 only, besides local ones" \
        test -z "$(grep -vE '^(10\.231\.0\.0/24 |(local|broadcast) (127\.|10\.231\.0\.))' <<<"$routes")"
    check "host $i cannot route to an address outside 10.231.0.0/24" in_host "$i" -- sh -c '! ip route get 10.231.1.1 2>/dev/null'
    check "host $i cannot route to the internet" in_host "$i" -- sh -c '! ip route get 1.1.1.1 2>/dev/null'
    check "host $i's addresses are 127.0.0.1 and $("$CLUSTER" addr "$i")" test "$(in_host "$i" -- ip -4 -o addr show |
        awk '{print $4}' | sort | tr '\n' ' ')" = "10.231.0.$((i + 1))/24 127.0.0.1/8 "
    check "host $i has only lo and $("$CLUSTER" ifname)" \
        test "$(in_host "$i" -- ls /sys/class/net | sort | tr '\n' ' ')" = "$("$CLUSTER" ifname) lo "
    check "host $i has no IPv6 address" test -z "$(in_host "$i" -- ip -6 -o addr show)"
done
bridge=$("$CLUSTER" pid br)
check "the bridge's namespace has no address" test -z "$(nsenter -t "$bridge" -n ip -o addr show | grep -w inet)"
check "the bridge's namespace has no route" test -z "$(nsenter -t "$bridge" -n ip route show table all | grep -v '^local\|^broadcast\|^multicast\|^ff00::/8\|^fe80::/64')"
# Reachable means refused: a TCP reset comes back across the bridge (bash's /dev/tcp, so no tools needed).
check "host 1 reaches host 0 (connection refused)" \
    sh -c "'$CLUSTER' exec 1 -- bash -c 'exec 3<>/dev/tcp/10.231.0.1/9' 2>&1 | grep -q 'Connection refused'"
check "host 2 reaches host 1 (connection refused)" \
    sh -c "'$CLUSTER' exec 2 -- bash -c 'exec 3<>/dev/tcp/10.231.0.2/9' 2>&1 | grep -q 'Connection refused'"
check "host 0 cannot reach past the range" \
    sh -c "'$CLUSTER' exec 0 -- bash -c 'exec 3<>/dev/tcp/10.231.1.1/9' 2>&1 | grep -q 'Network is unreachable'"

current="exec"
check "exec passes the exit status on" test "$(in_host 1 -- sh -c 'exit 7'; echo $?)" = 7
check "exec keeps the working directory" test "$(cd "$TMP" && in_host 1 -- pwd)" = "$TMP"
check "exec hides the instance's variables" test -z "$(in_host 0 -- env | grep '^CHORUS_CLUSTER_')"
check "exec refuses a host that does not exist" test "$(in_host 3 -- true 2>/dev/null; echo $?)" != 0
check "addr" test "$("$CLUSTER" addr 2)" = 10.231.0.3
check "status succeeds when up" quiet "$CLUSTER" status
check "a second up of the same instance is refused" test "$("$CLUSTER" up 1 2>/dev/null; echo $?)" = 1

current="second instance with a rate"
"${OTHER[@]}" "$CLUSTER" up 2 --rate 100mbit --ttl 180
check "a second instance comes up beside the first" test $? = 0
check "its host 0 has the same address" test "$("${OTHER[@]}" "$CLUSTER" addr 0)" = 10.231.0.1
check "in another network namespace" test "$("${OTHER[@]}" "$CLUSTER" exec 0 -- readlink /proc/self/ns/net)" != \
    "$(in_host 0 -- readlink /proc/self/ns/net)"
check "host-side egress is shaped" sh -c "${OTHER[*]} '$CLUSTER' exec 1 -- tc qdisc show dev chorus0 | grep -q 'tbf.*rate 100Mbit'"
check "bridge-side egress is shaped" sh -c "nsenter -t $("${OTHER[@]}" "$CLUSTER" pid br) -n tc qdisc show dev vh1 | grep -q 'tbf.*rate 100Mbit'"
check "the first instance is not shaped" test -z "$(in_host 1 -- tc qdisc show dev chorus0 | grep tbf)"
check "down of the second instance" "${OTHER[@]}" "$CLUSTER" down
check "leaves the first instance up" quiet "$CLUSTER" status

current="down"
holders=$(for h in br 0 1 2; do "$CLUSTER" pid "$h"; done)
{ in_host 1 -- sleep 300 & } 2>/dev/null
straggler=$!
sleep 0.3
check "down succeeds" "$CLUSTER" down
wait "$straggler" 2>/dev/null
check "down stops what still runs inside a host" gone "$straggler"
for pid in $holders; do check "holder $pid is gone" gone "$pid"; done
check "the state directory is gone" test ! -e "$CHORUS_CLUSTER_STATE"
check "status says not up" test "$("$CLUSTER" status)" = "instance '$CHORUS_CLUSTER_NAME': not up"
check "down again succeeds" "$CLUSTER" down
check "no link or named namespace of ours outside" not our_names_outside

current="half up"
"$CLUSTER" up 2 --ttl 180 >/dev/null
kill -KILL "$("$CLUSTER" pid br)"
sleep 0.2
check "status notices a dead holder" sh -c "'$CLUSTER' status | grep -q 'bridge: GONE'"
check "exec still works where the holder lives" in_host 1 -- true
check "down cleans up the rest" "$CLUSTER" down
check "the state directory is gone" test ! -e "$CHORUS_CLUSTER_STATE"

current="failed up"
# A tc that fails makes `up` fail at its first host: it must report a skip and leave nothing behind.
mkdir -p "$TMP/bin"
printf '#!/bin/sh\necho "tc: no tbf here" >&2\nexit 2\n' >"$TMP/bin/tc"
chmod +x "$TMP/bin/tc"
ttl=$((100000 + $$)) # its holders are recognisable by their unusual TTL
PATH=$TMP/bin:$PATH "$CLUSTER" up 2 --rate 10mbit --ttl "$ttl" 2>"$TMP/err"
rc=$?
check "up fails with 77 when tc tbf cannot be used (got $rc)" test "$rc" = 77
check "and says why in one line" test "$(wc -l <"$TMP/err")" = 1 -a -n "$(grep 'tbf' "$TMP/err")"
sleep 0.2
check "and leaves no holder" not pgrep -f "sleep $ttl\$"

check "and no state" test ! -e "$CHORUS_CLUSTER_STATE"

current="ttl"
"$CLUSTER" up 1 --ttl 3 >/dev/null
for ((i = 0; i < 100; i++)); do
    quiet "$CLUSTER" status || break
    sleep 0.1
done
check "holders exit after their ttl" not quiet "$CLUSTER" status
check "down after the ttl" "$CLUSTER" down
check "the state directory is gone" test ! -e "$CHORUS_CLUSTER_STATE"

current="not root"
if setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$CLUSTER" 2>/dev/null; then
    setpriv --reuid=65534 --regid=65534 --clear-groups env CHORUS_CLUSTER_STATE=/nonexistent/state \
        bash "$CLUSTER" up 1 2>"$TMP/err"
    rc=$?
    check "up without root exits 77 (got $rc)" test "$rc" = 77
    check "and says why" grep -q root "$TMP/err"
fi

report
