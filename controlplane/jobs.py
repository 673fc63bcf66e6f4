"""Job lifecycle: slot allocation, epochs and the entries of a job on one switch.

A job is N workers (rank -> switch port, MAC, IPv4, UDP port) and a contiguous range of the
switch's slot pool (the job model, its rules and its descriptor: p4reduce.job). Creating
one allocates the range, gives the job a new epoch (so the data plane resets the slots in
band, docs/protocol.md section 8), installs admission, multicast and result-destination
entries, and returns one descriptor per rank. Job state is persisted to a small JSON file
(p4reduce.state: its format, written atomically) so a restarted controller neither
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
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from p4reduce.addresses import Address, WorkerAddress
from p4reduce.job import (
    Job,
    JobError,
    check_workers,
    mark_lost,
    resolve_block_values,
    resolve_round_mode,
    resolve_encoding,
    resolve_halves,
    resolve_slots,
    resolve_window,
)
from p4reduce.p4rt import P4InfoError, P4InfoIndex
from p4reduce.state import State, read_state, write_state
from p4reduce.target import TARGETS, PortMap, Target, TargetError, check_pipes
from p4reduce.wire import MAX_EPOCH

from . import (
    admission,
    drop_simulator,
    replication,
    result_destination,
    silent_spine,
    stats,
    uplink,
)
from .admission import job_parameters
from .connection import SwitchConnection, SwitchError


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
class JobTable:
    """The controller's jobs and epoch counter, and the file that keeps them."""

    path: Path | None = None
    jobs: dict[int, Job] = field(default_factory=dict)
    last_epoch: int = 0
    # the P4Runtime cookie of the pipeline push the epochs date from (controller.py)
    pipeline_cookie: int | None = None

    @classmethod
    def load(cls, path: Path | None) -> "JobTable":
        """The state file's table (p4reduce.state: its format and checks); an empty one
        without a file."""
        state = read_state(path) if path is not None else State()
        return cls(path, state.jobs, state.last_epoch, state.pipeline_cookie)

    def save(self) -> None:
        if self.path is not None:
            write_state(self.path, State(self.jobs, self.last_epoch, self.pipeline_cookie))

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


def validate_workers(
    job_id: int, workers: list[WorkerAddress], known_ports: set[int] | None
) -> None:
    """JobError unless `workers` can be a job's ranks (p4reduce.job.check_workers) on the
    ports this switch has (`known_ports`; None: not known here)."""
    check_workers(job_id, workers)
    if known_ports is not None:
        unknown = sorted({w.port for w in workers} - known_ports)
        if unknown:
            raise JobError(
                f"job {job_id}: unknown switch port(s) {unknown}; configured: {sorted(known_ports)}"
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
        block_values: int | None = None,
        round_mode: str | None = None,
        window: int | None = None,
    ) -> Job:
        """A new job; `slots`, `encoding`, `int32_halves`, `block_values`, `round_mode` and
        `window` None are the target's choice, and what the target cannot run is a JobError
        (p4reduce.job's resolve_slots, resolve_encoding, resolve_halves,
        resolve_block_values, resolve_round_mode, resolve_window: Tofino has no packed
        encoding, cannot flag an int32 overflow, carries one block size and runs every-rank
        rounds only; bmv2's ranks keep FAIR_SLOTS outstanding, Tofino's every slot). On
        Tofino every rank's port must be in the pipe of the job's read-out port
        (check_job_pipes)."""
        self._check_workers(job_id, workers)
        slots = resolve_slots(self.target, slots)
        window = resolve_window(self.target, job_id, slots, window)
        encoding = resolve_encoding(self.target, job_id, encoding)
        halves = resolve_halves(self.target, job_id, encoding, int32_halves)
        block_values = resolve_block_values(self.target, job_id, block_values)
        round_mode = resolve_round_mode(self.target, job_id, round_mode)
        check_job_pipes(self.target, self.conn.ports, job_id, workers)
        sizes = self.sizes
        with self._locked(workers):
            existing = self.table.jobs.get(job_id)
            if existing is not None:
                why = (
                    " and is lost (the switch lost its state: its ranks get STATE_LOST): "
                    "delete it, then create it again"
                    if existing.lost
                    else ""
                )
                raise JobError(f"job {job_id} already exists{why}")
            job = Job(
                job=job_id,
                job_index=self.table.allocate_index(sizes.max_jobs),
                slot_base=self._allocate_slots(workers, slots, sizes.pool_slots),
                slot_count=slots,
                epoch=self._next_epoch(workers),
                workers=sorted(workers, key=lambda w: w.rank),
                encoding=encoding,
                int32_halves=halves,
                block_values=block_values,
                round_mode=round_mode,
                window=window,
            )
            # before admission: a new job's statistics start at zero, not at the counts
            # of the deleted job that had the same index (no packet can count on this
            # index now: the old job's admission entries are gone)
            stats.zero_job_counters(self.conn, job.job_index)
            self._add(job)
        return job

    # What a manager of jobs across several switches (controlplane/fabric.py) does its own
    # way: which ranks a job may have, whose state files a creation locks, where its slots
    # are free and which epoch is new.
    def _check_workers(self, job_id: int, workers: list[WorkerAddress]) -> None:
        validate_workers(job_id, workers, self.known_ports)

    def _locked(self, workers: list[WorkerAddress]):  # noqa: ARG002 -- one switch: its own
        return self.table.locked()

    def _allocate_slots(
        self,
        workers: list[WorkerAddress],  # noqa: ARG002 -- one switch: its own pool
        count: int,
        pool_slots: int,
    ) -> int:
        return self.table.allocate_slots(count, pool_slots)

    def _next_epoch(self, workers: list[WorkerAddress]) -> int:  # noqa: ARG002 -- its own
        return self.table.next_epoch()

    def adopt(self, job: Job) -> None:
        """Install and record a job whose index, slots and epoch were chosen elsewhere
        (a test that places a job on chosen slots, or a new incarnation of a job on the
        same slots): from then on it is the manager's like any created job (delete,
        set_loss, the state file); a recorded job of the same id is replaced."""
        with self.table.locked():
            self._add(job)

    def _add(self, job: Job) -> None:
        """Write the job's entries, then record it (the table's lock held)."""
        self.install(job)
        self.table.jobs[job.job] = job
        self.table.save()

    def install(self, job: Job) -> None:
        """Write every entry of `job`; on failure remove what was written."""
        done: list = []
        try:
            self.conn.insert(
                replication.multicast_group(
                    replication.job_group(job.job_index),
                    replication.job_replicas(self.conn, job),
                )
            )
            done.append(
                lambda: self.conn.delete(
                    replication.multicast_group(job_parameters(job).mcast_grp, [])
                )
            )
            result_destination.add_destinations(self.conn, job.job, job.workers)
            done.append(
                lambda: result_destination.remove_destinations(self.conn, job.job, job.workers)
            )
            admission.admit(self.conn, job_parameters(job), job.workers)
            done.append(lambda: admission.revoke(self.conn, job_parameters(job), job.workers))
            uplink.add(self.conn, job)  # a leaf's job (the leaf role)
            done.append(lambda: uplink.remove(self.conn, job))
            silent_spine.add(self.conn, job)  # a silent job's spine
            done.append(lambda: silent_spine.remove(self.conn, job))
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
            _gone_ok(lambda: admission.revoke(self.conn, job_parameters(job), job.workers))
            _gone_ok(lambda: uplink.remove(self.conn, job))
            _gone_ok(lambda: silent_spine.remove(self.conn, job))
            _gone_ok(
                lambda: result_destination.remove_destinations(self.conn, job.job, job.workers)
            )
            _gone_ok(
                lambda: self.conn.delete(
                    replication.multicast_group(job_parameters(job).mcast_grp, [])
                )
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
        controlplane/reconcile.py): write every known job again, lost, as the controller
        restores them (p4reduce.job.mark_lost: the push cleared their slots)."""
        jobs = self.jobs()
        mark_lost(jobs)
        for job in jobs:
            self.install(job)


def _gone_ok(remove) -> None:
    """Run a removal; entries that do not exist (every failed update NOT_FOUND) are what
    it wanted. The updates of a batch are applied one by one, so the others were removed."""
    try:
        remove()
    except SwitchError as exc:
        if exc.code != "NOT_FOUND":
            raise
