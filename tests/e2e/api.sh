#!/usr/bin/env bash
# The libagg C API used directly (no shim) on 2 and 3 ranks, without and with
# SAT: argument checks, caps, two communicators at once, fragment accounting,
# group re-creation, float16/bfloat16, requests completed out of order, the
# tree chosen per call, device pointers refused, MINLOC pairs.
. "$(dirname "$0")/lib.sh"

for np in 2 3 2sat 3sat; do
    env=()
    [ "${np%sat}" = "$np" ] || env=(-x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096)
    "$BIN/aggrun" --stats-file "$TMP/stats$np" -- \
        "${MPIRUN[@]}" -np "${np%sat}" -x LD_PRELOAD="${SANITIZER_PRELOAD:-}" "${env[@]}" \
        "$BIN/agg_api_check" >"$TMP/out$np" 2>&1 ||
        { cat "$TMP/out$np"; fail "agg_api_check failed on $np ranks"; }
    cat "$TMP/out$np"
    expect_clean "$TMP/out$np" agg_api_check "agg_api_check on $np ranks"
    # the world, the two halves, and each half created again
    total=$(stat groups_total "$TMP/stats$np")
    if [ "${np%sat}" = "$np" ]; then
        [ "$total" -eq 5 ] || fail "expected 5 groups on $np ranks, got $total"
    else
        # SAT parts too, as far as two SAT flows per switch allow
        [ "$total" -gt 5 ] && [ "$total" -le 10 ] || fail "expected 6..10 groups on $np ranks, got $total"
        [ "$(stat sat_chunks_in "$TMP/stats$np")" -gt 0 ] || fail "no SAT chunk on $np ranks"
    fi
    [ "$(stat errors "$TMP/stats$np")" -eq 0 ] || fail "switchsim saw bad fragments"
done
check_clean "$TMP"/*
echo "PASS"
