#!/usr/bin/env bash
# Fortran programs through the shim: Open MPI's Fortran bindings call its
# PMPI_ functions directly, so the shim takes their entry points; through
# mpif.h, the mpi module and mpi_f08 every collective of the program must be
# offloaded (AGG_STATS: llt = calls) and right, at 4 ranks (so that the
# halves a program splits have 2: a communicator of one rank gets no group).
. "$(dirname "$0")/lib.sh"

ran=0
for b in fh mod f08; do
    prog=$BIN/fortran_offload_$b
    [ -x "$prog" ] || continue
    ran=$((ran + 1))
    out=$TMP/$b.out
    "$BIN/aggrun" -- "${MPIRUN[@]}" -np 4 -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=4 \
        -x HCOLL_SHARP_NP=2 -x AGG_STATS=1 "$prog" >"$out" 2>&1 ||
        { cat "$out"; fail "fortran_offload_$b failed"; }
    expect_clean "$out" "fortran_offload_$b" "fortran_offload_$b: wrong results"
    for coll in allreduce iallreduce reduce ireduce bcast ibcast barrier ibarrier \
        reduce_scatter_block allgather; do
        line=$(grep "^agg_stats: $coll " "$out") || { cat "$out"; fail "$b: no AGG_STATS line for $coll"; }
        calls=${line#* calls=}
        calls=${calls%% *}
        case "$line" in *" llt=$calls "*) ;; *) fail "$b: not every $coll offloaded: $line" ;; esac
    done
    echo "$b: every collective offloaded"
done
[ "$ran" -gt 0 ] || fail "no Fortran test program was built (gfortran and Open MPI's Fortran bindings are installed by tools/bootstrap.sh)"
check_clean "$TMP"/*
echo "PASS"
