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
# set -e ends a script at a failed command without a word: say which one
on_err() { # on_err STATUS LINE COMMAND
    [[ $- != *e* ]] || echo "FAIL: $(basename "$0") line $2: \"$3\" exited $1" >&2
}
trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR

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
SANITIZER=
if [ -n "${SANITIZER_PRELOAD:-}" ]; then
    case "$SANITIZER_PRELOAD" in
    *tsan*) SANITIZER=tsan ;;
    *) SANITIZER=asan ;;
    esac
    PRELOAD="$SANITIZER_PRELOAD:$SHIM"
    export ASAN_OPTIONS=detect_leaks=0
    MPIRUN+=(-x ASAN_OPTIONS)
    if [ $SANITIZER = tsan ]; then
        export TSAN_OPTIONS="suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tsan.supp ${TSAN_OPTIONS:-}"
        MPIRUN+=(-x TSAN_OPTIONS)
    fi
fi

# AGG_TEST_SCALE: full (the plain build's default) or quick (the sanitizer
# builds' default, 10-50 times slower). The quick tier keeps the shapes where
# overflows and races show and not the bulk: 65549 elements (not a power of
# two, an odd tail) cross the LLT's window of OSTs many times, and with
# 16 KiB SAT chunks (4 KiB is the least) each SAT call streams 16-32 chunks
# through a pipeline four deep, wrapping it as 4 Mi elements do at the
# default 256 KiB. Fewer process counts where the code is the same (each
# script says which). Ranks started locally inherit the chunk size.
AGG_TEST_SCALE=${AGG_TEST_SCALE:-$([ -n "$SANITIZER" ] && echo quick || echo full)}
MAX_COUNT=4194304
QUICK=0
case "$AGG_TEST_SCALE" in
full) ;;
quick)
    QUICK=1
    MAX_COUNT=65549
    export AGG_SAT_CHUNK_SIZE=${AGG_SAT_CHUNK_SIZE:-16384}
    ;;
*)
    echo "FAIL: AGG_TEST_SCALE=$AGG_TEST_SCALE: not quick or full" >&2
    exit 1
    ;;
esac
# allreduce_check's options for every run_check: under TSan in the quick
# tier, a type of each size on MPI_COMM_WORLD (what the threads do with a
# buffer depends neither on its type nor on which communicator it came from;
# the plain and ASan passes take every type and communicator, and e2e.comms
# makes and frees communicators under TSan)
CHECK_OPTS=()
[ "$SANITIZER:$QUICK" != tsan:1 ] || CHECK_OPTS=(--types int8,int16,int32,double --world-only)

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
        "$BIN/allreduce_check" "${CHECK_OPTS[@]}" "$@" >"$TMP/$name.out" 2>&1 ||
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
