#!/usr/bin/env bash
# Every collective the shim intercepts gives MPI's results: coll_check (C:
# every type, op, root, count, communicator and way to complete a request)
# at each NP, coll_check_f (Fortran, mpi_f08 and mpif.h) and coll_check.py
# (mpi4py, MPI_THREAD_MULTIPLE and single) at 2 to 4 ranks. With AGG_STATS=1 the shim says where each call
# went: every line must add up, and at 2 ranks allreduce, reduce, bcast and
# barrier must have been offloaded (llt > 0).
#   colls.sh BUILD [c|bindings|all] [NP...]   (default: all; C at 2 3 5 8)
# c: coll_check at each NP; bindings: Fortran and Python; all: both (ctest
# runs them as e2e.colls.c2_3, .c5_8 and .bindings, side by side).
# In the quick tier (lib.sh; the sanitizer builds): C at 2 and 5 ranks (a
# power of two and not, the host algorithms' two shapes), Fortran and Python
# at 2 (the bindings lead to the same shim code the C runs have covered);
# under TSan, C at 2 ranks (what runs threads is switchsim's, the same at 5).
# NPs given are cut to the tier's; a part left with nothing to run skips.
. "$(dirname "$0")/lib.sh"
shift
PART=all
case "${1:-}" in
c | bindings | all) PART=$1; shift ;;
esac
NPS=("$@")
[ ${#NPS[@]} -gt 0 ] || NPS=(2 3 5 8)
BIND_NPS=(2 3 4)
if [ "$SANITIZER" = tsan ]; then
    TIER_NPS=" 2 "
    BIND_NPS=()
elif [ $QUICK = 1 ]; then
    TIER_NPS=" 2 5 "
    BIND_NPS=(2)
fi
if [ $QUICK = 1 ]; then
    kept=()
    for np in "${NPS[@]}"; do
        case "$TIER_NPS" in *" $np "*) kept+=("$np") ;; esac
    done
    NPS=("${kept[@]}")
fi
[ "$PART" != bindings ] || NPS=()
[ "$PART" != c ] || BIND_NPS=()
[ ${#NPS[@]} -gt 0 ] || [ ${#BIND_NPS[@]} -gt 0 ] ||
    skip "colls $PART: nothing at these process counts in the $AGG_TEST_SCALE tier${SANITIZER:+ under $SANITIZER}"
SRC=$(cd "$(dirname "$0")/.." && pwd)
export AGG_STATS=1

# run NAME NP [mpirun options...] -- PROGRAM [args...]: under aggrun with the
# shim at HCOLL_ENABLE_SHARP=4 (barriers too); output in $TMP/NAME.out
run() {
    local name=$1 np=$2 mpi=()
    shift 2
    while [ "$1" != -- ]; do
        mpi+=("$1")
        shift
    done
    shift
    "$BIN/aggrun" --stats-file "$TMP/$name.stats" -- "${MPIRUN[@]}" -np "$np" \
        -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=4 -x AGG_STATS "${mpi[@]}" \
        "$@" >"$TMP/$name.out" 2>&1 || { cat "$TMP/$name.out"; fail "$name: $1 failed"; }
}

# check_stats NAME: AGG_STATS lines present, in the documented format, and
# each one's paths adding up to its calls=
check_stats() {
    local out=$TMP/$1.out
    grep -q "^agg_stats: " "$out" || { cat "$out"; fail "$1: no agg_stats lines with AGG_STATS=1"; }
    grep "^agg_stats: " "$out" | grep -vE '^agg_stats: i?(allreduce|reduce|bcast|barrier|reduce_scatter_block|reduce_scatter|allgather|allgatherv) calls=[0-9]+ llt=[0-9]+ sat=[0-9]+ recursive_doubling=[0-9]+ rabenseifner=[0-9]+ ring=[0-9]+ gpu_ring=[0-9]+ mpi=[0-9]+ failed=[0-9]+( why:( [a-z_]+=[0-9]+)+)?$' &&
        fail "$1: agg_stats lines not in the documented format (above)"
    awk '/^agg_stats: / {
            calls = -1; sum = 0; why = 0
            for (i = 3; i <= NF; i++) {
                if ($i == "why:") { why = 1; continue }
                split($i, kv, "=")
                if (kv[1] == "calls") calls = kv[2]
                else if (!why) sum += kv[2]
            }
            if (sum != calls) { print "paths add up to " sum ", not calls=" calls ": " $0; bad = 1 }
         }
         END { exit bad }' "$out" || fail "$1: agg_stats paths do not add up to the calls"
}

# stat_of NAME COLL KEY: KEY=N of COLL's agg_stats line (empty when absent)
stat_of() {
    sed -n "s/^agg_stats: $2 \(.* \)\?$3=\([0-9]*\).*/\2/p" "$TMP/$1.out" | head -1
}

for np in "${NPS[@]}"; do
    run "c$np" "$np" -- "$BIN/coll_check" -q -m "$MAX_COUNT"
    expect_clean "$TMP/c$np.out" coll_check "np $np: coll_check found wrong results"
    check_stats "c$np"
    grep -E "^(coll_check|agg_stats):" "$TMP/c$np.out"
    if [ "$np" = 2 ]; then
        for coll in allreduce reduce bcast barrier; do
            llt=$(stat_of c2 $coll llt)
            [ "${llt:-0}" -gt 0 ] || fail "np 2: no $coll was offloaded (llt=${llt:-no line})"
        done
        for coll in reduce_scatter_block ireduce_scatter_block allgather iallgather; do
            [ -n "$(stat_of c2 $coll calls)" ] || fail "np 2: no agg_stats line for $coll"
        done
        [ "$(stat fragments_in "$TMP/c2.stats")" -gt 0 ] || fail "np 2: no fragment reached switchsim"
        [ "$(stat errors "$TMP/c2.stats")" -eq 0 ] || fail "np 2: switchsim saw bad fragments"
    fi
done

if [ ${#BIND_NPS[@]} -eq 0 ]; then
    echo "coll_check_f, coll_check.py: not in this part or pass (the plain and ASan passes run them)"
elif [ -x "$BIN/coll_check_f" ]; then
    for np in "${BIND_NPS[@]}"; do
        run "f$np" $np -- "$BIN/coll_check_f"
        expect_clean "$TMP/f$np.out" coll_check_f "np $np: coll_check_f found wrong results"
        check_stats "f$np"
        grep -E "^(coll_check_f|agg_stats):" "$TMP/f$np.out"
    done
    for coll in allreduce reduce_scatter allgatherv; do
        llt=$(stat_of f2 $coll llt)
        [ "${llt:-0}" -gt 0 ] || fail "f2: no $coll from Fortran was offloaded (llt=${llt:-no line})"
    done
else
    echo "SKIP coll_check_f: not built (no Fortran compiler or MPI Fortran bindings)"
fi

# the first python3 that has mpi4py (a pyenv python3 may come before Debian's)
PY=
[ ${#BIND_NPS[@]} -eq 0 ] ||
for py in python3 /usr/bin/python3; do
    if "$py" -c "import mpi4py" 2>/dev/null; then
        PY=$py
        break
    fi
done
if [ -n "$PY" ]; then
    for np in "${BIND_NPS[@]}"; do
        run "py$np" $np -- "$PY" "$SRC/mpi/coll_check.py" -q
        expect_clean "$TMP/py$np.out" coll_check.py "np $np: coll_check.py found wrong results"
        check_stats "py$np"
        grep -E "^(coll_check.py|agg_stats):" "$TMP/py$np.out"
    done
    # mpi4py asks for MPI_THREAD_MULTIPLE by default; once more with a single thread
    run pysingle 2 -- "$PY" "$SRC/mpi/coll_check.py" -q --thread-level single
    expect_clean "$TMP/pysingle.out" coll_check.py "MPI_THREAD_SINGLE: coll_check.py found wrong results"
    check_stats pysingle
    for r in py2 pysingle; do
        llt=$(stat_of $r allreduce llt)
        [ "${llt:-0}" -gt 0 ] || fail "$r: no allreduce from Python was offloaded (llt=${llt:-no line})"
    done
elif [ ${#BIND_NPS[@]} -gt 0 ]; then
    echo "SKIP coll_check.py: no mpi4py"
fi
check_clean "$TMP"/*
echo "PASS"
