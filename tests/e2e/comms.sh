#!/usr/bin/env bash
# Communicators made, used and freed in a loop under the shim: the
# manager's live groups rise while they are in use and come back to where
# they started; with SHARP_COLL_NUM_COLL_GROUP_RESOURCE_ALLOC_THRESHOLD=2
# a communicator gets its group only after two collectives on the host path
# (each use here makes three calls: the third is offloaded). And bcast and
# allgather with a different datatype (same signature) on each rank.
. "$(dirname "$0")/lib.sh"

run() { # name np [mpirun args...]
    local name=$1 np=$2
    shift 2
    "$BIN/aggrun" --stats-file "$TMP/$name.stats" -- "${MPIRUN[@]}" -np "$np" \
        -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 -x AGG_STATS=1 "$@" \
        "$BIN/comm_loop" "$BIN/agg_info" 20 >"$TMP/$name.out" 2>&1 ||
        { cat "$TMP/$name.out"; fail "$name: comm_loop failed"; }
    expect_clean "$TMP/$name.out" comm_loop "$name: wrong results or groups left behind"
    grep -E "^comm_loop: live" "$TMP/$name.out"
}

# the quick tier (lib.sh): 4 ranks only, here and for the layouts
LOOP_NPS=(3 4)
[ $QUICK = 0 ] || LOOP_NPS=(4)
for np in "${LOOP_NPS[@]}"; do
    run loop$np $np
done
[ "$(stat groups_total "$TMP/loop4.stats")" -gt 40 ] || fail "expected a group per communicator and loop"

run lazy 3 -x SHARP_COLL_NUM_COLL_GROUP_RESOURCE_ALLOC_THRESHOLD=2
grep -qE "^agg_stats: allreduce .* why: .*lazy=[1-9]" "$TMP/lazy.out" ||
    { grep agg_stats "$TMP/lazy.out"; fail "no collective counted as waiting for its lazy group"; }
line=$(grep "^agg_stats: allreduce " "$TMP/lazy.out")
case "$line" in *" llt=0 "*) fail "lazy groups: the third allreduce on a communicator was not offloaded: $line" ;; esac
# Datatypes that differ from rank to rank (matching signatures): every rank
# takes the same path (the network), packing where its layout has holes
for np in "${LOOP_NPS[@]}"; do
    "$BIN/aggrun" -- "${MPIRUN[@]}" -np "$np" -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=4 \
        -x HCOLL_SHARP_NP=2 -x AGG_STATS=1 "$BIN/layout_check" >"$TMP/layout$np.out" 2>&1 ||
        { cat "$TMP/layout$np.out"; fail "layout_check at $np ranks failed"; }
    expect_clean "$TMP/layout$np.out" layout_check "layouts at $np ranks: wrong results"
    for coll in bcast allgather; do
        grep -qE "^agg_stats: $coll .* mpi=0" "$TMP/layout$np.out" ||
            { grep agg_stats "$TMP/layout$np.out"; fail "$coll with per-rank layouts left to MPI"; }
    done
done
check_clean "$TMP"/*
echo "PASS"
