# Helpers for the end-to-end tests. Each test script sources this file, is
# run by ctest with the build directory as $1, and fails with a message.
set -euo pipefail

BUILD=${1:?usage: $0 BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
BIN=$BUILD/bin
SHIM=$BUILD/lib/libhcoll_shim.so
TMP=$(mktemp -d /tmp/agg-e2e.XXXXXX)
# Background daemons of a failed test must not outlive it (ctest would wait
# for them forever on the output pipe).
cleanup() {
    local pids
    pids=$(jobs -p)
    [ -z "$pids" ] || kill $pids 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

# mpirun.sh's session directories: hidden, so "$TMP"/* names only test files
export E2E_MPIRUN_TMP=$TMP/.ompi
mkdir "$E2E_MPIRUN_TMP"
MPIRUN=("$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/mpirun.sh" --oversubscribe --mca btl self,vader)
if [ "$(id -u)" = 0 ]; then
    MPIRUN+=(--allow-run-as-root)
fi

# Under AddressSanitizer the runtime must come first in the preload list.
# Open MPI leaks at exit, so leak checking is off for these runs (the unit
# tests keep it on).
PRELOAD=$SHIM
# The largest count of the big runs: under the sanitizers (10-20 times
# slower) the largest sizes add minutes, not coverage.
MAX_COUNT=4194304
SANITIZER=
if [ -n "${SANITIZER_PRELOAD:-}" ]; then
    case "$SANITIZER_PRELOAD" in
    *tsan*) SANITIZER=tsan ;;
    *) SANITIZER=asan ;;
    esac
    MAX_COUNT=1048576
    PRELOAD="$SANITIZER_PRELOAD:$SHIM"
    export ASAN_OPTIONS=detect_leaks=0
    MPIRUN+=(-x ASAN_OPTIONS)
fi

# skip WHY: this test cannot run here; ctest reports it skipped (exit 77)
skip() {
    echo "SKIP: $*"
    exit 77
}

# A sanitizer report anywhere in a run's output fails the test, also when it
# came from a daemon whose exit status aggrun does not pass on.
check_clean() {
    if grep -qE "ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error:|ERROR: LeakSanitizer" "$@"; then
        grep -E -A12 "ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error:|ERROR: LeakSanitizer" "$@" | head -60
        fail "sanitizer report in the output"
    fi
}

# expect_clean OUT PROGRAM WHAT: OUT must end PROGRAM's run with its
# "N passed, 0 failed" line (N > 0); otherwise show OUT and fail with WHAT.
expect_clean() {
    grep -Eq "^$2: [1-9][0-9]* passed, 0 failed\$" "$1" || { cat "$1"; fail "$3"; }
}

# run_check NAME NP [mpirun options...] -- [allreduce_check options...]
# Runs allreduce_check on NP ranks under aggrun with the shim preloaded;
# output in $TMP/NAME.out, switchsim's counters in $TMP/NAME.stats. Fails
# unless the program ran and every check passed. Options for aggrun itself
# (e.g. --topology FILE) go in the array AGGRUN_OPTS.
AGGRUN_OPTS=()
run_check() {
    local name=$1 np=$2 mpi=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        mpi+=("$1")
        shift
    done
    shift
    "$BIN/aggrun" "${AGGRUN_OPTS[@]}" --stats-file "$TMP/$name.stats" -- \
        "${MPIRUN[@]}" -np "$np" -x LD_PRELOAD="$PRELOAD" "${mpi[@]}" \
        "$BIN/allreduce_check" "$@" >"$TMP/$name.out" 2>&1 ||
        { cat "$TMP/$name.out"; fail "$name: allreduce_check failed"; }
    expect_clean "$TMP/$name.out" allreduce_check "$name: wrong results"
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# stat NAME FILE: a counter from a switchsim --stats-file
stat() {
    awk -v k="$1" '$1 == k { print $2 }' "$2"
}

# A loopback port nobody listens on (bound then released).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# No segment of ours may outlive the daemons that made it.
check_no_shm_left() {
    local left
    left=$(ls /dev/shm 2>/dev/null | grep -E "^agg-($1)-" || true)
    [ -z "$left" ] || fail "shared-memory segments left behind: $left"
}
