#!/usr/bin/env bash
# Emulated hosts for multi-host tests: each host is a set of namespaces (network, UTS, mount, IPC) held
# open by one long-lived holder process, with its own hostname, boot id, /dev/shm and network stack.
#
#   cluster.sh up K [--rate RATE] [--ttl SECONDS]   bring up hosts 0..K-1
#   cluster.sh down                                  tear everything down (idempotent, also after a failed up)
#   cluster.sh exec I -- CMD [ARGS...]               run CMD inside host I (all its namespaces)
#   cluster.sh addr I                                host I's address
#   cluster.sh ifname                                the interface name to use inside the hosts
#   cluster.sh pid I|br                              host I's (or the bridge's) holder process, for nsenter -t
#   cluster.sh hosts                                 the number of hosts, when all of them are up
#   cluster.sh status                                what is up; exit status 0 only when all of it is
#
# Network. The hosts' veths ("chorus0" inside each host) meet on a bridge that lives in a namespace of its
# own; host I is 10.231.0.(I+1)/24. Nothing links any of these namespaces to the namespace `up` runs in,
# and no host has a default route, so traffic can only go between the hosts. IPv6 is off inside the hosts.
# The interface name is deliberately not one the real host has: a command that somehow runs outside the
# hosts finds no "chorus0" and fails instead of using a real network.
#
# Host identity. Host I's hostname is chorus-host-I; /proc/sys/kernel/random/boot_id is a random UUID
# bind-mounted over the real one; /dev/shm is a private tmpfs; /sys is remounted so that it shows the
# host's own interfaces; System V IPC is private.
#
# --rate RATE shapes each host's link in both directions with tc tbf (RATE in tc units with an explicit
# unit: 100mbit, 1gbit, 50mbps, ...). --ttl makes the holders exit after SECONDS, so that a run that dies
# without calling `down` (SIGKILL) leaves nothing behind for long: the namespaces die with their holders.
#
# Instances. CHORUS_CLUSTER_NAME (default "chorus") names an instance; its state lives in
# CHORUS_CLUSTER_STATE (default ${TMPDIR:-/tmp}/chorus-cluster-NAME). Instances with different names
# coexist, each with its own bridge: they share the address range but never a network. The namespaces are
# not given names under /run/netns: they exist exactly as long as their holders, so killing the holders is
# the whole teardown.
#
# Exit status 77 from `up` means emulated hosts cannot be made here (not root, a tool or a kernel feature
# is missing, a sandbox forbids namespaces), with a one-line reason on stderr: tests report it as skipped.

# The sh -c scripts are single-quoted on purpose: they expand their own positional parameters.
# `test && test || die` is meant: die when either test fails.
# shellcheck disable=SC2015,SC2016
set -u

ADDR_PREFIX=10.231.0
IFNAME=chorus0
BRIDGE=br0
MAX_HOSTS=250
SKIP=77

NAME=${CHORUS_CLUSTER_NAME:-chorus}
STATE=${CHORUS_CLUSTER_STATE:-${TMPDIR:-/tmp}/chorus-cluster-$NAME}

# Most subcommands run once per rank or per check, so the common paths use shell builtins only, no forks.

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

# The synopsis at the top of this file: on stdout for --help, else on stderr with status 2.
usage() {
    if [ "${1:-}" = help ]; then
        sed -n '5,13s/^# \{0,1\}//p' "$0"
        exit 0
    fi
    sed -n '5,13s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

# Sets START to the start time of process PID (clock ticks since boot) and STAT to its state letter.
proc_start() {
    local line fields
    read -r line 2>/dev/null <"/proc/$1/stat" || return 1
    read -ra fields <<<"${line##*) }" # after the command name, which may hold spaces
    STAT=${fields[0]}
    START=${fields[19]}
}

# Sets HOLDER to the pid of holder WHO (br or a host index) when it is alive and still the process `up`
# started. Pid and start time together name one process, so a recycled pid is never entered: it could
# belong to anything, in any namespace.
holder() {
    local pid start
    HOLDER=''
    read -r pid start 2>/dev/null <"$STATE/holder.$1" || return 1
    proc_start "$pid" && [ "$STAT" != Z ] && [ "$START" = "$start" ] || return 1
    HOLDER=$pid
}

# Run a command in the namespaces of holder WHO.
in_holder() {
    local who=$1
    shift
    holder "$who" || die "the holder of '$who' is gone"
    if [ "$who" = br ]; then
        nsenter -t "$HOLDER" -n -- "$@"
    else
        nsenter -t "$HOLDER" -n -u -m -i -- "$@"
    fi
}

# Sets K to the number of hosts of an instance whose `up` completed.
hosts_up() { read -r K 2>/dev/null <"$STATE/hosts"; }

# ---- up ------------------------------------------------------------------------------------------------

# Leave through here once anything exists: a half-made instance is torn down before exiting.
up_fail() {
    local code=$1
    shift
    echo "cluster.sh: up: $*" >&2
    cmd_down >/dev/null 2>&1
    exit "$code"
}

# Start a holder for WHO with the unshare flags given, and record it.
start_holder() {
    local who=$1 ttl=$2 pid i
    shift 2
    setsid unshare "$@" --propagation private "$SLEEP" "$ttl" </dev/null >/dev/null 2>"$STATE/holder.$who.err" &
    pid=$!
    # unshare execs sleep once the namespaces exist; until then /proc/PID/exe is unshare's.
    for ((i = 0; i < 200; i++)); do
        if ! proc_start "$pid" || [ "$STAT" = Z ]; then
            wait "$pid" 2>/dev/null
            up_fail $SKIP "cannot create namespaces: $(head -n1 "$STATE/holder.$who.err")"
        fi
        if [ "/proc/$pid/exe" -ef "$SLEEP" ] && ! [ "/proc/$pid/ns/net" -ef /proc/$$/ns/net ]; then
            echo "$pid $START" >"$STATE/holder.$who"
            return 0
        fi
        sleep 0.01
    done
    kill -KILL "$pid" 2>/dev/null
    up_fail 1 "holder for $who did not start within 2 seconds"
}

# A tc rate ("100mbit", "1gbit", "50mbps") in bytes per second; fails on anything else.
rate_bytes() {
    local num mult
    [[ $1 =~ ^([0-9]+)([kmgt]?)(bit|bps)$ ]] || return 1
    num=${BASH_REMATCH[1]}
    case ${BASH_REMATCH[2]} in
    '') mult=1 ;; k) mult=1000 ;; m) mult=1000000 ;; g) mult=1000000000 ;; t) mult=1000000000000 ;;
    esac
    if [ "${BASH_REMATCH[3]}" = bit ]; then echo $((num * mult / 8)); else echo $((num * mult)); fi
}

# tbf's bucket for RATE: at least one timer tick's worth at the rate and one GSO packet (64 KiB), so
# 10 ms of traffic but not under 128 KiB.
tbf_burst() {
    local burst
    burst=$(($(rate_bytes "$1") / 100))
    [ "$burst" -ge 131072 ] || burst=131072
    echo "$burst"
}

cmd_up() {
    local k='' rate='' ttl=infinity i err burst tool uuid
    while [ $# -gt 0 ]; do
        case $1 in
        --rate) [ $# -ge 2 ] || usage; rate=$2; shift 2 ;;
        --rate=*) rate=${1#--rate=}; shift ;;
        --ttl) [ $# -ge 2 ] || usage; ttl=$2; shift 2 ;;
        --ttl=*) ttl=${1#--ttl=}; shift ;;
        -*) usage ;;
        *) [ -z "$k" ] || usage; k=$1; shift ;;
        esac
    done
    is_uint "$k" && [ "$k" -ge 1 ] && [ "$k" -le $MAX_HOSTS ] || die "up wants a number of hosts from 1 to $MAX_HOSTS"
    if [ "$ttl" != infinity ] && ! { is_uint "$ttl" && [ "$ttl" -gt 0 ]; }; then
        die "--ttl wants a whole number of seconds above 0"
    fi
    if [ -n "$rate" ]; then rate_bytes "$rate" >/dev/null || die "--rate wants a tc rate with a unit, e.g. 100mbit or 1gbit, not '$rate'"; fi
    [[ $NAME =~ ^[A-Za-z0-9_.-]+$ ]] || die "CHORUS_CLUSTER_NAME may hold only letters, digits, '_', '.' and '-'"

    # Can emulated hosts exist here at all? Anything missing is a reason to skip, not a failure.
    if [ "$(id -u)" != 0 ]; then echo "cluster.sh: up: needs root to create namespaces" >&2; exit $SKIP; fi
    for tool in ip unshare nsenter setsid sleep ${rate:+tc}; do
        if ! command -v "$tool" >/dev/null; then echo "cluster.sh: up: '$tool' is not installed" >&2; exit $SKIP; fi
    done

    if [ -e "$STATE/hosts" ] || [ -e "$STATE/holder.br" ]; then
        if hosts_alive; then die "instance '$NAME' is already up; run 'down' first"; fi
        cmd_down >/dev/null 2>&1 # the remains of an earlier failure
    fi
    mkdir -p "$STATE" || die "cannot create the state directory $STATE"
    trap 'up_fail 130 "interrupted"' INT TERM HUP
    [ -z "$(ls -A "$STATE")" ] || die "state directory $STATE is not empty"

    SLEEP=$(readlink -f "$(command -v sleep)")
    burst=''
    [ -z "$rate" ] || burst=$(tbf_burst "$rate")

    start_holder br "$ttl" --net --uts
    err=$(in_holder br sh -c 'ip link add "$1" type bridge && ip link set "$1" up' sh "$BRIDGE" 2>&1) ||
        up_fail $SKIP "cannot create a bridge: $err"

    for ((i = 0; i < k; i++)); do
        start_holder "$i" "$ttl" --net --uts --mount --ipc
        read -r uuid </proc/sys/kernel/random/uuid && echo "$uuid" >"$STATE/boot_id.$i" || up_fail 1 "cannot draw a boot id"
        holder "$i" || up_fail 1 "host $i's holder died during up (a --ttl shorter than up takes?)"
        # The bridge's end; tc last, so that its failure alone means "no tbf".
        err=$(in_holder br sh -c '
            set -e
            ip link add "$1" type veth peer name "$2" netns "$3"
            ip link set "$1" master "$4" up
            [ -z "$5" ] || tc qdisc add dev "$1" root tbf rate "$5" burst "$6" latency 100ms' \
            sh "vh$i" "$IFNAME" "$HOLDER" "$BRIDGE" "$rate" "$burst" 2>&1) ||
            up_fail $SKIP "cannot connect host $i to the bridge: $err"
        # The host's identity and its end of the link. The bind mount keeps the boot id file's inode, so
        # the state directory may go before the host does.
        err=$(in_holder "$i" sh -c '
            set -e
            echo "chorus-host-$1" >/proc/sys/kernel/hostname
            mount -t tmpfs -o mode=1777,size=25% tmpfs /dev/shm
            mount --bind "$2" /proc/sys/kernel/random/boot_id
            mount -t sysfs sysfs /sys
            echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6 2>/dev/null || true
            echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6 2>/dev/null || true
            ip link set lo up
            ip addr add "$3/24" dev "$4"
            ip link set "$4" up
            [ -z "$5" ] || tc qdisc add dev "$4" root tbf rate "$5" burst "$6" latency 100ms
            n=0
            until [ "$(cat "/sys/class/net/$4/carrier")" = 1 ]; do
                n=$((n + 1))
                [ "$n" -lt 200 ] || { echo "no carrier on $4" >&2; exit 1; }
                sleep 0.01
            done' sh "$i" "$STATE/boot_id.$i" "$ADDR_PREFIX.$((i + 1))" "$IFNAME" "$rate" "$burst" 2>&1) ||
            up_fail $SKIP "cannot set up host $i: $err"
    done
    echo "$rate" >"$STATE/rate"
    echo "$k" >"$STATE/hosts" # written last: its presence means "up completed"
}

# ---- down ----------------------------------------------------------------------------------------------

# The processes in the network namespace of holder pid HOLDER, other than the holder itself. Only asked
# while the holder is alive, so that namespace is certainly still the one `up` made.
members() {
    local p
    for p in /proc/[0-9]*; do
        [ "$p" != "/proc/$1" ] && [ "$p/ns/net" -ef "/proc/$1/ns/net" ] && echo "${p#/proc/}"
    done
}

cmd_down() {
    local f who live=() pids=() pid i left
    [ -d "$STATE" ] || return 0
    for f in "$STATE"/holder.*; do
        who=${f#"$STATE"/holder.}
        [ -e "$f" ] && [[ $who != *.err ]] && holder "$who" && live+=("$who") && pids+=("$HOLDER")
    done
    # Whatever still runs inside a host (a rank, a shell from `exec`) would keep its namespaces alive:
    # SIGTERM, up to a second to go, then SIGKILL.
    for pid in "${pids[@]}"; do
        left=$(members "$pid")
        [ -n "$left" ] || continue
        # shellcheck disable=SC2086 # one word per pid
        kill -TERM $left 2>/dev/null
        for ((i = 0; i < 20; i++)); do
            left=$(members "$pid")
            [ -z "$left" ] && break
            sleep 0.05
        done
        # shellcheck disable=SC2086
        [ -z "$left" ] || kill -KILL $left 2>/dev/null
    done
    [ ${#pids[@]} -eq 0 ] || kill -KILL "${pids[@]}" 2>/dev/null
    # Holders are not our children (up has exited), so wait for them to exit rather than reap them.
    for who in "${live[@]}"; do
        for ((i = 0; i < 250; i++)); do
            holder "$who" || break
            sleep 0.02
        done
        ! holder "$who" || die "down: holder $HOLDER of '$who' will not exit"
    done
    # Only what `up` wrote: the directory may have been named by the user.
    rm -f "$STATE"/holder.* "$STATE"/boot_id.* "$STATE/hosts" "$STATE/rate"
    rmdir "$STATE" 2>/dev/null || die "down: $STATE holds files that are not the cluster's; left in place"
}

# ---- queries -------------------------------------------------------------------------------------------

# Is the instance up, with every holder alive? Sets K.
hosts_alive() {
    local i
    hosts_up && holder br || return 1
    for ((i = 0; i < K; i++)); do holder "$i" || return 1; done
}

# Validate a host index against the instance that is up, and set HOLDER to its holder.
host_index() {
    hosts_up || die "instance '$NAME' is not up (state: $STATE)"
    is_uint "$1" && [ "$1" -lt "$K" ] || die "no host '$1': hosts are 0 to $((K - 1))"
    holder "$1" || die "host $1's holder is gone; run 'down' and 'up' again"
}

cmd_exec() {
    [ $# -ge 3 ] && [ "$2" = -- ] || usage
    local i=$1 v
    shift 2
    host_index "$i"
    # The instance's own variables mean nothing inside a host (and Chorus warns about unknown CHORUS_*).
    for v in "${!CHORUS_CLUSTER_@}"; do unset "$v"; done
    # Entering a mount namespace moves to its root directory; the hosts share the file system, so stay put.
    exec nsenter -t "$HOLDER" -n -u -m -i --wd="$PWD" -- "$@"
}

cmd_status() {
    local i ok=0 rate
    if ! hosts_up; then
        if [ -d "$STATE" ]; then echo "instance '$NAME': half up (state: $STATE); run 'down'"; else echo "instance '$NAME': not up"; fi
        return 1
    fi
    read -r rate 2>/dev/null <"$STATE/rate"
    echo "instance '$NAME': $K hosts, links ${rate:-not rate limited}, state in $STATE"
    if holder br; then echo "  bridge: holder $HOLDER"; else echo "  bridge: GONE"; ok=1; fi
    for ((i = 0; i < K; i++)); do
        if holder "$i"; then
            echo "  host $i: $ADDR_PREFIX.$((i + 1)) on $IFNAME, hostname $(in_holder "$i" cat /proc/sys/kernel/hostname 2>/dev/null), holder $HOLDER"
        else
            echo "  host $i: GONE"
            ok=1
        fi
    done
    return $ok
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
up) cmd_up "$@" ;;
down) [ $# -eq 0 ] || usage; cmd_down ;;
exec) cmd_exec "$@" ;;
addr) [ $# -eq 1 ] || usage; host_index "$1"; echo "$ADDR_PREFIX.$(($1 + 1))" ;;
ifname) [ $# -eq 0 ] || usage; echo "$IFNAME" ;;
pid)
    [ $# -eq 1 ] || usage
    if [ "$1" = br ]; then hosts_up && holder br || die "the bridge's holder is gone or was never up"; else host_index "$1"; fi
    echo "$HOLDER"
    ;;
hosts) [ $# -eq 0 ] || usage; hosts_alive && echo "$K" ;;
status) [ $# -eq 0 ] || usage; cmd_status ;;
-h | --help | help) usage help ;;
*) usage ;;
esac
