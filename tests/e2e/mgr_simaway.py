#!/usr/bin/env python3
"""A switchsim whose control connection to a living aggmgr breaks (a relay
between them cuts it; both processes live on): aggmgr keeps its groups for
am_sim_grace_ms while it registers again.

    mgr_simaway.py BIN_DIR TMP_DIR

1. am_sim_grace_ms 4000: the connection cut, the manager says it keeps the
   switchsim's group and shows it away; switchsim is back within the grace,
   the group is kept (state line for line as before, switchsim still serves
   its part), and it ends normally.
2. the switchsim kept away past the grace (the relay refuses it): the group
   is dropped and the log says so; when it comes back, the part the manager
   no longer holds is torn down.
3. am_sim_grace_ms 0: the group is dropped at once, as before the grace.
Prints what it checks; exits 0 when all held.

    mgr_simaway.py BIN_DIR TMP_DIR relay UPSTREAM ADDR_FILE

runs a plain relay to UPSTREAM instead, writes its address to ADDR_FILE, and
cuts every connection through it at each SIGUSR1 (tests/e2e/sim_away.sh).
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mgr_journal as mj  # noqa: E402
from mgr_relay import Relay  # noqa: E402


def sim_through(d, relay):
    addr, d.addr = d.addr, relay.addr
    try:
        d.start_sim()
    finally:
        d.addr = addr


def log_count(d, text):
    with open(d.log) as f:
        return f.read().count(text)


def main():
    d = mj.Daemons()
    try:
        # 1. back within the grace
        d.start_mgr(extra={"AGG_AM_SIM_GRACE_MS": "4000", "AGG_AM_JOURNAL": ""}, tag="away1")
        relay = Relay(d.addr, tls=False)
        sim_through(d, relay)
        peer = mj.Peer(d.addr)
        job = mj.job_create(peer, 4, 4242)
        group = mj.group_create(peer, job, 4242, [0, 1, 2, 3])
        before = mj.held(mj.state(d.addr))
        mj.check(mj.sim_parts(d.addr) > 0, "switchsim serves the group's parts")
        parts = mj.sim_parts(d.addr)
        relay.cut()
        mj.check(mj.wait_for(lambda: mj.log_has(d.log, "its control connection closed; its 1 "
                                                       "groups are kept 4000 ms")),
                 "the control connection cut: the manager keeps the switchsim's group")
        mj.check(mj.wait_for(lambda: mj.log_has(d.log, "1 of its groups kept, 0 dropped")),
                 "switchsim registers again within am_sim_grace_ms: its group is kept")
        after = mj.held(mj.state(d.addr))
        mj.check(after == before, "the manager holds exactly what it held")
        if after != before:
            print("\n".join(before), "\n--\n", "\n".join(after))
        mj.check(mj.sim_parts(d.addr) == parts, "switchsim still serves the group's %d parts"
                 % parts)
        mj.check(peer.status(mj.GROUP_DESTROY, mj.group_ref(job, group)) == mj.OK,
                 "the group ends normally")
        mj.check(mj.wait_for(lambda: mj.sim_parts(d.addr) == 0), "and its parts with it")

        # 2. away past the grace
        group = mj.group_create(peer, job, 4242, [0, 1, 2, 3])
        relay.blocked = True
        relay.cut()
        mj.check(mj.wait_for(lambda: "away (its control connection closed)" in
                             mj.state(d.addr)), "agg_info -S shows the switchsim away")
        mj.check(mj.wait_for(lambda: mj.log_has(d.log, "did not register again within "
                                                       "am_sim_grace_ms; its 1 groups are "
                                                       "lost"), timeout=10),
                 "kept away past am_sim_grace_ms: its group is dropped, and the log says so")
        mj.check("group %d:" % group not in mj.state(d.addr), "the group is gone")
        relay.blocked = False
        mj.check(mj.wait_for(lambda: mj.log_has(d.log, "1 of them the manager does not hold "
                                                       "(torn down)")),
                 "switchsim back later: the part the manager no longer holds is torn down")
        mj.check(mj.wait_for(lambda: mj.sim_parts(d.addr) == 0), "switchsim serves nothing")
        peer.close()
        relay.close()
        d.stop()

        # 3. no grace
        d.start_mgr(extra={"AGG_AM_SIM_GRACE_MS": "0", "AGG_AM_JOURNAL": ""}, tag="away0")
        relay = Relay(d.addr, tls=False)
        sim_through(d, relay)
        peer = mj.Peer(d.addr)
        job = mj.job_create(peer, 2, 77)
        mj.group_create(peer, job, 77, [0, 1])
        relay.cut()
        mj.check(mj.wait_for(lambda: mj.log_has(d.log, "is gone; 1 groups are lost")),
                 "am_sim_grace_ms 0: the group is dropped at once")
        peer.close()
        relay.close()
    finally:
        d.stop()
    return mj.verdict()


def serve(upstream, addr_file):
    relay = Relay(upstream, tls=False)
    signal.signal(signal.SIGUSR1, lambda *_: relay.cut())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(addr_file + ".tmp", "w") as f:
        f.write(relay.addr + "\n")
    os.rename(addr_file + ".tmp", addr_file)
    while True:
        signal.pause()


if __name__ == "__main__":
    if len(sys.argv) > 5 and sys.argv[3] == "relay":
        serve(sys.argv[4], sys.argv[5])
    sys.exit(main())
