"""When a worker sends a packet again (docs/protocol.md section 13, docs/hostlib.md
"Timers"): the timing knobs, the round-time estimator, and the `Pacer` that decides, for
every outstanding slot of a call, whether an expired timer means a loss.

Why its own unit: an expired timer alone is not a loss (the round may wait for a rank
that is behind, or for a switch working through a window), so the rule reads a good deal
of state -- when each packet went out, which later packet the switch answered, which
rounds it said it holds, the probes -- and none of that state is needed to match results
to rounds or to build frames (engine.py), or to tell a dead rank (liveness.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from p4reduce.job import FAIR_SLOTS

from .smallarrays import largest, least
from .slots import SlotWindow

_NONE = np.zeros(0, np.int64)
REORDER_MAX = 16  # RACK's reordering window at most 8 smoothed rounds (RttEstimator.reorder)
# ... of which a STATUS answering a resend RACK made widens it up to this on its own, and
# further only where the rounds wait for a late rank (Pacer._spurious)
REORDER_FREE = 4
_RANK_BITS = np.arange(32, dtype=np.int64)  # a STATUS bitmap's ranks
# behind a leaf a clean round feeds the estimate as at most this many smoothed rounds
# (Pacer.answered: a round another rank's resend completed looks clean to this rank)
CLEAN_GROWTH = 1.25
# Unanswered silence probes back off to max_timeout / PROBES_PER_TIMER (or the silence
# timer, when longer), not to max_timeout: a rank that lost a round's result is missing from
# the next round until one of its probes and the switch's answer both come through, and the
# other ranks name it silent after a quiet span of at least SILENT_TIMERS x max_timeout
# (liveness.quiet_timers, measured on their own links). At one try per max_timeout a rank
# behind a link losing 40 % each way, the others' links clean, stayed unheard that long in
# 3 of 40 every-rank jobs of 4 ranks; at four tries in none of 20 (at 50 % each way, 1 of 20
# against 12: there the silence timer, 4 gaps between its rare results, is the longer).
# The price: a rank whose switch is gone sends four small probes a second, not one.
PROBES_PER_TIMER = 4
# A held round (the switch answered with a STATUS: it waits for other ranks) asks again at
# most every max(4 timers, this share of how long it has waited) (Pacer._backoff_cap)
HELD_WAIT_SHARE = 0.25


@dataclass
class EngineParams:
    """Timing knobs (docs/hostlib.md, "Timers"). Why these defaults:

    * `timeout` is the floor of the retransmission timer: a round trip through a switch on
      this machine is a fraction of a millisecond, so 2 ms never fires before an answer.
    * `initial_timeout` is the timer before anything was measured: the first window is
      S x N packets through a switch of unknown speed (a software one such as bmv2 serves
      thousands of packets/s, not millions: bench/softswitch_pps.py measures it), so
      a few-ms guess would retransmit every slot of a large window.
    * `max_timeout` caps the timer, its doubling and the silence probes (which back off
      to a quarter of it, PROBES_PER_TIMER): recovery stays within a second once the
      cause (a stalled rank, a congested switch) is gone.
    * `double_after`: a held slot's timer doubles after this many expiries in a row
      (up to 4 timers, see `_backoff_cap`).
    * `window`: at most this many slots of a rank have a packet outstanding; a job with
      more slots starts the next one when one finishes, the lowest first (the same on
      every rank). Why: a switch that serves what it queues first in, first out (bmv2)
      gives each backlogged job its outstanding packets' share (`fifo_share`): without a
      window a 1 000-slot job left a 16-slot job on the same switch 1/60 of it. The
      default, FAIR_SLOTS, makes a job of that many slots keep half of such a switch
      beside any job with as many ranks, 1.5x the third promised (docs/reliability.md,
      "Jobs share the switch"); its price is a job with more slots running at most that
      many at once when alone (docs/benchmarks.md). The Worker takes its descriptor's
      window where it names one (p4reduce.job.resolve_window: FAIR_SLOTS on the v1model
      target, every slot on Tofino, whose pipeline does not queue a job's packets first
      in first out; the demo and the torch launcher give softswitch's jobs every slot:
      p4reduce.target.kind_window).
    * `call_slots`: how many of the job's slots a call uses; None: `slots_for_call`'s
      count (docs/hostlib.md, "Slots per call"), which is right for calls; a count is for
      measuring calls at other counts (bench/slot_window.py). Every rank of a job must
      use the same: a rank with other streams is named a protocol error at the first
      result that names a block outside them, and returns no sum.
    """

    timeout: float = 0.002
    initial_timeout: float = 0.2
    max_timeout: float = 1.0
    double_after: int = 1
    deadline: float = 30.0
    window: int = FAIR_SLOTS
    call_slots: int | None = None

    def __post_init__(self) -> None:
        if self.call_slots is not None and self.call_slots < 1:
            raise ValueError(f"a call uses at least one slot, not call_slots={self.call_slots}")


class RttEstimator:
    """Smoothed round time of a slot's round (RFC 6298: SRTT, RTTVAR, RTO = SRTT + 4
    RTTVAR between a floor and a cap), fed only with *clean* rounds (Pacer.answered):
    rounds this rank did not retransmit (Karn's rule), that no later packet of this rank
    overtook, and that did not live through a silence probe. Why: a round that waited for
    anybody's retransmission lasts a timeout longer; feeding such rounds raised the timer,
    which lengthened the next waits, up to the cap (5 % loss took 19x the lossless time).
    Kept by the Worker across allreduce calls."""

    def __init__(self) -> None:
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.samples = 0
        # RACK's reordering window, in half smoothed rounds (RFC 8985's reo_wnd_mult),
        # and when it last widened (`spurious_resend`)
        self.reorder = 1
        self.widened_at = -float("inf")

    def update(self, samples: np.ndarray) -> None:
        if not samples.size:
            return
        x = largest(samples)  # the batch's slowest clean round: conservative
        self.samples += int(samples.size)
        if self.srtt is None:
            self.srtt, self.rttvar = x, x / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - x)
            self.srtt = 0.875 * self.srtt + 0.125 * x

    def spurious_resend(self, now: float) -> None:
        """A resend RACK made was answered with a STATUS in silent rounds: the round had
        this rank's packet and waited for another rank. There a later packet of this
        rank is answered at once when its block was nobody else's next, while an earlier
        round waits for a rank that sends later (a slower host, a thread run late): no
        loss, yet taken for one -- with a rank 3 ms late, ~1 resend per slot per call.
        So the reordering window doubles, up to REORDER_MAX half rounds (as RFC 8985
        widens it on a DSACK; past REORDER_FREE only where the rounds wait for a late
        rank, Pacer._spurious), kept for the Worker's later calls until a resend RACK
        made is answered with a result (`resend_answered`).

        At most once per smoothed round (RFC 8985 widens at most once per round trip):
        under loss each way another rank's lost packet stalls a round of every rank, so
        in one round several of this rank's resends meet a STATUS for each one a result
        answers; doubled on every such batch the window sat near its cap under loss
        (virtual time, 4 ranks, 64 slots, dense silent rounds at 5 % loss: a mean of 3.6
        half rounds, calls 1.54x the lossless time; once per round 1.2 and 1.38x). A
        late rank still widens it within a few rounds of a call."""
        if self.srtt is not None and now - self.widened_at < self.srtt:
            return
        self.widened_at = now
        self.reorder = min(2 * self.reorder, REORDER_MAX)

    def resend_answered(self) -> None:
        """A resend RACK made in silent rounds was answered with the round's result: the
        packet was likely lost (or the round completed as it went), so the window halves
        back towards half a smoothed round, as RFC 8985 resets it after recoveries: kept
        wide under loss it slowed recovery (virtual time, 4 ranks, 1-5 % loss: calls
        15-20 % longer)."""
        self.reorder = max(1, self.reorder // 2)

    def resend_undone(self, before: int) -> None:
        """A resend whose answer halved the window (`resend_answered`) proved spurious:
        the window goes back to `before`, what it was then, unless it has widened past it
        since (Pacer.answered_again)."""
        self.reorder = max(self.reorder, before)

    def rto(self, floor: float, cap: float, initial: float | None = None) -> float:
        """The retransmission timer; `initial` (at least `floor`) before any sample."""
        if self.srtt is None:
            return min(cap, max(floor, initial if initial is not None else floor))
        return min(cap, max(floor, self.srtt + 4 * self.rttvar))


class Pacer:
    """The timers of one call's slots (`slots.active`: the ones with a packet outstanding).

    Per slot: when its round's packet was first sent and last transmitted, whether it was
    resent, when a later packet overtook it, the last STATUS the switch sent for its
    round, and how often its held timer expired in a row; per call: the latest answered
    packet (RACK), the silence probe's timer and burst, the gap between result batches.
    The engine tells it what happened (`started`, `answered`, `answered_again`,
    `held_by_switch`, `resent`) and asks it what to resend (`due`) and when
    (`next_timer`)."""

    def __init__(
        self,
        params: EngineParams,
        rtt: RttEstimator,
        slots: SlotWindow,
        now: float,
        behind_leaf: bool = False,
        ranks: int = 32,
    ):
        self.params, self.rtt, self.slots = params, rtt, slots
        # the job's ranks as a STATUS bitmap's bits (_spurious; a bitmap has 32)
        self.rank_mask = (1 << min(ranks, _RANK_BITS.size)) - 1
        # a rank of a job in the leaf role (docs/fabric.md, "Loss recovery across
        # levels"): every slot not held is resent once its wait exceeds the recent timer
        # (`due`), twice the smoothed clean round (`recent_timeout`), and each held round
        # asks on its own timer; in silent rounds (`contributes` set) a round that waits
        # for the rank's own packet at the retransmission timer, the rounds it sits out
        # by one switch's silence probe
        self.behind_leaf = behind_leaf
        n = slots.count
        self.sent_at = np.full(n, now, np.float64)  # first transmission of the round
        self.xmit_at = np.full(n, now, np.float64)  # latest transmission of its packet
        self.retransmitted = np.zeros(n, bool)
        self.rack_resent = np.zeros(n, bool)  # latest transmission: a resend RACK made
        # the reordering window when the result of a slot's round answered a resend RACK
        # made (0: none since the slot's latest retransmission); see answered_again
        self.rack_answered = np.zeros(n, np.int64)
        # the latest transmission time of any packet the switch has answered and that
        # packet's round time, the job-level probe timer
        self.answered_xmit = -np.inf
        self.answered_rtt = 0.0
        self.overtaken_at = np.full(n, np.inf)  # when a later packet was answered
        self.status_at = np.full(n, -np.inf)  # last STATUS for the round
        # the ranks that STATUS said the switch had heard (its bitmap): held rounds with
        # the same bitmap wait for the same ranks and ask as one (`_one_per_wait`), and
        # when one of the group last asked or was answered for all of them
        self.status_heard = np.zeros(n, np.int64)
        self.group_at = np.full(n, -np.inf)
        self.status_seen = -np.inf  # latest STATUS on any slot (behind a leaf: _leaf_sample)
        self.heard = False  # any result in this call yet
        self.probe_at = now + self._silence_timeout()
        self.probes_in_row = 0
        self.probes = 0  # retransmissions sent as silence probes
        self.last_probe_at = -np.inf
        self.probe_burst = 1  # slots per probe (see answered)
        self.fresh_at = -np.inf  # latest answer to a first send
        self.result_at = -np.inf  # latest result batch
        self.result_gap: float | None = None  # smoothed time between batches
        self.silence_probed = False  # a silence timer expired since the latest batch
        self.probed = np.zeros(n, bool)  # probe sent, no answer yet
        self.expired_in_row = np.zeros(n, np.int64)  # held timers expired in a row
        # behind a leaf: a STATUS for the round did not name this rank (`not_heard`)
        self.lacking = np.zeros(n, bool)
        # behind a leaf: a STATUS of a later round than the one awaited (`passed_by`)
        self.passed = np.zeros(n, bool)
        # silent rounds: the slots whose round waits for this rank's own packet (None:
        # every slot, as in every-rank rounds); see _overtaken
        self.contributes: np.ndarray | None = None

    def started(self, slots: np.ndarray, now: float) -> None:
        """A new round's packet went out on `slots` (an announce, or the next round)."""
        self.sent_at[slots] = self.xmit_at[slots] = now
        self.retransmitted[slots] = False
        self.rack_resent[slots] = False
        self.expired_in_row[slots] = 0
        self.lacking[slots] = False
        self.passed[slots] = False
        self.group_at[slots] = -np.inf

    def held_by_switch(self, slots: np.ndarray, now: float, heard: np.ndarray) -> None:
        """The switch answered `slots`' latest transmission with a STATUS: it holds it.
        `heard`: each STATUS's bitmap of the ranks the switch has heard in the round; the
        answer stands for every held round waiting for the same ranks
        (`_answer_for_waits`). In silent rounds a STATUS answering a resend RACK made says
        that the round only waited for other ranks: a late rank's or a lost packet's, and
        the window widens where `_spurious` takes it for lateness
        (`RttEstimator.spurious_resend`)."""
        self.status_at[slots] = now
        self.status_seen = now
        if not self.behind_leaf:
            self.status_heard[slots] = heard
            self._answer_for_waits(slots, now)
        if self.rtt.srtt is None:  # (behind a leaf a STATUS may answer another rank)
            self._seed(now - self.xmit_at[slots[self.retransmitted[slots]]])
        resent = slots[self.rack_resent[slots]]
        if self.contributes is not None and resent.size and self._spurious(resent):
            self.rtt.spurious_resend(now)
        self.rack_resent[slots] = False

    def _spurious(self, slots: np.ndarray) -> bool:
        """Whether RACK's resends of the held rounds `slots`, which a STATUS answered,
        widen the reordering window (`held_by_switch`): up to REORDER_FREE always, and
        beyond only where a rank those rounds wait for (the ranks their STATUS has not
        heard) holds another of this rank's held rounds too. A rank that is late (a slower
        host, a thread run late) is late for every round it is expected in, so the rounds
        waiting for it pile up and the resends into them were spurious; a lost packet holds
        the one round it belonged to, and its sender's own RACK resends it. Taken for
        lateness, every loss of another rank widened this rank's window to the cap, which
        then found this rank's own losses late: dense silent rounds at 5 % loss each way
        (virtual time, 4 ranks x 64 slots) left many ranks' windows at 8 rounds and took
        1.08x every-rank rounds' time (now 1.03x); a window of 2 rounds on its own keeps a
        rank 3 ms late to 4-13 spurious resends in a job's first call, ~0 after. Behind a
        leaf (no bitmaps kept) every such STATUS widens."""
        if self.behind_leaf or self.rtt.reorder < REORDER_FREE:
            return True
        mask, held = self.rank_mask, self.held()
        heard = self.status_heard[held]
        heard = heard[heard >= 0]  # (a negative one: a group of one, `_end_waits`)
        waiting = (~heard & mask)[:, None] >> _RANK_BITS & 1  # held round x rank
        wanted = np.bitwise_or.reduce(~self.status_heard[slots] & mask)
        piled = np.flatnonzero(waiting.sum(axis=0) >= 2)
        return bool(np.count_nonzero(wanted >> piled & 1))

    def _seed(self, replies: np.ndarray) -> None:
        """While the estimate has no sample (its callers check), the switch's direct
        replies to this rank's resends (`replies`: their round trips) seed it. Such a reply (a
        STATUS, a cached RESULT) answers that very transmission, so Karn's ambiguity does
        not arise. Why: under heavy loss hardly any round is clean, so every rank kept
        `initial_timeout` (0.2 s) as its timer, every repair took that long, and every
        round then lived through some rank's repair: 8 ranks on one slot at 10 % loss
        each way stayed at the initial timer for seconds."""
        self.rtt.update(replies)  # (none: no change)

    def answered_again(self, slots: np.ndarray, now: float) -> None:
        """Cached copies of the rounds `slots` last took came: the switch's answers to
        transmissions of this rank that those rounds completed without. Where the round's
        result had answered a resend RACK made (`answered`), that resend was spurious
        after all -- in silent rounds the round waited for a later rank and completed on
        its packet before the resend came, so the switch answered the resend from its
        cache, as a TCP receiver reports a duplicate with a DSACK. The window's halving
        is undone (RttEstimator.resend_undone) and the window widens, as when a STATUS
        answers such a resend (RFC 8985 widens it on a DSACK). Left as it was, a rank
        whose resends came after the rounds completed never saw a STATUS: its window
        stayed at half a smoothed round, every result answering a resend halved it
        again, and it resent hundreds of packets a call at no loss."""
        before = self.rack_answered[slots]
        if np.count_nonzero(before):
            self.rtt.resend_undone(int(before.max()))
            self.rtt.spurious_resend(now)
            self.rack_answered[slots] = 0

    def not_heard(self, slots: np.ndarray, now: float) -> None:
        """Behind a leaf: a STATUS for `slots`' rounds did not name this rank. The leaf
        sends its STATUS to every one of its ranks (docs/fabric.md, "Loss recovery across
        levels"), answering whichever of them asked: a round the leaf has not heard this
        rank in lost its packet on the way, so the packet goes again at once (`due`),
        instead of at this rank's own timer -- the first timer of any rank of the leaf
        finds the loss. Not when this rank's latest transmission went out less than half
        a smoothed round ago (`_half_round`): such a STATUS
        was likely on its way before that packet reached the leaf -- another rank asked
        while this one was late with its packet, or resent after an earlier STATUS --
        and taking it resent a packet the leaf holds, whose STATUS went to every rank of
        the leaf again. A real loss is found by another rank's timer, one at least a
        round after this rank's packet; a dismissed one by this rank's own."""
        self.lacking[self._not_recent(slots, now)] = True

    def passed_by(self, slots: np.ndarray, now: float) -> None:
        """Behind a leaf: the leaf's STATUS of a round later than the one `slots` wait for
        (the engine's `_take_ahead`): the round awaited completed at the leaf and its
        RESULT to this rank was lost. The slot's packet (its own, or behind a silent leaf
        the query of a round it sits out) goes again at once, as after `not_heard`,
        instead of at its timer or the silence probe -- the later round may wait for this
        rank (a closing round waits for every rank), and under heavy loss the probe, the
        lowest slot once per silence timer, comes seconds later. The same half-round
        allowance as `not_heard`."""
        fresh = self._not_recent(slots, now)
        self.lacking[fresh] = self.passed[fresh] = True

    def _not_recent(self, slots: np.ndarray, now: float) -> np.ndarray:
        """Of `slots` named by a leaf's STATUS at `now`, those whose latest transmission
        went out at least half a smoothed round before (`not_heard`'s allowance: a STATUS
        sooner may have left the leaf before that packet arrived); notes the STATUS's
        time."""
        slots = np.asarray(slots)
        self.status_seen = now
        return slots[now - self.xmit_at[slots] >= self._half_round()]

    def resent(self, due: np.ndarray, now: float) -> int:
        """`due` (from `due`) went again; returns how many timers that doubled. Only a
        round the switch said it holds backs off: a resend that got no answer was lost,
        and RACK finds it again as fast as the first loss."""
        holding = self.held()
        again = due[holding[due]]
        self.rack_resent[due] = (self._overtaken() & ~holding)[due]
        self.rack_answered[due] = 0  # a cached copy may answer this transmission now
        self.expired_in_row[again] += 1
        if again.size and not self.behind_leaf:
            self._answer_for_waits(again, now, holding)
        self.lacking[due] = self.passed[due] = False
        self.retransmitted[due] = True
        self.xmit_at[due] = now
        self.overtaken_at[due] = np.inf
        return int((self.expired_in_row[again] >= self.params.double_after).sum())

    def _answer_for_waits(
        self, slots: np.ndarray, now: float, holding: np.ndarray | None = None
    ) -> None:
        """What was asked or answered for held `slots` stands for every other held round
        that has waited long (`_waits_long`) for the same ranks (the same `status_heard`
        bitmap): its group time (`group_at`) becomes now, and every round of the group
        takes the most doublings of its held timer any of them has (a slot held for the
        first time joins the group's pace), so a group of such rounds asks again as one,
        on the timer of one (`_one_per_wait`). Why: a late rank holds every round it owes
        a packet, and each of a waiting rank's slots asked on its own timer: with 8 slots
        or more about 4x the packets of one slot in a 2 s wait. Rounds that wait for the
        same ranks complete when those ranks send; until then one round's STATUS says
        what every one of them would."""
        long = self._waits_long(self.held() if holding is None else holding)
        slots = slots[long[slots]]
        if not slots.size:
            return
        keys = np.unique(self.status_heard[slots])
        group = long & np.isin(self.status_heard, keys)
        group[slots] = True
        members = np.flatnonzero(group)
        if members.size < 2:
            return
        at = np.searchsorted(keys, self.status_heard[members])
        most = np.zeros(keys.size, np.int64)
        np.maximum.at(most, at, self.expired_in_row[members])
        self.expired_in_row[members] = most[at]
        group[slots] = False
        self.group_at[group] = now

    def _end_waits(self, s: np.ndarray, now: float) -> None:
        """Results answered slots `s`: where one of them was held, the ranks its group
        waited for have sent, so the other rounds of the group are most likely complete
        too -- or their results lost on the way. Each of them leaves the group and asks
        on its own, after one timer from now (`recent_timeout`, no doublings): a result
        still on its way arrives first, and a lost one is fetched within it, not one
        group's turn after another (`_one_per_wait`)."""
        if self.behind_leaf or self.status_seen == -np.inf:
            return
        ended = s[self.status_at[s] > self.sent_at[s]]  # (rounds a STATUS held)
        if not ended.size:
            return
        group = self._waits_long(self.held())
        group &= np.isin(self.status_heard, self.status_heard[ended])
        group[s] = False
        if np.count_nonzero(group):
            members = np.flatnonzero(group)
            self.status_heard[members] = -1 - members  # a group of one each
            self.group_at[members] = now
            self.expired_in_row[members] = 0

    def _one_per_wait(self, held: np.ndarray) -> np.ndarray:
        """Of the held slots due (`held`, a mask), one per group waiting long for the
        same ranks (`status_heard`): the one transmitted longest ago, so that the slots
        of a group take turns (a result lost on one of them is asked for within the
        group's turns, not only once the others complete). The others are asked for
        with it (`resent` moves their timers: `_answer_for_waits`)."""
        if self.behind_leaf or np.count_nonzero(held) < 2:
            return held
        long = self._waits_long(held)
        idx = np.flatnonzero(long)
        if idx.size < 2:
            return held
        keys = self.status_heard[idx]
        idx = idx[np.lexsort((self.xmit_at[idx], keys))]
        keys = self.status_heard[idx]
        first = np.ones(idx.size, bool)
        first[1:] = keys[1:] != keys[:-1]
        one = held & ~long
        one[idx[first]] = True
        return one

    def _waits_long(self, held: np.ndarray) -> np.ndarray:
        """Of `held` (a mask), the rounds that have waited long: their held timer is
        `HELD_WAIT_SHARE` of the wait, longer than 4 timers (`_backoff_cap`). Only these
        ask as a group: such a round waits for a late rank (descheduled, computing,
        dead), where the group's asks are what the rank sends. A round held a few timers
        waits for another rank's repair, which is over soon, and asks on its own: grouped,
        a result lost on one of several such rounds waited for the group's turn, and
        8 ranks on 8 slots at 10 % loss each way took up to 1.5x as long."""
        base = np.maximum(self.status_at, self.group_at)
        return held & (HELD_WAIT_SHARE * (base - self.sent_at) > 4 * self.rto())

    def next_timer(self) -> float:
        """When packets_to_send may next retransmit without a result arriving first (inf
        when done): the earliest RACK deadline of an overtaken slot, held timer of a held
        one, or the silence probe -- behind a leaf the recent timer of the oldest waiting
        slot instead, since `due` resends every expired slot there without a probe
        (waiting for the probe's timer, four gaps between results, would keep held rounds
        waiting long past their resend)."""
        if self.slots.done:
            return float("inf")
        held = self.held()
        n_held = np.count_nonzero(held)
        free, o = self.slots.active, self._overtaken()
        if n_held:
            not_held = ~held
            free, o = free & not_held, o & not_held
        t = float("inf")
        if np.count_nonzero(free):
            if self._silent_leaf:
                t = self._silent_leaf_timer(free)
            else:
                t = least(self.xmit_at[free]) + self.recent_timeout()
                if not self.behind_leaf:  # behind a leaf `due` resends without a probe
                    t = max(t, self.probe_at)
        if np.count_nonzero(o):
            t = min(t, least(self._lost_at(o)))
        if n_held:
            t = min(t, least(self._held_until(held)))
        if np.count_nonzero(self.lacking):
            lacking = self._lacking()
            if np.count_nonzero(lacking):  # due now (`not_heard`)
                t = min(t, least(self.xmit_at[lacking]))
        return t

    @property
    def _silent_leaf(self) -> bool:
        """A rank of a silent job (its engine says which rounds wait for its packet,
        `contributes`) behind a leaf: the leaf role's timers, with silent rounds' three
        differences (`due`, `_silent_leaf_timer`, `answered`)."""
        return self.behind_leaf and self.contributes is not None

    def _silent_leaf_timer(self, free: np.ndarray) -> float:
        """`next_timer` of the slots `free` (mask: active, not held) behind a silent leaf
        (`due`): a round that waits for this rank's own packet at the retransmission
        timer, the rounds it sits out at the silence probe."""
        own, out = free & self.contributes, free & ~self.contributes
        t = float("inf")
        if np.count_nonzero(out):
            t = max(least(self.xmit_at[out]) + self.recent_timeout(), self.probe_at)
        if np.count_nonzero(own):
            t = min(t, least(self.xmit_at[own]) + self.rto())
        return t

    def _lacking(self) -> np.ndarray:
        """Active slots whose leaf's STATUS did not name this rank (`not_heard`): resent
        at once. Behind a silent leaf only the rounds that wait for this rank's own packet
        (`contributes`): a round it sits out does not wait for it -- unless a STATUS showed
        the slot's rounds past it (`passed_by`)."""
        lacking = self.slots.active & self.lacking
        if self.contributes is None:
            return lacking
        return lacking & (self.contributes | self.passed)

    def rto(self) -> float:
        """The retransmission timer now: the estimator's, or `initial_timeout` before any
        clean round was measured."""
        prm = self.params
        return self.rtt.rto(prm.timeout, prm.max_timeout, prm.initial_timeout)

    def _overtaken(self) -> np.ndarray:
        """Active slots whose packet was sent before the latest packet the switch answered.
        Only where the round waits for this rank's packet: in silent rounds a slot where
        the rank sends nothing waits for other ranks' DATA, so a later packet answered
        on another slot says nothing of a loss (that slot asks on its held timer or the
        silence probe instead)."""
        o = self.slots.active & (self.xmit_at < self.answered_xmit)
        return o if self.contributes is None else o & self.contributes

    def held(self) -> np.ndarray:
        """Active slots whose latest transmission the switch holds: a STATUS for the round
        came after it (protocol.md section 13), so the round waits for other ranks (or
        its result to this rank was lost), not for this rank's packet."""
        if self.status_seen == -np.inf:  # no STATUS in this call yet: none held
            return np.zeros(self.slots.count, bool)
        return self.slots.active & (self.status_at > self.xmit_at)

    def _held_until(self, slots: np.ndarray) -> np.ndarray:
        """When held `slots` (mask) ask again: one `recent_timeout` after the STATUS,
        doubled for every time it expired in a row since `double_after` (up to
        `_backoff_cap` of how long the round had waited at that STATUS): a round that
        waits for another rank's retransmission is not hammered, and a result lost on
        its way to this rank is fetched from the switch's cache within a few round times,
        or within a quarter of its wait when the round waited long."""
        doublings = np.maximum(self.expired_in_row[slots] - self.params.double_after + 1, 0)
        status_at = np.maximum(self.status_at[slots], self.group_at[slots])
        wait = np.minimum(
            self.recent_timeout() * 2.0 ** np.minimum(doublings, 30),
            self._backoff_cap(status_at - self.sent_at[slots]),
        )
        return status_at + wait

    def _lost_at(self, slots: np.ndarray) -> np.ndarray:
        """When overtaken `slots` (mask) count as lost: RACK's deadline, the same for a
        first send and for a retransmission (its latest transmission: one that got no
        STATUS was lost again, as likely as the first)."""
        return np.maximum(
            self._lost_after(self.xmit_at[slots]),
            self.overtaken_at[slots] + self._reorder_allowance(),
        )

    def recent_timeout(self) -> float:
        """The timer of a slot nothing can overtake (silence probes, held rounds): twice
        the latest answered round, between the floor and the retransmission timer. Why
        not the timer alone: it is smoothed over rounds that queued behind a whole
        window, while a call's tail of a few slots runs at the switch's idle speed --
        there a lossy round waited one full timer (20x its own time) per attempt. Behind
        a leaf: twice the smoothed clean round (`RttEstimator.srtt`), not the latest
        answered round: in a large two-level job nearly every round waits for some
        repair, and the latest round grew the timer with the loss; a clean round is one
        this rank did not resend, so with every waiting slot resent at this timer
        (`due`) no round longer than it feeds the estimate. (Twice the fastest round
        instead: 64 ranks in one process faster at 5 % loss, but on bmv2 a lossless job
        of 8 ranks resent 4x its packets, its rounds' times spread by the switch's
        queue.)"""
        base = self.rto()
        if self.behind_leaf and self.rtt.srtt is not None:
            return min(self.params.max_timeout, max(self.params.timeout, 2 * self.rtt.srtt))
        if self.answered_rtt <= 0:
            return base
        return min(base, max(self.params.timeout, 2 * self.answered_rtt))

    def _backoff_cap(self, waited: np.ndarray) -> np.ndarray:
        """A held slot's timer doubles up to 4 timers, or `HELD_WAIT_SHARE` of how long
        its round has `waited` when that is longer (and at most max_timeout). 4 timers
        are enough to stop resending into a round that waits for somebody else's repair,
        and short enough that a resent packet lost again is found within a few round
        times. A round that waits long waits for a rank that is late (descheduled,
        computing, dead): there every other rank resent every 4 timers (~8 ms on this
        machine), ~120 STATUS round trips a second each, a switch's whole rate at a few
        hundred ranks; growing with the wait, a rank asks ~25 times in a 2 s wait instead
        of ~240, and a result lost after a wait is still fetched within a quarter of it."""
        prm = self.params
        return np.minimum(prm.max_timeout, np.maximum(4 * self.rto(), HELD_WAIT_SHARE * waited))

    def _lost_after(self, xmit: np.ndarray) -> np.ndarray:
        """RACK's deadline for packets overtaken by the latest answered one: as long as
        that packet's round took, plus a reordering allowance (ranks emit a batch's
        packets in slot order, so rounds of one batch complete in a different order than
        this rank sent them)."""
        return xmit + self.answered_rtt + self._reorder_allowance()

    def _reorder_allowance(self) -> float:
        """Half a smoothed round (`_half_round`), times the estimator's `reorder`
        (RttEstimator.spurious_resend: widened by resends found spurious)."""
        return self._half_round() * self.rtt.reorder

    def _half_round(self) -> float:
        """Half a smoothed round (the latest answered round before any sample), at least
        the timer's floor."""
        srtt = self.rtt.srtt if self.rtt.srtt is not None else self.answered_rtt
        return max(self.params.timeout, 0.5 * srtt)

    def due(self, now: float) -> np.ndarray:
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
        several ranks completes -- and the silence timer doubles up to max_timeout /
        PROBES_PER_TIMER (or itself, when longer) until a result arrives. A probe also
        ends a tail loss (nothing left to overtake it)."""
        holding = self.held()
        n_holding = np.count_nonzero(holding)
        lost = self._overtaken() & ~holding if n_holding else self._overtaken()
        n_lost = np.count_nonzero(lost)
        if n_lost:
            lost[lost] = self._lost_at(lost) <= now
            n_lost = np.count_nonzero(lost)
        held, n_held = holding, n_holding
        if n_held:
            held = holding.copy()
            held[held] = self._held_until(held) <= now
            held = self._one_per_wait(held)
            n_held = np.count_nonzero(held)
        if self.behind_leaf:
            # Behind a leaf every expired slot not held is resent, not one probe per
            # silence: a job of many ranks on two levels loses a frame in nearly every
            # round (64 ranks, 5 % on each link: 1 - 0.95^130), so all of a rank's slots
            # stall at once, nothing overtakes the lost packet (RACK), and the silence
            # probe -- the lowest slot, one per silence timer of 4 gaps between results --
            # would find a rank's own lost packet or result only after several probes,
            # many lossless rounds later. A resend into a round that only waits gets a
            # STATUS (the leaf's, or the spine's relayed) and is then held.
            lacking = self._lacking()  # not_heard: lost on the way
            if not self._silent_leaf:
                return np.flatnonzero(lost | held | lacking | self._expired(holding, now))
            # Behind a silent leaf, a round that waits for this rank's own packet is resent
            # at the retransmission timer, and the rounds it sits out keep one switch's
            # silence probe: a round it sits out lasts the other ranks' packets too,
            # longer than the rounds it sends in, and resent at a timer, every one of
            # them, they cost a sparse rank 2-5x its packets in queries (in Mininet,
            # lossless); its own rounds at the recent timer, 4-36x on simple_switch_grpc,
            # whose rounds vary with its queue
            own = self._expired(holding, now, self.rto()) & self.contributes
            due = np.flatnonzero(lost | held | lacking | own)
            if due.size:
                return due
            return self._probe(self._expired(holding, now) & ~self.contributes, now)
        if n_lost or n_held:
            return np.flatnonzero(lost | held)
        return self._probe(self._expired(holding, now), now)

    def _probe(self, expired: np.ndarray, now: float) -> np.ndarray:
        """The silence probe (`due`): of the slots whose timer `expired` (mask), the
        lowest `probe_burst` once the job has had no result for the silence timer, which
        then doubles; none before."""
        if now < self.probe_at:  # (checked first: the usual turn's answer)
            return _NONE
        if not np.count_nonzero(expired):
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
        self.probes += int(probe.size)
        self.last_probe_at = now
        silence = self._silence_timeout()
        backed_off = max(self.params.max_timeout / PROBES_PER_TIMER, silence)
        self.probe_at = now + min(backed_off, silence * 2**self.probes_in_row)
        return probe

    def _leaf_sample(self, took: np.ndarray, sent: np.ndarray) -> np.ndarray:
        """Behind a leaf, what clean rounds that took `took` (first sent at `sent`) feed
        the estimate: a round during which this rank heard any STATUS (on any slot: ranks
        of its leaf were asking, so frames were being lost) counts as at most the estimate
        -- before any sample, half the initial timer, whose double the timer is -- and
        any other round as at most CLEAN_GROWTH estimates (the first sample whole).
        Why: under loss such a round most likely waited for another rank's repair, which
        lasts about that rank's timer, twice its estimate; taken even as CLEAN_GROWTH
        estimates, the estimate rose by 3 % a round while the loss lasted, and a job that
        started under loss, its first rounds about the initial timer long, kept timers of
        twice that. The estimate still falls to shorter rounds, and follows a slower
        switch in rounds without any STATUS (without loss, the usual case). Not in silent
        rounds, whose rounds vary with when the other ranks' packets come: held down so,
        a silent rank's timer lagged its rounds, and a lossless sparse job in Mininet
        (bench/fabric.py's, in the leaf role) sent 85-128 packets a rank per call where
        its blocks and the slots' control packets are 64."""
        srtt = self.rtt.srtt
        asked = sent < self.status_seen
        if srtt is None:
            return np.where(asked, np.minimum(took, self.params.initial_timeout / 2), took)
        return np.minimum(took, np.where(asked, srtt, CLEAN_GROWTH * srtt))

    def _gap_sample(self, now: float, s: np.ndarray, xmit: np.ndarray) -> None:
        """Feed the smoothed gap between result batches (the silence timer's base) with the
        gap this batch of slots `s` (latest transmissions `xmit`) ended. Where this rank
        resent one of them well into the gap, the gap counts from that resend: the wait
        before it was this rank's own timer, not the switch's pace (fed back, every lossy
        round of a one-slot call grew the timer: 8 ranks at 10 % loss each way took 15 s
        a call). A resend that went out at the last batch (a burst of probes answered
        while the switch works off a dropped burst) leaves the gap whole: that gap is the
        switch's pace."""
        gap = now - self.result_at
        own = self.retransmitted[s]
        if np.count_nonzero(own):
            resent = least(xmit[own])
            if resent - self.result_at > 0.5 * gap:
                gap = now - resent
        self.result_gap = gap if self.result_gap is None else 0.875 * self.result_gap + 0.125 * gap

    def _repaired_sample(self, took: np.ndarray, repaired: np.ndarray) -> np.ndarray:
        """What clean rounds that took `took` feed the estimate where the switch flagged
        their RESULT REPAIRED (`repaired`): at most the estimate, as `_leaf_sample` takes
        a round that heard a STATUS; before any estimate, only one shorter than half the
        initial timer (whose double the timer is). Why: such a round lasted some rank's
        timer -- this rank's wait, unless this rank's own packet was the late one, whose
        round then completed at once: that short round is a true sample (left out, a rank
        that kept losing its results had none, and waited at the initial timer for every
        loss)."""
        srtt = self.rtt.srtt
        if srtt is None:
            return took[~repaired | (took <= self.params.initial_timeout / 2)]
        return np.where(repaired, np.minimum(took, srtt), took)

    def _expired(self, holding: np.ndarray, now: float, timer: float | None = None) -> np.ndarray:
        """Active slots not held (`holding`: held()) whose latest transmission is older
        than `timer` (None: the recent timer)."""
        timer = self.recent_timeout() if timer is None else timer
        return self.slots.active & ~holding & (self.xmit_at + timer <= now)

    def _silence_timeout(self) -> float:
        """How long the job may go without any result before a probe. Once results have
        come in this call: one `recent_timeout` (a stall of a rank or the switch, or
        every outstanding round stuck on a loss, as in a call's tail). Before the first
        result: a switch serving a fresh window of S x N packets, or ranks that have not
        started the call yet, are the likely cause, not the loss of every announce; so
        the wait doubles with every outstanding slot beyond the first, up to
        `initial_timeout` (a one-slot call is probed after one timer)."""
        prm = self.params
        base = self.rto()
        if self.heard:
            # a slow switch answers a large window one round at a time: silence is a gap
            # well beyond the usual one between results, not just one timer
            gap = 4 * self.result_gap if self.result_gap is not None else 0.0
            return min(prm.max_timeout, max(self.recent_timeout(), gap))
        outstanding = int(self.slots.active.sum())
        grown = base * 2.0 ** min(max(outstanding - 1, 0), 30)
        return min(prm.max_timeout, max(base, min(prm.initial_timeout, grown)))

    def answered(
        self,
        s: np.ndarray,
        now: float,
        repaired: np.ndarray | None = None,
        cached: np.ndarray | None = None,
    ) -> None:
        """Book-keeping for a batch of results that answered slots `s`: feed the
        round-time estimator with the clean rounds, advance `answered_xmit`, reset the
        silence probe. A round is clean when this rank did
        not retransmit it (Karn), no packet this rank transmitted later was answered in
        an earlier batch (it then waited for somebody's retransmission), it did not
        live through a silence probe (start-up skew, a stalled rank: not a round time),
        and no STATUS held it (behind a leaf the spine's, relayed to ranks that did not
        ask: the round waited for another leaf's repair). A round whose RESULT the
        switch flagged REPAIRED (`repaired`: a rank resent into it, or into the round
        before it, so it lasted some rank's timer -- Karn's rule across ranks; the
        v1model program flags them, docs/protocol.md section 13) counts as at most the
        estimate (`_repaired_sample`). A cached RESULT (`cached`) answering a resend
        seeds an estimate that has no sample yet (`_seed`).

        Behind a leaf a clean round counts as at most CLEAN_GROWTH smoothed rounds. Why:
        a round that another rank's resend completed looks clean here, and in a large
        two-level job nearly every round is repaired, so the clean rounds were mostly
        another rank's timer long (twice its smoothed round); fed whole, each raised the
        estimate, hence every rank's timer, hence the next repaired rounds: the smoothed
        round of 64 ranks in one process at 5 % loss grew from ~40 ms to ~350 ms within
        three calls, and the calls from 3.4 s to 5.8 s. Capped, the estimate can still
        follow a slower switch, by at most 3 % a round (1/8 of a quarter), and stayed at
        ~40 ms (2.8 s a call). A round shorter than the estimate is taken whole."""
        xmit, sent = self.xmit_at[s], self.sent_at[s]
        self._end_waits(s, now)
        fresh = ~self.retransmitted[s]
        if cached is not None and self.rtt.srtt is None and np.count_nonzero(cached):
            self._seed(now - xmit[cached & ~fresh])
        clean = fresh & (xmit >= self.answered_xmit)
        if self.last_probe_at > -np.inf:  # (else every round started after it)
            clean &= sent > self.last_probe_at
        if self.status_seen > -np.inf:  # (else no STATUS held any round)
            clean &= self.status_at[s] <= sent  # (one at its start: the last round's)
        took = now - sent[clean]
        if self.behind_leaf and not self._silent_leaf:  # (why not a silent rank's:
            took = self._leaf_sample(took, sent[clean])  # _leaf_sample)
        if repaired is not None and np.count_nonzero(repaired):
            took = self._repaired_sample(took, repaired[clean])
        self.rtt.update(took)
        if self.contributes is not None and np.count_nonzero(self.rack_resent[s]):
            self.rack_answered[s[self.rack_resent[s]]] = self.rtt.reorder
            self.rtt.resend_answered()
        # Only answers to packets sent once move the overtaking mark: an answered
        # retransmission (a probe into a round that a late rank then completed, a cached
        # copy) says nothing about the packets sent before it, which may be waiting for
        # that same rank; taking it made every older slot look lost at once.
        n_fresh = np.count_nonzero(fresh)
        if n_fresh:
            latest = largest(xmit[fresh])
            if latest >= self.answered_xmit:
                self.answered_xmit, self.answered_rtt = latest, now - latest
        # The reordering allowance counts from when a slot was first overtaken, not from
        # its own transmission: a rank descheduled between two batches sends them far
        # apart, yet the rounds complete when the *last* rank's packets arrive, so the
        # earlier one may be answered right after the later (seen: spurious resends).
        self.overtaken_at[s] = np.inf
        newly = self._overtaken()
        newly[s] = False
        if np.count_nonzero(newly):
            newly &= np.isinf(self.overtaken_at)
            self.overtaken_at[newly] = now
        if self.heard and not self.silence_probed:
            # (a gap a silence probe ended is the silence timer's own length, not the
            # switch's pace: fed back, it grew the timer with every probe -- a call's tail
            # of one slot, every round lossy, waited up to 2 s per round)
            self._gap_sample(now, s, xmit)
        self.result_at = now
        self.silence_probed = False
        self.heard = True
        self.probes_in_row = 0
        probes_answered = int(np.count_nonzero(self.probed[s]))
        if probes_answered:
            self.probed[s] = False
        if n_fresh:
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
            self.probe_burst = min(2 * probes_answered, self.slots.count)
            self.probe_at = now
