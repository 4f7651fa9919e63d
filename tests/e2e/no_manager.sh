#!/usr/bin/env bash
# What HCOLL_ENABLE_SHARP promises when the network cannot be had.
# No manager running: 1 gives one warning and the host path with right
# results; 3 a clear error naming the address tried. A manager with no
# switchsim (every group refused): 1 and 2 run on the host, exit 0, the
# calls counted with their reason; 3 fails the job, the error saying which
# setting forced it and why the communicator has no group. Settings that
# cannot be read: 1 runs on the host, 3 stops with the bad setting named.
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

# a manager that refuses every group: no switchsim has registered with it
"$BIN/aggmgr" --listen 127.0.0.1:0 --ready-fd 3 3>"$TMP/mgr.ready" >"$TMP/mgr.log" 2>&1 &
mgr=$!
for _ in $(seq 250); do grep -q : "$TMP/mgr.ready" && break; sleep 0.02; done
mgr_addr=$(head -1 "$TMP/mgr.ready")
[ -n "$mgr_addr" ] || { cat "$TMP/mgr.log"; fail "aggmgr did not start"; }
for level in 1 2; do
    "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=$level \
        -x AGG_AM_ADDR="$mgr_addr" -x AGG_STATS=1 -x HCOLL_SHARP_NP=2 \
        "$BIN/allreduce_check" --max-count 1000 --world-only >"$TMP/nosim$level" 2>&1 ||
        { cat "$TMP/nosim$level"; fail "HCOLL_ENABLE_SHARP=$level, groups refused: the job failed"; }
    expect_clean "$TMP/nosim$level" allreduce_check "HCOLL_ENABLE_SHARP=$level, groups refused: wrong results"
    grep -Eq "^agg_stats: allreduce calls=[0-9]+ llt=0 .* failed=0 why: .*(network_error|resources)=[1-9]" \
        "$TMP/nosim$level" || { grep agg_stats "$TMP/nosim$level"; fail "HCOLL_ENABLE_SHARP=$level: the host calls not counted with their reason"; }
done
if "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 \
    -x AGG_AM_ADDR="$mgr_addr" "$BIN/allreduce_check" --max-count 10 --world-only \
    >"$TMP/nosim3" 2>&1; then
    cat "$TMP/nosim3"
    fail "HCOLL_ENABLE_SHARP=3 with every group refused succeeded (ran on the host)"
fi
cat "$TMP/nosim3"
grep -q "HCOLL_ENABLE_SHARP=3 forces collectives into the network, but allreduce on a communicator of 2 ranks cannot have it: the communicator has no group on the tree" \
    "$TMP/nosim3" || fail "HCOLL_ENABLE_SHARP=3, groups refused: no error saying so"
[ "$(grep -c 'forces collectives into the network' "$TMP/nosim3")" -eq 1 ] ||
    fail "HCOLL_ENABLE_SHARP=3, groups refused: the error not said once"
grep -q "no switchsim is registered" "$TMP/mgr.log" || fail "aggmgr did not say why it refused"
kill $mgr

# settings that cannot be read
for level in 1 3; do
    rc=0
    "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=$level \
        -x AGG_AM_ADDR=$addr -x SHARP_COLL_OSTS_PER_GROUP=lots \
        "$BIN/allreduce_check" --max-count 10 --world-only >"$TMP/bad$level" 2>&1 || rc=$?
    grep -q "SHARP_COLL_OSTS_PER_GROUP" "$TMP/bad$level" ||
        { cat "$TMP/bad$level"; fail "HCOLL_ENABLE_SHARP=$level: the bad setting not named"; }
    if [ $level = 1 ]; then
        [ $rc = 0 ] || { cat "$TMP/bad$level"; fail "HCOLL_ENABLE_SHARP=1 with a bad setting failed"; }
        expect_clean "$TMP/bad$level" allreduce_check "HCOLL_ENABLE_SHARP=1, a bad setting: wrong results"
    else
        [ $rc != 0 ] || { cat "$TMP/bad$level"; fail "HCOLL_ENABLE_SHARP=3 with a bad setting ran on the host"; }
        grep -q "HCOLL_ENABLE_SHARP=3 requires in-network aggregation" "$TMP/bad$level" ||
            { cat "$TMP/bad$level"; fail "HCOLL_ENABLE_SHARP=3 with a bad setting: no error saying so"; }
    fi
done
check_clean "$TMP"/*
echo "PASS"
