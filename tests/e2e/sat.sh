#!/usr/bin/env bash
# Streaming aggregation: with SAT on from 4 KiB, every type, op and count
# (1 to 4 Mi elements, the quick tier's in lib.sh; in place, split and
# reversed communicators) is right,
# small messages go through the LLT and large ones through SAT (switchsim's
# counters count the two apart), ranks driving the nodes themselves and
# switchsim doing all of it, with and without reading rank memory directly.
#   sat.sh BUILD NP
. "$(dirname "$0")/lib.sh"
NP=${2:?NP}

SAT=(-x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096)

check_paths() { # name: both trees carried fragments, no errors
    local f=$TMP/$1.stats
    echo "$1: llt_fragments_in=$(stat llt_fragments_in "$f") sat_chunks_in=$(stat sat_chunks_in "$f")" \
         "sat_bytes_in=$(stat sat_bytes_in "$f") zcopy_bytes=$(stat zcopy_bytes "$f") errors=$(stat errors "$f")"
    [ "$(stat llt_fragments_in "$f")" -gt 0 ] || fail "$1: nothing went through the LLT"
    [ "$(stat sat_chunks_in "$f")" -gt 0 ] || fail "$1: nothing went through SAT"
    [ "$(stat sat_bytes_in "$f")" -ge $((4096 * $(stat sat_chunks_in "$f") / 2)) ] ||
        fail "$1: SAT chunks smaller than the threshold on average"
    [ "$(stat errors "$f")" -eq 0 ] || fail "$1: switchsim saw bad fragments"
    [ "$(stat locks_granted "$f")" -gt 0 ] || fail "$1: no SAT lock was granted"
}

run_check ranks "$NP" "${SAT[@]}" -- --max-count "$MAX_COUNT"
check_paths ranks
[ "$(stat zcopy_bytes "$TMP/ranks.stats")" -eq 0 ] || fail "ranks: switchsim read rank memory though the ranks pushed"

# switchsim's threads do the nodes' work, reading chunks from the ranks
run_check zcopy "$NP" "${SAT[@]}" -x AGG_RANK_PROGRESS=0 -x AGG_SAT_ZCOPY=1 -- --max-count 65549
check_paths zcopy
[ "$(stat zcopy_bytes "$TMP/zcopy.stats")" -gt 0 ] || fail "zcopy: no chunk was read from rank memory"

# ... and with the chunks copied through shared memory instead
run_check staged "$NP" "${SAT[@]}" -x AGG_RANK_PROGRESS=0 -x AGG_SAT_ZCOPY=0 -- --max-count 65549 --world-only
check_paths staged
[ "$(stat zcopy_bytes "$TMP/staged.stats")" -eq 0 ] || fail "staged: rank memory was read directly"

# What follows checks how a path is chosen, with no threads of its own: not
# under TSan, which has seen both trees and both ways of driving them above.
if [ "$SANITIZER" = tsan ]; then
    check_clean "$TMP"/*
    echo "PASS (under TSan: the path choices are checked in the other passes)"
    exit 0
fi

# forced through the LLT: HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=2 sends large ones to the host
run_check host_large "$NP" "${SAT[@]}" -x HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG=2 -- --max-count 65549 --world-only
[ "$(stat sat_chunks_in "$TMP/host_large.stats")" -eq 0 ] || fail "LARGE_ALLREDUCE_ALG=2 still used SAT"
[ "$(stat llt_fragments_in "$TMP/host_large.stats")" -gt 0 ] || fail "LARGE_ALLREDUCE_ALG=2 kept small ones off the network"
# Ranks started with different SAT settings: rank 0's hold for the job (one
# warning from each rank that differs), so no rank takes another path than
# its peers and waits for them until the timeout.
# (mpirun's -x holds for one application context only: each gets them all.)
MIXED=(-x LD_PRELOAD="$PRELOAD" -x AGG_COLL_TIMEOUT_MS=10000 -x HCOLL_ENABLE_SHARP=3
       -x SHARP_COLL_ENABLE_SAT=1)
[ -z "${ASAN_OPTIONS:-}" ] || MIXED+=(-x ASAN_OPTIONS)
CHECK=("$BIN/allreduce_check" "${CHECK_OPTS[@]}" --max-count 65549 --world-only)
"$BIN/aggrun" --stats-file "$TMP/mixed.stats" -- "${MPIRUN[@]}" \
    -np 1 "${MIXED[@]}" -x SHARP_COLL_SAT_THRESHOLD=4096 "${CHECK[@]}" : \
    -np $((NP - 1)) "${MIXED[@]}" -x SHARP_COLL_SAT_THRESHOLD=1048576 "${CHECK[@]}" \
    >"$TMP/mixed.out" 2>&1 || { cat "$TMP/mixed.out"; fail "mixed: ranks with other settings than rank 0 failed"; }
expect_clean "$TMP/mixed.out" allreduce_check "mixed: wrong results"
[ "$(grep -c "differ from rank 0's; rank 0's are used (threshold 4096" "$TMP/mixed.out")" -eq $((NP - 1)) ] ||
    fail "mixed: not one warning from each rank whose settings differ"
check_paths mixed
check_clean "$TMP"/*
echo "PASS"
