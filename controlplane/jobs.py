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

from . import admission, drop_simulator, replication, result_destination, stats
from .addresses import AddressError, unicast_ipv4, unicast_mac
from .admission import JobParameters, WorkerAddress
from .connection import SwitchConnection

POOL_SLOTS = 1024          # p4src/common/constants.p4
MAX_JOBS = 64
MAX_WORKERS = wire.MAX_WORKERS
JOB_GROUP_BASE = 16        # multicast group of job index i is 16 + i; 1..15 are for flooding
MAX_EPOCH = wire.MAX_EPOCH  # bit 31 of the switch's slot epoch marks a lost slot


ENCODINGS = tuple(e.name.lower() for e in wire.Encoding)


class JobError(ValueError):
    """A job request the controller refuses; the message says what and why."""


def packed_bias(worker_count: int) -> int:
    """floor(M / N), M = 2^31 - 1: what each rank adds to every lane of a packed job (and
    the switch adds for a SKIP), so that N biased lanes sum below 2^32 (protocol.md 10)."""
    return ((1 << 31) - 1) // worker_count


@dataclass(frozen=True)
class SwitchAddress:
    mac: str
    ip: str
    udp_port: int = wire.UDP_PORT_BASE


@dataclass
class Job:
    job: int
    job_index: int
    slot_base: int
    slot_count: int
    epoch: int
    workers: list[WorkerAddress]
    loss: dict | None = None
    encoding: str = "packed"        # wire.Encoding name, lower case

    @property
    def params(self) -> JobParameters:
        encoding = wire.Encoding[self.encoding.upper()]
        return JobParameters(job=self.job, job_index=self.job_index, slot_base=self.slot_base,
                             slot_count=self.slot_count, worker_count=len(self.workers),
                             mcast_grp=JOB_GROUP_BASE + self.job_index, epoch=self.epoch,
                             encoding=int(encoding),
                             bias=(packed_bias(len(self.workers))
                                   if encoding == wire.Encoding.PACKED else 0))

    def descriptor(self, rank: int, switch: SwitchAddress) -> dict:
        """Everything worker `rank` needs (docs/protocol.md section 4)."""
        w = next((w for w in self.workers if w.rank == rank), None)
        if w is None:
            raise JobError(f"job {self.job} has no rank {rank}")
        return {
            "protocol": wire.PROTOCOL_VERSION, "job": self.job, "epoch": self.epoch,
            "rank": rank,
            "workers": len(self.workers), "slot_base": self.slot_base,
            "slot_count": self.slot_count, "lanes": wire.LANES,
            "encoding": self.encoding,
            "switch": {"mac": switch.mac, "ip": switch.ip, "udp_port": switch.udp_port},
            "worker": {"mac": w.mac, "ip": w.ip, "udp_port": w.udp_port},
        }

    def descriptors(self, switch: SwitchAddress) -> list[dict]:
        return [self.descriptor(w.rank, switch) for w in sorted(self.workers,
                                                                key=lambda w: w.rank)]

    def to_json(self) -> dict:
        return {"job": self.job, "job_index": self.job_index, "slot_base": self.slot_base,
                "slot_count": self.slot_count, "epoch": self.epoch, "loss": self.loss,
                "encoding": self.encoding, "workers": [asdict(w) for w in self.workers]}

    @classmethod
    def from_json(cls, data: dict) -> "Job":
        return cls(job=data["job"], job_index=data["job_index"], slot_base=data["slot_base"],
                   slot_count=data["slot_count"], epoch=data["epoch"], loss=data.get("loss"),
                   # jobs written before encodings existed were installed lane by lane
                   encoding=data.get("encoding", "lanes"),
                   workers=[WorkerAddress(**w) for w in data["workers"]])


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
                table.jobs = {j["job"]: Job.from_json(j) for j in data["jobs"]}
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise JobError(f"state file {path} is unreadable ({exc}); "
                               "move it away to start with no jobs") from None
        return table

    def save(self) -> None:
        if self.path is None:
            return
        data = {"last_epoch": self.last_epoch, "pipeline_cookie": self.pipeline_cookie,
                "jobs": [j.to_json() for j in sorted(self.jobs.values(), key=lambda j: j.job)]}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".jobs-")
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            raise JobError(f"cannot write state file {self.path} ({exc.strerror or exc}); "
                           "set switch.state_file to a writable path") from None

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
            raise JobError(f"cannot use state file {self.path} ({exc.strerror or exc}); "
                           "set switch.state_file to a writable path") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.reload()
            yield self
        finally:
            os.close(fd)        # releases the lock

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

    def allocate_slots(self, count: int) -> int:
        """First fit of `count` contiguous slots; JobError when the pool has no such gap."""
        if not 1 <= count <= POOL_SLOTS:
            raise JobError(f"slots={count}: a job needs 1..{POOL_SLOTS} slots")
        taken = sorted((j.slot_base, j.slot_base + j.slot_count) for j in self.jobs.values())
        start = 0
        for lo, hi in taken:
            if lo - start >= count:
                return start
            start = max(start, hi)
        if POOL_SLOTS - start >= count:
            return start
        free = POOL_SLOTS - sum(j.slot_count for j in self.jobs.values())
        raise JobError(f"slot pool exhausted: {count} contiguous slots requested, "
                       f"{free} of {POOL_SLOTS} free")

    def allocate_index(self) -> int:
        used = {j.job_index for j in self.jobs.values()}
        for i in range(MAX_JOBS):
            if i not in used:
                return i
        raise JobError(f"too many jobs: the switch counts at most {MAX_JOBS}")


def validate_workers(job_id: int, workers: list[WorkerAddress],
                     known_ports: set[int] | None) -> None:
    if not 0 <= job_id < 1 << 16:
        raise JobError(f"job id {job_id} must be 0..65535")
    if not workers:
        raise JobError(f"job {job_id}: no workers")
    if len(workers) > MAX_WORKERS:
        raise JobError(f"job {job_id}: {len(workers)} workers, the contributor bitmap holds "
                       f"at most {MAX_WORKERS}")
    ranks = [w.rank for w in workers]
    dup = {r for r in ranks if ranks.count(r) > 1}
    if dup:
        raise JobError(f"job {job_id}: duplicate rank(s) {sorted(dup)}")
    if sorted(ranks) != list(range(len(workers))):
        raise JobError(f"job {job_id}: ranks must be 0..{len(workers) - 1} without gaps, "
                       f"got {sorted(ranks)}")
    ports = [w.port for w in workers]
    dup = {p for p in ports if ports.count(p) > 1}
    if dup:
        raise JobError(f"job {job_id}: duplicate port(s) {sorted(dup)}")
    if known_ports is not None:
        unknown = sorted(set(ports) - known_ports)
        if unknown:
            raise JobError(f"job {job_id}: unknown switch port(s) {unknown}; "
                           f"configured: {sorted(known_ports)}")
    for w in workers:
        try:
            unicast_mac(w.mac)
            unicast_ipv4(w.ip)
        except AddressError as exc:
            raise JobError(f"job {job_id} rank {w.rank}: {exc}") from None
        if w.udp_port & wire.UDP_PORT_MASK != wire.UDP_PORT_BASE:
            raise JobError(f"job {job_id} rank {w.rank}: udp_port {w.udp_port} is not in "
                           f"0x{wire.UDP_PORT_BASE:04x}..0x{wire.UDP_PORT_BASE + 15:04x}")


class JobManager:
    """Creates and deletes jobs on one switch, keeping JobTable and the switch in step."""

    def __init__(self, conn: SwitchConnection, switch: SwitchAddress,
                 state_path: Path | None = None, known_ports: set[int] | None = None):
        self.conn = conn
        self.switch = switch
        self.known_ports = known_ports
        self.table = JobTable.load(state_path)

    def create(self, job_id: int, workers: list[WorkerAddress], slots: int,
               encoding: str = "packed") -> Job:
        validate_workers(job_id, workers, self.known_ports)
        if encoding not in ENCODINGS:
            raise JobError(f"job {job_id}: encoding {encoding!r} is not one of "
                           f"{', '.join(ENCODINGS)}")
        with self.table.locked():
            if job_id in self.table.jobs:
                raise JobError(f"job {job_id} already exists")
            job = Job(job=job_id, job_index=self.table.allocate_index(),
                      slot_base=self.table.allocate_slots(slots), slot_count=slots,
                      epoch=self.table.next_epoch(),
                      workers=sorted(workers, key=lambda w: w.rank), encoding=encoding)
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
            self.conn.insert(replication.multicast_group(
                job.params.mcast_grp, [(w.port, w.rank) for w in job.workers]))
            done.append(lambda: self.conn.delete(replication.multicast_group(
                job.params.mcast_grp, [])))
            result_destination.add_destinations(self.conn, job.job, job.workers)
            done.append(lambda: result_destination.remove_destinations(
                self.conn, job.job, job.workers))
            admission.admit(self.conn, job.params, job.workers)
            done.append(lambda: admission.revoke(self.conn, job.params, job.workers))
            if job.loss:
                drop_simulator.set_loss(self.conn, job.job, **job.loss)
        except Exception:
            for undo in reversed(done):
                try:
                    undo()
                except Exception:   # best effort: the original error is what matters
                    pass
            raise

    def delete(self, job_id: int) -> Job:
        with self.table.locked():
            job = self._get(job_id)
            # admission first: from here on no packet of the job touches its slots
            admission.revoke(self.conn, job.params, job.workers)
            result_destination.remove_destinations(self.conn, job.job, job.workers)
            self.conn.delete(replication.multicast_group(job.params.mcast_grp, []))
            if job.loss:
                drop_simulator.clear_loss(self.conn, job.job)
            del self.table.jobs[job_id]
            self.table.save()
        return job

    def set_loss(self, job_id: int, ingress: float = 0.0, egress: float = 0.0,
                 seed: int = 1, use_random: bool = False) -> None:
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
