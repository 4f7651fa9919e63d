#!/usr/bin/env bash
# A switchsim killed (-9) under a running job, the aggregation done by
# switchsim's threads (AGG_RANK_PROGRESS=0) and by the ranks (1), blocking
# calls and (with rank progress) non-blocking ones, two in flight. Its
# members see it gone within milliseconds (not the 30 s call timeout) and
# agree on every call: at HCOLL_ENABLE_SHARP=2 the calls from then on run on
# the host, every result right, the failure said once per rank (in place
# too: what came back from the tree is kept, the rest redone on the host;
# non-blocking calls are redone with MPI's own, posted in program order);
# at 3 the same call fails on every rank with an error saying why. Its
# shared memory is gone with the job, and a switchsim started later removes
# what a killed one left; with another switchsim in its place the calls come
# back to the network.
. "$(dirname "$0")/lib.sh"

SECONDS_RUN=3
[ -z "$SANITIZER" ] || SECONDS_RUN=8 # a loaded machine may pass on "under way" seconds late
# N: non-blocking (two MPI_Iallreduce in flight at a time), with rank progress
for progress in 0 1; do
    # (under the sanitizers, without rank progress only level 2: the other
    # paths are the same code, and the time goes to the ones with progress)
    for level in 2 $([ $progress = 0 ] && [ -n "$SANITIZER" ] || echo 3 2i) \
        $([ $progress = 0 ] || echo 2n 3n 2ni); do
        name=p${progress}l$level mode= fn=allreduce
        case $level in
        *n*) mode=nb fn=iallreduce ;;
        esac
        case $level in
        *i) mode=${mode:+$mode-}in-place ;;
        esac
        level=${level%%[ni]*}
        "$BIN/aggrun" --stats-file "$TMP/$name.stats" -- "${MPIRUN[@]}" -np 2 \
            -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=$level -x AGG_RANK_PROGRESS=$progress \
            -x HCOLL_SHARP_NP=2 -x AGG_STATS=1 "$BIN/fault_loop" $SECONDS_RUN ${mode:+4096 $mode} \
            >"$TMP/$name.out" 2>&1 &
        runner=$!
        sim=
        for _ in $(seq 200); do
            sim=$(pgrep -P $runner -x switchsim || true)
            [ -n "$sim" ] && grep -q . "/proc/$sim/status" 2>/dev/null && break
            sleep 0.05
        done
        [ -n "$sim" ] || { kill $runner; fail "$name: no switchsim under aggrun"; }
        for _ in $(seq 600); do grep -q "under way" "$TMP/$name.out" && break; sleep 0.05; done
        sleep 0.5 # calls in flight on the tree by now
        kill -9 "$sim" 2>/dev/null ||
            { cat "$TMP/$name.out"; fail "$name: switchsim $sim was gone before the test killed it"; }
        rc=0
        wait $runner || rc=$?
        out=$TMP/$name.out
        line=$(grep '^fault_loop: [0-9]* calls' "$out") || { cat "$out"; fail "$name: fault_loop said nothing"; }
        echo "$name: $line"
        worst=$(echo "$line" | sed 's/.*worst call \([0-9]*\) ms.*/\1/')
        [ "$worst" -lt 5000 ] || fail "$name: a call took $worst ms: the loss was not seen before the timeout"
        grep -q "is gone" "$out" || { cat "$out"; fail "$name: nobody said the switchsim is gone"; }
        if [ $level = 2 ]; then
            [ $rc = 0 ] || { cat "$out"; fail "$name: the job failed ($rc)"; }
            echo "$line" | grep -q " 0 wrong, 0 errors" || { cat "$out"; fail "$name: wrong results or errors"; }
            # blocking calls on the shim's host algorithms, non-blocking ones on MPI's
            grep -Eq "^agg_stats: $fn calls=[0-9]+ llt=[1-9][0-9]* .*(recursive_doubling|mpi)=[1-9].* why: .*network_error=[1-9]" \
                "$out" || { grep agg_stats "$out"; fail "$name: no call counted as redone on the host"; }
            [ "$(grep -c 'failed in the network' "$out")" -le 1 ] ||
                fail "$name: the failure logged more than once"
        else
            [ $rc = 3 ] || { cat "$out"; fail "$name: expected fault_loop's exit 3 (an MPI error), got $rc"; }
            calls=$(grep -o 'call [0-9]* returned' "$out" | sort -u | wc -l)
            [ "$calls" = 1 ] || { cat "$out"; fail "$name: the ranks failed different calls"; }
            grep -Eq "HCOLL_ENABLE_SHARP=3 forces collectives into the network, but allreduce on a communicator of 2 ranks cannot have it: the call failed in the network|iallreduce failed in the network \(.*\): HCOLL_ENABLE_SHARP=3 forces it there" \
                "$out" || { cat "$out"; fail "$name: no error saying why"; }
            echo "$line" | grep -q " 0 wrong" || fail "$name: wrong results"
        fi
        ! ls /dev/shm | grep -q "^agg-$sim-" || { ls /dev/shm; fail "$name: the killed switchsim's segments are left"; }
    done
done

# the same on shared memory, repeatable: switchsim's own fault (sim_faults)
# kills it as its reduction threads take the 3,000th fragment (no rank
# progress: they take every one), or stalls them 300 ms at the 1,000th: at
# level 2 every result right on the host, at 3 both ranks fail the same
# call, a stall costs about its length
shm_fault() { # NAME LEVEL FAULTS
    local rc=0
    AGG_SIM_FAULTS=$3 "$BIN/aggrun" -- "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" \
        -x HCOLL_ENABLE_SHARP=$2 -x AGG_RANK_PROGRESS=0 -x HCOLL_SHARP_NP=2 -x AGG_STATS=1 \
        "$BIN/fault_loop" 2 >"$TMP/$1.out" 2>&1 || rc=$?
    line=$(grep '^fault_loop: [0-9]* calls' "$TMP/$1.out") || { cat "$TMP/$1.out"; fail "$1: fault_loop said nothing"; }
    echo "$1: $line"
    echo "$line" | grep -q " 0 wrong" || { cat "$TMP/$1.out"; fail "$1: wrong results"; }
    return $rc
}
shm_fault shm_kill_l2 2 "in kill at 3000" || fail "shm_kill_l2: the job failed"
grep -q "sim_faults: killed at fragment 3000 in (shared memory)" "$TMP/shm_kill_l2.out" ||
    { cat "$TMP/shm_kill_l2.out"; fail "shm_kill_l2: switchsim was not killed by its fault"; }
grep -q " 0 errors" "$TMP/shm_kill_l2.out" && grep -Eq "^agg_stats: allreduce .*network_error=[1-9]" "$TMP/shm_kill_l2.out" ||
    { cat "$TMP/shm_kill_l2.out"; fail "shm_kill_l2: no call redone on the host"; }
rc=0
shm_fault shm_kill_l3 3 "in kill at 3000" || rc=$?
[ $rc != 0 ] && [ "$(grep -o 'call [0-9]* returned 16' "$TMP/shm_kill_l3.out" | sort -u | wc -l)" = 1 ] &&
    [ "$(grep -c 'returned 16' "$TMP/shm_kill_l3.out")" = 2 ] ||
    { cat "$TMP/shm_kill_l3.out"; fail "shm_kill_l3: both ranks should fail the same call"; }
shm_fault shm_stall 2 "in stall 300 at 1000" || fail "shm_stall: the job failed"
w=$(sed -n 's/.*worst call \([0-9]*\) ms.*/\1/p' "$TMP/shm_stall.out")
[ "$w" -ge 250 ] && [ "$w" -lt 5000 ] || fail "shm_stall: worst call $w ms, not about the 300 ms stall"

# every collective, blocking and non-blocking (in flight together, on
# several communicators, completed by every wait and test call), 4 ranks,
# the switchsim killed under them at HCOLL_ENABLE_SHARP=2: every check
# passes, the failed non-blocking calls redone on the host
SHARP_COLL_LOG_LEVEL=3 "$BIN/aggrun" -- "${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" \
    -x HCOLL_ENABLE_SHARP=2 -x AGG_STATS=1 "$BIN/coll_check" -q -m 1048576 -l 4 \
    >"$TMP/cc.out" 2>&1 &
runner=$!
sim=
for _ in $(seq 200); do
    sim=$(pgrep -P $runner -x switchsim || true)
    [ -n "$sim" ] && break
    sleep 0.05
done
# its four communicators made (world, the splits): the checks on them are
# under way (3 s here; the loop of communicators made and freed comes after)
for _ in $(seq 600); do grep -q "group 4 of" "$TMP/cc.out" && break; sleep 0.05; done
sleep 0.5
kill -9 "$sim" 2>/dev/null || { cat "$TMP/cc.out"; fail "coll_check: switchsim gone before the test killed it"; }
wait $runner || { cat "$TMP/cc.out"; fail "coll_check with a killed switchsim failed"; }
expect_clean "$TMP/cc.out" coll_check "every collective with a killed switchsim: wrong results"
grep "^coll_check:" "$TMP/cc.out"
sed -nE 's/^agg_stats: (i[a-z_]*) calls=([0-9]+) .*(network_error=[0-9]+).*/  \1: \2 calls, \3 redone on the host/p' \
    "$TMP/cc.out"
grep -Eq "^agg_stats: i[a-z_]* .*network_error=[1-9]" "$TMP/cc.out" ||
    { grep agg_stats "$TMP/cc.out"; fail "coll_check: no non-blocking call was redone on the host"; }

# the network comes back: a switchsim killed, another registered in its
# place a second later; the communicator, on the host meanwhile, makes its
# group again after AGG_NET_RETRY_CALLS calls and the new switchsim carries
# its calls
"$BIN/aggmgr" --listen 127.0.0.1:0 --ready-fd 3 3>"$TMP/back.ready" >"$TMP/back_mgr.log" 2>&1 &
mgr=$!
for _ in $(seq 250); do grep -q : "$TMP/back.ready" && break; sleep 0.02; done
addr=$(head -1 "$TMP/back.ready")
"$BIN/switchsim" --am "$addr" --ready-fd 3 3>"$TMP/simA.ready" >"$TMP/simA.log" 2>&1 &
simA=$!
for _ in $(seq 250); do grep -q ready "$TMP/simA.ready" && break; sleep 0.02; done
"${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x AGG_AM_ADDR="$addr" -x HCOLL_ENABLE_SHARP=2 \
    -x HCOLL_SHARP_NP=2 -x AGG_STATS=1 -x AGG_NET_RETRY_CALLS=2000 "$BIN/fault_loop" 5 \
    >"$TMP/back.out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "under way" "$TMP/back.out" && break; sleep 0.05; done
sleep 0.5
kill -9 $simA
sleep 1
"$BIN/switchsim" --am "$addr" --ready-fd 3 --stats-file "$TMP/simB.stats" 3>"$TMP/simB.ready" \
    >"$TMP/simB.log" 2>&1 &
simB=$!
wait $job || { cat "$TMP/back.out"; fail "the job across a lost and a new switchsim failed"; }
kill -TERM $simB
wait $simB || true
kill -TERM $mgr
wait $mgr || true
grep '^fault_loop' "$TMP/back.out"
grep -q "^fault_loop: .* 0 wrong, 0 errors" "$TMP/back.out" || { cat "$TMP/back.out"; fail "a lost and a new switchsim: wrong results"; }
[ "$(grep -c 'lost its group on the tree' "$TMP/back.out")" = 1 ] ||
    { cat "$TMP/back.out"; fail "the lost group not said once"; }
[ "$(stat fragments_in "$TMP/simB.stats")" -gt 0 ] ||
    { cat "$TMP/back.out"; fail "the calls did not come back to the network (the new switchsim got nothing)"; }
echo "a lost switchsim, another in its place: the calls came back to the network ($(stat fragments_in "$TMP/simB.stats") fragments)"

# another spine: a fabric of two leaves and two spines, the leaves in one
# switchsim and each spine in its own; the spine the job's tree is rooted at
# is killed. The communicator runs on the host, makes its group again after
# AGG_NET_RETRY_CALLS calls, and aggmgr builds the job a tree through the
# other spine, which reduces the calls from then on
AGG_AM_JOURNAL=$TMP/sp.journal "$BIN/aggmgr" --fat-tree 2:2:2 --listen 127.0.0.1:0 \
    --ready-fd 3 3>"$TMP/sp.ready" >"$TMP/sp_mgr.log" 2>&1 &
mgr=$!
for _ in $(seq 250); do grep -q : "$TMP/sp.ready" && break; sleep 0.02; done
addr=$(head -1 "$TMP/sp.ready")
declare -A spsim
for s in leaf spine1 spine2; do
    AGG_SIM_SWITCHES="name:$s*" AGG_SIM_DATA_ADDR=127.0.0.1:0 "$BIN/switchsim" --am "$addr" \
        --ready-fd 3 --stats-file "$TMP/$s.stats" 3>"$TMP/$s.ready" >"$TMP/$s.log" 2>&1 &
    spsim[$s]=$!
    for _ in $(seq 250); do grep -q ready "$TMP/$s.ready" && break; sleep 0.02; done
done
"${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" -x AGG_AM_ADDR="$addr" -x HCOLL_ENABLE_SHARP=2 \
    -x AGG_STATS=1 -x AGG_NET_RETRY_CALLS=200 "$BIN/fault_loop" 4 >"$TMP/sp.out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "under way" "$TMP/sp.out" && break; sleep 0.05; done
root=$(AGG_AM_ADDR=$addr "$BIN/agg_info" -S | grep -o "^job 1: .* root S-[0-9a-f]*" | grep -o "S-[0-9a-f]*$")
if "$BIN/aggmgr" --fat-tree 2:2:2 --print-topology | grep -q "^Switch.*\"$root\".*\"spine1\""; then
    dead=spine1 other=spine2
else
    dead=spine2 other=spine1
fi
sleep 0.5
kill -9 "${spsim[$dead]}"
wait $job || { cat "$TMP/sp.out"; fail "the job across a lost spine failed"; }
kill -TERM "${spsim[leaf]}" "${spsim[$other]}"
wait "${spsim[leaf]}" "${spsim[$other]}" || true
kill -9 $mgr
wait $mgr 2>/dev/null || true
# the journal holds the job, its new tree and its end: read back, it starts
AGG_AM_JOURNAL=$TMP/sp.journal SHARP_COLL_LOG_LEVEL=3 "$BIN/aggmgr" --fat-tree 2:2:2 \
    --listen 127.0.0.1:0 --ready-fd 3 3>"$TMP/sp2.ready" >"$TMP/sp2_mgr.log" 2>&1 &
mgr=$!
for _ in $(seq 250); do grep -q : "$TMP/sp2.ready" && break; sleep 0.02; done
grep -q "0 jobs and 0 groups stand after 1 jobs" "$TMP/sp2_mgr.log" ||
    { cat "$TMP/sp2_mgr.log"; fail "the journal with a job's new tree did not read back"; }
kill -TERM $mgr
wait $mgr || true
line=$(grep '^fault_loop: [0-9]* calls' "$TMP/sp.out")
echo "$dead (the root) killed: $line"
echo "$line" | grep -q " 0 wrong, 0 errors" || { cat "$TMP/sp.out"; fail "a lost spine: wrong results or errors"; }
grep -q "its groups now use tree [0-9]* rooted at" "$TMP/sp_mgr.log" ||
    { cat "$TMP/sp_mgr.log"; fail "aggmgr did not move the job to a tree around the lost spine"; }
[ "$(stat fragments_reduced "$TMP/$other.stats")" -gt 0 ] ||
    { cat "$TMP/sp.out"; fail "the other spine reduced nothing: the calls did not come back to the network"; }
grep -E "^agg_stats: allreduce" "$TMP/sp.out"
echo "$other reduced $(stat fragments_reduced "$TMP/$other.stats") fragments after the reroute"

# what a switchsim killed elsewhere left: a pid that no process has
dead=4194000
while kill -0 $dead 2>/dev/null; do dead=$((dead - 1)); done
: >"/dev/shm/agg-$dead-host"
"$BIN/aggrun" -- "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 \
    -x SHARP_COLL_LOG_LEVEL=3 "$BIN/fault_loop" 0.2 >"$TMP/sweep.out" 2>&1 ||
    { cat "$TMP/sweep.out"; fail "a job after a killed switchsim failed"; }
[ ! -e "/dev/shm/agg-$dead-host" ] || { rm -f "/dev/shm/agg-$dead-host"; fail "the stale segment was left"; }
check_clean "$TMP"/*
echo "PASS"
