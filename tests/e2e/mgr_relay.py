#!/usr/bin/env python3
"""TLS on aggmgr's control connections: a real aggmgr and switchsim holding a
shared secret (AGG_AM_SECRET) on loopback, real C clients (agg_info,
agg_hello), and a relay in the middle that records, alters or adds to what
passes.

    mgr_relay.py BIN_DIR TMP_DIR

1. agg_info -S and agg_hello (a job: JOB_CREATE with its key, a group, an
   allreduce) through a relay that only records: both work, and neither
   direction carries a message header in plain, the host's name or the
   state's text (everything after the handshake is encrypted).
2. a relay that passes the handshake, then slips a plain JOB_CREATE into the
   client's stream: aggmgr drops the connection, says why, admits nothing.
3. a relay that flips one byte of the client's first message: the same.
4. a client without the secret is refused on loopback too (the log says it
   spoke plain); one with another secret is refused, and both ends say
   "wrong shared secret".
Prints what it checks; exits 0 when all held.
"""
import os
import socket
import struct
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mgr_journal as mj  # noqa: E402
from aggwire import MAGIC, VERSION  # noqa: E402

SECRET = "relay test secret %d" % os.getpid()


def hang_up(*socks):
    for x in socks:
        try:
            x.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Relay:
    """Accepts on a loopback port, connects each client to aggmgr, pumps both
    ways and keeps what passed. mode: None (a pipe), "inject" (a plain
    JOB_CREATE after the client's handshake), "flip" (one byte of the
    client's first application record changed). tls=False: plain traffic,
    passed on as it comes."""

    def __init__(self, upstream, mode=None, tls=True):
        self.up = upstream.rsplit(":", 1)
        self.mode = mode
        self.tls = tls  # False: plain traffic, passed as it comes
        self.c2s = bytearray()
        self.s2c = bytearray()
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.addr = "127.0.0.1:%d" % self.ls.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = []
        self.blocked = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            if self.blocked:
                c.close()
                continue
            s = socket.create_connection((self.up[0], int(self.up[1])))
            with self.lock:
                self.conns += [c, s]
            if self.tls:
                threading.Thread(target=self.client_side, args=(c, s), daemon=True).start()
            else:
                threading.Thread(target=self.pump, args=(c, s, self.c2s), daemon=True).start()
            threading.Thread(target=self.pump, args=(s, c, self.s2c), daemon=True).start()

    def pump(self, src, dst, log):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                with self.lock:
                    log.extend(b)
                dst.sendall(b)
        except OSError:
            pass
        hang_up(src, dst)

    def client_side(self, c, s):
        """Record by record (5-byte TLS header), so the relay knows where the
        handshake ends: the client's first application-data record (23) is
        its Finished; the next one is its first message."""
        buf, app = b"", 0
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                buf += b
                while len(buf) >= 5:
                    n = 5 + struct.unpack(">H", buf[3:5])[0]
                    if len(buf) < n:
                        break
                    rec, buf = bytearray(buf[:n]), buf[n:]
                    if rec[0] == 23:
                        app += 1
                        if app == 2 and self.mode == "inject":
                            forged = forged_job_create()
                            with self.lock:
                                self.c2s.extend(forged)
                            s.sendall(forged)
                        if app == 2 and self.mode == "flip":
                            rec[-3] ^= 0x40
                    with self.lock:
                        self.c2s.extend(rec)
                    s.sendall(rec)
        except OSError:
            pass
        hang_up(c, s)

    def cut(self):
        """Breaks every connection through the relay (both ends see it close)."""
        with self.lock:
            conns, self.conns = self.conns, []
        hang_up(*conns)

    def close(self):
        self.ls.close()


def forged_job_create():
    host = socket.gethostname().encode()
    body = struct.pack(">QIIIIIIII64s64s", 777, 1, 4242, 0, 0, 0, 0, 0, 1, host, b"") + \
        struct.pack(">64s", host) + struct.pack(">I", 0)
    return struct.pack(">IHHII", MAGIC, VERSION, mj.JOB_CREATE, len(body), 1) + body


def tool(name, addr, secret=SECRET, args=()):
    env = dict(os.environ, AGG_AM_ADDR=addr, AGG_AM_SECRET=secret)
    if secret is None:
        env.pop("AGG_AM_SECRET")
    r = subprocess.run([os.path.join(mj.BIN, name), *args], env=env, capture_output=True,
                       text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def state_line(addr):
    rc, out = tool("agg_info", addr, args=("-S",))
    return next((l for l in out.splitlines() if l.startswith("manager:")), out)


def main():
    os.environ["AGG_AM_SECRET"] = SECRET
    d = mj.Daemons()
    try:
        d.start_mgr(extra={"AGG_AM_JOURNAL": ""}, tag="tls")
        d.start_sim()
        host = socket.gethostname().encode()

        # 1. a relay that only records
        r = Relay(d.addr)
        rc, out = tool("agg_info", r.addr, args=("-S",))
        mj.check(rc == 0 and "\nmanager: 0 jobs" in out, "agg_info -S through the relay, "
                 "with the secret")
        rc, hello = tool("agg_hello", r.addr)
        mj.check(rc == 0 and "Test Passed" in hello, "a job (agg_hello) through the relay")
        r.close()
        with r.lock:
            c2s, s2c = bytes(r.c2s), bytes(r.s2c)
        magic = struct.pack(">I", MAGIC)
        print("relay: %d bytes client to aggmgr, %d back" % (len(c2s), len(s2c)))
        mj.check(len(c2s) > 1000 and len(s2c) > 1000, "the relay saw the traffic")
        mj.check(magic not in c2s and magic not in s2c,
                 "no message header in plain on the wire, either way")
        mj.check(host not in c2s, "nor the host's name (HELLO, JOB_CREATE)")
        mj.check(b"manager:" not in s2c and b"switch " not in s2c, "nor the state's text")
        if not mj.check(rc == 0, "agg_hello passed"):
            print(hello)

        # 2. a plain JOB_CREATE slipped in after the handshake
        r = Relay(d.addr, "inject")
        rc, out = tool("agg_info", r.addr, args=("-S",))
        r.close()
        mj.check(rc != 0, "a client whose stream got a forged message fails (connection "
                 "dropped)")
        mj.check(mj.wait_for(lambda: mj.log_has(d.log, "a TLS record did not verify")),
                 "aggmgr drops the connection: a TLS record did not verify")
        line = state_line(d.addr)
        mj.check(line.startswith("manager: 0 jobs"), "and admitted nothing (%s)" % line)

        # 3. one byte of the client's first message flipped
        before = open(d.log).read().count("a TLS record did not verify")
        r = Relay(d.addr, "flip")
        rc, out = tool("agg_info", r.addr, args=("-S",))
        r.close()
        mj.check(rc != 0, "a client whose message was altered on the way fails")
        mj.check(mj.wait_for(lambda: open(d.log).read().count("a TLS record did not verify")
                             > before), "aggmgr drops it: the record did not verify")

        # 4. no secret, another secret
        rc, out = tool("agg_info", d.addr, secret=None, args=("-S",))
        mj.check(rc != 0, "a local client without the secret is refused")
        mj.check(mj.wait_for(lambda: mj.log_has(d.log, "it speaks plain, and this manager "
                                                       "holds a shared secret")),
                 "and the log says it spoke plain")
        rc, out = tool("agg_info", d.addr, secret="another secret", args=("-S",))
        mj.check(rc != 0 and "wrong shared secret" in out,
                 "a client with another secret is refused and says so (%s)" %
                 out.strip().splitlines()[-1] if out.strip() else "")
        mj.check(mj.wait_for(lambda: mj.log_has(d.log, "wrong shared secret")),
                 "and the log says so")
        line = state_line(d.addr)
        mj.check(line.startswith("manager: 0 jobs"), "the manager still serves the secret's "
                 "holders (%s)" % line)
    finally:
        d.stop()
    return mj.verdict()


if __name__ == "__main__":
    sys.exit(main())
