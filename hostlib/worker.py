"""`Worker`: the user-facing allreduce over a job descriptor.

One Worker = one rank of one job. It keeps what must survive between allreduce calls (the
transport, each slot's shadow-copy version, cumulative stats) and runs one
`AllreduceEngine` per call through `loop.CallLoop`'s turns (take a batch of results, hand
it over, send what the engine releases) on the wall clock: when the ring is empty it spins
briefly, then sleeps in poll() until the next retransmission timer (and, woken early with
many slots outstanding, a little longer: GATHER).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from p4reduce.job import JobConfig, busy_slots, load_descriptor

from .engine import AllreduceEngine, SwitchStateLost, new_engine
from .framing import FrameBuilder
from .loop import CallLoop, Transport
from .timers import EngineParams, RttEstimator
from .numerics import Output, make_payload
from .scratch import Scratch


@dataclass
class WorkerStats:
    """Cumulative over the Worker's life (`last_*` describe the latest call)."""

    transport: str = ""
    transport_fallbacks: str = ""  # why "auto" did not get a better mode
    # why the transport holds no UDP socket on the rank's port (transport.port_sink), so
    # the kernel answers the switch's frames with ICMP port unreachables; "": it holds one
    port_sink_skipped: str = ""
    allreduces: int = 0
    packets_sent: int = 0
    bytes_sent: int = 0
    packets_received: int = 0
    bytes_received: int = 0
    receive_batches: int = 0  # turns that took frames in (EngineStats.receive_batches)
    retransmissions: int = 0
    probes: int = 0  # retransmissions that were silence probes
    # retransmissions that were done slots' packets flagged CONTINUED, beside resends
    # that could not say so (EngineStats.state_probes: does the switch still hold the job?)
    state_probes: int = 0
    # retransmissions the switch answered with a STATUS: the round held this rank's
    # packet and waited for another rank (a timer that fired without a loss)
    statuses: int = 0
    results_ignored: int = 0
    rounds: int = 0
    time: float = 0.0
    last_time: float = 0.0
    last_packets_sent: int = 0
    last_blocks: int = 0
    last_nonzero_blocks: int = 0
    last_call_slots: int = 0  # the slots the latest call used (docs/hostlib.md "Slots per call")
    # the latest call's packets by message type (ANNOUNCE, DATA, SKIP, REWIND), and what
    # silent rounds' loss recovery cost over the Worker's life
    last_sent_by_type: dict[str, int] = field(default_factory=dict)
    queries: int = 0
    rewind_requests: int = 0
    rewinds: int = 0
    control_packets: int = 0  # EngineStats.control_packets, over the Worker's life
    srtt: float = 0.0  # smoothed round time of clean rounds (s)
    rto: float = 0.0  # the retransmission timer after the latest call (s)

    def as_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["last_sent_by_type"] = dict(self.last_sent_by_type)
        return out


# After poll() ends early because a frame came, a rank with its call's busy window
# outstanding (p4reduce.job.busy_slots: the slots a call keeps busy at its block size, 16
# up to 2 048 values per block, 8 from 4 096) sleeps GATHER seconds more (never past its
# next timer) before its turn, and such a rank sleeps in poll() at its first empty turn
# instead of spinning first; nor does it take a turn straight after one that took in less
# than a batch (the frames that came while that turn's Python ran, a few): it sleeps in
# poll() and gathers again. A turn's Python costs the same whatever it receives; on cores
# shared with the switch, ranks taking a turn per wake-up spent more CPU on turns than on
# values (bench/call_breakdown.py); gathered, the results of more slots share one turn,
# and the switch, with the other slots' packets queued, has the cores meanwhile. Calls
# with fewer slots outstanding, or whose rank has fewer than GATHER_ROUNDS non-zero
# blocks per busy slot (short, latency-bound), are not delayed, nor is a rank whose
# switch keeps up (the results of half its slots outstanding wait already: _keeping_up)
# (docs/hostlib.md, "How the data path works").
GATHER = 1e-3
GATHER_ROUNDS = 4


class WorkerBroken(RuntimeError):
    """A previous allreduce timed out or found the switch's state lost: slot states across
    ranks are unknown, so this job cannot go on (create a new one)."""


class Worker:
    """One rank of a p4reduce job.

    `descriptor`: dict, JSON string or path (docs/protocol.md section 4).
    `interface`: network interface; default: the one that owns descriptor worker.ip.
    `transport`: "auto" (PACKET_MMAP rings, else sendmmsg/recvmmsg, else plain send/recv),
    one of "ring", "mmsg", "plain", or a ready transport object (tests).
    `timeout`, `initial_timeout`, `max_timeout`, `deadline`, `window`: the engine's
    timing knobs (the retransmission timer's floor, value before the first measured round
    and cap, the stall deadline, the most slots outstanding); None keeps EngineParams's
    default, which says why, except `window`: None takes the descriptor's (the job's
    target's, p4reduce.job.resolve_window) where it names one.
    `busy_poll`: seconds the loop spins on an empty ring before it sleeps in poll() (0:
    it never spins, nor takes another turn without asking the transport first: after
    every turn that took in less than a batch it sleeps in the transport's wait, which
    returns at once when frames wait -- for ranks that share one core, where a turn costs
    the others: p4net.harness.allreduce_on_leaves);
    `gather`: seconds it sleeps more when woken early with many slots outstanding (GATHER;
    0: never).
    """

    def __init__(
        self,
        descriptor: Mapping[str, Any] | str | os.PathLike[str],
        *,
        interface: str | None = None,
        transport: str | Transport = "auto",
        timeout: float | None = None,
        initial_timeout: float | None = None,
        max_timeout: float | None = None,
        deadline: float | None = None,
        window: int | None = None,
        call_slots: int | None = None,
        batch: int = 256,
        busy_poll: float = 50e-6,
        gather: float = GATHER,
    ):
        self.cfg: JobConfig = load_descriptor(descriptor)
        given = {
            "timeout": timeout,
            "initial_timeout": initial_timeout,
            "max_timeout": max_timeout,
            "deadline": deadline,
            "window": self.cfg.window if window is None else window,
            "call_slots": call_slots,
        }
        self.params = EngineParams(**{k: v for k, v in given.items() if v is not None})
        self.batch = batch
        self.busy_poll = busy_poll
        self.gather = gather
        if isinstance(transport, str):
            from .transport import RawSocket, check_interface_mac, interface_for_ip

            ifname = interface or interface_for_ip(self.cfg.worker.ip)
            check_interface_mac(ifname, self.cfg.worker.mac)
            # RawSocket refuses an interface whose MTU is below the job's frames (MtuTooSmall)
            self.transport: Transport = RawSocket(
                ifname,
                mode=transport,
                dst_ip=self.cfg.worker.ip,
                dst_port=self.cfg.worker.udp_port,
                batch=batch,
                block_values=self.cfg.block_values,
                announce_block=self.cfg.announce_block,
            )
        else:
            self.transport = transport
        self.builder = FrameBuilder(
            self.cfg.to_switch(), self.cfg.block_values, self.cfg.announce_block
        )
        # the turns' temporaries, reused call after call (this Worker's alone)
        self.scratch = Scratch()
        self.slot_versions = np.zeros(self.cfg.slot_count, np.uint8)
        self.continued = np.zeros(self.cfg.slot_count, bool)
        self.rtt = RttEstimator()
        self.stats = WorkerStats(
            transport=self.transport.mode,
            transport_fallbacks="; ".join(getattr(self.transport, "fallback_reasons", [])),
            port_sink_skipped=getattr(self.transport, "sink_skipped", ""),
        )
        self._broken: str | None = None
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.transport.close()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- API -----------------------------------------------------------------------------

    def allreduce(self, array: np.ndarray, op: str = "sum") -> np.ndarray:
        """Sum (or mean) of `array` over all ranks of the job; a new array, same shape.

        int32 is summed exactly (OverflowError when the sum does not fit int32: flagged by
        the switch, or seen by this worker in a job that sends 16-bit halves); float32
        and float64 go through block floating point (protocol.md section 10). op="mean"
        returns float64 for int32 input. NaN/Inf (or |x| > 2^127) on any rank: ValueError
        on every rank (this one names the element), and the job stays usable.
        """
        a = np.asarray(array)
        if op not in ("sum", "mean"):
            raise ValueError(f"op must be 'sum' or 'mean', not {op!r}")
        n = self.cfg.worker_count
        # a float mean is divided block by block as results come (numerics.Output)
        flat = self._run(a, divisor=n if op == "mean" and a.dtype.kind == "f" else 1)
        if op == "mean" and a.dtype.kind != "f":
            flat = flat / n  # float64 from the exact int32 sums
        return flat.reshape(a.shape)

    def allreduce_(self, array: np.ndarray, op: str = "sum") -> np.ndarray:
        """In-place allreduce: writes the result into `array` (any strides) and returns it."""
        if not isinstance(array, np.ndarray) or not array.flags.writeable:
            raise TypeError("allreduce_ needs a writeable numpy array")
        if op == "mean" and array.dtype.kind != "f":
            raise TypeError(
                "in-place mean of an integer array would truncate; use allreduce(array, op='mean')"
            )
        array[...] = self.allreduce(array, op)
        return array

    # -- the loop ------------------------------------------------------------------------

    def _run(self, a: np.ndarray, divisor: int = 1) -> np.ndarray:
        """One allreduce; returns the flat result (the tensor's dtype for floats, each
        block's sum divided by `divisor`; int32 for ints), written as rounds complete."""
        if self._closed:
            raise RuntimeError("Worker is closed")
        if self._broken:
            raise WorkerBroken(self._broken)
        # a float tensor with NaN/Inf is still announced (no values): the call then fails
        # on every rank together instead of leaving this rank one call behind the others
        payload = make_payload(
            a,
            self.cfg.worker_count,
            self.cfg.encoding,
            int32_halves=self.cfg.int32_halves,
            announce_refusal=True,
            block_values=self.cfg.block_values,
        )
        output = Output(payload, divisor, self.scratch)
        t0 = time.monotonic()
        eng = new_engine(
            self.cfg,
            payload,
            t0,
            self.params,
            self.slot_versions,
            self.builder,
            self.rtt,
            self.continued,
            output,
            scratch=self.scratch,
        )
        loop = CallLoop(eng, self.transport, time.monotonic, self.batch)
        try:
            idle_since = None
            spins = self.busy_poll > 0
            window = self._gather_window(eng)
            while not (turn := loop.turn()).done:
                if turn.received >= self.batch:
                    idle_since = None
                    continue  # a full batch: more wait
                gathering = self._gathering(eng, window)
                if turn.received:
                    idle_since = None
                    if spins and not gathering:
                        continue  # the busy poll: what came in meanwhile, at once
                if spins and idle_since is None and not gathering:
                    idle_since = turn.now
                elif gathering or not spins or turn.now - idle_since > self.busy_poll:
                    # (a turn that took frames in has expired its timers: the next is due
                    # at the engine's next timer, not now)
                    wake_at = loop.next_wake() if turn.received else turn.wake_at
                    self.transport.wait(max(0.0, wake_at - turn.now))
                    if gathering and not self._keeping_up(eng):
                        self._gather(wake_at)
        except TimeoutError as e:
            self._broken = f"a previous allreduce timed out ({e}); create a new job"
            raise
        except SwitchStateLost as e:
            self._broken = str(e)
            raise
        finally:
            self._account(eng, time.monotonic() - t0, payload)
        self.slot_versions = eng.final_slot_versions(self.slot_versions)
        self.continued = eng.continued
        if payload.refused:
            raise ValueError(
                f"{payload.refused}: the protocol cannot carry it; no rank of "
                f"job {self.cfg.job} returns a sum for this call (each raises)"
            )
        eng.raise_if_mismatched()
        eng.raise_if_overflowed()
        eng.raise_if_incomplete()
        return output.finish()

    def _gather_window(self, eng: AllreduceEngine) -> int:
        """The slots outstanding from which the call gathers (GATHER): its busy window
        (p4reduce.job.busy_slots of the job's block size) in a long call (GATHER_ROUNDS
        non-zero blocks of this rank per busy slot); 0, never, in a shorter call or with
        the gather off. Fixed for the call, so a turn asks only how many slots are
        outstanding."""
        busy = busy_slots(eng.block_values)
        long_call = eng.payload.nonzero.size >= GATHER_ROUNDS * busy
        return busy if self.gather > 0 and long_call else 0

    def _gathering(self, eng: AllreduceEngine, window: int | None = None) -> bool:
        """Whether the call gathers now: its gather window (`window`, else
        _gather_window's) is outstanding. Such a rank also skips the busy poll: its next
        results are a round of the switch away, and a spinning rank takes the core from
        the switch that makes them."""
        if window is None:
            window = self._gather_window(eng)
        return window > 0 and int(np.count_nonzero(eng.active)) >= window

    def _keeping_up(self, eng: AllreduceEngine) -> bool:
        """Whether the results of at least half the slots outstanding wait already (the
        transport's `ready`, where it can tell): the switch answers as fast as the rank
        sends -- a switch on other cores, at line rate -- so a gather would only idle the
        rank and its slots; it gathers where the switch shares its cores and a result
        comes a round of the switch after the last."""
        ready = getattr(self.transport, "ready", None)
        if ready is None:
            return False
        outstanding = int(np.count_nonzero(eng.active))
        waiting = ready(outstanding)
        return waiting is not None and 2 * waiting >= outstanding

    def _gather(self, wake_at: float) -> None:
        """Sleep up to `gather` seconds after a wake-up, never past `wake_at` (the next
        timer)."""
        left = wake_at - time.monotonic()
        if left > 0:
            time.sleep(min(self.gather, left))

    def _account(self, eng: AllreduceEngine, elapsed: float, payload) -> None:
        s, e = self.stats, eng.stats
        s.allreduces += 1
        s.packets_sent += e.packets_sent
        s.bytes_sent += e.bytes_sent
        s.packets_received += e.packets_received
        s.receive_batches += e.receive_batches
        s.bytes_received += e.bytes_received
        s.retransmissions += e.retransmissions
        s.probes += e.probes
        s.state_probes += e.state_probes
        s.statuses += e.statuses
        s.srtt = self.rtt.srtt or 0.0
        s.rto = eng.rto()
        s.results_ignored += e.results_ignored
        s.rounds += e.rounds
        s.time += elapsed
        s.last_time = elapsed
        s.last_packets_sent = e.packets_sent
        s.last_blocks = payload.nblocks
        s.last_nonzero_blocks = int(payload.nonzero.size)
        s.last_call_slots = eng.call_slots
        s.last_sent_by_type = e.sent_counts()
        s.queries += e.queries
        s.rewind_requests += e.rewind_requests
        s.rewinds += e.rewinds
        s.control_packets += e.control_packets
