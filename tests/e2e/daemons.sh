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

# malformed configuration file: file, line and what was expected
printf 'log_level = 3;\nam_max_jobs = "many";\n' >"$TMP/bad.conf"
if "$BIN/aggmgr" -c "$TMP/bad.conf" --listen 127.0.0.1:0 >"$TMP/conf.out" 2>&1; then
    fail "aggmgr accepted a malformed configuration file"
fi
cat "$TMP/conf.out"
grep -q "$TMP/bad.conf:2" "$TMP/conf.out" || fail "the configuration error does not name file:line"
printf 'log_level = = 3;\n' >"$TMP/bad2.conf"   # a syntax error
if "$BIN/switchsim" -c "$TMP/bad2.conf" >"$TMP/conf2.out" 2>&1; then
    fail "switchsim accepted a malformed configuration file"
fi
cat "$TMP/conf2.out"
grep -q "$TMP/bad2.conf:[0-9]" "$TMP/conf2.out" || fail "the syntax error does not name file:line"

# aggrun: exit status, and a real topology file
set +e
"$BIN/aggrun" -- sh -c 'exit 7'
rc=$?
set -e
[ $rc -eq 7 ] || fail "aggrun returned $rc for a command that exited 7"
# a fabric from an ibnetdiscover file: 4 ranks on hosts under two leaf
# switches reduce through a two-level tree
AGGRUN_OPTS=(--topology "$DATA/fabric_2l.topo")
run_check topo 4 -x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_LOG_LEVEL=3 -- --max-count 1000 --world-only
AGGRUN_OPTS=()
grep -q "tree_info: type:LLT .* depth:2 " "$TMP/topo.out" || { grep tree_info "$TMP/topo.out"; fail "expected a two-level tree on fabric_2l.topo"; }
[ "$(stat fragments_in "$TMP/topo.stats")" -gt 0 ] || fail "no fragment reached switchsim"

# aggrun on SIGINT: the command gets it, daemons stop, nothing is left over
"$BIN/aggrun" --stats-file "$TMP/st" -- sleep 60 &
runner=$!
for _ in $(seq 200); do # until both daemons and the command run (10 s at most)
    mgr=$(pgrep -P $runner -x aggmgr || true)
    sim=$(pgrep -P $runner -x switchsim || true)
    [ -z "$mgr" ] || [ -z "$sim" ] || ! pgrep -P $runner -x sleep >/dev/null || break
    sleep 0.05
done
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

# garbage on the control port: the peer is dropped, aggmgr keeps serving
port=$(free_port)
"$BIN/aggmgr" --listen 127.0.0.1:$port 2>"$TMP/mgr2.err" &
mgr=$!
for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port)).close()" 2>/dev/null && break
    sleep 0.05
done
# the wire version these binaries speak: a wrong one is a different refusal
WIRE=$(awk '/#define AGG_WIRE_VERSION/ {print $3}' "$(dirname "$0")/../../common/include/agg/wire.h")
python3 - "$port" "$WIRE" <<'PY'
import socket, struct, sys
port = int(sys.argv[1])
wire = int(sys.argv[2])

def closed(s):
    s.settimeout(5)
    try:
        return s.recv(100) == b""
    except ConnectionResetError:
        return True   # closed with our garbage still unread

s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 64)   # wrong magic
assert closed(s), "aggmgr kept a connection that sent garbage"
s = socket.create_connection(("127.0.0.1", port))
# right magic, a length beyond the limit
s.sendall(struct.pack(">IHHII", 0x4147474D, wire, 9, 1 << 30, 1))
assert closed(s), "aggmgr kept a connection with an oversized length"
s = socket.create_connection(("127.0.0.1", port))
# JOB_CREATE with a short body
s.sendall(struct.pack(">IHHII", 0x4147474D, wire, 9, 4, 2) + b"abcd")
s.settimeout(5)
data = s.recv(100)
hdr = struct.unpack(">IHHII", data[:16])
assert hdr[2] == 19, "expected ERROR_REPLY, got type %d" % hdr[2]
PY
# a peer that sends half a header and then nothing must not hold up others
python3 -c "
import socket, time
s = socket.create_connection(('127.0.0.1', $port))
s.sendall(b'AGGM\\x00' + bytes([$WIRE]))
time.sleep(6)
" &
slow=$!
sleep 0.2
start=$(date +%s%N)
# (with fewer OSTs than aggmgr hands out: a warning at once)
AGG_AN_OSTS=64 "$BIN/switchsim" --am 127.0.0.1:$port --ready-fd 3 3>"$TMP/ready" &
sim=$!
for _ in $(seq 100); do grep -q ready "$TMP/ready" && break; sleep 0.02; done
grep -q ready "$TMP/ready" || fail "switchsim could not register after the garbage"
took=$(( ($(date +%s%N) - start) / 1000000 ))
echo "switchsim registered in $took ms while a peer sat on half a message"
[ "$took" -lt 1000 ] || fail "a stalled peer delayed registration by $took ms"
kill $slow 2>/dev/null || true
kill -TERM $sim
wait $sim || fail "switchsim exited with $? on SIGTERM"
kill -TERM $mgr
wait $mgr || fail "aggmgr exited with $? on SIGTERM"
grep -q "malformed" "$TMP/mgr2.err" || { cat "$TMP/mgr2.err"; fail "aggmgr did not report the malformed request"; }
grep -q "has 64 OSTs, .* fewer than aggmgr hands out (an_osts 1024" "$TMP/mgr2.err" ||
    { cat "$TMP/mgr2.err"; fail "aggmgr did not warn of a switchsim with fewer OSTs"; }
check_no_shm_left "$sim"

# SIGHUP reloads what is reloadable (log_level) and says that the rest
# (am_max_jobs) needs a restart
port=$(free_port)
printf 'log_level = 2;\n' >"$TMP/hup.conf"
"$BIN/aggmgr" -c "$TMP/hup.conf" --listen 127.0.0.1:$port --ready-fd 3 3>"$TMP/hup.ready" 2>"$TMP/hup.err" &
mgr=$!
for _ in $(seq 200); do grep -q : "$TMP/hup.ready" && break; sleep 0.05; done
grep -q : "$TMP/hup.ready" || { cat "$TMP/hup.err"; fail "aggmgr did not start with $TMP/hup.conf"; }
printf 'log_level = 4;\nam_max_jobs = 7;\n' >"$TMP/hup.conf"
kill -HUP $mgr
for _ in $(seq 100); do grep -q "settings changed" "$TMP/hup.err" && break; sleep 0.05; done
printf 'log_level = 4;\nam_max_jobs = "x";\n' >"$TMP/hup.conf"
kill -HUP $mgr
for _ in $(seq 100); do grep -q "reload failed" "$TMP/hup.err" && break; sleep 0.05; done
kill -TERM $mgr
wait $mgr || fail "aggmgr exited with $? after SIGHUP and SIGTERM"
cat "$TMP/hup.err"
grep -q "SIGHUP: log_level = 4 (was 2; $TMP/hup.conf:1)" "$TMP/hup.err" ||
    fail "SIGHUP did not reload log_level (4 shows the INFO line)"
grep -q "SIGHUP: am_max_jobs = 7 ($TMP/hup.conf:2) takes effect only when aggmgr restarts: still 64" \
    "$TMP/hup.err" || fail "SIGHUP did not say that am_max_jobs needs a restart"
grep -q "SIGHUP: 2 settings changed, 1 applied, the others at the next restart" "$TMP/hup.err" ||
    fail "SIGHUP did not sum up what it applied"
grep -q "reload failed, keeping the old settings: $TMP/hup.conf:2" "$TMP/hup.err" || fail "a bad file on SIGHUP was not reported with file:line"

# bad peers on the control port: 1,100 silent connections, 100 messages that
# never finish; a real peer is answered meanwhile, the bad ones are dropped
# and logged with a count, aggmgr's memory stays bounded
if command -v python3 >/dev/null; then
    "$BIN/aggmgr" --listen 127.0.0.1:0 --ready-fd 3 3>"$TMP/lim.ready" >"$TMP/lim_mgr.log" 2>&1 &
    mgr=$!
    for _ in $(seq 250); do grep -q : "$TMP/lim.ready" && break; sleep 0.02; done
    python3 "$(dirname "$0")/mgr_limits.py" "$(head -1 "$TMP/lim.ready")" $mgr >"$TMP/lim.out" 2>&1 ||
        { cat "$TMP/lim.out" "$TMP/lim_mgr.log"; kill $mgr; fail "aggmgr did not hold against bad peers"; }
    cat "$TMP/lim.out"
    kill $mgr
    wait $mgr || true
    [ "$(grep -c 'dropping peer' "$TMP/lim_mgr.log")" -lt 20 ] ||
        { tail "$TMP/lim_mgr.log"; fail "aggmgr logged every dropped peer, not counts"; }
    grep -q "nothing said in the 10 s after connecting (1 peers dropped" "$TMP/lim_mgr.log" ||
        fail "aggmgr did not say why it dropped the silent peers"
fi

# agg_info -S asks the running manager for switchsim's counters
export BIN TMP PRELOAD
MPIRUN_LINE="${MPIRUN[*]}"
export MPIRUN_LINE
"$BIN/aggrun" -- sh -c '"$BIN/agg_info" -S >"$TMP/live0" &&
    $MPIRUN_LINE -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 \
        "$BIN/allreduce_check" --max-count 100 --world-only >"$TMP/live.out" 2>&1 &&
    "$BIN/agg_info" -S >"$TMP/live1"' || { cat "$TMP"/live*; fail "agg_info -S under aggrun failed"; }
cat "$TMP/live1"
grep -q "^fragments_in 0$" "$TMP/live0" || fail "counters before the job should be 0"
n=$(awk '$1 == "fragments_in" { print $2 }' "$TMP/live1")
[ "${n:-0}" -gt 0 ] || fail "agg_info -S shows no fragments after an offloaded job"
if AGG_AM_ADDR=127.0.0.1:$(free_port) AGG_CONNECT_TIMEOUT_MS=300 "$BIN/agg_info" -S 2>"$TMP/nostat"; then
    fail "agg_info -S succeeded with no manager"
fi
grep -q "cannot connect to the aggregation manager at 127.0.0.1:.*is aggmgr running" "$TMP/nostat" || fail "agg_info -S without a manager gives no clear error"

# agg_info -c: every setting, with its source
SHARP_COLL_LOG_LEVEL=4 SHARP_COLL_LOG_LEVLE=1 "$BIN/agg_info" -c >"$TMP/info" 2>"$TMP/info.err"
grep -q "SHARP_COLL_LOG_LEVEL" "$TMP/info" || fail "agg_info -c misses SHARP_COLL_LOG_LEVEL"
grep -A3 "^log_level" "$TMP/info" | grep -q "env SHARP_COLL_LOG_LEVEL" || fail "agg_info -c does not say the value came from the environment"
grep -q "did you mean SHARP_COLL_LOG_LEVEL" "$TMP/info.err" || { cat "$TMP/info.err"; fail "no suggestion for a misspelt variable"; }
# aggmgr never waits on a peer: one that asks and reads none of the answers
# has them queued while the loop answers another at once, and is dropped
# once its socket takes nothing for 2 s
if command -v python3 >/dev/null; then
    "$BIN/aggmgr" --topology "$DATA/fabric_2l.topo" --listen 127.0.0.1:0 --ready-fd 3 \
        3>"$TMP/flood.ready" >"$TMP/flood_mgr.log" 2>&1 &
    mgr=$!
    for _ in $(seq 250); do grep -q : "$TMP/flood.ready" && break; sleep 0.02; done
    python3 "$(dirname "$0")/mgr_flood.py" "$(head -1 "$TMP/flood.ready")" >"$TMP/flood.out" 2>&1 ||
        { cat "$TMP/flood.out" "$TMP/flood_mgr.log"; kill $mgr; fail "aggmgr waited on a peer that reads nothing"; }
    cat "$TMP/flood.out"
    grep -Eq "dropping peer fd [0-9]+ \(pid 4242\): it took nothing|pid 4242\) reads nothing" \
        "$TMP/flood_mgr.log" || { cat "$TMP/flood_mgr.log"; kill $mgr; fail "aggmgr did not say why it dropped the peer"; }
    kill $mgr
    wait $mgr || true
fi

check_clean "$TMP"/*
echo "PASS"
