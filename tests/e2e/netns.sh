#!/usr/bin/env bash
# Across hosts, on one machine: five network namespaces stand for a head
# node (aggh0: aggmgr, and the switchsim of the spine) and four hosts
# (aggh1..aggh4: a switchsim each hosting its own leaf switch, and one rank
# each, launched by mpirun through tools/netns_rsh). The fabric is
# tests/data/netns_4h.topo. Everything listens on the namespaces' addresses,
# so every peer proves the shared secret.
#
# Checked: allreduce on LLT and SAT, every type and op, right; every
# collective right; each host sends its buffer about once per allreduce
# (its interface's counters) where Open MPI's own algorithms send 1.5 times
# it; a client without the secret is refused, and the aggmgr log says so;
# with one switchsim stopped, aggmgr serves a job on the others meanwhile;
# then the other layout: one switchsim on the head hosting every switch,
# the ranks reaching it over TCP. With NETNS_FIGURES=1 (never under the
# sanitizers) it also takes the figures docs/architecture.md quotes: the
# bytes and times up to 16 MiB, 10 calls a size, and the TCP transport
# against raw socket throughput between two namespaces (about a minute more;
# the test itself checks the same at 64 KiB and 1 MiB and one 64 MiB call).
# On one machine these measure CPU and memory, not a network.
#   netns.sh BUILD [a|b|c|all]
# a: layout A and the checks made on it; c: every collective on layout A
# (full tier only); b: layout B; all (the default): everything, in
# namespaces aggh0..4 on 10.77.0. a, b and c each take namespaces and a
# subnet of their own (agga on 10.77.1, aggb on .2, aggc on .3), so they run
# at once (ctest's e2e.netns.a, .b and .c).
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NETNS=$ROOT/tools/netns.sh
RSH=$ROOT/tools/netns_rsh
PART=${2:-all}
case "$PART" in
all) P=aggh NETNS_NET=10.77.0 ;;
a) P=agga NETNS_NET=10.77.1 ;;
b) P=aggb NETNS_NET=10.77.2 ;;
c) P=aggc NETNS_NET=10.77.3 ;;
*) fail "netns.sh: part '$PART' is not a, b, c or all" ;;
esac
export NETNS_NET
# the fabric's hosts are named as the namespaces
TOPO=$TMP/netns_4h.topo
sed "s/aggh\([0-4]\)/$P\1/g" "$ROOT/tests/data/netns_4h.topo" >"$TOPO"
T=180 # seconds, for every wait

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
for tool in ip unshare flock mpirun; do
    command -v "$tool" >/dev/null || skip "no $tool"
done
ip netns add "aggprobe$$" 2>/dev/null || skip "this machine cannot make network namespaces"
ip netns del "aggprobe$$"
# Sizes: the LLT's up to 256 Ki elements, SAT's up to 512 Ki (at 256 KiB
# chunks, 8-16 of them a call: the pipeline of four wraps and three lanes do
# not divide it); under the sanitizers (much slower) the sanitizer tier's
# (lib.sh: 65549 elements in 16 KiB chunks, the same shapes), and the
# collectives across hosts and the 64 MiB call only without them.
FIGURES=${NETNS_FIGURES:-0}
FULL=1
LLT_COUNT=$((MAX_COUNT / 16))
SAT_COUNT=$((MAX_COUNT / 8))
SIM_WAIT=6000 # ms aggmgr gives a switchsim (am_sim_timeout_ms): a job elsewhere runs meanwhile
if [ $QUICK = 1 ]; then
    FULL=0
    LLT_COUNT=$MAX_COUNT
    SAT_COUNT=$MAX_COUNT
fi
[ $FULL = 1 ] || [ "$PART" != c ] || skip "netns c: the collectives across hosts run in the full tier"
if [ -n "$SANITIZER" ]; then # timing is no test here, and everything is slower
    FIGURES=0
    T=600
    SIM_WAIT=20000
fi

ip_of() { echo "$NETNS_NET.$(($1 + 2))"; }

# in_ns I CMD...: CMD in namespace I under its own hostname (as netns_rsh does for
# ranks). bg_ns I CMD... &: the same in the background, with $! CMD's own pid.
in_ns() {
    local i=$1
    shift
    ip netns exec "$P$i" unshare --uts -- sh -c 'hostname "$0"; exec "$@"' "$P$i" "$@"
}
bg_ns() {
    local i=$1
    shift
    exec ip netns exec "$P$i" unshare --uts -- sh -c 'hostname "$0"; exec "$@"' "$P$i" "$@"
}

DAEMONS=()
netns_cleanup() {
    local pid
    set +e
    for pid in "${DAEMONS[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    for pid in "${DAEMONS[@]}"; do
        timeout 10 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -9 "$pid" 2>/dev/null
    done
    for i in 0 1 2 3 4; do
        pids=$(ip netns pids "$P$i" 2>/dev/null)
        [ -z "$pids" ] || kill -9 $pids 2>/dev/null
    done
    "$NETNS" down "$P" >/dev/null 2>&1
    cleanup
}
trap netns_cleanup EXIT

exec 9>"/run/lock/agg-netns-$P.lock"
flock -w $T 9 || fail "another netns test held the lock for ${T}s"
"$NETNS" up 5 "$P" || fail "cannot create the namespaces"

export AGG_AM_SECRET
AGG_AM_SECRET=$(head -c 24 /dev/urandom | base64)
AM=$(ip_of 0):6126
export AGG_AM_ADDR=$AM
export AGG_AM_SIM_TIMEOUT_MS=$SIM_WAIT # aggmgr's, and agg_info's to wait for it

# start_sim I SWITCHES NAME [PORT]: a switchsim in namespace I, data port on its address
start_sim() {
    AGG_SIM_SWITCHES=$2 AGG_SIM_DATA_ADDR=$(ip_of "$1"):${4:-7126} \
        bg_ns "$1" "$BIN/switchsim" --am "$AM" --stats-file "$TMP/$3.stats" \
        --ready-fd 3 3>"$TMP/$3.ready" >"$TMP/$3.log" 2>&1 &
    DAEMONS+=($!)
    for _ in $(seq 250); do grep -q ready "$TMP/$3.ready" && return 0; sleep 0.02; done
    cat "$TMP/$3.log"
    grep -E "switchsim|refused" "$TMP/mgr.log" | tail -20
    fail "switchsim $3 in $P$1 did not register"
}

stop_sims() {
    local pid keep=("${DAEMONS[0]}")
    for pid in "${DAEMONS[@]:1}"; do
        kill -TERM "$pid"
        timeout 20 tail --pid="$pid" -f /dev/null || fail "switchsim $pid did not stop"
    done
    DAEMONS=("${keep[@]}")
}

bg_ns 0 env SHARP_COLL_LOG_LEVEL=3 "$BIN/aggmgr" --topology "$TOPO" --listen "$AM" --ready-fd 3 3>"$TMP/mgr.ready" \
    >"$TMP/mgr.log" 2>&1 &
DAEMONS+=($!)
for _ in $(seq 250); do grep -q : "$TMP/mgr.ready" && break; sleep 0.02; done
grep -q : "$TMP/mgr.ready" || { cat "$TMP/mgr.log"; fail "aggmgr did not start in ${P}0"; }

# the TCP transport against raw socket throughput between two namespaces: one
# rank on aggh1, the switchsim on aggh0; each call moves N up and N down the
# link. Raw: one socket one way, and two at once, one each way (what the
# transport does), N-byte writes for 2 s each.
bandwidth() {
    local iters=1 sizes=67108864
    [ $FIGURES = 0 ] || { iters=10; sizes=16777216,67108864; }
    sockperf() { # SERVER_NS CLIENT_NS PORT OUT [OPTIONS for both ends]
        bg_ns "$1" "$BIN/agg_sockperf" -s "$(ip_of "$1"):$3" "${@:5}" >"$4.srv" 2>&1 &
        local srv=$!
        in_ns "$2" "$BIN/agg_sockperf" -c "$(ip_of "$1"):$3" -t 2 "${@:5}" >"$4" 2>&1 ||
            { cat "$4" "$4.srv"; fail "agg_sockperf failed"; }
        wait $srv
    }
    if [ $FIGURES = 1 ]; then # the raw sockets' figures
        sockperf 0 1 7999 "$TMP/raw1"
        sockperf 0 1 7998 "$TMP/rawup" &
        up=$!
        sockperf 1 0 7997 "$TMP/rawdown"
        wait $up || fail "agg_sockperf failed"
        gbps() { awk '/GB\/s/ {print $(NF - 1 - 2 * ($NF == "way"))}' "$1"; }
        raw1=$(gbps "$TMP/raw1")
        raw2=$(awk -v a="$(gbps "$TMP/rawup")" -v b="$(gbps "$TMP/rawdown")" 'BEGIN {print a + b}')
        echo "raw sockets aggh1 <-> aggh0: one way $raw1 GB/s; both ways at once $raw2 GB/s in all"
        # the transport's pattern on a raw socket: 256 KiB writes echoed back, 1 MiB
        # unanswered at most (the default SAT pipeline; NETNS_ECHO_SWEEP="BYTES:WINDOW
        # ..." other sizes), one thread at each end for both directions, then a
        # thread per direction, a connection each way, and both
        for e in ${NETNS_ECHO_SWEEP:-262144:1048576}; do
            sockperf 0 1 7996 "$TMP/echo1" -e -b "${e%%:*}" -w "${e#*:}"
            sockperf 0 1 7995 "$TMP/echo2" -e -T -b "${e%%:*}" -w "${e#*:}"
            sockperf 0 1 7994 "$TMP/echo3" -e -2 -b "${e%%:*}" -w "${e#*:}"
            sockperf 0 1 7993 "$TMP/echo4" -e -T -2 -b "${e%%:*}" -w "${e#*:}"
            echo "raw echo aggh1 -> aggh0 -> aggh1, $e, GB/s each way: one thread an end" \
                "$(gbps "$TMP/echo1"); a thread per direction $(gbps "$TMP/echo2"); a connection" \
                "each way $(gbps "$TMP/echo3"); a thread and a connection each way $(gbps "$TMP/echo4")"
            [ -n "${rawe:-}" ] || rawe=$(gbps "$TMP/echo1")
            # K connections at once (NETNS_ECHO_LANES, default 4, the transport's
            # tcp_lanes), the window dealt over them: one thread an end for all
            # (the transport's pattern: the like-for-like bound), and a thread an
            # end for each
            for k in ${NETNS_ECHO_LANES:-4}; do
                [ "$k" -gt 1 ] || continue
                w=$(( ${e#*:} / k > ${e%%:*} ? ${e#*:} / k : ${e%%:*} ))
                sockperf 0 1 7992 "$TMP/echoP1" -e -P "$k" -1 -b "${e%%:*}" -w "$w"
                sockperf 0 1 7991 "$TMP/echoP" -e -P "$k" -b "${e%%:*}" -w "$w"
                echo "raw echo aggh1 -> aggh0 -> aggh1, $e, $k connections, GB/s each way: one" \
                    "thread an end $(gbps "$TMP/echoP1"); a thread an end each $(gbps "$TMP/echoP")"
                [ -n "${rawk:-}" ] || { rawk=$(gbps "$TMP/echoP1"); rawk_n=$k; }
            done
        done
    fi
    # NETNS_BW_SWEEP="DEPTH:CHUNK ..." measures other SAT pipelines too (the
    # defaults when unset); NETNS_BW_X="-x VAR=VALUE ..." gives the rank more
    # settings, and then its output's lines matching NETNS_BW_GREP (default:
    # the TCP window libagg logs at SHARP_COLL_LOG_LEVEL=4) are shown;
    # NETNS_BW_SIZES="BYTES,..." other sizes per call
    for pipe in ${NETNS_BW_SWEEP:-default}; do
        popts=()
        [ "$pipe" = default ] ||
            popts=(-x SHARP_COLL_PIPELINE_DEPTH="${pipe%%:*}" -x AGG_SAT_CHUNK_SIZE="${pipe#*:}")
        run tcp_bw -np 1 --host "$(ip_of 1)" -x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096 \
            -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=4 -x HCOLL_SHARP_NP=1 ${NETNS_BW_X:-} "${popts[@]}" -- \
            "$BIN/agg_link_bytes" -n $iters -s "${NETNS_BW_SIZES:-$sizes}"
        grep -q "every result right" "$TMP/tcp_bw.out" || { cat "$TMP/tcp_bw.out"; fail "tcp_bw: wrong results"; }
        ! grep -q "failed in the network" "$TMP/tcp_bw.out" ||
            { cat "$TMP/tcp_bw.out"; fail "tcp_bw: calls fell back to the host"; }
        [ -z "${NETNS_BW_X:-}" ] || grep -E "${NETNS_BW_GREP:-in flight}" "$TMP/tcp_bw.out" || true
        [ $FIGURES = 1 ] || { echo "one rank over TCP, $sizes bytes a call: right, none fell back to the host"; continue; }
        awk -v raw1="$raw1" -v raw2="$raw2" -v rawe="$rawe" -v rawk="${rawk:-0}" -v k="${rawk_n:-0}" \
            -v pipe="$pipe" '$2 == "offload" {
                bw = $1 / $3 / 1000
                printf "TCP transport, %d bytes per call (SAT pipeline %s): %.3f GB/s each way (%.3f in all): %.2f of one raw socket one way, %.2f of raw both ways, %.2f of the raw echo", $1, pipe, bw, 2 * bw, bw / raw1, 2 * bw / raw2, bw / rawe
                if (rawk > 0) printf ", %.2f of the raw echo on %d connections (one thread an end)", bw / rawk, k
                printf "\n" }' \
            "$TMP/tcp_bw.out"
    done
}

HOSTS=$(ip_of 1),$(ip_of 2),$(ip_of 3),$(ip_of 4)
MPI=(timeout -k 10 $T mpirun --allow-run-as-root --oversubscribe
     --mca plm rsh --mca plm_rsh_agent "$RSH" --mca btl tcp,self --mca btl_tcp_if_include "$NETNS_NET.0/24"
     --mca oob_tcp_if_include "$NETNS_NET.0/24" --mca orte_tmpdir_base "$TMP"
     -x LD_PRELOAD="$PRELOAD" -x AGG_AM_ADDR -x AGG_AM_SECRET -x HCOLL_ENABLE_SHARP=3
     -x AGG_STATS=1)
[ -z "$SANITIZER" ] || MPI+=(-x ASAN_OPTIONS)
[ -z "${AGG_SAT_CHUNK_SIZE:-}" ] || MPI+=(-x AGG_SAT_CHUNK_SIZE)

# run NAME [mpirun options] -- PROGRAM ARGS: output in $TMP/NAME.out; a rank on
# each host unless the options say -np and --host
run() {
    local name=$1 opts=(-np 4 --host "$HOSTS")
    shift
    [ "$1" != -np ] || opts=()
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    "${MPI[@]}" "${opts[@]}" "$@" >"$TMP/$name.out" 2>&1 || { cat "$TMP/$name.out"; fail "$name failed"; }
    check_clean "$TMP/$name.out"
}

# NETNS_BW_ONLY=1: the transport's bandwidth alone (layout B), no checks
if [ "${NETNS_BW_ONLY:-0}" = 1 ]; then
    FIGURES=1
    start_sim 0 all simall 7127
    bandwidth
    exit 0
fi

# bytes NAME TITLE: what each host sends per allreduce, the offload against Open
# MPI, same run: about its buffer once, against Open MPI's 1.5 buffers
SIZES=65536,1048576 BYTES_ITERS=3
[ $FIGURES = 0 ] || { SIZES=65536,1048576,4194304,16777216; BYTES_ITERS=10; }
bytes() {
    run "$1" -x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096 \
        -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=4 -- "$BIN/agg_link_bytes" -n $BYTES_ITERS -s "$SIZES"
    grep -q "every result right" "$TMP/$1.out" || { cat "$TMP/$1.out"; fail "$1: wrong results"; }
    echo "$2:"
    grep -E "^#|^ +[0-9]" "$TMP/$1.out"
    awk '$2 == "offload" && $1 >= 1048576 && ($7 > 1.25 || $6 < 0.9) { bad = 1 }
         $2 == "mpi" && $1 >= 1048576 && $6 < 1.35 { bad = 1 }
         END { exit bad }' "$TMP/$1.out" ||
        fail "$1: a host sent other than about its buffer once (offload) or 1.5 times (Open MPI)"
}
if [ "$PART" != b ]; then
    # layout A: each host's leaf in a switchsim on that host, the spine on the head
    for i in 1 2 3 4; do
        start_sim "$i" host "sim$i"
    done
    start_sim 0 all sim0
    for i in 1 2 3 4; do
        grep -q "registered: pid [0-9]* on $P$i hosts 1 switches (host)" "$TMP/mgr.log" ||
            { cat "$TMP/mgr.log"; fail "the switchsim of $P$i should host its leaf alone"; }
    done
    grep -q "registered: pid [0-9]* on ${P}0 hosts 1 switches (all)" "$TMP/mgr.log" ||
        { cat "$TMP/mgr.log"; fail "the head's switchsim should host the spine alone"; }

    if [ "$PART" != c ]; then
        run llt -x SHARP_COLL_ENABLE_SAT=0 -- "$BIN/allreduce_check" "${CHECK_OPTS[@]}" --max-count $LLT_COUNT
        expect_clean "$TMP/llt.out" allreduce_check "LLT across hosts: wrong results"
        grep -Eq "^agg_stats: allreduce calls=[0-9]+ llt=[1-9]" "$TMP/llt.out" ||
            { grep agg_stats "$TMP/llt.out"; fail "LLT across hosts: nothing offloaded"; }
        run sat -x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096 \
            -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=4 -- "$BIN/allreduce_check" "${CHECK_OPTS[@]}" --max-count $SAT_COUNT
        expect_clean "$TMP/sat.out" allreduce_check "SAT across hosts: wrong results"
        grep -Eq "^agg_stats: allreduce .* sat=[1-9]" "$TMP/sat.out" ||
            { grep agg_stats "$TMP/sat.out"; fail "SAT across hosts: nothing offloaded"; }
    fi
    if [ $FULL = 1 ] && [ "$PART" != a ]; then # every collective across hosts (c, all)
        run colls -x SHARP_COLL_ENABLE_SAT=1 -- "$BIN/coll_check" -m $LLT_COUNT
        grep -Eq "^coll_check: [1-9][0-9]* passed, 0 failed$" "$TMP/colls.out" ||
            { tail -20 "$TMP/colls.out"; fail "collectives across hosts: wrong results"; }
    fi
    echo "across hosts, leaves on their hosts: $(grep -h 'passed' "$TMP"/llt.out "$TMP"/sat.out "$TMP"/colls.out 2>/dev/null | tr '\n' ' ')"
    if [ "$PART" != c ]; then
        bytes bytes "layout A (leaf switchsim on each host, spine on the head)"

        # a client without the secret is refused, and aggmgr says so
        if AGG_AM_SECRET= in_ns 1 "$BIN/agg_info" -S >"$TMP/nosecret.out" 2>&1; then
            cat "$TMP/nosecret.out"
            fail "agg_info without the secret was let in"
        fi
        AGG_AM_SECRET=wrong in_ns 1 "$BIN/agg_info" -S >"$TMP/wrong.out" 2>&1 && fail "a wrong secret was let in"
        grep -qi "secret" "$TMP/nosecret.out" || { cat "$TMP/nosecret.out"; fail "no word of the secret"; }
        sleep 0.3
        grep -q "refused" "$TMP/mgr.log" || { cat "$TMP/mgr.log"; fail "aggmgr did not log the refusal"; }
        in_ns 2 "$BIN/agg_info" -S >"$TMP/stats.out" 2>&1 || { cat "$TMP/stats.out"; fail "agg_info with the secret refused"; }
        echo "counters of all five switchsims, through aggmgr:"
        grep -E "fragments_in|bytes_in|results_out|groups_total" "$TMP/stats.out"

        # aggmgr never waits on one switchsim: with the one of aggh2 stopped, a STATS
        # (asked of every switchsim) waits for it until am_sim_timeout_ms; meanwhile
        # a whole job on aggh1 (its leaf in its own switchsim) is served, start to end
        kill -STOP "${DAEMONS[2]}"
        in_ns 3 "$BIN/agg_info" -S >"$TMP/stalled.out" 2>&1 &
        stalled=$!
        sleep 0.5
        if ! in_ns 1 "$BIN/agg_hello" >"$TMP/hello.out" 2>&1; then
            kill -CONT "${DAEMONS[2]}"
            cat "$TMP/hello.out"
            fail "a job on ${P}1 failed while the switchsim of ${P}2 was stopped"
        fi
        kill -0 $stalled 2>/dev/null ||
            { kill -CONT "${DAEMONS[2]}"; cat "$TMP/stalled.out"; fail "STATS came back before the stopped switchsim's deadline"; }
        grep -q "Test Passed" "$TMP/hello.out" || { cat "$TMP/hello.out"; fail "agg_hello on ${P}1: no pass"; }
        wait $stalled && { cat "$TMP/stalled.out"; fail "STATS succeeded with a switchsim stopped"; }
        kill -CONT "${DAEMONS[2]}"
        grep -q "counters: none (timed out)" "$TMP/stalled.out" || { cat "$TMP/stalled.out"; fail "aggmgr did not answer the STATS with the timeout"; }
        grep -q "did not answer STATS" "$TMP/mgr.log" || { tail "$TMP/mgr.log"; fail "aggmgr did not say which switchsim was late"; }
        cat "$TMP/stalled.out"
        echo "a job on ${P}1 was served while a STATS waited on the stopped switchsim of ${P}2"
        # the late answer is dropped, and the switchsim answers the next one
        sleep 0.5
        in_ns 2 "$BIN/agg_info" -S >"$TMP/stats2.out" 2>&1 || { cat "$TMP/stats2.out"; fail "STATS after the switchsim went on"; }

        # a link between switchsims breaks (aggh1's leaf to the spine, killed under
        # it with ss -K): the leaf tells aggmgr at its next send, aggmgr drops the
        # groups across it (their members fail at once and the shim's host
        # algorithms take over, results right: HCOLL_ENABLE_SHARP=2, where 3 would
        # make the failure an error), and the next job's group makes the link again. (Out-of-place calls: an in-place one that fails in the network
        # cannot be redone, as part of its buffer may hold results; the shim says so.)
        if command -v ss >/dev/null && in_ns 1 ss -K dst "$(ip_of 0)" dport = :7126 >/dev/null 2>&1; then
            run linkdown -x SHARP_COLL_ENABLE_SAT=0 -x HCOLL_ENABLE_SHARP=2 -- \
                "$BIN/agg_link_bytes" -n 3 -s 4096,65536
            grep -q "every result right" "$TMP/linkdown.out" || { cat "$TMP/linkdown.out"; fail "a broken link: wrong results"; }
            grep -Eq "^agg_stats: allreduce .*network_error=[1-9]" "$TMP/linkdown.out" ||
                { grep agg_stats "$TMP/linkdown.out"; fail "a broken link: no call saw it"; }
            grep -Eq "reports its link to $(ip_of 0):7126 broke: .* [1-9][0-9]* groups across it dropped" \
                "$TMP/mgr.log" || { tail -20 "$TMP/mgr.log"; fail "aggmgr did not drop the groups across the broken link"; }
            run relink -x SHARP_COLL_ENABLE_SAT=0 -- "$BIN/allreduce_check" "${CHECK_OPTS[@]}" --max-count 4096
            expect_clean "$TMP/relink.out" allreduce_check "after a broken link: wrong results"
            grep -Eq "^agg_stats: allreduce calls=[0-9]+ llt=[1-9]" "$TMP/relink.out" ||
                { grep agg_stats "$TMP/relink.out"; fail "after a broken link: nothing offloaded (the link not made again)"; }
            echo "a broken link: its groups dropped, results right, the next job offloaded again"
        else
            echo "SKIP (broken link): ss -K cannot kill sockets here"
        fi

    fi
    stop_sims
fi

if [ "$PART" = b ] || [ "$PART" = all ]; then
    # layout B: one switchsim on the head hosts every switch; ranks reach it over TCP
    # (a new port: the old one may linger in TIME_WAIT.) It gives a joining peer
    # 60 s to prove the secret, and one that connects and says nothing meanwhile
    # holds up nobody: the ranks (3 s to join) get in beside it
    AGG_CONNECT_TIMEOUT_MS=60000 start_sim 0 all simall 7127
    in_ns 3 bash -c 'exec 5<>/dev/tcp/$0/7127 && exec sleep 60' "$(ip_of 0)" &
    silent=$!
    sleep 0.3
    run tcp_llt -x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096 \
        -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=4 -- "$BIN/allreduce_check" "${CHECK_OPTS[@]}" --max-count $LLT_COUNT
    expect_clean "$TMP/tcp_llt.out" allreduce_check "ranks over TCP: wrong results"
    grep -Eq "^agg_stats: allreduce calls=[0-9]+ llt=[1-9]" "$TMP/tcp_llt.out" ||
        { grep agg_stats "$TMP/tcp_llt.out"; fail "ranks over TCP (a silent peer beside them): nothing offloaded"; }
    kill -0 $silent 2>/dev/null || fail "the silent peer was gone before the ranks were done"
    kill $silent
    wait $silent 2>/dev/null || true # killed
    # a SAT member's stream over one connection, and over three (which do not
    # divide the window of four chunks): results right, each rank said how many
    run_lanes() {
        run "tcp_lanes$1" -x AGG_TCP_LANES="$1" -x SHARP_COLL_LOG_LEVEL=4 -x SHARP_COLL_ENABLE_SAT=1 \
            -x SHARP_COLL_SAT_THRESHOLD=4096 -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=4 -- \
            "$BIN/allreduce_check" "${CHECK_OPTS[@]}" --max-count $SAT_COUNT
        expect_clean "$TMP/tcp_lanes$1.out" allreduce_check "SAT over $1 connection(s) a member: wrong results"
        grep -Eq "^agg_stats: allreduce .* sat=[1-9]" "$TMP/tcp_lanes$1.out" ||
            { grep agg_stats "$TMP/tcp_lanes$1.out"; fail "SAT over $1 connection(s) a member: nothing offloaded"; }
        [ "$(grep -c "SAT group .* in flight on $1 connection" "$TMP/tcp_lanes$1.out")" -ge 4 ] ||
            { grep "in flight" "$TMP/tcp_lanes$1.out"; fail "SAT members did not open $1 connection(s) each"; }
    }
    run_lanes 1
    run_lanes 3
    echo "SAT over TCP, one and three connections a member: $(grep -h passed "$TMP"/tcp_lanes[13].out | tr '\n' ' ')"
    bytes bytes_b "layout B (every switch in one switchsim on the head, ranks over TCP)"

fi

# the daemons' own reports (a sanitizer's among them)
check_clean "$TMP"/mgr.log "$TMP"/sim*.log
if [ $FULL = 0 ]; then
    echo "netns: all checks passed (the quick tier; the collectives across hosts and a 64 MiB call in the full one)"
    exit 0
fi

if [ "$PART" = b ] || [ "$PART" = all ]; then # over layout B's switchsim
    bandwidth
    [ $FIGURES = 1 ] || echo "(NETNS_FIGURES=1 for the figures up to 16 MiB and against raw sockets)"
fi
echo "netns: all checks passed"
