"""A reference model of the switch's silent rounds (the design the P4 program implements,
docs/protocol.md), small enough to read in one go, and a driver that runs N silent
engines through it on a virtual clock with seeded loss both ways.

Why a model beside the real program: it lets the worker's state machine be tested under
many loss patterns in milliseconds, and says in code what the worker relies on. The
tests against the real program (softswitch in process) are in test_silent_switch.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hostlib import protocol as p
from hostlib.engine import new_engine
from hostlib.numerics import make_payload
from hostlib.timers import EngineParams
from hostlib_helpers import descriptor
from p4net.harness import frame_rows
from p4reduce.job import load_descriptor

EOS = p.END_OF_STREAM


@dataclass
class Half:
    """One version of a slot: its round and what completed it."""

    block: int = EOS  # the round's block (the winner stored for it)
    closing: bool = False
    ended: bool = False  # the round ended the slot's call (its RESULT flagged ENDED)
    uncovered: bool = False  # a contribution lacked FLAG_COVERED
    rewinding: bool = False  # a rewind round
    expected: int = 0
    bitmap: int = 0
    sums: np.ndarray | None = None
    fp: tuple[int, int] | None = None
    result: tuple | None = None  # (msg, next_block, next_exponent, sums or fp)


@dataclass
class SlotModel:
    cells: list[int]  # per rank: block << 8 | (255 - exponent)
    halves: list[Half] = field(default_factory=lambda: [Half(), Half()])
    rewind: int = EOS


class SilentSwitchModel:
    """The switch side of one silent job of `n` ranks and `slots` slots."""

    def __init__(self, n: int, slots: int, k: int, eps: list[p.Endpoints], job: int):
        self.n, self.k, self.full, self.eps, self.job = n, k, (1 << n) - 1, eps, job
        self.slots = [SlotModel([EOS << 8] * n) for _ in range(slots)]
        for sl in self.slots:
            sl.halves[0].expected = sl.halves[1].expected = self.full
        self.rewinds = 0

    def handle(self, f: p.Frame) -> list[tuple[int | None, bytes]]:
        """One packet from a rank: the frames it causes, (rank or None: every rank, frame).
        The rules are the v1model program's (docs/protocol.md), plus one it is asked to
        keep: a contribution counts only in a round of its kind."""
        h = f.header
        sl, half = self.slots[h.slot], self.slots[h.slot].halves[h.slot_version]
        bit = 1 << h.rank
        complete = half.bitmap == half.expected and half.result is not None
        closing_packet = h.block == EOS and h.msg_type in (p.MsgType.SKIP, p.MsgType.REWIND)
        if h.msg_type == p.MsgType.SKIP and h.block != EOS:
            return self._query(h, sl, half, complete)
        if h.msg_type == p.MsgType.REWIND and not (half.bitmap & bit):
            sl.rewind = min(sl.rewind, h.next_block)
            self.rewinds += 1
            if not (closing_packet and half.closing and not complete):
                return []  # a request only
        if h.block != half.block:
            return []  # stale
        if complete:
            return [(h.rank, self._frame(h.slot, h.slot_version, half, h.rank, cached=True))]
        # each kind of round takes one kind of contribution: a DATA sent before a
        # rewind must not count as an ANNOUNCE of a rewind round at its block
        announcing = half.rewinding or (half.block == EOS and not half.closing)
        contribution = (
            h.msg_type == p.MsgType.ANNOUNCE
            if announcing
            else h.msg_type == p.MsgType.DATA
            if not half.closing
            else closing_packet
        )
        if not contribution:
            return []
        if half.bitmap & bit:
            return [(h.rank, self._status(h, half.bitmap | (self.full & ~half.expected)))]
        covered = h.msg_type == p.MsgType.DATA and bool(h.flags & p.Flag.COVERED)
        if not half.bitmap:
            half.sums, half.fp, half.uncovered = np.zeros(self.k, np.int64), None, False
        half.uncovered |= not covered
        half.bitmap |= bit
        if h.msg_type != p.MsgType.REWIND:
            sl.cells[h.rank] = h.next_block << 8 | (255 - h.next_exponent)
        if h.msg_type == p.MsgType.DATA:
            half.sums += f.values
        if h.msg_type == p.MsgType.ANNOUNCE:
            fp = f.fingerprint[0]
            half.fp = (fp, fp) if half.fp is None else (min(half.fp[0], fp), max(half.fp[1], fp))
        if half.bitmap != half.expected:
            return []
        return [(None, self._complete(h.slot, h.slot_version))]

    def _query(self, h: p.Header, sl: SlotModel, half: Half, complete: bool):
        """A query (a SKIP outside the closing round; joins nothing): the named version's
        cached result if that round completed; a STATUS if its round is the one named and
        does not wait for the sender; else the last completed round (the other version),
        so a rank that missed results learns where the slot is."""
        if complete:
            return [(h.rank, self._frame(h.slot, h.slot_version, half, h.rank, cached=True))]
        bit = 1 << h.rank
        if h.block == half.block and not (half.expected & bit & ~half.bitmap):
            return [(h.rank, self._status(h, half.bitmap | (self.full & ~half.expected)))]
        other = sl.halves[1 - h.slot_version]
        if other.result is None or other.bitmap != other.expected:
            return []
        return [(h.rank, self._frame(h.slot, 1 - h.slot_version, other, h.rank, cached=True))]

    def _complete(self, s: int, v: int) -> bytes:
        sl = self.slots[s]
        half, other = sl.halves[v], sl.halves[1 - v]
        key = min(sl.cells)
        block, exp = key >> 8, 255 - (key & 0xFF)
        if half.fp is not None and half.fp[0] != half.fp[1]:
            block, exp = EOS, 0
            sl.rewind = EOS  # the slot ends here, over a pending rewind too
        other.bitmap = 0
        if sl.rewind != EOS:
            msg, nxt, exp = p.MsgType.REWIND, sl.rewind, 0
            other.block, other.closing, other.expected = nxt, False, self.full
            other.rewinding, half.ended = True, half.closing
            sl.rewind = EOS
        else:
            msg, nxt = p.MsgType.RESULT, block
            # a closing round ends the slot's call, and so does, naming END_OF_STREAM, a
            # call's announce round (block END_OF_STREAM, not a rewind round) or a data
            # round that expected every rank, each contribution COVERED
            announce = half.block == EOS and not half.closing and not half.rewinding
            data = half.block != EOS and not half.rewinding
            every = half.expected == self.full and not half.uncovered
            half.ended = half.closing or (block == EOS and (announce or (data and every)))
            other.block, other.rewinding = block, False
            other.closing = block == EOS and not half.ended
            other.expected = (
                self.full
                if block == EOS
                else sum(1 << r for r, c in enumerate(sl.cells) if c >> 8 == block)
            )
        half.result = (msg, nxt, exp)
        return self._frame(s, v, half, None)

    def _frame(self, s: int, v: int, half: Half, rank: int | None, cached: bool = False):
        """The RESULT (or REWIND) of half `v` of slot `s`: sums after a data round, the
        fingerprint range after an announce or rewind round, header only after a closing
        round; to `rank` (a cached copy) or, as `None`, the multicast's rank-0 copy."""
        msg, nxt, exp = half.result
        h = p.Header.make(
            msg,
            job=self.job,
            slot=s,
            rank=0 if rank is None else rank,
            slot_version=v,
            flags=int(p.Flag.SILENT)
            | (int(p.Flag.CACHED) if cached else 0)
            | (int(p.Flag.ENDED) if half.ended else 0),
            block=half.block,
            next_block=nxt,
            next_exponent=exp,
        )
        ep = self.eps[0 if rank is None else rank]
        if half.closing:
            return p.build_frame(ep, h)
        if half.fp is not None:
            return p.build_frame(ep, h, fingerprint=half.fp)
        vals = (half.sums + 2**31) % 2**32 - 2**31
        return p.build_frame(ep, h, vals, block_values=self.k)

    def _status(self, h: p.Header, heard: int) -> bytes:
        st = p.Header.make(
            p.MsgType.STATUS,
            job=self.job,
            slot=h.slot,
            rank=h.rank,
            slot_version=h.slot_version,
            flags=int(p.Flag.SILENT),
            block=h.block,
            next_block=EOS,
        )
        return p.build_frame(self.eps[h.rank], st, contributors=heard)

    def copy_for(self, frame: bytes, rank: int) -> bytes:
        """The multicast's copy for `rank`: its addresses and rank field."""
        f = p.parse_frame(frame)
        h = f.header._replace(rank=rank)
        ext = {}
        if f.values is not None:
            ext = {"values": f.values, "block_values": self.k}
        elif f.fingerprint is not None:
            ext = {"fingerprint": f.fingerprint}
        return p.build_frame(self.eps[rank], h, **ext)


@dataclass
class ModelRun:
    sums: list[list[np.ndarray]]  # per rank, per call
    stats: list[list]  # EngineStats per rank, per call
    switch: SilentSwitchModel


def run_model(
    tensors: list[np.ndarray] | list[list[np.ndarray]],
    *,
    slots: int = 4,
    loss: float = 0.0,
    seed: int = 0,
    k: int = 8,
    tick: float = 0.001,
    limit: float = 60.0,
) -> ModelRun:
    """Silent allreduces of `tensors` (per rank one int32 tensor, or a list of them: one
    per call) through the model, each frame lost with probability `loss` on its way up
    and down; the clock moves by `tick` per step. A rank starts its next call as soon as
    its last one is done, carrying slot versions and CONTINUED like a Worker (frames of
    its last call may still arrive). Returns every rank's sums and engine stats."""
    calls = [x if isinstance(x, list) else [x] for x in tensors]
    n = len(calls)
    rng = np.random.default_rng(seed)
    cfgs = [
        load_descriptor(descriptor(r, n, slot_count=slots, round_mode="silent", block_values=k))
        for r in range(n)
    ]
    params = EngineParams(timeout=0.004, initial_timeout=0.02, max_timeout=0.05, deadline=limit)
    sums: list[list[np.ndarray]] = [[] for _ in range(n)]
    stats: list[list] = [[] for _ in range(n)]

    def start(r: int, now: float, prev=None):
        versions = (
            np.zeros(slots, np.uint8)
            if prev is None
            else prev.final_slot_versions(prev_versions[r])
        )
        prev_versions[r] = versions
        x = calls[r][len(sums[r])]
        return new_engine(
            cfgs[r],
            make_payload(x, n, block_values=k),
            now,
            params,
            versions,
            continued=None if prev is None else prev.continued,
        )

    prev_versions = [np.zeros(slots, np.uint8) for _ in range(n)]
    engines = [start(r, 0.0) for r in range(n)]
    sw = SilentSwitchModel(n, slots, k, [c.from_switch() for c in cfgs], cfgs[0].job)
    inbox: list[list[bytes]] = [[] for _ in range(n)]
    now = 0.0
    while any(e is not None for e in engines):
        now += tick
        if now > limit:
            raise TimeoutError("the model run did not finish")
        for r, e in enumerate(engines):
            if e is None:
                continue
            if inbox[r]:
                e.on_frames(*frame_rows(inbox[r], e.builder.width), now)
                inbox[r] = []
            e.check(now)
            batch = e.packets_to_send(now)
            for i in range(len(batch)):
                if rng.random() < loss:
                    continue
                for to, frame in sw.handle(p.parse_frame(batch.frame(i), k)):
                    for dest in range(n) if to is None else [to]:
                        if rng.random() >= loss:
                            inbox[dest].append(
                                frame if to is not None else sw.copy_for(frame, dest)
                            )
            if e.done:
                sums[r].append(e.output.finish())
                stats[r].append(e.stats)
                engines[r] = start(r, now, e) if len(sums[r]) < len(calls[r]) else None
    return ModelRun(sums, stats, sw)
