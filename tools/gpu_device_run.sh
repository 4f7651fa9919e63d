#!/usr/bin/env bash
# Everything GPU in one call on the device machine (the `device` tool runs it
# in a copy of this tree, with .device-deps carried: tools/device_deps.sh
# fetches it here first):
#   bash tools/gpu_device_run.sh [build|check|bench|netns|all]   (default all;
#   netns: tests/e2e/netns.sh on the device's host, netns-bw: its TCP
#   bandwidth part alone with every thread's CPU each second, netns-ab: that
#   bandwidth from this tree and an earlier one in turn, netns-lanes: this
#   tree's at several tcp_lanes, perf-ab: agg_perf's table from this tree and
#   an earlier one in turn, prof: agg_perf's sampling profile; none of them
#   part of all)
# Builds with the CUDA backend, then checks device buffers through libagg and
# through the shim under mpirun (2 and 4 ranks on one GPU, LLT and SAT),
# device switching between calls, and measures the kernels, the staged
# allreduce against the pinned copy rate, and the host-buffer offload
# against Open MPI. Logs go to $OUT/gpu-logs-WHAT.tgz (OUT defaults to
# /tmp/gpu-out); a summary is printed last. Exit status: the number of failed steps.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}
out=${OUT:-/tmp/gpu-out}
logs=$out/logs
build=${GPU_BUILD:-$here/build-gpu}
mkdir -p "$logs"
summary=()
failed=0

step() { # name, command...: runs it with a time limit, logs it, records the outcome
    local name=$1 t0=$SECONDS rc
    shift
    timeout "${STEP_TIMEOUT:-240}" "$@" >"$logs/$name.log" 2>&1
    rc=$?
    summary+=("$(printf '%-28s %s (%ds)' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")" $((SECONDS - t0)))")
    [ $rc -eq 0 ] || { failed=$((failed + 1)); tail -n 25 "$logs/$name.log"; }
    return $rc
}

deps() { # the Debian packages carried in .device-deps/debs
    local sys=$here/.device-deps/root d
    mkdir -p "$sys"
    for d in "$here"/.device-deps/debs/*.deb; do dpkg -x "$d" "$sys"; done
    export PKG_CONFIG_PATH=$sys/usr/lib/x86_64-linux-gnu/pkgconfig
    export PKG_CONFIG_SYSROOT_DIR=$sys PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
    export LD_LIBRARY_PATH=$sys/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    SYS=$sys
    PKGCONF=$(command -v pkg-config || echo "$sys/usr/bin/pkgconf")
}

do_build() {
    deps
    step configure cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DAGG_GPU_CUDA=ON -DAGG_GPU_ROCM=OFF -DAGG_CUDA_ARCHS=90 \
        -DPKG_CONFIG_EXECUTABLE="$PKGCONF" -DCMAKE_PREFIX_PATH="$SYS/usr" \
        -DCMAKE_C_FLAGS="-isystem $SYS/usr/include" &&
    step build cmake --build "$build" -j "$(nproc)"
}

mpirun_np() { # np: mpirun as the tests run it
    local m=(mpirun -np "$1" --oversubscribe --mca btl self,vader)
    [ "$(id -u)" = 0 ] && m+=(--allow-run-as-root)
    printf '%s\n' "${m[@]}"
}

do_check() {
    local bin=$build/bin np sat shim m
    deps
    shim=$build/lib/libhcoll_shim.so
    step nvidia_smi nvidia-smi
    step agg_info_gpu "$bin/agg_info" --gpu
    step kernel_check "$bin/gpu_kernel_check" "$build/lib/libagg_gpu_cuda.so"
    for np in 2 4; do
        mapfile -t m < <(mpirun_np "$np")
        for sat in 0 1; do
            step "api_np${np}_sat$sat" "$bin/aggrun" -- "${m[@]}" -x SHARP_COLL_ENABLE_SAT=$sat \
                -x SHARP_COLL_SAT_THRESHOLD=4096 "$bin/gpu_coll_check" -m api
            step "mpi_np${np}_sat$sat" "$bin/aggrun" -- "${m[@]}" -x LD_PRELOAD="$shim" \
                -x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_ENABLE_SAT=$sat -x SHARP_COLL_SAT_THRESHOLD=4096 -x AGG_STATS=1 \
                "$bin/gpu_coll_check" -m mpi
        done
        # the host path: no network at all (HCOLL_ENABLE_SHARP=0, the default), device
        # buffers staged through host memory, except the ring's, reduced on the device at any size
        # (gpu_ring in the counts)
        step "mpi_np${np}_host" "$bin/aggrun" -- "${m[@]}" -x LD_PRELOAD="$shim" \
            -x HCOLL_ENABLE_SHARP=0 -x AGG_GPU_HOST_REDUCE_MIN=0 -x AGG_STATS=1 "$bin/gpu_coll_check" -m mpi &&
            step "mpi_np${np}_host_gpu_ring" grep -E "^agg_stats: allreduce .* gpu_ring=[1-9]" \
                "$logs/mpi_np${np}_host.log"
        # one rank's buffers on the host, the others' on the device: the same messages
        step "mpi_np${np}_mixed" "$bin/aggrun" -- "${m[@]}" -x LD_PRELOAD="$shim" \
            -x HCOLL_ENABLE_SHARP=0 -x AGG_GPU_HOST_REDUCE_MIN=0 -x AGG_STATS=1 "$bin/gpu_coll_check" -m mpi -H 1
    done
}

do_bench() {
    local bin=$build/bin np m
    deps
    step kernel_bench "$bin/gpu_kernel_check" -b "$build/lib/libagg_gpu_cuda.so"
    for np in 2 4; do
        mapfile -t m < <(mpirun_np "$np")
        step "bench_api_np$np" "$bin/aggrun" -- "${m[@]}" -x SHARP_COLL_ENABLE_SAT=1 \
            -x SHARP_COLL_SAT_THRESHOLD=4096 "$bin/gpu_coll_check" -m api -b
        step "bench_mpi_np$np" "$bin/aggrun" -- "${m[@]}" -x LD_PRELOAD="$build/lib/libhcoll_shim.so" \
            -x HCOLL_ENABLE_SHARP=3 -x AGG_STATS=1 -x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096 \
            -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=4 "$bin/gpu_coll_check" -m mpi -b
        # no network: the host algorithms (the ring reduces on the device from AGG_GPU_HOST_REDUCE_MIN)
        step "bench_mpi_host_np$np" "$bin/aggrun" -- "${m[@]}" \
            -x LD_PRELOAD="$build/lib/libhcoll_shim.so" -x HCOLL_ENABLE_SHARP=0 -x AGG_STATS=1 \
            "$bin/gpu_coll_check" -m mpi -b -e 64M
        # the same with the ring reducing on the device at every size (AGG_GPU_HOST_REDUCE_MIN=0)
        step "bench_mpi_host_gpu_ring_np$np" "$bin/aggrun" -- "${m[@]}" \
            -x LD_PRELOAD="$build/lib/libhcoll_shim.so" -x HCOLL_ENABLE_SHARP=0 -x AGG_STATS=1 \
            -x AGG_GPU_HOST_REDUCE_MIN=0 "$bin/gpu_coll_check" -m mpi -b -e 64M
        # host buffers: the offload against Open MPI on this many-core host
        step "perf_host_np$np" "$bin/aggrun" -- "${m[@]}" -x SHARP_COLL_ENABLE_SAT=1 \
            -x SHARP_COLL_SAT_THRESHOLD=4096 "$bin/agg_perf" -b 8 -e 64M -f 4 -C allreduce
    done
}

do_netns() { # issue 8's test across hosts on network namespaces, with iproute2 carried
    deps
    export PATH=$SYS/bin:$SYS/sbin:$SYS/usr/bin:$SYS/usr/sbin:$PATH
    export LD_LIBRARY_PATH=$SYS/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
    STEP_TIMEOUT=540 step netns bash "$here/tests/e2e/netns.sh" "$build"
}

do_netns_bw() { # the TCP transport's bandwidth alone, with every thread's CPU sampled
    deps
    export PATH=$SYS/bin:$SYS/sbin:$SYS/usr/bin:$SYS/usr/sbin:$PATH
    export LD_LIBRARY_PATH=$SYS/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
    top -H -b -d 1 -n 200 -w 250 >"$logs/top.raw" 2>&1 &
    local top=$!
    NETNS_BW_ONLY=1 STEP_TIMEOUT=400 step netns_bw bash "$here/tests/e2e/netns.sh" "$build"
    kill $top 2>/dev/null
    # threads over 5% in each second of the run
    awk '/^top -/ {t++} $NF ~ /switchsim|agg_|mpirun|prterun|ksoftirq|sockperf/ && $9 + 0 > 5 \
        {print t, $1, $9, $NF}' "$logs/top.raw" >"$logs/threads.log"
    cat "$logs/netns_bw.log"
}

# build_ab TARGET...: the targets in BASE's tree and this one, built alike
# (trees: name -> tree, from the caller)
build_ab() {
    local name tree
    for name in base this; do
        tree=${trees[$name]}
        step "configure_$name" cmake -S "$tree" -B "$tree/build-ab" \
            -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DPKG_CONFIG_EXECUTABLE="$PKGCONF" -DCMAKE_PREFIX_PATH="$SYS/usr" \
            -DCMAKE_C_FLAGS="-isystem $SYS/usr/include" &&
            step "build_$name" cmake --build "$tree/build-ab" -j "$(nproc)" --target "$@" ||
            return 1
    done
}

# netns-ab: the transport's bandwidth from this tree and from an earlier one
# (BASE=its sources, carried too: mkdir .device-base && git archive REV |
# tar -x -C .device-base, and carry .device-base), built alike and
# run in turn NETNS_AB_ROUNDS times (default 3), so both figures come from one
# host at one time
do_netns_ab() {
    local base=${BASE:?BASE=the earlier tree} r name tree t=(switchsim aggmgr agg hcoll_shim
        agg_link_bytes agg_sockperf agg_info agg_hello allreduce_check coll_check)
    declare -A trees=([base]=$(cd "$base" && pwd) [this]=$here)
    deps
    export PATH=$SYS/bin:$SYS/sbin:$SYS/usr/bin:$SYS/usr/sbin:$PATH
    export LD_LIBRARY_PATH=$SYS/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
    build_ab "${t[@]}" || return 1
    for r in $(seq "${NETNS_AB_ROUNDS:-3}"); do
        for name in base this; do
            tree=${trees[$name]}
            NETNS_BW_ONLY=1 STEP_TIMEOUT=300 step "netns_ab_${r}_$name" \
                bash "$tree/tests/e2e/netns.sh" "$tree/build-ab"
            echo "== round $r, $name:"
            grep -E "^raw|^TCP" "$logs/netns_ab_${r}_$name.log"
        done
    done
}

# netns-lanes: this tree's transport bandwidth at each AGG_TCP_LANES in
# NETNS_LANES_SWEEP (default 1 2 4 8), in turn NETNS_AB_ROUNDS times (after
# netns-ab in the same call it reuses that build)
do_netns_lanes() {
    local r l t=(switchsim aggmgr agg hcoll_shim agg_link_bytes agg_sockperf agg_info agg_hello)
    deps
    export PATH=$SYS/bin:$SYS/sbin:$SYS/usr/bin:$SYS/usr/sbin:$PATH
    export LD_LIBRARY_PATH=$SYS/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
    [ -f "$here/build-ab/CMakeCache.txt" ] ||
        step configure_lanes cmake -S "$here" -B "$here/build-ab" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DPKG_CONFIG_EXECUTABLE="$PKGCONF" -DCMAKE_PREFIX_PATH="$SYS/usr" \
            -DCMAKE_C_FLAGS="-isystem $SYS/usr/include" || return 1
    step build_lanes cmake --build "$here/build-ab" -j "$(nproc)" --target "${t[@]}" || return 1
    for r in $(seq "${NETNS_AB_ROUNDS:-3}"); do
        for l in ${NETNS_LANES_SWEEP:-1 2 4 8}; do
            NETNS_BW_ONLY=1 NETNS_BW_X="-x AGG_TCP_LANES=$l" NETNS_ECHO_LANES=$l STEP_TIMEOUT=300 \
                step "netns_lanes_${r}_$l" bash "$here/tests/e2e/netns.sh" "$here/build-ab"
            echo "== round $r, tcp_lanes $l:"
            grep -E "^raw|^TCP" "$logs/netns_lanes_${r}_$l.log"
        done
    done
}

# perf-ab: agg_perf's table (every path: Open MPI, the host algorithms, LLT,
# SAT) from this tree and from an earlier one (BASE, carried as for
# netns-ab), built alike, run in turn PERF_AB_ROUNDS times (default 2) at
# each of PERF_AB_NPS ranks (default 2 4), so both tables come from one host
# at one time. PERF_AB_COLLS (default allreduce), PERF_AB_ARGS (default
# -b 8 -e 64M -f 4; a second set after '|' runs too, e.g. non-blocking
# with -z 0), PERF_AB_SAT=0 for the LLT alone.
do_perf_ab() {
    local base=${BASE:?BASE=the earlier tree} r name tree np set k
    local t=(switchsim aggmgr agg hcoll_shim aggrun agg_perf)
    local sat=(-x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096)
    declare -A trees=([base]=$(cd "$base" && pwd) [this]=$here)
    deps
    build_ab "${t[@]}" || return 1
    [ "${PERF_AB_SAT:-1}" = 1 ] || sat=(-x SHARP_COLL_ENABLE_SAT=0)
    IFS='|' read -r -a sets <<<"${PERF_AB_ARGS:--b 8 -e 64M -f 4}"
    for r in $(seq "${PERF_AB_ROUNDS:-2}"); do
        for np in ${PERF_AB_NPS:-2 4}; do
            for k in "${!sets[@]}"; do
                read -r -a set <<<"${sets[$k]}"
                for name in base this; do
                    tree=${trees[$name]}
                    mapfile -t m < <(mpirun_np "$np")
                    step "perf_ab_${r}_np${np}_${k}_$name" "$tree/build-ab/bin/aggrun" -- \
                        "${m[@]}" "${sat[@]}" "$tree/build-ab/bin/agg_perf" "${set[@]}" \
                        -C "${PERF_AB_COLLS:-allreduce}"
                    echo "== round $r, $np ranks, ${sets[$k]}, $name:"
                    grep -vE '^\[|^#  *$' "$logs/perf_ab_${r}_np${np}_${k}_$name.log"
                done
            done
        done
    done
}

# prof: where this tree's agg_perf spends its time (agg_perf -P, a sampling
# profile; the host has no perf), for each agg_perf argument set in
# PROF_CASES ('|' between sets) at PROF_NP ranks (default 4), every rank's
# samples added up by tools/prof_report.sh. After perf-ab it reuses that build.
do_prof() {
    local np=${PROF_NP:-4} k set
    local t=(switchsim aggmgr agg hcoll_shim aggrun agg_perf)
    deps
    [ -f "$here/build-ab/CMakeCache.txt" ] ||
        step configure_prof cmake -S "$here" -B "$here/build-ab" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DPKG_CONFIG_EXECUTABLE="$PKGCONF" -DCMAKE_PREFIX_PATH="$SYS/usr" \
            -DCMAKE_C_FLAGS="-isystem $SYS/usr/include" || return 1
    step build_prof cmake --build "$here/build-ab" -j "$(nproc)" --target "${t[@]}" || return 1
    IFS='|' read -r -a sets <<<"${PROF_CASES:?PROF_CASES=agg_perf arguments}"
    mapfile -t m < <(mpirun_np "$np")
    for k in "${!sets[@]}"; do
        read -r -a set <<<"${sets[$k]}"
        rm -f "$logs/prof$k".*
        step "prof_$k" "$here/build-ab/bin/aggrun" -- "${m[@]}" \
            "$here/build-ab/bin/agg_perf" "${set[@]}" -R 1 -c 0 -P "$logs/prof$k"
        echo "== profile, $np ranks: agg_perf ${sets[$k]}"
        grep -E '^ +[0-9]' "$logs/prof_$k.log"
        TOP=${PROF_TOP:-30} bash "$here/tools/prof_report.sh" "$logs/prof$k".[0-9]* ||
            echo "(no report: see $logs/prof$k.*)"
    done
}

case $what in
    build) do_build ;;
    check) do_check ;;
    bench) do_bench ;;
    netns) do_build && do_netns ;;
    netns-bw) do_build && do_netns_bw ;;
    netns-ab) do_netns_ab ;;
    netns-lanes) do_netns_lanes ;;
    perf-ab) do_perf_ab ;;
    prof) do_prof ;;
    perf-ab+prof) do_perf_ab; do_prof ;;
    all) do_build && { do_check; do_bench; } ;;
    *) echo "usage: $0 [build|check|bench|netns|netns-bw|netns-ab|netns-lanes|perf-ab|prof|perf-ab+prof|all]" >&2; exit 2 ;;
esac
printf '%s\n' "---- summary ($what) ----" "${summary[@]}" | tee -a "$out/summary.txt"
# one file back for every log (the device tool returns at most 8 files)
tar czf "$out/gpu-logs-${what//+/_}.tgz" -C "$logs" . && rm -rf "$logs" # (a + in a name does not come back)
exit $failed
