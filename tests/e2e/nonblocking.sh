#!/usr/bin/env bash
# Non-blocking allreduces (MPI_Iallreduce through the shim) completed out
# of order with every MPI wait and test call, next to point-to-point
# requests; communicators over the same ranks competing for the SAT lock,
# taking turns with SHARP_COLL_SAT_LOCK_BATCH_SIZE=1 and falling back to
# the LLT (once said why) when one keeps it.
. "$(dirname "$0")/lib.sh"

run_nb() { # name np [mpirun args...]
    local name=$1 np=$2
    shift 2
    "$BIN/aggrun" --stats-file "$TMP/$name.stats" -- "${MPIRUN[@]}" -np "$np" \
        -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_LOG_LEVEL=3 "$@" \
        "$BIN/nb_check" --rounds 3 ${NB_ARGS:-} >"$TMP/$name.out" 2>&1 ||
        { cat "$TMP/$name.out"; fail "$name: nb_check failed"; }
    expect_clean "$TMP/$name.out" nb_check "$name: wrong results"
    grep -E "^nb_check" "$TMP/$name.out"
}
SAT=(-x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096)

run_nb llt 2 -x AGG_STATS=1
# ranks 3 s apart with a 2 s timeout: only a request somebody waits for may time out
NB_ARGS="--rounds 1 --skew-ms 3000" run_nb skew 2 -x AGG_COLL_TIMEOUT_MS=2000
[ "$(stat sat_chunks_in "$TMP/llt.stats")" -eq 0 ] || fail "SAT used though not enabled"
grep -q "[1-9][0-9]* non-blocking" "$TMP/llt.out" || fail "no MPI_Iallreduce was offloaded"
# communicators get their group when they are made (threshold 0, the default): a
# non-blocking call as the first on one is offloaded, none goes to Open MPI as "lazy"
if grep '^agg_stats' "$TMP/llt.out" | grep -q 'lazy='; then
    grep '^agg_stats' "$TMP/llt.out"
    fail "a non-blocking call on a new communicator went to Open MPI (lazy)"
fi
# nb_check's reduce-scatters and allgathers (blocks alike and not, blocking and not,
# allgatherv's at displacements of their own): the tree took every one
for coll in ireduce_scatter_block reduce_scatter ireduce_scatter iallgather allgatherv \
    iallgatherv; do
    grep -Eq "^agg_stats: $coll calls=([1-9][0-9]*) llt=\1 .*mpi=0" "$TMP/llt.out" ||
        { grep '^agg_stats' "$TMP/llt.out"; fail "not every $coll was offloaded"; }
done

# the quick tier (lib.sh): 2 ranks (sat.np4 has SAT across leaves)
NPS=(2 4)
[ $QUICK = 0 ] || NPS=(2)
for np in "${NPS[@]}"; do
    run_nb batch1_$np $np "${SAT[@]}" -x SHARP_COLL_SAT_LOCK_BATCH_SIZE=1
    granted=$(stat locks_granted "$TMP/batch1_$np.stats")
    [ "$granted" -gt 10 ] || fail "batch size 1: only $granted lock grants, communicators did not take turns"

    run_nb keep_$np $np "${SAT[@]}" -x AGG_STATS=1
    [ "$(stat locks_granted "$TMP/keep_$np.stats")" -eq 1 ] || fail "unlimited batch: the lock changed hands"
    [ "$(stat locks_busy "$TMP/keep_$np.stats")" -gt 0 ] || fail "unlimited batch: nobody was refused"
    [ "$(grep -c 'goes to the LLT instead of SAT' "$TMP/keep_$np.out")" -ge 1 ] ||
        fail "a communicator refused the SAT lock did not say why it used the LLT"
    # at most two SAT groups per switch (an_sat_flows): the others say so
    [ "$(grep -c 'has no SAT group' "$TMP/keep_$np.out")" -ge 1 ] ||
        fail "no communicator reported the SAT-flow limit"
    # and its large calls, which went to the LLT, say so in AGG_STATS, with
    # the reason aggmgr gave (sat_flows: a switch's SAT flows were taken)
    grep -Eq "^agg_stats: i?allreduce .* why: (.* )?sat_flows=[1-9]" "$TMP/keep_$np.out" ||
        { grep '^agg_stats' "$TMP/keep_$np.out"; fail "calls of a communicator without SAT not counted sat_flows"; }
done
[ "$(stat sat_groups "$TMP/keep_2.stats")" -eq 0 ] # none left at the end
check_clean "$TMP"/*
echo "PASS"
