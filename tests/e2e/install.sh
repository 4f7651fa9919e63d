#!/usr/bin/env bash
# `cmake --install` gives a usable tree: a program built against it with
# find_package(agg) and one built with pkg-config both run, and the
# installed daemons, aggrun and agg_hello pass a one-rank job.
. "$(dirname "$0")/lib.sh"

PREFIX=$TMP/prefix
cmake --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.out" 2>&1 ||
    { cat "$TMP/install.out"; fail "cmake --install failed"; }
for f in include/agg/agg.h lib/libagg.so lib/pkgconfig/agg.pc lib/cmake/agg/aggConfig.cmake \
         lib/libhcoll_shim.so bin/aggmgr bin/switchsim bin/aggrun bin/agg_hello bin/agg_perf; do
    [ -e "$PREFIX/$f" ] || fail "not installed: $f"
done

mkdir "$TMP/user"
cat >"$TMP/user/user.c" <<'SRC'
#include <stdio.h>
#include <string.h>
#include <agg/agg.h>
int main(void)
{
    /* the API links and answers without a manager */
    agg_context_spec_t spec = {0};
    agg_context_t *ctx;
    int ok = agg_context_init(&spec, &ctx) == AGG_ERR_INVALID_PARAM &&
             strcmp(agg_coll_name(AGG_COLL_ALLGATHER), "allgather") == 0;
    printf("%s\n", ok ? "user: ok" : "user: wrong answers");
    return !ok;
}
SRC
cat >"$TMP/user/CMakeLists.txt" <<'SRC'
cmake_minimum_required(VERSION 3.20)
project(user C)
find_package(agg 0.1 REQUIRED)
add_executable(user user.c)
target_link_libraries(user PRIVATE agg::agg)
SRC
cmake -S "$TMP/user" -B "$TMP/user/build" -DCMAKE_PREFIX_PATH="$PREFIX" >"$TMP/cmake.out" 2>&1 &&
    cmake --build "$TMP/user/build" >>"$TMP/cmake.out" 2>&1 || { cat "$TMP/cmake.out"; fail "find_package(agg) build failed"; }
# a sanitizer build's libagg needs its runtime loaded first
run_user() {
    LD_LIBRARY_PATH=$PREFIX/lib LD_PRELOAD="${SANITIZER_PRELOAD:-}" "$@"
}
run_user "$TMP/user/build/user" | grep -qx "user: ok" || fail "find_package(agg) program failed"

# shellcheck disable=SC2046
cc -o "$TMP/user/user_pc" "$TMP/user/user.c" \
    $(PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig pkg-config --cflags --libs agg) || fail "pkg-config build failed"
run_user "$TMP/user/user_pc" | grep -qx "user: ok" || fail "pkg-config program failed"

# the installed binaries find their library by themselves (RUNPATH)
"$PREFIX/bin/aggrun" -- "$PREFIX/bin/agg_hello" >"$TMP/hello.out" 2>&1 ||
    { cat "$TMP/hello.out"; fail "installed agg_hello failed"; }
grep -qx "Test Passed." "$TMP/hello.out" || { cat "$TMP/hello.out"; fail "agg_hello did not pass"; }
echo "PASS"
