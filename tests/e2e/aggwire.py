"""aggmgr's control protocol, as the e2e scripts speak it to him
(common/include/agg/wire.h: a 16-byte big-endian header, magic "AGGM",
version, type, body length, txid; HELLO's body: kind, pid, a 64-byte host
name)."""
import os
import re
import struct


def wire_version():
    """The version these sources speak, read where it is declared."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "../../common/include/agg/wire.h")) as f:
        return int(re.search(r"#define AGG_WIRE_VERSION\s+(\d+)", f.read()).group(1))


MAGIC, VERSION, HELLO, HELLO_REPLY, TOOL = 0x4147474D, wire_version(), 1, 2, 3


def hello(txid, name=b"e2e"):
    """A HELLO request from a tool named `name`."""
    body = struct.pack(">II64s", TOOL, 4242, name)
    return struct.pack(">IHHII", MAGIC, VERSION, HELLO, len(body), txid) + body
