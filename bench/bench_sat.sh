#!/usr/bin/env bash
#
# bench_sat.sh: the streaming-aggregation benchmark of docs/architecture.md.
# Forced offload with SAT on from 4 KiB (the HPC-X tuning page's settings,
# InfiniBand-only MCA flags aside) against Open MPI's own MPI_Allreduce in the
# same run, 2 ranks, 8 B to 64 MiB, each cell measured ROUNDS times with the
# two paths alternating, median shown, host/offload time ratio per size at
# the end.
#
#   bench/bench_sat.sh [BUILD_DIR] [ROUNDS] [agg_allreduce_perf options...]
#
# BENCH_NP overrides the rank count (2).
set -euo pipefail

build=${1:-build}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
build=$(cd "$build" && pwd)
np=${BENCH_NP:-2}
mpi=(mpirun -np "$np")
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
(( np > $(nproc) )) && mpi+=(--oversubscribe)

exec "$build/bin/aggrun" -- "${mpi[@]}" \
    -x LD_PRELOAD="$build/lib/libhcoll_shim.so" \
    -x HCOLL_MAIN_IB=mlx5_0:1 \
    -x HCOLL_ENABLE_SHARP=3 \
    -x SHARP_COLL_ENABLE_SAT=1 \
    -x SHARP_COLL_SAT_THRESHOLD=4096 \
    -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=4 \
    -x HCOLL_ALLREDUCE_ZCOPY_TUNE=static \
    -x HCOLL_SBGP=p2p \
    -x HCOLL_BCOL=ucx_p2p \
    -x SHARP_COLL_LOG_LEVEL=3 \
    "$build/bin/agg_allreduce_perf" -b 8 -e 64M -r "$rounds" "$@"
