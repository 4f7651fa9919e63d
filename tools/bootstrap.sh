#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: installs what is missing, builds,
# and then either runs the demo or runs every test.
#
#   tools/bootstrap.sh demo   # 4-rank MPI allreduce through aggmgr + switchsim,
#                             # offload path and host path side by side
#   tools/bootstrap.sh test   # every test (warnings as errors), then again
#                             # under AddressSanitizer + UndefinedBehaviorSanitizer,
#                             # then under ThreadSanitizer, then each fuzz
#                             # harness for half a minute
#
# The test mode runs ctest in parallel (CTEST_PARALLEL_LEVEL, default 3 on
# two cores: one test waiting on sockets overlaps one using the CPU), prints
# each phase's time and, at the end, the ten slowest tests. The sanitizer
# builds leave out the GPU backends (nothing in them is instrumented) and run
# the quick tier of sizes (AGG_TEST_SCALE, tests/e2e/lib.sh).
set -euo pipefail

mode=${1:-}
case "$mode" in
demo | test) ;;
*)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
shift
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PACKAGES=(build-essential cmake pkg-config python3 procps valgrind
          libopenmpi-dev openmpi-bin libconfig-dev libcmocka-dev libisal-dev libssl-dev
          libibumad-dev libibnetdisc-dev ibsim-utils infiniband-diags
          gfortran python3-mpi4py python3-numpy gnuplot-nox)
# the plain test build also builds the ROCm backend (the CUDA one where nvcc is installed)
[ "$mode" = test ] && PACKAGES+=(hipcc clang libclang-rt-14-dev) # clang: the fuzz harnesses

install_packages() {
    local missing=() p sudo=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { echo "need root to install: ${missing[*]}" >&2; exit 1; }
        sudo=(sudo)
    fi
    echo "== installing: ${missing[*]}"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
}

PHASES=()
phase_start=$SECONDS
phase() { # NAME: the time since the last phase ended goes to NAME
    PHASES+=("$(printf '%-44s %5d s' "$1" $((SECONDS - phase_start)))")
    phase_start=$SECONDS
}

build() { # build DIR [cmake options...]
    local dir=$1
    shift
    echo "== building in $dir $*"
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$dir" -j"$(nproc)"
    phase "build $(basename "$dir")"
}

# run_tests DIR: ctest in DIR, its lines kept for the summary
JOBS=${CTEST_PARALLEL_LEVEL:-$(($(nproc) + 1))}
run_tests() { # run_tests DIR [ctest options...]
    local dir=$1 rc=0
    shift
    (cd "$dir" && ctest --output-on-failure --timeout 900 -j"$JOBS" "$@") | tee "$dir/ctest.log" || rc=$?
    phase "tests $(basename "$dir") (ctest -j$JOBS)"
    [ $rc -eq 0 ] || { summary; exit $rc; }
}

# The phases' times and the ten slowest tests of every tree.
summary() {
    local p dir
    echo "== times"
    for p in "${PHASES[@]}"; do
        echo "   $p"
    done
    echo "   $(printf '%-44s %5d s' total $SECONDS)"
    echo "== the ten slowest tests"
    for dir in "$ROOT"/build "$ROOT"/build-asan "$ROOT"/build-tsan "$ROOT"/build-fuzz; do
        [ -f "$dir/ctest.log" ] || continue
        sed -n "s/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .* \([0-9.]*\) sec\$/\2 \1 $(basename "$dir")/p" \
            "$dir/ctest.log"
    done | sort -rn | head -10 | awk '{ printf "   %8.1f s  %-24s %s\n", $1, $2, $3 }'
}

install_packages
phase "packages"

if [ "$mode" = demo ]; then
    build "$ROOT/build"
    exec "$ROOT/tools/demo.sh" "$ROOT/build" "$@"
fi

# test: the normal build with warnings as errors, then the sanitizers (each
# tree's ctest preloads its runtime for the MPI runs; tests/CMakeLists.txt).
rm -f "$ROOT"/build/ctest.log "$ROOT"/build-asan/ctest.log "$ROOT"/build-tsan/ctest.log     "$ROOT"/build-fuzz/ctest.log # the summary reads this run's only
build "$ROOT/build" -DAGG_WERROR=ON
echo "== tests"
run_tests "$ROOT/build"

NO_GPU=(-DAGG_GPU_CUDA=OFF -DAGG_GPU_ROCM=OFF)
build "$ROOT/build-asan" -DAGG_WERROR=ON -DAGG_SANITIZE=ON "${NO_GPU[@]}"
echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer"
# Open MPI itself leaks at exit, so the MPI runs check no leaks
# (tests/e2e/lib.sh); the unit tests run with leak detection on.
run_tests "$ROOT/build-asan"

build "$ROOT/build-tsan" -DAGG_WERROR=ON -DAGG_TSAN=ON "${NO_GPU[@]}"
echo "== tests under ThreadSanitizer"
run_tests "$ROOT/build-tsan"

# The libFuzzer harnesses (clang; tests/fuzz): built, then each run for
# AGG_FUZZ_SECONDS on its corpus, so a harness left behind by an API change or
# a parser that crashes fails here.
echo "== building in $ROOT/build-fuzz (clang, the fuzz harnesses)"
CC=clang cmake -S "$ROOT" -B "$ROOT/build-fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGG_WERROR=ON \
    -DAGG_FUZZ=ON -DAGG_GPU_CUDA=OFF -DAGG_GPU_ROCM=OFF >/dev/null
cmake --build "$ROOT/build-fuzz" -j"$(nproc)" --target fuzz_topo fuzz_conf fuzz_switchsim fuzz_aggmgr
phase "build build-fuzz"
echo "== fuzzing"
run_tests "$ROOT/build-fuzz" -L fuzz
summary
