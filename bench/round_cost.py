#!/usr/bin/env python3
"""Time and CPU per round, dense against sparse, end to end on Mininet (root).

Why: on a two-core machine shared with other work, a job's seconds say more about the load
than about the code. CPU seconds per round do not: the switch process's (from
/proc/PID/stat) and the worker processes' (getrusage(RUSAGE_CHILDREN) around each run: the
demo reaps them) are summed over the run and divided by the rounds a worker took. A round
that carries SKIPs should cost what a dense round costs; this prints both, per case, next
to the wall time per round of the best call (slowest rank). Worker CPU includes their
start-up (interpreter, numpy), which weighs more in a case with fewer rounds.

    python bench/round_cost.py [--target softswitch] [--size 1048576] [--runs 2]
                               [--cases dense:1 independent:0.1 shared:0.1]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from p4net import demo, topology

TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Cost:
    rounds: float  # per call, per worker
    best_call: float  # seconds, slowest rank
    switch_cpu: float  # seconds over the run (warm-up and every call)
    worker_cpu: float  # seconds, all workers, over the run
    run_rounds: float  # rounds per worker over the run
    retransmissions: int


def process_cpu(pid: int) -> float:
    """utime + stime of a live process, seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_case(demo, net, switch_pid: int, pattern: str, density: float, size: int, repeat: int):
    opts = demo.Options(
        workers=4,
        size=size,
        density=density,
        overlap="independent" if pattern == "independent" else "shared",
        target=net.kind,
        quiet=True,
        repeat=repeat,
        warmup=True,
        deadline=600.0,
    )
    inputs = demo.make_inputs(opts, np.random.default_rng(1))
    w0, s0 = children_cpu(), process_cpu(switch_pid)
    summary = net.run_jobs(opts, inputs=[inputs])
    w1, s1 = children_cpu(), process_cpu(switch_pid)
    bad = [o.rank for o in summary.outcomes if not (o.ok and o.matched)]
    if bad:
        raise RuntimeError(f"{pattern} {density}: ranks {bad} failed or mismatched")
    out = summary.outcomes
    calls = [max(t) for t in zip(*[o.times for o in out])]
    return Cost(
        rounds=float(np.mean([o.report["stats"]["rounds"] for o in out])) / repeat,
        best_call=min(calls),
        switch_cpu=s1 - s0,
        worker_cpu=w1 - w0,
        run_rounds=float(np.mean([o.stats["rounds"] for o in out])),
        retransmissions=sum(o.stats["retransmissions"] for o in out),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="softswitch")
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--runs", type=int, default=2, help="passes over the cases (interleaved)")
    ap.add_argument("--cases", nargs="+", default=["dense:1", "independent:0.1"])
    args = ap.parse_args()
    cases = []
    for spec in args.cases:
        pattern, _, dens = spec.partition(":")
        if pattern not in ("dense", "shared", "independent") or not dens:
            ap.error(f"--cases {spec!r}: expected dense:1, shared:D or independent:D")
        cases.append((pattern, float(dens)))
    if os.geteuid() != 0:
        ap.error("Mininet needs root")
    print(f"{args.target}, 4 workers, {args.size} float32, load {os.getloadavg()[0]:.1f}")
    print("case               rounds  best call  us/round  CPU us/round: switch  workers(4)  retx")
    with demo.DemoNetwork(args.target, 4) as net:
        switch_pid = net.net.get(topology.SWITCH_NAME).runner.process.pid
        for _ in range(args.runs):
            for pattern, density in cases:
                repeat = 1 if pattern == "dense" else 3
                t0 = time.perf_counter()
                c = run_case(demo, net, switch_pid, pattern, density, args.size, repeat)
                print(
                    f"{pattern + ' ' + format(density, 'g'):16s} {c.rounds:8.0f} "
                    f"{c.best_call:9.3f}s {c.best_call / c.rounds * 1e6:9.0f} "
                    f"{c.switch_cpu / c.run_rounds * 1e6:20.0f} "
                    f"{c.worker_cpu / c.run_rounds * 1e6:11.0f} {c.retransmissions:5d}"
                    f"   ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
