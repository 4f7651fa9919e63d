#!/usr/bin/env python3
"""aggmgr's accounting across kill -9, as a property: thousands of random job
and group steps, the manager killed at random points, and what it holds
always comes back exactly.

    mgr_journal_prop.py BIN_DIR TMP_DIR [STEPS [SEED]]

A real aggmgr (am_journal, am_journal_max small so that it is rewritten
often) and a real switchsim; clients speak the control protocol as libagg
does. Each step, chosen at random: a job made (1-8 ranks, with or without
SAT trees) or ended, a group made (random members, with or without a SAT
part) or ended. Every few steps (at random) aggmgr is killed with -9:
- between requests: started again, it must hold exactly what it held
  (agg_info's state lines, switch counts and all), and switchsim must
  serve exactly the parts of the groups it holds;
- in the middle of a request (sent, its answer not read): the request may
  or may not have been kept; the next state is taken as it comes.
Every job is then claimed again by its rank 0 (JOB_ATTACH with its key).
At the end every job is ended: the manager holds nothing, every switch count
is 0 and switchsim serves no part: nothing leaked in any restart.
Prints the steps and kills made; exits 0 when every check held.
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mgr_journal as mj  # noqa: E402  (its Peer, Daemons and helpers)

STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
SEED = int(sys.argv[4]) if len(sys.argv) > 4 else int(time.time())


class Job:
    def __init__(self, job_id, key, ranks, sat, peer):
        self.id, self.key, self.ranks, self.sat, self.peer = job_id, key, ranks, sat, peer
        self.groups = []


def try_job_create(peer, ranks, key, flags):
    try:
        return mj.job_create(peer, ranks, key, flags)
    except AssertionError:
        return None  # refused: no adapters left, job limit


def try_group_create(peer, job, members, flags):
    try:
        return mj.group_create(peer, job.id, job.key, members, flags)
    except AssertionError:
        return None  # refused: quota, SAT flows


def expected_parts(text):
    """Parts switchsim serves for the groups in the state text: 1 per group on one
    switchsim, plus 1 for a SAT part (the fabric is one switchsim's)."""
    n = 0
    for line in text.splitlines():
        if line.startswith("  group "):
            n += 1 + (", SAT part of" in line)
    return n


def main():
    rng = random.Random(SEED)
    mj.JOURNAL = os.path.join(mj.TMP, "prop.journal")  # not mgr_journal.py's
    print(f"mgr_journal_prop: {STEPS} steps, seed {SEED}", flush=True)
    d = mj.Daemons()
    try:
        return run(d, rng)
    finally:
        for p in (d.sim, d.mgr):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def reclaim(d, jobs):
    """After a restart: every job's rank 0 claims it on a new connection."""
    for job in list(jobs):
        job.peer.close()
        job.peer = mj.Peer(d.addr)
        st = mj.attach(job.peer, job.id, job.key, 0)
        if st == mj.ERR_NO_JOB:  # made in a request the kill cut short, and not kept
            jobs.remove(job)
            continue
        assert st == mj.OK, ("JOB_ATTACH", job.id, st)


def run(d, rng):
    extra = {"AGG_AM_JOURNAL_MAX": "16384", "AGG_AM_MAX_JOBS": "6"}
    d.start_mgr(extra=extra, tag="prop")
    d.start_sim()
    jobs, kills, cut, made_groups, exact = [], 0, 0, 0, 0
    next_kill = rng.randint(5, 60)
    key = 0x1000
    for step in range(STEPS):
        if step == next_kill:
            next_kill = step + rng.randint(5, 60)
            kills += 1
            mid = rng.random() < 0.3 and jobs
            if mid:
                # a request sent, the manager killed before its answer is read
                job = rng.choice(jobs)
                body = mj.group_ref(job.id, job.groups[0]) if job.groups else None
                if body is not None:
                    job.peer.s.sendall(mj.struct.pack(">IHHII", mj.MAGIC, mj.VERSION,
                                                      mj.GROUP_DESTROY, len(body), 999) + body)
                    job.groups.pop(0)  # kept or not: found out from the state below
                cut += 1
            before = mj.state(d.addr)
            d.kill9()
            d.start_mgr(extra=extra, tag="prop")
            if not mj.check(d.sim_back(), f"kill {kills}: switchsim registers again"):
                return 1
            after = mj.state(d.addr)
            if not mid:
                exact += 1
                if not mj.check(mj.held(after) == mj.held(before),
                                f"kill {kills} (step {step}): the state came back exactly"):
                    print(before, after, sep="\n----\n")
                    return 1
            reclaim(d, jobs)
            # the groups of each job are what the manager holds now
            for job in jobs:
                job.groups = [int(l.split()[1].rstrip(":")) for l in
                              after.split(f"\njob {job.id}:", 1)[1].split("\njob ", 1)[0].splitlines()
                              if l.startswith("  group ")]
            want = expected_parts(after)
            if not mj.check(mj.wait_for(lambda: mj.sim_parts(d.addr) == want),
                            f"kill {kills}: switchsim serves exactly the {want} parts held"):
                return 1
            continue
        r = rng.random()
        if r < 0.15 or not jobs:
            ranks = rng.randint(1, 8)
            key += 1
            peer = mj.Peer(d.addr)
            sat = rng.random() < 0.5
            job_id = try_job_create(peer, ranks, key, mj.JOB_F_SAT if sat else 0)
            if job_id is None:
                peer.close()
            else:
                jobs.append(Job(job_id, key, ranks, sat, peer))
        elif r < 0.25:
            job = jobs.pop(rng.randrange(len(jobs)))
            st = job.peer.status(mj.JOB_DESTROY, mj.struct.pack(">II", job.id, 0))
            if st != mj.OK:
                mj.check(False, f"step {step}: job {job.id} ends ({st})")
                return 1
            job.peer.close()
        elif r < 0.65:
            job = rng.choice(jobs)
            members = rng.sample(range(job.ranks), rng.randint(1, job.ranks))
            flags = mj.GROUP_F_SAT if job.sat and rng.random() < 0.5 else 0
            g = try_group_create(job.peer, job, members, flags)
            if g is not None:
                job.groups.append(g)
                made_groups += 1
        else:
            with_groups = [j for j in jobs if j.groups]
            if not with_groups:
                continue
            job = rng.choice(with_groups)
            g = job.groups.pop(rng.randrange(len(job.groups)))
            st = job.peer.status(mj.GROUP_DESTROY, mj.group_ref(job.id, g))
            if st != mj.OK:
                mj.check(False, f"step {step}: group {g} of job {job.id} ends ({st})")
                return 1
    for job in jobs:
        job.peer.status(mj.JOB_DESTROY, mj.struct.pack(">II", job.id, 0))
        job.peer.close()
    s = mj.state(d.addr)
    ok = mj.check(s.startswith("manager: 0 jobs, 0 groups") and "\nswitch " not in s,
                  "every job ended: every count is back to nothing")
    ok &= mj.check(mj.wait_for(lambda: mj.sim_parts(d.addr) == 0), "switchsim serves no part")
    d.stop()
    print(f"mgr_journal_prop: {STEPS} steps, {made_groups} groups made, {kills} kills "
          f"({exact} between requests: state exact; {cut} in the middle of one), seed {SEED}")
    return 0 if ok and not mj.FAILED else 1


if __name__ == "__main__":
    sys.exit(main())
