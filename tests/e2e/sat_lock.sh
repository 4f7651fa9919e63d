#!/usr/bin/env bash
# The SAT lock across jobs: two jobs whose trees share switches (a fabric of
# two leaves under one spine, ranks spread over the leaves). While one job
# holds the lock the other's SAT operations are refused, retried and go to
# the LLT, right and saying why; once the holder is killed the lock comes
# back (its groups are torn down or its dead member seen) and the next job
# streams. SHARP_COLL_LOCK_ON_COMM_INIT takes it at creation.
. "$(dirname "$0")/lib.sh"

JOB=(-np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_ENABLE_SAT=1
     -x SHARP_COLL_SAT_THRESHOLD=4096 -x AGG_PLACEMENT=spread -x SHARP_COLL_LOG_LEVEL=3)
MPIRUN_LINE="${MPIRUN[*]}"
JOB_LINE="${JOB[*]}"
export BIN TMP
"$BIN/aggrun" --fat-tree 2:1:4 --stats-file "$TMP/stats" -- bash -c "
    set -u
    $MPIRUN_LINE $JOB_LINE -x SHARP_COLL_LOCK_ON_COMM_INIT=1 \"$BIN/sat_hold\" \"$TMP/ready\" 60 \
        >\"$TMP/holder.out\" 2>&1 &
    holder=\$!
    for i in \$(seq 300); do [ -e \"$TMP/ready\" ] && break; sleep 0.1; done
    [ -e \"$TMP/ready\" ] || { echo 'the holder never got ready'; exit 1; }
    $MPIRUN_LINE $JOB_LINE -x AGG_SAT_LOCK_RETRIES=2 \"$BIN/allreduce_check\" --max-count 65549 --world-only \
        >\"$TMP/refused.out\" 2>&1 || exit 2
    pkill -9 -x sat_hold
    wait \$holder
    sleep 0.5
    $MPIRUN_LINE $JOB_LINE -x AGG_SAT_LOCK_RETRIES=0 \"$BIN/allreduce_check\" --max-count 65549 --world-only \
        >\"$TMP/after.out\" 2>&1 || exit 3
" || { cat "$TMP"/*.out; fail "the jobs did not run through (status $?)"; }
expect_clean "$TMP/refused.out" allreduce_check "refused job: wrong results"
expect_clean "$TMP/after.out" allreduce_check "job after the holder: wrong results"
grep -q "tree_type:SAT" "$TMP/refused.out" || fail "the second job had no SAT group"
grep -q "goes to the LLT instead of SAT: SAT lock held by another group" "$TMP/refused.out" ||
    fail "the refused job did not say why it used the LLT"
! grep -q "goes to the LLT instead of SAT" "$TMP/after.out" ||
    { grep "goes to the LLT" "$TMP/after.out"; fail "the lock of the killed job was not returned"; }
[ "$(stat locks_busy "$TMP/stats")" -gt 0 ] || fail "no lock request was refused"
[ "$(stat locks_granted "$TMP/stats")" -ge 2 ] || fail "the lock was not granted again"
check_clean "$TMP"/*
echo "PASS"
