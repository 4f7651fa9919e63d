#!/usr/bin/env bash
# agg_perf, the benchmark the figures come from: every collective on every
# path at 2 and 3 ranks (3: allgather's blocks in turns, an odd count of
# members), blocking and not, each result checked (a wrong element or a
# failed call makes agg_perf exit non-zero); and its sampling profile (-P)
# named by tools/prof_report.sh down to libagg's functions.
. "$(dirname "$0")/lib.sh"

for np in 2 3; do
    for z in 1 0; do
        out=$TMP/perf$np.$z.out
        "$BIN/aggrun" -- "${MPIRUN[@]}" -np $np -x LD_PRELOAD="${SANITIZER_PRELOAD:-}" \
            -x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=16384 \
            "$BIN/agg_perf" -b 8 -e 256K -f 8 -C all -z $z -R 1 -n 3 -w 1 >"$out" 2>&1 ||
            { cat "$out"; fail "agg_perf at $np ranks (-z $z) failed"; }
        # a row per size and path that ran, none with a wrong element
        awk '/^ +[0-9]/ && (($10 ~ /^[0-9]+$/ && $10 != 0) || ($14 ~ /^[0-9]+$/ && $14 != 0)) {
                 print; bad = 1 }
             END {exit bad}' "$out" || fail "agg_perf at $np ranks (-z $z): wrong elements (above)"
        for coll in allreduce reduce bcast barrier reduce_scatter allgather; do
            grep -q "^# Collective: $coll" "$out" || { cat "$out"; fail "no table for $coll"; }
        done
        [ "$(awk '/^ +[0-9]/ && $6 == "llt" && $7 != "N/A"' "$out" | wc -l)" -ge 20 ] ||
            { cat "$out"; fail "agg_perf at $np ranks (-z $z): too few llt rows"; }
    done
done

if [ -z "$SANITIZER" ]; then
    "$BIN/aggrun" -- "${MPIRUN[@]}" -np 2 "$BIN/agg_perf" -b 64K -e 64K -C allgather -p llt \
        -n 2000 -R 1 -c 0 -P "$TMP/prof" >"$TMP/prof.out" 2>&1 ||
        { cat "$TMP/prof.out"; fail "agg_perf -P failed"; }
    ls "$TMP"/prof.0 "$TMP"/prof.1 >/dev/null || fail "agg_perf -P wrote no profile per rank"
    if command -v addr2line >/dev/null; then
        bash "$(dirname "$0")/../../tools/prof_report.sh" "$TMP"/prof.[01] >"$TMP/report" ||
            { cat "$TMP/report"; fail "prof_report.sh failed"; }
        cat "$TMP/report"
        grep -Eq '^ *[0-9.]+% +agg_[a-z_]+ +libagg' "$TMP/report" ||
            fail "the profile names no libagg function"
    fi
fi
check_clean "$TMP"/*
echo "PASS"
