#!/usr/bin/env bash
# Functions by their share of agg_perf -P samples (one or more ranks' files):
#   tools/prof_report.sh PROF.0 PROF.1 ...   [TOP=25]
# Each input line is "samples object offset"; addr2line names the function of
# every offset (the innermost one where code was inlined), and the shares add
# the ranks together. Needs binutils' addr2line and the objects the run used.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 PROFILE-FILE..." >&2; exit 2; }
command -v addr2line >/dev/null || { echo "$0: addr2line (binutils) not found" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat "$@" >"$tmp/all"
total=$(awk '{s += $1} END {print s + 0}' "$tmp/all")
[ "$total" -gt 0 ] || { echo "$0: no samples in $*" >&2; exit 1; }
# per object: its offsets in one addr2line call, then "samples function" lines
awk '{print $2}' "$tmp/all" | sort -u >"$tmp/objs"
while read -r obj; do
    awk -v o="$obj" '$2 == o {print $1, $3}' "$tmp/all" >"$tmp/one"
    if [ "$obj" = "[unknown]" ] || [ ! -r "$obj" ]; then
        awk -v o="$obj" '{print $1, "?", o}' "$tmp/one"
        continue
    fi
    cut -d' ' -f2 "$tmp/one" | addr2line -f -C -e "$obj" | awk 'NR % 2 == 1' >"$tmp/fns"
    paste -d' ' <(cut -d' ' -f1 "$tmp/one") "$tmp/fns" | awk -v o="${obj##*/}" '{print $1, $2, o}'
done <"$tmp/objs" >"$tmp/named"
printf '%7s  %-40s %s\n' share function object
awk '{k = $2 " " $3; s[k] += $1} END {for (k in s) print s[k], k}' "$tmp/named" |
    sort -rn | head -n "${TOP:-25}" |
    awk -v t="$total" '{printf "%6.2f%%  %-40s %s\n", 100 * $1 / t, $2, $3}'
echo "($total samples)"
