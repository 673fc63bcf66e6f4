"""One allreduce call's loop: the turn that moves bytes between an `AllreduceEngine` and a
transport, the same for every caller.

Why its own unit: the Worker runs it on the wall clock over a raw socket, and the pacing
tests (tests/hostlib/engine_sim.py) run it in virtual time over the in-process switch; a
copy of the loop in the tests would test the copy. The caller owns only what differs:
the clock, and what to do between turns (the Worker spins briefly, then sleeps in the
transport until `Turn.wake_at`; the simulation schedules an event then).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Protocol

import numpy as np

from .engine import AllreduceEngine
from .framing import Batch


class Transport(Protocol):
    """What the loop needs from a transport (transport.RawSocket; tests: an in-process switch).
    A received batch may be the transport's own memory (the ring itself): valid until the
    next recv, so a turn takes it in before it receives again. A transport may also have
    `ready(limit) -> int | None`, how many received frames wait (up to `limit`) without
    taking them, None where it cannot tell: the Worker's gather asks for it with getattr."""

    mode: str

    def send(self, batch: Batch) -> int: ...
    def recv(self, max_n: int) -> tuple[np.ndarray, np.ndarray]: ...
    def wait(self, timeout: float) -> None: ...
    def close(self) -> None: ...


class Turn(NamedTuple):
    """What one turn found: the call is `done`, or `received` frames arrived (take another
    turn at once: more may wait), or the engine next needs a turn at `wake_at` (its next
    retransmission timer or its deadline, whichever comes first) unless frames come. A
    named tuple: a rank makes one per turn, and a frozen dataclass costs several times
    as much to make."""

    done: bool
    received: int
    now: float
    wake_at: float


class CallLoop:
    """Turns of one call. A turn receives before it sends: after the process was
    descheduled, results wait in the receive ring while the timers of their slots have
    expired, and firing those first would retransmit rounds that are already complete;
    so timers only expire on a turn that emptied the ring (fewer than `batch` frames).

    A turn that receives nothing before the `wake_at` an earlier empty turn computed, with
    no frame received since, ends there (`_idle_until`): nothing in the engine changed but the
    clock, and before `wake_at` no timer is due and no deadline passed, so its timers,
    stall check and next wake-up would come out the same. Such turns are most of a
    rank's turns (the busy poll after each result, a wake-up that found the ring empty),
    and each would cost as much Python as a receiving turn's bookkeeping."""

    def __init__(
        self,
        engine: AllreduceEngine,
        transport: Transport,
        clock: Callable[[], float],
        batch: int = 256,
    ):
        self.engine, self.transport, self.clock, self.batch = engine, transport, clock, batch
        self._idle_until = float("-inf")  # the last empty turn's wake_at (-inf: none since)

    def turn(self) -> Turn:
        """One turn: receive a batch, hand it to the engine, send what it releases, check
        for a stall (TimeoutError, RankSilent)."""
        eng = self.engine
        frames, lengths = self.transport.recv(self.batch)
        now = self.clock()
        received = int(lengths.size)
        if received:
            self._idle_until = float("-inf")
            eng.on_frames(frames, lengths, now)
        elif now < self._idle_until:
            return Turn(False, 0, now, self._idle_until)
        if eng.done:
            return Turn(True, received, now, float("inf"))
        out = eng.packets_to_send(now, expire=received < self.batch)
        if len(out):
            self.transport.send(out)
        eng.check(now)
        if received:
            return Turn(False, received, now, now)
        self._idle_until = wake_at = self.next_wake()
        return Turn(False, 0, now, wake_at)

    def next_wake(self) -> float:
        """When the engine next needs a turn if no frame comes: its next retransmission
        timer or its deadline, whichever is first (a turn that took frames in says "at
        once" instead, since more may wait; a caller that does not spin asks this)."""
        return min(self.engine.next_timer(), self.engine.deadline)
