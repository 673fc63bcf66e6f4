"""The worker's protocol engine for one allreduce (docs/protocol.md sections 5, 6, 13).

It owns no socket: `packets_to_send(now)` hands out frames, `on_frames` / `on_results` /
`on_result` take results in, and `check(now)` turns a slot that makes no progress for
`deadline` seconds into a TimeoutError naming the ranks the switch is waiting for, and
a rank the switch's STATUS replies agree has gone silent into RankSilent sooner. The
caller (the Worker with a raw socket, a unit test with crafted RESULT packets, or a test's
in-process switch) moves the bytes. All per-slot state lives in numpy arrays indexed by
slot, so a batch of results is handled with a fixed number of vectorised operations,
whatever its size.

Per slot: the packet outstanding (its frame, kept for retransmission), the round number,
the shadow-copy version, the block being aggregated, this rank's announced next non-zero
block, when its packet was sent (first and latest transmission) with a timer that backs
off once it was resent, and the last STATUS the switch sent (which ranks the round has
heard from). Which expiries mean a loss: `_due_retransmissions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from p4reduce.job import JobConfig

from . import protocol as p
from .framing import FLAGS_BYTE, Batch, FrameBuilder, Parsed, parse_batch
from .numerics import Output, Payload, from_packed, overflow_error

EOS = p.END_OF_STREAM


_NONE = np.zeros(0, np.int64)


def slot_streams(nonzero: np.ndarray, nblocks: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Slot s's stream is the non-zero blocks b = s (mod S) in order (protocol.md section
    5). Returns `after`, where after[b] is the first non-zero block of b's stream after
    block b (EOS: none), for every block b < nblocks, and each slot's first block (EOS:
    none). On the (rows, S) grid of block numbers a column is a stream, so a running
    minimum up the rows answers for every block at once: no sort, one int32 array of the
    block count (4 bytes per 256-byte block; docs/hostlib.md, "Memory")."""
    rows = -(-nblocks // slots)
    grid = np.full((rows + 1, slots), EOS, np.int32)  # row `rows`: the streams' ends
    grid.reshape(-1)[nonzero] = nonzero
    up = grid[::-1]  # then grid[r, s]: the first non-zero block of column s at row >= r
    np.minimum.accumulate(up, axis=0, out=up)
    return grid.reshape(-1)[slots:], grid[0].astype(np.int64)


@dataclass
class EngineParams:
    """Timing knobs (docs/hostlib.md, "Timers"). Why these defaults:

    * `timeout` is the floor of the retransmission timer: a round trip through a switch on
      this machine is a fraction of a millisecond, so 2 ms never fires before an answer.
    * `initial_timeout` is the timer before anything was measured: the first window is
      S x N packets through a switch of unknown speed (a software one such as bmv2 serves
      thousands of packets/s, not millions: bench/softswitch_pps.py measures it), so
      a few-ms guess would retransmit every slot of a large window.
    * `max_timeout` caps the timer, its doubling and the silence probes: recovery stays
      within a second once the cause (a stalled rank, a congested switch) is gone.
    * `double_after`: a held slot's timer doubles after this many expiries in a row
      (up to 4 timers, see `_backoff_cap`).
    * `window`: at most this many slots of a rank have a packet outstanding; a job with
      more slots starts the next one when one finishes, the lowest first (the same on
      every rank). Why: a switch serves what it queues first in, first out (bmv2), and
      the job with the most packets queued takes that share of it -- a 1 000-slot job
      left a 16-slot job on the same switch 1/60 of it (docs/reliability.md, "Jobs share
      the switch"). 32: a job of 16 slots then keeps a third of a shared switch against
      any other; the bmv2 default job's slots, half softswitch's (64), which runs 32 at
      the same speed.
    """

    timeout: float = 0.002
    initial_timeout: float = 0.2
    max_timeout: float = 1.0
    double_after: int = 1
    deadline: float = 30.0
    window: int = 32


class RttEstimator:
    """Smoothed round time of a slot's round (RFC 6298: SRTT, RTTVAR, RTO = SRTT + 4
    RTTVAR between a floor and a cap), fed only with *clean* rounds (AllreduceEngine.
    _answered): rounds this rank did not retransmit (Karn's rule), that no later packet
    of this rank overtook, and that did not live through a silence probe. Why: a round
    that waited for anybody's retransmission lasts a timeout longer; feeding such rounds
    raised the timer, which lengthened the next waits, up to the cap (5 % loss took 19x
    the lossless time). Kept by the Worker across allreduce calls."""

    def __init__(self) -> None:
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.samples = 0

    def update(self, samples: np.ndarray) -> None:
        if not samples.size:
            return
        x = float(samples.max())  # the batch's slowest clean round: conservative
        self.samples += int(samples.size)
        if self.srtt is None:
            self.srtt, self.rttvar = x, x / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - x)
            self.srtt = 0.875 * self.srtt + 0.125 * x

    def rto(self, floor: float, cap: float, initial: float | None = None) -> float:
        """The retransmission timer; `initial` (at least `floor`) before any sample."""
        if self.srtt is None:
            return min(cap, max(floor, initial if initial is not None else floor))
        return min(cap, max(floor, self.srtt + 4 * self.rttvar))


class SwitchStateLost(RuntimeError):
    """The switch no longer holds the job's slot state (it restarted, or its pipeline was
    replaced) while ranks were mid-job: rounds whose results died with it cannot complete."""


class FingerprintMismatch(ValueError):
    """The ranks of the job disagree on what they reduce (dtype or length): no sum is
    returned, on every rank, with the same message."""


class RankSilent(TimeoutError):
    """The switch's STATUS replies agree that rank(s) `ranks` of job `job` sent nothing
    for longer than a live rank would (AllreduceEngine.check): the rank died, was
    stopped or lost its link. Raised before the deadline; a TimeoutError like it."""

    def __init__(self, message: str, ranks: list[int], job: int, slots: list[int]):
        super().__init__(message)
        self.ranks, self.job, self.slots = ranks, job, slots

    def __reduce__(self):
        return type(self), (str(self), self.ranks, self.job, self.slots)


# When a silent rank is taken for dead (AllreduceEngine._silent_ranks):
SILENT_STATUSES = 3  # STATUS replies since the last progress, all without the rank
SILENT_TIMERS = 5  # of max_timeout, the quiet span once a round of the call completed
SILENT_MIN_SPAN = 2.0  # s, the least quiet span: longer than a process is descheduled


@dataclass
class EngineStats:
    packets_sent: int = 0
    bytes_sent: int = 0
    packets_received: int = 0
    bytes_received: int = 0
    retransmissions: int = 0
    results_ignored: int = 0  # duplicates, cached copies of done rounds, other jobs
    statuses: int = 0  # STATUS replies: a retransmission found the round waiting
    rounds: int = 0
    timeouts_doubled: int = 0
    probes: int = 0  # retransmissions sent as silence probes (one per timer)
    overflowed_blocks: list[int] = field(default_factory=list)


class AllreduceEngine:
    """State machine of all slots of one job for one tensor.

    `start_slot_versions[s]` is the shadow-copy version of slot s's announce round. The first
    allreduce of a job uses 0 (section 6); the Worker continues the alternation across
    calls (a slot that ended in version v starts the next tensor in version 1-v), because
    the switch's bitmap still has every rank's bit set in v: an announce in v would be
    taken for a retransmission and answered with the previous tensor's cached result.
    Each data round's sums go to `output` (numerics.Output: the Worker's result array).
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
    ):
        self.cfg = cfg
        self.payload = payload
        self.params = params or EngineParams()
        self.builder = builder or FrameBuilder(cfg.to_switch())
        self.stats = EngineStats()
        self.rtt = rtt or RttEstimator()
        S = cfg.slot_count
        B = payload.nblocks
        # Slots >= B own no block of this rank. When all ranks agree on B they stay idle;
        # a rank that learns of a disagreement (the fingerprint range) announces on every
        # slot of the job (_check_fingerprints), so every slot completes its announce round.
        self.nslots = n = S
        self._after, first = slot_streams(payload.nonzero, B, S)

        used = np.arange(n) < min(S, B)
        self.active = used & (np.arange(n) < max(1, self.params.window))
        self.waiting = used & ~self.active  # beyond the window: started as others finish
        self.touched = self.active.copy()  # slots this call sent on
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
        self.my_next = first
        self.round = np.zeros(n, np.int64)
        self.sent_at = np.full(n, now)  # first transmission of the round
        self.xmit_at = np.full(n, now)  # latest transmission of its packet
        self.retransmitted = np.zeros(n, bool)
        # Pacing (_due_retransmissions): the latest transmission time of any packet the
        # switch has answered and that packet's round time, the job-level probe timer.
        self.answered_xmit = -np.inf
        self.answered_rtt = 0.0
        self.overtaken_at = np.full(n, np.inf)  # when a later packet was answered
        self.heard = False  # any result in this call yet
        self.probe_at = now + self._silence_timeout()
        self.probes_in_row = 0
        self.last_probe_at = -np.inf
        self.probe_burst = 1  # slots per probe (see _answered)
        self.fresh_at = -np.inf  # latest answer to a first send
        self.result_at = -np.inf  # latest result batch
        self.result_gap: float | None = None  # smoothed time between batches
        self.silence_probed = False  # a silence timer expired since the latest batch
        self.probed = np.zeros(n, bool)  # probe sent, no answer yet
        self.expired_in_row = np.zeros(n, np.int64)  # held timers expired in a row
        self.last_frames = np.zeros((n, p.FRAME_BYTES_WITH_VALUES), np.uint8)
        self.last_lengths = np.zeros(n, np.int64)
        self.last_heard = np.full(n, now)  # last progress (a result)
        self.status_at = np.full(n, -np.inf)  # last STATUS for the round
        self.contributors = np.zeros(n, np.int64)  # its bitmap
        # STATUS replies since the last progress of any slot (_note_statuses): when the
        # first came, how many, and the ranks none of them had heard from
        self.quiet_from = -np.inf
        self.quiet_statuses = 0
        self.quiet_missing = 0
        self.mismatch: tuple[int, int] | None = None  # fingerprint (min, max) if ranks differ
        self.output = output if output is not None else Output(payload)  # the sums
        self._pending: list[Batch] = []
        self._ranks_overflowed: list[int] = []

        self._announce(np.flatnonzero(self.active))

    # -- output --------------------------------------------------------------------------

    def _announce_exponent(self, nxt: np.ndarray) -> np.ndarray:
        out = np.zeros(nxt.shape, np.int64)
        real = nxt != EOS
        out[real] = self.payload.exponent_biased[nxt[real]]
        return out

    def _announce(self, slots: np.ndarray) -> None:
        k = slots.size
        self._emit(
            slots,
            np.full(k, p.MsgType.ANNOUNCE),
            self.slot_version[slots],
            np.full(k, EOS, np.int64),
            self.my_next[slots],
            None,
            np.full(k, p.Extension.FINGERPRINT),
        )

    def _emit(
        self,
        slots: np.ndarray,
        msg_type: np.ndarray,
        slot_version: np.ndarray,
        block: np.ndarray,
        next_block: np.ndarray,
        values: np.ndarray | None,
        extension: np.ndarray,
    ) -> None:
        cols = {
            "protocol": p.PROTOCOL_VERSION,
            "msg_type": msg_type,
            "slot_version": slot_version,
            "flags": np.where(self.continued[slots], int(p.Flag.CONTINUED), 0)
            | (int(p.Flag.PACKED) if self.cfg.encoding == p.Encoding.PACKED else 0),
            "job": self.cfg.job,
            "slot": slots,
            "rank": self.cfg.rank,
            "next_exponent": self._announce_exponent(next_block),
            "epoch": self.cfg.epoch,
            "block": block,
            "next_block": next_block,
        }
        batch = self.builder.build(cols, extension, values, self.payload.fingerprint)
        self.last_frames[slots] = batch.frames
        self.last_lengths[slots] = batch.lengths
        self._pending.append(batch)

    def packets_to_send(self, now: float, expire: bool = True) -> Batch:
        """New packets released by results since the last call, plus (with `expire`)
        retransmissions of every active slot whose timer expired (same frame,
        FLAG_RETRANSMIT set). The caller passes expire=False while received frames may
        still be waiting: a result sitting in the ring is not a loss."""
        due = self._due_retransmissions(now) if expire else _NONE
        if due.size:
            frames = self.last_frames[due]
            frames[:, FLAGS_BYTE] |= int(p.Flag.RETRANSMIT)
            self._pending.append(Batch(frames, self.last_lengths[due].copy()))
            self.stats.retransmissions += int(due.size)
            # only a round the switch said it holds backs off: a resend that got no answer
            # was lost, and RACK finds it again as fast as the first loss
            again = due[self._held()[due]]
            self.expired_in_row[again] += 1
            self.stats.timeouts_doubled += int(
                (self.expired_in_row[again] >= self.params.double_after).sum()
            )
            self.retransmitted[due] = True
            self.xmit_at[due] = now
            self.overtaken_at[due] = np.inf
        out = Batch.concat(self._pending)
        self._pending = []
        self.stats.packets_sent += len(out)
        self.stats.bytes_sent += int(out.lengths.sum())
        return out

    # -- input ---------------------------------------------------------------------------

    def on_frames(self, frames: np.ndarray, lengths: np.ndarray, now: float) -> None:
        """Raw received frames (rows of a receive batch)."""
        parsed = parse_batch(frames, lengths)
        self.stats.results_ignored += parsed.rejected
        self.stats.packets_received += int(np.asarray(lengths).shape[0])
        self.stats.bytes_received += int(np.asarray(lengths).sum())
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
            p.Extension.VALUES
            if values is not None
            else p.Extension.FINGERPRINT
            if fingerprint is not None
            else p.Extension.STATUS
            if header.msg_type == p.MsgType.STATUS
            else p.Extension.NONE
        )
        cols = {name: np.array([v], np.int64) for name, v in zip(p.FIELD_NAMES, header)}
        vals = np.zeros((1, p.BLOCK_VALUES), np.int32)
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
        c = r.cols
        n = int(r.has_values.shape[0])
        slot = c["slot"]
        ours = (
            (c["protocol"] == p.PROTOCOL_VERSION)
            & (c["job"] == self.cfg.job)
            & (c["epoch"] == self.cfg.epoch)
            & (c["rank"] == self.cfg.rank)
            & (slot < self.nslots)
        )
        lost = ours & ((c["flags"] & p.Flag.STATE_LOST) != 0)
        if lost.any():
            slots = sorted({int(x) for x in slot[lost]})
            raise SwitchStateLost(
                f"the switch lost the state of job {self.cfg.job} (epoch {self.cfg.epoch}) "
                f"on slot(s) {slots[:8]}{' ...' if len(slots) > 8 else ''}: it restarted or "
                f"its pipeline was replaced while the job ran, and rounds whose results died "
                f"with it cannot complete; delete the job and create it again"
            )
        answers = ours & self.active[np.minimum(slot, self.nslots - 1)]
        answers[answers] &= (c["slot_version"][answers] == self.slot_version[slot[answers]]) & (
            c["block"][answers] == self.block[slot[answers]]
        )
        status = answers & (c["msg_type"] == p.MsgType.STATUS)
        if status.any() and r.contributors is not None:
            self.status_at[slot[status]] = now
            self.contributors[slot[status]] = r.contributors[status]
            self.stats.statuses += int(status.sum())
            self._note_statuses(r.contributors[status], now)
        idx = np.flatnonzero(answers & (c["msg_type"] == p.MsgType.RESULT))
        s = slot[idx]
        if idx.size > 1:  # a slot answered twice in one batch
            s, first = np.unique(s, return_index=True)
            idx = idx[first]
        self.stats.results_ignored += n - int(idx.size) - int(status.sum())
        if not idx.size:
            return
        self.continued[s] = True
        announced = self.block[s] == EOS
        if announced.any():
            idx, s = self._check_fingerprints(r, idx, s, announced, now)
            if not idx.size:
                return
        block = self.block[s]
        data_round = block != EOS
        if data_round.any():
            di, ds = idx[data_round], s[data_round]
            if not r.has_values[di].all():
                bad = int(ds[~r.has_values[di]][0])
                raise p.ProtocolError(
                    f"RESULT for slot {bad} block {int(self.block[bad])} carries no values"
                )
            blocks = self.block[ds]
            self.output.store(
                blocks,
                from_packed(r.values[di], self.cfg.worker_count)
                if self.cfg.encoding == p.Encoding.PACKED
                else r.values[di],
                self.exponent[ds],
            )
            over = (c["flags"][di] & p.Flag.OVERFLOW) != 0
            if over.any():
                self.stats.overflowed_blocks.extend(int(b) for b in blocks[over])

        nb = c["next_block"][idx]
        ne = c["next_exponent"][idx]
        S = self.cfg.slot_count
        done = nb == EOS
        cont = ~done
        bad = cont & (
            (nb % S != s)
            | (nb >= self.payload.nblocks)
            | (data_round & (nb <= block))
            | (nb > self.my_next[s])
        )
        if bad.any():
            i = int(np.argmax(bad))
            raise p.ProtocolError(
                f"RESULT for slot {int(s[i])} names next_block={int(nb[i])}, which is not "
                f"the next block of its stream (this rank announced {int(self.my_next[s[i]])}"
                f", {self.payload.nblocks} blocks, {S} slots)"
            )
        self._answered(s, now)  # round-time samples, pacing state
        self.round[s] += 1
        self.stats.rounds += int(idx.size)
        self.last_heard[s] = now
        self.sent_at[s] = now
        self.xmit_at[s] = now
        self.retransmitted[s] = False
        self.expired_in_row[s] = 0
        self.active[s[done]] = False  # finished slots keep their last version
        if done.any():
            self._start_waiting(int(done.sum()), now)
        if not cont.any():
            return
        s, nb, ne = s[cont], nb[cont], ne[cont]
        is_data = nb == self.my_next[s]
        new_next = self.my_next[s].copy()
        if is_data.any():
            new_next[is_data] = self._after[nb[is_data]]
        values = self.payload.values(nb[is_data], ne[is_data]) if is_data.any() else None
        self.slot_version[s] ^= 1
        self.block[s] = nb
        self.exponent[s] = ne
        self.my_next[s] = new_next
        msg = np.where(is_data, p.MsgType.DATA, p.MsgType.SKIP)
        self._emit(s, msg, self.slot_version[s], nb, new_next, values, is_data)

    # -- completion ----------------------------------------------------------------------

    def _start_waiting(self, count: int, now: float) -> None:
        """`count` slots finished: the next `count` waiting ones (the lowest: every rank
        starts the same) announce, as at the start of the call (`EngineParams.window`)."""
        start = np.flatnonzero(self.waiting)[:count]
        if start.size:
            self._open(start, now)

    def _open(self, slots: np.ndarray, now: float) -> None:
        """Slots `slots` take part in this call from now on: their announce goes out (the
        window's next slots, or after a fingerprint mismatch every slot not yet open)."""
        self.waiting[slots] = False
        self.active[slots] = self.touched[slots] = True
        self.sent_at[slots] = self.xmit_at[slots] = self.last_heard[slots] = now
        self._announce(slots)

    @property
    def done(self) -> bool:
        return not self.active.any() and not self.waiting.any()

    def next_timer(self) -> float:
        """When packets_to_send may next retransmit without a result arriving first (inf
        when done): the earliest RACK deadline of an overtaken slot, held timer of a held
        one, or the silence probe."""
        if self.done:
            return float("inf")
        held = self._held()
        free = self.active & ~held
        t = float("inf")
        if free.any():
            t = max(float(self.xmit_at[free].min()) + self._recent_timeout(), self.probe_at)
        o = self._overtaken() & ~held
        if o.any():
            t = min(t, float(self._lost_at(o).min()))
        if held.any():
            t = min(t, float(self._held_until(held).min()))
        return t

    # -- pacing: which expired timers mean a loss -----------------------------------------

    def _base_timeout(self) -> float:
        prm = self.params
        return self.rtt.rto(prm.timeout, prm.max_timeout, prm.initial_timeout)

    def _overtaken(self) -> np.ndarray:
        """Active slots whose packet was sent before the latest packet the switch answered."""
        return self.active & (self.xmit_at < self.answered_xmit)

    def _held(self) -> np.ndarray:
        """Active slots whose latest transmission the switch holds: a STATUS for the round
        came after it (protocol.md section 13), so the round waits for other ranks (or
        its result to this rank was lost), not for this rank's packet."""
        return self.active & (self.status_at > self.xmit_at)

    def _held_until(self, slots: np.ndarray) -> np.ndarray:
        """When held `slots` (mask) ask again: one `_recent_timeout` after the STATUS,
        doubled for every time it expired in a row since `double_after` (up to
        `_backoff_cap`): a round that waits for another rank's retransmission is not
        hammered, and a result lost on its way to this rank is fetched from the
        switch's cache within a few round times."""
        doublings = np.maximum(self.expired_in_row[slots] - self.params.double_after + 1, 0)
        wait = np.minimum(
            self._recent_timeout() * 2.0 ** np.minimum(doublings, 30), self._backoff_cap()
        )
        return self.status_at[slots] + wait

    def _lost_at(self, slots: np.ndarray) -> np.ndarray:
        """When overtaken `slots` (mask) count as lost: RACK's deadline, the same for a
        first send and for a retransmission (its latest transmission: one that got no
        STATUS was lost again, as likely as the first)."""
        return np.maximum(
            self._lost_after(self.xmit_at[slots]),
            self.overtaken_at[slots] + self._reorder_allowance(),
        )

    def _recent_timeout(self) -> float:
        """The timer of a slot nothing can overtake (silence probes, held rounds): twice
        the latest answered round, between the floor and the retransmission timer. Why
        not the timer alone: it is smoothed over rounds that queued behind a whole
        window, while a call's tail of a few slots runs at the switch's idle speed --
        there a lossy round waited one full timer (20x its own time) per attempt."""
        base = self._base_timeout()
        if self.answered_rtt <= 0:
            return base
        return min(base, max(self.params.timeout, 2 * self.answered_rtt))

    def _backoff_cap(self) -> float:
        """A slot's timer doubles up to 4 timers (and max_timeout): enough to stop
        resending into a round that waits for somebody else, short enough that a resent
        packet lost again is found within a few round times."""
        return min(self.params.max_timeout, 4 * self._base_timeout())

    def _lost_after(self, xmit: np.ndarray) -> np.ndarray:
        """RACK's deadline for packets overtaken by the latest answered one: as long as
        that packet's round took, plus a reordering allowance (ranks emit a batch's
        packets in slot order, so rounds of one batch complete in a different order than
        this rank sent them)."""
        return xmit + self.answered_rtt + self._reorder_allowance()

    def _reorder_allowance(self) -> float:
        srtt = self.rtt.srtt if self.rtt.srtt is not None else self.answered_rtt
        return max(self.params.timeout, 0.5 * srtt)

    def _due_retransmissions(self, now: float) -> np.ndarray:
        """Slots to retransmit now. An expired timer alone does not mean a loss: the round
        may wait for a rank that is behind (start-up skew, a descheduled process) or for a
        switch working through a large window, and retransmitting then only adds load.
        Frames are not reordered between a worker and the switch (section 13), so a slot
        is taken for lost when the switch answered a packet this rank transmitted after
        it and its round has taken longer than that packet's plus a reordering allowance
        (TCP RACK's rule; after a stall, rounds answered late do not make the ones still
        on their way look lost) -- a retransmission too, by its own transmission time.
        A slot the switch answered with a STATUS since its latest transmission is held:
        it waits for its backed-off timer instead (`_held_until`), however often later
        packets overtake it. While nothing transmitted later was answered, the job waits
        as a whole: one packet per silence timer goes out -- the lowest slot older than
        one timer and not held, the same on every rank, so a round that lost packets of
        several ranks completes -- and the silence timer doubles up to max_timeout until
        a result arrives. A probe also ends a tail loss (nothing left to overtake it)."""
        held = self._held()
        lost = self._overtaken() & ~held
        if lost.any():
            lost[lost] = self._lost_at(lost) <= now
        if held.any():
            held[held] = self._held_until(held) <= now
        if lost.any() or held.any():
            return np.flatnonzero(lost | held)
        expired = self.active & ~self._held() & (self.xmit_at + self._recent_timeout() <= now)
        if now < self.probe_at or not expired.any():
            return _NONE
        if now >= self.probe_at and self.probes_in_row:
            # the last probes went unanswered for a whole silence: halve the burst (a
            # switch that drops bursts must not get ever larger ones)
            self.probe_burst = max(1, self.probe_burst // 2)
        probe = np.flatnonzero(expired)[: self.probe_burst]
        # (a probe due at the latest result's time is slow start's, not a silence's)
        self.silence_probed |= self.probe_at > self.result_at
        self.probed[probe] = True
        self.probes_in_row += 1
        self.stats.probes += int(probe.size)
        self.last_probe_at = now
        self.probe_at = now + min(
            self.params.max_timeout, self._silence_timeout() * 2**self.probes_in_row
        )
        return probe

    def _silence_timeout(self) -> float:
        """How long the job may go without any result before a probe. Once results have
        come in this call: one `_recent_timeout` (a stall of a rank or the switch, or
        every outstanding round stuck on a loss, as in a call's tail). Before the first
        result: a switch serving a fresh window of S x N packets, or ranks that have not
        started the call yet, are the likely cause, not the loss of every announce; so
        the wait doubles with every outstanding slot beyond the first, up to
        `initial_timeout` (a one-slot call is probed after one timer)."""
        prm = self.params
        base = self._base_timeout()
        if self.heard:
            # a slow switch answers a large window one round at a time: silence is a gap
            # well beyond the usual one between results, not just one timer
            gap = 4 * self.result_gap if self.result_gap is not None else 0.0
            return min(prm.max_timeout, max(self._recent_timeout(), gap))
        outstanding = int(self.active.sum())
        grown = base * 2.0 ** min(max(outstanding - 1, 0), 30)
        return min(prm.max_timeout, max(base, min(prm.initial_timeout, grown)))

    def _answered(self, s: np.ndarray, now: float) -> None:
        """Book-keeping for a batch of results that answered slots `s`: feed the
        round-time estimator with the clean rounds, advance `answered_xmit`, reset the
        silence probe. A round is clean when this rank did
        not retransmit it (Karn), no packet this rank transmitted later was answered in
        an earlier batch (it then waited for somebody's retransmission), and it did not
        live through a silence probe (start-up skew, a stalled rank: not a round time)."""
        xmit = self.xmit_at[s]
        clean = (
            ~self.retransmitted[s]
            & (xmit >= self.answered_xmit)
            & (self.sent_at[s] > self.last_probe_at)
        )
        self.rtt.update(now - self.sent_at[s[clean]])
        # Only answers to packets sent once move the overtaking mark: an answered
        # retransmission (a probe into a round that a late rank then completed, a cached
        # copy) says nothing about the packets sent before it, which may be waiting for
        # that same rank; taking it made every older slot look lost at once.
        fresh = ~self.retransmitted[s]
        if fresh.any():
            latest = float(xmit[fresh].max())
            if latest >= self.answered_xmit:
                self.answered_xmit, self.answered_rtt = latest, now - latest
        # The reordering allowance counts from when a slot was first overtaken, not from
        # its own transmission: a rank descheduled between two batches sends them far
        # apart, yet the rounds complete when the *last* rank's packets arrive, so the
        # earlier one may be answered right after the later (seen: spurious resends).
        self.overtaken_at[s] = np.inf
        newly = self._overtaken() & np.isinf(self.overtaken_at)
        newly[s] = False
        self.overtaken_at[newly] = now
        if self.heard and not self.silence_probed:
            # a gap a silence probe ended is the silence timer's own length, not the
            # switch's pace: fed back, it grew the timer with every probe (a call's tail
            # of one slot, every round lossy, waited up to 2 s per round)
            gap = now - self.result_at
            self.result_gap = (
                gap if self.result_gap is None else 0.875 * self.result_gap + 0.125 * gap
            )
        self.result_at = now
        self.silence_probed = False
        self.heard = True
        self.probes_in_row = 0
        probes_answered = int(self.probed[s].sum())
        self.probed[s] = False
        if fresh.any():
            self.fresh_at = now
        if self.fresh_at >= self.last_probe_at or not probes_answered:
            # rounds complete on their own (since the probe, at least one first send
            # was answered): a slow or late switch or rank, not a loss of everything
            self.probe_burst = 1
            self.probe_at = now + self._silence_timeout()
        else:
            # Only probes are answered since they went out: the rounds were lost, not
            # waiting (a late rank's round answers a probe with STATUS, not a result) --
            # e.g. a switch that dropped a burst, at density 0 where no later round can
            # overtake them.
            # Probe again at once, two per answered probe (TCP's slow start: the burst
            # doubles while answers come back, and grows no faster than they do when
            # the switch drops again). Seen on bmv2 with one probe per timer: 104 s for
            # 1024 announces.
            self.probe_burst = min(2 * probes_answered, self.nslots)
            self.probe_at = now

    @property
    def deadline(self) -> float:
        """When the slowest-progressing active slot times out (inf when done)."""
        if self.done:
            return float("inf")
        return float(self.last_heard[self.active].min()) + self.params.deadline

    def _note_statuses(self, bitmaps: np.ndarray, now: float) -> None:
        """Count STATUS replies (answers to this rank's retransmissions, for the
        outstanding rounds) since the last progress of any slot, and keep the ranks that
        none of them had heard from. A result on any slot starts the count again."""
        everyone = (1 << self.cfg.worker_count) - 1
        if self.quiet_from < float(self.last_heard.max()):
            self.quiet_from, self.quiet_statuses, self.quiet_missing = now, 0, everyone
        self.quiet_statuses += int(bitmaps.size)
        self.quiet_missing &= everyone & ~int(np.bitwise_or.reduce(bitmaps))

    def _silent_ranks(self, now: float) -> list[int]:
        """The ranks to take for dead now (empty: none). The rule: no slot of this call
        made progress for a quiet span, and since the last progress the switch answered
        at least SILENT_STATUSES of this rank's retransmissions with a STATUS, none of
        which had heard from these ranks. Why it spares a live rank:

        * a live rank in the call resends its waiting packet at least once per
          `max_timeout` (the cap of its timers and silence probes), so over
          SILENT_TIMERS x max_timeout (5 s by default) it would have reached the switch
          several times; a descheduled process, start skew, a busy switch (which still
          answers rounds) or lost frames do not keep it out that long, and a loss of
          every one of those resends is as unlikely as the loss of SILENT_TIMERS - 1
          frames in a row. With a small `max_timeout` the span is still at least
          SILENT_MIN_SPAN: a process on a loaded host may get no CPU for a good part
          of a second;
        * the STATUS replies show the switch is up and reaches this rank (else the
          deadline's error says the switch did not answer), and that the silent ranks
          are the same in all of them;
        * before any round of the call completed, the silent rank may not have started
          the call at all (it computes, writes a checkpoint): the span is then half the
          deadline (at least the span above), so only a rank later than that is named.
          Once a round completed, every rank took part in the call (a round needs all).
        """
        if self.quiet_statuses < SILENT_STATUSES or not self.quiet_missing:
            return []
        quiet = float(self.last_heard.max())
        if self.quiet_from < quiet:
            return []  # progress since those replies
        span = max(SILENT_TIMERS * self.params.max_timeout, SILENT_MIN_SPAN)
        if not self.round.any():
            span = max(span, self.params.deadline / 2)
        if now - quiet < span:
            return []
        return self._ranks_in(self.quiet_missing)

    def _ranks_in(self, bitmap: int) -> list[int]:
        return [k for k in range(self.cfg.worker_count) if (bitmap >> k) & 1]

    def _waited_for(self) -> list[int]:
        """The ranks the switch has not heard from, by the latest STATUS of every active
        slot that had one since its last result: the ranks missing from all of them, or
        if no rank is, from any (the rounds wait for different ranks). A stall's STATUS
        replies arrive on the slots this rank resends (the probed lowest slot), not
        necessarily on the slots that stalled first."""
        reported = self.active & (self.status_at > self.last_heard)
        if not reported.any():
            return []
        everyone = (1 << self.cfg.worker_count) - 1
        heard = self.contributors[reported]
        always = everyone & ~int(np.bitwise_or.reduce(heard))
        anywhere = everyone & ~int(np.bitwise_and.reduce(heard))
        return self._ranks_in(always or anywhere)

    def _stalled_parts(self, slots: np.ndarray) -> str:
        parts = []
        for sl in slots[:8]:
            blk = int(self.block[sl])
            what = "announce" if blk == EOS else f"block {blk}"
            if self.status_at[sl] > self.last_heard[sl]:
                waits = self._ranks_in(~int(self.contributors[sl]))
                heard = f"the switch waits for rank(s) {waits}"
            else:
                heard = "no STATUS since its last result"
            parts.append(f"slot {int(sl)} round {int(self.round[sl])} ({what}: {heard})")
        more = f" and {slots.size - 8} more" if slots.size > 8 else ""
        return "; ".join(parts) + more

    def check(self, now: float) -> None:
        """Raise RankSilent when the switch's STATUS replies agree that some rank has been
        silent for longer than a live one would be (`_silent_ranks`), TimeoutError when
        an active slot had no result for `deadline` seconds.

        Progress, not elapsed time: a slow but healthy allreduce (heavy loss, a busy
        switch) goes on as long as every slot keeps completing rounds. Both messages
        name the ranks the switch has not heard from (its STATUS replies to this rank's
        retransmissions, on whichever active slots they came) -- usually the rank that
        died -- or the deadline's says that the switch itself did not answer."""
        if self.done:
            return
        job, me = self.cfg.job, self.cfg.rank
        silent = self._silent_ranks(now)
        if silent:
            waiting = np.flatnonzero(self.active)
            quiet = now - float(self.last_heard.max())
            raise RankSilent(
                f"allreduce of job {job} rank {me}: rank(s) {silent} sent nothing for "
                f"{quiet:.1f}s: the switch answered {self.quiet_statuses} of this rank's "
                f"retransmissions since the last progress, none had heard from rank(s) "
                f"{silent}: stopped, crashed or unreachable? {waiting.size} slot(s) wait: "
                + self._stalled_parts(waiting),
                silent,
                job,
                [int(x) for x in waiting],
            )
        stalled = np.flatnonzero(self.active & (now - self.last_heard >= self.params.deadline))
        if not stalled.size:
            return
        ranks = self._waited_for()
        if ranks:
            cause = (
                f"the switch has not heard from rank(s) {ranks} in the waiting rounds: "
                f"stopped, crashed or unreachable?"
            )
        else:
            cause = (
                "the switch did not answer this rank's retransmissions: is it running, "
                "and is the job still installed?"
            )
        raise TimeoutError(
            f"allreduce of job {job} rank {me}: {stalled.size} of "
            f"{int(self.touched.sum())} slots made no progress for {self.params.deadline:.3f}s"
            f" ({self.stats.retransmissions} retransmissions): {cause} Stalled: "
            + self._stalled_parts(stalled)
        )

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
        int32 tensor has two half-blocks per 64 values; dtype codes order the range).
        Returns the results that go on."""
        ai, as_ = idx[announced], s[announced]
        if (
            r.extension is None
            or r.fingerprint is None
            or (r.extension[ai] != p.Extension.FINGERPRINT).any()
        ):
            raise p.ProtocolError(
                f"RESULT of the announce round of slot {int(as_[0])} carries no fingerprint range"
            )
        low, high = r.fingerprint[ai, 0], r.fingerprint[ai, 1]
        differ = low != high
        if not differ.any():
            return idx, s
        if self.mismatch is None:
            k = int(np.argmax(differ))
            self.mismatch = (int(low[k]), int(high[k]))
            extra = np.flatnonzero(~self.touched)
            if extra.size:
                self.my_next[extra] = EOS
                self._open(extra, now)
        ended = as_[differ]
        self.active[ended] = False
        self.round[ended] += 1
        self.last_heard[ended] = now
        keep = np.ones(idx.shape, bool)
        keep[np.flatnonzero(announced)[differ]] = False
        return idx[keep], s[keep]

    def raise_if_mismatched(self) -> None:
        if self.mismatch is not None:
            low, high = self.mismatch
            raise FingerprintMismatch(
                f"the ranks of job {self.cfg.job} disagree on what they reduce: "
                f"{p.fingerprint_disagreement(low, high)} (the switch saw fingerprints "
                f"{low:#x}..{high:#x}); no rank returns a sum"
            )

    def raise_if_overflowed(self) -> None:
        if self.stats.overflowed_blocks:
            raise overflow_error(
                self.stats.overflowed_blocks,
                "the switch flagged the round (FLAG_OVERFLOW), no wrong sum returned",
            )

    def final_slot_versions(self, slot_versions: np.ndarray) -> np.ndarray:
        """`slot_versions` (the slots' versions before this call) updated for the next call: a
        slot this call used goes on alternating, an untouched one keeps its version."""
        out = np.asarray(slot_versions, np.uint8).copy()
        out[self.touched] = (self.slot_version[self.touched] ^ 1).astype(np.uint8)
        return out
