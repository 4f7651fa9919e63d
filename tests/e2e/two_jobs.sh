#!/usr/bin/env bash
# Two MPI jobs at once on one manager and one switchsim: each gets its own
# hosts, tree and group, and both get right results.
. "$(dirname "$0")/lib.sh"

job() {
    "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=3 \
        "$BIN/allreduce_check" --max-count 4099 --world-only
}
export -f job
export BIN PRELOAD
MPIRUN_LINE="${MPIRUN[*]}"
"$BIN/aggrun" --stats-file "$TMP/stats" -- bash -c "
    MPIRUN=($MPIRUN_LINE)
    job >'$TMP/j1' 2>&1 & first=\$!
    job >'$TMP/j2' 2>&1; second=\$?
    wait \$first && exit \$second" || { cat "$TMP/j1" "$TMP/j2"; fail "a job failed"; }
for j in j1 j2; do
    expect_clean "$TMP/$j" allreduce_check "$j: wrong results"
done
[ "$(stat groups_total "$TMP/stats")" -eq 2 ] || fail "expected one group per job"
[ "$(stat errors "$TMP/stats")" -eq 0 ] || fail "switchsim saw bad fragments"
check_clean "$TMP"/*
echo "PASS"
