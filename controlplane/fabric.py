"""The controller of a fabric: one configuration, several switches, jobs across them.

Why a layer over `Controller`: every switch of a fabric is brought up, reconciled and
watched exactly as one switch is (its own session, pipeline, state file and cookie), so
the fabric controller holds one `Controller` per switch and adds only what a fabric has
and a switch has not: L2 entries that carry a job's frames across the links (from the
fabric's model, p4reduce.fabric: each switch forwards every host and every other switch
out of the port towards it), and jobs placed on the fabric.

A job aggregates today on the fabric's root (the spine): its ranks send to the spine's
address, the leaves forward those frames at layer 2 (the P4 program takes a frame as
p4reduce only when it is addressed to the switch's own IPv4), and the spine's admission
knows each rank by the spine port towards its leaf. So a job holds at most MAX_WORKERS
ranks until the leaf role exists in the P4 program (docs/fabric.md). Its slots are a
range free on every switch the job crosses (`common_slot_base`), under the lock of each of
their state files, so the leaves' tables can later hold the same range.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path

from p4reduce import wire
from p4reduce.addresses import Address, WorkerAddress
from p4reduce.fabric import Fabric, FabricError, Placement, place_job
from p4reduce.job import Job, JobError, check_job_id
from p4reduce.p4rt import P4InfoError
from p4reduce.target import Target
from p4reduce.wire import MAX_EPOCH

from . import stats
from .config import Config, SwitchConfig
from .connection import SwitchConnection, SwitchError
from .controller import Controller
from .jobs import JobManager, JobTable
from .reconcile import ReconcileReport

log = logging.getLogger(__name__)


def common_slot_base(tables: list[JobTable], count: int, pool_slots: int) -> int:
    """The first `count` contiguous slots free in every one of `tables` (JobError when no
    such gap is left): a job's range is the same on each switch it crosses."""
    every = JobTable(
        jobs={i: job for i, job in enumerate(j for t in tables for j in t.jobs.values())}
    )
    return every.allocate_slots(count, pool_slots)


class FabricJobManager(JobManager):
    """The fabric's jobs, kept (like one switch's) in the root's state file and installed
    on the root; `create` takes each rank's port on its leaf and places the job."""

    def __init__(
        self,
        conn: SwitchConnection,
        switch: Address,
        state_path: Path | None,
        target: Target,
        fabric: Fabric,
        tables: dict[str, JobTable],
    ):
        super().__init__(conn, switch, state_path, None, target)
        self.fabric = fabric
        self.root = fabric.root.name
        self.tables = {**tables, self.root: self.table}  # every switch's, by name

    def place(self, job_id: int, workers: list[WorkerAddress]) -> Placement:
        """The job's placement (JobError saying what is wrong), each rank's address that of
        its host in the fabric."""
        check_job_id(job_id)
        try:
            placement = place_job(self.fabric, [(w.rank, w.mac, w.port) for w in workers])
        except FabricError as exc:
            raise JobError(f"job {job_id}: {exc}") from None
        for w in workers:
            host = self.fabric.host_by_mac(w.mac)
            assert host is not None  # placed
            if host.ip != w.ip:
                raise JobError(
                    f"job {job_id} rank {w.rank}: host {w.mac} has IPv4 {host.ip}, not {w.ip}"
                )
            if w.udp_port & wire.UDP_PORT_MASK != wire.UDP_PORT_BASE:
                raise JobError(
                    f"job {job_id} rank {w.rank}: udp_port {w.udp_port} is not p4reduce's"
                )
        if not placement.aggregated_at_root:
            raise JobError(
                f"job {job_id}: {len(workers)} ranks; a job aggregates on {self.root} alone "
                f"until the P4 program has the leaf role, and its contributor bitmap holds "
                f"{wire.MAX_WORKERS}"
            )
        return placement

    def create(
        self,
        job_id: int,
        workers: list[WorkerAddress],
        slots: int | None = None,
        encoding: str | None = None,
        int32_halves: bool | None = None,
        block_values: int | None = None,
        round_mode: str | None = None,
    ) -> Job:
        """A job of `workers` (each port that of its leaf, each MAC a host of the fabric),
        aggregated on the root: its ranks there are the root's ports towards their leaves.
        Otherwise created as one switch's job (JobManager.create), under the lock of every
        switch the job crosses and with slots free on each."""
        placement = self.place(job_id, workers)
        udp = {w.rank: w.udp_port for w in workers}
        at_root = [
            WorkerAddress(r.rank, r.root_port, r.host.mac, r.host.ip, udp[r.rank])
            for r in placement.ranks
        ]
        return super().create(
            job_id, at_root, slots, encoding, int32_halves, block_values, round_mode
        )

    def _crossed(self, workers: list[WorkerAddress]) -> list[str]:
        """The switches a job of these ranks crosses, by name (its ranks' leaves and the
        root): the order every process locks their state files in."""
        leaves = {self.fabric.host_by_mac(w.mac).at.switch for w in workers}  # type: ignore[union-attr]
        return sorted({self.root, *leaves})

    def _check_workers(self, job_id: int, workers: list[WorkerAddress]) -> None:
        """Placed already (`place`): on the root, ranks behind one leaf share its port."""

    @contextlib.contextmanager
    def _locked(self, workers: list[WorkerAddress]):
        with contextlib.ExitStack() as held:
            for name in self._crossed(workers):
                held.enter_context(self.tables[name].locked())
            yield self.table

    def _allocate_slots(self, workers: list[WorkerAddress], count: int, pool_slots: int) -> int:
        crossed = [self.tables[name] for name in self._crossed(workers)]
        return common_slot_base(crossed, count, pool_slots)

    def _next_epoch(self, workers: list[WorkerAddress]) -> int:
        """An epoch new on every switch the job crosses (after each one's last), recorded in
        each state file: the job's one incarnation wherever it holds slots."""
        crossed = [self.tables[name] for name in self._crossed(workers)]
        epoch = max(t.last_epoch for t in crossed) % MAX_EPOCH + 1
        for table in crossed:
            table.last_epoch = epoch
            if table is not self.table:  # the root's is saved with the job
                table.save()
        return epoch


class FabricController:
    """Every switch of a fabric configuration, each with its own `Controller`; jobs are the
    root's (`jobs`, `conn`), `up`, `attach`, `ensure` and `watch` reach every switch."""

    def __init__(self, config: Config):
        if config.fabric is None:
            raise ValueError("not a fabric configuration")
        self.config = config
        self.controllers: dict[str, Controller] = {
            sw.name: Controller(self._own(sw)) for sw in config.switches
        }
        self.root = self.controllers[config.switch.name]
        root_sw = config.switch
        self.root.jobs = FabricJobManager(
            self.root.conn,
            Address(root_sw.mac, root_sw.ip),
            root_sw.state_file,
            root_sw.target_info,
            config.fabric,
            {n: c.jobs.table for n, c in self.controllers.items() if c is not self.root},
        )
        self._stop = threading.Event()

    def _own(self, sw: SwitchConfig) -> Config:
        """One switch's configuration: the fabric's static jobs go to the root."""
        jobs = self.config.jobs if sw is self.config.switch else []
        return Config(sw, jobs, [sw])

    @property
    def jobs(self) -> FabricJobManager:
        return self.root.jobs  # type: ignore[return-value]

    @property
    def conn(self) -> SwitchConnection:
        return self.root.conn

    @property
    def reconciled(self) -> dict[str, ReconcileReport]:
        return {name: c.reconciled for name, c in self.controllers.items()}

    def set_timeout(self, seconds: float) -> None:
        for c in self.controllers.values():
            c.conn.timeout = seconds

    def up(self, retries: int = 5, reset: bool = False) -> dict[str, str]:
        """Every switch up (its pipeline kept or pushed, its tables reconciled), the root
        last: its static jobs are placed across the others."""
        order = sorted(self.controllers, key=lambda n: self.controllers[n] is self.root)
        return {name: self.controllers[name].up(retries, reset) for name in order}

    def attach(self, retries: int = 5, require_primary: bool = True) -> bool:
        """Every switch attached (Controller.attach); False if one has no pipeline."""
        return all(c.attach(retries, require_primary) for c in self.controllers.values())

    def ensure(self) -> list[str]:
        """Each switch restored if it lost its pipeline or session; the names redone."""
        return [name for name, c in self.controllers.items() if c.ensure()]

    def watch(self, interval: float = 1.0) -> None:
        """Keep every switch configured until stop(); one switch's failure does not stop
        the others being watched."""
        while not self._stop.wait(interval):
            for name, c in self.controllers.items():
                try:
                    c.ensure()
                except (SwitchError, JobError, P4InfoError, OSError) as exc:
                    log.error("could not restore switch %s: %s", name, exc)

    def switch_stats(self) -> dict[str, dict[str, int]]:
        """Each switch's counters (drops by reason, unrouted, no destination)."""
        return {name: stats.switch_stats(c.conn) for name, c in self.controllers.items()}

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.stop()
        for c in self.controllers.values():
            c.close()
