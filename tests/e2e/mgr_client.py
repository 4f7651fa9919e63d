#!/usr/bin/env python3
"""aggmgr's limits per client address (am_client_max_*), against a real
aggmgr and switchsim, the control protocol spoken as libagg does.

    mgr_client.py BIN_DIR TMP_DIR

1. am_client_max_jobs 2: a third job from the same address is refused
   (AGG_ERR_NO_RESOURCE), and the log says why; one ended makes room.
2. am_client_max_adapters 3: a job of 2 ranks is admitted, a second of 2
   refused (4 adapters would pass 3), one of 1 admitted.
3. am_client_max_conns 4: four connections that hold a job each; a fifth
   connection is refused; with one of them holding nothing, a new one takes
   its place instead (the quietest that holds nothing goes).
Prints what it checks; exits 0 when all held.
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mgr_journal as mj  # noqa: E402

NO_RESOURCE = -301


def job_status(peer, ranks, key):
    host = mj.socket.gethostname().encode()
    body = struct.pack(">QIIIIIIII64s64s", key, ranks, 4242, 0, 0, 0, 0, 0, 1, host, b"") + \
        struct.pack(">64s", host) + struct.pack(">%dI" % ranks, *([0] * ranks))
    _, rep = peer.call(mj.JOB_CREATE, body)
    return struct.unpack(">iI", (rep + bytes(8))[:8])


def closed(peer):
    peer.s.settimeout(2)
    try:
        return peer.s.recv(1) == b""
    except OSError:
        return True


def main():
    d = mj.Daemons()
    try:
        # 1. jobs
        d.start_mgr(extra={"AGG_AM_CLIENT_MAX_JOBS": "2", "AGG_AM_JOURNAL": ""}, tag="client1")
        peers = [mj.Peer(d.addr) for _ in range(3)]
        st = [job_status(p, 1, 100 + i) for i, p in enumerate(peers)]
        mj.check(st[0][0] == mj.OK and st[1][0] == mj.OK and st[2][0] == NO_RESOURCE,
                 f"am_client_max_jobs 2: the third job is refused ({[s[0] for s in st]})")
        mj.check(mj.log_has(d.log, "has 2 jobs already (am_client_max_jobs)"), "and the log says why")
        peers[0].close()  # its job ends with its connection
        time.sleep(0.2)
        mj.check(job_status(peers[2], 1, 200)[0] == mj.OK, "a job ended makes room")
        d.stop()
        # 2. adapters
        d.start_mgr(extra={"AGG_AM_CLIENT_MAX_ADAPTERS": "3", "AGG_AM_JOURNAL": ""}, tag="client2")
        a, b, c = mj.Peer(d.addr), mj.Peer(d.addr), mj.Peer(d.addr)
        mj.check(job_status(a, 2, 1)[0] == mj.OK, "am_client_max_adapters 3: a job of 2 ranks")
        mj.check(job_status(b, 2, 2)[0] == NO_RESOURCE, "a second of 2 ranks is refused")
        mj.check(job_status(c, 1, 3)[0] == mj.OK, "one of 1 rank is admitted")
        mj.check(mj.log_has(d.log, "would pass am_client_max_adapters (3)"), "and the log says why")
        d.stop()
        # 3. connections
        d.start_mgr(extra={"AGG_AM_CLIENT_MAX_CONNS": "4", "AGG_AM_JOURNAL": ""}, tag="client3")
        holders = [mj.Peer(d.addr) for _ in range(4)]
        for i, p in enumerate(holders):
            job_status(p, 1, 300 + i)
        extra = mj.Peer(d.addr)
        mj.check(closed(extra), "am_client_max_conns 4: a fifth connection is refused when "
                                "every one holds a job")
        holders[3].status(mj.JOB_DESTROY, struct.pack(">II", 4, 0))  # it holds nothing now
        fresh = mj.Peer(d.addr)
        rtype, _ = fresh.call(mj.STATE)
        mj.check(rtype == mj.STATE_REPLY and closed(holders[3]),
                 "with one holding nothing, a new one takes its place")
        mj.check(mj.log_has(d.log, "its address has am_client_max_conns connections"),
                 "and the log says why")
        d.stop()
    finally:
        for p in (d.sim, d.mgr):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    return 1 if mj.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
