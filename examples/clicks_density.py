#!/usr/bin/env python3
"""The click model's gradient block density at several block sizes, over a few training
steps in this process (no network): what p4reduce would send of it at each size.

Why: a block is p4reduce's unit of "zero", so the example's gradient -- rows of 32 values,
two per 64-value block -- gets denser as blocks widen. bench/block_density.py runs this
(it is a script beside the model, so its siblings import without any sys.path edit) and
puts the figures beside the benchmarks' times at each size.

    .venv/bin/python examples/clicks_density.py [--steps 20] [--workers 4] [--sizes 64 256 ...]

Prints JSON: {"steps", "values", "density": {K: [mean over ranks, union]}}. Each step
sums the ranks' gradients exactly (float64, rounded to float32) and takes Adam's step, as
examples/clicks_replay.py's "exact" trajectory does.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

import clicks_replay  # beside this script
from clicks_model import Config


def block_density(grads: list[np.ndarray], k: int) -> tuple[float, float]:
    """(mean over ranks of the non-zero fraction of k-value blocks, the fraction non-zero
    in any rank); the last block padded with zeros."""
    pad = -grads[0].size % k
    nz = [np.pad(g, (0, pad)).reshape(-1, k).any(axis=1) for g in grads]
    return float(np.mean([m.mean() for m in nz])), float(np.logical_or.reduce(nz).mean())


def densities(sizes: list[int], steps: int, workers: int) -> dict:
    t = clicks_replay.start(Config(), workers)
    per_step = []
    for _ in range(steps):
        xs = clicks_replay.rank_gradients(t)
        per_step.append({k: block_density(xs, k) for k in sizes})
        exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
        clicks_replay.step(t, exact.astype(np.float32))
    return {
        "steps": steps,
        "values": int(xs[0].size),
        "density": {
            str(k): [float(np.mean([s[k][i] for s in per_step])) for i in (0, 1)] for k in sizes
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024, 2048])
    args = ap.parse_args(argv)
    print(json.dumps(densities(args.sizes, args.steps, args.workers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
