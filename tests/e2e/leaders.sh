#!/usr/bin/env bash
# Node leaders: on a fabric where this host has two adapters for four
# ranks, the ranks share adapters, so with HCOLL_SBGP's shared-memory level
# (the default) one leader per host talks to the tree: the world group has
# one member per host, and every collective is still right. With
# HCOLL_SBGP=p2p, or where every rank has its own adapter, the
# communicator stays flat (a group of four).
. "$(dirname "$0")/lib.sh"

host=$(hostname)
cat >"$TMP/host.topo" <<TOPO
# this host with two adapters on two leaves, another host with one
switchguid=0x100(100)
Switch	3 "S-0000000000000100"		# "spine1" base port 0 lid 1 lmc 0
[1]	"S-0000000000000200"[3]		# "leaf1" lid 2 4xEDR
[2]	"S-0000000000000300"[3]		# "leaf2" lid 3 4xEDR

switchguid=0x200(200)
Switch	3 "S-0000000000000200"		# "leaf1" base port 0 lid 2 lmc 0
[1]	"H-0000000000001000"[1](1001) 		# "$host mlx5_0" lid 4 4xEDR
[2]	"H-0000000000003000"[1](3001) 		# "otherhost mlx5_0" lid 6 4xEDR
[3]	"S-0000000000000100"[1]		# "spine1" lid 1 4xEDR

switchguid=0x300(300)
Switch	3 "S-0000000000000300"		# "leaf2" base port 0 lid 3 lmc 0
[1]	"H-0000000000002000"[1](2001) 		# "$host mlx5_1" lid 5 4xEDR
[3]	"S-0000000000000100"[2]		# "spine1" lid 1 4xEDR

caguid=0x1000
Ca	1 "H-0000000000001000"		# "$host mlx5_0"
[1](1001) 	"S-0000000000000200"[1]		# lid 4 lmc 0 "leaf1" lid 2 4xEDR

caguid=0x2000
Ca	1 "H-0000000000002000"		# "$host mlx5_1"
[1](2001) 	"S-0000000000000300"[1]		# lid 5 lmc 0 "leaf2" lid 3 4xEDR

caguid=0x3000
Ca	1 "H-0000000000003000"		# "otherhost mlx5_0"
[1](3001) 	"S-0000000000000200"[2]		# lid 6 lmc 0 "leaf1" lid 2 4xEDR
TOPO

run() { # name np [mpirun args...]
    local name=$1 np=$2
    shift 2
    "$BIN/aggrun" --topology "$TMP/host.topo" --stats-file "$TMP/$name.stats" -- \
        "${MPIRUN[@]}" -np "$np" -x LD_PRELOAD="$PRELOAD" -x HCOLL_ENABLE_SHARP=4 \
        -x SHARP_COLL_LOG_LEVEL=3 -x AGG_STATS=1 "$@" "$BIN/coll_check" -m 65536 -l 5 \
        >"$TMP/$name.out" 2>&1 || { cat "$TMP/$name.out"; fail "$name: coll_check failed"; }
    expect_clean "$TMP/$name.out" coll_check "$name: wrong results"
    grep -E "^agg_stats: (allreduce|bcast|barrier) " "$TMP/$name.out"
}
world_group_size() {
    grep -m1 -oE '\[group#:0\] .* group size:[0-9]+' "$1" | grep -oE '[0-9]+$'
}

run leaders 4
[ "$(world_group_size "$TMP/leaders.out")" = 1 ] ||
    { grep 'group#' "$TMP/leaders.out"; fail "four ranks on two adapters: expected one leader in the world group"; }
grep -q "one leader per host talks to the tree" "$TMP/leaders.out" || fail "no INFO line about node leaders"
for coll in allreduce bcast barrier; do
    grep -qE "^agg_stats: $coll .* llt=[1-9]" "$TMP/leaders.out" || fail "$coll not offloaded through the leader"
done
grep -qE "^agg_stats: reduce .* leaders=[1-9]" "$TMP/leaders.out" || fail "reduce not counted as left to MPI for the leaders"
[ "$(stat fragments_in "$TMP/leaders.stats")" -gt 0 ] || fail "nothing reached switchsim"

run flat 4 -x HCOLL_SBGP=p2p
[ "$(world_group_size "$TMP/flat.out")" = 4 ] || fail "HCOLL_SBGP=p2p: expected a flat group of four"

run own 2 # two ranks, two adapters: every rank has its own
[ "$(world_group_size "$TMP/own.out")" = 2 ] || fail "two ranks on two adapters: expected a flat group of two"
check_clean "$TMP"/*
echo "PASS"
