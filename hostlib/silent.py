"""The worker's side of silent rounds (docs/protocol.md, docs/hostlib.md "Silent rounds").

In a job of silent rounds a rank sends only for its own non-zero blocks, plus each slot's
announce packet and, where some rank sat out the slot's last round, its closing packet:
the switch keeps every rank's next block and names the next round's block in each
RESULT, which is multicast to every rank. A rank that has nothing for a round stays
silent and only listens, so it must itself notice a RESULT it missed: each RESULT names
the next one's block (the chain), and the rank keeps, per slot, its **coverage** c --
every block of the slot's stream before c has a known sum. A gap
(a RESULT that is not the one the chain expects, or one that does not start at c) makes
the rank ask the switch for a rewind to c; the slot's closing packet goes only with full
coverage. So no sum can go missing silently, and without loss no rank sends more than
its non-zero blocks plus two packets per slot. The closing round is left out where every
rank took part in the slot's last round knowing every earlier sum: an announce round
naming END_OF_STREAM (no rank has a block in the slot), or a data round naming it that
expected every rank, each DATA flagged COVERED (its sender's coverage reached its block);
the switch then flags the RESULT ENDED.

Why a subclass of the every-rank engine: the frames, timers (timers.Pacer), liveness,
fingerprints, STATE_LOST and the slot window are the same; only what a result releases
differs, and every-rank jobs must keep behaving exactly as they do.
"""

from __future__ import annotations

import numpy as np

from . import protocol as p
from .engine import EOS, AllreduceEngine
from .framing import Parsed
from .smallarrays import once_each, selection

# the kind of the round a slot waits for
ANNOUNCE_ROUND, DATA_ROUND, CLOSING_ROUND, REWIND_ROUND = 0, 1, 2, 3
# unanswered resends of a slot (queries, or the rank's own packet) before the rank also
# asks for a rewind: the round's result is then taken to be neither cached (a query gets
# it) nor pending (a query gets a STATUS). The switch answers every resend while anything
# of the slot is complete, so silence means a lost packet or answer far more often: at
# loss l each way a resend goes unanswered with probability 1 - (1 - l)^2 (0.19 at
# l = 0.1), so 2 in a row happen after 3.6 % of losses and 4 after 0.13 %, and every
# request re-runs the slot from its coverage on every rank.
QUERIES_BEFORE_REWIND = 4
# the kind of result a slot waiting in a round of each kind takes as its round's (a rewind
# round's RESULT has an announce round's layout: SilentEngine._nature), by kind
_AWAITED_NATURE = np.array([ANNOUNCE_ROUND, DATA_ROUND, CLOSING_ROUND, ANNOUNCE_ROUND], np.int8)
# a result's nature by [carries a fingerprint range, names block END_OF_STREAM]
_NATURE = np.array([[DATA_ROUND, CLOSING_ROUND], [ANNOUNCE_ROUND, ANNOUNCE_ROUND]], np.int8)

__all__ = ["IncompleteSum", "SilentEngine"]


class IncompleteSum(RuntimeError):
    """A slot's closing round completed while this rank still lacked the sum of some of
    its blocks: the switch counted another packet of this rank as its closing one (this
    rank sends its closing SKIP only with every sum, else a REWIND). No sum is returned
    rather than a wrong one."""


class SilentEngine(AllreduceEngine):
    """AllreduceEngine of a job of silent rounds. Per slot, besides the base's round
    (slot_version, block, exponent of the round in progress) and cursor (`my_next`, the
    next non-zero block of this rank not yet sent): the round's `kind`, whether this rank
    contributes to it (`mine`: its frame is kept for retransmission, else the kept frame
    is a query), the coverage `cover`, the blocks whose sums are stored (`stored`, so a
    rewind's re-run stores no block twice), a rewind asked for (`want_rewind`) and the queries
    sent since the switch last answered (`queries`)."""

    def __init__(self, cfg, payload, now, *args, **kwargs):
        n = cfg.slot_count
        self.kind = np.zeros(n, np.int8)
        self.cover = np.full(n, EOS, np.int64)
        self.stored = np.zeros(payload.nblocks, bool)  # blocks whose sum is stored
        self.mine = np.zeros(n, bool)
        self.want_rewind = np.zeros(n, bool)
        self.queries = np.zeros(n, np.int64)
        # the last result taken: version, message type, block and next block
        self.last_key = np.full(n, -1, np.int64)
        self.last_data = np.full(n, EOS, np.int64)  # block of this rank's latest DATA
        self.incomplete: list[int] = []  # slots closed while this rank lacked a sum
        super().__init__(cfg, payload, now, *args, **kwargs)
        self.pacer.contributes = self.mine  # RACK only where this rank's packet is awaited

    # -- packets ---------------------------------------------------------------------------

    def _announce(self, slots: np.ndarray) -> None:
        """A slot's first round in the call: coverage starts at its first block (the
        slot's number), or is full on a slot outside the call's (one a fingerprint
        mismatch opened: its stream has no block of this rank's, so the rank lacks
        nothing there and never asks for a rewind of it -- a position asked for would
        rewind the slot to a block that no stream of a shorter call has)."""
        self.kind[slots] = ANNOUNCE_ROUND
        self.cover[slots] = np.where(slots < self.call_slots, slots, EOS)
        self.mine[slots] = True
        self.want_rewind[slots] = False
        self.queries[slots] = 0
        self.last_key[slots] = -1
        self.last_data[slots] = EOS
        super()._announce(slots)

    def _header_only(
        self,
        s: np.ndarray,
        msg: int,
        block: np.ndarray,
        next_block: np.ndarray,
        send: bool = True,
        keep: bool = True,
        closing: bool = False,
    ) -> None:
        """SKIP-layout packets (a closing SKIP, a query, a REWIND request): header only, or
        a block of zeros in a job whose SKIPs carry one (wire.skip_carries_values), since
        the switch may answer a query or REWIND with a data round's sums in its frame. A
        closing SKIP is header only whatever the job: a closing round's RESULT carries no
        values (docs/protocol.md section 6). Sent now (`send`) and/or kept as the slot's
        frame for its timer (`keep`): a query is only kept, a REWIND request beside a DATA
        only sent."""
        if not s.size:
            return
        padded = self._padded_skips and not closing
        values = self._zero_blocks(s.size) if padded else None
        ext = np.full(s.size, int(p.EXT.VALUES if padded else p.EXT.NONE))
        batch = self._build(
            s, np.full(s.size, msg), self.slot_version[s], block, next_block, values, ext
        )
        if keep:
            self._keep(s, batch)
        if send:
            self._pending.append(batch)

    def _named_block(self, s: np.ndarray) -> np.ndarray:
        """The block a query or REWIND request of slots `s` names: the round's, except
        END_OF_STREAM outside the closing round (an announce round's) -- a SKIP or REWIND
        naming END_OF_STREAM is a closing packet to the switch -- which names the slot's
        first block instead (no round's block, or the one the switch is at: either way
        it answers where the slot is)."""
        blk = self.block[s]
        return np.where((blk == EOS) & (self.kind[s] != CLOSING_ROUND), s, blk)

    def _request_rewind(self, s: np.ndarray, keep: np.ndarray) -> None:
        """REWIND requests for slots `s`: the round in progress, and P = the coverage. Kept
        as the slot's frame where `keep` (the closing round: it is the rank's closing
        packet), else an extra packet."""
        if not s.size:
            return
        self.stats.rewind_requests += int(s.size)
        named = self._named_block(s)
        self._header_only(s[keep], p.MSG.REWIND, named[keep], self.cover[s[keep]])
        extra = ~keep
        self._header_only(s[extra], p.MSG.REWIND, named[extra], self.cover[s[extra]], keep=False)

    def _query(self, s: np.ndarray, send: bool) -> None:
        """Queries for slots `s` (a SKIP naming the round, next_block the rank's own next):
        kept as a silent slot's frame (`send` False: built only when its timer sends it,
        _build_deferred), or sent once beside a contribution whose resends go
        unanswered."""
        if not s.size:
            return
        if send:
            self._query_frames(s, send=True, keep=False)
        else:
            self._deferred[s] = True

    def _build_deferred(self, slots: np.ndarray) -> None:
        """The kept queries of `slots`, due now: what a query built when the slot fell
        silent would hold, since nothing it names (the slot's round, version and this
        rank's next block) changes until a result of the slot comes, and every result
        taken gives the slot a new kept frame."""
        self._query_frames(slots, send=False, keep=True)

    def _query_frames(self, s: np.ndarray, send: bool, keep: bool) -> None:
        """The query of slots `s`: a SKIP naming the round, next_block this rank's own
        next; sent now and/or kept as the slot's frame (_header_only)."""
        self._header_only(s, p.MSG.SKIP, self._named_block(s), self.my_next[s], send, keep)

    def _resending(self, due: np.ndarray) -> None:
        """Timers of slots `due` expired. A silent rank's kept frame is its query. After
        QUERIES_BEFORE_REWIND resends without an answer (no STATUS, no result) the round's
        result is neither pending nor cached any more -- rounds that did not need this
        rank reused its version, and this rank may be awaited in a round it has not
        heard of -- so on every timer from then on it also sends a query (if its kept
        frame is a contribution: the switch answers a query with the last completed
        round when the round in progress is not the one named, or waits for the sender)
        and a REWIND request for its coverage (none with full coverage: nothing to
        re-run). The closing round needs neither: it needs every rank, so its result
        cannot be overwritten before every rank has it."""
        unanswered = (self.queries[due] >= QUERIES_BEFORE_REWIND) & ~self.want_rewind[due]
        open_ = self.kind[due] != CLOSING_ROUND
        self.want_rewind[due[unanswered & open_]] = True
        lost = due[self.want_rewind[due] & open_]
        self._query(lost[self.mine[lost]], True)
        asking = lost[self.cover[lost] != EOS]
        self._request_rewind(asking, np.zeros(asking.size, bool))
        self.stats.queries += int((~self.mine[due]).sum() + self.mine[lost].sum())
        self.queries[due] += 1

    def raise_if_incomplete(self) -> None:
        """IncompleteSum if a slot closed while this rank lacked a sum."""
        if self.incomplete:
            raise IncompleteSum(
                f"job {self.cfg.job} rank {self.cfg.rank}: slot(s) {sorted(self.incomplete)[:8]} "
                f"closed while this rank lacked the sums of some of their blocks (the switch "
                f"took another packet of this rank for its closing one); no sum returned"
            )

    # -- results ---------------------------------------------------------------------------

    def on_results(self, r: Parsed, now: float) -> None:
        """A batch of RESULTs, REWINDs and STATUSes. A silent rank may receive several
        results of one slot in a batch (rounds it had nothing for), so they are taken in
        waves: the first remaining one of every slot at a time, in arrival order (the
        switch does not reorder a slot's results)."""
        ours = self._ours(r)
        c = r.cols
        msg, slot = c["msg_type"], c["slot"]
        status = msg == p.MSG.STATUS
        statuses = 0
        if np.count_nonzero(status):  # (a batch of results holds none, mostly)
            others = ours & status
            status = self._answers(r, others)
            if self.cfg.wire_rank is not None:  # not a slot whose rewind it asked for
                others &= ~status & ~self.want_rewind.take(slot, mode="clip")
                self._take_ahead(r, others, now)
            statuses = int(np.count_nonzero(status))
            if statuses:
                # only a STATUS holding this rank's packet answers its resends: behind a
                # leaf, one lacking it (sent to every rank the round expects, whoever
                # asked) may be of a round that cannot take that packet -- the closing
                # round in the version of an announce round whose result this rank lost,
                # with the data rounds it sat out -- and the resends it prompts must count
                # towards the rewind request (_resending) that gets this rank its place
                held = self._take_statuses(r, status, now)
                self.queries[slot[held]] = 0
        rows = (ours & ((msg == p.MSG.RESULT) | (msg == p.MSG.REWIND))).nonzero()[0]
        taken = 0
        while rows.size:
            order = once_each(slot[rows])
            if order is not None:  # each slot once: the last wave, in slot order
                taken += self._take(r, rows[order], now)
                break
            _, first = np.unique(slot[rows], return_index=True)
            taken += self._take(r, rows[first], now)
            rows = np.delete(rows, first)
            rows = rows[self.slots.active[slot[rows]]]
        self.stats.results_ignored += len(r) - taken - statuses

    def _take(self, r: Parsed, idx: np.ndarray, now: float) -> int:
        """Results `idx` (one per slot): the round the slot waits for (`match`), or a
        later round (the chain has a gap): any multicast one that is not the round
        waited for (the switch multicasts a slot's results in order, and none of the next
        call's before this rank's announce), or, once the rank asked for a rewind, a
        cached one other than the last it took (the switch answers a rank that a round in
        progress lacks with the last completed round; its frames to a rank are not
        reordered, so such a copy is never older than the last result taken). Anything
        else is a duplicate or a stale cached copy (of the previous call, too), and is
        ignored: a query it answered goes on unanswered. Returns how many were used."""
        c = r.cols
        s, ver, b = c["slot"][idx], c["slot_version"][idx], c["block"][idx]
        msg, n = c["msg_type"][idx], c["next_block"][idx]
        closing = self._steady(r, idx, s, ver, b, msg, n)
        if closing is not None:
            return self._take_steady(r, idx, s, ver, b, n, closing, now)
        kind = self.kind[s]
        rewind = msg == p.MSG.REWIND
        nature = self._nature(r, idx, b)
        # what ends the slot's call: a closing round's RESULT, or one the switch flagged
        # ENDED (an announce or data round that every rank took part in, naming
        # END_OF_STREAM: docs/protocol.md section 6)
        closing = ~rewind & ((nature == CLOSING_ROUND) | (self._ended(r, idx) & (n == EOS)))
        # the round waited for: its version and block, and a result of its kind (a
        # closing round's RESULT in the version of an announce this rank waits for is of
        # a slot whose rounds went on without it; a rewind round at a block is no data
        # round of that block)
        match = (ver == self.slot_version[s]) & (b == self.block[s])
        match &= nature == _AWAITED_NATURE[kind]
        matched = int(np.count_nonzero(match))
        key = ver << 56 | msg << 52 | b << 24 | n
        use, used = match, matched
        if matched < idx.size:  # (no later round among them where every one matches)
            cached = (c["flags"][idx] & p.FLAG.CACHED) != 0
            news = ~cached | (key != self.last_key[s])
            again = ~news  # cached copies of the rounds last taken
            if np.count_nonzero(again):  # the answers to resends the rounds did without
                self.pacer.answered_again(s[again], now)
            # in a call's announce round a RESULT that ends a call is the last call's: this
            # call's closing round would have needed this rank's closing packet, and a
            # REWIND request taken as one (coverage is never full here) completes it as a
            # REWIND; an announce round that ends it, this rank's ANNOUNCE
            later = ~match & (kind != CLOSING_ROUND) & news & ~(closing & (kind == ANNOUNCE_ROUND))
            use = match | later
        used, rows = selection(use)
        if not used:
            return 0
        idx, s, b, kind, match = idx[rows], s[rows], b[rows], kind[rows], match[rows]
        ver, n, rewind, closing, key = ver[rows], n[rows], rewind[rows], closing[rows], key[rows]
        ne = c["next_exponent"][idx]
        self._note_taken(s, key)
        announced = match & (kind == ANNOUNCE_ROUND)
        if np.count_nonzero(announced):
            self._check_ranges(r, idx[announced], now)
        self._check_next(s, b, n, kind if matched == used else np.where(match, kind, -1), rewind)
        self._cover(r, idx, s, b, n, kind, match, rewind)
        self.want_rewind[s[self.cover[s] == EOS]] = False  # found again, lacking nothing
        if np.count_nonzero(closing):
            # a slot ends in the version of the round that ended it (the next call
            # announces in the other), also when the closing RESULT came as a later round
            self.slot_version[s[closing]] = ver[closing]
            lacking = s[closing & (self.cover[s] != EOS)]
            self.incomplete.extend(int(x) for x in lacking)
        self._completed(s, closing, now, c["flags"][idx])
        _, go = selection(~closing)
        self._next_rounds(s[go], ver[go], n[go], ne[go], rewind[go])
        return int(idx.size)

    def _steady(
        self,
        r: Parsed,
        idx: np.ndarray,
        s: np.ndarray,
        ver: np.ndarray,
        b: np.ndarray,
        msg: np.ndarray,
        n: np.ndarray,
    ) -> np.ndarray | None:
        """Whether every result `idx` (one per slot `s`: version `ver`, block `b`, type
        `msg`, next block `n`) is of the common kind: a RESULT of the round its slot
        waits for (its version, its block, no fingerprint range), contiguous (its block
        is the coverage), on a slot that wants no rewind and whose own next block it
        does not pass. A data round's names a later block of the slot's stream or
        END_OF_STREAM; a closing round's (block END_OF_STREAM: coverage is full) names
        END_OF_STREAM. Such a wave has no later round, announce or rewind round, gap,
        incomplete slot or refusal in it: returns which of it end their slot's call (a
        closing round's, a data round's flagged ENDED) for _take_steady, else None. Why:
        such waves are nearly all of a call, and the general path's steps for the rest
        were most of a silent rank's CPU (a few dozen numpy calls on a few rows)."""
        kind, eos = self.kind[s], n == EOS
        ok = (msg == p.MSG.RESULT) & ~self.want_rewind[s] & (n <= self.my_next[s])
        ok &= (ver == self.slot_version[s]) & (b == self.block[s]) & (b == self.cover[s])
        # (n > b also says that b is a block, not END_OF_STREAM)
        ahead = (n > b) & (((n < self.payload.nblocks) & (n % self.stride == s)) | eos)
        closing = kind == CLOSING_ROUND
        ok &= np.where(closing, eos, ahead & (kind == DATA_ROUND))
        if r.extension is not None:
            ok &= r.extension[idx] != p.EXT.FINGERPRINT
        if np.count_nonzero(ok) < ok.size:
            return None
        if not np.count_nonzero(eos):  # (most waves: no slot's last round, no array more)
            return closing
        return closing | (eos & self._ended(r, idx))

    @staticmethod
    def _ended(r: Parsed, idx: np.ndarray) -> np.ndarray:
        """Which results `idx` the switch flagged ENDED: their round ended the slot's call
        (docs/protocol.md section 6), so no closing round follows."""
        return (r.cols["flags"][idx] & p.FLAG.ENDED) != 0

    def _take_steady(
        self,
        r: Parsed,
        idx: np.ndarray,
        s: np.ndarray,
        ver: np.ndarray,
        b: np.ndarray,
        n: np.ndarray,
        ends: np.ndarray,
        now: float,
    ) -> int:
        """A wave of the common kind (_steady; `ends`: the results that end their slot's
        call), taken as _take takes it, less the steps that cannot apply to it: each data
        round's sum is stored (_store) and coverage moves to the block it names, the
        rounds complete (one that ends its slot ends it in its version), and each other
        slot's next round goes out: the closing round where END_OF_STREAM is named
        (coverage is then full), else a data round."""
        self._note_taken(s, ver << 56 | int(p.MSG.RESULT) << 52 | b << 24 | n)
        ne = r.cols["next_exponent"][idx]
        taken, rounds = int(idx.size), s
        ending = np.count_nonzero(ends)
        if ending:  # (closing rounds' RESULTs hold no sums)
            data = self.kind[s] == DATA_ROUND
            self._store(r, idx[data], s[data])
            self.cover[s[data]] = n[data]
        else:  # (most waves: every one a data round that goes on)
            self._store(r, idx, s)
            self.cover[s] = n
        self._completed(rounds, ends, now, r.cols["flags"][idx])
        if ending:  # (ended slots end in their version: `ver`)
            go = ~ends
            s, ver, n, ne = s[go], ver[go], n[go], ne[go]
        self._next_rounds(s, ver, n, ne)
        return taken

    def _note_taken(self, s: np.ndarray, key: np.ndarray) -> None:
        """Results were taken for slots `s` (`key`: each one's version, type, block and
        next block): the last taken, told from a cached copy of it by `_take`; no query
        outstanding; the switch holds the job's state on the slot (CONTINUED)."""
        self.last_key[s] = key
        self.queries[s] = 0
        self.continued[s] = True

    def _next_rounds(
        self,
        s: np.ndarray,
        ver: np.ndarray,
        n: np.ndarray,
        ne: np.ndarray,
        rewind: np.ndarray | None = None,
    ) -> None:
        """Slots `s` go on after rounds of version `ver` whose results named block `n`
        (exponent `ne`) next, each in the other version: a rewind round where the result
        was a REWIND (`rewind`: which; n its position), the closing round where
        END_OF_STREAM is named, else a data round of block n."""
        self.slot_version[s] = ver ^ 1
        last = n == EOS
        if rewind is not None and np.count_nonzero(rewind):
            self._rewind(s[rewind], n[rewind])
            last &= ~rewind
            data = ~rewind & ~last
        else:  # (mostly every slot goes on to a data round)
            data = ~last if np.count_nonzero(last) else slice(None)
        if np.count_nonzero(last):
            self._closing(s[last])
        self._data_round(s[data], n[data], ne[data])

    @staticmethod
    def _nature(r: Parsed, idx: np.ndarray, block: np.ndarray) -> np.ndarray:
        """The kind of round results `idx` complete, from their layout: an announce or
        rewind round's carries the fingerprint range (ANNOUNCE_ROUND), a data round's
        its block's sums, a closing round's (block END_OF_STREAM) none. A rank
        lost in the chain may get a closing RESULT as a later round (the closing round
        took its REWIND request as its closing contribution): it ends the slot too."""
        ext = r.extension[idx] if r.extension is not None else np.zeros(idx.size, np.int64)
        eos = block == EOS  # (`block`: the results' blocks)
        return _NATURE[(ext == p.EXT.FINGERPRINT).view(np.uint8), eos.view(np.uint8)]

    def _check_ranges(self, r: Parsed, ai: np.ndarray, now: float) -> None:
        """An announce round's RESULT carries the fingerprint range. Where it differs the
        switch names END_OF_STREAM next, which ends the slot's call (as when no rank has a
        block in it: _take); the rank announces on every slot it has not opened
        (engine._note_mismatch)."""
        if r.extension is None or r.fingerprint is None:
            raise p.ProtocolError("RESULT of an announce round carries no fingerprint range")
        if (r.extension[ai] != p.EXT.FINGERPRINT).any():
            s = int(r.cols["slot"][ai][0])
            raise p.ProtocolError(
                f"RESULT of the announce round of slot {s} carries no fingerprint range"
            )
        low, high = r.fingerprint[ai, 0], r.fingerprint[ai, 1]
        differ = low != high
        if np.count_nonzero(differ):
            self.my_next[r.cols["slot"][ai][differ]] = EOS  # the switch names EOS next
            self._note_mismatch(low, high, differ, now)

    def _check_next(
        self, s: np.ndarray, b: np.ndarray, n: np.ndarray, kind: np.ndarray, rewind: np.ndarray
    ) -> None:
        """The block a RESULT names next must be a block of the slot's stream, and after a
        data round a later one (a block past this rank's own next is a gap: _cover). A
        REWIND names the position to re-run from (never END_OF_STREAM)."""
        cont = n != EOS
        bad = self._outside_stream(s, n, cont)
        bad |= cont & ~rewind & (kind == DATA_ROUND) & (n <= b)
        bad |= rewind & ~cont
        self._refuse_next(s, n, bad, rewind)

    def _cover(
        self,
        r: Parsed,
        idx: np.ndarray,
        s: np.ndarray,
        b: np.ndarray,
        n: np.ndarray,
        kind: np.ndarray,
        match: np.ndarray,
        rewind: np.ndarray,
    ) -> None:
        """The coverage rule. A data round's RESULT of block b is contiguous when b == c;
        an announce or rewind round's (starting at the slot's first block, or at the
        rewind position) when it starts at or before c; then c moves to the next block it
        names (every rank's next non-zero block is at or after it). A contiguous data
        round's sum is stored unless a rewind re-ran a block already stored. Anything
        else (not the closing round, c not at the end) is a gap: ask for a rewind to c.
        A REWIND names the rewind position, not the next block: its data round covers up
        to its own block only (c = the position after it), its announce round nothing."""
        # a RESULT naming a block past this rank's own announced next block: the switch
        # took a stale packet of this rank for its announcement and the winner skipped
        # its block: the rank asks for a rewind to that block at the latest
        skipped = ~rewind & (n > self.my_next[s])
        open_ = kind != CLOSING_ROUND
        contiguous_ok = match & open_
        if np.count_nonzero(skipped):
            self.cover[s[skipped]] = np.minimum(self.cover[s[skipped]], self.my_next[s[skipped]])
            contiguous_ok &= ~skipped
        cov = self.cover[s]
        data = kind == DATA_ROUND
        if np.count_nonzero(data) == s.size:  # data rounds only: no start to compare
            contiguous = (b == cov) & contiguous_ok
        else:
            start = np.where(kind == ANNOUNCE_ROUND, s, b)
            contiguous = np.where(data, b == cov, start <= cov) & contiguous_ok
        stored = contiguous & data
        if np.count_nonzero(stored):
            self._store(r, idx[stored], s[stored])
        # a data round before the coverage, or over blocks whose sums this rank holds,
        # is no gap either (_bridged); coverage never goes back on one
        other = ~contiguous & open_ & ~rewind & ~skipped & r.has_values[idx] & (cov != EOS)
        if np.count_nonzero(other):
            bridged = self._bridged(s, b, cov, other)
            contiguous |= bridged
            n = np.where(bridged, np.maximum(n, cov), n)
        # a rank wants a rewind while its coverage is stuck: one that moves on wants none
        self.want_rewind[s[contiguous & (n > cov)]] = False
        gap = ~contiguous & open_ & (cov != EOS)
        if np.count_nonzero(gap):
            self.want_rewind[s[gap]] = True
        if np.count_nonzero(rewind):
            after = b + self.stride
            after = np.where(after < self.payload.nblocks, after, EOS)
            n = np.where(rewind, np.where(data, after, cov), n)
        self.cover[s[contiguous]] = n[contiguous]

    def _bridged(
        self, s: np.ndarray, b: np.ndarray, cov: np.ndarray, other: np.ndarray
    ) -> np.ndarray:
        """Which of the data rounds' RESULTs `other` (mask: not contiguous; of blocks `b`
        on slots `s`, whose coverage is `cov`) continue the chain all the same: those of a
        block before the coverage (the rank lacks nothing there: it lost the rewind
        round's RESULT that would have brought its coverage back), and those whose every
        block of the stream from the coverage through their own has its sum stored. A
        rewind's re-run sends the results of rounds this rank took before; a lost copy of
        one it holds left nothing unknown between its coverage and the next (the round's
        own sum is stored, and a stored block's sum came from that block's RESULT, whoever
        ran the rounds around it), so the next RESULT moves the coverage on, where asking
        for another rewind re-ran the slot again for every rank: under heavy loss the
        re-runs themselves lost such copies, and the slot churned in rewinds. A block not
        stored (one the rank believes zero, or one whose round's exponent it never
        learned: the RESULT naming a round states its exponent) is still a gap. A few
        slots per wave, each a slice of `stored`."""
        out = np.zeros(s.size, bool)
        for i in np.flatnonzero(other):
            lo, hi = int(cov[i]), int(b[i])
            if hi < lo:  # a round before the coverage: it tells the rank nothing it lacks
                out[i] = True
            elif hi < self.payload.nblocks and (hi - lo) % self.stride == 0:
                out[i] = bool(self.stored[lo : hi + 1 : self.stride].all())
        return out

    def _store(self, r: Parsed, idx: np.ndarray, s: np.ndarray) -> None:
        """Contiguous data rounds' sums, each block once: a rewind re-runs blocks already
        stored (the same sums; an int32 half stored twice would be joined with itself)."""
        blocks = self.block[s]
        fresh, rows = selection(~self.stored[blocks])
        if fresh:
            self._store_sums(r, idx[rows], s[rows])
            self.stored[blocks[rows]] = True

    def _rewind(self, s: np.ndarray, pos: np.ndarray) -> None:
        """A REWIND from the switch: the next round re-runs slots `s` from `pos`. The
        cursor goes back to this rank's first non-zero block at or after it, and the rank
        announces it (the rewind round, which every rank joins)."""
        if not s.size:
            return
        self.stats.rewinds += int(s.size)
        self.kind[s] = REWIND_ROUND
        self.block[s] = pos
        self.exponent[s] = 0
        self.want_rewind[s] = False
        before = pos - self.stride
        nxt = np.where(before >= 0, self._after[np.maximum(before, 0)], self._first[s])
        self.my_next[s] = EOS if self.mismatch is not None else nxt
        self.last_data[s] = EOS
        self.mine[s] = True
        k = s.size
        self._emit(
            s,
            np.full(k, p.MSG.ANNOUNCE),
            self.slot_version[s],
            pos,
            self.my_next[s],
            None,
            np.full(k, p.EXT.FINGERPRINT),
        )

    def _closing(self, s: np.ndarray) -> None:
        """The switch named END_OF_STREAM: the closing round, which needs every rank. A
        rank with full coverage sends its closing SKIP; any other sends a REWIND request
        in its place (its closing contribution, which the switch also takes as the
        request)."""
        if not s.size:
            return
        self.kind[s] = CLOSING_ROUND
        self.stats.control_packets += int(s.size)
        self.block[s] = EOS
        self.exponent[s] = 0
        self.mine[s] = True
        full = self.cover[s] == EOS
        done = s[full]
        self._header_only(done, p.MSG.SKIP, self.block[done], self.block[done], closing=True)
        lacking = s[~full]
        self._request_rewind(lacking, np.ones(lacking.size, bool))

    def _data_round(self, s: np.ndarray, nb: np.ndarray, ne: np.ndarray) -> None:
        """A data round of block `nb` (exponent `ne`): DATA where it is this rank's next
        non-zero block, else silence -- the kept frame is then a query for the round.
        A rank wanting a rewind asks again with every result until the REWIND comes or its
        coverage moves on (_cover)."""
        if not s.size:
            return
        self.kind[s] = DATA_ROUND
        self.block[s] = nb
        self.exponent[s] = ne
        # a round named again (the same RESULT taken twice: a copy whose block the
        # switch left as a request named it) still wants the DATA this rank sent for it
        again = nb == self.last_data[s]
        if np.count_nonzero(again):
            self.my_next[s[again]] = nb[again]
        is_data = nb == self.my_next[s]
        self.mine[s] = is_data
        # a REWIND request before the DATA: the switch takes a request only from a rank
        # whose bit the round has not set
        asking = self.want_rewind[s]
        if np.count_nonzero(asking):
            self._request_rewind(s[asking], np.zeros(np.count_nonzero(asking), bool))
        sending, rows = selection(is_data)
        if sending:
            ds, dn, de = s[rows], nb[rows], ne[rows]
            after = self._after[dn].astype(np.int64)
            self.my_next[ds] = after
            self.last_data[ds] = dn
            # COVERED: this rank holds every earlier sum of the slot (its coverage reached
            # the block), so a last round of every rank may end the call (_take)
            covered = (self.cover[ds] == dn) & ~self.want_rewind[ds]
            self._emit(
                ds,
                int(p.MSG.DATA),
                self.slot_version[ds],
                dn,
                after,
                self.payload.values(dn, de, self.scratch),
                np.full(sending, p.EXT.VALUES),
                np.where(covered, int(p.FLAG.COVERED), 0),
            )
        if sending < s.size:
            self._query(s[~is_data], False)
