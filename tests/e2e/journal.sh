#!/usr/bin/env bash
# aggmgr's journal (am_journal): killed with -9 and started again, the
# manager holds exactly what it held; its jobs wait for their rank 0 to come
# back with the key; a damaged tail, a journal rewritten as it grows and one
# of another fabric (tests/e2e/mgr_journal.py says what each step checks);
# thousands of random job and group steps with kill -9 at random points
# (tests/e2e/mgr_journal_prop.py).
# Then a real job across the restart: 4 ranks making checked allreduces at
# HCOLL_ENABLE_SHARP=3 (nothing may fall back to the host) while aggmgr is
# killed and started again a second later: every result right, no call
# failed, the state the same before and after, rank 0 and switchsim back
# with the new manager, the job ended cleanly at MPI_Finalize.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "no python3"
python3 "$(dirname "$0")/mgr_journal.py" "$BIN" "$TMP" || {
    for f in "$TMP"/*.log; do echo "== $f"; tail -30 "$f"; done
    fail "aggmgr's journal did not hold"
}
# the property: random job and group steps, kill -9 at random points (the
# seed is printed: MGR_JOURNAL_SEED=S reruns a failure)
steps=2000
[ -z "$SANITIZER" ] || steps=400
python3 "$(dirname "$0")/mgr_journal_prop.py" "$BIN" "$TMP" $steps ${MGR_JOURNAL_SEED:-} >"$TMP/prop.out" 2>&1 || {
    grep -v "^ok:" "$TMP/prop.out"; tail -30 "$TMP/prop.log"
    fail "aggmgr's accounting did not come back after a kill"
}
grep -v "^ok:" "$TMP/prop.out"

# a running job across kill -9 and a restart
port=$(free_port)
export AGG_AM_ADDR=127.0.0.1:$port AGG_AM_JOURNAL=$TMP/job.journal SHARP_COLL_LOG_LEVEL=3
start_mgr() {
    "$BIN/aggmgr" --ready-fd 3 3>"$TMP/$1.ready" >"$TMP/$1.log" 2>&1 &
    mgr=$!
    for _ in $(seq 250); do grep -q : "$TMP/$1.ready" && break; sleep 0.02; done
    grep -q : "$TMP/$1.ready" || { cat "$TMP/$1.log"; fail "aggmgr did not start"; }
}
# what the manager holds (agg_info exits 1 when no switchsim answers the
# counters request, as while switchsim registers again: the state is the same)
held() { { "$BIN/agg_info" -S || true; } | grep -E '^(manager:|job |  group |switch )'; }
start_mgr mgrA
"$BIN/switchsim" --ready-fd 3 3>"$TMP/sim.ready" >"$TMP/sim.log" 2>&1 &
sim=$!
for _ in $(seq 250); do grep -q ready "$TMP/sim.ready" && break; sleep 0.02; done
SECONDS_RUN=6
[ -z "$SANITIZER" ] || SECONDS_RUN=12
"${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" -x AGG_AM_ADDR -x SHARP_COLL_LOG_LEVEL \
    -x HCOLL_ENABLE_SHARP=3 -x AGG_STATS=1 "$BIN/fault_loop" $SECONDS_RUN >"$TMP/job.out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "under way" "$TMP/job.out" && break; sleep 0.05; done
grep -q "under way" "$TMP/job.out" || { cat "$TMP/job.out"; fail "the job did not start"; }
held >"$TMP/before"
kill -9 $mgr
wait $mgr 2>/dev/null || true
sleep 1
t0=$(date +%s%N)
start_mgr mgrB
for _ in $(seq 1000); do grep -q "rank 0 is back" "$TMP/mgrB.log" && break; sleep 0.02; done
t1=$(date +%s%N)
grep -q "rank 0 is back" "$TMP/mgrB.log" || { cat "$TMP/mgrB.log" "$TMP/job.out"; fail "rank 0 did not come back to the new manager in 20 s"; }
for _ in $(seq 1000); do grep -q "back with aggmgr" "$TMP/sim.log" && break; sleep 0.02; done
grep -q "back with aggmgr" "$TMP/sim.log" || { tail "$TMP/sim.log"; fail "switchsim did not register again in 20 s"; }
held >"$TMP/after"
cat "$TMP/after"
diff "$TMP/before" "$TMP/after" || fail "the manager does not hold what it held before kill -9"
rc=0
wait $job || rc=$?
line=$(grep '^fault_loop: [0-9]* calls' "$TMP/job.out") || { cat "$TMP/job.out"; fail "fault_loop said nothing"; }
echo "across the restart: $line"
echo "rank 0 claimed its job again $(( (t1 - t0) / 1000000 )) ms after aggmgr was started again"
grep "back with aggmgr" "$TMP/sim.log"
[ $rc = 0 ] && echo "$line" | grep -q " 0 wrong, 0 errors" || { cat "$TMP/job.out"; fail "the job across the restart failed ($rc)"; }
grep -Eq "^agg_stats: allreduce calls=[0-9]+ llt=[1-9]" "$TMP/job.out" || { grep agg_stats "$TMP/job.out"; fail "no call on the network"; }
grep -q "groups' parts; 0 of them the manager does not hold" "$TMP/mgrB.log" ||
    { cat "$TMP/mgrB.log"; fail "the new manager did not keep switchsim's parts"; }
for _ in $(seq 100); do held | grep -q "^manager: 0 jobs, 0 groups" && break; sleep 0.05; done
held | grep -q "^manager: 0 jobs, 0 groups" || { held; fail "the job did not end with MPI_Finalize"; }
! grep -q "did not come back" "$TMP/mgrB.log" || fail "the job was released, not ended"
kill -TERM $sim $mgr
wait $sim $mgr || true
check_clean "$TMP/job.out"
echo "PASS"
