"""The worker's protocol engine for one allreduce (docs/protocol.md sections 5, 6, 13).

It owns no socket: `packets_to_send(now)` hands out frames, `on_frames` / `on_results` /
`on_result` take results in, and `check(now)` turns a slot that makes no progress for
`deadline` seconds into a TimeoutError naming the ranks the switch is waiting for, and
a rank the switch's STATUS replies agree has gone silent into RankSilent sooner. The
caller (loop.CallLoop for the Worker and the tests' simulation, or a unit test with
crafted RESULT packets) moves the bytes. All per-slot state lives in numpy arrays indexed
by slot, so a batch of results is handled with a fixed number of vectorised operations,
whatever its size.

That fixed number is most of a rank's CPU where blocks are small, calls sparse or results
trickle in under loss: a turn of one result is a few dozen numpy calls on arrays of one
element. So the one general path keeps the count down: a step whose input is empty is
skipped after one count (no STATUS in the batch, no slot finishing), a mask that keeps
every row is not applied, what is constant for the call is looked up instead of computed
per turn (the frames' job flags; numerics' quantizer scales and packed biases), and a
turn's few values are summed or maximised over a Python list (smallarrays.total, largest).

The engine itself matches results to rounds, stores the sums, and builds each slot's next
packet (its round number, shadow-copy version, block, this rank's announced next non-zero
block, the frame kept for retransmission). Along its seams it hands the rest to units of
their own: which slots are open (slots.SlotWindow), when a packet goes again
(timers.Pacer), and whether every rank is still there (liveness.Liveness).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from p4reduce.job import JobConfig, call_slot_count

from . import protocol as p
from .framing import (
    FLAGS_BYTE,
    Batch,
    FrameBuilder,
    Parsed,
    frame_matrix,
    parse_batch,
    values_columns,
)
from .liveness import Liveness
from .numerics import Output, Payload, from_packed, overflow_error, packed_sum_bias
from .scratch import Scratch
from .smallarrays import consecutive, increasing, selection, tally, total
from .slots import SlotWindow, slot_streams
from .timers import EngineParams, Pacer, RttEstimator

EOS = p.END_OF_STREAM
# a RESULT's flags the timers read (AllreduceEngine._completed)
_REPAIR_FLAGS = p.FLAG.REPAIRED | p.FLAG.CACHED
MSG_TYPE_BYTE = p.P4R_OFFSET  # protocol (high nibble) | msg_type (low nibble)
_SKIP_OR_DATA = np.array([p.MSG.SKIP, p.MSG.DATA], np.int64)  # by "is this rank's block"

__all__ = [
    "AllreduceEngine",
    "acts_at_once",
    "EngineStats",
    "FingerprintMismatch",
    "SwitchStateLost",
    "new_engine",
]


class SwitchStateLost(RuntimeError):
    """The switch no longer holds the job's slot state (it restarted, or its pipeline was
    replaced, after the job was created): rounds whose results died with it cannot
    complete, and the controller admits the job again only as lost (protocol.md section
    8)."""


class FingerprintMismatch(ValueError):
    """The ranks of the job disagree on what they reduce (dtype or length): no sum is
    returned, on every rank, with the same message."""


@dataclass
class EngineStats:
    packets_sent: int = 0
    bytes_sent: int = 0
    packets_received: int = 0
    bytes_received: int = 0
    # batches of frames taken in (on_frames): each a turn of the rank's loop, whatever it
    # holds -- where ranks share cores (the in-process fabric) the turns, not the frames,
    # are most of a call's CPU
    receive_batches: int = 0
    retransmissions: int = 0
    results_ignored: int = 0  # duplicates, cached copies of done rounds, other jobs
    statuses: int = 0  # STATUS replies: a retransmission found the round waiting
    rounds: int = 0
    timeouts_doubled: int = 0
    probes: int = 0  # retransmissions sent as silence probes (one per timer)
    # retransmissions that were kept frames of done slots flagged CONTINUED, beside a
    # resend that could not say so (_state_probe): does the switch still hold the job?
    state_probes: int = 0
    overflowed_blocks: list[int] = field(default_factory=list)
    # silent rounds (silent.SilentEngine): what loss recovery cost
    queries: int = 0  # SKIPs with FLAG_RETRANSMIT asking for a round this rank waits for
    rewind_requests: int = 0  # REWINDs sent (a gap in the chain, or queries unanswered)
    rewinds: int = 0  # REWINDs from the switch taken (the slot re-ran from a position)
    # first sends of the packets that carry no block of this rank's: each slot's ANNOUNCE
    # and, in silent rounds, its closing packets (only where some rank sat out the slot's
    # last round); without loss a silent rank sends these and its non-zero blocks only
    control_packets: int = 0
    # packets sent by message type (index: protocol.MsgType), retransmissions included
    sent_by_type: np.ndarray = field(default_factory=lambda: np.zeros(8, np.int64))

    def sent_counts(self) -> dict[str, int]:
        """Packets sent per message type name (ANNOUNCE, DATA, SKIP, REWIND): what a
        bench reports per rank per call."""
        return {m.name: int(self.sent_by_type[m]) for m in p.MsgType if self.sent_by_type[m]}


_STATUS_END = p.EXTENSION_OFFSET + p.STATUS_BYTES


def acts_at_once(frame: bytes, rank_on_wire: int) -> bool:
    """Whether a frame that reaches a rank behind a leaf (the leaf role) may make it act
    before its next timer: every frame but a STATUS that only holds its round -- the
    spine's, relayed (it always holds: `_heard_by_leaf`), or its leaf's naming this rank
    (`rank_on_wire`) among the round's contributors. Such a STATUS changes nothing the
    rank would do before its timer: taken then (a turn receives before its timers expire:
    loop.CallLoop), it holds the round just the same. A leaf's STATUS that lacks this rank
    (its packet was lost: `Pacer.not_heard`), a RESULT and anything else act at once.
    Read from the frame's bytes, no parse: where every rank is a thread of one process
    (`p4net.harness.leaf_transport`), a turn of a rank's loop for each STATUS copy its
    leaf sends to all its ranks was most of a lossy call's CPU."""
    if len(frame) < _STATUS_END or frame[MSG_TYPE_BYTE] & 0x0F != p.MSG.STATUS:
        return True
    if frame[FLAGS_BYTE] & p.FLAG.RELAYED:
        return False
    contributors = int.from_bytes(frame[p.EXTENSION_OFFSET : _STATUS_END], "big")
    return not (contributors >> rank_on_wire) & 1


def new_engine(cfg: JobConfig, payload: Payload, now: float, *args, **kwargs) -> "AllreduceEngine":
    """The engine of the job's round mode: AllreduceEngine for every-rank rounds,
    silent.SilentEngine for silent ones (same arguments)."""
    if cfg.round_mode == p.RoundMode.SILENT:
        from .silent import SilentEngine

        return SilentEngine(cfg, payload, now, *args, **kwargs)
    return AllreduceEngine(cfg, payload, now, *args, **kwargs)


class AllreduceEngine:
    """State machine of all slots of one job for one tensor.

    `start_slot_versions[s]` is the shadow-copy version of slot s's announce round. The first
    allreduce of a job uses 0 (section 6); the Worker continues the alternation across
    calls (a slot that ended in version v starts the next tensor in version 1-v), because
    the switch's bitmap still has every rank's bit set in v: an announce in v would be
    taken for a retransmission and answered with the previous tensor's cached result.
    Each data round's sums go to `output` (numerics.Output: the Worker's result array).
    `scratch` holds the turns' temporaries (quantized rows, received sums, the kept
    frames): the Worker's, so that its calls reuse the same pages; a fresh one otherwise.
    """

    def __init__(
        self,
        cfg: JobConfig,
        payload: Payload,
        now: float,
        params: EngineParams | None = None,
        start_slot_versions: np.ndarray | None = None,
        builder: FrameBuilder | None = None,
        rtt: RttEstimator | None = None,
        continued: np.ndarray | None = None,
        output: Output | None = None,
        scratch: Scratch | None = None,
    ):
        self.cfg = cfg
        self.scratch = scratch if scratch is not None else Scratch()
        self.payload = payload
        self.params = params or EngineParams()
        self.block_values = k = cfg.block_values
        self.builder = builder or FrameBuilder(cfg.to_switch(), k, cfg.announce_block)
        if payload.block_values != k or self.builder.block_values != k:
            raise ValueError(
                f"job {cfg.job} has {k} values per block: the payload has "
                f"{payload.block_values}, the frame builder {self.builder.block_values}"
            )
        self.stats = EngineStats()
        slot_count, blocks = cfg.slot_count, payload.nblocks
        # The call uses the job's first `call_slots` slots (slots_for_call: every rank of
        # the call picks the same), slot s the blocks b = s (mod stride; stride = call_slots,
        # 1 for a call without blocks). The others stay idle while all ranks agree on the
        # block count; a rank that learns of a disagreement (the fingerprint range)
        # announces on every slot of the job (_check_fingerprints), so every slot
        # completes its announce round.
        self.slot_count = n = slot_count
        self.call_slots = used = call_slot_count(
            blocks, slot_count, self.params.call_slots, block_values=cfg.block_values
        )
        self.stride = max(used, 1)
        self._after, first = slot_streams(payload.nonzero, blocks, self.stride)
        self.slots = SlotWindow(n, used, self.params.window)
        self.slot_version = (
            np.zeros(n, np.int64)
            if start_slot_versions is None
            else np.asarray(start_slot_versions[:n], np.int64) & 1
        )
        # CONTINUED: this rank had a result on the slot in this job, so the switch must
        # hold the job's state there (protocol.md section 8); the Worker keeps it.
        self.continued = (
            np.zeros(n, bool) if continued is None else np.asarray(continued[:n], bool).copy()
        )
        self.block = np.full(n, EOS, np.int64)  # block of the outstanding packet
        self.exponent = np.zeros(n, np.int64)  # E used by the outstanding packet
        self.my_next = np.full(n, EOS, np.int64)
        self.my_next[:used] = first[:used]
        self._first = self.my_next.copy()  # each slot's first non-zero block of this rank
        self.round = np.zeros(n, np.int64)
        self.last_frames = frame_matrix(self.scratch, "last_frames", n, self.builder.width)
        self.last_frames.fill(0)  # a previous call's frames: pages kept, bytes not
        self._padded_skips = p.skip_carries_values(k)  # SKIPs carry a block of zeros
        # the flags of this rank's frames by whether their slot is CONTINUED (index 0, 1):
        # the job's own (PACKED, SILENT) are the same on every frame of the call
        job_flags = (int(p.FLAG.PACKED) if cfg.encoding == p.Encoding.PACKED else 0) | (
            int(p.FLAG.SILENT) if cfg.round_mode == p.RoundMode.SILENT else 0
        )
        self._flags = np.array([job_flags, job_flags | int(p.FLAG.CONTINUED)], np.int64)
        self.last_lengths = np.zeros(n, np.int64)
        # slots whose kept frame a pending batch reads in place (_emit): built there once,
        # not built elsewhere and copied in
        self._in_place = np.zeros(n, bool)
        # slots whose kept frame is built only when its timer sends it (_build_deferred):
        # a silent rank's query, kept for every round it has nothing for and sent only
        # when that round's result is late -- building it each round cost more than the
        # rank's DATA did
        self._deferred = np.zeros(n, bool)
        self._probed_slot = -1  # the slot the latest state probe went to (_state_probe)
        # a state probe's flags: FLAG_PROBE too where the bit is free (every-rank rounds,
        # where it makes a leaf send the probe up; a silent job's DATA has the bit as
        # FLAG_COVERED, and a silent leaf, which takes part in every round of the spine,
        # answers a probe from its own cache or sends its partial up again)
        self._probe_flags = int(p.FLAG.RETRANSMIT | p.FLAG.CONTINUED) | (
            0 if cfg.round_mode == p.RoundMode.SILENT else int(p.FLAG.PROBE)
        )
        # the leaf role (timers.Pacer's behind_leaf: each waiting slot resent at its
        # timer, held rounds each on their own; in silent rounds the rounds a rank sits
        # out keep one switch's silence probe, `Pacer.due`)
        leaf = cfg.wire_rank is not None
        self.pacer = Pacer(
            self.params,
            rtt or RttEstimator(),
            self.slots,
            now,
            leaf,
            cfg.worker_count,
        )
        self.liveness = Liveness(
            cfg, self.params, self.slots, self.pacer, self.round, self.block, now
        )
        self.mismatch: tuple[int, int] | None = None  # fingerprint (min, max) if ranks differ
        self.output = output if output is not None else Output(payload)  # the sums
        self._pending: list[Batch] = []
        self._nothing = Batch.empty(self.builder.width)  # packets_to_send with none to send

        self._announce(np.flatnonzero(self.slots.active))

    # -- the units' state, read by the Worker, the loop and tests -------------------------

    @property
    def rtt(self) -> RttEstimator:
        return self.pacer.rtt

    @property
    def active(self) -> np.ndarray:
        return self.slots.active

    @property
    def touched(self) -> np.ndarray:
        return self.slots.touched

    @property
    def done(self) -> bool:
        return self.slots.done

    @property
    def deadline(self) -> float:
        """When the slowest-progressing active slot times out (inf when done)."""
        return self.liveness.deadline

    def rto(self) -> float:
        """The retransmission timer now (the Worker reports it after each call)."""
        return self.pacer.rto()

    def next_timer(self) -> float:
        """When packets_to_send may next retransmit without a result arriving first."""
        return self.pacer.next_timer()

    def check(self, now: float) -> None:
        """RankSilent or TimeoutError when the call stalls (liveness.Liveness.check)."""
        self.liveness.check(now, self.stats.retransmissions)

    # -- output --------------------------------------------------------------------------

    def _announce_exponent(self, nxt: np.ndarray) -> np.ndarray:
        """The biased exponents of blocks `nxt` this rank announces (0 for END_OF_STREAM,
        the only number past the tensor's blocks: `take` clips it to the last one)."""
        if not self.payload.nblocks:
            return np.zeros(nxt.shape, np.int64)
        out = self.payload.exponent_biased.take(nxt, mode="clip")
        out[nxt == EOS] = 0
        return out

    def _announce(self, slots: np.ndarray) -> None:
        k = slots.size
        self.stats.control_packets += k
        self._emit(
            slots,
            np.full(k, p.MSG.ANNOUNCE),
            self.slot_version[slots],
            np.full(k, EOS, np.int64),
            self.my_next[slots],
            None,
            np.full(k, p.EXT.FINGERPRINT),
        )

    def _emit(
        self,
        slots: np.ndarray,
        msg_type: np.ndarray | int,
        slot_version: np.ndarray,
        block: np.ndarray,
        next_block: np.ndarray,
        values: np.ndarray | None,
        extension: np.ndarray,
        flags: np.ndarray | int = 0,
    ) -> None:
        """Send packets on `slots`, each kept as its slot's frame for retransmission. A run
        of consecutive slots (a batch of results of consecutive slots releases one,
        mostly) is built in its kept frames, which the pending batch then reads in place:
        a wide-block job's frame is 64 KB, built once instead of built and copied.
        `flags`: per slot, or one for all, beside the job's (_build)."""
        cols = (slots, msg_type, slot_version, block, next_block, values, extension, flags)
        run = self._run_in_place(slots)
        if run is not None:
            batch = self._build(*cols, out=self.last_frames[run])
            self.last_lengths[run] = batch.lengths
            self._in_place[run] = True
            self._deferred[run] = False
        else:
            batch = self._build(*cols)
            self._keep(slots, batch)
        self._pending.append(batch)

    def _run_in_place(self, slots: np.ndarray) -> slice | None:
        """`slots` as a slice of the kept frames when _emit builds their packets there: a
        run of consecutive slots none of whose kept frames a pending batch reads."""
        run = consecutive(slots)
        if run is None or np.count_nonzero(self._in_place[run]):
            return None
        return run

    def _keep(self, slots: np.ndarray, batch: Batch) -> None:
        """Keep `batch`'s frames as the frames of `slots` (for their timers): the bytes up
        to the batch's longest frame, not the whole width (Batch.extent). A pending batch
        that reads one of these frames in place (_emit) gets a copy of its own first."""
        if np.count_nonzero(self._in_place[slots]):
            self._own_pending()
        self._deferred[slots] = False
        end = batch.extent()
        self.last_frames[slots, :end] = batch.frames[:, :end]
        self.last_lengths[slots] = batch.lengths

    def _build_deferred(self, slots: np.ndarray) -> None:
        """Build the kept frames of `slots`, deferred until a timer sends them (an engine
        that defers a kept frame, silent.SilentEngine, builds it here; every-rank rounds
        defer none)."""
        raise NotImplementedError(f"{type(self).__name__} defers no kept frame")

    def _own_pending(self) -> None:
        """Pending batches that read kept frames in place get copies of their own (a kept
        frame is about to change before they are sent)."""
        kept = self.last_frames
        self._pending = [
            Batch(b.frames.copy(), b.lengths) if np.may_share_memory(b.frames, kept) else b
            for b in self._pending
        ]
        self._in_place.fill(False)

    def _build(
        self,
        slots: np.ndarray,
        msg_type: np.ndarray | int,
        slot_version: np.ndarray,
        block: np.ndarray,
        next_block: np.ndarray,
        values: np.ndarray | None,
        extension: np.ndarray,
        flags: np.ndarray | int = 0,
        out: np.ndarray | None = None,
    ) -> Batch:
        """Frames of this rank for `slots` (the job's flags: CONTINUED, PACKED, SILENT, and
        `flags` besides), in `out` when given (FrameBuilder.build). `msg_type` and `flags`:
        per slot, or one for all."""
        cols = {
            "protocol": p.PROTOCOL_VERSION,
            "msg_type": msg_type,
            "slot_version": slot_version,
            "flags": self._flags[self.continued[slots].view(np.uint8)] | flags,
            "job": self.cfg.job,
            "slot": slots,
            "rank": self.cfg.rank_on_wire,
            "next_exponent": self._announce_exponent(next_block),
            "epoch": self.cfg.epoch,
            "block": block,
            "next_block": next_block,
        }
        # built in a Scratch buffer of their own per place in the pending list: a turn's
        # batches wait there until packets_to_send (each kept frame copied out first)
        where = (self.scratch, f"frames{len(self._pending)}")
        return self.builder.build(cols, extension, values, self.payload.fingerprint, where, out)

    def packets_to_send(self, now: float, expire: bool = True) -> Batch:
        """New packets released by results since the last call, plus (with `expire`)
        retransmissions of every active slot whose timer expired (same frame,
        FLAG_RETRANSMIT set). The caller passes expire=False while received frames may
        still be waiting: a result sitting in the ring is not a loss. The batch's frames
        are the engine's memory (its Scratch, or its kept frames): valid until the engine
        next takes results or sends (a transport copies them out at once)."""
        if expire:
            probes = self.pacer.probes
            due = self.pacer.due(now)
            self.stats.probes += self.pacer.probes - probes
            if due.size:
                self._resending(due)
                deferred = due[self._deferred[due]]
                if deferred.size:
                    self._build_deferred(deferred)
                frames = self.last_frames[due]
                frames[:, FLAGS_BYTE] |= int(p.FLAG.RETRANSMIT)
                self._pending.append(Batch(frames, self.last_lengths[due].copy()))
                self.stats.retransmissions += int(due.size)
                self.stats.timeouts_doubled += self.pacer.resent(due, now)
                self._state_probe(due)
        if not self._pending:  # a busy poll's turn, mostly: nothing to build or count
            return self._nothing
        out = Batch.concat(self._pending, self.builder.width, self.scratch)
        self._pending = []
        self._in_place.fill(False)  # `out` is the caller's now (copied out at once)
        self.stats.packets_sent += len(out)
        self.stats.bytes_sent += total(out.lengths)
        if len(out):
            tally(self.stats.sent_by_type, out.frames[:, MSG_TYPE_BYTE] & 0x0F)
        return out

    def _state_probe(self, due: np.ndarray) -> None:
        """A resend on a slot this rank has had no result on carries no CONTINUED, so a
        switch that lost the job but admits it as live cannot tell from it that it lost the
        job (the controller admits a restored job as lost, which answers every packet
        STATE_LOST: this is the second line, protocol.md section 8): the resend rebuilds
        the slot, and the switch holds it there (STATUS) for ranks that had the round's
        result before the restart and have moved on (protocol.md section 8). So when such
        a slot goes again after the switch said it holds it, and this rank holds results on
        slots it no longer waits on, one of those slots' kept frame goes too (each time the
        next one), flagged CONTINUED and RETRANSMIT (and PROBE, so that behind a leaf it
        reaches the spine, whose restart the leaf's own cache would hide): a switch that
        holds the job answers the duplicate from its cache (ignored: the slot is done), one
        that lost it answers STATE_LOST, which this rank raises and which marks the job
        lost for every rank. (A first round held while other ranks are late is the only
        other time it goes: one packet per resend.)"""
        first = due[~self.continued[due]]
        if not np.count_nonzero(self.pacer.expired_in_row[first]):
            return
        done = self.continued & ~self.slots.active & ~self._deferred
        held = np.flatnonzero(done & (self.last_lengths > 0))
        if not held.size:
            return
        # each probe the next such slot in turn: the switch may have rebuilt and completed
        # some of them again (no rank had a result there before it restarted), not others
        slot = held[np.searchsorted(held, self._probed_slot, side="right") % held.size :][:1]
        self._probed_slot = int(slot[0])
        frames = self.last_frames[slot]  # (a copy: fancy indexing)
        if frames[0, MSG_TYPE_BYTE] & 0x0F == p.MSG.REWIND:
            return  # a REWIND joins rounds; the probe must change nothing
        frames[:, FLAGS_BYTE] |= self._probe_flags
        self._pending.append(Batch(frames, self.last_lengths[slot].copy()))
        self.stats.retransmissions += 1
        self.stats.state_probes += 1

    def _resending(self, due: np.ndarray) -> None:
        """Slots `due` are about to resend their kept frame (a hook: silent rounds turn
        unanswered queries into rewind requests there)."""

    # -- input ---------------------------------------------------------------------------

    def on_frames(self, frames: np.ndarray, lengths: np.ndarray, now: float) -> None:
        """Raw received frames (rows of a receive batch)."""
        parsed = parse_batch(frames, lengths, self.block_values)
        lengths = np.asarray(lengths)
        self.stats.results_ignored += parsed.rejected
        self.stats.packets_received += int(lengths.shape[0])
        self.stats.receive_batches += 1
        self.stats.bytes_received += total(lengths)
        if len(parsed):
            self.on_results(parsed, now)

    def on_result(
        self,
        header: p.Header,
        values: np.ndarray | None,
        now: float,
        *,
        fingerprint: tuple[int, int] | None = None,
        contributors: int = 0,
    ) -> None:
        """One result or status (unit tests drive the engine with crafted packets)."""
        extension = (
            p.EXT.VALUES
            if values is not None
            else p.EXT.FINGERPRINT
            if fingerprint is not None
            else p.EXT.STATUS
            if header.msg_type == p.MSG.STATUS
            else p.EXT.NONE
        )
        cols = {name: np.array([v], np.int64) for name, v in zip(p.FIELD_NAMES, header)}
        vals = np.zeros((1, self.block_values), np.int32)
        if values is not None:
            vals[0] = values
        self.on_results(
            Parsed(
                cols=cols,
                has_values=np.array([values is not None]),
                values=vals,
                src_ip=np.zeros(1, np.uint32),
                src_mac=np.zeros((1, 6), np.uint8),
                rejected=0,
                extension=np.array([int(extension)]),
                fingerprint=np.array([fingerprint or (0, 0)], np.int64),
                contributors=np.array([contributors], np.int64),
            ),
            now,
        )

    def on_results(self, r: Parsed, now: float) -> None:
        """A batch of results: match each to its slot's outstanding round, store sums,
        release the next round. A result that does not answer the outstanding packet (a
        duplicate, a cached copy of a round already done, another job's) is ignored: the
        (slot_version, block) pair names the round, since blocks grow within a slot."""
        ours = self._ours(r)
        answers = self._answers(r, ours)
        if self.cfg.wire_rank is not None:
            self._take_ahead(r, ours & ~answers, now)
        msg = r.cols["msg_type"]
        statuses = 0
        status = msg == p.MSG.STATUS
        if np.count_nonzero(status):  # (a batch of results holds none, mostly)
            status &= answers
            statuses = int(np.count_nonzero(status))
            self._take_statuses(r, status, now)
        idx = (answers & (msg == p.MSG.RESULT)).nonzero()[0]
        s = r.cols["slot"][idx]
        if not increasing(s):  # a slot answered twice in one batch (or out of slot order)
            s, first = np.unique(s, return_index=True)
            idx = idx[first]
        self.stats.results_ignored += len(r) - int(idx.size) - statuses
        if not idx.size:
            return
        self.continued[s] = True
        data_round = self.block[s] != EOS
        if np.count_nonzero(data_round) < s.size:  # announce rounds among them
            idx, s = self._check_fingerprints(r, idx, s, ~data_round, now)
            if not idx.size:
                return
            data_round = self.block[s] != EOS
        data, rows = selection(data_round)
        if data:
            self._store_sums(r, idx[rows], s[rows])
        nb, ne = r.cols["next_block"][idx], r.cols["next_exponent"][idx]
        finished = nb == EOS
        cont = ~finished
        self._check_next_blocks(s, nb, data_round, cont)
        self._completed(s, finished, now, r.cols["flags"][idx])
        going, rows = selection(cont)
        if going:
            self._release(s[rows], nb[rows], ne[rows])

    def _answers(self, r: Parsed, ours: np.ndarray) -> np.ndarray:
        """Which of `ours` (a mask of the batch, from `_ours`) answer this rank's
        outstanding packet of their slot: a RESULT or a STATUS for its round."""
        c = r.cols
        slot = c["slot"]  # (clipped: rows not `ours` may name any slot)
        return (
            ours
            & (c["slot_version"] == self.slot_version.take(slot, mode="clip"))
            & (c["block"] == self.block.take(slot, mode="clip"))
        )

    def _ours(self, r: Parsed) -> np.ndarray:
        """Which of the batch are for this rank's job, epoch and active slots; raises
        SwitchStateLost if the switch says it lost the job's state on any slot."""
        c = r.cols
        slot = c["slot"]
        ours = (
            (c["protocol"] == p.PROTOCOL_VERSION)
            & (c["job"] == self.cfg.job)
            & (c["epoch"] == self.cfg.epoch)
            & (c["rank"] == self.cfg.rank_on_wire)
            & (slot < self.slot_count)
        )
        lost = c["flags"] & p.FLAG.STATE_LOST
        if np.count_nonzero(lost) and np.count_nonzero(lost := ours & (lost != 0)):
            slots = sorted({int(x) for x in slot[lost]})
            raise SwitchStateLost(
                f"the switch lost the state of job {self.cfg.job} (epoch {self.cfg.epoch}) "
                f"on slot(s) {slots[:8]}{' ...' if len(slots) > 8 else ''}: it restarted or "
                f"its pipeline was replaced after the job was created, and the job's rounds "
                f"died with it; delete the job and create it again"
            )
        return ours & self.slots.active.take(slot, mode="clip")  # (slot < slot_count: ours)

    def _take_statuses(self, r: Parsed, status: np.ndarray, now: float) -> np.ndarray:
        """STATUS replies (`status`: those of the batch that answer this rank's
        outstanding packets): the switch holds these rounds' packets (timers), and says
        which ranks it has heard from (liveness). Returns the ones that hold this rank's
        packet (behind a leaf, not those whose bitmap lacks it: _heard_by_leaf)."""
        if not np.count_nonzero(status) or r.contributors is None:
            return status
        relayed = None  # the leaf role: the spine's STATUS, relayed by the leaf
        if self.cfg.wire_rank is not None:
            status = self._heard_by_leaf(r, status, now)
            relayed = (r.cols["flags"][status] & p.FLAG.RELAYED) != 0
        slots = r.cols["slot"][status]
        self.pacer.held_by_switch(slots, now, r.contributors[status])
        self.liveness.statuses(slots, r.contributors[status], now, relayed)
        self.stats.statuses += int(np.count_nonzero(status))
        return status

    def _heard_by_leaf(self, r: Parsed, status: np.ndarray, now: float) -> np.ndarray:
        """The leaf role: of the STATUS replies `status` (mask), those that hold this
        rank's round. The leaf sends its own STATUS to all its ranks, whoever asked; one
        whose bitmap lacks this rank says that its packet was lost on the way, and the
        slot is resent at once (Pacer.not_heard) instead of held. A relayed STATUS (the
        spine's) always holds: the round is complete at the leaf."""
        bit = (r.contributors[status].astype(np.int64) >> self.cfg.rank_on_wire) & 1
        own = (r.cols["flags"][status] & p.FLAG.RELAYED) == 0
        lacking = own & (bit == 0)
        if not np.count_nonzero(lacking):
            return status
        self.pacer.not_heard(r.cols["slot"][status][lacking], now)
        kept = status.copy()
        kept[np.flatnonzero(status)[lacking]] = False
        return kept

    def _take_ahead(self, r: Parsed, others: np.ndarray, now: float) -> None:
        """The leaf role: the leaf's own STATUS (not the spine's, relayed) for an active
        slot in another round than the one this rank waits for is of a later round. A
        leaf sends its STATUS (to every rank its round expects, whoever asked) only while
        the round is in progress, so never after its RESULT, and frames are not reordered
        between a leaf and a rank (docs/protocol.md section 13): the round this rank waits
        for completed there, and its copy of the result was lost. In every-rank rounds
        that later round is the next one (the other version), in silent rounds any (the
        rank may sit rounds out: the closing round, which expects every rank). The slot's
        packet -- a query, for a round this rank sits out -- goes again at once
        (Pacer.passed_by) and the leaf answers from its cache, instead of at this rank's
        own timer or silence probe, while the later round may wait for it. `others`: this
        rank's frames of the batch (`_ours`) that answer no outstanding packet, taken
        before the batch's results: a RESULT of the round awaited before the next round's
        STATUS in one batch starts the slot's next round, which clears it
        (Pacer.started)."""
        ahead = (
            others
            & (r.cols["msg_type"] == p.MSG.STATUS)
            & ((r.cols["flags"] & p.FLAG.RELAYED) == 0)
        )
        if np.count_nonzero(ahead):
            self.pacer.passed_by(r.cols["slot"][ahead], now)

    def _store_sums(self, r: Parsed, di: np.ndarray, ds: np.ndarray) -> None:
        """Data rounds' sums (results `di` of slots `ds`) into the output."""
        if np.count_nonzero(r.has_values[di]) < di.size:
            bad = int(ds[~r.has_values[di]][0])
            raise p.ProtocolError(
                f"RESULT for slot {bad} block {int(self.block[bad])} carries no values"
            )
        blocks = self.block[ds]
        if self.cfg.encoding == p.Encoding.PACKED:
            # every row of the batch, in order (a batch of results, mostly): read in place
            every = di.size == len(r) and (
                di.size == 1 or np.count_nonzero(di == np.arange(di.size)) == di.size
            )
            wire = r.values if every else r.values[di]
            if self.payload.is_float:  # the biases go in dequantize's one pass
                sums, bias = wire, packed_sum_bias(self.cfg.worker_count)
            else:
                out = self.scratch.take("received", wire.shape, np.int32)
                sums, bias = from_packed(wire, self.cfg.worker_count, out), 0
        else:
            sums, bias = r.values[di], 0
        self.output.store(blocks, sums, self.exponent[ds], bias)
        over = r.cols["flags"][di] & p.FLAG.OVERFLOW
        if np.count_nonzero(over):
            self.stats.overflowed_blocks.extend(int(b) for b in blocks[over != 0])

    def _check_next_blocks(
        self, s: np.ndarray, nb: np.ndarray, data_round: np.ndarray, cont: np.ndarray
    ) -> None:
        """The switch's next block for each slot (`cont`: those not END_OF_STREAM) must be
        the next of the slot's stream that some rank announced: in the slot, past the
        current block, not past this rank's own next non-zero block."""
        bad = self._outside_stream(s, nb, cont) | (
            cont & ((data_round & (nb <= self.block[s])) | (nb > self.my_next[s]))
        )
        self._refuse_next(s, nb, bad)

    def _outside_stream(
        self, s: np.ndarray, nb: np.ndarray, named: np.ndarray | None = None
    ) -> np.ndarray:
        """Which blocks `nb` named for slots `s` are no block of the slot's stream
        (protocol.md section 5; END_OF_STREAM is none of them). `named`: nb != EOS, when
        the caller has it."""
        if named is None:
            named = nb != EOS
        return named & ((nb % self.stride != s) | (nb >= self.payload.nblocks))

    def _refuse_next(
        self, s: np.ndarray, nb: np.ndarray, bad: np.ndarray, rewind: np.ndarray | None = None
    ) -> None:
        """ProtocolError naming the first slot whose named next block is `bad` (a REWIND
        where `rewind` says so, else a RESULT)."""
        if np.count_nonzero(bad):
            i = int(np.argmax(bad))
            what = "REWIND" if rewind is not None and rewind[i] else "RESULT"
            raise p.ProtocolError(
                f"{what} for slot {int(s[i])} names next_block={int(nb[i])}, which is not "
                f"the next block of its stream (this rank announced "
                f"{int(self.my_next[s[i]])}, {self.payload.nblocks} blocks, "
                f"{self.stride} slots in the call)"
            )

    def _completed(
        self, s: np.ndarray, finished: np.ndarray, now: float, flags: np.ndarray
    ) -> None:
        """Rounds of slots `s` completed; the `finished` ones (no next block) close and
        open the window's next slots. `flags`: their RESULTs' flags: REPAIRED says that
        the round's time includes somebody's repair, CACHED that the RESULT answers this
        rank's own resend (Pacer.answered)."""
        if not np.count_nonzero(flags & _REPAIR_FLAGS):  # (most batches)
            self.pacer.answered(s, now)  # round-time samples, pacing state
        else:
            repaired, cached = (flags & p.FLAG.REPAIRED) != 0, (flags & p.FLAG.CACHED) != 0
            self.pacer.answered(s, now, repaired, cached)
        self.round[s] += 1
        self.stats.rounds += int(s.size)
        self.liveness.progress(s, now)
        self.pacer.started(s, now)  # the next round's packet goes out now (_release)
        if np.count_nonzero(finished):  # finished slots keep their last version
            nxt = self.slots.finish(s[finished])
            if nxt.size:
                self._open(nxt, now)

    def _zero_blocks(self, n: int) -> np.ndarray:
        """n blocks of zeros: the values of padded SKIPs (wire.skip_carries_values), in
        the Scratch, since a build copies them into its frames at once."""
        zeros = self.scratch.take("padded", (n, self.block_values), np.int32)
        zeros.fill(0)
        return zeros

    def _release(self, s: np.ndarray, nb: np.ndarray, ne: np.ndarray) -> None:
        """The next round of slots `s`: block `nb` (exponent `ne`), DATA where it is this
        rank's next non-zero block, else SKIP; in the other shadow-copy version. A SKIP of
        a job of more than SKIP_GROWS_TO_VALUES values per block carries a block of zeros
        (docs/protocol.md section 2: the switch turns a completing SKIP into the RESULT,
        and simple_switch cannot grow a received frame by more than 512 bytes)."""
        new_next = self.my_next[s]  # (a copy: the slots' next blocks before this round)
        is_data = nb == new_next
        data, rows = selection(is_data)
        values = None
        if data:
            new_next[rows] = self._after[nb[rows]]
            # all DATA, to be built in their slots' kept frames (_emit): quantized
            # straight into those frames' values columns, no copy after
            run = self._run_in_place(s) if data == s.size else None
            out = None if run is None else values_columns(self.last_frames[run], self.block_values)
            values = self.payload.values(nb[rows], ne[rows], self.scratch, out)
        extension = is_data
        if self._padded_skips and data < s.size:
            padded = self._zero_blocks(s.size)
            if values is not None:
                padded[is_data] = values
            values, extension = padded, np.ones(s.size, bool)
        self.slot_version[s] ^= 1
        self.block[s] = nb
        self.exponent[s] = ne
        self.my_next[s] = new_next
        msg = _SKIP_OR_DATA[is_data.view(np.uint8)]
        self._emit(s, msg, self.slot_version[s], nb, new_next, values, extension)

    # -- opening slots, disagreements, the end of the call ----------------------------------

    def _open(self, slots: np.ndarray, now: float) -> None:
        """Slots `slots` take part in this call from now on: their announce goes out (the
        window's next slots, or after a fingerprint mismatch every slot not yet open)."""
        self.slots.open(slots)
        self.pacer.started(slots, now)
        self.liveness.progress(slots, now)
        self._announce(slots)

    def _check_fingerprints(
        self, r: Parsed, idx: np.ndarray, s: np.ndarray, announced: np.ndarray, now: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Results of announce rounds carry the switch's fingerprint range. Where ranks
        disagree the slot ends after its announce round on every rank (each rank sees the
        same result). The rank then announces on every slot of the job it has not
        announced on: every rank does (slot 0 is in every call, so every rank learns), so
        every slot of the job completes one announce round on every rank and all slot
        versions stay in step -- whatever each rank's block count (dtype, length,
        encoding, the refusal code). Which slots the others used cannot be known: the
        range names the extreme fingerprints, not the rank with the most blocks (a packed
        int32 tensor has two half-blocks per block of values; dtype codes order the range).
        Returns the results that go on."""
        ai, as_ = idx[announced], s[announced]
        if (
            r.extension is None
            or r.fingerprint is None
            or (r.extension[ai] != p.EXT.FINGERPRINT).any()
        ):
            raise p.ProtocolError(
                f"RESULT of the announce round of slot {int(as_[0])} carries no fingerprint range"
            )
        low, high = r.fingerprint[ai, 0], r.fingerprint[ai, 1]
        differ = low != high
        if not np.count_nonzero(differ):
            return idx, s
        self._note_mismatch(low, high, differ, now)
        ended = as_[differ]
        self.slots.finish(ended)  # nothing waits: every slot is open now
        self.round[ended] += 1
        self.liveness.progress(ended, now)
        keep = np.ones(idx.shape, bool)
        keep[np.flatnonzero(announced)[differ]] = False
        return idx[keep], s[keep]

    def _note_mismatch(
        self, low: np.ndarray, high: np.ndarray, differ: np.ndarray, now: float
    ) -> None:
        """Announce results whose fingerprint range (`low`, `high`) `differ`: keep the
        first range, and announce on every slot of the job not opened yet."""
        if self.mismatch is not None:
            return
        k = int(np.argmax(differ))
        self.mismatch = (int(low[k]), int(high[k]))
        extra = self.slots.unopened()
        if extra.size:
            self.my_next[extra] = EOS
            self._open(extra, now)

    def raise_if_mismatched(self) -> None:
        if self.mismatch is not None:
            low, high = self.mismatch
            raise FingerprintMismatch(
                f"the ranks of job {self.cfg.job} disagree on what they reduce: "
                f"{p.fingerprint_disagreement(low, high)} (the switch saw fingerprints "
                f"{low:#x}..{high:#x}); no rank returns a sum"
            )

    def raise_if_incomplete(self) -> None:
        """Every-rank rounds close a slot only with every sum (silent rounds check it:
        silent.SilentEngine)."""

    def raise_if_overflowed(self) -> None:
        if self.stats.overflowed_blocks:
            raise overflow_error(
                self.stats.overflowed_blocks,
                "the switch flagged the round (FLAG_OVERFLOW), no wrong sum returned",
                self.block_values,
            )

    def final_slot_versions(self, slot_versions: np.ndarray) -> np.ndarray:
        """`slot_versions` (the slots' versions before this call) updated for the next call: a
        slot this call used goes on alternating, an untouched one keeps its version."""
        out = np.asarray(slot_versions, np.uint8).copy()
        touched = self.slots.touched
        out[touched] = (self.slot_version[touched] ^ 1).astype(np.uint8)
        return out
