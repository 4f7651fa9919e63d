#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: installs what is missing, builds,
# and then either runs the demo or runs every test.
#
#   tools/bootstrap.sh demo   # 4-rank MPI allreduce through aggmgr + switchsim,
#                             # offload path and host path side by side
#   tools/bootstrap.sh test   # every test (warnings as errors), then again
#                             # under AddressSanitizer + UndefinedBehaviorSanitizer,
#                             # then under ThreadSanitizer
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
          libopenmpi-dev openmpi-bin libconfig-dev libcmocka-dev
          libibumad-dev libibnetdisc-dev ibsim-utils infiniband-diags
          gfortran python3-mpi4py python3-numpy gnuplot-nox)
# the tests also build the ROCm backend (the CUDA one where nvcc is installed)
[ "$mode" = test ] && PACKAGES+=(hipcc)

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

build() { # build DIR [cmake options...]
    local dir=$1
    shift
    echo "== building in $dir $*"
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$dir" -j"$(nproc)"
}

install_packages

if [ "$mode" = demo ]; then
    build "$ROOT/build"
    exec "$ROOT/tools/demo.sh" "$ROOT/build" "$@"
fi

# test: the normal build with warnings as errors, then the sanitizers.
build "$ROOT/build" -DAGG_WERROR=ON
echo "== tests"
(cd "$ROOT/build" && ctest --output-on-failure --timeout 900)

build "$ROOT/build-asan" -DAGG_WERROR=ON -DAGG_SANITIZE=ON
echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer"
export SANITIZER_PRELOAD
SANITIZER_PRELOAD=$(gcc -print-file-name=libasan.so)
# Open MPI itself leaks at exit, so the MPI runs check no leaks
# (tests/e2e/lib.sh); the unit tests run with leak detection on.
(cd "$ROOT/build-asan" && ctest --output-on-failure --timeout 900)

build "$ROOT/build-tsan" -DAGG_WERROR=ON -DAGG_TSAN=ON
echo "== tests under ThreadSanitizer"
SANITIZER_PRELOAD=$(gcc -print-file-name=libtsan.so)
(cd "$ROOT/build-tsan" && ctest --output-on-failure --timeout 900)
