#!/usr/bin/env bash
# MPI_THREAD_MULTIPLE: three threads per rank, each on its own
# communicator, run blocking and non-blocking collectives at once; all are
# offloaded (libagg is asked to be thread-safe) and every result is right.
. "$(dirname "$0")/lib.sh"

# Open MPI is not built with ThreadSanitizer: under MPI_THREAD_MULTIPLE its
# own locking is invisible to it, and it reports Open MPI's internals (and
# buffers Open MPI fills from another thread). This test runs in the plain
# and AddressSanitizer builds; libagg's locks are covered under TSan by the
# unit and switchsim tests.
[ "$SANITIZER" != tsan ] ||
    skip "under ThreadSanitizer: Open MPI's MPI_THREAD_MULTIPLE internals are not instrumented"

for np in 2 3; do
    out=$TMP/mt$np.out
    "$BIN/aggrun" --stats-file "$TMP/mt$np.stats" -- "${MPIRUN[@]}" -np "$np" \
        -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=4 -x HCOLL_SHARP_NP=2 -x AGG_STATS=1 \
        "$BIN/mt_check" -t 3 -i 20 >"$out" 2>&1 || { cat "$out"; fail "mt_check at $np ranks failed"; }
    expect_clean "$out" mt_check "wrong results from threads at $np ranks"
    for coll in allreduce bcast reduce barrier; do
        line=$(grep "^agg_stats: $coll " "$out") || { cat "$out"; fail "no AGG_STATS line for $coll"; }
        case "$line" in *" llt=0 "*) fail "$coll not offloaded under MPI_THREAD_MULTIPLE: $line" ;; esac
        case "$line" in *" mpi=0"*) ;; *) fail "$coll left to MPI under MPI_THREAD_MULTIPLE: $line" ;; esac
    done
    grep -E "^mt_check" "$out"
done
check_clean "$TMP"/*
echo "PASS"
