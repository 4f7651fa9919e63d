#!/usr/bin/env bash
# The host path: with HCOLL_ENABLE_SHARP=0 nothing reaches switchsim, and
# types/ops the network cannot reduce (MINLOC pairs, long double, derived
# types, user ops) stay on the host even when forced; results are right.
. "$(dirname "$0")/lib.sh"

run_check off 2 -x HCOLL_ENABLE_SHARP=0 -- --max-count 4099 --world-only
[ "$(stat fragments_in "$TMP/off.stats")" -eq 0 ] || fail "HCOLL_ENABLE_SHARP=0 still sent fragments"
[ "$(stat groups_total "$TMP/off.stats")" -eq 0 ] || fail "HCOLL_ENABLE_SHARP=0 still created groups"

# intercommunicator, long double, derived type with a user op: never an
# allreduce in the network (the program's closing MPI_Reduce is), each
# counted with its reason (AGG_STATS)
run_check unsupported 2 -x HCOLL_ENABLE_SHARP=3 -x AGG_STATS=1 -- --unsupported-only
line=$(grep '^agg_stats: allreduce ' "$TMP/unsupported.out") || { cat "$TMP/unsupported.out"; fail "no AGG_STATS line for allreduce"; }
echo "$line"
case "$line" in *" llt=0 sat=0 "*) ;; *) fail "an unsupported allreduce was sent to switchsim: $line" ;; esac
for why in derived intercomm type; do
    case "$line" in *" $why="[1-9]*) ;; *) fail "no allreduce counted as not offloaded for '$why': $line" ;; esac
done

# The shim's own host algorithms (HCOLL_ENABLE_SHARP=0), tuned by measuring:
# small allreduces by recursive doubling, large ones by Rabenseifner or ring
# (a quarter of it in the quick tier, still well into the large ones)
big=1048576
[ $QUICK = 0 ] || big=262144
run_check dynamic 3 -x HCOLL_ENABLE_SHARP=0 -x HCOLL_ALLREDUCE_ZCOPY_TUNE=dynamic -x AGG_STATS=1 \
    -- --max-count $big --world-only
line=$(grep '^agg_stats: allreduce ' "$TMP/dynamic.out") || fail "no AGG_STATS line for allreduce"
echo "$line"
case "$line" in *" recursive_doubling=0 "*) fail "no allreduce by recursive doubling: $line" ;; esac
case "$line" in *" rabenseifner=0 ring=0 "*) fail "no large allreduce by Rabenseifner or ring: $line" ;; esac
case "$line" in *" llt=0 sat=0 "*) ;; *) fail "HCOLL_ENABLE_SHARP=0 offloaded: $line" ;; esac

# Each host algorithm forced, at even and odd rank counts, against
# PMPI_Allreduce: counts 0 to 65537, in place, pairs, rounding floats
for np in 2 3 5; do
    "${MPIRUN[@]}" -np "$np" -x LD_PRELOAD="${SANITIZER_PRELOAD:-}" "$BIN/agg_host_bench" -C \
        >"$TMP/algs$np.out" 2>&1 || { cat "$TMP/algs$np.out"; fail "host algorithms wrong at $np ranks"; }
    grep -E "^agg_host_bench: [1-9][0-9]* passed, 0 failed" "$TMP/algs$np.out"
done

# HCOLL_ALLREDUCE_HYBRID_LB: large allreduces cut into 4 KiB allreduces, all in flight
run_check hybrid 2 -x HCOLL_ENABLE_SHARP=3 -x HCOLL_ALLREDUCE_HYBRID_LB=1 \
    -x HCOLL_HYBRID_AR_LB_FRAG_THRESH=4096 -- --max-count 65536 --world-only
[ "$(stat fragments_in "$TMP/hybrid.stats")" -gt 0 ] || fail "HCOLL_ALLREDUCE_HYBRID_LB: not offloaded"

# AGG_SHIM_DISABLE=1: as if the shim were not there, even when forced on
run_check disabled 2 -x HCOLL_ENABLE_SHARP=3 -x AGG_SHIM_DISABLE=1 -x AGG_STATS=1 -- --max-count 4099
[ "$(stat groups_total "$TMP/disabled.stats")" -eq 0 ] || fail "AGG_SHIM_DISABLE=1 still created groups"
! grep -q '^agg_stats:' "$TMP/disabled.out" || fail "AGG_SHIM_DISABLE=1 still counted calls"

# MPI_THREAD_MULTIPLE: offloaded as well (libagg is thread-safe when asked), results right
run_check threads 2 -x HCOLL_ENABLE_SHARP=3 -- --max-count 257 --world-only --thread-multiple
[ "$(stat fragments_in "$TMP/threads.stats")" -gt 0 ] || fail "not offloaded under MPI_THREAD_MULTIPLE"

# Out of quota: the job may hold one group. MPI_COMM_WORLD takes it; the
# split communicators are refused and stay on the host path, still right
# (HCOLL_ENABLE_SHARP=2: 3 would make their collectives errors).
run_check quota 4 -x HCOLL_ENABLE_SHARP=2 -x SHARP_COLL_JOB_QUOTA_MAX_GROUPS=1 \
    -x SHARP_COLL_LOG_LEVEL=3 -- --max-count 257
[ "$(stat groups_total "$TMP/quota.stats")" -eq 1 ] || fail "expected exactly one group within the quota"
[ "$(stat fragments_in "$TMP/quota.stats")" -gt 0 ] || fail "the world communicator was not offloaded"
grep -q "not offloaded: quota exceeded" "$TMP/quota.out" || { cat "$TMP/outq"; fail "no message saying why a communicator was not offloaded"; }
# SHARP's INFO lines at SHARP_COLL_LOG_LEVEL=3, once each, from rank 0 only
count() { grep -cE "$1" "$TMP/quota.out" || true; }
[ "$(count 'libagg:0:.*INFO job \(ID: [0-9]+\) resource request quota: \( osts:0 user_data_per_ost:0 max_groups:1 max_qps:1 max_group_channels:1, num_trees:1\)')" -eq 1 ] ||
    fail "no single job quota INFO line"
[ "$(count 'libagg:0:.*INFO tree_info: type:LLT tree idx:0 treeID:0x[0-9a-f]+ caps:0x6 quota: \( osts:204 user_data_per_ost:4096 max_groups:1 ')" -eq 1 ] ||
    fail "no single tree_info INFO line"
[ "$(count 'libagg:0:.*INFO \[group#:0\] group id:[0-9a-f]+ tree idx:0 tree_type:LLT rail_idx:0 group size:4 quota: \(osts:8 user_data_per_ost:4096\)')" -eq 1 ] ||
    fail "no single group INFO line"
[ "$(count 'libagg:[1-9][0-9]*:.*INFO (job|tree_info|\[group#)')" -eq 0 ] || fail "SHARP's INFO lines from ranks other than 0"

check_clean "$TMP"/*
echo "PASS"
