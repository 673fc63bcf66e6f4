#!/usr/bin/env python3
"""The window a rank needs in flight: p4reduce calls on jobs of several slot counts.

Not a test: a measurement, run as root with Debian's mininet. One Mininet network per
target (bench/suite.py's, as `make bench` runs it), 4 ranks, 1 M float32; for each block
size and slot count a dense call and a 10 % same-blocks call (bench/suite.py's inputs and
runner), pass after pass, each case's best kept. What hostlib.slots.slots_for_call's
BUSY_SLOTS is chosen from (docs/hostlib.md, "Slots per call").

    python bench/slot_window.py [--targets softswitch,simple_switch_grpc]
                                [--block-values 2048 4096] [--slots 64 16 8 4]
                                [--passes 2] [--json build/bench/slot_window.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import suite

PATTERNS = (("dense", 1.0), ("shared", 0.1))


def measure(target: str, block_values: list[int], slots: list[int], passes: int) -> dict:
    """{(K, slots, pattern): best seconds} on one network of `target`."""
    from p4net import demo

    best: dict[tuple[int, int, str], float] = {}
    with demo.DemoNetwork(target, 4) as net:
        for _ in range(passes):
            for k in block_values:
                for s in slots:
                    for pattern, d in PATTERNS:
                        rep = suite.repeats(suite.M, target, d)
                        c = suite.Case(
                            target, "p4reduce", 4, suite.M, pattern, d, rep, block_values=k
                        )
                        r = suite.run_p4reduce(net, c, suite.make_inputs(c), slots=s)
                        seconds = r.seconds if r.ok else float("inf")
                        key = (k, s, pattern)
                        best[key] = min(best.get(key, float("inf")), seconds)
                        print(f"{target} K={k} slots={s} {pattern}: {seconds:.4f} s", flush=True)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=None, help="default: softswitch and, if installed, bmv2")
    ap.add_argument("--block-values", type=int, nargs="+", default=[2048, 4096])
    ap.add_argument("--slots", type=int, nargs="+", default=[64, 16, 8, 4])
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    targets = (
        args.targets.split(",")
        if args.targets
        else ["softswitch"] + (["simple_switch_grpc"] if shutil.which("simple_switch_grpc") else [])
    )
    rows = {}
    for target in targets:
        for (k, s, pattern), seconds in measure(
            target, args.block_values, args.slots, args.passes
        ).items():
            rows[f"{target} K={k} slots={s} {pattern}"] = seconds
    print("best of each:")
    for name, seconds in rows.items():
        print(f"  {name:48s} {seconds:.4f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
