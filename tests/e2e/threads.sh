#!/usr/bin/env bash
# MPI_THREAD_MULTIPLE: three threads per rank, each on its own
# communicator, run blocking and non-blocking collectives at once; all are
# offloaded (libagg is asked to be thread-safe) and every result is right.
. "$(dirname "$0")/lib.sh"

# Under ThreadSanitizer: lock order and lock misuse only (tsan_mt.supp).
# Open MPI is not instrumented, so what it hands between threads shows as
# races; the order in which threads take libagg's and the shim's locks does
# not depend on it (this found the waiter holding its communicator's lock
# while MPI's progress engine freed another's).
if [ "$SANITIZER" = tsan ]; then
    TSAN_OPTIONS="$TSAN_OPTIONS suppressions=$(cd "$(dirname "$0")" && pwd)/tsan_mt.supp"
fi

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
