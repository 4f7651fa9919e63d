#!/usr/bin/env bash
# The daemons under valgrind through a whole job: no memory error, no leak,
# and every descriptor the daemon opened closed at exit, after
# SIGTERM, as the daemons promise.
. "$(dirname "$0")/lib.sh"
[ -z "$SANITIZER" ] || skip "valgrind does not run sanitizer builds (the normal build runs this)"
command -v valgrind >/dev/null || fail "valgrind is not installed"
VG=(valgrind --track-fds=yes --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --error-exitcode=7)
port=$(free_port)
addr=127.0.0.1:$port

"${VG[@]}" --log-file="$TMP/vg.mgr" "$BIN/aggmgr" --listen $addr --ready-fd 3 3>"$TMP/mgr.ready" &
mgr=$!
for _ in $(seq 300); do grep -q "$addr" "$TMP/mgr.ready" 2>/dev/null && break; sleep 0.05; done
grep -q "$addr" "$TMP/mgr.ready" || fail "aggmgr under valgrind did not start"
"${VG[@]}" --log-file="$TMP/vg.sim" "$BIN/switchsim" --am $addr --ready-fd 3 3>"$TMP/sim.ready" &
sim=$!
for _ in $(seq 300); do grep -q ready "$TMP/sim.ready" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$TMP/sim.ready" || fail "switchsim under valgrind did not register"

AGG_AM_ADDR=$addr "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 \
    "$BIN/allreduce_check" --max-count 1000 >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "job failed"; }
expect_clean "$TMP/out" allreduce_check "wrong results"

kill -TERM $sim
wait $sim || { cat "$TMP/vg.sim"; fail "switchsim exited with $? under valgrind"; }
kill -TERM $mgr
wait $mgr || { cat "$TMP/vg.mgr"; fail "aggmgr exited with $? under valgrind"; }
for f in "$TMP/vg.mgr" "$TMP/vg.sim"; do
    grep -E "FILE DESCRIPTORS|ERROR SUMMARY|definitely lost" "$f" || true
    # an open descriptor valgrind did not see inherited was opened by us
    leaked=$(awk '/Open (file descriptor|AF_)/ { fd = $0; getline; if ($0 !~ /inherited from parent/) print fd }' "$f")
    [ -z "$leaked" ] || { cat "$f"; fail "$(basename "$f"): descriptors left open at exit: $leaked"; }
    grep -q "FILE DESCRIPTORS: [0-9]* open" "$f" || fail "$(basename "$f"): valgrind did not track descriptors"
    grep -q "ERROR SUMMARY: 0 errors" "$f" || { cat "$f"; fail "$(basename "$f"): valgrind errors"; }
done
check_no_shm_left "$sim"
echo "PASS"
