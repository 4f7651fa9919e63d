#!/usr/bin/env python3
"""Bad peers on aggmgr's control port, and a real peer served beside them.

    mgr_limits.py HOST:PORT

1. 1,100 connections that say nothing (more than aggmgr's 1,024): a HELLO
   from a new peer is answered anyway (the quietest that hold nothing make
   room), and after 10 s aggmgr has dropped the silent ones that remain.
2. 100 peers that each announce a 1 MiB message and send 10 bytes of it:
   aggmgr never buffers more than its 64 MiB budget (its resident memory
   stays under 200 MB), drops what would exceed it at once and the rest
   after 10 s, and answers a real HELLO meanwhile.
Prints what happened; exits 0 when all held.
"""
import resource
import socket
import struct
import sys
import time

from aggwire import HELLO, HELLO_REPLY, MAGIC, VERSION, hello


def answered(addr, what):
    """A HELLO from a fresh peer gets its reply within 5 s."""
    s = socket.create_connection(addr, timeout=5)
    s.sendall(hello(7, b"limits"))
    hdr = b""
    while len(hdr) < 16:
        chunk = s.recv(16 - len(hdr))
        if not chunk:
            print(f"mgr_limits: {what}: aggmgr closed the real peer's connection")
            return False
        hdr += chunk
    magic, _, mtype, _, txid = struct.unpack(">IHHII", hdr)
    s.close()
    ok = magic == MAGIC and mtype == HELLO_REPLY and txid == 7
    print(f"mgr_limits: {what}: real peer {'answered' if ok else 'got garbage'}")
    return ok


def closed_by_peer(s):
    s.settimeout(0)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    mgr_pid = int(sys.argv[2])
    addr = (host, int(port))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    ok = True

    silent = []
    for _ in range(1100):
        silent.append(socket.create_connection(addr, timeout=5))
    time.sleep(1)
    ok &= answered(addr, "1,100 silent connections")
    time.sleep(11)
    gone = sum(closed_by_peer(s) for s in silent)
    print(f"mgr_limits: {gone} of 1100 silent connections dropped after 12 s")
    ok &= gone == len(silent)
    for s in silent:
        s.close()

    slow = []
    for i in range(100):
        s = socket.create_connection(addr, timeout=5)
        s.sendall(struct.pack(">IHHII", MAGIC, VERSION, HELLO, 1 << 20, i) + b"x" * 10)
        slow.append(s)
    time.sleep(1)
    rss = rss_mb(mgr_pid)
    print(f"mgr_limits: aggmgr holds {rss:.0f} MB with 100 unfinished 1 MiB messages")
    ok &= 0 < rss < 200
    early = sum(closed_by_peer(s) for s in slow)
    print(f"mgr_limits: {early} of 100 dropped at once (past the receive budget)")
    ok &= early > 0
    ok &= answered(addr, "100 unfinished messages")
    time.sleep(11)
    gone = sum(closed_by_peer(s) for s in slow)
    print(f"mgr_limits: {gone} of 100 dropped after 12 s")
    ok &= gone == len(slow)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
