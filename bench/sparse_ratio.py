#!/usr/bin/env python3
"""Dense ÷ sparse allreduce time, measured in pairs so that other work on the machine
cancels out.

bench/suite.py times each case once, one after the other: on a machine shared with other
work a load change between the dense case and the sparse one moves their ratio by 20-30 %
(docs/benchmarks.md). Here one network per target runs dense and sparse calls alternately
(dense, sparse, dense, sparse, ...: the same job size, workers and slots, the suite's
tensors and timing: an untimed warm-up, then timed calls, each as long as its slowest rank,
the best kept); each dense run is divided by the sparse run right after it, and the median
of those pair ratios is reported next to best dense ÷ best sparse.

    python bench/sparse_ratio.py [--targets softswitch,simple_switch_grpc] [--pairs 5]
                                 [--density 0.1] [--overlap shared|independent]
                                 [--size 1048576] [--slots N] [--json FILE]

(It replaces bench/sparse_speedup.py, which timed dense and then each density once, with its
own copy of the suite's slowest-rank timing.)

Needs root and Debian's mininet (as bench/suite.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import suite  # beside this script: the suite's cases, tensors and runner
from p4net import demo
from p4reduce.target import default_slots


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="softswitch,simple_switch_grpc")
    ap.add_argument("--pairs", type=int, default=5, help="dense/sparse pairs per target")
    ap.add_argument("--density", type=float, default=0.1, help="block density")
    ap.add_argument(
        "--overlap",
        choices=["shared", "independent"],
        default="shared",
        help="the same non-zero blocks on every worker, or drawn per worker",
    )
    ap.add_argument("--size", type=int, default=suite.M, help="float32 values per worker")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slots", type=int, default=None, help="default: the target's")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.pairs < 1 or not 0 < a.density < 1 or a.size < 1 or not 1 <= a.workers <= 32:
        ap.error("--pairs >= 1, 0 < --density < 1, --size >= 1, 1 <= --workers <= 32")
    out: dict = {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "targets": {}}
    for target in a.targets.split(","):
        slots = default_slots(target) if a.slots is None else a.slots
        dense = suite.Case(
            target, "p4reduce", a.workers, a.size, "dense", 1.0, suite.repeats(a.size, target)
        )
        sparse = suite.Case(
            target,
            "p4reduce",
            a.workers,
            a.size,
            a.overlap,
            a.density,
            suite.repeats(a.size, target, a.density),
        )
        inputs = {c.pattern: suite.make_inputs(c) for c in (dense, sparse)}
        pairs = []
        load = [os.getloadavg()[0]]
        with demo.DemoNetwork(target, a.workers) as net:
            for i in range(a.pairs):
                row = {}
                for c in (dense, sparse):
                    r = suite.run_p4reduce(net, c, inputs[c.pattern], slots)
                    if not r.ok:
                        print(f"{c.label()}: FAILED: {r.error}", file=sys.stderr)
                        return 1
                    row[c.pattern] = r.seconds
                    row[f"{c.pattern}_retransmissions"] = r.retransmissions
                row["ratio"] = row["dense"] / row[a.overlap]
                pairs.append(row)
                print(
                    f"[{time.strftime('%H:%M:%S')}] {target} pair {i + 1}/{a.pairs}: dense "
                    f"{row['dense']:.3f} s, {a.density:g} {a.overlap} {row[a.overlap]:.3f} s, "
                    f"ratio {row['ratio']:.2f} (load {os.getloadavg()[0]:.1f})",
                    file=sys.stderr,
                )
        load.append(os.getloadavg()[0])
        ratios = [p["ratio"] for p in pairs]
        best = min(p["dense"] for p in pairs) / min(p[a.overlap] for p in pairs)
        out["targets"][target] = {
            "pairs": pairs,
            "load": load,
            "slots": slots,
        }
        print(
            f"{target}: dense ÷ {a.density:g} {a.overlap}, {a.workers} workers, "
            f"{a.size:,} float32, "
            f"{slots} slots: median of {len(pairs)} pair ratios "
            f"{np.median(ratios):.2f} "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f}); best ÷ best {best:.2f}; load "
            f"average {load[0]:.1f} before, {load[1]:.1f} after"
        )
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
