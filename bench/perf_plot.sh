#!/usr/bin/env bash
#
# perf_plot.sh: the collective figures in docs/. Runs agg_perf under aggrun
# (a private aggmgr + switchsim on loopback) with every path in the same run
# (mpi = Open MPI, host = the shim's host allreduce, llt and sat = libagg's
# trees), 8 B to 16 MiB:
#
#   2 ranks: allreduce, reduce, bcast, barrier -> docs/perf_np2.txt, docs/perf_np2.png
#   4 ranks: allreduce (oversubscribed here)   -> docs/perf_np4.txt, docs/perf_np4.png
#
#   bench/perf_plot.sh [BUILD_DIR] [agg_perf options...]
#
# BUILD_DIR defaults to ./build; anything after it goes to agg_perf (e.g.
# -R 5 -d double). PERF_NP2_COLLS overrides the 2-rank collectives,
# PERF_OUT the output folder (docs). Every command is printed before it runs.
# The .txt files are agg_perf's table (stdout); the .png files need gnuplot.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=build
if [[ $# -gt 0 && $1 != -* ]]; then
    build=$1
    shift
fi
build=$(cd "$build" && pwd)
out=${PERF_OUT:-$here/docs}
np2_colls=${PERF_NP2_COLLS:-allreduce,reduce,bcast,barrier}

for f in "$build/bin/aggrun" "$build/bin/agg_perf"; do
    if [[ ! -x $f ]]; then
        echo "perf_plot.sh: $f not found; build first: cmake -S . -B $build && " \
             "cmake --build $build --target agg_perf aggrun aggmgr switchsim" >&2
        exit 2
    fi
done
command -v gnuplot >/dev/null || echo "perf_plot.sh: gnuplot not found: tables only" >&2
mkdir -p "$out"

# A command as it could be typed: only words that need it are quoted.
show() {
    local w line=+
    for w in "$@"; do
        if [[ $w =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then
            line+=" $w"
        else
            line+=" $(printf '%q' "$w")"
        fi
    done
    printf '%s' "$line"
}

for np in 2 4; do
    colls=allreduce
    (( np == 2 )) && colls=$np2_colls
    mpi=(mpirun -np "$np")
    [[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
    (( np > $(nproc) )) && mpi+=(--oversubscribe)
    # SAT as in bench_sat.sh: streaming trees in the job, from 4 KiB where
    # libagg chooses (agg_perf forces the tree per path anyway).
    cmd=("$build/bin/aggrun" -- "${mpi[@]}"
         -x SHARP_COLL_ENABLE_SAT=1
         -x SHARP_COLL_SAT_THRESHOLD=4096
         "$build/bin/agg_perf" -b 8 -e 16M -C "$colls" -g "$out/perf_np$np.png" "$@")
    echo "$(show "${cmd[@]}") | tee $(show "$out/perf_np$np.txt" | cut -c3-)"
    "${cmd[@]}" | tee "$out/perf_np$np.txt"
done
