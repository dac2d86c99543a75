#!/usr/bin/env bash
# Buffers from chorus_mem_alloc (test_shared_buffers checks every value): on one host with single-copy
# reads, each rank must map its peers' shared buffers (an INFO SHM line per mapping), the ranks must switch
# to single copy together where every rank's buffers are shared (a DEBUG TUNING line per call from 1 MiB
# where selection chose another algorithm: on 3 and 4 ranks) and not where some are not; with single copy off (rank 1 in a pid namespace of its own) nothing is mapped
# and every value is still right.
# usage: shared_buffers.sh CHORUSRUN TEST_SHARED_BUFFERS
set -u
chorusrun=$1 prog=$2
fail=0
for n in 2 3 4; do
    out=$(CHORUS_LOG_LEVEL=DEBUG CHORUS_LOG_SUBSYS=SHM,TUNING timeout 120 "$chorusrun" -n $n "$prog" 2>&1)
    rc=$?
    [ $rc = 0 ] || { echo "FAILED ($n ranks): test_shared_buffers exited with $rc"; fail=1; }
    [ "$(grep -c 'shared buffers ok' <<< "$out")" = $n ] || { echo "FAILED ($n ranks): not every rank ok"; fail=1; }
    grep -q "\[1\] CHORUS INFO SHM mapped rank 0's buffer of" <<< "$out" ||
        { echo "FAILED ($n ranks): rank 1 did not map rank 0's buffers"; fail=1; }
    # On 2 ranks the rules take single copy at these sizes already: nothing to switch.
    if [ $n -gt 2 ]; then
        grep -q "every rank's buffers from chorus_mem_alloc, single copy" <<< "$out" ||
            { echo "FAILED ($n ranks): no switch to single copy"; fail=1; }
        grep -q "not every rank's buffers from chorus_mem_alloc, as selected" <<< "$out" ||
            { echo "FAILED ($n ranks): the rounds with some ranks' buffers on the heap did not stay as selected"; fail=1; }
        # Rank 1's agreements: none below 1 MiB before the first where every rank said yes; some after.
        grep "\[1\] CHORUS DEBUG TUNING" <<< "$out" | grep "rank's buffers from chorus_mem_alloc" | awk '
            { match($0, /of [0-9]+ bytes/); b = substr($0, RSTART + 3, RLENGTH - 9) + 0 }
            !yes && b < 1048576 { early = 1 }
            yes && b < 1048576 && /every rank.s buffers from chorus_mem_alloc, single copy/ && !/not every/ { later = 1 }
            /: every rank.s buffers/ { yes = 1 }
            END { exit !(later && !early) }' ||
            { echo "FAILED ($n ranks): the threshold did not move from 1 MiB to 64 KiB at the first agreement"; fail=1; }
    fi
    grep -q "cannot map" <<< "$out" && { echo "FAILED ($n ranks): a mapping failed"; fail=1; }
    [ $fail = 0 ] || { echo "$out" | grep -v DEBUG | tail -20; break; }
done
# The single-copy AllReduce and AllGather forced at every size on 3 ranks, shared buffers or not: within one
# call some ranks write their block or slice into the peers' outputs and others have it read (and the
# ReduceScatter reads some peers' blocks out of mappings and others with process_vm_readv).
if [ $fail = 0 ]; then
    out=$(CHORUS_ALGO='allreduce:cma;allgather:cma;reduce_scatter:cma;reduce:cma' timeout 120 "$chorusrun" -n 3 "$prog" 2>&1)
    rc=$?
    [ $rc = 0 ] && [ "$(grep -c 'shared buffers ok' <<< "$out")" = 3 ] ||
        { echo "FAILED (single copy forced): exit status $rc"; echo "$out" | tail -20; fail=1; }
fi
if unshare --pid --fork true 2> /dev/null; then
    out=$(CHORUS_LOG_LEVEL=INFO CHORUS_LOG_SUBSYS=SHM timeout 120 "$chorusrun" -n 3 \
        sh -c 'if [ "$CHORUS_RANK" = 1 ]; then exec unshare --pid --fork "$@"; fi; exec "$@"' sh "$prog" 2>&1)
    rc=$?
    [ $rc = 0 ] || { echo "FAILED (no single copy): test_shared_buffers exited with $rc"; fail=1; }
    grep -q "no single-copy reads between ranks" <<< "$out" || { echo "FAILED: single copy was not off"; fail=1; }
    grep -q "mapped rank" <<< "$out" && { echo "FAILED: a buffer was mapped without single copy"; fail=1; }
    [ $fail = 0 ] || echo "$out" | tail -20
else
    echo "cannot make a pid namespace here: the case without single copy skipped"
fi
[ $fail = 0 ] && echo "shared buffers: ok"
exit $fail
