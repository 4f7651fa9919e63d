#!/usr/bin/env python3
"""Results of the collectives the shim intercepts, called through mpi4py.

Buffer calls (numpy arrays when numpy is installed, else array.array):
Allreduce and Iallreduce (requests completed in reverse order),
Reduce (every root, in place at the root), Bcast (every root), Barrier,
Allgather and Reduce_scatter_block (both also in place), over the integer,
floating and C bool types with every predefined op valid for them; object
calls: allreduce, reduce, bcast, allgather, barrier. On COMM_WORLD, a split
communicator, one in reverse rank order and COMM_SELF. Every rank computes
the expected values itself; the totals travel point to point.

    coll_check.py [-m MAXCOUNT] [-q] [-v] [--thread-level LEVEL]

--thread-level sets mpi4py.rc.thread_level before MPI_Init_thread; by
default mpi4py asks for MPI_THREAD_MULTIPLE, as most mpi4py programs do. Prints "coll_check.py: N passed, M failed" on rank 0
and exits non-zero on every rank when anything failed.
"""
import argparse
import sys

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("-m", type=int, default=65536, metavar="MAXCOUNT", help="largest count")
ap.add_argument("-q", action="store_true", help="only failures and the final line")
ap.add_argument("-v", action="store_true", help="every failure, not only the first few")
ap.add_argument("--thread-level", choices=["single", "funneled", "serialized", "multiple"],
                help="what mpi4py asks MPI_Init_thread for (default: mpi4py's, multiple)")
args = ap.parse_args()

import mpi4py  # noqa: E402

if args.thread_level:
    mpi4py.rc.thread_level = args.thread_level
from mpi4py import MPI  # noqa: E402

try:
    import numpy as np
except ImportError:  # array.array buffers, the same checks
    np = None
    import array

WORLD = MPI.COMM_WORLD
ME = WORLD.Get_rank()
MAX_REPORTS = 8
checks = 0
failures = 0

# name, array typecode, MPI datatype, kind (s signed, u unsigned, f float, b bool), bits
TYPES = [
    ("int8", "b", MPI.INT8_T, "s", 8),
    ("uint8", "B", MPI.UINT8_T, "u", 8),
    ("signed_char", "b", MPI.SIGNED_CHAR, "s", 8),
    ("int16", "h", MPI.INT16_T, "s", 16),
    ("uint16", "H", MPI.UINT16_T, "u", 16),
    ("int32", "i", MPI.INT32_T, "s", 32),
    ("uint32", "I", MPI.UINT32_T, "u", 32),
    ("int", "i", MPI.INT, "s", 32),
    ("int64", "q", MPI.INT64_T, "s", 64),
    ("uint64", "Q", MPI.UINT64_T, "u", 64),
    ("long", "l", MPI.LONG, "s", 64),
    ("float", "f", MPI.FLOAT, "f", 32),
    ("double", "d", MPI.DOUBLE, "f", 64),
    ("c_bool", "?", MPI.C_BOOL, "b", 8),
]
OPS = {
    "sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX,
    "land": MPI.LAND, "lor": MPI.LOR, "lxor": MPI.LXOR,
    "band": MPI.BAND, "bor": MPI.BOR, "bxor": MPI.BXOR,
}
VALID = {
    "s": list(OPS), "u": list(OPS),
    "f": ["sum", "prod", "min", "max"],
    "b": ["land", "lor", "lxor"],
}
M64 = (1 << 64) - 1


def fail(msg):
    global failures
    failures += 1
    if failures <= MAX_REPORTS or args.v:
        sys.stderr.write("coll_check.py: FAIL rank %d: %s\n" % (ME, msg))
        sys.stderr.flush()


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def wrap(v, kind, bits):
    """v as the C type of that kind and width holds it."""
    if kind == "b":
        return 1 if v else 0
    if kind == "f":
        return float(v)
    v &= (1 << bits) - 1
    if kind == "s" and v >> (bits - 1):
        v -= 1 << bits
    return v


def value(kind, bits, op, n, r, i, salt):
    """What rank r of n puts at element i: every result exact and in range."""
    h = mix(i ^ (r << 32) ^ (salt << 46))
    sgn = kind in "sf"
    if op == "sum":
        m = min(4, 127 // n) if sgn else min(8, 255 // n)
        v = h % (2 * m + 1) - m if sgn else h % (m + 1)
    elif op == "prod":
        v = 2 if r < 4 and h % 3 == 0 else 1
        if sgn and (h >> 8) % 4 == 0:
            v = -v
    elif op in ("min", "max"):
        v = h % 201 - (100 if sgn else 0)
    elif op in ("land", "lor", "lxor"):
        zero = (h % (2 * n) == 0) == (i % 2 == 0)
        v = 0 if zero else 1 + (h >> 16) % 3
    elif op == "band":
        v = h | mix(h)
    elif op == "bor":
        v = h & mix(h)
    elif op == "bxor":
        v = h
    else:  # a copy
        v = h % 2000001 - 1000000 if kind == "f" else (h & 1 if kind == "b" else h)
    return wrap(v, kind, bits)


def expected(kind, bits, op, n, i, salt):
    e = value(kind, bits, op, n, 0, i, salt)
    for r in range(1, n):
        v = value(kind, bits, op, n, r, i, salt)
        if op == "sum":
            e += v
        elif op == "prod":
            e *= v
        elif op == "min":
            e = min(e, v)
        elif op == "max":
            e = max(e, v)
        elif op == "land":
            e = int(bool(e) and bool(v))
        elif op == "lor":
            e = int(bool(e) or bool(v))
        elif op == "lxor":
            e = int(bool(e) != bool(v))
        elif op == "band":
            e &= v
        elif op == "bor":
            e |= v
        elif op == "bxor":
            e ^= v
    return wrap(e, kind, bits)


def np_dtype(code):
    return np.bool_ if code == "?" else np.dtype(code)


if np is not None:
    U = np.uint64

    def mix_np(x):
        x = x + U(0x9E3779B97F4A7C15)
        x = (x ^ (x >> U(30))) * U(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> U(27))) * U(0x94D049BB133111EB)
        return x ^ (x >> U(31))

    def raw_np(kind, op, n, r, i, salt):
        """value() for the elements i (a uint64 array), before wrap()."""
        h = mix_np(i ^ U((r << 32) ^ (salt << 46)))
        sgn = kind in "sf"
        if op == "sum":
            m = min(4, 127 // n) if sgn else min(8, 255 // n)
            return (h % U(2 * m + 1)).astype(np.int64) - m if sgn else (h % U(m + 1)).astype(np.int64)
        if op == "prod":
            v = np.where((h % U(3) == 0) & (r < 4), 2, 1).astype(np.int64)
            return np.where((h >> U(8)) % U(4) == 0, -v, v) if sgn else v
        if op in ("min", "max"):
            return (h % U(201)).astype(np.int64) - (100 if sgn else 0)
        if op in ("land", "lor", "lxor"):
            zero = (h % U(2 * n) == 0) == (i % U(2) == 0)
            return np.where(zero, 0, 1 + ((h >> U(16)) % U(3)).astype(np.int64))
        if op == "band":
            return h | mix_np(h)
        if op == "bor":
            return h & mix_np(h)
        if op == "bxor":
            return h
        if kind == "f":
            return (h % U(2000001)).astype(np.int64) - 1000000
        return h & U(1) if kind == "b" else h

    def wrap_np(v, kind, code):
        return v != 0 if kind == "b" else v.astype(np_dtype(code))


def gen(t, op, n, r, lo, hi, salt):
    """Rank r's elements lo..hi-1, as a buffer of the type."""
    _name, code, _dt, kind, bits = t
    if np is not None:
        return wrap_np(raw_np(kind, op, n, r, np.arange(lo, hi, dtype=np.uint64), salt), kind, code)
    return make(code, [value(kind, bits, op, n, r, i, salt) for i in range(lo, hi)])


def want(t, op, n, lo, hi, salt):
    """The reduction over n ranks of elements lo..hi-1."""
    _name, code, _dt, kind, bits = t
    if np is None:
        return make(code, [expected(kind, bits, op, n, i, salt) for i in range(lo, hi)])
    i = np.arange(lo, hi, dtype=np.uint64)
    vals = [raw_np(kind, op, n, r, i, salt) for r in range(n)]
    if n == 1:
        return wrap_np(vals[0], kind, code)
    if op in ("land", "lor", "lxor"):
        f = {"land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor}[op]
        e = f.reduce([v != 0 for v in vals]).astype(np.int64)
    else:
        f = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
             "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
        e = f.reduce(vals)
    return wrap_np(e, kind, code)


def make(code, values):
    if np is not None:
        return np.array(values, dtype=np_dtype(code))
    return array.array("B" if code == "?" else code, [int(v) if code == "?" else v for v in values])


def fill(code, n):
    """A receive buffer holding a value no check expects."""
    if np is not None:
        return np.full(n, 0 if code == "?" else (1.5 if code in "fd" else 0x5C), dtype=np_dtype(code))
    return make(code, [0 if code == "?" else (1.5 if code in "fd" else 0x5C)] * n)


def copy(buf):
    return buf.copy() if np is not None else array.array(buf.typecode, buf)


class Comm:
    def __init__(self, comm, name):
        self.comm, self.name = comm, name
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.seq = 0

    def salt(self):
        self.seq += 1
        return self.seq


def compare(what, got, exp):
    """got and exp: buffers of the same type."""
    global checks
    checks += 1
    if np is not None:
        if got.shape == exp.shape and np.array_equal(got, exp):
            return
        got, exp = got.tolist(), exp.tolist()
    else:
        got, exp = list(got), list(exp)
        if got == exp:
            return
    if len(got) != len(exp):
        fail("%s: %d elements, expected %d" % (what, len(got), len(exp)))
        return
    bad = [k for k in range(len(exp)) if got[k] != exp[k]]
    k = bad[0]
    fail("%s: %d of %d elements wrong, first at index %d: got %r, expected %r"
         % (what, len(bad), len(exp), k, got[k], exp[k]))


def check_reductions(c, t, op, count, root, k):
    name, code, dt, _kind, _bits = t
    comm, n, me = c.comm, c.size, c.rank
    tag = "type %s op %s count %d comm %s (size %d)" % (name, op, count, c.name, n)
    mop = OPS[op]

    # Allreduce, out of place and in place
    s = c.salt()
    sb, exp = gen(t, op, n, me, 0, count, s), want(t, op, n, 0, count, s)
    keep, rb = copy(sb), fill(code, count)
    comm.Allreduce([sb, dt], [rb, dt], mop)
    compare("Allreduce " + tag, rb, exp)
    compare("Allreduce send buffer " + tag, sb, keep)
    rb = copy(sb)
    comm.Allreduce(MPI.IN_PLACE, [rb, dt], mop)
    compare("Allreduce in place " + tag, rb, exp)

    # Reduce at one root, in place there on every other call
    rb = fill(code, count)
    if me == root and k % 2:
        rb = copy(sb)
        comm.Reduce(MPI.IN_PLACE, [rb, dt], mop, root)
    else:
        comm.Reduce([sb, dt], [rb, dt] if me == root else None, mop, root)
    if me == root:
        compare("Reduce root %d %s%s" % (root, tag, " in place" if k % 2 else ""), rb, exp)

    # Reduce_scatter_block: block b of the reduction goes to rank b
    s = c.salt()
    sb, exp = gen(t, op, n, me, 0, n * count, s), want(t, op, n, me * count, (me + 1) * count, s)
    if k % 2:
        rb = copy(sb)
        comm.Reduce_scatter_block(MPI.IN_PLACE, [rb, dt], mop)
        compare("Reduce_scatter_block in place " + tag, rb[:count], exp)
    else:
        rb = fill(code, count)
        comm.Reduce_scatter_block([sb, dt], [rb, dt], mop)
        compare("Reduce_scatter_block " + tag, rb, exp)


def check_copies(c, t, count, root):
    name, code, dt, _kind, _bits = t
    comm, n, me = c.comm, c.size, c.rank
    tag = "type %s count %d comm %s (size %d)" % (name, count, c.name, n)

    s = c.salt()
    exp = gen(t, None, n, root, 0, count, s)
    buf = copy(exp) if me == root else fill(code, count)
    comm.Bcast([buf, dt], root)
    compare("Bcast root %d %s" % (root, tag), buf, exp)

    s = c.salt()
    mine = gen(t, None, n, me, 0, count, s)
    exp = make(code, []) if count == 0 else gen(t, None, n, 0, 0, count, s)
    for r in range(1, n):
        exp = exp + gen(t, None, n, r, 0, count, s) if np is None else \
            np.concatenate([exp, gen(t, None, n, r, 0, count, s)])
    rb = fill(code, n * count)
    comm.Allgather([mine, dt], [rb, dt])
    compare("Allgather " + tag, rb, exp)
    rb = fill(code, n * count)
    rb[me * count:(me + 1) * count] = mine
    comm.Allgather(MPI.IN_PLACE, [rb, dt])
    compare("Allgather in place " + tag, rb, exp)


def check_nonblocking(c, count):
    """Iallreduces of several types in flight, completed in reverse order."""
    comm, n, me = c.comm, c.size, c.rank
    pending = []
    for t, op in ((TYPES[5], "sum"), (TYPES[12], "max"), (TYPES[1], "bxor"), (TYPES[8], "prod")):
        name, code, dt, _kind, _bits = t
        s = c.salt()
        sb, rb = gen(t, op, n, me, 0, count, s), fill(code, count)
        req = comm.Iallreduce([sb, dt], [rb, dt], OPS[op])
        # the send buffer stays referenced until the request is complete
        pending.append((req, sb, rb, want(t, op, n, 0, count, s),
                        "Iallreduce type %s op %s count %d comm %s (size %d)"
                        % (name, op, count, c.name, n)))
    MPI.Request.Waitall([p[0] for p in reversed(pending)])
    for _req, _sb, rb, exp, what in pending:
        compare(what, rb, exp)


def check_objects(c):
    """The lowercase calls: pickled objects over MPI_Bcast, MPI_Allgather..."""
    comm, n, me = c.comm, c.size, c.rank
    tag = " comm %s (size %d)" % (c.name, n)

    def same(what, got, exp):
        global checks
        checks += 1
        if got != exp:
            fail("%s%s: got %r, expected %r" % (what, tag, got, exp))

    same("allreduce sum", comm.allreduce(me * 3 + 1, op=MPI.SUM), sum(r * 3 + 1 for r in range(n)))
    same("allreduce max", comm.allreduce((me * 7) % 5, op=MPI.MAX), max((r * 7) % 5 for r in range(n)))
    for root in range(n):
        got = comm.reduce(me * me, op=MPI.SUM, root=root)
        if me == root:
            same("reduce root %d" % root, got, sum(r * r for r in range(n)))
        obj = {"root": root, "list": list(range(root, root + 50)), "text": "x" * (root * 300)}
        same("bcast root %d" % root, comm.bcast(obj if me == root else None, root=root), obj)
    same("allgather", comm.allgather(("rank", me, [me] * me)), [("rank", r, [r] * r) for r in range(n)])
    comm.barrier()
    same("barrier", True, True)


def check_barrier(c):
    global checks
    c.comm.Barrier()
    req = c.comm.Ibarrier()
    req.Wait()
    checks += 1


def run(c, counts):
    n = c.size
    k = 0
    for t in TYPES:
        for op in VALID[t[3]]:
            for count in counts:
                check_reductions(c, t, op, count, k % n, k)
                k += 1
        for count in counts:
            check_copies(c, t, count, k % n)
            k += 1
    check_barrier(c)
    check_objects(c)


def main():
    small = [count for count in (0, 1, 7, 65) if count <= args.m]
    world = Comm(WORLD, "world")
    half = Comm(WORLD.Split(ME % 2, ME), "odd" if ME % 2 else "even")
    rev = Comm(WORLD.Split(0, WORLD.Get_size() - ME), "reversed")
    self_ = Comm(MPI.COMM_SELF, "self")

    run(world, small)
    for c in (half, rev, self_):
        run(c, [count for count in small if count in (1, 65)])
    # larger counts for a few types, in turn on the world and the halves
    for count in (1000, 4097, 65536):
        if count > args.m:
            continue
        for c in (world, half):
            for t, op in ((TYPES[5], "sum"), (TYPES[12], "min"), (TYPES[9], "bxor")):
                check_reductions(c, t, op, count, count % c.size, count)
            check_copies(c, TYPES[12], count, (count // 7) % c.size)
            check_nonblocking(c, count)
    check_nonblocking(world, 3)

    if not args.q and ME == 0:
        levels = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
                  MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}
        print("coll_check.py: %d checks on rank 0, numpy %s, thread level %s"
              % (checks, np.__version__ if np is not None else "absent",
                 levels.get(MPI.Query_thread(), "?")))
    half.comm.Free()
    rev.comm.Free()

    # totals point to point: a broken collective must not hide failures
    if ME == 0:
        tot = [checks, failures]
        for r in range(1, WORLD.Get_size()):
            other = WORLD.recv(source=r, tag=4712)
            tot = [tot[0] + other[0], tot[1] + other[1]]
        for r in range(1, WORLD.Get_size()):
            WORLD.send(tot[1], dest=r, tag=4713)
        print("coll_check.py: %d passed, %d failed" % (tot[0] - tot[1], tot[1]))
        sys.stdout.flush()
        total_failed = tot[1]
    else:
        WORLD.send([checks, failures], dest=0, tag=4712)
        total_failed = WORLD.recv(source=0, tag=4713)
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main())
