"""A deterministic discrete-event model of a job: N AllreduceEngines, the switch model
(ReflectorCore) serving packets first-in first-out at a fixed rate, links with a fixed
delay, and a virtual clock. Why: whether a worker retransmits depends on timing (start-up
skew, a switch working through a large window, loss); with wall-clock threads those runs
differ every time, here they are exactly repeatable, so tests can count retransmissions.

Each rank runs like hostlib.Worker's loop: when woken (a result arrived, or its next
timer), it hands every result that has arrived to its engine, then sends what
packets_to_send releases. A rank runs its calls one after another, continuing slot
versions and its RttEstimator across them like a Worker.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from hostlib.config import load_descriptor
from hostlib.engine import AllreduceEngine, EngineParams, EngineStats, RttEstimator
from hostlib.framing import Batch
from hostlib.numerics import make_payload
from hostlib.reflector import Loss, ReflectorCore
from hostlib_helpers import descriptor


@dataclass
class Call:
    rank: int
    start: float
    end: float = float("nan")
    stats: EngineStats | None = None


@dataclass
class SimResult:
    calls: list[list[Call]]                     # per rank, per call
    core: ReflectorCore
    rtt: list[RttEstimator]
    sums: list[list[np.ndarray]] = field(default_factory=list)

    def duration(self, k: int) -> float:
        """Time of call k: first start to last end over ranks (what the job waits)."""
        return max(c[k].end for c in self.calls) - min(c[k].start for c in self.calls)

    def totals(self, first_call: int = 0) -> tuple[int, int]:
        """(packets sent, retransmissions) over all ranks from call `first_call` on."""
        sent = sum(c.stats.packets_sent for cs in self.calls for c in cs[first_call:])
        retx = sum(c.stats.retransmissions for cs in self.calls for c in cs[first_call:])
        return sent, retx


def simulate(tensors: list[list[np.ndarray]], *, slots: int = 8, loss: Loss | None = None,
             pps: float = 20_000.0, delay: float = 50e-6, start: list[float] | None = None,
             params: EngineParams | None = None, chunk: int = 32,
             limit: float = 600.0) -> SimResult:
    """Run every rank's calls (tensors[rank][call]) to completion in virtual time.

    pps: packets the switch serves per second (softswitch ~16 000, bmv2 ~1 800); it takes
    up to `chunk` waiting packets at a time. delay: one-way link delay. start: when each
    rank begins its first call (start-up skew)."""
    n = len(tensors)
    descs = [descriptor(r, n, slots) for r in range(n)]
    cfgs = [load_descriptor(d) for d in descs]
    core = ReflectorCore(cfgs, loss)
    params = params or EngineParams(deadline=limit)
    rtt = [RttEstimator() for _ in range(n)]
    versions = [np.zeros(slots, np.uint8) for _ in range(n)]
    calls: list[list[Call]] = [[] for _ in range(n)]
    sums: list[list[np.ndarray]] = [[] for _ in range(n)]
    engines: list[AllreduceEngine | None] = [None] * n
    inbox: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n)]
    events: list[tuple[float, int, str, int]] = []
    seq = 0

    def push(t: float, kind: str, who: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, who))

    queue: list[tuple[np.ndarray, np.ndarray]] = []      # packets waiting at the switch
    arriving: list[tuple[float, int, Batch]] = []        # (time, seq, batch) on the links
    busy = False
    timer_at = [float("inf")] * n

    def start_call(r: int, now: float) -> None:
        k = len(calls[r])
        x = tensors[r][k]
        engines[r] = AllreduceEngine(cfgs[r], make_payload(x, n), now, params, versions[r],
                                     None, rtt[r])
        calls[r].append(Call(r, now))
        push(now, "wake", r)

    def wake(r: int, now: float) -> None:
        eng = engines[r]
        if eng is None:
            return
        if inbox[r]:
            frames = np.concatenate([f for f, _ in inbox[r]])
            lengths = np.concatenate([ln for _, ln in inbox[r]])
            inbox[r].clear()
            eng.on_frames(frames, lengths, now)
        if eng.done:
            c = calls[r][-1]
            c.end, c.stats = now, eng.stats
            n_slots = eng.nslots
            versions[r][:n_slots] = eng.final_versions()
            sums[r].append(eng.sums)
            engines[r] = None
            if len(calls[r]) < len(tensors[r]):
                start_call(r, now)
            return
        out = eng.packets_to_send(now)
        if len(out):
            push(now + delay, "arrive", len(arriving))
            arriving.append((now + delay, r, out))
        eng.check(now)
        t = eng.next_timer()
        if t < timer_at[r] or timer_at[r] <= now:
            timer_at[r] = t
            push(max(t, now), "timer", r)

    for r in range(n):
        push((start or [0.0] * n)[r], "start", r)
    now = 0.0
    while events:
        now, _, kind, who = heapq.heappop(events)
        if now > limit:
            raise TimeoutError(f"simulation passed {limit}s of virtual time")
        if kind == "start":
            start_call(who, now)
        elif kind == "wake":
            wake(who, now)
        elif kind == "timer":
            if engines[who] is not None and now >= timer_at[who]:
                timer_at[who] = float("inf")
                wake(who, now)
        elif kind == "arrive":
            _, _, batch = arriving[who]
            queue.append((batch.frames, batch.lengths))
            if not busy:
                busy = True
                push(now, "serve", 0)
        elif kind == "serve":
            if not queue:
                busy = False
                continue
            frames = np.concatenate([f for f, _ in queue])
            lengths = np.concatenate([ln for _, ln in queue])
            take, rest = slice(0, chunk), slice(chunk, None)
            queue[:] = [(frames[rest], lengths[rest])] if frames.shape[0] > chunk else []
            done_at = now + min(chunk, frames.shape[0]) / pps
            for r, b in core.process_frames(frames[take], lengths[take]).items():
                inbox_at = done_at + delay
                arriving.append((inbox_at, r, b))
                push(inbox_at, "deliver", len(arriving) - 1)
            push(done_at, "serve", 0)
        elif kind == "deliver":
            _, r, b = arriving[who]
            inbox[r].append((b.frames, b.lengths))
            push(now, "wake", r)
    unfinished = [r for r in range(n) if len(calls[r]) < len(tensors[r]) or engines[r]]
    if unfinished:
        raise RuntimeError(f"ranks {unfinished} did not finish")
    return SimResult(calls, core, rtt, sums)
