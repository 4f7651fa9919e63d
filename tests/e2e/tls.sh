#!/usr/bin/env bash
# TLS 1.3 on the control plane (agg/tls.h), on loopback: with a shared secret
# set, a whole MPI job (ranks and switchsim) talks to aggmgr through TLS
# keyed by it, at HCOLL_ENABLE_SHARP=3 (nothing may fall back); then a relay
# in the middle records, alters and adds to the traffic, and clients without
# the secret or with another one are refused (tests/e2e/mgr_relay.py says
# what each step checks).
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "no python3"
export AGG_AM_SECRET="e2e tls secret $$"
run_check job 2 -x AGG_AM_SECRET -x HCOLL_ENABLE_SHARP=3 -x AGG_STATS=1 -- --max-count 4099 --world-only
grep -Eq "^agg_stats: allreduce calls=[0-9]+ llt=[1-9]" "$TMP/job.out" ||
    { grep agg_stats "$TMP/job.out"; fail "the job offloaded nothing"; }
echo "a job with the secret: $(grep -h 'passed' "$TMP/job.out")"
python3 "$(dirname "$0")/mgr_relay.py" "$BIN" "$TMP" || {
    for f in "$TMP"/*.log; do echo "== $f"; tail -20 "$f"; done
    fail "TLS on the control plane did not hold"
}
check_clean "$TMP"/*.out "$TMP"/*.log
echo "PASS"
