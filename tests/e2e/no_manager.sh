#!/usr/bin/env bash
# No manager running. HCOLL_ENABLE_SHARP=1: one warning, host path, right
# results. HCOLL_ENABLE_SHARP=3: a clear error naming the address tried.
. "$(dirname "$0")/lib.sh"
port=$(free_port)
addr=127.0.0.1:$port

"${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=1 -x AGG_AM_ADDR=$addr \
    -x AGG_CONNECT_TIMEOUT_MS=500 \
    "$BIN/allreduce_check" --max-count 1000 --world-only >"$TMP/out1" 2>&1 ||
    { cat "$TMP/out1"; fail "HCOLL_ENABLE_SHARP=1 without a manager failed"; }
cat "$TMP/out1"
expect_clean "$TMP/out1" allreduce_check "wrong results on the host path"
warnings=$(grep -c 'not available' "$TMP/out1" || true)
[ "$warnings" -eq 1 ] || fail "expected exactly one warning, got $warnings"
grep -q "$addr" "$TMP/out1" || fail "the warning does not name $addr"

if "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 -x AGG_AM_ADDR=$addr \
    -x AGG_CONNECT_TIMEOUT_MS=500 \
    "$BIN/allreduce_check" --max-count 10 --world-only >"$TMP/out3" 2>&1; then
    cat "$TMP/out3"
    fail "HCOLL_ENABLE_SHARP=3 without a manager succeeded"
fi
cat "$TMP/out3"
grep -q "HCOLL_ENABLE_SHARP=3" "$TMP/out3" || fail "the error does not say which setting forced it"
grep -q "$addr" "$TMP/out3" || fail "the error does not name the address $addr"
check_clean "$TMP"/*
echo "PASS"
