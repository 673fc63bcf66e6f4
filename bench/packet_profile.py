#!/usr/bin/env python3
"""Where a softswitch packet's time goes: one real call's frames, replayed and profiled.

Not a test: a measurement (no root). One allreduce of bench/suite.py's inputs runs on an
in-process softswitch with the real P4 program (p4net.harness), 4 hostlib Workers in
threads; every frame the switch takes in is recorded with its port. The frames are then
replayed, in order, into fresh switches with the same job (the same state transitions:
the replay's outputs are the call's), straight into `Switch.process`:

* thread CPU per packet in (best of --repeat replays; a multicast result's copies are
  part of the packet that completes the round), and a hash of everything that came out,
  so that two interpreters can be compared on the same packets;
* with --split, one more replay under cProfile, its own time grouped by what it is: the
  P4 program's generated code (parser states, control nodes, actions, deparser and
  checksums) against the interpreter's packet walk (softswitch/interp/pipeline.py:
  PHV copies, the node loop, metadata), its wide values (softswitch/interp/wide.py) and
  the Switch/Device wrappers, and the builtins (int.from_bytes / to_bytes of wide fields,
  numpy's calls on their limbs).

    python bench/packet_profile.py [--case dense:1] [--block-values 64]
                                   [--round-mode every_rank] [--encoding packed]
                                   [--repeat 3] [--split]

Cases are bench/suite.py's patterns: dense:1, shared:0.1, independent:0.1, zipf:0.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import pstats
import sys
import threading
import time

from hostlib.worker import Worker
from p4net.harness import SwitchSession, record_ingress
from p4reduce.job import Job
from suite import M, Case, make_inputs

WORKERS = 4
SLOTS = 32
JOB = 7


def create_job(session: SwitchSession, case: Case) -> Job:
    """`case`'s job on the session's switch (the same for the capture and each replay)."""
    return session.create_job(
        WORKERS,
        SLOTS,
        JOB,
        encoding=case.encoding,
        block_values=case.block_values,
        round_mode=case.round_mode,
    )


def capture(case: Case) -> list[tuple[int, bytes]]:
    """(port, frame) of every frame the switch took in during one call of `case`."""
    inputs = make_inputs(case)
    with SwitchSession.inprocess(ports=WORKERS) as session, record_ingress(session) as frames:
        job = create_job(session, case)
        workers = [
            Worker(d, transport=session.transport(w.port), deadline=120.0)
            for d, w in zip(session.descriptors(job), job.workers)
        ]
        threads = [threading.Thread(target=w.allreduce, args=(x,)) for w, x in zip(workers, inputs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for w in workers:
            w.close()
    return frames


def replay(
    case: Case, frames: list[tuple[int, bytes]], prof: cProfile.Profile | None = None
) -> tuple[float, str]:
    """Thread CPU seconds to run `frames` through a fresh switch with the same job, and a
    hash of its outputs (ports and bytes); `prof` profiles the frames' run only."""
    with SwitchSession.inprocess(ports=WORKERS) as session:
        create_job(session, case)
        switch = session.device.active.switch
        outs = []
        if prof is not None:
            prof.enable()
        t0 = time.thread_time()
        for port, frame in frames:
            outs.append(switch.process(port, frame))
        cpu = time.thread_time() - t0
        if prof is not None:
            prof.disable()
    digest = hashlib.sha256()
    for out in outs:
        for port, frame in out:
            digest.update(port.to_bytes(2, "big") + frame)
    return cpu, digest.hexdigest()[:16]


def part(filename: str, name: str) -> str | None:
    """What a profiled function is: a part of the program, of the interpreter, or None."""
    if filename == "<p4-bmv2-json>":
        if name.startswith("S"):
            return "program: parser states"
        if name.startswith("N"):
            return "program: control nodes"
        if name.startswith("A"):
            return "program: actions"
        return "program: deparser and checksums"
    if filename.endswith("softswitch/interp/hashes.py"):
        return "program: deparser and checksums"
    if filename.endswith("softswitch/interp/wide.py"):
        return "interpreter: wide values (numpy limbs)"
    if filename.endswith("softswitch/interp/pipeline.py"):
        return "interpreter: packet walk"
    if filename.endswith(("softswitch/switch.py", "softswitch/p4rt/device.py")):
        return "interpreter: Switch and Device"
    if filename == "~":
        return "builtins (from_bytes / to_bytes, numpy, ...)"
    return None  # this script's loop


def split(case: Case, frames: list[tuple[int, bytes]]) -> dict[str, float]:
    """Share of the replay's profiled own time per part (of what `part` names)."""
    prof = cProfile.Profile(time.thread_time)
    replay(case, frames, prof)
    shares: dict[str, float] = {}
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    for (filename, _line, name), (_cc, _nc, own, _cum, _callers) in stats.items():
        what = part(filename, name)
        if what is not None:
            shares[what] = shares.get(what, 0.0) + own
    total = sum(shares.values()) or 1.0
    return {k: v / total for k, v in sorted(shares.items(), key=lambda kv: -kv[1])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="dense:1", help="PATTERN:DENSITY (bench/suite.py's)")
    ap.add_argument("--block-values", type=int, default=64)
    ap.add_argument("--round-mode", default="every_rank", choices=["every_rank", "silent"])
    ap.add_argument("--encoding", default="packed", choices=["packed", "lanes"])
    ap.add_argument("--repeat", type=int, default=3, help="replays; the fastest is kept")
    ap.add_argument("--split", action="store_true", help="also profile one replay by part")
    args = ap.parse_args(argv)
    pattern, _, density = args.case.partition(":")
    case = Case(
        "softswitch",
        "p4reduce",
        WORKERS,
        M,
        pattern,
        float(density or 1.0),
        1,
        encoding=args.encoding,
        block_values=args.block_values,
        round_mode=args.round_mode,
    )
    frames = capture(case)
    runs = [replay(case, frames) for _ in range(args.repeat)]
    digests = {d for _, d in runs}
    best = min(cpu for cpu, _ in runs)
    print(
        f"{case.label()}: {len(frames)} packets in, {best * 1e6 / len(frames):.1f} us CPU per "
        f"packet (best of {args.repeat}), outputs {' '.join(sorted(digests))}"
    )
    if len(digests) != 1:
        print("replays differ: the switch is not deterministic on these frames", file=sys.stderr)
        return 1
    if args.split:
        for what, share in split(case, frames).items():
            print(f"  {what:52s} {100 * share:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
