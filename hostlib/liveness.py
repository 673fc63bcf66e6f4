"""Is every rank of the job still there (docs/protocol.md section 13, docs/reliability.md)?
The stall deadline and the earlier naming of a silent rank, from the switch's STATUS
replies.

Why its own unit: a stall is judged from progress (results) and from what the switch says
it has heard (STATUS bitmaps), never from the timers that decide resends (timers.py), and
its errors must name the missing rank on every survivor -- the message is most of it.
"""

from __future__ import annotations

import math

import numpy as np

from . import protocol as p
from p4reduce.job import JobConfig
from .smallarrays import least
from .slots import SlotWindow
from .timers import EngineParams, Pacer

EOS = p.END_OF_STREAM


class RankSilent(TimeoutError):
    """The switch's STATUS replies agree that rank(s) `ranks` of job `job` sent nothing
    for longer than a live rank would (Liveness.check): the rank died, was
    stopped or lost its link. Raised before the deadline; a TimeoutError like it."""

    def __init__(self, message: str, ranks: list[int], job: int, slots: list[int]):
        super().__init__(message)
        self.ranks, self.job, self.slots = ranks, job, slots

    def __reduce__(self):
        return type(self), (str(self), self.ranks, self.job, self.slots)


# When a silent rank is taken for dead (Liveness._silent_ranks):
SILENT_STATUSES = 3  # STATUS replies since the last progress, all without the rank
SILENT_TIMERS = 10  # of max_timeout, the least quiet span once a round of the call completed
SILENT_MIN_SPAN = 2.0  # s, the least quiet span: longer than a process is descheduled
# the chance, at the loss this rank's own resends meet, that a live rank behind by a round
# stays unheard for the whole quiet span (quiet_timers)
SILENT_MISS = 1e-5


def quiet_timers(through: float) -> int:
    """Timers (of max_timeout) a quiet span lasts when a share `through` of round trips
    between a rank and the switch come through: at least SILENT_TIMERS, more as fewer
    do. Why: a live rank that lost the result of the round before is missing from every
    STATUS of the round waited for until one of its resends and the cached answer to it
    both come through -- a round trip -- counted as one try per max_timeout (it makes
    PROBES_PER_TIMER: the margin covers a rank whose own link is lossier). At 20 % loss
    each way 64 % of tries do, and a span of 5 timers left a live rank of 8 unheard in
    most jobs; the span is as many tries as leave it unheard with a chance below
    SILENT_MISS (12 at 20 % loss), never fewer than SILENT_TIMERS (a share measured on
    a few resends may miss the loss)."""
    if through >= 1.0:
        return SILENT_TIMERS
    if through <= 0.0:
        return 1 << 20  # nothing comes through: only the deadline decides
    return max(SILENT_TIMERS, math.ceil(math.log(SILENT_MISS) / math.log1p(-through)))


class Liveness:
    """Progress and STATUS book-keeping of one call's slots: when each slot last made
    progress (a result), which ranks the switch had heard from in its round's latest
    STATUS, and the STATUS replies since the last progress of any slot. `round` and
    `block` are the engine's per-slot arrays (read for the messages)."""

    def __init__(
        self,
        cfg: JobConfig,
        params: EngineParams,
        slots: SlotWindow,
        pacer: Pacer,
        round_: np.ndarray,
        block: np.ndarray,
        now: float,
    ):
        self.cfg, self.params, self.slots, self.pacer = cfg, params, slots, pacer
        self.round, self.block = round_, block
        self.last_heard = np.full(slots.count, now, np.float64)  # last progress (a result)
        # at most the earliest last_heard (progress only moves a slot's later): while the
        # deadline is not due past it, no slot has stalled (`check`, every turn)
        self._heard_floor = now
        self.contributors = np.zeros(slots.count, np.int64)  # the latest STATUS's bitmap
        # the leaf role: the latest STATUS was the spine's, relayed (its bitmap: leaves)
        self.above = np.zeros(slots.count, bool)
        # STATUS replies since the last progress of any slot (_note_statuses): when the
        # first came, how many, and the ranks none of them had heard from
        self.quiet_from = -np.inf
        self.quiet_statuses = 0
        self.quiet_missing = 0
        # this rank's retransmissions so far (as of the latest check), and at the last
        # progress of any slot: every answer to the ones since is one of those STATUS
        # replies, as an answer that is a result is progress (quiet_timers)
        self.resends = 0
        self.resends_at_progress = 0

    def progress(self, slots: np.ndarray, now: float) -> None:
        """`slots` completed a round (or opened): the deadline counts from now."""
        self.last_heard[slots] = now
        self.resends_at_progress = self.resends

    def statuses(
        self, slots: np.ndarray, bitmaps: np.ndarray, now: float, relayed: np.ndarray | None = None
    ) -> None:
        """STATUS replies for `slots`' rounds, each with the ranks the switch has heard.
        In the leaf role a `relayed` one is the spine's: the round is complete at this
        rank's leaf (every rank there is heard) and its bitmap counts the job's leaves, so
        it is kept apart (`above`) and read as every rank of the leaf heard."""
        if relayed is not None and np.count_nonzero(relayed):
            bitmaps = np.where(relayed, self._everyone(), bitmaps)
        self.contributors[slots] = bitmaps
        self.above[slots] = relayed if relayed is not None else False
        self._note_statuses(bitmaps, now)

    def _everyone(self) -> int:
        """Every rank a STATUS bitmap can name: the job's, or in the leaf role the ranks
        of this rank's leaf (a leaf's STATUS names them by their index there)."""
        n = len(self.cfg.leaf_ranks) if self.cfg.leaf_ranks else self.cfg.worker_count
        return (1 << n) - 1

    @property
    def deadline(self) -> float:
        """When the slowest-progressing active slot times out (inf when done)."""
        if self.slots.done:
            return float("inf")
        return least(self.last_heard[self.slots.active]) + self.params.deadline

    def _note_statuses(self, bitmaps: np.ndarray, now: float) -> None:
        """Count STATUS replies (answers to this rank's retransmissions, for the
        outstanding rounds) since the last progress of any slot, and keep the ranks that
        none of them had heard from. A result on any slot starts the count again."""
        everyone = self._everyone()
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
          SILENT_TIMERS x max_timeout (10 s by default) it would have reached the switch
          several times; a descheduled process, start skew or a busy switch (which
          still answers rounds) do not keep it out that long. Loss can: a rank that
          lost the previous round's result is missing from the waited round until a
          resend of its own and the answer to it both come through, so the span grows
          with the share of this rank's resends left unanswered (quiet_timers: 10 s up
          to 10 % loss each way, 12 s at 20 %). With a small `max_timeout` the span is
          still at least SILENT_MIN_SPAN: a process on a loaded host may get no CPU for
          a good part of a second;
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
        span = max(quiet_timers(self._round_trips()) * self.params.max_timeout, SILENT_MIN_SPAN)
        if not np.count_nonzero(self.round):
            span = max(span, self.params.deadline / 2)
        if now - quiet < span:
            return []
        return self._ranks_in(self.quiet_missing)

    def _round_trips(self) -> float:
        """The share of round trips through this rank's links that come through, as its
        resends since the last progress measure it: the share a STATUS answered,
        squared (a STATUS says a resend reached the switch; the drop simulator, like a
        real link, may spare a STATUS while a result copy takes both ways' loss). 1 with
        none sent: no sign of loss."""
        sent = self.resends - self.resends_at_progress
        return 1.0 if sent <= 0 else min(1.0, self.quiet_statuses / sent) ** 2

    def _ranks_in(self, bitmap: int) -> list[int]:
        """The job-wide ranks of a bitmap's bits (in the leaf role: by index on the leaf)."""
        ranks = self.cfg.leaf_ranks or range(self.cfg.worker_count)
        return [r for k, r in enumerate(ranks) if (bitmap >> k) & 1]

    def _waited_for(self) -> list[int]:
        """The ranks the switch has not heard from, by the latest STATUS of every active
        slot that had one since its last result: the ranks missing from all of them, or
        if no rank is, from any (the rounds wait for different ranks). A stall's STATUS
        replies arrive on the slots this rank resends (the probed lowest slot), not
        necessarily on the slots that stalled first."""
        reported = self.slots.active & (self.pacer.status_at > self.last_heard)
        if not np.count_nonzero(reported):
            return []
        everyone = self._everyone()
        heard = self.contributors[reported]
        always = everyone & ~int(np.bitwise_or.reduce(heard))
        anywhere = everyone & ~int(np.bitwise_and.reduce(heard))
        return self._ranks_in(always or anywhere)

    def _stalled_parts(self, slots: np.ndarray) -> str:
        parts = []
        for sl in slots[:8]:
            blk = int(self.block[sl])
            what = "announce" if blk == EOS else f"block {blk}"
            if self.pacer.status_at[sl] > self.last_heard[sl] and self.above[sl]:
                heard = "its leaf has every rank's packet, the spine waits for other leaves"
            elif self.pacer.status_at[sl] > self.last_heard[sl]:
                waits = self._ranks_in(~int(self.contributors[sl]))
                heard = f"the switch waits for rank(s) {waits}"
            else:
                heard = "no STATUS since its last result"
            parts.append(f"slot {int(sl)} round {int(self.round[sl])} ({what}: {heard})")
        more = f" and {slots.size - 8} more" if slots.size > 8 else ""
        return "; ".join(parts) + more

    def check(self, now: float, retransmissions: int) -> None:
        """Raise RankSilent when the switch's STATUS replies agree that some rank has been
        silent for longer than a live one would be (`_silent_ranks`), TimeoutError when
        an active slot had no result for `deadline` seconds.

        Progress, not elapsed time: a slow but healthy allreduce (heavy loss, a busy
        switch) goes on as long as every slot keeps completing rounds. Both messages
        name the ranks the switch has not heard from (its STATUS replies to this rank's
        retransmissions, on whichever active slots they came) -- usually the rank that
        died -- or the deadline's says that the switch itself did not answer."""
        if self.slots.done:
            return
        self.resends = retransmissions
        job, me = self.cfg.job, self.cfg.rank
        silent = self._silent_ranks(now)
        if silent:
            waiting = np.flatnonzero(self.slots.active)
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
        # compared with the sum last progress + deadline, as `deadline` (the wake-up time)
        # computes it: now - last progress can round below the deadline at exactly that
        # time, and a loop woken then found nothing due and was woken again, forever
        if now < self._heard_floor + self.params.deadline:
            return  # no slot's last progress is a deadline old
        self._heard_floor = float(self.last_heard.min())
        stalled = np.flatnonzero(
            self.slots.active & (now >= self.last_heard + self.params.deadline)
        )
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
            f"{int(self.slots.touched.sum())} slots made no progress for "
            f"{self.params.deadline:.3f}s"
            f" ({retransmissions} retransmissions): {cause} Stalled: "
            + self._stalled_parts(stalled)
        )
