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

MPIRUN=(mpirun --oversubscribe --mca btl self,vader)
if [ "$(id -u)" = 0 ]; then
    MPIRUN+=(--allow-run-as-root)
fi

# Under AddressSanitizer the runtime must come first in the preload list.
# Open MPI leaks at exit, so leak checking is off for these runs (the unit
# tests keep it on).
PRELOAD=$SHIM
if [ -n "${SANITIZER_PRELOAD:-}" ]; then
    PRELOAD="$SANITIZER_PRELOAD:$SHIM"
    export ASAN_OPTIONS=detect_leaks=0
    MPIRUN+=(-x ASAN_OPTIONS)
fi

# A sanitizer report anywhere in a run's output fails the test, also when it
# came from a daemon whose exit status aggrun does not pass on.
check_clean() {
    if grep -qE "ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error:|ERROR: LeakSanitizer" "$@"; then
        grep -E -A12 "ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error:|ERROR: LeakSanitizer" "$@" | head -60
        fail "sanitizer report in the output"
    fi
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
