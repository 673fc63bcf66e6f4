#!/usr/bin/env python3
"""A silent job of a fabric in the leaf role and at the spine alone, interleaved (Mininet).

Not part of `make bench`: a question at hand. A fabric's silent job runs in the leaf and
spine roles of silent rounds wherever its blocks are at most 128 values, and at the spine
alone above that (`p4reduce.fabric.Placement.silent_aggregation`). Which is faster for a
small job, that could run either way? This runs `bench/fabric.py`'s sparse Mininet job
(8 int32 ranks on 2 leaves, each rank's own 10 % of the blocks non-zero, lossless, 64
values per block) in silent rounds both ways, one after the other `--pairs` times: at the
spine alone by making the placement answer so (`Placement.silent_aggregation`, for this
process only: the what-if the controller cannot be asked for), and in the leaf role as
created. Per run: the median call, the packets a rank sent per call (its worker's count,
the mean over ranks), the frames each uplink carried each way, and whether every sum was
exact. Needs root (Mininet).

    .venv/bin/python bench/silent_roles.py [--target softswitch] [--pairs 3] [--values 20000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator

import fabric  # beside this script
from p4reduce.fabric import AT_SPINE_ALONE, Placement

ROLES = ("spine alone", "leaf role")


@contextlib.contextmanager
def placed_in(role: str) -> Iterator[None]:
    """Silent jobs created in the block are placed in `role` whatever their size."""
    kept = Placement.silent_aggregation
    if role == "spine alone":

        def at_spine(self: Placement, block_values: int) -> str:
            return AT_SPINE_ALONE

        Placement.silent_aggregation = at_spine  # type: ignore[method-assign]
    try:
        yield
    finally:
        Placement.silent_aggregation = kept  # type: ignore[method-assign]


def one_run(target: str, values: int, role: str) -> dict:
    """The sparse job in silent rounds, placed in `role` (fabric.sparse_runs' figures)."""
    with placed_in(role):
        (row,) = fabric.sparse_runs(target, values, fabric.MININET_CALLS, modes=("silent",))
    return {"role": role, **row}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="softswitch", help="switch kind (p4reduce.target)")
    ap.add_argument("--pairs", type=int, default=3, help="runs of each role, interleaved")
    ap.add_argument("--values", type=int, default=20_000, help="int32 values per rank")
    args = ap.parse_args(argv)
    for _ in range(args.pairs):
        for role in ROLES:
            r = one_run(args.target, args.values, role)
            print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
