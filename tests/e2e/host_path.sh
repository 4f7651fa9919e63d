#!/usr/bin/env bash
# The host path: with HCOLL_ENABLE_SHARP=0 nothing reaches switchsim, and
# types/ops the network cannot reduce (MINLOC pairs, long double, derived
# types, user ops) stay on the host even when forced; results are right.
. "$(dirname "$0")/lib.sh"

"$BIN/aggrun" --stats-file "$TMP/stats0" -- \
    "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=0 \
    "$BIN/allreduce_check" --max-count 4099 --world-only >"$TMP/out0" 2>&1 ||
    { cat "$TMP/out0"; fail "HCOLL_ENABLE_SHARP=0 run failed"; }
grep -Eq '^allreduce_check: [1-9][0-9]* passed, 0 failed$' "$TMP/out0" || fail "wrong results with HCOLL_ENABLE_SHARP=0"
[ "$(stat fragments_in "$TMP/stats0")" -eq 0 ] || fail "HCOLL_ENABLE_SHARP=0 still sent fragments"
[ "$(stat groups_total "$TMP/stats0")" -eq 0 ] || fail "HCOLL_ENABLE_SHARP=0 still created groups"

"$BIN/aggrun" --stats-file "$TMP/stats3" -- \
    "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 \
    "$BIN/allreduce_check" --unsupported-only >"$TMP/out3" 2>&1 ||
    { cat "$TMP/out3"; fail "unsupported-type run failed"; }
grep -Eq '^allreduce_check: [1-9][0-9]* passed, 0 failed$' "$TMP/out3" || { cat "$TMP/out3"; fail "wrong results for unsupported types"; }
[ "$(stat fragments_in "$TMP/stats3")" -eq 0 ] || fail "an unsupported type was sent to switchsim"

# MPI_THREAD_MULTIPLE: the offload steps aside (one warning), results right
"$BIN/aggrun" --stats-file "$TMP/statsmt" -- \
    "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 \
    "$BIN/allreduce_check" --max-count 257 --world-only --thread-multiple >"$TMP/outmt" 2>&1 ||
    { cat "$TMP/outmt"; fail "MPI_THREAD_MULTIPLE run failed"; }
grep -Eq '^allreduce_check: [1-9][0-9]* passed, 0 failed$' "$TMP/outmt" || fail "wrong results under MPI_THREAD_MULTIPLE"
[ "$(stat fragments_in "$TMP/statsmt")" -eq 0 ] || fail "offloaded under MPI_THREAD_MULTIPLE"
[ "$(grep -c 'MPI_THREAD_MULTIPLE' "$TMP/outmt")" -eq 1 ] || fail "expected one warning about MPI_THREAD_MULTIPLE"

# Out of quota: the job may hold one group. MPI_COMM_WORLD takes it; the
# split communicators are refused and stay on the host path, still right.
"$BIN/aggrun" --stats-file "$TMP/statsq" -- \
    "${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 \
    -x SHARP_COLL_JOB_QUOTA_MAX_GROUPS=1 -x SHARP_COLL_LOG_LEVEL=3 \
    "$BIN/allreduce_check" --max-count 257 >"$TMP/outq" 2>&1 ||
    { cat "$TMP/outq"; fail "quota run failed"; }
grep -Eq '^allreduce_check: [1-9][0-9]* passed, 0 failed$' "$TMP/outq" || { cat "$TMP/outq"; fail "wrong results when out of quota"; }
[ "$(stat groups_total "$TMP/statsq")" -eq 1 ] || fail "expected exactly one group within the quota"
[ "$(stat fragments_in "$TMP/statsq")" -gt 0 ] || fail "the world communicator was not offloaded"
grep -q "not offloaded: quota exceeded" "$TMP/outq" || { cat "$TMP/outq"; fail "no message saying why a communicator was not offloaded"; }
# SHARP's INFO lines at SHARP_COLL_LOG_LEVEL=3, once each, from rank 0 only
count() { grep -cE "$1" "$TMP/outq" || true; }
[ "$(count 'libagg:0:.*INFO job \(ID: [0-9]+\) resource request quota: \( osts:0 user_data_per_ost:0 max_groups:1 max_qps:1 max_group_channels:1, num_trees:1\)')" -eq 1 ] ||
    fail "no single job quota INFO line"
[ "$(count 'libagg:0:.*INFO tree_info: type:LLT tree idx:0 treeID:0x[0-9a-f]+ caps:0x6 quota: \( osts:204 user_data_per_ost:4096 max_groups:1 ')" -eq 1 ] ||
    fail "no single tree_info INFO line"
[ "$(count 'libagg:0:.*INFO \[group#:0\] group id:[0-9a-f]+ tree idx:0 tree_type:LLT rail_idx:0 group size:4 quota: \(osts:8 user_data_per_ost:4096\)')" -eq 1 ] ||
    fail "no single group INFO line"
[ "$(count 'libagg:[1-9][0-9]*:.*INFO (job|tree_info|\[group#)')" -eq 0 ] || fail "SHARP's INFO lines from ranks other than 0"

check_clean "$TMP"/*
echo "PASS"
