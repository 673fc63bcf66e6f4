#!/usr/bin/env python3
"""Packets/s of the switch targets on the p4reduce program (K = 64), same packets for all.

* in-process: softswitch's Switch.process() called directly (no sockets): the interpreter
  alone, on one core.
* over veth: the switch as a process (`python -m softswitch`, and `simple_switch_grpc`
  where it is on PATH) with N veth ports, configured over P4Runtime; this process sends
  DATA rounds for S slots from the N host ends as fast as it can and counts the result
  copies that come back. Rate = packets aggregated per second (results x N / time).

Every packet does the full aggregation path: admission, bitmap, counter, the values (64
register read-add-writes in a `lanes` job, one 2048-bit read-add-write in a `packed` one),
next block; every Nth packet completes a round and is multicast N times. Both encodings are
measured, one after the other, in the same run.

In-process, rounds that carry SKIPs are timed beside dense ones on the same job: rank 0
sends DATA, the other ranks SKIP, so a SKIP completes the round (the switch then writes the
values into the result: a packed job's SKIP adds bias x a constant word, a lanes job's
reads the 64 sums back). The two kinds of round alternate in passes and each keeps its
best pass, so a burst of load elsewhere hits both alike; the script prints SKIP / DATA per
packet and the round with SKIPs / the dense round.

    python bench/softswitch_pps.py [--workers 4] [--rounds 200] [--slots 32]
                                   [--encodings packed,lanes]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from p4net.harness import SwitchSession, TestJob
from p4net.switches import VethSwitch
from p4reduce.target import SIMPLE_SWITCH_GRPC, SOFTSWITCH
from hostlib import protocol as p  # noqa: E402
from p4reduce.wire import packed_bias  # noqa: E402
from hostlib.protocol import MsgType  # noqa: E402

JOB = 9


def frames_for(
    job,
    workers: int,
    slots: int,
    rounds: int,
    packed: bool = False,
    data_ranks: int | None = None,
    first_round: int = 0,
) -> list[list[bytes]]:
    """Per round, the frames of every slot and rank, in the order they are sent (a packed
    job's: FLAG_PACKED and lanes biased by floor((2^31-1)/N), protocol.md section 10).
    Ranks below `data_ranks` (default: all) send DATA, the others SKIP; `first_round`
    continues the slots' version alternation and block numbering of earlier rounds. Each
    round names the slot's next block of its stream, so every round aggregates the block
    the switch chose (a block it did not choose is stale, protocol.md section 8)."""
    rng = np.random.default_rng(0)
    values = rng.integers(-1000, 1000, (workers, p.BLOCK_VALUES))
    flags = p.Flag.PACKED if packed else 0
    if packed:
        values = values + packed_bias(workers)
    data_ranks = workers if data_ranks is None else data_ranks
    out = []
    for r in range(first_round, first_round + rounds):
        rnd = []
        for slot in range(slots):
            for rank in range(workers):
                data = rank < data_ranks
                rnd.append(
                    (
                        rank,
                        job.frame(
                            rank,
                            MsgType.DATA if data else MsgType.SKIP,
                            slot=slot,
                            version=(r + 1) % 2,
                            block=slot + r * slots,
                            next_block=slot + (r + 1) * slots,
                            values=values[rank] if data else None,
                            flags=flags,
                        ),
                    )
                )
        out.append(rnd)
    return out


def in_process(workers: int, slots: int, rounds: int, encoding: str) -> dict[int, float]:
    """The interpreter alone: the job is programmed over P4Runtime by the controller's own
    JobManager (p4net.harness), then frames go straight to Switch.process().
    Packets/s per number of DATA ranks in a round: `workers` (dense) and 1 (the others
    SKIP; the last SKIP completes the round)."""
    with SwitchSession.inprocess(ports=workers) as isw:
        made = isw.create_job(workers, slots, JOB, encoding=encoding)
        job = TestJob(isw, made)  # its frames; they go to Switch.process() below
        return _run_in_process(
            isw.device.active.switch,
            job,
            made.workers,
            workers,
            slots,
            rounds,
            encoding == "packed",
        )


def _run_in_process(
    sw, job, wa, workers: int, slots: int, rounds: int, packed: bool
) -> dict[int, float]:
    # announce round first, then passes of data rounds: dense, then with SKIPs
    flags = p.Flag.PACKED if packed else 0
    for w in wa:
        for slot in range(slots):
            sw.process(
                w.port, job.frame(w.rank, MsgType.ANNOUNCE, slot=slot, next_block=slot, flags=flags)
            )
    kinds = (workers, 1)
    # the kinds alternate round by round (every round continues the slots' versions and
    # blocks), and each kind keeps its median round: a burst of load elsewhere does not
    # land on one kind only
    seconds: dict[int, list[float]] = {k: [] for k in kinds}
    for r in range(rounds):
        for i, k in enumerate(kinds):
            (rnd,) = frames_for(job, workers, slots, 1, packed, k, len(kinds) * r + i)
            plan = [(wa[rank].port, f) for rank, f in rnd]
            start = time.perf_counter()
            out = 0
            for port, frame in plan:
                out += len(sw.process(port, frame))
            seconds[k].append(time.perf_counter() - start)
            assert out == slots * workers, (k, out, slots * workers)
    return {k: slots * workers / float(np.median(t)) for k, t in seconds.items()}


def skip_ratios(pps: dict[int, float], workers: int) -> tuple[float, float]:
    """(SKIP / DATA per packet, round with SKIPs / dense round), in time. A round of 1
    DATA and N-1 SKIPs lasts N/pps[1]; a dense one N/pps[N], i.e. one DATA 1/pps[N]."""
    dense_round, skip_round = workers / pps[workers], workers / pps[1]
    data = dense_round / workers
    skip = (skip_round - data) / (workers - 1)
    return skip / data, skip_round / dense_round


def over_veth(kind: str, workers: int, slots: int, rounds: int, encoding: str) -> float:
    proc = VethSwitch(kind, n_ports=workers).start()
    try:
        sw = SwitchSession(proc)
        packed = encoding == "packed"
        job = sw.add_job(JOB, workers, slot_count=slots, encoding=p.Encoding[encoding.upper()])
        for rank in range(workers):
            for slot in range(slots):
                job.send(
                    rank,
                    MsgType.ANNOUNCE,
                    slot=slot,
                    next_block=slot,
                    flags=p.Flag.PACKED if packed else 0,
                )
        expected_announce = slots
        got = 0
        while got < expected_announce and proc.recv(1, 5.0) is not None:
            got += 1
        proc.drain()
        plan = frames_for(job, workers, slots, rounds, packed)
        # one round of every slot at a time (a window of slots x workers packets): rounds
        # of one slot must not overtake each other in the switch's input queues
        results = 0
        start = time.perf_counter()
        for rnd in plan:
            for rank, frame in rnd:
                job.send_frame(rank, frame)
            for _ in range(slots):
                if proc.recv(1, 5.0) is None:
                    break
                results += 1
        elapsed = time.perf_counter() - start
        sw.close()
        if results < rounds * slots:
            print(
                f"  {kind}: only {results} of {rounds * slots} results came back", file=sys.stderr
            )
        return results * workers / elapsed
    finally:
        proc.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slots", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--encodings", type=lambda v: v.split(","), default=["packed", "lanes"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    bad = [e for e in args.encodings if e not in ("packed", "lanes")]
    if bad:
        ap.error(f"--encodings: {', '.join(bad)} not packed or lanes")
    kinds = [SOFTSWITCH] + ([SIMPLE_SWITCH_GRPC] if shutil.which("simple_switch_grpc") else [])
    if args.workers < 2:
        ap.error(
            "--workers must be at least 2 (a round with SKIPs needs a DATA rank and a SKIP one)"
        )
    rows = {}
    ratios = {}
    for enc in args.encodings:
        pps = in_process(args.workers, args.slots, args.rounds, enc)
        rows[f"softswitch in-process, {enc}"] = pps[args.workers]
        rows[f"softswitch in-process, {enc}, 1 DATA + {args.workers - 1} SKIP"] = pps[1]
        ratios[enc] = skip_ratios(pps, args.workers)
        for kind in kinds:
            rows[f"{kind} over veth, {enc}"] = over_veth(
                kind, args.workers, args.slots, args.rounds, enc
            )
    print(
        f"p4reduce program, K={p.BLOCK_VALUES}, {args.workers} workers, {args.slots} slots, "
        f"{args.rounds} rounds ({args.workers * args.slots * args.rounds} DATA packets)"
    )
    for name, pps in rows.items():
        print(f"  {name:48s} {pps:10.0f} packets/s")
    for enc, (per_packet, per_round) in ratios.items():
        print(
            f"  in-process, {enc}: SKIP / DATA per packet {per_packet:.2f}, "
            f"round with SKIPs / dense round {per_round:.2f}"
        )
    if SIMPLE_SWITCH_GRPC not in kinds:
        print("  simple_switch_grpc: not on PATH, not measured")
    if args.json:
        for enc, (per_packet, per_round) in ratios.items():
            rows[f"in-process, {enc}: SKIP / DATA per packet"] = per_packet
            rows[f"in-process, {enc}: round with SKIPs / dense round"] = per_round
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
