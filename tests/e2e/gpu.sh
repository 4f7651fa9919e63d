#!/usr/bin/env bash
# Device buffers where there is no GPU (CI): the backends are built and
# export only their entry point, a missing runtime or device is said
# plainly and everything runs on host memory, SHARP_COLL_ENABLE_CUDA=1
# fails with a clear error instead, and the GPU programs skip. (On a GPU
# machine: tools/gpu_device_run.sh.)
. "$(dirname "$0")/lib.sh"

for be in cuda rocm; do
    so=$BUILD/lib/libagg_gpu_$be.so
    if [ ! -f "$so" ]; then
        echo "SKIP: $so was not built (no compiler for it here)"
        continue
    fi
    syms=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^$' | sort | tr '\n' ' ')
    [ "$syms" = "agg_gpu_backend " ] || fail "$so exports more than agg_gpu_backend: $syms"
done

# no device: a sentence, exit 0; required: exit 1 and the same reason
"$BIN/agg_info" --gpu >"$TMP/info" 2>&1 || { cat "$TMP/info"; fail "agg_info --gpu failed with no GPU"; }
cat "$TMP/info"
grep -q '^GPU: none usable: .\+' "$TMP/info" || fail "agg_info --gpu does not say why there is no GPU"
grep -q 'taken as host memory' "$TMP/info" || fail "agg_info --gpu does not say what happens instead"
if SHARP_COLL_ENABLE_CUDA=1 "$BIN/agg_info" --gpu >"$TMP/info1" 2>&1; then
    cat "$TMP/info1"
    fail "agg_info --gpu with SHARP_COLL_ENABLE_CUDA=1 and no GPU succeeded"
fi
grep -q 'SHARP_COLL_ENABLE_CUDA=1 but no GPU backend loaded' "$TMP/info1" ||
    { cat "$TMP/info1"; fail "no clear error for SHARP_COLL_ENABLE_CUDA=1"; }

# the GPU programs skip (77) with the reason
if [ -x "$BIN/gpu_kernel_check" ]; then
    for be in cuda rocm; do
        [ -f "$BUILD/lib/libagg_gpu_$be.so" ] || continue
        rc=0
        "$BIN/gpu_kernel_check" "$BUILD/lib/libagg_gpu_$be.so" >"$TMP/kc_$be" 2>&1 || rc=$?
        cat "$TMP/kc_$be"
        [ $rc -eq 77 ] || fail "gpu_kernel_check ($be) with no GPU: exit $rc, not 77"
        grep -q 'no GPU device: .\+' "$TMP/kc_$be" || fail "gpu_kernel_check ($be) does not say why"
    done
fi
if [ -x "$BIN/gpu_coll_check" ]; then
    rc=0
    "${MPIRUN[@]}" -np 2 "$BIN/gpu_coll_check" -m api >"$TMP/cc" 2>&1 || rc=$?
    cat "$TMP/cc"
    grep -q 'no GPU device' "$TMP/cc" || fail "gpu_coll_check with no GPU does not say why it skips"
fi

# libagg: SHARP_COLL_ENABLE_CUDA=1 with no GPU fails the context, saying why;
# the default (-1) runs on host memory, and device pointers stay refused
# (agg_api_check: a CUDA buffer is AGG_ERR_NOT_SUPPORTED, never read)
if "$BIN/aggrun" -- "${MPIRUN[@]}" -np 1 -x SHARP_COLL_ENABLE_CUDA=1 "$BIN/agg_hello" \
    >"$TMP/hello" 2>&1; then
    cat "$TMP/hello"
    fail "agg_hello with SHARP_COLL_ENABLE_CUDA=1 and no GPU succeeded"
fi
cat "$TMP/hello"
grep -q 'SHARP_COLL_ENABLE_CUDA=1 but no GPU backend loaded' "$TMP/hello" ||
    fail "agg_hello does not say that the GPU backend is missing"
run_check nogpu 2 -- --max-count 100000
"$BIN/aggrun" -- "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="${SANITIZER_PRELOAD:-}" \
    "$BIN/agg_api_check" >"$TMP/api" 2>&1 || { cat "$TMP/api"; fail "agg_api_check failed"; }
expect_clean "$TMP/api" agg_api_check "agg_api_check with the GPU backends present"

# the shim with SHARP_COLL_ENABLE_CUDA=1 and no GPU: the error once per rank, host
# buffers still right (the network is off for the job: libagg refused it)
"$BIN/aggrun" -- "${MPIRUN[@]}" -np 2 -x LD_PRELOAD="$PRELOAD" -x SHARP_COLL_ENABLE_CUDA=1 \
    "$BIN/allreduce_check" --max-count 1000 --world-only >"$TMP/shim1" 2>&1 ||
    { cat "$TMP/shim1"; fail "the shim with SHARP_COLL_ENABLE_CUDA=1 and no GPU failed"; }
expect_clean "$TMP/shim1" allreduce_check "wrong results with SHARP_COLL_ENABLE_CUDA=1 and no GPU"
grep -q 'SHARP_COLL_ENABLE_CUDA=1 but no GPU backend loaded' "$TMP/shim1" ||
    { cat "$TMP/shim1"; fail "the shim does not say that the GPU backend is missing"; }
check_clean "$TMP"/*
echo "PASS"
