#!/usr/bin/env python3
"""Sparse vs dense allreduce on the same switch: the headline measurement.

Runs the full system (Mininet hosts, P4 switch, controller, hostlib workers) on one
network, first dense, then at the given block densities, with the same tensor size and
workers, and reports the time of the slowest worker, the speedup over dense and the bytes
on the wire. "shared" sparsity puts the non-zero blocks at the same places on every worker
(the case the switch can exploit fully: rounds = non-zero blocks + 1 per slot); with
"independent" sparsity the union of the workers' blocks is what gets aggregated.

    python bench/sparse_speedup.py --workers 4 --size 262144 --densities 0.1 0.01
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from demo_loader import load_demo  # noqa: E402  (the one way to import mininet/demo.py)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--size", type=int, default=262144)
    ap.add_argument("--densities", type=float, nargs="+", default=[0.1, 0.01])
    ap.add_argument("--overlap", nargs="+", default=["shared", "independent"])
    ap.add_argument("--slots", type=int, default=None, help="slots per job (default: the target's)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--target", default="auto")
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed allreduces per run (after an untimed warm-up); best is kept",
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    demo = load_demo()
    base = demo.Options(
        workers=args.workers,
        size=args.size,
        dtype=args.dtype,
        target=args.target,
        slots=args.slots,
        deadline=600.0,
        quiet=True,
        repeat=args.repeat,
        warmup=True,
    )
    rows = []
    with demo.DemoNetwork(args.target, args.workers) as net:

        def measure(opts):
            s = net.run_jobs(opts)
            bad = [o.error for o in s.outcomes if not (o.ok and o.matched)]
            if bad:
                raise SystemExit(f"a run failed: {bad}")
            # per repeat, the job takes as long as its slowest worker; keep the best repeat
            t = min(max(o.times[i] for o in s.outcomes) for i in range(opts.repeat))
            # wire bytes of one allreduce (the warm-up's one block is negligible)
            wire = sum(o.tx_bytes + o.rx_bytes for o in s.outcomes) / opts.repeat
            return t, wire

        dense_t, dense_wire = measure(replace(base, density=1.0))
        rows.append(
            {
                "density": 1.0,
                "overlap": "-",
                "seconds": dense_t,
                "wire_bytes": dense_wire,
                "speedup": 1.0,
            }
        )
        for overlap in args.overlap:
            for density in args.densities:
                t, wire = measure(replace(base, density=density, overlap=overlap))
                rows.append(
                    {
                        "density": density,
                        "overlap": overlap,
                        "seconds": t,
                        "wire_bytes": wire,
                        "speedup": dense_t / t,
                    }
                )
        target = net.target
    print(
        f"target {target}, {args.workers} workers, {args.size} {args.dtype} values, "
        f"{args.slots} slots, best of {args.repeat}"
    )
    print(
        f"{'density':>8} {'overlap':>12} {'seconds':>9} {'Mvalues/s':>10} {'wire MB':>9} "
        f"{'speedup':>8}"
    )
    for r in rows:
        print(
            f"{r['density']:>8} {r['overlap']:>12} {r['seconds']:9.3f} "
            f"{args.size / r['seconds'] / 1e6:10.3f} {r['wire_bytes'] / 1e6:9.2f} "
            f"{r['speedup']:8.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"target": target, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
