#!/usr/bin/env python3
"""A silent job of a fabric in the leaf role and at the spine alone, interleaved (Mininet).

Not part of `make bench`: a question at hand. A small fabric's silent job (at most 32
ranks) could run either way (`p4reduce.fabric.Placement.silent_aggregation` chooses):
which is faster? This runs `bench/fabric.py`'s sparse Mininet job (8 int32 ranks on 2
leaves, each rank's own 10 % of the blocks non-zero, lossless, 64 values per block or
`--block-values`) in silent rounds both ways, one after the other `--pairs` times, the
placement made to answer each role in turn (for this process only: the what-if the
controller cannot be asked for). Per run: the median call, the packets a rank sent per
call (its worker's count, the mean over ranks), the frames each uplink carried each way,
and whether every sum was exact. Needs root (Mininet).

    .venv/bin/python bench/silent_roles.py [--target softswitch] [--pairs 3] [--values 20000]
                                           [--block-values K]
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator

import fabric  # beside this script
from p4reduce.fabric import AT_SPINE_ALONE, IN_LEAF_ROLE, Placement

ROLES = ("spine alone", "leaf role")


@contextlib.contextmanager
def placed_in(role: str) -> Iterator[None]:
    """Silent jobs created in the block are placed in `role` whatever their size."""
    kept = Placement.silent_aggregation
    where = AT_SPINE_ALONE if role == "spine alone" else IN_LEAF_ROLE

    def placed(self: Placement, block_values: int) -> str:
        return where

    Placement.silent_aggregation = placed  # type: ignore[method-assign]
    try:
        yield
    finally:
        Placement.silent_aggregation = kept  # type: ignore[method-assign]


def one_run(target: str, values: int, role: str, block_values: int | None) -> dict:
    """The sparse job in silent rounds, placed in `role` (fabric.sparse_runs' figures)."""
    with placed_in(role):
        (row,) = fabric.sparse_runs(
            target, values, fabric.MININET_CALLS, modes=("silent",), block_values=block_values
        )
    return {"role": role, **row}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="softswitch", help="switch kind (p4reduce.target)")
    ap.add_argument("--pairs", type=int, default=3, help="runs of each role, interleaved")
    ap.add_argument("--values", type=int, default=20_000, help="int32 values per rank")
    ap.add_argument("--block-values", type=int, default=None, help="values per block")
    args = ap.parse_args(argv)
    for _ in range(args.pairs):
        for role in ROLES:
            r = one_run(args.target, args.values, role, args.block_values)
            print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
