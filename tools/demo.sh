#!/usr/bin/env bash
#
# demo.sh: the allreduce demo. Starts a private aggregation fabric (aggmgr and
# switchsim on loopback, through aggrun) and runs agg_allreduce_perf on 4 ranks
# with hcoll_shim preloaded, so every row shows the offload path
# (MPI_Allreduce through the shim) next to Open MPI's host path
# (PMPI_Allreduce).
#
#   tools/demo.sh [BUILD_DIR] [agg_allreduce_perf options...]
#
# BUILD_DIR defaults to ./build; anything after it goes to agg_allreduce_perf
# (e.g. tools/demo.sh build-dev -e 1M -t double). DEMO_NP and DEMO_TIMEOUT
# override the rank count (4) and the time limit in seconds (600).
set -euo pipefail

build=build
if [[ $# -gt 0 && $1 != -* ]]; then
    build=$1
    shift
fi
build=$(cd "$build" && pwd)
np=${DEMO_NP:-4}
limit=${DEMO_TIMEOUT:-600}

for f in "$build/bin/aggrun" "$build/bin/agg_allreduce_perf" "$build/lib/libhcoll_shim.so"; do
    if [[ ! -e $f ]]; then
        echo "demo.sh: $f not found; build first: cmake -S . -B $build && cmake --build $build" >&2
        exit 2
    fi
done

# A sanitizer build (the test suite runs the demo under ASan and TSan) needs
# its runtime loaded before the shim.
preload=$build/lib/libhcoll_shim.so
if [[ -n ${SANITIZER_PRELOAD:-} ]]; then
    preload=$SANITIZER_PRELOAD:$preload
    export ASAN_OPTIONS=detect_leaks=0 # Open MPI leaks at exit
fi

mpi_args=(--oversubscribe -np "$np")
if [[ $(id -u) -eq 0 ]]; then
    mpi_args=(--allow-run-as-root "${mpi_args[@]}")
fi

cat <<BANNER
== demo: in-network allreduce offload vs. host allreduce
==   fabric:  aggmgr + switchsim on loopback (aggrun, built-in fat tree)
==   job:     $np MPI ranks on $(nproc) cores, hcoll_shim preloaded, HCOLL_ENABLE_SHARP=3,
==            SHARP_COLL_ENABLE_SAT=1 (streaming from 16 KiB)
==   program: agg_allreduce_perf ${*:-(defaults: 8 B .. 16 MiB, float sum)}
==   columns: offload = MPI_Allreduce through the shim; host = PMPI_Allreduce (Open MPI)
==   limit:   ${limit} s
BANNER

# SHARP_COLL_LOG_LEVEL=3: rank 0's job, tree and group lines and the shim's
# summary at exit; the other ranks stay quiet at that level.
exec timeout --kill-after=10 "$limit" \
    "$build/bin/aggrun" -- \
    mpirun "${mpi_args[@]}" \
        -x LD_PRELOAD="$preload" \
        -x HCOLL_ENABLE_SHARP=3 \
        -x SHARP_COLL_ENABLE_SAT=1 \
        -x SHARP_COLL_LOG_LEVEL=3 \
        "$build/bin/agg_allreduce_perf" "$@"
