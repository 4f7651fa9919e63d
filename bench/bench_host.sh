#!/usr/bin/env bash
#
# bench_host.sh: the shim's host allreduce (hcoll_shim/shim_host.c) against
# Open MPI's own PMPI_Allreduce, at 2 ranks and at 4 ranks (oversubscribed
# on a 2-core machine), float sum, 8 B to 64 MiB; then the ratio shim/ompi of
# both runs side by side. Each run waits until the CPUs are idle first, since
# other jobs on a small shared machine move every figure.
#
#   bench/bench_host.sh [BUILD_DIR] [agg_host_bench options...]
#
# BENCH_NPS overrides the rank counts ("2 4"); BENCH_IDLE the idle share
# (percent) to wait for (90; 0 = do not wait).
set -euo pipefail

build=${1:-build-host}
shift $(( $# > 0 ? 1 : 0 ))
bench=$(cd "$build" && pwd)/bin/agg_host_bench
nps=${BENCH_NPS:-2 4}
idle_min=${BENCH_IDLE:-90}

# Idle share of all CPUs over one second, in percent.
idle_pct() {
    local a b
    read -ra a < <(head -1 /proc/stat)
    sleep 1
    read -ra b < <(head -1 /proc/stat)
    local idle=$(( b[4] - a[4] )) total=0 i
    for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
    echo $(( total > 0 ? 100 * idle / total : 100 ))
}

wait_idle() {
    local tries=0
    (( idle_min == 0 )) && return 0
    while (( $(idle_pct) < idle_min && tries < 120 )); do tries=$(( tries + 1 )); done
    (( tries < 120 )) || echo "# bench_host.sh: CPUs still busy after 2 min, measuring anyway" >&2
}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for np in $nps; do
    mpi=(mpirun -np "$np" --mca btl self,vader)
    [[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
    (( np > $(nproc) )) && mpi+=(--oversubscribe)
    wait_idle
    "${mpi[@]}" "$bench" -b 8 -e 64M "$@" | tee "$out/np$np"
done

# One row per size: bytes, then ratio and algorithm for each rank count.
echo
printf '# %10s' bytes
for np in $nps; do printf ' %9s %-18s' "ratio@$np" "algorithm@$np"; done
echo
awk -v nps="$nps" '
    BEGIN { n = split(nps, np, " ") }
    FNR == 1 { f++ }
    /^ / { ratio[f, $1] = $4; alg[f, $1] = $5; if (f == 1) order[++rows] = $1 }
    END {
        for (r = 1; r <= rows; r++) {
            printf "  %10s", order[r]
            for (i = 1; i <= n; i++) printf " %9s %-18s", ratio[i, order[r]], alg[i, order[r]]
            printf "\n"
        }
    }' $(for np in $nps; do echo "$out/np$np"; done)
for np in $nps; do grep '^# worst' "$out/np$np" | sed "s/^# /# $np ranks: /"; done
# A wrong element anywhere fails the script.
! grep -q WRONG "$out"/np*
