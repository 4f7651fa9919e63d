#!/usr/bin/env bash
# MPI_Allreduce through the shim equals the reference for every type, op and
# count, and went through the network: switchsim counted the fragments.
#   allreduce.sh BUILD NP [allreduce_check args...]
. "$(dirname "$0")/lib.sh"
NP=${2:?NP}
shift 2

run_check offload "$NP" -x HCOLL_ENABLE_SHARP=3 -- --max-count "$MAX_COUNT" "$@"
cat "$TMP/offload.out"
frags=$(stat fragments_in "$TMP/offload.stats")
results=$(stat results_out "$TMP/offload.stats")
errors=$(stat errors "$TMP/offload.stats")
echo "switchsim: fragments_in=$frags results_out=$results errors=$errors"
[ "${frags:-0}" -gt 0 ] || fail "no fragment reached switchsim: the offload path was not taken"
[ "${results:-0}" -gt 0 ] || fail "switchsim returned no result"
[ "${errors:-1}" -eq 0 ] || fail "switchsim saw $errors bad fragments"
# each result needs a fragment from every member of its group
[ "$frags" -ge "$results" ] || fail "fewer fragments ($frags) than results ($results)"
check_clean "$TMP"/*
echo "PASS"
