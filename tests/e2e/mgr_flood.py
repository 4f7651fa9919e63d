#!/usr/bin/env python3
"""A peer of aggmgr that asks and never reads the answers, and one that asks
beside it: aggmgr must answer the second at once (the first's answers wait
in its queue), and drop the first once its socket took nothing for a while.

    mgr_flood.py HOST:PORT

Speaks the control protocol (common/include/agg/wire.h: a 16-byte
big-endian header, magic "AGGM", version, type, body length, txid) with
HELLO requests (type 1; body: kind, pid, a 64-byte host name). Exits 0 when
the second peer was answered within 5 s and the first was dropped within
20 s; prints what happened either way.
"""
import socket
import struct
import sys
import time

from aggwire import HELLO, HELLO_REPLY, MAGIC, VERSION, hello


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    addr = (host, int(port))
    flood = socket.socket()
    flood.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    flood.connect(addr)
    flood.settimeout(10)
    # 9.6 MB of answers: past the socket buffers
    batch = b"".join(hello(i + 1, b"flood") for i in range(1000))
    sent = 0
    try:
        for _ in range(300):
            flood.sendall(batch)
            sent += 1000
    except OSError as e:
        print(f"flood: aggmgr stopped taking requests after {sent}: {e}")
    print(f"flood: {sent} requests sent, no answer read")

    other = socket.create_connection(addr, timeout=5)
    t0 = time.monotonic()
    other.sendall(hello(7, b"flood"))
    rep = b""
    while len(rep) < 32:
        chunk = other.recv(32 - len(rep))
        if not chunk:
            break
        rep += chunk
    magic, _, rtype, length, txid = struct.unpack(">IHHII", rep[:16])
    status = struct.unpack(">i", rep[16:20])[0] if len(rep) >= 20 else None
    print(f"other: answered in {time.monotonic() - t0:.3f} s (type {rtype}, txid {txid}, "
          f"status {status})")
    if magic != MAGIC or rtype != HELLO_REPLY or txid != 7 or status != 0:
        print("other: not the answer to its HELLO")
        return 1

    # the flooder reads nothing: aggmgr lets it go
    deadline = time.monotonic() + 20
    flood.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            flood.sendall(hello(1))
        except OSError as e:
            print(f"flood: dropped by aggmgr ({e})")
            return 0
        time.sleep(0.1)
    print("flood: still connected after 20 s")
    return 1


if __name__ == "__main__":
    sys.exit(main())
