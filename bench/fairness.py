#!/usr/bin/env python3
"""Two jobs on one switch: does each get a fair share, whatever their slot counts?

For every --pairs A:B (slot counts), on one Mininet network (P4 switch, controller,
hostlib worker processes, --workers ranks per job):

1. **Alone**: job A runs --repeat timed calls by itself, then job B; a call's time is its
   slowest worker's, the mean is kept (its inverse is the job's throughput).
2. **Together**: both jobs at once, each with as many calls as fill --seconds alone, so
   that they overlap for the whole run. A job's calls that *began* while the other job
   still ran are its calls "together"; their mean is compared with its mean alone: the
   share of its solo throughput it kept (docs/reliability.md states the guarantee). The
   slowest of those calls is shown too (a stall hides in a median).

Each job reduces --size float32 values (dense), at least --rounds blocks per slot (a job
of 1 000 slots then has a backlog for the whole run, as a large model's would).

    python bench/fairness.py                                  # softswitch, 16:1000 and 32:32
    python bench/fairness.py --target simple_switch_grpc --pairs 16:1000

Figures and the exact commands: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from p4net import demo

# The share of its solo throughput each of two jobs keeps (docs/reliability.md).
GUARANTEE = 1 / 3


def inputs(workers: int, size: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(size).astype(np.float32) for _ in range(workers)]


def calls(summary, job: int) -> list[tuple[float, float]]:
    """(began, ended) of each timed call of `job`: its first rank's start to its slowest
    rank's end (the workers' monotonic clocks are the host's)."""
    spans = [o.report["spans"] for o in summary.outcomes if o.job == job]
    return [
        (min(s[k][0] for s in spans), max(s[k][1] for s in spans)) for k in range(len(spans[0]))
    ]


def checked(summary) -> None:
    bad = [o.error for o in summary.outcomes if not (o.ok and o.matched)]
    if bad:
        raise SystemExit(f"a run failed: {bad}")


def alone(net, base, slots: int, size: int, repeat: int) -> float:
    """Mean call time of one job by itself."""
    s = net.run_jobs(
        replace(base, jobs=1, job_slots=(slots,), repeat=repeat),
        [inputs(base.workers, size, slots)],
    )
    checked(s)
    return statistics.mean(e - b for b, e in calls(s, s.outcomes[0].job))


def together(net, base, slots, sizes, repeats) -> list[tuple[float, float]]:
    """Mean and longest time of each job's calls that began while the other job ran."""
    s = net.run_jobs(
        replace(base, jobs=2, job_slots=slots, job_repeats=repeats),
        [inputs(base.workers, n, k) for n, k in zip(sizes, slots)],
    )
    checked(s)
    jobs = sorted({o.job for o in s.outcomes})
    spans = [calls(s, j) for j in jobs]
    ends = [sp[-1][1] for sp in spans]
    out = []
    for k, sp in enumerate(spans):
        other_end = ends[1 - k]
        during = [e - b for b, e in sp if b < other_end] or [sp[0][1] - sp[0][0]]
        out.append((statistics.mean(during), max(during)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="softswitch")
    ap.add_argument("--workers", type=int, default=2, help="ranks per job")
    ap.add_argument("--size", type=int, default=50_000, help="float32 values per call")
    ap.add_argument("--pairs", nargs="+", default=["16:1000", "32:32"], help="slots A:B")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls per job alone")
    ap.add_argument("--seconds", type=float, default=8.0, help="length of a run together")
    ap.add_argument("--rounds", type=int, default=16, help="least blocks per slot")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    base = demo.Options(
        workers=args.workers,
        target=args.target,
        dtype="float32",
        density=1.0,
        deadline=600.0,
        quiet=True,
        warmup=True,
    )
    rows = []
    with demo.STOP.installed(), demo.DemoNetwork(args.target, 2 * args.workers) as net:
        for pair in args.pairs:
            slots = tuple(int(x) for x in pair.split(":"))
            sizes = tuple(max(args.size, args.rounds * 64 * k) for k in slots)
            solo = [alone(net, base, k, n, args.repeat) for k, n in zip(slots, sizes)]
            repeats = tuple(max(2, math.ceil(args.seconds / t)) for t in solo)
            both = together(net, base, slots, sizes, repeats)
            for k in range(2):
                rows.append(
                    {
                        "pair": pair,
                        "slots": slots[k],
                        "values": sizes[k],
                        "alone": solo[k],
                        "together": both[k][0],
                        "slowest": both[k][1],
                        "share": solo[k] / both[k][0],
                    }
                )
                print(
                    f"{pair} job {slots[k]} slots: alone {solo[k]:.3f} s, together "
                    f"{both[k][0]:.3f} s (slowest {both[k][1]:.3f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        target = net.kind
    print(
        f"target {target}, {args.workers} workers per job, float32 dense; mean call "
        f"time (slowest worker), share = alone / together (guarantee >= {GUARANTEE:.2f})"
    )
    print(
        f"{'pair':>9} {'slots':>6} {'values':>8} {'alone s':>8} {'together s':>10} "
        f"{'slowest s':>9} {'share':>6} {'holds':>6}"
    )
    for r in rows:
        holds = "yes" if r["share"] >= GUARANTEE else "NO"
        print(
            f"{r['pair']:>9} {r['slots']:6} {r['values']:8} {r['alone']:8.3f} "
            f"{r['together']:10.3f} {r['slowest']:9.3f} {r['share']:6.2f} {holds:>6}"
        )
    if args.json:
        args.json.write_text(json.dumps({"target": target, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
