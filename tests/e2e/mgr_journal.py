#!/usr/bin/env python3
"""aggmgr's journal: a manager killed with -9 and started again holds what it
held, and a fresh manager never hands an id out twice.

    mgr_journal.py BIN_DIR TMP_DIR

Runs a real aggmgr (a generated fat tree, am_journal in TMP_DIR) and a real
switchsim, and speaks the control protocol as libagg's rank 0 and a
communicator's leader do:
1. two jobs (one with SAT trees), groups made (one with a SAT part) and one
   destroyed; agg_info's state text taken;
2. aggmgr killed (-9), started again on the journal: the state text is the
   same, line for line (the lines about connections aside: "waiting:",
   "switchsim", and the journal's size); switchsim, which served the groups
   meanwhile, registers again and keeps every part (its group count);
3. a client without the key is refused; rank 0 attaching with it owns the
   job again and ends its group and itself (switchsim's parts go with them);
   the job nobody claims is released after am_restore_grace_ms; the next
   job's id follows the last one handed out, not 1;
4. a journal whose tail is cut short (a write the manager died in) is read up
   to it, the tail kept in JOURNAL.damaged; a journal kept small
   (am_journal_max 4096) is rewritten as it grows and still reads back the same;
5. a manager started without a journal has switchsim, registering again,
   tear down every part it serves (it holds none of them); a group read back
   whose switchsim restarted (it serves nothing) is dropped;
6. a journal written for another fabric stops the manager with a clear error.
Prints what it checks; exits 0 when everything held.
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

from aggwire import MAGIC, VERSION

STATE, STATE_REPLY, JOB_ATTACH, JOB_ATTACH_REPLY = 21, 22, 23, 24
STATS, STATS_REPLY = 17, 18
JOB_CREATE, JOB_CREATE_REPLY, JOB_DESTROY, JOB_DESTROY_REPLY = 9, 10, 11, 12
GROUP_CREATE, GROUP_CREATE_REPLY, GROUP_DESTROY, GROUP_DESTROY_REPLY = 13, 14, 15, 16
OK, ERR_AUTH, ERR_NO_JOB = 0, -207, -204
JOB_F_SAT, GROUP_F_SAT = 1, 1

BIN, TMP = sys.argv[1], sys.argv[2]
JOURNAL = os.path.join(TMP, "mgr.journal")
FAILED = []


def verdict():
    """The exit status of a script of checks, said in words."""
    if FAILED:
        print("FAILED: " + "; ".join(FAILED))
        return 1
    print("all checks held")
    return 0


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILED.append(what)
    return ok


class Peer:
    """One control connection, one request at a time."""

    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=10)
        self.txid = 0

    def call(self, mtype, body=b""):
        self.txid += 1
        self.s.sendall(struct.pack(">IHHII", MAGIC, VERSION, mtype, len(body), self.txid) + body)
        hdr = self.read(16)
        magic, _, rtype, length, txid = struct.unpack(">IHHII", hdr)
        assert magic == MAGIC and txid == self.txid, (magic, txid)
        return rtype, self.read(length)

    def read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("aggmgr closed the connection")
            buf += chunk
        return buf

    def status(self, mtype, body=b""):
        return struct.unpack(">i", self.call(mtype, body)[1][:4])[0]

    def close(self):
        self.s.close()


def job_create(peer, ranks, key, flags=0):
    host = socket.gethostname().encode()  # ranks on switchsim's host: shared memory
    body = struct.pack(">QIIIIIIII64s64s", key, ranks, 4242, 0, 0, 0, 0, flags, 1,
                       host, b"") + struct.pack(">64s", host) + \
        struct.pack(">%dI" % ranks, *([0] * ranks))
    rtype, rep = peer.call(JOB_CREATE, body)
    st, job_id = struct.unpack(">iI", (rep + bytes(4))[:8])
    assert rtype == JOB_CREATE_REPLY and st == OK, ("JOB_CREATE", st)
    return job_id


def group_create(peer, job_id, key, members, flags=0):
    body = struct.pack(">IIIIIIQ", job_id, len(members), 0, flags, 4 if flags else 0,
                       65536 if flags else 0, key) + struct.pack(">%dI" % len(members), *members)
    rtype, rep = peer.call(GROUP_CREATE, body)
    st, group_id = struct.unpack(">iI", (rep + bytes(4))[:8])
    assert rtype == GROUP_CREATE_REPLY and st == OK, ("GROUP_CREATE", st)
    return group_id


def group_ref(job_id, group_id):
    return struct.pack(">IIII", job_id, group_id, 0, 0)


def attach(peer, job_id, key, rank):
    return peer.status(JOB_ATTACH, struct.pack(">QII", key, job_id, rank))


def state(addr):
    p = Peer(addr)
    rtype, rep = p.call(STATE)
    p.close()
    assert rtype == STATE_REPLY and struct.unpack(">i", rep[:4])[0] == OK
    return rep[4:].rstrip(b"\0").decode()


def sim_parts(addr):
    """The group parts switchsim serves now (its STATS counter, through the manager)."""
    p = Peer(addr)
    rtype, rep = p.call(STATS)
    p.close()
    st, groups = struct.unpack(">iI", (rep + bytes(8))[:8])
    assert rtype == STATS_REPLY and st == OK, ("STATS", st)
    return groups


def wait_for(what, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if what():
            return True
        time.sleep(0.05)
    return False


def held(text):
    """The lines that say what is held (not who is connected)."""
    return [l for l in text.splitlines()
            if not l.startswith(("waiting:", "switchsim ", "journal:"))]


class Daemons:
    def __init__(self):
        self.mgr = self.sim = None
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        # one address for every manager started: switchsim calls it again there
        self.addr = "127.0.0.1:%d" % probe.getsockname()[1]
        probe.close()
        self.log = None

    def start_mgr(self, fabric="4:2:2", extra=None, expect_fail=False, tag="mgr"):
        env = dict(os.environ, AGG_AM_JOURNAL=JOURNAL, AGG_AM_RESTORE_GRACE_MS="3000",
                   SHARP_COLL_LOG_LEVEL="3")
        env.update(extra or {})
        self.log = os.path.join(TMP, tag + ".log")
        r, w = os.pipe()
        out = open(self.log, "w")
        self.mgr = subprocess.Popen([os.path.join(BIN, "aggmgr"), "--fat-tree", fabric,
                                     "--listen", self.addr, "--ready-fd", str(w)],
                                    env=env, stdout=out, stderr=subprocess.STDOUT,
                                    pass_fds=(w,))
        os.close(w)
        with os.fdopen(r) as ready:
            line = ready.readline().strip()
        if expect_fail:
            rc = self.mgr.wait(timeout=20)
            self.mgr = None
            return rc
        assert line, open(self.log).read()
        return 0

    def start_sim(self):
        env = dict(os.environ, AGG_AM_ADDR=self.addr)
        r, w = os.pipe()
        self.sim = subprocess.Popen([os.path.join(BIN, "switchsim"), "--ready-fd", str(w)],
                                    env=env, stdout=open(os.path.join(TMP, "sim.log"), "a"),
                                    stderr=subprocess.STDOUT, pass_fds=(w,))
        os.close(w)
        with os.fdopen(r) as ready:
            assert ready.readline().strip() == "ready"

    def kill9(self):
        """The manager killed; switchsim goes on serving and calls it again."""
        self.mgr.send_signal(signal.SIGKILL)
        self.mgr.wait()
        self.mgr = None

    def sim_back(self):
        """switchsim registered with the manager started again."""
        return wait_for(lambda: "\nswitchsim " in state(self.addr))

    def stop(self):
        for p in (self.sim, self.mgr):
            if p is not None:
                p.terminate()
                p.wait(timeout=20)
        self.sim = self.mgr = None


def log_has(path, text):
    with open(path) as f:
        return text in f.read()


def main():
    d = Daemons()
    try:
        return steps(d)
    finally:
        for p in (d.sim, d.mgr):  # whatever went wrong, nothing outlives the test
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def steps(d):
    d.start_mgr()
    d.start_sim()
    key1, key2 = 0x1111222233334444, 0x5555666677778888
    rank0_1, rank0_2 = Peer(d.addr), Peer(d.addr)
    job1 = job_create(rank0_1, 4, key1, JOB_F_SAT)
    job2 = job_create(rank0_2, 2, key2)
    g_sat = group_create(rank0_1, job1, key1, [0, 1, 2, 3], GROUP_F_SAT)
    g_half = group_create(rank0_1, job1, key1, [2, 3])
    g_gone = group_create(rank0_1, job1, key1, [0, 1])
    g_two = group_create(rank0_2, job2, key2, [1, 0])
    check(rank0_1.status(GROUP_DESTROY, group_ref(job1, g_gone)) == OK, "a group destroyed")
    before = state(d.addr)
    print(before)
    check("SAT part of 4 chunks" in before and f"group {g_two}:" in before,
          "the state shows the jobs' groups, SAT part and all")
    parts = sim_parts(d.addr)
    check(parts == 4, f"switchsim serves the 4 parts of 3 groups ({parts})")

    # 2. kill -9, start again on the journal
    d.kill9()
    t0 = time.monotonic()
    d.start_mgr(tag="mgr2")
    print(f"aggmgr back in {(time.monotonic() - t0) * 1000:.0f} ms")
    check(d.sim_back(), "switchsim registers with it again")
    print(f"switchsim back {(time.monotonic() - t0) * 1000:.0f} ms after the restart")
    after = state(d.addr)
    print(after)
    check(sim_parts(d.addr) == 4, "switchsim kept every part the journal holds")
    check(held(after) == held(before), "after kill -9 the manager holds exactly what it held")
    check(f"waiting: job {job1}," in after and f"waiting: job {job2}," in after,
          "both jobs wait for their rank 0")

    # 3. who may claim a job
    other = Peer(d.addr)
    check(attach(other, job1, key1 ^ 1, 0) == ERR_AUTH, "attaching without the job's key is refused")
    check(other.status(JOB_DESTROY, struct.pack(">II", job1, 0)) == ERR_AUTH,
          "a client that did not attach cannot end a restored job")
    check(other.status(GROUP_DESTROY, group_ref(job1, g_half)) == ERR_AUTH,
          "nor its groups")
    other.close()
    rank0 = Peer(d.addr)
    check(attach(rank0, job1, key1, 0) == OK, "rank 0 attaches with the key")
    check(f"waiting: job {job1}," not in state(d.addr), "the job is no longer waiting")
    leader = Peer(d.addr)
    check(attach(leader, job1, key1, 2) == OK, "another rank attaches")
    check(leader.status(GROUP_DESTROY, group_ref(job1, g_half)) == OK,
          "a rank that attached ends a restored group")
    check(wait_for(lambda: sim_parts(d.addr) == 3), "its part on switchsim goes with it")
    leader.close()
    job3 = job_create(rank0, 2, 0x99, 0)
    check(job3 == job2 + 1, f"the next job is {job3}, after the last one handed out ({job2})")
    check(rank0.status(JOB_DESTROY, struct.pack(">II", job3, 0)) == OK, "and ends")
    time.sleep(3.5)  # am_restore_grace_ms
    s = state(d.addr)
    check(f"job {job2}:" not in s and f"job {job1}:" in s,
          "the job nobody claimed is released after am_restore_grace_ms, the claimed one stays")
    check(log_has(d.log, f"job {job2} (pid 4242 on {socket.gethostname()}): read back from the journal, and "
                         "its rank 0 did not come back"), "and the log says why")
    check(wait_for(lambda: sim_parts(d.addr) == 2), "switchsim tears down its group's part")
    check(rank0.status(JOB_DESTROY, struct.pack(">II", job1, 0)) == OK, "rank 0 ends its job")
    s = state(d.addr)
    check(s.startswith("manager: 0 jobs, 0 groups") and "\nswitch " not in s,
          "every count is back to nothing")
    check(wait_for(lambda: sim_parts(d.addr) == 0), "switchsim serves no part")
    rank0.close()

    # 4. a damaged tail; a small journal rewritten as it grows
    rank0 = Peer(d.addr)
    job4 = job_create(rank0, 4, key1, JOB_F_SAT)
    for _ in range(40):
        g = group_create(rank0, job4, key1, [0, 1, 2, 3])
        rank0.status(GROUP_DESTROY, group_ref(job4, g))
    keep = group_create(rank0, job4, key1, [3, 1, 0], GROUP_F_SAT)
    before = state(d.addr)
    d.kill9()
    with open(JOURNAL, "ab") as f:
        f.write(struct.pack("<IHHII", 0x314a4741, 4, 1, 4000, 0) + b"x" * 20)
    d.start_mgr(extra={"AGG_AM_JOURNAL_MAX": "4096"}, tag="mgr3")
    after = state(d.addr)
    check(held(after) == held(before) and f"group {keep}:" in after,
          "a journal with a damaged tail reads back up to it")
    check(log_has(d.log, "a record cut short") and os.path.getsize(JOURNAL + ".damaged") == 36,
          "the damaged tail is reported and kept aside")
    check(d.sim_back(), "switchsim registers again")
    rank0 = Peer(d.addr)
    check(attach(rank0, job4, key1, 0) == OK, "rank 0 attaches again")
    for _ in range(60):
        g = group_create(rank0, job4, key1, [0, 1])
        rank0.status(GROUP_DESTROY, group_ref(job4, g))
    size = os.path.getsize(JOURNAL)
    check(size < 8192, f"am_journal_max 4096: the journal is rewritten as it grows ({size} bytes)")
    before = state(d.addr)
    d.kill9()
    d.start_mgr(tag="mgr4")
    check(held(state(d.addr)) == held(before), "a rewritten journal reads back the same")
    check(d.sim_back() and sim_parts(d.addr) == 2, "switchsim keeps the group's two parts")

    # 5. a manager without the journal holds nothing of what switchsim serves
    d.kill9()
    d.start_mgr(extra={"AGG_AM_JOURNAL": ""}, tag="mgr5")
    check(d.sim_back() and wait_for(lambda: sim_parts(d.addr) == 0),
          "a manager without the journal has switchsim tear down what it serves")
    check(log_has(d.log, "2 of them the manager does not hold"), "and says so")
    d.stop()

    # 5b. the journal's group, but switchsim restarted meanwhile: it serves nothing
    d.start_mgr(tag="mgr5b")
    d.start_sim()
    s = state(d.addr)
    check(f"job {job4}:" in s and "  group " not in s and
          log_has(d.log, f"group {keep} read back from the journal: switchsim 1 does not serve"),
          "a group whose switchsim restarted while the manager was down is dropped")
    d.stop()

    # 6. another fabric
    rc = d.start_mgr(fabric="2:2:2", expect_fail=True, tag="mgr6")
    check(rc == 2 and log_has(d.log, "it was written for another fabric"),
          "a journal of another fabric stops the manager with a clear error")
    d.stop()
    if FAILED:
        print(f"{len(FAILED)} checks failed")
        return 1
    print("all checks held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
