#!/usr/bin/env bash
# A switchsim whose control connection to a living aggmgr breaks, both
# processes living on: aggmgr keeps its groups for am_sim_grace_ms while it
# registers again (tests/e2e/mgr_simaway.py: kept, expired, no grace). Then
# a real job across the cut: 4 ranks making checked allreduces at
# HCOLL_ENABLE_SHARP=3 (nothing may fall back to the host) while a relay
# between switchsim and aggmgr cuts their connection: every result right, no
# call failed, the groups kept.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "no python3"
python3 "$(dirname "$0")/mgr_simaway.py" "$BIN" "$TMP" || {
    for f in "$TMP"/*.log; do echo "== $f"; tail -20 "$f"; done
    fail "aggmgr did not keep an away switchsim's groups as it should"
}

export SHARP_COLL_LOG_LEVEL=3
"$BIN/aggmgr" --listen 127.0.0.1:0 --ready-fd 3 3>"$TMP/mgr.ready" >"$TMP/mgr.log" 2>&1 &
for _ in $(seq 250); do grep -q : "$TMP/mgr.ready" && break; sleep 0.02; done
addr=$(head -1 "$TMP/mgr.ready")
[ -n "$addr" ] || { cat "$TMP/mgr.log"; fail "aggmgr did not start"; }
python3 "$(dirname "$0")/mgr_simaway.py" "$BIN" "$TMP" relay "$addr" "$TMP/relay.addr" &
relay=$!
for _ in $(seq 250); do [ -s "$TMP/relay.addr" ] && break; sleep 0.02; done
[ -s "$TMP/relay.addr" ] || fail "the relay did not start"
"$BIN/switchsim" --am "$(cat "$TMP/relay.addr")" --ready-fd 3 3>"$TMP/sim.ready" >"$TMP/sim.log" 2>&1 &
for _ in $(seq 250); do grep -q ready "$TMP/sim.ready" && break; sleep 0.02; done
grep -q ready "$TMP/sim.ready" || { cat "$TMP/sim.log"; fail "switchsim did not start"; }
SECONDS_RUN=4
[ -z "$SANITIZER" ] || SECONDS_RUN=8
"${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" -x AGG_AM_ADDR="$addr" -x SHARP_COLL_LOG_LEVEL \
    -x HCOLL_ENABLE_SHARP=3 -x AGG_STATS=1 "$BIN/fault_loop" $SECONDS_RUN >"$TMP/job.out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "under way" "$TMP/job.out" && break; sleep 0.05; done
grep -q "under way" "$TMP/job.out" || { cat "$TMP/job.out"; fail "the job did not start"; }
kill -USR1 $relay
for _ in $(seq 400); do grep -q "of its groups kept" "$TMP/mgr.log" && break; sleep 0.05; done
rc=0
wait $job || rc=$?
line=$(grep '^fault_loop: [0-9]* calls' "$TMP/job.out") || { cat "$TMP/job.out"; fail "fault_loop said nothing"; }
echo "across the cut: $line"
grep -E "control connection closed|is back" "$TMP/mgr.log" | sed 's/^.*\] //'
grep -Eq "is back .*: [1-9][0-9]* of its groups kept, 0 dropped" "$TMP/mgr.log" ||
    { cat "$TMP/mgr.log"; fail "the groups were not kept across the cut"; }
[ $rc = 0 ] && echo "$line" | grep -q " 0 wrong, 0 errors" || { cat "$TMP/job.out"; fail "the job across the cut failed ($rc)"; }
grep -Eq "^agg_stats: allreduce calls=[0-9]+ llt=[1-9]" "$TMP/job.out" || { grep agg_stats "$TMP/job.out"; fail "no call on the network"; }
kill -TERM $relay 2>/dev/null || true
check_clean "$TMP/job.out" "$TMP/mgr.log" "$TMP/sim.log"
echo "PASS"
