#!/usr/bin/env bash
# aggmgr's journal (am_journal): killed with -9 and started again, the
# manager holds exactly what it held; its jobs wait for their rank 0 to come
# back with the key; a damaged tail, a journal rewritten as it grows and one
# of another fabric (tests/e2e/mgr_journal.py says what each step checks).
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "no python3"
python3 "$(dirname "$0")/mgr_journal.py" "$BIN" "$TMP" || {
    for f in "$TMP"/*.log; do echo "== $f"; tail -30 "$f"; done
    fail "aggmgr's journal did not hold"
}
echo "PASS"
