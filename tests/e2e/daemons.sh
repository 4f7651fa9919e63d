#!/usr/bin/env bash
# The daemons and the launcher: a malformed topology fails with file and
# line; aggrun returns the command's status, stops everything on SIGINT and
# leaves no process or shared-memory segment behind; agg_info -c shows
# where each value came from.
. "$(dirname "$0")/lib.sh"
DATA=$(cd "$(dirname "$0")/../data" && pwd)

# malformed topology
printf 'Switch\t4 "S-0001"\n[1]\t"H-0002"[1]\ngarbage here\n' >"$TMP/bad.topo"
if "$BIN/aggmgr" --topology "$TMP/bad.topo" --listen 127.0.0.1:0 >"$TMP/mgr.out" 2>&1; then
    fail "aggmgr accepted a malformed topology"
fi
cat "$TMP/mgr.out"
grep -q "$TMP/bad.topo:[0-9]" "$TMP/mgr.out" || fail "the topology error does not name file:line"

# aggrun: exit status, and a real topology file
set +e
"$BIN/aggrun" -- sh -c 'exit 7'
rc=$?
set -e
[ $rc -eq 7 ] || fail "aggrun returned $rc for a command that exited 7"
if [ -f "$DATA/fabric.topo" ]; then
    "$BIN/aggrun" --topology "$DATA/fabric.topo" -- true || fail "aggrun --topology failed"
fi

# aggrun on SIGINT: the command gets it, daemons stop, nothing is left over
"$BIN/aggrun" --stats-file "$TMP/st" -- sleep 60 &
runner=$!
sleep 1
mgr=$(pgrep -P $runner -x aggmgr || true)
sim=$(pgrep -P $runner -x switchsim || true)
[ -n "$mgr" ] && [ -n "$sim" ] || fail "aggrun did not start aggmgr and switchsim"
kill -INT $runner
set +e
timeout 20 tail --pid=$runner -f /dev/null
wait $runner
rc=$?
set -e
[ $rc -eq 130 ] || fail "aggrun returned $rc after SIGINT (expected 130)"
! kill -0 "$mgr" 2>/dev/null || fail "aggmgr still running after aggrun ended"
! kill -0 "$sim" 2>/dev/null || fail "switchsim still running after aggrun ended"
[ -f "$TMP/st" ] || fail "switchsim did not write its stats on SIGTERM"
check_no_shm_left "$sim"

# agg_info -c: every setting, with its source
SHARP_COLL_LOG_LEVEL=4 SHARP_COLL_LOG_LEVLE=1 "$BIN/agg_info" -c >"$TMP/info" 2>"$TMP/info.err"
grep -q "SHARP_COLL_LOG_LEVEL" "$TMP/info" || fail "agg_info -c misses SHARP_COLL_LOG_LEVEL"
grep -A3 "^log_level" "$TMP/info" | grep -q "env SHARP_COLL_LOG_LEVEL" || fail "agg_info -c does not say the value came from the environment"
grep -q "did you mean SHARP_COLL_LOG_LEVEL" "$TMP/info.err" || { cat "$TMP/info.err"; fail "no suggestion for a misspelt variable"; }
echo "PASS"
