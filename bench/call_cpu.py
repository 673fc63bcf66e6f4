#!/usr/bin/env python3
"""CPU seconds of one allreduce in-process: the ranks' threads and the softswitch together.

Not a test: a measurement (no root). The real P4 program on an in-process softswitch
(p4net.harness), a job of --ranks ranks, each a hostlib Worker in its own thread of this
process; after a warm-up call, --calls calls of --values float32 each (dense unless
--density), and the process's CPU time of each call (time.process_time between two
barriers) -- wall time on this shared machine moves with everybody else's load, a call's
CPU much less. With one rank and one slot every round is its own receive turn, so the
figure / rounds is the cost of a turn of the worker plus one packet of the switch.
--density D makes that fraction of the blocks non-zero, the same blocks on every rank
(bench/call_breakdown.py's "same blocks" cases; 0: no non-zero block, the announce rounds
alone): where few blocks carry values, a call's CPU is the per-call and per-turn
bookkeeping, not the data. --pattern independent draws each rank's non-zero blocks on
its own (bench/suite.py's pattern), so silent ranks sit out most rounds of the union.

    python bench/call_cpu.py [--block-values 2048] [--slots 16] [--ranks 4] [--calls 3]
                             [--density 1] [--pattern shared|independent]
                             [--round-mode every_rank|silent]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

from hostlib import Worker
from hostlib.framing import frame_width
from p4net.harness import SwitchSession
from suite import Case, make_inputs


def call_cpu(
    block_values: int,
    slots: int,
    ranks: int,
    values: int,
    calls: int,
    density: float = 1.0,
    round_mode: str = "every_rank",
    pattern: str = "shared",
) -> list[float]:
    """Per timed call, the process's CPU seconds."""
    pattern = "dense" if density >= 1 else pattern
    case = Case(
        "softswitch", "p4reduce", ranks, values, pattern, density, calls, block_values=block_values
    )
    xs = make_inputs(case)
    cpu: list[float] = []
    errors: list[BaseException] = []
    with SwitchSession.inprocess() as sw:
        job = sw.create_job(
            ranks, slots, 7, encoding="packed", block_values=block_values, round_mode=round_mode
        )
        descriptors = sw.descriptors(job)
        barrier = threading.Barrier(ranks)

        def body(r: int) -> None:
            try:
                transport = sw.transport(job.workers[r].port, frame_width(block_values))
                with Worker(descriptors[r], transport=transport, deadline=120) as w:
                    w.allreduce(xs[r][: 2 * block_values])
                    for _ in range(calls):
                        if barrier.wait() == 0:
                            cpu.append(time.process_time())
                        w.allreduce(xs[r])
                        if barrier.wait() == 0:
                            cpu[-1] = time.process_time() - cpu[-1]
            except BaseException as e:  # reported below
                errors.append(e)
                barrier.abort()

        threads = [threading.Thread(target=body, args=(r,)) for r in range(ranks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block-values", type=int, default=2048)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--values", type=int, default=1 << 20)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument(
        "--density", type=float, default=1.0, help="fraction of non-zero blocks (same on all)"
    )
    ap.add_argument(
        "--pattern",
        default="shared",
        choices=("shared", "independent"),
        help="below density 1: the same blocks on every rank, or each rank's own",
    )
    ap.add_argument("--round-mode", default="every_rank", choices=("every_rank", "silent"))
    a = ap.parse_args()
    cpu = call_cpu(
        a.block_values, a.slots, a.ranks, a.values, a.calls, a.density, a.round_mode, a.pattern
    )
    print(
        f"K={a.block_values} slots={a.slots} ranks={a.ranks} values={a.values} "
        f"density={a.density:g} {a.pattern} {a.round_mode}: CPU per call "
        f"{min(cpu) * 1e3:.0f} ms (best of {len(cpu)}; all: "
        + ", ".join(f"{c * 1e3:.0f}" for c in cpu)
        + " ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
