#!/usr/bin/env bash
# The HPC-X documentation's two SHARP command lines, run as written but for
# what only makes sense on an InfiniBand cluster (-map-by ppr:1:node, which
# needs one host per rank; UCX and hcoll MCA flags are still passed), with
# agg_allreduce_perf in the place of osu_allreduce:
#   mpirun -np 2 -x UCX_TLS=dc,shm,self -x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_ENABLE_SAT=1 osu_allreduce
#   mpirun -np 2 -x HCOLL_MAIN_IB=mlx5_0:1 -x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_ENABLE_SAT=1
#          -x SHARP_COLL_SAT_THRESHOLD=4096 -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=4
#          -x HCOLL_ALLREDUCE_ZCOPY_TUNE=static -x HCOLL_SBGP=p2p -x HCOLL_BCOL=ucx_p2p
#          -x SHARP_COLL_LOG_LEVEL=3 osu_allreduce
# Every variable must be known (no "unknown variable" warning), results
# right, and at SHARP_COLL_LOG_LEVEL=3 rank 0 prints SHARP's lines for both
# trees and both groups, once each.
. "$(dirname "$0")/lib.sh"

perf() { # name [mpirun -x args...]
    local name=$1
    shift
    "$BIN/aggrun" --stats-file "$TMP/$name.stats" -- "${MPIRUN[@]}" -np 2 \
        -x LD_PRELOAD="$PRELOAD" "$@" "$BIN/agg_allreduce_perf" -b 8 -e 1M -n 20 -w 2 \
        >"$TMP/$name.out" 2>&1 || { cat "$TMP/$name.out"; fail "$name: a wrong result or a crash"; }
    ! grep -i "unknown variable" "$TMP/$name.out" || fail "$name: a variable of the command line is unknown"
    grep -q "offload wrong elements : 0 OK" "$TMP/$name.out" || fail "$name: wrong elements"
}

perf first -x UCX_TLS=dc,shm,self -x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_ENABLE_SAT=1
[ "$(stat sat_chunks_in "$TMP/first.stats")" -gt 0 ] || fail "first line: SAT was not used from 16 KiB"

perf tuned -x HCOLL_MAIN_IB=mlx5_0:1 -x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_ENABLE_SAT=1 \
    -x SHARP_COLL_SAT_THRESHOLD=4096 -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=4 \
    -x HCOLL_ALLREDUCE_ZCOPY_TUNE=static -x HCOLL_SBGP=p2p -x HCOLL_BCOL=ucx_p2p \
    -x SHARP_COLL_LOG_LEVEL=3
f=$TMP/tuned.out
count() { grep -cE "$1" "$f" || true; }
[ "$(count 'libagg:0:.*INFO job \(ID: [0-9]+\) resource request quota: \( osts:0 user_data_per_ost:0 max_groups:0 max_qps:1 max_group_channels:1, num_trees:2\)')" -eq 1 ] ||
    fail "no single job line asking for two trees"
[ "$(count 'libagg:0:.*INFO tree_info: type:LLT tree idx:0 treeID:0x[0-9a-f]+ caps:0x6 quota: \( osts:[0-9]+ user_data_per_ost:4096 ')" -eq 1 ] ||
    fail "no single LLT tree_info line"
[ "$(count 'libagg:0:.*INFO tree_info: type:SAT tree idx:1 treeID:0x[0-9a-f]+ caps:0x16')" -eq 1 ] ||
    fail "no single SAT tree_info line"
[ "$(count 'libagg:0:.*INFO \[group#:0\] group id:[0-9a-f]+ tree idx:0 tree_type:LLT rail_idx:0 group size:2 quota: \(osts:8 user_data_per_ost:4096\) mgid: \(subnet prefix:0x0 interface id:0x0\) mlid:0')" -eq 1 ] ||
    fail "no single LLT group line"
[ "$(count 'libagg:0:.*INFO \[group#:1\] group id:[0-9a-f]+ tree idx:1 tree_type:SAT rail_idx:0 group size:2 quota: \(osts:4 user_data_per_ost:0\)')" -eq 1 ] ||
    fail "no single SAT group line"
[ "$(count 'libagg:[1-9][0-9]*:.*INFO (job|tree_info|\[group#)')" -eq 0 ] || fail "SHARP's lines from a rank other than 0"
[ "$(stat sat_chunks_in "$TMP/tuned.stats")" -gt 0 ] || fail "tuned line: SAT was not used from 4 KiB"
[ "$(stat llt_fragments_in "$TMP/tuned.stats")" -gt 0 ] || fail "tuned line: the LLT was not used below 4 KiB"

# HCOLL_MAIN_IB names a device no adapter has: the job cannot be placed, and says so
"$BIN/aggrun" -- "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=1 \
    -x HCOLL_MAIN_IB=mlx9_7:1 "$BIN/allreduce_check" --max-count 7 --world-only >"$TMP/nodev.out" 2>&1 ||
    { cat "$TMP/nodev.out"; fail "an unusable HCOLL_MAIN_IB at level 1 must fall back to the host"; }
expect_clean "$TMP/nodev.out" allreduce_check "host fallback results"
grep -q "not available" "$TMP/nodev.out" || fail "no warning that the network is not available"
check_clean "$TMP"/*
echo "PASS"
