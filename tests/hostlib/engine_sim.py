"""A deterministic discrete-event model of a job: N AllreduceEngines, the real p4reduce
program (p4net.harness: softswitch in this process, programmed by the
controller) serving packets first-in first-out at a fixed rate, links with a fixed delay,
and a virtual clock. Why: whether a worker retransmits depends on timing (start-up skew,
a switch working through a large window, loss); with wall-clock threads those runs differ
every time, here they are exactly repeatable (the P4 drop simulator's losses are
deterministic too), so tests can count retransmissions.

Each rank runs hostlib.loop.CallLoop, the Worker's own loop, on the virtual clock and a
transport whose frames travel the simulated links: when woken (a result arrived, or the
time its last turn asked for) it takes turns until one receives nothing, then sleeps
until that turn's `wake_at`. A rank runs its calls one after another, continuing slot
versions, CONTINUED flags and its RttEstimator across them like a Worker.
"""

from __future__ import annotations

import heapq
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from p4reduce.job import Job, load_descriptor
from hostlib.engine import AllreduceEngine, EngineStats, SwitchStateLost, new_engine
from hostlib.timers import EngineParams, RttEstimator
from hostlib.framing import WIDTH, Batch, frame_width
from hostlib.loop import CallLoop
from hostlib.numerics import make_payload
from p4net.harness import SwitchSession

from p4net.harness import frame_rows


@dataclass
class Call:
    rank: int
    start: float
    end: float = float("nan")
    stats: EngineStats | None = None
    engine: AllreduceEngine | None = None  # what the call left (its raise_if_* checks)
    error: OverflowError | None = None  # the sums refused (SimResult.sums has None)


@dataclass
class SimResult:
    calls: list[list[Call]]  # per rank, per call
    counters: dict[str, int]  # the switch's counters for the job
    rtt: list[RttEstimator]
    sums: list[list[np.ndarray | None]] = field(default_factory=list)  # None: Call.error
    queue_drops: int = 0  # dropped by a full switch queue
    # by rank: what stopped it, and when (TimeoutError; SwitchStateLost after a restart)
    errors: dict[int, tuple[float, Exception]] = field(default_factory=dict)
    sent: list[tuple[float, int, bytes]] = field(default_factory=list)  # (time, rank, frame)
    peak_active: list[int] = field(default_factory=list)  # per rank: most slots outstanding

    def duration(self, k: int) -> float:
        """Time of call k: first start to last end over ranks (what the job waits)."""
        return max(c[k].end for c in self.calls) - min(c[k].start for c in self.calls)

    def totals(self, first_call: int = 0) -> tuple[int, int]:
        """(packets sent, retransmissions) over all ranks from call `first_call` on."""
        sent = sum(c.stats.packets_sent for cs in self.calls for c in cs[first_call:])
        retx = sum(c.stats.retransmissions for cs in self.calls for c in cs[first_call:])
        return sent, retx


class SimTransport:
    """One rank's end of the simulated links (the hostlib.loop.Transport protocol): `recv`
    takes what has been delivered to the rank, `send` hands a batch to `on_send`."""

    mode = "simulated"

    def __init__(self, on_send: Callable[[list[bytes]], None], width: int = WIDTH):
        self.inbox: list[bytes] = []
        self.on_send = on_send
        self.width = width  # of the job's frames (framing.frame_width of its K)

    def send(self, batch: Batch) -> int:
        self.on_send([batch.frame(i) for i in range(len(batch))])
        return len(batch)

    def recv(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        take, self.inbox[:] = self.inbox[:max_n], self.inbox[max_n:]
        return frame_rows(take, self.width)

    def wait(self, timeout: float) -> None:
        raise AssertionError("a simulated rank sleeps between events, not in its transport")

    def close(self) -> None:
        pass


def simulate(
    switch: SwitchSession,
    tensors: list[list[np.ndarray]],
    *,
    slots: int = 8,
    loss: float = 0.0,
    seed: int = 1,
    pps: float = 20_000.0,
    delay: float = 50e-6,
    start: list[float] | None = None,
    params: EngineParams | None = None,
    chunk: int = 32,
    limit: float = 600.0,
    job_id: int = 40,
    queue_limit: int | None = None,
    pauses: dict[int, tuple[float, float]] | None = None,
    drop: Callable[[int, str, bytes], bool] | None = None,
    block_values: int | None = None,
    round_mode: str = "every_rank",
    restart: float | None = None,
) -> SimResult:
    """Run every rank's calls (tensors[rank][call]) to completion in virtual time, as a
    fresh job on `switch` (deleted afterwards).

    pps: packets the switch serves per second (bench/softswitch_pps.py measures it); it takes
    up to `chunk` waiting packets at a time. delay: one-way link delay. start: when each
    rank begins its first call (start-up skew). loss: fraction lost each way (the P4
    drop simulator, deterministic for a seed). queue_limit: packets arriving while this
    many wait at the switch are dropped (bmv2's input buffer holds 1024). pauses: rank ->
    (from, until): the rank is not driven in between (a descheduled process: its frames
    wait for it); until = inf is a rank that died. A rank whose engine raises
    TimeoutError stops; `errors` records when and what (the others go on). drop(rank,
    "up" or "down", frame): a scripted loss -- True loses that frame on its way to or from
    the switch. Every frame a rank sends is in `SimResult.sent`, with its virtual time.
    block_values: the job's values per block (None: the target's default). round_mode:
    the job's ("every_rank", what the pacing tests were written for, or "silent").
    restart: when the switch restarts (None: never): the frames waiting at it are lost,
    a fresh pipeline is pushed and the controller installs the job again, as after a
    reboot; a rank whose engine then raises SwitchStateLost stops, as on a
    TimeoutError."""
    pauses = pauses or {}
    with _job_on(switch, len(tensors), slots, job_id, round_mode, block_values, loss, seed) as job:
        n = len(tensors)
        cfgs = [load_descriptor(d) for d in switch.descriptors(job)]
        port = [w.port for w in job.workers]
        rank_of = {pt: r for r, pt in enumerate(port)}
        params = params or EngineParams(deadline=limit)
        rtt = [RttEstimator() for _ in range(n)]
        slot_versions = [np.zeros(slots, np.uint8) for _ in range(n)]
        continued = [np.zeros(slots, bool) for _ in range(n)]
        calls: list[list[Call]] = [[] for _ in range(n)]
        sums: list[list[np.ndarray | None]] = [[] for _ in range(n)]
        engines: list[AllreduceEngine | None] = [None] * n
        events: list[tuple[float, int, str, int]] = []
        seq = 0

        def push(t: float, kind: str, who: int) -> None:
            nonlocal seq
            seq += 1
            heapq.heappush(events, (t, seq, kind, who))

        queue: list[tuple[int, bytes]] = []  # (port, frame) waiting at the switch
        links: list[tuple[int, list[bytes]]] = []  # frames on a link, by event index
        busy = False
        dropped = 0  # by a full queue (queue_limit)
        timer_at = [float("inf")] * n
        errors: dict[int, tuple[float, Exception]] = {}

        def paused(r: int, now: float, kind: str) -> bool:
            """Within a pause of rank r: the event waits for its end (forever: died)."""
            begin, end = pauses.get(r, (float("inf"), float("inf")))
            if not begin <= now < end:
                return False
            if end < float("inf"):
                push(end, kind, r)
            return True

        sent: list[tuple[float, int, bytes]] = []
        peak = [0] * n
        keep = (lambda r, way, f: True) if drop is None else (lambda r, way, f: not drop(r, way, f))

        clock = [0.0]  # the virtual time of the event being handled

        def sender(r: int) -> Callable[[list[bytes]], None]:
            def on_send(frames: list[bytes]) -> None:
                now = clock[0]
                sent.extend((now, r, f) for f in frames)
                links.append((r, [f for f in frames if keep(r, "up", f)]))
                push(now + delay, "arrive", len(links) - 1)

            return on_send

        transports = [SimTransport(sender(r), frame_width(cfgs[r].block_values)) for r in range(n)]
        loops: list[CallLoop | None] = [None] * n

        def start_call(r: int, now: float) -> None:
            x = tensors[r][len(calls[r])]
            engines[r] = new_engine(
                cfgs[r],
                make_payload(x, n, cfgs[r].encoding, block_values=cfgs[r].block_values),
                now,
                params,
                slot_versions[r],
                None,
                rtt[r],
                continued[r],
            )
            loops[r] = CallLoop(engines[r], transports[r], lambda: clock[0])
            calls[r].append(Call(r, now))
            push(now, "wake", r)

        def end_call(r: int, now: float, eng: AllreduceEngine) -> None:
            c = calls[r][-1]
            c.end, c.stats, c.engine = now, eng.stats, eng
            slot_versions[r] = eng.final_slot_versions(slot_versions[r])
            continued[r] = eng.continued
            try:
                sums[r].append(eng.output.finish())
            except OverflowError as e:  # a sum out of int32's range: no sums, as a Worker
                c.error = e
                sums[r].append(None)
            engines[r] = loops[r] = None
            if len(calls[r]) < len(tensors[r]):
                start_call(r, now)

        def wake(r: int, now: float) -> None:
            """The rank's loop takes turns until one receives nothing (Worker: until the ring
            is empty), then sleeps until that turn's wake_at."""
            eng, loop = engines[r], loops[r]
            if eng is None or loop is None or paused(r, now, "wake"):
                return
            clock[0] = now
            while True:
                try:
                    turn = loop.turn()
                except (TimeoutError, SwitchStateLost) as e:
                    errors[r], engines[r], loops[r] = (now, e), None, None
                    return
                peak[r] = max(peak[r], int(eng.active.sum()))
                if turn.done:
                    end_call(r, now, eng)
                    return
                if not turn.received:
                    break
            t = turn.wake_at
            if t < timer_at[r] or timer_at[r] <= now:
                timer_at[r] = t
                push(max(t, now), "timer", r)

        for r in range(n):
            push((start or [0.0] * n)[r], "start", r)
        if restart is not None:
            push(restart, "restart", 0)
        while events:
            now, _, kind, who = heapq.heappop(events)
            if now > limit:
                raise TimeoutError(f"simulation passed {limit}s of virtual time")
            if kind == "start":
                if not paused(who, now, "start"):
                    start_call(who, now)
            elif kind == "wake":
                wake(who, now)
            elif kind == "timer":
                if engines[who] is not None and now >= timer_at[who]:
                    timer_at[who] = float("inf")
                    wake(who, now)
            elif kind == "arrive":
                r, frames = links[who]
                room = len(frames) if queue_limit is None else max(0, queue_limit - len(queue))
                queue.extend((port[r], f) for f in frames[:room])
                dropped += len(frames) - min(room, len(frames))
                if not busy:
                    busy = True
                    push(now, "serve", 0)
            elif kind == "serve":
                if not queue:
                    busy = False
                    continue
                take, queue[:] = queue[:chunk], queue[chunk:]
                done_at = now + len(take) / pps
                sw = switch.proc  # the in-process switch: each frame processed as sent
                for pt, frame in take:
                    sw.send(pt, frame)
                out = {pt: got for pt in range(1, sw.n_ports + 1) if (got := sw.recv_all(pt))}
                for pt, frames in out.items():
                    if pt in rank_of:
                        r = rank_of[pt]
                        links.append((r, [f for f in frames if keep(r, "down", f)]))
                        push(done_at + delay, "deliver", len(links) - 1)
                push(done_at, "serve", 0)
            elif kind == "restart":
                queue.clear()  # what waited at the switch died with it
                switch.lose_state()  # as after a reboot; the controller restores the job
            elif kind == "deliver":
                r, frames = links[who]
                transports[r].inbox.extend(frames)
                push(now, "wake", r)
        died = {r for r, (_, end) in pauses.items() if end == float("inf")}
        unfinished = [
            r
            for r in range(n)
            if (len(calls[r]) < len(tensors[r]) or engines[r]) and r not in died | set(errors)
        ]
        if unfinished:
            raise RuntimeError(f"ranks {unfinished} did not finish")
        return SimResult(calls, switch.stats(job), rtt, sums, dropped, errors, sent, peak)


@contextmanager
def _job_on(
    switch: SwitchSession,
    n: int,
    slots: int,
    job_id: int,
    round_mode: str,
    block_values: int | None,
    loss: float,
    seed: int,
) -> Iterator[Job]:
    """A fresh job of `n` ranks on `switch`, losing `loss` each way (the same packets for a
    seed on any switch), deleted afterwards."""
    sized = {} if block_values is None else {"block_values": block_values}
    job = switch.create_job(n, slots, job_id, round_mode=round_mode, **sized)
    try:
        if loss:
            switch.set_loss(job.job, ingress=loss, egress=loss, seed=seed)
            switch.restart_loss_sequence(job)  # a seed's loss whatever ran before
        yield job
    finally:
        switch.jobs.delete(job.job)
