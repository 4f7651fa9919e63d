#!/usr/bin/env bash
# A lossy network between ranks and their switchsim, injected by switchsim
# itself (sim_faults) so that it is repeatable: 4 ranks, each under a host
# name of its own (a UTS namespace: tests/e2e/as_host.sh) so that they reach
# the switchsim over TCP, checked allreduces at HCOLL_ENABLE_SHARP=3 (no
# host path to hide behind). With 1 % of the messages lost and 1 % sent
# twice each way, or 1 % corrupted (each message carries a CRC32C), every
# result is right and no call fails: a rank sends a fragment again when its
# result is late (AGG_NET_RESEND_MS), switchsim takes a fragment once and
# sends the result it has again; a message failing its checksum is lost. Out of place, in
# place, on the SAT; a connection stalled 300 ms costs that call 300 ms; the
# switchsim killed mid-run (its own `kill at N`): right results on the host
# at level 2, the same call failing on every rank at 3; a malformed
# sim_faults stops switchsim with a message saying what is wrong.
# Prints the mean call time with and without the faults; the lossy runs
# make at least 1,000 checked allreduces a rank (plain build).
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (a UTS namespace per rank stands for a host)"
command -v unshare >/dev/null || skip "no unshare"
unshare --uts true 2>/dev/null || skip "this machine cannot make UTS namespaces"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_RUN=${NET_FAULTS_SECONDS:-2}
[ -z "$SANITIZER" ] || SECONDS_RUN=4
# the lossy runs, long enough for 1,000 checked allreduces a rank (the
# plain build; the sanitizer builds check the paths, not the count)
LOSSY_CALLS=0
if [ -z "$SANITIZER" ]; then
    LOSSY_CALLS=1000
fi
AS_HOST=$ROOT/tests/e2e/as_host.sh
export AGG_AM_TOPOLOGY=$ROOT/tests/data/netns_4h.topo # hosts aggh1..aggh4

"$BIN/aggmgr" --listen 127.0.0.1:0 --ready-fd 3 3>"$TMP/mgr.ready" >"$TMP/mgr.log" 2>&1 &
mgr=$!
for _ in $(seq 250); do grep -q : "$TMP/mgr.ready" && break; sleep 0.02; done
addr=$(head -1 "$TMP/mgr.ready")
[ -n "$addr" ] || { cat "$TMP/mgr.log"; fail "aggmgr did not start"; }

# start_sim NAME SWITCHES FAULTS: a switchsim on host aggh0, data port on
# loopback, with those faults; its counters in $TMP/NAME.stats at the end
start_sim() {
    AGG_SIM_DATA_ADDR=127.0.0.1:${SIM_PORT:-0} AGG_SIM_SWITCHES=$2 AGG_SIM_FAULTS=$3 \
        env ${SIM_JOIN_MS:+AGG_CONNECT_TIMEOUT_MS=$SIM_JOIN_MS} unshare --uts -- sh -c 'hostname aggh0 && exec "$@"' sh \
        "$BIN/switchsim" --am "$addr" --ready-fd 3 --stats-file "$TMP/$1.stats" \
        3>"$TMP/$1.ready" >"$TMP/$1.sim.log" 2>&1 &
    sims+=($!)
    for _ in $(seq 250); do grep -q ready "$TMP/$1.ready" && return; sleep 0.02; done
    cat "$TMP/$1.sim.log"
    fail "$1: switchsim did not start"
}

# run NAME FAULTS [fault_loop arguments] [-- mpirun options]: one switchsim
# with those faults (SPLIT=1: two, the spine's and the leaves', each with
# the faults, linked over TCP), fault_loop under 4 ranks; the leaves'
# switchsim's counters in $TMP/NAME.stats (the spine's in NAME.spine.stats),
# the job's output in NAME.out
run() {
    local name=$1 faults=$2 sim rc=0
    shift 2
    local args=() opts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    [ $# -eq 0 ] || { shift; opts=("$@"); }
    sims=()
    [ "${SPLIT:-0}" = 0 ] || start_sim "$name.spine" name:spine1 "$faults${faults:+ seed 99}"
    local holder= port=0 join_ms=
    # silent peers: closed by the sweep only after a minute, so that however
    # slowly a loaded machine accepts them they fill the port
    [ -z "${HOLD_SILENT:-}" ] || { port=$(free_port); join_ms=60000; }
    SIM_JOIN_MS=$join_ms SIM_PORT=$port start_sim "$name" all "$faults"
    if [ -n "${HOLD_SILENT:-}" ]; then
        # HOLD_SILENT connections to the data port, saying nothing, held through the job
        python3 -c '
import socket, sys, time
held = []
for _ in range(int(sys.argv[2])):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    held.append(s)
print("held", len(held), flush=True)
time.sleep(600)' "$port" "$HOLD_SILENT" >"$TMP/$name.silent" 2>&1 &
        holder=$!
        for _ in $(seq 500); do grep -q held "$TMP/$name.silent" && break; sleep 0.02; done
        grep -q held "$TMP/$name.silent" || { cat "$TMP/$name.silent"; fail "$name: could not open the silent connections"; }
        # the job starts once the port is full: switchsim made room at least once
        for _ in $(seq 1500); do grep -q "every connection is taken; closed" "$TMP/$name.sim.log" && break; sleep 0.02; done
        grep -q "every connection is taken; closed" "$TMP/$name.sim.log" ||
            { grep -v INFO "$TMP/$name.sim.log" | tail -5 || true; fail "$name: switchsim did not say it made room"; }
    fi
    "${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" -x AGG_AM_ADDR="$addr" \
        -x HCOLL_ENABLE_SHARP=3 -x HCOLL_SHARP_NP=2 -x AGG_STATS=1 -x AGG_NET_RESEND_MS=20 \
        "${opts[@]}" "$AS_HOST" aggh 4 "$BIN/fault_loop" "${RUN_SECONDS:-$SECONDS_RUN}" "${args[@]}" \
        >"$TMP/$name.out" 2>&1 || rc=$?
    [ -z "$holder" ] || { kill $holder; wait $holder 2>/dev/null || true; }
    for sim in "${sims[@]}"; do
        kill -TERM $sim
        wait $sim || true
    done
    [ $rc = 0 ] || { tail -30 "$TMP/$name.out"; fail "$name: the job failed ($rc)"; }
    line=$(grep '^fault_loop: [0-9]* calls' "$TMP/$name.out") ||
        { cat "$TMP/$name.out"; fail "$name: fault_loop said nothing"; }
    echo "$name: $line; switchsim: faults $(stat faults "$TMP/$name.stats")," \
        "duplicates $(stat duplicates "$TMP/$name.stats"), results resent $(stat resent "$TMP/$name.stats")"
    echo "$line" | grep -q " 0 wrong, 0 errors" || { cat "$TMP/$name.out"; fail "$name: wrong results or errors"; }
    [ "$(calls "$name")" -ge $((4 * ${MIN_CALLS:-0})) ] ||
        fail "$name: $(($(calls "$name") / 4)) allreduces a rank, fewer than ${MIN_CALLS:-0}"
    grep -Eq "^agg_stats: allreduce calls=[1-9][0-9]* .* failed=0" "$TMP/$name.out" ||
        { grep agg_stats "$TMP/$name.out"; fail "$name: not every call went through the network"; }
    [ "$(stat fragments_in "$TMP/$name.stats")" -gt 0 ] || fail "$name: switchsim got no fragment (not over TCP?)"
}
mean() { sed -n 's/.*mean call \([0-9]*\) us.*/\1/p' "$TMP/$1.out"; }
calls() { sed -n 's/^fault_loop: \([0-9]*\) calls.*/\1/p' "$TMP/$1.out"; } # over the 4 ranks
worst() { sed -n 's/.*worst call \([0-9]*\) ms.*/\1/p' "$TMP/$1.out"; }
lossy() {
    [ "$(stat faults "$TMP/$1.stats")" -gt 0 ] || fail "$1: no fault was injected"
    [ "$(stat resent "$TMP/$1.stats")" -gt 0 ] || fail "$1: no result was sent again"
    [ "$(stat duplicates "$TMP/$1.stats")" -gt 0 ] || fail "$1: no duplicate was seen"
}

# Under TSan (each run costs a minute there) the loss, corruption, split
# and kill runs only: the paths that cross switchsim's threads.
full() { [ "$SANITIZER" != tsan ]; }

full && run clean "" 4096
# (about 5 ms a call here at 1 % loss each way, 14 ms split over two switchsims)
RUN_SECONDS=$((LOSSY_CALLS > 0 ? 8 : SECONDS_RUN)) MIN_CALLS=$LOSSY_CALLS run lossy "loss 1% duplicate 1% seed 11" 4096
lossy lossy
if full; then
    RUN_SECONDS=$((LOSSY_CALLS > 0 ? 8 : SECONDS_RUN)) MIN_CALLS=$LOSSY_CALLS run in_place "loss 1% duplicate 1% seed 12" 4096 in-place
    lossy in_place
fi
run corrupt "corrupt 1% seed 15" 4096
[ "$(stat corrupt "$TMP/corrupt.stats")" -gt 0 ] || fail "corrupt: no message failed its checksum"
[ "$(stat resent "$TMP/corrupt.stats")" -gt 0 ] || fail "corrupt: no result was sent again"
grep -q "does not match its checksum: taken for lost" "$TMP/corrupt.sim.log" ||
    fail "corrupt: switchsim did not say so"
if full; then
    run sat "loss 1% duplicate 1% seed 13" 262144 -- -x SHARP_COLL_ENABLE_SAT=1
    [ "$(stat sat_chunks_in "$TMP/sat.stats")" -gt 0 ] || fail "sat: no SAT chunk"
    [ "$(stat faults "$TMP/sat.stats")" -gt 0 ] || fail "sat: no fault was injected"
fi
full && echo "mean call, 1..4096 int32, 4 ranks over TCP: $(mean clean) us clean," \
     "$(mean lossy) us at 1 % loss and 1 % duplication each way over $(($(calls lossy) / 4)) checked" \
     "allreduces a rank ($(mean in_place) us in place over $(($(calls in_place) / 4)))"

# a tree split over two switchsims: partials and results lost between them too
RUN_SECONDS=$((LOSSY_CALLS > 0 ? 25 : SECONDS_RUN)) MIN_CALLS=$LOSSY_CALLS SPLIT=1 run split "loss 1% duplicate 1% seed 14" 4096
lossy split
[ "$(stat faults "$TMP/split.spine.stats")" -gt 0 ] || fail "split: no fault on the spine's switchsim"
[ "$(stat resent "$TMP/split.spine.stats")" -gt 0 ] || fail "split: the spine sent nothing again"
echo "split over two switchsims: $(mean split) us over $(($(calls split) / 4)) checked allreduces a rank"

if full; then
    run stall "stall 300 at 600" 4096
    w=$(worst stall)
    [ "$w" -ge 250 ] && [ "$w" -lt 5000 ] || fail "stall: worst call $w ms, not about the 300 ms stall"
fi

# the switchsim killed at its 6,000th message read, calls in flight over
# TCP: at HCOLL_ENABLE_SHARP=2 every result right (in place too: what came
# back is kept, the rest redone on the host), the loss seen at once, not at
# the call timeout; at 3 every rank fails the same call, saying why
kill_run() { # NAME LEVEL [in-place]
    local name=$1 level=$2 rc=0 sim
    sims=()
    start_sim "$name" all "in kill at 6000"
    sim=${sims[0]}
    "${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" -x AGG_AM_ADDR="$addr" \
        -x HCOLL_ENABLE_SHARP="$level" -x HCOLL_SHARP_NP=2 -x AGG_STATS=1 \
        "$AS_HOST" aggh 4 "$BIN/fault_loop" "$SECONDS_RUN" ${3:+4096 in-place} \
        >"$TMP/$name.out" 2>&1 || rc=$?
    wait $sim 2>/dev/null || true # killed by its own fault
    line=$(grep '^fault_loop: [0-9]* calls' "$TMP/$name.out") ||
        { cat "$TMP/$name.out"; fail "$name: fault_loop said nothing"; }
    echo "$name: $line"
    grep -q "sim_faults: killed at message 6000 in" "$TMP/$name.sim.log" ||
        { cat "$TMP/$name.sim.log"; fail "$name: switchsim was not killed by its fault"; }
    [ "$(worst "$name")" -lt 5000 ] || fail "$name: a call took $(worst "$name") ms: the loss was not seen"
    # the 4 ranks see it alike: said once for the group, not once a rank
    [ "$(grep -c 'switchsim closed the connection' "$TMP/$name.out")" -le 1 ] ||
        { grep 'closed the connection' "$TMP/$name.out"; fail "$name: the loss logged by every rank"; }
    if [ "$level" = 2 ]; then
        [ $rc = 0 ] || { tail -30 "$TMP/$name.out"; fail "$name: the job failed ($rc)"; }
        echo "$line" | grep -q " 0 wrong, 0 errors" || { cat "$TMP/$name.out"; fail "$name: wrong results or errors"; }
        grep -Eq "^agg_stats: allreduce .*why: .*network_error=[1-9]" "$TMP/$name.out" ||
            { grep agg_stats "$TMP/$name.out"; fail "$name: no call counted as redone on the host"; }
    else
        [ $rc = 3 ] || { tail -30 "$TMP/$name.out"; fail "$name: expected fault_loop's exit 3, got $rc"; }
        [ "$(grep -o 'call [0-9]* returned' "$TMP/$name.out" | sort -u | wc -l)" = 1 ] ||
            { grep 'returned' "$TMP/$name.out"; fail "$name: the ranks failed different calls"; }
        grep -q "forces collectives into the network, but allreduce on a communicator of 4 ranks cannot have it" \
            "$TMP/$name.out" || { cat "$TMP/$name.out"; fail "$name: no error saying why"; }
        echo "$line" | grep -q " 0 wrong" || fail "$name: wrong results"
    fi
}
kill_run kill_l2 2
if full; then
    kill_run kill_l2i 2 in-place
    kill_run kill_l3 3
fi

# the switchsim killed while it sends a call's results (its 602nd message
# out: the second of call 151's four, one fragment a call), so one member
# has call 151 done and fails 152 while the others fail 151. Redone on the
# host, different calls would meet (before the members compared their calls:
# MPI_ERR_TRUNCATE, then a wait forever); at level 2 every rank fails its
# call at once with MPI_ERR_OTHER, rank 0 saying where they stand, and the
# communicator's later calls fail too. Then the same with non-blocking calls
# (two in flight; its 606th message: call 152's second result), which waited
# forever before.
split_run() { # NAME FAULTS WHAT [MODE]
    local name=$1 rc=0
    sims=()
    start_sim "$name" all "$2"
    timeout 120 "${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" -x AGG_AM_ADDR="$addr" \
        -x HCOLL_ENABLE_SHARP=2 -x HCOLL_SHARP_NP=2 "$AS_HOST" aggh 4 "$BIN/fault_loop" \
        "$SECONDS_RUN" 16 ${4:-} >"$TMP/$name.out" 2>&1 || rc=$?
    wait "${sims[0]}" 2>/dev/null || true
    [ $rc = 3 ] || { tail -30 "$TMP/$name.out"; fail "$name: expected fault_loop's exit 3, got $rc"; }
    grep -q "$3" "$TMP/$name.out" || { cat "$TMP/$name.out"; fail "$name: no error saying why"; }
    [ "$(grep -c 'call 15[1-4] returned 16 (MPI_ERR_OTHER' "$TMP/$name.out")" = 4 ] ||
        { grep returned "$TMP/$name.out"; fail "$name: not every rank failed its call"; }
    grep '^fault_loop: [0-9]* calls' "$TMP/$name.out" | grep -q " 0 wrong" ||
        { cat "$TMP/$name.out"; fail "$name: wrong results"; }
    echo "$name: every rank failed with MPI_ERR_OTHER at once ($(grep -o 'call 15[1-4] returned' "$TMP/$name.out" | sort | uniq -c | tr -s ' ' | tr '\n' ';')), nothing wrong"
}
split_run split_result "out kill at 602" "allreduce on a communicator of 4 ranks failed in the network at call 151 on some members and at 152 on others .*so no call can be redone on the host"
split_run split_result_nb "out kill at 606" "non-blocking calls on a communicator of 4 ranks failed in the network at call [0-9]* on some members and at [0-9]* on others .*so no call can be redone on the host" nb

# 1,100 connections to the data port that say nothing (more than its 1,024
# connections): joins are read by the port's loop, not a thread each, and a
# new connection takes the place of the one joining longest, so the ranks
# join at once and the job runs as if they were not there
# (not under TSan: its switchsim accepts a few hundred a second, and the
# sweep closes the silent ones before they fill the port)
if [ "$SANITIZER" != tsan ]; then
    SPLIT=0 HOLD_SILENT=1100 run silent "" 4096
    echo "silent: the job ran beside 1,100 silent connections: $(mean silent) us a call"
fi

# a mistake in the spec: switchsim says what and stops
rc=0
AGG_SIM_DATA_ADDR=127.0.0.1:0 AGG_SIM_FAULTS="loss 2" timeout 20 "$BIN/switchsim" --am "$addr" \
    >"$TMP/bad.log" 2>&1 || rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "switchsim with a malformed sim_faults: exit $rc"
grep -q "sim_faults \"loss 2\": loss '2': not a percentage" "$TMP/bad.log" ||
    { cat "$TMP/bad.log"; fail "no message saying what is wrong in sim_faults"; }

kill -TERM $mgr
wait $mgr || true
check_clean "$TMP"/*.out
echo "PASS"
