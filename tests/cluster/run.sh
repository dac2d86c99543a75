#!/usr/bin/env bash
# Run the ranks of one communicator spread over emulated hosts (see cluster.sh).
#
#   run.sh [OPTIONS] HOSTS RANKS_PER_HOST -- PROGRAM [ARGS...]
#
#   --timeout SECONDS   limit for the whole run; then every rank is killed (default 120)
#   --grace SECONDS     after the first rank fails, how long the others may take to end on their own (and
#                       print why) before they get SIGTERM, then SIGKILL a second later (default 2)
#   --log-dir DIR       rank N's stdout and stderr go to DIR/rank.N.out and DIR/rank.N.err (DIR is made if
#                       missing); the unique id helper's stderr goes to DIR/uid.err
#   --rate RATE         link rate, when run.sh brings the hosts up itself (cluster.sh up --rate)
#   --uid-helper PATH   the cluster_uid program (default: $CHORUS_CLUSTER_UID_HELPER, else cluster_uid
#                       from PATH)
#   --pin               give each host a share of this machine's processors of its own (taskset): with
#                       C processors, host h runs on max(1, C / HOSTS) of them from h * that share (mod
#                       C), so that ranks see the cores their host would have (without it, every host's
#                       ranks count every processor and spin where ranks outnumber the cores in all)
#   --round-robin       rank r on host r % HOSTS, as launchers that deal ranks out to nodes in turn place
#                       them (default: host by host)
#
# Rank r runs on host r / RANKS_PER_HOST with local rank r % RANKS_PER_HOST (--round-robin: on host
# r % HOSTS with local rank r / HOSTS), and finds CHORUS_RANK,
# CHORUS_NRANKS, CHORUS_LOCAL_RANK, CHORUS_UNIQUE_ID and CHORUS_SOCKET_IFNAME (the hosts' interface) in its
# environment, on top of the inherited one. The unique id comes from cluster_uid started inside host 0,
# so the rendezvous root listens on host 0's address; it lives until the ranks have ended.
#
# Hosts. If the instance CHORUS_CLUSTER_NAME (default "chorus") is up with at least HOSTS hosts, the run
# uses it. Otherwise run.sh brings up HOSTS hosts of its own (named CHORUS_CLUSTER_NAME, or unique to this
# run when that is unset) and tears them down when it ends, however it ends.
#
# Exit status: 0 when every rank exits 0; 1 when a rank fails (each failing rank is named on stderr);
# 124 on timeout; 2 for bad usage; 77 when emulated hosts cannot be made here (tests report a skip).

# shellcheck disable=SC2015 # `test && test || die` is meant: die when either test fails
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$HERE/cluster.sh

timeout_s=120
grace_s=2
log_dir=''
rate=''
uid_helper=${CHORUS_CLUSTER_UID_HELPER:-}
pin=''
round_robin=''

# The synopsis at the top of this file: on stdout for --help, else on stderr with status 2.
usage() {
    if [ "${1:-}" = help ]; then
        sed -n '4,20s/^# \{0,1\}//p' "$0"
        exit 0
    fi
    sed -n '4,20s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

die() {
    echo "run.sh: $*" >&2
    exit 2
}

is_num() { [[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]]; }

while [ $# -gt 0 ]; do
    case $1 in
    --timeout) [ $# -ge 2 ] || usage; timeout_s=$2; shift 2 ;;
    --grace) [ $# -ge 2 ] || usage; grace_s=$2; shift 2 ;;
    --log-dir) [ $# -ge 2 ] || usage; log_dir=$2; shift 2 ;;
    --rate) [ $# -ge 2 ] || usage; rate=$2; shift 2 ;;
    --uid-helper) [ $# -ge 2 ] || usage; uid_helper=$2; shift 2 ;;
    --pin) pin=yes; shift ;;
    --round-robin) round_robin=yes; shift ;;
    -h | --help) usage help ;;
    -*) die "unknown option '$1'" ;;
    *) break ;;
    esac
done
[ $# -ge 4 ] && [ "$3" = -- ] || usage
hosts=$1
per_host=$2
shift 3
[[ $hosts =~ ^[1-9][0-9]*$ ]] || die "HOSTS wants a number of at least 1, not '$hosts'"
[[ $per_host =~ ^[1-9][0-9]*$ ]] || die "RANKS_PER_HOST wants a number of at least 1, not '$per_host'"
is_num "$timeout_s" && [ "$timeout_s" != 0 ] || die "--timeout wants a number of seconds above 0"
is_num "$grace_s" || die "--grace wants a number of seconds"
[ -n "$uid_helper" ] || uid_helper=$(command -v cluster_uid) || die "cluster_uid not found: use --uid-helper"
[ -x "$uid_helper" ] || die "the uid helper '$uid_helper' is not an executable file"
if [ -n "$log_dir" ]; then
    mkdir -p "$log_dir" || die "cannot create the log directory '$log_dir'"
fi
nranks=$((hosts * per_host))
for tool in setsid setpriv; do
    if ! command -v "$tool" >/dev/null; then
        echo "run.sh: '$tool' is not installed" >&2
        exit 77 # like any other missing piece of the emulated hosts: the test is skipped
    fi
done

# ---- the hosts -----------------------------------------------------------------------------------------

own_cluster=0
user_named=${CHORUS_CLUSTER_NAME:+yes}
export CHORUS_CLUSTER_NAME=${CHORUS_CLUSTER_NAME:-chorus}
if have=$("$CLUSTER" hosts 2>/dev/null); then
    [ "$have" -ge "$hosts" ] || die "instance '$CHORUS_CLUSTER_NAME' has $have hosts, not the $hosts asked for"
else
    # Unnamed, our hosts must not collide with another run's.
    [ -n "$user_named" ] || CHORUS_CLUSTER_NAME=run-$$
    own_cluster=1
fi

# Everything started below is stopped on the way out; the hosts go too when they are ours.
declare -A rank_of=() # pid -> rank, for the ranks still running
rank_pids=()          # every rank started, each the leader of its own process group
uid_pid=''

signal_ranks() {
    local pid
    for pid in "${rank_pids[@]}"; do kill "-$1" -- "-$pid" 2>/dev/null; done
}

# shellcheck disable=SC2317 # reached through the traps
cleanup() {
    trap '' INT TERM HUP
    if [ ${#rank_of[@]} -gt 0 ]; then
        signal_ranks TERM
        sleep 0.5
    fi
    [ ${#rank_pids[@]} -eq 0 ] || signal_ranks KILL # also whatever a finished rank left behind
    if [ -n "$uid_pid" ]; then
        [ -z "${UIDP[1]:-}" ] || eval "exec ${UIDP[1]}>&-"
        kill "$uid_pid" 2>/dev/null
    fi
    wait 2>/dev/null
    [ "$own_cluster" = 0 ] || "$CLUSTER" down
}
# shellcheck disable=SC2317
on_signal() {
    echo "run.sh: interrupted; stopping every rank" >&2
    exit 130
}
trap cleanup EXIT
trap on_signal INT TERM HUP

if [ "$own_cluster" = 1 ]; then
    ttl=$(awk -v t="$timeout_s" 'BEGIN { printf "%d", t + 60 }') # the holders outlive a SIGKILLed run.sh by a minute at most
    "$CLUSTER" up "$hosts" --ttl "$ttl" ${rate:+--rate "$rate"}
    rc=$?
    if [ "$rc" != 0 ]; then
        own_cluster=0 # a failed up has torn itself down
        exit "$rc"
    fi
elif [ -n "$rate" ]; then
    echo "run.sh: --rate ignored: instance '$CHORUS_CLUSTER_NAME' is already up with its own rate" >&2
fi
ifname=$("$CLUSTER" ifname)

# ---- the unique id -------------------------------------------------------------------------------------

# Each process gets SIGKILL should run.sh die, even by SIGKILL; cluster.sh exec hands over its pid (exec).
uid_cmd=(setpriv --pdeathsig KILL "$CLUSTER" exec 0 -- env CHORUS_SOCKET_IFNAME="$ifname" "$uid_helper" "$timeout_s")
if [ -n "$log_dir" ]; then
    coproc UIDP { exec "${uid_cmd[@]}" 2>"$log_dir/uid.err"; }
else
    coproc UIDP { exec "${uid_cmd[@]}"; }
fi
uid_pid=$UIDP_PID
if ! read -r -t 30 -u "${UIDP[0]}" uid || [ -z "$uid" ]; then
    echo "run.sh: cluster_uid made no unique id inside host 0${log_dir:+ (see $log_dir/uid.err)}" >&2
    exit 1
fi

# ---- the ranks -----------------------------------------------------------------------------------------

# The processors of each host (--pin): a share of this machine's, as a taskset list.
host_cpus() {
    local ncpu share first c list=''
    ncpu=$(nproc)
    share=$((ncpu / hosts))
    [ "$share" -ge 1 ] || share=1
    first=$(($1 * share))
    for ((c = 0; c < share; c++)); do list+=${list:+,}$(((first + c) % ncpu)); done
    echo "$list"
}

# Rank r's host and local rank.
host_of() { if [ -n "$round_robin" ]; then echo $(($1 % hosts)); else echo $(($1 / per_host)); fi; }
local_of() { if [ -n "$round_robin" ]; then echo $(($1 / hosts)); else echo $(($1 % per_host)); fi; }

for ((r = 0; r < nranks; r++)); do
    pin_cmd=()
    [ -z "$pin" ] || pin_cmd=(taskset -c "$(host_cpus "$(host_of $r)")")
    # setsid makes the rank the leader of its own process group, so that signalling the group reaches
    # whatever it started too (PROGRAM may be a shell script).
    rank_cmd=(setsid setpriv --pdeathsig KILL "$CLUSTER" exec "$(host_of $r)" -- env CHORUS_RANK="$r"
        CHORUS_NRANKS="$nranks" CHORUS_LOCAL_RANK="$(local_of $r)" CHORUS_UNIQUE_ID="$uid"
        CHORUS_SOCKET_IFNAME="$ifname" "${pin_cmd[@]}" "$@")
    if [ -n "$log_dir" ]; then
        "${rank_cmd[@]}" </dev/null >"$log_dir/rank.$r.out" 2>"$log_dir/rank.$r.err" &
    else
        "${rank_cmd[@]}" </dev/null &
    fi
    rank_of[$!]=$r
    rank_pids+=("$!")
done

# ---- supervision ---------------------------------------------------------------------------------------

# Seconds ("2", "0.5") to microseconds, the unit of the clock below.
to_us() {
    [[ $1 =~ ^([0-9]+)(\.([0-9]{0,6}))? ]]
    local frac=${BASH_REMATCH[3]}000000
    echo $((10#${BASH_REMATCH[1]} * 1000000 + 10#${frac:0:6}))
}
now_us() { NOW=${EPOCHREALTIME/./}; }

describe() { # exit status -> words
    if [ "$1" -gt 128 ]; then
        echo "was killed by signal $(kill -l "$(($1 - 128))" 2>/dev/null || echo "$(($1 - 128))")"
    else
        echo "exited with status $1"
    fi
}

# Polled rather than `wait -n`: bash drops a job killed by a signal from the job table, and `wait -n`
# then loses it, while `wait PID` still has its status. A rank that `kill -0` no longer finds has been
# reaped by bash, so `wait PID` returns at once.
# Phases: running until the timeout or the first failure; grace while the others may end on their own;
# term once they got SIGTERM; killed once they got SIGKILL. Each phase ends at $deadline.
phase=running
failed=()
timed_out=0
now_us
deadline=$((NOW + $(to_us "$timeout_s")))
while :; do
    for pid in "${!rank_of[@]}"; do
        kill -0 "$pid" 2>/dev/null && continue
        wait "$pid"
        st=$?
        r=${rank_of[$pid]}
        unset "rank_of[$pid]"
        # Ranks stopped by run.sh are not the cause of anything.
        [ "$st" = 0 ] || [ "$phase" = term ] || [ "$phase" = killed ] || {
            failed+=("$r")
            echo "run.sh: rank $r (host $(host_of $r)) $(describe "$st")" >&2
            if [ -n "$log_dir" ] && [ -s "$log_dir/rank.$r.err" ]; then
                tail -n 5 "$log_dir/rank.$r.err" | sed "s/^/  rank $r: /" >&2
            fi
            if [ "$phase" = running ]; then
                phase=grace
                now_us
                deadline=$((NOW + $(to_us "$grace_s")))
            fi
        }
    done
    [ ${#rank_of[@]} -gt 0 ] || break
    now_us
    if [ "$NOW" -ge "$deadline" ]; then
        case $phase in
        running | grace)
            if [ "$phase" = running ]; then
                timed_out=1
                echo "run.sh: timed out after ${timeout_s}s; ranks still running: $(printf '%s\n' "${rank_of[@]}" | sort -n | tr '\n' ' ')" >&2
            fi
            signal_ranks TERM
            phase=term
            deadline=$((NOW + 1000000))
            ;;
        term)
            signal_ranks KILL
            phase=killed
            deadline=$((NOW + 5000000))
            ;;
        killed)
            echo "run.sh: ranks survive SIGKILL: ${rank_of[*]}" >&2
            exit 1
            ;;
        esac
    fi
    sleep 0.05
done

if [ "$timed_out" = 1 ]; then exit 124; fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "run.sh: ${#failed[@]} of $nranks ranks failed: ${failed[*]}" >&2
    exit 1
fi
exit 0
