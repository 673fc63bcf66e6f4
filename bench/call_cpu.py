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
                             [--density 1] [--pattern shared|independent|zipf]
                             [--round-mode every_rank|silent] [--replay N]

--replay N measures one rank's engine alone: rank 0's transport records every batch it
received in those calls (`Recorder`), then a fresh Worker of rank 0 takes the same calls
N times over from the recording (`Replay`: each receive hands over the next recorded
batch, sends go nowhere, no switch, no other rank, no sleep), and each replayed call's
thread CPU is timed. A replayed call must return the recorded call's result bit for bit
(else the replay diverged: an error). What it gives is a rank's CPU per call with the
switch and the other ranks taken out and the same frames each time: a change to the
engine's per-turn code measured to a few per cent, where the whole process's CPU moves
with the other threads' turns. Its turns are the recorded ones (the recording's batching
is the in-process switch's): to compare two trees on the very same frames, record once
(`--recording PATH` writes it when PATH does not exist) and replay it on each tree
(`PYTHONPATH=<tree> python bench/call_cpu.py --recording PATH --replay N`: with PATH
there, no in-process run, the recording's calls alone).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

import numpy as np

from hostlib import Worker
from hostlib.framing import Batch, frame_width
from p4net.harness import SwitchSession
from p4reduce.job import load_descriptor
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
    recorder: "Recorder | None" = None,
) -> list[float]:
    """Per timed call, the process's CPU seconds. `recorder`: rank 0's transport goes
    through it (each call's batches and result kept)."""
    pattern = "dense" if density >= 1 and pattern != "zipf" else pattern
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
                if r == 0 and recorder is not None:
                    recorder.descriptor, recorder.inputs = descriptors[0], xs[0]
                    transport = Recording(transport, recorder)
                with Worker(descriptors[r], transport=transport, deadline=120) as w:
                    w.allreduce(xs[r][: 2 * block_values])
                    for _ in range(calls):
                        if r == 0 and recorder is not None:
                            recorder.next_call()
                        if barrier.wait() == 0:
                            cpu.append(time.process_time())
                        out = w.allreduce(xs[r])
                        if r == 0 and recorder is not None:
                            recorder.results.append(out)
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


class Recorder:
    """Rank 0's received batches, per call in order (the warm-up call first), and its
    timed calls' results: what `replay` takes again."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[np.ndarray, np.ndarray]]] = [[]]
        self.results: list[np.ndarray] = []
        self.descriptor: dict = {}
        self.inputs: np.ndarray = np.zeros(0, np.float32)

    def save(self, path: str) -> None:
        """The recording in one .npz file (no pickle): every batch, result, the input and
        the descriptor."""
        arrays: dict[str, np.ndarray] = {"inputs": self.inputs}
        arrays["descriptor"] = np.frombuffer(json.dumps(self.descriptor).encode(), np.uint8)
        for k, batches in enumerate(self.calls):
            for i, (frames, lengths) in enumerate(batches):
                arrays[f"call{k}_batch{i}_frames"] = frames
                arrays[f"call{k}_batch{i}_lengths"] = lengths
        for k, out in enumerate(self.results):
            arrays[f"result{k}"] = out
        with open(path, "wb") as f:
            np.savez(f, **arrays)

    @classmethod
    def load(cls, path: str) -> "Recorder":
        """A recording `save` wrote."""
        rec = cls()
        with np.load(path, allow_pickle=False) as z:
            names = set(z.files)
            rec.inputs = z["inputs"]
            rec.descriptor = json.loads(z["descriptor"].tobytes())
            rec.calls = []
            while any(n.startswith(f"call{len(rec.calls)}_") for n in names):
                k, batches = len(rec.calls), []
                while f"call{k}_batch{len(batches)}_frames" in names:
                    i = len(batches)
                    batches.append((z[f"call{k}_batch{i}_frames"], z[f"call{k}_batch{i}_lengths"]))
                rec.calls.append(batches)
            rec.results = [z[f"result{k}"] for k in range(len(rec.calls) - 1)]
        return rec

    def next_call(self) -> None:
        """The batches received from now on are the next call's."""
        self.calls.append([])


class Recording:
    """`transport` (rank 0's in-process port), with every non-empty batch it returns kept
    in `recorder`'s current call (Recorder.next_call starts the next)."""

    def __init__(self, transport, recorder: Recorder) -> None:
        self.transport, self.recorder, self.mode = transport, recorder, transport.mode

    def send(self, batch: Batch) -> int:
        return self.transport.send(batch)

    def recv(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        frames, lengths = self.transport.recv(max_n)
        if lengths.size:
            self.recorder.calls[-1].append((frames.copy(), lengths.copy()))
        return frames, lengths

    def wait(self, timeout: float) -> None:
        self.transport.wait(timeout)

    def close(self) -> None:
        self.transport.close()


class Replay:
    """A transport that hands a Worker the recorded batches of one call after another:
    each `recv` the next batch of the current call, sends nowhere, waits not at all. A
    Worker that asks for more than the call's recording diverged from it: an error, not a
    wait."""

    mode = "replay"

    def __init__(self, calls: list[list[tuple[np.ndarray, np.ndarray]]], width: int):
        self.calls, self.width = calls, width
        self.call, self.next = 0, 0

    def start(self, call: int) -> None:
        self.call, self.next = call, 0

    def send(self, batch: Batch) -> int:
        return len(batch)

    def recv(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        batches = self.calls[self.call]
        if self.next < len(batches):
            frames, lengths = batches[self.next]
            self.next += 1
            return frames, lengths
        return np.zeros((0, self.width), np.uint8), np.zeros(0, np.int64)

    def wait(self, timeout: float) -> None:
        if self.next >= len(self.calls[self.call]):
            raise RuntimeError(
                f"replay diverged: call {self.call} wanted more than its "
                f"{len(self.calls[self.call])} recorded batches"
            )

    def close(self) -> None:
        pass


def replay(rec: Recorder, times: int) -> list[list[float]]:
    """Rank 0's recorded calls taken `times` times over, each time by a fresh Worker (the
    warm-up call first, untimed, so slot versions and timers start as recorded): per
    timed call, the thread CPU seconds of each replay. Raises if a replayed call's result
    is not the recorded one bit for bit."""
    block_values = load_descriptor(rec.descriptor).block_values
    cpu: list[list[float]] = [[] for _ in rec.results]
    warmup = rec.inputs[: 2 * block_values]
    for _ in range(times):
        transport = Replay(rec.calls, frame_width(block_values))
        with Worker(rec.descriptor, transport=transport, deadline=30, busy_poll=0, gather=0) as w:
            w.allreduce(warmup)
            for k, want in enumerate(rec.results):
                transport.start(k + 1)
                t0 = time.thread_time()
                got = w.allreduce(rec.inputs)
                cpu[k].append(time.thread_time() - t0)
                if got.tobytes() != want.tobytes():
                    raise RuntimeError(f"replay diverged: call {k} returned another result")
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
        choices=("shared", "independent", "zipf"),
        help="below density 1: the same blocks on every rank, or each rank's own",
    )
    ap.add_argument("--round-mode", default="every_rank", choices=("every_rank", "silent"))
    ap.add_argument(
        "--replay",
        type=int,
        default=0,
        metavar="N",
        help="also take rank 0's recorded calls N times over, alone: its engine's CPU",
    )
    ap.add_argument(
        "--recording",
        metavar="PATH",
        help="with --replay: replay this recording (.npz) if it exists, else write it",
    )
    a = ap.parse_args()
    if a.recording and os.path.exists(a.recording):
        if not a.replay:
            ap.error("--recording PATH exists: give --replay N to replay it")
        return show_replay(Recorder.load(a.recording), a.replay)
    rec = Recorder() if a.replay else None
    cpu = call_cpu(
        a.block_values,
        a.slots,
        a.ranks,
        a.values,
        a.calls,
        a.density,
        a.round_mode,
        a.pattern,
        recorder=rec,
    )
    print(
        f"K={a.block_values} slots={a.slots} ranks={a.ranks} values={a.values} "
        f"density={a.density:g} {a.pattern} {a.round_mode}: CPU per call "
        f"{min(cpu) * 1e3:.0f} ms (best of {len(cpu)}; all: "
        + ", ".join(f"{c * 1e3:.0f}" for c in cpu)
        + " ms)"
    )
    if rec is None:
        return 0
    if a.recording:
        rec.save(a.recording)
    return show_replay(rec, a.replay)


def show_replay(rec: Recorder, times: int) -> int:
    """Replay `rec` `times` times over and print each call's thread CPU."""
    for k, cpu in enumerate(replay(rec, times)):
        print(
            f"rank 0 alone, call {k} replayed {len(cpu)} times "
            f"({len(rec.calls[k + 1])} batches, "
            f"{sum(int(b[1].size) for b in rec.calls[k + 1])} frames): thread CPU "
            f"best {min(cpu) * 1e3:.2f} ms, median {float(np.median(cpu)) * 1e3:.2f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
