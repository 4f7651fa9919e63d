#!/usr/bin/env bash
# aggmgr's limits per client address: jobs, adapters and connections
# (am_client_max_*); tests/e2e/mgr_client.py says what each step checks.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "no python3"
python3 "$(dirname "$0")/mgr_client.py" "$BIN" "$TMP" || {
    for f in "$TMP"/*.log; do echo "== $f"; tail -20 "$f"; done
    fail "aggmgr's limits per client did not hold"
}
echo "PASS"
