#!/usr/bin/env bash
# Reproducible mode (AGG_REPRODUCIBLE=1): float sums whose bits depend on the
# order, with arrivals shuffled by random sleeps, come out bitwise the same
# from run to run, and on a one-switch tree equal to the sum in rank order;
# without it the same runs differ (so the test can tell).
. "$(dirname "$0")/lib.sh"

run_repro() { # name seed [aggrun args] -- [mpirun args] -- [repro_check args]
    local name=$1 seed=$2 agg=() mpi=()
    shift 2
    while [ "$1" != -- ]; do agg+=("$1"); shift; done
    shift
    while [ "$1" != -- ]; do mpi+=("$1"); shift; done
    shift
    "$BIN/aggrun" "${agg[@]}" -- "${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" \
        -x HCOLL_ENABLE_SHARP=3 -x SHARP_COLL_ENABLE_SAT=1 -x SHARP_COLL_SAT_THRESHOLD=4096 \
        "${mpi[@]}" "$BIN/repro_check" --seed "$seed" --iters 8 "$@" >"$TMP/$name.out" 2>&1 ||
        { cat "$TMP/$name.out"; fail "$name: repro_check failed"; }
    grep "^repro_check" "$TMP/$name.out"
}
hash_of() { awk '/hash/ { print $3 }' "$TMP/$1.out"; }

# The quick tier (lib.sh): two runs where the bits must match, not three,
# fewer iterations on the deep tree.
SEEDS=(1 2 3) DEEP_ITERS=4
[ $QUICK = 0 ] || { SEEDS=(1 2); DEEP_ITERS=2; }

# one switch: the fixed order is rank order
for seed in "${SEEDS[@]}"; do
    run_repro one$seed $seed --fat-tree 1:1:8 -- -x AGG_REPRODUCIBLE=1 -- --expect-rank-order
    expect_clean "$TMP/one$seed.out" repro_check "one$seed: not the rank-order sum"
done
for seed in "${SEEDS[@]}"; do
    [ "$(hash_of one1)" = "$(hash_of one$seed)" ] ||
        fail "reproducible mode gave different bits in different runs"
done

# a two-level tree (ranks spread over leaves, the spine on top)
for seed in 4 5; do
    run_repro deep$seed $seed -- -x AGG_REPRODUCIBLE=1 -x AGG_PLACEMENT=spread -x SHARP_COLL_LOG_LEVEL=3 -- --iters $DEEP_ITERS
done
grep -q "tree_type:LLT .*depth:2" "$TMP/deep4.out" || fail "spread placement did not give a two-level tree"
[ "$(hash_of deep4)" = "$(hash_of deep5)" ] || fail "reproducible mode differs between runs on a two-level tree"

# without the mode, arrival order shows in the bits
run_repro free1 1 --fat-tree 1:1:8 -- -- 
n=$(awk '/differ/ { print $2 }' "$TMP/free1.out")
[ "$n" -gt 0 ] || fail "combining in arrival order matched the rank order everywhere: the shuffle did nothing"
check_clean "$TMP"/*
echo "PASS"
