"""Job lifecycle: slot allocation, epochs, the entries of a job, and job descriptors.

A job is N workers (rank -> switch port, MAC, IPv4, UDP port) and a contiguous range of the
switch's slot pool. Creating one allocates the range, gives the job a new epoch (so the
data plane resets the slots in band, docs/protocol.md section 8), installs admission,
multicast and result-destination entries, and returns one descriptor per rank. Job state is
persisted to a small JSON file (written atomically) so a restarted controller neither
forgets jobs nor double-allocates slots; the switch cannot be asked for it because bmv2's
P4Runtime server does not serve register reads and table entries do not carry all of it.

The state file is the single source of truth: every change (create, delete, loss) and every
reconcile takes an exclusive lock (`<state file>.lock`), re-reads the file, changes the
switch, and writes the file back, so several `p4reduce-ctl` processes (and a long-running
`up --watch`) never work from a stale job list or hand out the same slots twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hostlib import wire
from hostlib.config import JobConfig

from . import admission, drop_simulator, replication, result_destination, stats
from .addresses import Address, AddressError, WorkerAddress, unicast_ipv4, unicast_mac
from .admission import JobParameters
from .connection import SwitchConnection, SwitchError
from .p4rt import P4InfoError, P4InfoIndex
from .target import (
    TARGETS,
    PortMap,
    Target,
    TargetError,
    check_encoding,
    check_pipes,
    int32_halves_for,
)

MAX_WORKERS = wire.MAX_WORKERS
# a job's slot count travels in 16 bits (admission's slot_count, the wire's slot); how
# many the switch has is its pipeline's (PoolSizes), checked when a job is created
MAX_SLOT_COUNT = (1 << 16) - 1
JOB_GROUP_BASE = 16  # multicast group of job index i is 16 + i; 1..15 are for flooding
MAX_EPOCH = wire.MAX_EPOCH  # bit 31 of the switch's slot epoch marks a lost slot


ENCODINGS = tuple(e.name.lower() for e in wire.Encoding)


class JobError(ValueError):
    """A job request the controller refuses; the message says what and why."""


@dataclass(frozen=True)
class PoolSizes:
    """How many slots and job indices the switch has, read from its pipeline's P4Info (never
    a copy of p4src/common/constants.p4's POOL_SLOTS and MAX_JOBS, which may change)."""

    pool_slots: int  # register slot_epoch: one entry per pool slot
    max_jobs: int  # the per-job counters: one index per job_index

    @classmethod
    def of(cls, p4: P4InfoIndex) -> "PoolSizes":
        per_job = {p4.counter(name).size for name in stats.JOB_COUNTERS}
        if len(per_job) != 1:
            raise P4InfoError(
                f"the per-job counters {list(stats.JOB_COUNTERS)} have "
                f"different sizes {sorted(per_job)} in the P4Info"
            )
        return cls(pool_slots=p4.register("slot_epoch").size, max_jobs=per_job.pop())


@dataclass
class Job:
    job: int
    job_index: int
    slot_base: int
    slot_count: int
    epoch: int
    workers: list[WorkerAddress]
    loss: dict | None = None
    encoding: str = "packed"  # wire.Encoding name, lower case
    # int32 travels as 16-bit halves (target.int32_halves_for); None: what the encoding
    # implies by itself (a packed job always sends halves; state files written before the
    # field existed hold None)
    int32_halves: bool | None = None

    def __post_init__(self) -> None:
        if self.int32_halves is None:
            self.int32_halves = self.encoding == "packed"

    @property
    def params(self) -> JobParameters:
        encoding = wire.Encoding[self.encoding.upper()]
        return JobParameters(
            job=self.job,
            job_index=self.job_index,
            slot_base=self.slot_base,
            slot_count=self.slot_count,
            worker_count=len(self.workers),
            mcast_grp=JOB_GROUP_BASE + self.job_index,
            epoch=self.epoch,
            encoding=int(encoding),
            bias=(wire.packed_bias(len(self.workers)) if encoding == wire.Encoding.PACKED else 0),
        )

    def job_config(self, rank: int, switch: Address) -> JobConfig:
        """Worker `rank`'s configuration, as hostlib parses it from the descriptor."""
        w = next((w for w in self.workers if w.rank == rank), None)
        if w is None:
            raise JobError(f"job {self.job} has no rank {rank}")
        return JobConfig(
            job=self.job,
            epoch=self.epoch,
            rank=rank,
            worker_count=len(self.workers),
            slot_base=self.slot_base,
            slot_count=self.slot_count,
            switch=switch,
            worker=w.address,
            encoding=wire.Encoding[self.encoding.upper()],
            int32_halves=self.int32_halves,
        )

    def descriptor(self, rank: int, switch: Address) -> dict:
        """Everything worker `rank` needs (docs/protocol.md section 4): its JobConfig,
        serialised by hostlib, the one writer of descriptors."""
        return self.job_config(rank, switch).to_dict()

    def descriptors(self, switch: Address) -> list[dict]:
        return [self.descriptor(w.rank, switch) for w in sorted(self.workers, key=lambda w: w.rank)]

    def to_json(self) -> dict:
        return {
            "job": self.job,
            "job_index": self.job_index,
            "slot_base": self.slot_base,
            "slot_count": self.slot_count,
            "epoch": self.epoch,
            "loss": self.loss,
            "encoding": self.encoding,
            "int32_halves": self.int32_halves,
            "workers": [asdict(w) for w in self.workers],
        }

    @classmethod
    def from_json(cls, data: dict) -> "Job":
        return cls(
            job=data["job"],
            job_index=data["job_index"],
            slot_base=data["slot_base"],
            slot_count=data["slot_count"],
            epoch=data["epoch"],
            loss=data.get("loss"),
            # jobs written before encodings existed were installed lane by lane
            encoding=data.get("encoding", "lanes"),
            int32_halves=data.get("int32_halves"),
            workers=[WorkerAddress(**w) for w in data["workers"]],
        )


@dataclass
class JobTable:
    """The controller's jobs and epoch counter, and the file that keeps them."""

    path: Path | None = None
    jobs: dict[int, Job] = field(default_factory=dict)
    last_epoch: int = 0
    # the P4Runtime cookie of the pipeline push the epochs date from (controller.py)
    pipeline_cookie: int | None = None

    @classmethod
    def load(cls, path: Path | None) -> "JobTable":
        table = cls(path)
        if path is not None and path.exists():
            try:
                data = json.loads(path.read_text())
                table.last_epoch = int(data["last_epoch"])
                cookie = data.get("pipeline_cookie")
                table.pipeline_cookie = None if cookie is None else int(cookie)
                jobs = [Job.from_json(j) for j in data["jobs"]]
                _check_jobs(jobs, table.last_epoch)
                table.jobs = {j.job: j for j in jobs}
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                # nothing is written while the file is unreadable: every change reloads
                # it first (locked()), so this error stops it before the switch or the
                # file is touched
                raise JobError(
                    f"state file {path} is unreadable ({type(exc).__name__}: "
                    f"{exc}); nothing was changed: repair it, or move it away "
                    "to start with no jobs"
                ) from None
        return table

    def save(self) -> None:
        if self.path is None:
            return
        data = {
            "last_epoch": self.last_epoch,
            "pipeline_cookie": self.pipeline_cookie,
            "jobs": [j.to_json() for j in sorted(self.jobs.values(), key=lambda j: j.job)],
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".jobs-")
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            raise JobError(
                f"cannot write state file {self.path} ({exc.strerror or exc}); "
                "set switch.state_file to a writable path"
            ) from None

    @contextlib.contextmanager
    def locked(self) -> Iterator["JobTable"]:
        """Exclusive access to the state file for one change: wait for any other
        controller process, then re-read the file (what they did is now ours too)."""
        if self.path is None:
            yield self
            return
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise JobError(
                f"cannot use state file {self.path} ({exc.strerror or exc}); "
                "set switch.state_file to a writable path"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.reload()
            yield self
        finally:
            os.close(fd)  # releases the lock

    def reload(self) -> None:
        """Replace the in-memory jobs by the file's (no-op without a file)."""
        if self.path is not None:
            fresh = JobTable.load(self.path)
            self.jobs, self.last_epoch = fresh.jobs, fresh.last_epoch
            self.pipeline_cookie = fresh.pipeline_cookie

    def next_epoch(self) -> int:
        """1..2^31-1, wrapping and skipping 0 (a slot never used holds epoch 0). An epoch
        names one incarnation of a job on the wire and in admission, so it is never handed
        out twice while the state file lives (2^31-1 creations before a wrap)."""
        self.last_epoch = self.last_epoch % MAX_EPOCH + 1
        return self.last_epoch

    def allocate_slots(self, count: int, pool_slots: int) -> int:
        """First fit of `count` contiguous slots of a pool of `pool_slots`; JobError when
        the pool has no such gap."""
        if not 1 <= count <= pool_slots:
            raise JobError(f"slots={count}: a job needs 1..{pool_slots} slots (the switch's pool)")
        taken = sorted((j.slot_base, j.slot_base + j.slot_count) for j in self.jobs.values())
        start = 0
        for lo, hi in taken:
            if lo - start >= count:
                return start
            start = max(start, hi)
        if pool_slots - start >= count:
            return start
        free = pool_slots - sum(j.slot_count for j in self.jobs.values())
        raise JobError(
            f"slot pool exhausted: {count} contiguous slots requested, {free} of {pool_slots} free"
        )

    def allocate_index(self, max_jobs: int) -> int:
        """The lowest job index (per-job counters, multicast group) no job uses."""
        used = {j.job_index for j in self.jobs.values()}
        for i in range(max_jobs):
            if i not in used:
                return i
        raise JobError(f"too many jobs: the switch counts at most {max_jobs}")


def _check_jobs(jobs: list[Job], last_epoch: int) -> None:
    """ValueError for a state file's jobs that cannot all be true: loading them would
    silently drop one (a duplicate id) or let two share slots or counters."""
    if not 0 <= last_epoch <= MAX_EPOCH:
        raise ValueError(f"last_epoch {last_epoch} is not 0..{MAX_EPOCH}")
    seen: dict[str, set[int]] = {"job id": set(), "job index": set()}
    for j in jobs:
        for what, value in (("job id", j.job), ("job index", j.job_index)):
            if value in seen[what]:
                raise ValueError(f"{what} {value} appears twice")
            seen[what].add(value)
        numbers = {
            "job": j.job,
            "job_index": j.job_index,
            "slot_base": j.slot_base,
            "slot_count": j.slot_count,
            "epoch": j.epoch,
        }
        for name, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"job {j.job}: {name} {value!r} is not an integer")
        if not (
            0 <= j.job < 1 << 16
            and j.job_index >= 0
            and j.slot_base >= 0
            and j.slot_count >= 1
            and 1 <= j.epoch <= MAX_EPOCH
        ):
            raise ValueError(f"job {j.job}: a number is out of range {numbers}")
        if j.encoding not in ENCODINGS:
            raise ValueError(
                f"job {j.job}: encoding {j.encoding!r} is not one of {', '.join(ENCODINGS)}"
            )
        if not j.workers:
            raise ValueError(f"job {j.job}: no workers")
    spans = sorted((j.slot_base, j.slot_base + j.slot_count, j.job) for j in jobs)
    for (_, hi, a), (lo, _, b) in zip(spans, spans[1:]):
        if lo < hi:
            raise ValueError(f"jobs {a} and {b} have overlapping slots")


def validate_workers(
    job_id: int, workers: list[WorkerAddress], known_ports: set[int] | None
) -> None:
    if not 0 <= job_id < 1 << 16:
        raise JobError(f"job id {job_id} must be 0..65535")
    if not workers:
        raise JobError(f"job {job_id}: no workers")
    if len(workers) > MAX_WORKERS:
        raise JobError(
            f"job {job_id}: {len(workers)} workers, the contributor bitmap holds "
            f"at most {MAX_WORKERS}"
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
    dup = {p for p in ports if ports.count(p) > 1}
    if dup:
        raise JobError(f"job {job_id}: duplicate port(s) {sorted(dup)}")
    if known_ports is not None:
        unknown = sorted(set(ports) - known_ports)
        if unknown:
            raise JobError(
                f"job {job_id}: unknown switch port(s) {unknown}; configured: {sorted(known_ports)}"
            )
    for w in workers:
        try:
            unicast_mac(w.mac)
            unicast_ipv4(w.ip)
        except AddressError as exc:
            raise JobError(f"job {job_id} rank {w.rank}: {exc}") from None
        if w.udp_port & wire.UDP_PORT_MASK != wire.UDP_PORT_BASE:
            raise JobError(
                f"job {job_id} rank {w.rank}: udp_port {w.udp_port} is not in "
                f"0x{wire.UDP_PORT_BASE:04x}..0x{wire.UDP_PORT_BASE + 15:04x}"
            )


def check_job_pipes(
    target: Target, ports: PortMap, job_id: int, workers: list[WorkerAddress]
) -> None:
    """JobError when a rank's port is outside the pipe of the job's read-out port on a
    Tofino (target.check_pipes says why); the configured ports must be mapped."""
    try:
        check_pipes(target, job_id, [(w.rank, w.port, ports(w.port)) for w in workers])
    except TargetError as exc:
        raise JobError(str(exc)) from None


class JobManager:
    """Creates and deletes jobs on one switch, keeping JobTable and the switch in step."""

    def __init__(
        self,
        conn: SwitchConnection,
        switch: Address,
        state_path: Path | None = None,
        known_ports: set[int] | None = None,
        target: Target = TARGETS["bmv2"],
    ):
        self.conn = conn
        self.switch = switch
        self.known_ports = known_ports
        self.target = target
        self.table = JobTable.load(state_path)

    @property
    def sizes(self) -> PoolSizes:
        """The pool of the pipeline this connection pushed or adopted."""
        return PoolSizes.of(self.conn.p4)

    def create(
        self,
        job_id: int,
        workers: list[WorkerAddress],
        slots: int | None = None,
        encoding: str | None = None,
        int32_halves: bool | None = None,
    ) -> Job:
        """A new job; `slots` None is the target's default (32 on bmv2: its ports hold
        ~32 unprocessed frames; 64 on Tofino), `encoding` None too (packed on bmv2, lanes on
        Tofino, which has no packed encoding: asking for it there is a JobError), and
        `int32_halves` (true on Tofino, which cannot flag an int32 overflow; asking for
        false there is a JobError). On Tofino every rank's port must be in the pipe of the
        job's read-out port (check_job_pipes)."""
        validate_workers(job_id, workers, self.known_ports)
        slots = self.target.default_slots if slots is None else slots
        encoding = self.target.default_encoding if encoding is None else encoding
        if encoding not in ENCODINGS:
            raise JobError(
                f"job {job_id}: encoding {encoding!r} is not one of {', '.join(ENCODINGS)}"
            )
        try:
            check_encoding(self.target, job_id, encoding)
            halves = int32_halves_for(self.target, job_id, encoding, int32_halves)
        except TargetError as exc:
            raise JobError(str(exc)) from None
        check_job_pipes(self.target, self.conn.ports, job_id, workers)
        sizes = self.sizes
        with self.table.locked():
            if job_id in self.table.jobs:
                raise JobError(f"job {job_id} already exists")
            job = Job(
                job=job_id,
                job_index=self.table.allocate_index(sizes.max_jobs),
                slot_base=self.table.allocate_slots(slots, sizes.pool_slots),
                slot_count=slots,
                epoch=self.table.next_epoch(),
                workers=sorted(workers, key=lambda w: w.rank),
                encoding=encoding,
                int32_halves=halves,
            )
            # before admission: a new job's statistics start at zero, not at the counts
            # of the deleted job that had the same index (no packet can count on this
            # index now: the old job's admission entries are gone)
            stats.zero_job_counters(self.conn, job.job_index)
            self.install(job)
            self.table.jobs[job_id] = job
            self.table.save()
        return job

    def install(self, job: Job) -> None:
        """Write every entry of `job`; on failure remove what was written."""
        done: list = []
        try:
            self.conn.insert(
                replication.multicast_group(
                    job.params.mcast_grp, replication.job_replicas(self.conn, job.workers)
                )
            )
            done.append(
                lambda: self.conn.delete(replication.multicast_group(job.params.mcast_grp, []))
            )
            result_destination.add_destinations(self.conn, job.job, job.workers)
            done.append(
                lambda: result_destination.remove_destinations(self.conn, job.job, job.workers)
            )
            admission.admit(self.conn, job.params, job.workers)
            done.append(lambda: admission.revoke(self.conn, job.params, job.workers))
            if job.loss:
                drop_simulator.set_loss(self.conn, job.job, **job.loss)
        except Exception:
            for undo in reversed(done):
                try:
                    undo()
                except Exception:  # best effort: the original error is what matters
                    pass
            raise

    def delete(self, job_id: int) -> Job:
        """Remove the job's entries, then forget it. Idempotent: an entry already gone
        (NOT_FOUND: a delete that failed half-way, or a switch that lost it) counts as
        removed, so repeating a failed delete finishes it instead of failing at the first
        entry the earlier attempt removed."""
        with self.table.locked():
            job = self._get(job_id)
            # admission first: from here on no packet of the job touches its slots
            _gone_ok(lambda: admission.revoke(self.conn, job.params, job.workers))
            _gone_ok(
                lambda: result_destination.remove_destinations(self.conn, job.job, job.workers)
            )
            _gone_ok(
                lambda: self.conn.delete(replication.multicast_group(job.params.mcast_grp, []))
            )
            if job.loss:
                _gone_ok(lambda: drop_simulator.clear_loss(self.conn, job.job))
            del self.table.jobs[job_id]
            self.table.save()
        return job

    def set_loss(
        self,
        job_id: int,
        ingress: float = 0.0,
        egress: float = 0.0,
        seed: int = 1,
        use_random: bool = False,
    ) -> None:
        loss = {"ingress": ingress, "egress": egress, "seed": seed, "use_random": use_random}
        with self.table.locked():
            job = self._get(job_id)
            if ingress == 0 and egress == 0:
                if job.loss:
                    drop_simulator.clear_loss(self.conn, job_id)
                job.loss = None
            else:
                drop_simulator.set_loss(self.conn, job_id, replace=bool(job.loss), **loss)
                job.loss = loss
            self.table.save()

    def _get(self, job_id: int) -> Job:
        try:
            return self.table.jobs[job_id]
        except KeyError:
            raise JobError(f"no job {job_id}") from None

    def get(self, job_id: int) -> Job:
        self.table.reload()
        return self._get(job_id)

    def jobs(self) -> list[Job]:
        """Every job, as the state file has them now."""
        self.table.reload()
        return sorted(self.table.jobs.values(), key=lambda j: j.job)

    def reinstall_all(self) -> None:
        """After a fresh pipeline (tests; the controller reconciles instead, see
        controlplane/reconcile.py): write every known job again."""
        for job in self.jobs():
            self.install(job)


def _gone_ok(remove) -> None:
    """Run a removal; entries that do not exist (every failed update NOT_FOUND) are what
    it wanted. The updates of a batch are applied one by one, so the others were removed."""
    try:
        remove()
    except SwitchError as exc:
        if exc.code != "NOT_FOUND":
            raise
