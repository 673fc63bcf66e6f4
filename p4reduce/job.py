"""The job model: what a job is, how its settings resolve for a target, and its descriptor.

A job is N ranks (each a switch port and an address), a contiguous range of the switch's
slot pool, an epoch (its incarnation), an encoding and whether int32 travels as halves.
The controller creates jobs (controlplane/jobs.py maps one onto the switch's tables) and
writes one descriptor per rank (docs/protocol.md section 4); a worker reads its descriptor
into a `JobConfig`. Both sides resolve and check a job's settings with the rules below,
written once: the encoding's name and default, "packed implies int32 halves", the job-id
and slot ranges, the descriptor's file name, and how many blocks, slots and rounds a
tensor's call takes.

Plain Python (no numpy, no controller): the controller, the worker library, the demo and
the benchmarks all load it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypeVar

from . import wire as p
from .addresses import Address, AddressError, WorkerAddress, unicast_ipv4, unicast_mac

if TYPE_CHECKING:  # the rules read a Target's fields; a worker never loads the build lookup
    from .target import Target

MAX_JOB_ID = 0xFFFF  # the wire's job field: 16 bits
# a job's slot count and base travel in 16 bits (admission's slot_count, the wire's slot);
# how many the switch has is its pipeline's, checked when a job is created
MAX_SLOT_COUNT = 0xFFFF
MAX_SLOT_BASE = 0xFFFF
ENCODINGS = tuple(e.name.lower() for e in p.Encoding)
# the encoding of a descriptor or state-file record that names none: such records were
# written before encodings existed, when every job added int32 lanes
UNRECORDED_ENCODING = p.Encoding.LANES.name.lower()
ROUND_MODES = tuple(m.name.lower() for m in p.RoundMode)
# the round mode of a descriptor or state-file record that names none: such records were
# written before silent rounds existed, when every rank sent in every round
UNRECORDED_ROUND_MODE = p.RoundMode.EVERY_RANK.name.lower()


class JobError(ValueError):
    """A job that cannot be (or cannot be created); the message says what and why."""


class DescriptorError(ValueError):
    """A job descriptor that this worker cannot use; the message names the field."""


def check_job_id(job: object) -> int:
    """The job id, or JobError unless it is an integer 0..MAX_JOB_ID (the wire's field)."""
    if isinstance(job, bool) or not isinstance(job, int) or not 0 <= job <= MAX_JOB_ID:
        raise JobError(f"job id {job!r} must be 0..{MAX_JOB_ID}")
    return job


_Member = TypeVar("_Member", p.Encoding, p.RoundMode)


def _named(kind: type[_Member], what: str, name: object) -> _Member:
    """The member of `kind` called `name` (lower case, as descriptors and state files write
    it); JobError naming `what` and the names there are."""
    for m in kind:
        if name == m.name.lower():
            return m
    names = ", ".join(m.name.lower() for m in kind)
    raise JobError(f"{what} {name!r} is not one of {names}")


def encoding_named(name: object) -> p.Encoding:
    """The encoding called `name` (lower case, as descriptors and state files write it)."""
    return _named(p.Encoding, "encoding", name)


def round_mode_named(name: object) -> p.RoundMode:
    """The round mode called `name` (lower case, as descriptors and state files write it)."""
    return _named(p.RoundMode, "round mode", name)


def _silent_limit(target: Target) -> str:
    """Why a chip runs no silent rounds: the largest job they could fit there, and what
    its build lacks."""
    limit = target.silent_rank_limit
    if limit is None:
        return ""
    fits = f"jobs of at most {limit} rank{'s' if limit > 1 else ''}" if limit else "no job"
    if target.silent_path:
        return (
            f"; its production build holds silent rounds' per-rank keys, minimum and "
            f"expected ranks for {fits}, but not yet the queries and rewinds that recover "
            f"a silent rank's lost result: docs/tofino.md, 'Silent rounds on TNA'"
        )
    return (
        f"; silent rounds read one register per rank in every round's completing packet "
        f"and take an N-way minimum, which by the compiled build's stages and stateful "
        f"ALUs fits {fits} on {target.name}: docs/tofino.md, 'Silent rounds on TNA'"
    )


def resolve_round_mode(target: Target, job: int, requested: str | None) -> str:
    """A new job's round mode on `target`: `requested`, or the target's default when None;
    JobError for a mode that does not exist or that the target's program does not run."""
    mode = target.default_round_mode if requested is None else requested
    round_mode_named(mode)
    if mode not in target.round_modes:
        raise JobError(
            f"job {job}: round mode {mode!r} is not available on a {target.name} switch "
            f"(the {target.arch} program runs {', '.join(target.round_modes)}"
            f"{_silent_limit(target) if mode == 'silent' else ''}): create the "
            f"job with round mode {' or '.join(repr(m) for m in target.round_modes)}"
        )
    return mode


def resolve_encoding(target: Target, job: int, requested: str | None) -> str:
    """A new job's encoding on `target`: `requested`, or the target's default when None
    (packed on bmv2, lanes on Tofino, whose program has no packed encoding); JobError for
    an encoding that does not exist or that the target's program does not have."""
    encoding = target.default_encoding if requested is None else requested
    encoding_named(encoding)
    if encoding not in target.encodings:
        raise JobError(
            f"job {job}: encoding {encoding!r} is not available on a {target.name} switch "
            f"(the {target.arch} program adds 64 int32 lanes, two per stateful ALU; "
            f"{encoding} exists only in the v1model program): create the job with encoding "
            f"{' or '.join(repr(e) for e in target.encodings)}"
        )
    return encoding


def halves_implied(encoding: str | p.Encoding) -> bool:
    """Whether the encoding by itself makes int32 travel as 16-bit halves: a packed job's
    lanes carry bias-shifted values that an int32 would overflow, so packed always does."""
    name = encoding.name.lower() if isinstance(encoding, p.Encoding) else encoding
    return name == p.Encoding.PACKED.name.lower()


def sends_halves(encoding: str | p.Encoding, int32_halves: bool) -> bool:
    """Whether an int32 tensor of this job travels as 16-bit halves."""
    return int32_halves or halves_implied(encoding)


def resolve_halves(target: Target, job: int, encoding: str, requested: bool | None) -> bool:
    """Whether a job of `encoding` on `target` sends int32 as 16-bit halves (`requested`
    None: the target's choice). A packed job always does; a lanes job must where the switch
    cannot flag an overflowed lane -- otherwise an overflowed int32 sum would be returned
    as if it were right."""
    if halves_implied(encoding):
        if requested is False:
            raise JobError(
                f"job {job}: a packed job always sends int32 as 16-bit halves "
                f"(int32_halves cannot be false)"
            )
        return True
    if requested is None:
        return not target.flags_int32_overflow
    if not requested and not target.flags_int32_overflow:
        raise JobError(
            f"job {job}: int32_halves false needs a switch that flags int32 overflow, "
            f"which the {target.arch} program cannot (an ALU returns only the lane's sum): "
            f"leave int32_halves unset"
        )
    return requested


def resolve_block_values(target: Target, job: int, requested: int | None) -> int:
    """A new job's values per block on `target`: `requested`, or the target's default when
    None; JobError for a size the target's program does not carry (the v1model program keeps
    a register per size; a TNA program's lanes are fixed when it is compiled)."""
    if requested is None:
        return target.default_block_values
    if isinstance(requested, bool) or not isinstance(requested, int):
        raise JobError(f"job {job}: block_values {requested!r} is not an integer")
    if requested not in target.block_sizes:
        sizes = ", ".join(str(k) for k in target.block_sizes)
        raise JobError(
            f"job {job}: {requested} values per block is not available on a {target.name} "
            f"switch (the {target.arch} program carries {sizes}): create the job with "
            f"block_values {'one of ' if len(target.block_sizes) > 1 else ''}{sizes}"
        )
    return requested


def resolve_slots(target: Target, requested: int | None) -> int:
    """A new job's slot count: `requested`, or the target's default when None."""
    return target.default_slots if requested is None else requested


def window_within(default: int | None, slots: int) -> int:
    """A default window (None: every slot) for a job of `slots` slots: never above them."""
    return slots if default is None else min(default, slots)


def resolve_window(target: Target, job: int, slots: int, requested: int | None) -> int:
    """The most slots a rank of a new job of `slots` slots keeps outstanding: `requested`,
    or the target's default window (every slot where it has none) bounded by the slots;
    JobError for a window that is not 1..slots."""
    if requested is None:
        return window_within(target.default_window, slots)
    if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= slots:
        raise JobError(
            f"job {job}: window {requested!r} is not a number of slots in 1..{slots} "
            f"(the job's slots)"
        )
    return requested


def descriptor_name(job: int, rank: int) -> str:
    """The file name of rank `rank`'s descriptor of job `job`, as `p4reduce-ctl job create
    --descriptors DIR` writes it and hostlib.jobref finds it."""
    return f"job{job}-rank{rank}.json"


def block_count(elements: int, halves: bool, block_values: int = p.BLOCK_VALUES) -> int:
    """Blocks a tensor of `elements` values takes on the wire in blocks of `block_values`
    (at least one; twice as many when int32 travels as halves: the high halves and the low
    halves of each block)."""
    return max(1, -(-elements // block_values)) * (2 if halves else 1)


# How many slots a call uses (slots_for_call). Each slot a call uses costs rounds that
# carry no block (its announce round, and in silent rounds its closing round where some
# rank sat out its last round), so a call should use as few as keep the switch busy: with
# fewer, the round trip through the switch and the workers sets the pace. What keeps it
# busy is values in flight rather than packets: BUSY_SLOTS packets per rank up to
# BUSY_VALUES values in flight, fewer and wider packets from there, never fewer than
# WIDE_BUSY_SLOTS (busy_slots). A slot's rounds follow one another, a round trip each, so
# a long call needs more of them: one per BLOCKS_PER_SLOT blocks keeps a dense call's
# chain of rounds on a slot at most that long. bench/slot_window.py measures calls at
# several slot counts and block sizes end to end, every slot outstanding (docs/hostlib.md,
# "Slots per call", has its latest table); 16 is also the window that gives a job its
# fair share of the switch (FAIR_SLOTS).
BUSY_SLOTS = 16
# The window that keeps a job's share of a first-in first-out switch beside others: a job
# of FAIR_SLOTS slots then gets half of it against any other, one of half as many a third
# (hostlib.slots.fifo_share; docs/reliability.md, "Jobs share the switch"). The default
# window where a descriptor names none, and a bmv2 job's (p4reduce.target).
FAIR_SLOTS = BUSY_SLOTS
BUSY_VALUES = BUSY_SLOTS * 2048
WIDE_BUSY_SLOTS = 8
BLOCKS_PER_SLOT = 32


def busy_slots(block_values: int) -> int:
    """The slots a long enough call at `block_values` values per block keeps busy:
    BUSY_VALUES values per rank in flight, between WIDE_BUSY_SLOTS and BUSY_SLOTS packets
    (16 up to 2 048 values per block, 8 from 4 096)."""
    return max(WIDE_BUSY_SLOTS, min(BUSY_SLOTS, BUSY_VALUES // block_values))


def slots_for_call(blocks: int, slot_count: int, *, block_values: int) -> int:
    """The slots a call of `blocks` blocks of `block_values` values uses in a job of
    `slot_count` slots: enough to keep busy_slots packets per rank in flight, more only
    as the call grows (one slot per BLOCKS_PER_SLOT blocks), never more than the job's
    slots or the call's blocks, at least one. A function of the call's block count and
    the job's slot count and block size only, so every rank of the call picks the same
    slots (0 .. n-1) and the same streams."""
    if slot_count < 1:
        raise ValueError(f"a job has at least one slot, not {slot_count}")
    wanted = max(busy_slots(block_values), -(-blocks // BLOCKS_PER_SLOT))
    return max(1, min(slot_count, blocks, wanted))


def call_slot_count(
    blocks: int, slot_count: int, named: int | None = None, *, block_values: int
) -> int:
    """The slots a call of `blocks` blocks of `block_values` values uses in a job of
    `slot_count` slots: none without a block, else slots_for_call's, or `named` (a
    measurement's count, the same on every rank) bounded by the job's slots and the call's
    blocks as the rule is."""
    if not blocks:
        return 0
    if named is not None:
        return min(named, slot_count, blocks)
    return slots_for_call(blocks, slot_count, block_values=block_values)


def announce_rounds(blocks: int, slots: int, *, block_values: int) -> int:
    """Announce rounds of a call of `blocks` blocks of `block_values` values in a job of
    `slots` slots: one per slot the call uses (call_slot_count; docs/protocol.md sections
    5 and 6)."""
    return call_slot_count(blocks, slots, block_values=block_values)


def closing_rounds(
    nonzero: Sequence[Sequence[bool]], slots: int, named: int | None = None, *, block_values: int
) -> int:
    """Closing rounds of a silent call without loss, `nonzero[r][b]` saying whether block b
    is non-zero on rank r, in a job of `slots` slots and `block_values` values per block:
    one per slot the call uses (call_slot_count; `named` as there) whose stream holds a
    block non-zero on some rank, unless the last such block is non-zero on every rank. A
    slot with none ends at its announce round, a slot whose last round every rank joins
    at that round (each rank's DATA is COVERED without loss): every rank took part,
    knowing every earlier sum (docs/protocol.md section 6)."""
    blocks = len(nonzero[0]) if len(nonzero) else 0
    used = call_slot_count(blocks, slots, named, block_values=block_values)
    last: dict[int, int] = {}  # slot -> its stream's last block non-zero on some rank
    for b in range(blocks):
        if any(rank[b] for rank in nonzero):
            last[b % used] = b
    return sum(1 for b in last.values() if not all(rank[b] for rank in nonzero))


def round_count(
    nonzero_blocks: int,
    blocks: int,
    slots: int,
    round_mode: str = "every_rank",
    closing: int | None = None,
    *,
    block_values: int,
) -> int:
    """Rounds a call of `blocks` blocks of `block_values` values takes: one per block that
    is non-zero in any rank, plus the active slots' announce rounds, and in silent rounds
    the closing rounds (`closing`, from closing_rounds; None: one per active slot, as many
    as there can be)."""
    announce = announce_rounds(blocks, slots, block_values=block_values)
    if round_mode_named(round_mode) != p.RoundMode.SILENT:
        return nonzero_blocks + announce
    return nonzero_blocks + announce + (announce if closing is None else closing)


@dataclass(frozen=True)
class JobConfig:
    """One rank's view of its job: what its descriptor says, every field checked."""

    job: int
    epoch: int  # the job's incarnation: admission matches it (protocol.md section 7)
    rank: int
    worker_count: int
    slot_base: int
    slot_count: int
    switch: Address
    worker: Address
    protocol: int = p.PROTOCOL_VERSION
    block_values: int = p.BLOCK_VALUES
    encoding: p.Encoding = p.Encoding.LANES  # how values travel (protocol.md section 10)
    # int32 travels as 16-bit halves and the worker checks the exact sum for overflow:
    # always in a packed job, and in a lanes job on a switch that cannot flag an
    # overflowed lane (Tofino: its ALUs return one value, the sum; protocol.md section 10)
    int32_halves: bool = False
    # who sends in a round (protocol.md section 6); every packet says it with FLAG_SILENT
    round_mode: p.RoundMode = p.RoundMode.EVERY_RANK
    # a job of a fabric in the leaf role (docs/fabric.md): the rank's index among its
    # leaf's ranks, which its packets carry; None: `rank` itself (one switch holds the job)
    wire_rank: int | None = None
    # in the leaf role: the job-wide rank of each of its leaf's ranks, by index there (a
    # leaf's STATUS names its ranks by that index: hostlib's liveness reads it so)
    leaf_ranks: tuple[int, ...] | None = None
    # the most slots the rank keeps outstanding unless its Worker is given a window
    # (resolve_window: the target's); None: the descriptor names none (written before the
    # field existed), and the Worker keeps FAIR_SLOTS
    window: int | None = None

    @property
    def rank_on_wire(self) -> int:
        """The `rank` field of this rank's packets: its bit in its switch's bitmap."""
        return self.rank if self.wire_rank is None else self.wire_rank

    @property
    def announce_block(self) -> bool:
        """Whether this rank's ANNOUNCEs carry a block after their fingerprint range (the
        leaf role of silent rounds above SKIP_GROWS_TO_VALUES values per block:
        wire.announce_carries_block); its frames are then 8 bytes longer than a DATA."""
        silent = self.round_mode == p.RoundMode.SILENT
        return p.announce_carries_block(self.block_values, silent and self.wire_rank is not None)

    def to_switch(self) -> p.Endpoints:
        """Addresses of this rank's packets to the switch (what admission checks)."""
        return p.Endpoints(
            src_mac=self.worker.mac,
            dst_mac=self.switch.mac,
            src_ip=self.worker.ip,
            dst_ip=self.switch.ip,
            src_port=self.worker.udp_port,
            dst_port=self.switch.udp_port,
        )

    def from_switch(self) -> p.Endpoints:
        """Addresses of the results the switch sends to this rank (section 12)."""
        return p.Endpoints(
            src_mac=self.switch.mac,
            dst_mac=self.worker.mac,
            src_ip=self.switch.ip,
            dst_ip=self.worker.ip,
            src_port=p.UDP_PORT_BASE,
            dst_port=self.worker.udp_port,
        )

    def to_dict(self) -> dict[str, Any]:
        """The descriptor (docs/protocol.md section 4): the one writer of descriptors."""
        return (
            {
                "protocol": self.protocol,
                "job": self.job,
                "epoch": self.epoch,
                "rank": self.rank,
                "worker_count": self.worker_count,
                "slot_base": self.slot_base,
                "slot_count": self.slot_count,
                "block_values": self.block_values,
                "encoding": self.encoding.name.lower(),
                "int32_halves": self.int32_halves,
                "round_mode": self.round_mode.name.lower(),
                "switch": vars(self.switch).copy(),
                "worker": vars(self.worker).copy(),
            }
            | ({} if self.window is None else {"window": self.window})
            | self._leaf_role()
        )

    def _leaf_role(self) -> dict[str, Any]:
        """The leaf role's fields, only where set: other descriptors stay as they were."""
        if self.wire_rank is None:
            return {}
        out: dict[str, Any] = {"wire_rank": self.wire_rank}
        if self.leaf_ranks is not None:
            out["leaf_ranks"] = list(self.leaf_ranks)
        return out


@dataclass(frozen=True)
class Uplink:
    """A leaf's way to the spine for one job (the leaf role, docs/fabric.md): its port
    towards the spine, the spine's MAC and IPv4, and the leaf's rank in the spine's job."""

    port: int
    mac: str
    ip: str
    rank: int


@dataclass
class Job:
    """A job as the controller keeps it: its ranks' places on the switch, its slot range of
    the pool, its index (the switch's per-job counters and multicast group), its epoch,
    encoding, halves and simulated loss. Written to the state file (p4reduce.state)."""

    job: int
    job_index: int
    slot_base: int
    slot_count: int
    epoch: int
    workers: list[WorkerAddress]
    encoding: str  # wire.Encoding name, lower case
    # int32 travels as 16-bit halves (resolve_halves); None: what the encoding implies by
    # itself (state files written before the field existed hold None)
    int32_halves: bool | None = None
    loss: dict | None = None
    block_values: int = p.BLOCK_VALUES  # K; state files written before the field: 64
    round_mode: str = UNRECORDED_ROUND_MODE  # wire.RoundMode name, lower case
    # the most slots a rank keeps outstanding (resolve_window); None: state files written
    # before the field (their descriptors name none: the Worker's FAIR_SLOTS)
    window: int | None = None
    # the leaf role (docs/fabric.md): on a leaf, its uplink to the spine and each
    # worker's rank in the whole job (workers' ranks are their indices on the leaf); on
    # every switch of such a job, the whole job's ranks (the packed bias's N)
    uplink: Uplink | None = None
    ranks_in_job: list[int] | None = None
    job_ranks: int | None = None
    # the switch lost this incarnation's state: its pipeline was pushed while the job
    # existed (a restart, a reset). It is admitted again only so that its ranks learn it
    # (admit_lost: every packet answered STATE_LOST; docs/protocol.md section 8)
    lost: bool = False

    def __post_init__(self) -> None:
        if self.int32_halves is None:
            self.int32_halves = halves_implied(self.encoding)

    @property
    def worker_count(self) -> int:
        return len(self.workers)

    @property
    def ranks_in_all(self) -> int:
        """The whole job's ranks: worker_count, or all leaves' in the leaf role."""
        return self.job_ranks or self.worker_count

    @property
    def spine_role(self) -> bool:
        """The spine's part of a job in the leaf and spine roles: its ranks are the job's
        leaves (it counts every rank of the job, and has no uplink of its own)."""
        return self.job_ranks is not None and self.uplink is None

    @property
    def silent(self) -> bool:
        return round_mode_named(self.round_mode) == p.RoundMode.SILENT

    @property
    def announce_block(self) -> bool:
        """Whether the job's ranks' ANNOUNCEs carry a block (JobConfig.announce_block):
        silent rounds in the leaf and spine roles, on every switch of the job."""
        return p.announce_carries_block(self.block_values, self.silent and bool(self.job_ranks))

    def job_config(self, rank: int, switch: Address) -> JobConfig:
        """Worker `rank`'s configuration, as it parses it from the descriptor (on a leaf:
        the worker of index `rank` there, its rank the job-wide one)."""
        w = next((w for w in self.workers if w.rank == rank), None)
        if w is None:
            raise JobError(f"job {self.job} has no rank {rank}")
        on_leaf = self.ranks_in_job is not None
        return JobConfig(
            job=self.job,
            epoch=self.epoch,
            rank=self.ranks_in_job[rank] if self.ranks_in_job is not None else rank,
            wire_rank=rank if on_leaf else None,
            leaf_ranks=tuple(self.ranks_in_job) if self.ranks_in_job is not None else None,
            worker_count=self.ranks_in_all,
            slot_base=self.slot_base,
            slot_count=self.slot_count,
            switch=switch,
            worker=w.address,
            block_values=self.block_values,
            encoding=encoding_named(self.encoding),
            int32_halves=bool(self.int32_halves),
            round_mode=round_mode_named(self.round_mode),
            window=self.window,
        )

    def descriptor(self, rank: int, switch: Address) -> dict:
        """Everything worker `rank` needs (docs/protocol.md section 4)."""
        return self.job_config(rank, switch).to_dict()

    def descriptors(self, switch: Address) -> list[dict]:
        return [self.descriptor(w.rank, switch) for w in sorted(self.workers, key=lambda w: w.rank)]

    def to_json(self) -> dict:
        """The job's record in the state file."""
        return (
            {
                "job": self.job,
                "job_index": self.job_index,
                "slot_base": self.slot_base,
                "slot_count": self.slot_count,
                "epoch": self.epoch,
                "loss": self.loss,
                "encoding": self.encoding,
                "int32_halves": self.int32_halves,
                "block_values": self.block_values,
                "round_mode": self.round_mode,
                "window": self.window,
                "workers": [asdict(w) for w in self.workers],
            }
            | self._leaf_role_json()
            | ({"lost": True} if self.lost else {})
        )

    def _leaf_role_json(self) -> dict:
        """The leaf role's fields, only where set: other records stay as they were."""
        out: dict[str, Any] = {}
        if self.uplink is not None:
            out["uplink"] = asdict(self.uplink)
        if self.ranks_in_job is not None:
            out["ranks_in_job"] = list(self.ranks_in_job)
        if self.job_ranks is not None:
            out["job_ranks"] = self.job_ranks
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Job":
        return cls(
            job=data["job"],
            job_index=data["job_index"],
            slot_base=data["slot_base"],
            slot_count=data["slot_count"],
            epoch=data["epoch"],
            loss=data.get("loss"),
            encoding=data.get("encoding", UNRECORDED_ENCODING),
            int32_halves=data.get("int32_halves"),
            block_values=data.get("block_values", p.BLOCK_VALUES),
            round_mode=data.get("round_mode", UNRECORDED_ROUND_MODE),
            window=data.get("window"),
            workers=[WorkerAddress(**w) for w in data["workers"]],
            uplink=Uplink(**data["uplink"]) if data.get("uplink") else None,
            ranks_in_job=data.get("ranks_in_job"),
            job_ranks=data.get("job_ranks"),
            lost=bool(data.get("lost", False)),
        )


def mark_lost(jobs: Sequence[Job]) -> list[int]:
    """Mark `jobs` lost: the switch's pipeline was pushed while they existed, which cleared
    their slots. The ids of those not marked before, in order.

    A lost job is admitted again only so that its ranks learn it (admit_lost: every packet
    answered STATE_LOST). Admitted as new, a rank that had no result on a slot yet would
    rebuild the slot and wait there for ranks that had one (docs/protocol.md section 8)."""
    newly = sorted(j.job for j in jobs if not j.lost)
    for job in jobs:
        job.lost = True
    return newly


def check_workers(job_id: int, workers: list[WorkerAddress]) -> None:
    """JobError unless `workers` can be a job's ranks: 1..MAX_WORKERS of them, ranks
    0..N-1 without gaps, distinct ports, unicast addresses, UDP ports in p4reduce's range.
    (Whether the ports exist on a switch is the controller's to check.)"""
    check_job_id(job_id)
    if not workers:
        raise JobError(f"job {job_id}: no workers")
    if len(workers) > p.MAX_WORKERS:
        raise JobError(
            f"job {job_id}: {len(workers)} workers, the contributor bitmap holds "
            f"at most {p.MAX_WORKERS}"
        )
    ranks = [w.rank for w in workers]
    dup = {r for r in ranks if ranks.count(r) > 1}
    if dup:
        raise JobError(f"job {job_id}: duplicate rank(s) {sorted(dup)}")
    if sorted(ranks) != list(range(len(workers))):
        raise JobError(
            f"job {job_id}: ranks must be 0..{len(workers) - 1} without gaps, got {sorted(ranks)}"
        )
    ports = [w.port for w in workers]
    dup = {port for port in ports if ports.count(port) > 1}
    if dup:
        raise JobError(f"job {job_id}: duplicate port(s) {sorted(dup)}")
    for w in workers:
        try:
            unicast_mac(w.mac)
            unicast_ipv4(w.ip)
        except AddressError as exc:
            raise JobError(f"job {job_id} rank {w.rank}: {exc}") from None
        if w.udp_port & p.UDP_PORT_MASK != p.UDP_PORT_BASE:
            raise JobError(
                f"job {job_id} rank {w.rank}: udp_port {w.udp_port} is not in "
                f"0x{p.UDP_PORT_BASE:04x}..0x{p.UDP_PORT_BASE + 15:04x}"
            )


def _address(d: Any, where: str, *, port_in_range: bool) -> Address:
    if not isinstance(d, Mapping):
        raise DescriptorError(f"field {where} must be an object with mac, ip, udp_port")
    try:
        mac, ip, port = d["mac"], d["ip"], int(d["udp_port"])
    except KeyError as e:
        raise DescriptorError(f"field {where}.{e.args[0]} missing") from None
    try:
        p.mac_bytes(mac)
        p.ip_bytes(ip)
    except p.ProtocolError as e:
        raise DescriptorError(f"field {where}: {e}") from None
    if port_in_range and port & p.UDP_PORT_MASK != p.UDP_PORT_BASE:
        raise DescriptorError(
            f"field {where}.udp_port={port} not in the p4reduce range "
            f"0x{p.UDP_PORT_BASE:04x}-0x{p.UDP_PORT_BASE + 15:04x}"
        )
    return Address(mac=str(mac).lower(), ip=str(ip), udp_port=port)


# descriptor fields written under an earlier name, read under either (docs/CHANGELOG.md)
_EARLIER_NAMES = {"worker_count": "workers", "block_values": "lanes"}


def _read(descriptor: Mapping[str, Any] | str | os.PathLike[str]) -> dict:
    """The descriptor as a dict, from a dict, JSON text or a JSON file's path."""
    if isinstance(descriptor, Mapping):
        d = dict(descriptor)
    else:
        text = os.fspath(descriptor)
        if text.lstrip().startswith("{"):
            d = json.loads(text)
        else:
            with open(text, encoding="utf-8") as f:
                d = json.load(f)
    if not isinstance(d, dict):
        raise DescriptorError("a job descriptor is a JSON object")
    for name, earlier in _EARLIER_NAMES.items():
        if name not in d and earlier in d:
            d[name] = d[earlier]
    return d


def load_descriptor(descriptor: Mapping[str, Any] | str | os.PathLike[str]) -> JobConfig:
    """Accept a dict, a JSON string or a path to a JSON file; refuse what does not fit."""
    d = _read(descriptor)

    def integer(name: str, lo: int, hi: int) -> int:
        if name not in d:
            raise DescriptorError(f"field {name} missing")
        v = d[name]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise DescriptorError(f"field {name}={v!r} not an integer in {lo}..{hi}")
        return v

    proto = integer("protocol", 0, 15)
    if proto != p.PROTOCOL_VERSION:
        raise DescriptorError(f"field protocol={proto}: this worker speaks {p.PROTOCOL_VERSION}")
    # any K a switch program could carry: which sizes a switch takes is its controller's
    # to check when the job is created (resolve_block_values)
    block_values = integer("block_values", 1, p.MAX_BLOCK_VALUES)
    # more than one switch's MAX_WORKERS only in the leaf role, where a rank's packets
    # carry its index on its leaf (wire_rank)
    leaf_role = "wire_rank" in d
    worker_count = integer("worker_count", 1, p.MAX_JOB_RANKS if leaf_role else p.MAX_WORKERS)
    wire_rank = integer("wire_rank", 0, p.MAX_WORKERS - 1) if leaf_role else None
    name = d.get("encoding", UNRECORDED_ENCODING)
    try:
        encoding = encoding_named(name)
    except JobError:
        raise DescriptorError(
            f"field encoding={name!r} not one of {', '.join(ENCODINGS)}"
        ) from None
    int32_halves = d.get("int32_halves", False)  # older descriptors: the switch flags it
    if not isinstance(int32_halves, bool):
        raise DescriptorError(f"field int32_halves={int32_halves!r} is not true or false")
    mode = d.get("round_mode", UNRECORDED_ROUND_MODE)
    try:
        round_mode = round_mode_named(mode)
    except JobError:
        raise DescriptorError(
            f"field round_mode={mode!r} not one of {', '.join(ROUND_MODES)}"
        ) from None
    slot_count = integer("slot_count", 1, MAX_SLOT_COUNT)
    return JobConfig(
        job=integer("job", 0, MAX_JOB_ID),
        epoch=integer("epoch", 1, p.MAX_EPOCH),
        rank=integer("rank", 0, worker_count - 1),
        worker_count=worker_count,
        slot_base=integer("slot_base", 0, MAX_SLOT_BASE),
        slot_count=slot_count,
        switch=_address(d.get("switch"), "switch", port_in_range=False),
        worker=_address(d.get("worker"), "worker", port_in_range=True),
        protocol=proto,
        block_values=block_values,
        encoding=encoding,
        int32_halves=int32_halves,
        round_mode=round_mode,
        wire_rank=wire_rank,
        leaf_ranks=_leaf_ranks(d, worker_count, wire_rank),
        # older descriptors name none: the Worker's default
        window=integer("window", 1, slot_count) if "window" in d else None,
    )


def _leaf_ranks(d: dict, worker_count: int, wire_rank: int | None) -> tuple[int, ...] | None:
    """The descriptor's `leaf_ranks` (the leaf role's job-wide rank of each of the leaf's
    ranks, by index there), checked; None where absent (older descriptors: liveness then
    names a leaf's ranks by their index)."""
    v = d.get("leaf_ranks")
    if v is None:
        return None
    if (
        wire_rank is None
        or not isinstance(v, list)
        or not 0 < len(v) <= p.MAX_WORKERS
        or any(isinstance(x, bool) or not isinstance(x, int) for x in v)
        or any(not 0 <= x < worker_count for x in v)
        or len(set(v)) != len(v)
        or wire_rank >= len(v)
        or v[wire_rank] != d.get("rank")
    ):
        raise DescriptorError(
            f"field leaf_ranks={v!r}: not the distinct ranks (0..{worker_count - 1}) of the "
            f"leaf of rank {d.get('rank')} with index {wire_rank} there"
        )
    return tuple(v)
