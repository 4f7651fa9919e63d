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
echo "PASS"
