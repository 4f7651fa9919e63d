#!/usr/bin/env bash
# The libagg C API used directly (no shim) on 2 and 3 ranks: argument checks,
# caps, two communicators at once, fragment accounting, group re-creation.
. "$(dirname "$0")/lib.sh"

for np in 2 3; do
    "$BIN/aggrun" --stats-file "$TMP/stats$np" -- \
        "${MPIRUN[@]}" -np "$np" -x LD_PRELOAD="${SANITIZER_PRELOAD:-}" "$BIN/agg_api_check" \
        >"$TMP/out$np" 2>&1 || { cat "$TMP/out$np"; fail "agg_api_check failed on $np ranks"; }
    cat "$TMP/out$np"
    expect_clean "$TMP/out$np" agg_api_check "agg_api_check on $np ranks"
    # the world, the two halves, and each half created again
    [ "$(stat groups_total "$TMP/stats$np")" -eq 5 ] || fail "expected 5 groups on $np ranks"
    [ "$(stat errors "$TMP/stats$np")" -eq 0 ] || fail "switchsim saw bad fragments"
done
check_clean "$TMP"/*
echo "PASS"
