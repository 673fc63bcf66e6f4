"""The controller of a fabric: one configuration, several switches, jobs across them.

Why a layer over `Controller`: every switch of a fabric is brought up, reconciled and
watched exactly as one switch is (its own session, pipeline, state file and cookie), so
the fabric controller holds one `Controller` per switch and adds only what a fabric has
and a switch has not: L2 entries that carry a job's frames across the links (from the
fabric's model, p4reduce.fabric: each switch forwards every host and every other switch
out of the port towards it), and jobs placed on the fabric.

A job runs in the leaf and spine roles (docs/fabric.md): each leaf aggregates its own
ranks (they send to the leaf's address, carrying their index on the leaf as their rank)
and sends one contribution per round up its uplink; the spine's job has the leaves as its
ranks. So a job holds up to MAX_WORKERS ranks per leaf on up to MAX_LEAVES leaves. It
runs every-rank rounds unless created with silent ones; a job of silent rounds runs in
the leaf and spine roles up to SKIP_GROWS_TO_VALUES values per block or where it has
more than MAX_WORKERS ranks, and else at the spine alone, its ranks' frames crossing
their leaves at layer 2 (docs/fabric.md, `Placement.silent_aggregation`). Every
switch keeps the job as it runs it in its own state file (the spine: the leaves as
workers; a leaf: its ranks, its uplink and each rank's place in the whole job), so each
is reconciled and restored alone like one switch. The slots are a range free on every
switch the job crosses (`common_slot_base`) and the epoch is new on each, under the lock
of each of their state files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from pathlib import Path
from typing import NamedTuple

from p4reduce import wire
from p4reduce.addresses import Address, WorkerAddress
from p4reduce.fabric import (
    AT_SPINE_ALONE,
    IN_LEAF_ROLE,
    Fabric,
    FabricError,
    Placement,
    place_job,
)
from p4reduce.job import (
    Job,
    JobError,
    Uplink,
    check_job_id,
    resolve_block_values,
    resolve_round_mode,
)
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


class FabricJob(Job):
    """A job of the fabric as its ranks see it: the spine's record with each leaf's part
    (`parts`: leaf name -> (the leaf's job, the leaf's address)); a descriptor names the
    rank's leaf as its switch and carries its index there (Job.job_config)."""

    parts: dict[str, tuple[Job, Address]]

    def __init__(self, spine_job: Job, parts: dict[str, tuple[Job, Address]]):
        super().__init__(**vars(spine_job))
        self.parts = parts

    def _part_of(self, rank: int) -> tuple[Job, int, Address]:
        for job, address in self.parts.values():
            if job.ranks_in_job and rank in job.ranks_in_job:
                return job, job.ranks_in_job.index(rank), address
        raise JobError(f"job {self.job} has no rank {rank}")

    @property
    def worker_count(self) -> int:
        return self.ranks_in_all

    def descriptor(self, rank: int, switch: Address) -> dict:  # noqa: ARG002 -- its leaf's
        job, index, address = self._part_of(rank)
        return job.descriptor(index, address)

    def descriptors(self, switch: Address) -> list[dict]:
        return [self.descriptor(r, switch) for r in range(self.worker_count)]


class _Placing(NamedTuple):
    """A job being created: its placement, its ranks (each port its leaf's), and whether
    it runs in the leaf and spine roles (else at the root alone, its ranks' frames crossing
    their leaves at layer 2)."""

    placement: Placement
    workers: list[WorkerAddress]
    leaf_role: bool


class FabricJobManager(JobManager):
    """The fabric's jobs: the spine's part kept in the root's state file and installed on
    the root, each leaf's part in that leaf's (`leaves`: every other switch's manager);
    `create` takes each rank's port on its leaf and places the job."""

    def __init__(
        self,
        conn: SwitchConnection,
        switch: Address,
        state_path: Path | None,
        target: Target,
        fabric: Fabric,
        leaves: dict[str, JobManager],
    ):
        super().__init__(conn, switch, state_path, None, target)
        self.fabric = fabric
        self.root = fabric.root.name
        self.leaves = leaves
        self.tables = {**{n: m.table for n, m in leaves.items()}, self.root: self.table}
        self._placing: _Placing | None = None  # the job being created

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
        window: int | None = None,
    ) -> Job:
        """A job of `workers` (each port that of its leaf, each MAC a host of the fabric)
        in the leaf and spine roles: created on the spine with its leaves as ranks (leaf
        i the one of the i-th lowest first rank), then on each leaf with its ranks and
        its uplink (`_add`), under the lock of every switch the job crosses, with slots
        free and the epoch new on each. Its round mode is `round_mode`, else the target's
        default (as on one switch), and a job of silent rounds aggregates where
        `Placement.silent_aggregation` says: in the leaf and spine roles, or at the spine
        alone (`_create_at_root`); `_aggregation` decides both."""
        placement = self.place(job_id, workers)
        values = resolve_block_values(self.target, job_id, block_values)
        round_mode, where = self._aggregation(job_id, placement, values, round_mode)
        args = (slots, encoding, int32_halves, block_values, round_mode, window)
        if where == AT_SPINE_ALONE:
            return self._create_at_root(job_id, placement, workers, args)
        spine = [
            WorkerAddress(
                i,
                self._port_to(leaf),
                self.fabric.switch(leaf).mac,
                self.fabric.switch(leaf).ip,
                wire.UDP_PORT_BASE,
            )
            for i, leaf in enumerate(placement.leaf_order())
        ]
        return self._create_placed(job_id, _Placing(placement, workers, True), spine, args)

    def _aggregation(
        self, job_id: int, placement: Placement, block_values: int, requested: str | None
    ) -> tuple[str, str]:
        """The job's round mode on this fabric -- `requested`, else the target's default,
        as on one switch (silent rounds on bmv2 and softswitch, every-rank ones on Tofino:
        docs/fabric.md, "Silent rounds on a fabric") -- and where it aggregates: every-rank
        rounds in the leaf role, silent ones where `silent_aggregation` says."""
        mode = resolve_round_mode(self.target, job_id, requested)
        if mode != wire.RoundMode.SILENT.name.lower():
            return mode, IN_LEAF_ROLE
        return mode, placement.silent_aggregation(block_values)

    def _create_placed(
        self,
        job_id: int,
        placing: _Placing,
        at_root: list[WorkerAddress],
        args: tuple,
    ) -> Job:
        """The job created with `at_root` as the root's ranks, `placing` telling `_add`
        and the locks where else it goes."""
        self._placing = placing
        try:
            super().create(job_id, at_root, *args)
        finally:
            self._placing = None
        return self.get(job_id)

    def _create_at_root(
        self, job_id: int, placement: Placement, workers: list[WorkerAddress], args: tuple
    ) -> Job:
        """A job aggregated by the spine alone, as one switch aggregates its ranks: each
        rank is a rank of the spine's job on the spine's port towards its leaf, and its
        frames cross its leaf at layer 2 (the fabric's forwarding), both ways. The
        leaves hold nothing of it. How silent rounds run on a fabric when the spine's
        bitmap holds every rank (docs/fabric.md): every rule of one switch holds
        unchanged."""
        by_rank = {w.rank: w for w in workers}
        at_root = [dataclasses.replace(by_rank[r.rank], port=r.root_port) for r in placement.ranks]
        return self._create_placed(job_id, _Placing(placement, workers, False), at_root, args)

    def _port_to(self, leaf: str) -> int:
        port = self.fabric.port_toward(self.root, leaf)
        assert port is not None  # a placed job's leaves are joined to the root
        return port

    def _add(self, job: Job) -> None:
        """The spine's part, then each leaf's (a job being created); an adopted job is the
        root's alone."""
        if self._placing is None or not self._placing.leaf_role:
            super()._add(job)
            return
        placement, workers = self._placing.placement, self._placing.workers
        job.job_ranks = len(placement.ranks)  # the packed bias's N: every rank
        super()._add(job)
        by_rank = {w.rank: w for w in workers}
        for index, leaf in enumerate(placement.leaf_order()):
            ranks = placement.by_leaf()[leaf]
            manager = self.leaves[leaf]
            part = Job(
                job=job.job,
                job_index=manager.table.allocate_index(manager.sizes.max_jobs),
                slot_base=job.slot_base,
                slot_count=job.slot_count,
                epoch=job.epoch,
                workers=[
                    WorkerAddress(
                        i, by_rank[r].port, by_rank[r].mac, by_rank[r].ip, by_rank[r].udp_port
                    )
                    for i, r in enumerate(ranks)
                ],
                encoding=job.encoding,
                int32_halves=job.int32_halves,
                block_values=job.block_values,
                round_mode=job.round_mode,
                window=job.window,
                uplink=self._uplink(leaf, index),
                ranks_in_job=ranks,
                job_ranks=job.job_ranks,
            )
            stats.zero_job_counters(manager.conn, part.job_index)
            manager._add(part)

    def _uplink(self, leaf: str, index: int) -> Uplink:
        port = self.fabric.port_toward(leaf, self.root)
        assert port is not None
        root = self.fabric.switch(self.root)
        return Uplink(port=port, mac=root.mac, ip=root.ip, rank=index)

    def get(self, job_id: int) -> Job:
        """The job as its ranks see it (FabricJob: its descriptors name their leaves)."""
        return self._whole(super().get(job_id))

    def jobs(self) -> list[Job]:
        return [self._whole(j) for j in super().jobs()]

    def _whole(self, job: Job) -> Job:
        parts = {}
        for name, manager in self.leaves.items():
            manager.table.reload()
            part = manager.table.jobs.get(job.job)
            if part is not None and part.epoch == job.epoch:
                sw = self.fabric.switch(name)
                parts[name] = (part, Address(sw.mac, sw.ip))
        return FabricJob(job, parts) if parts else job

    def delete(self, job_id: int) -> Job:
        """Each leaf's part first (no rank's packet then reaches a spine entry that is
        gone), then the spine's."""
        for manager in self.leaves.values():
            manager.table.reload()
            if job_id in manager.table.jobs:
                manager.delete(job_id)
        return super().delete(job_id)

    def set_loss(
        self,
        job_id: int,
        ingress: float = 0.0,
        egress: float = 0.0,
        seed: int = 1,
        use_random: bool = False,
    ) -> None:
        """The drop simulator on every switch holding the job, so that each link of the
        job loses at the given rate once each way: `ingress` is every frame entering a
        switch of the job -- a rank's packet entering its leaf, a leaf's partial entering
        the spine, the spine's result or STATUS entering a leaf -- and `egress` the copies
        a leaf sends its ranks. The spine's own egress stays lossless: its results to a
        leaf already cross that leaf's ingress, and losing them at both ends made the
        downlink lose twice the rate (~10 % for 5 %). Each switch draws from its own seed
        (`seed` + its order), so their losses are independent. A job at the spine alone
        (silent rounds) loses at its ingress and its egress, as one switch's job."""
        at_leaves = False
        for i, manager in enumerate(self.leaves.values(), 1):
            manager.table.reload()
            if job_id in manager.table.jobs:
                manager.set_loss(job_id, ingress, egress, (seed + i) % 2**32, use_random)
                at_leaves = True
        super().set_loss(job_id, ingress, egress if not at_leaves else 0.0, seed, use_random)

    def _crossed(self, workers: list[WorkerAddress]) -> list[str]:  # noqa: ARG002
        """The switches that hold the job being created, by name (in the leaf and spine
        roles its ranks' leaves and the root, else the root): the order every process
        locks their state files in."""
        assert self._placing is not None  # only while creating
        return self._placing.placement.switches if self._placing.leaf_role else [self.root]

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
            {n: c.jobs for n, c in self.controllers.items() if c is not self.root},
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
        """Each switch restored if it lost its pipeline or session; the names redone. A
        job one of them lost is then lost on every switch (`spread_lost`)."""
        return self._restore(tolerate=False)

    def _restore(self, tolerate: bool) -> list[str]:
        """`ensure`'s work; with `tolerate` (the watch loop) a switch that cannot be
        restored is logged and the others are still restored, and a failed spread is
        logged too."""
        redone = []
        for name, c in self.controllers.items():
            try:
                if c.ensure():
                    redone.append(name)
            except (SwitchError, JobError, P4InfoError, OSError) as exc:
                if not tolerate:
                    raise
                log.error("could not restore switch %s: %s", name, exc)
        if redone:
            try:
                self.spread_lost()
            except (SwitchError, JobError, P4InfoError, OSError) as exc:
                if not tolerate:
                    raise
                log.error("could not mark a lost job lost on every switch: %s", exc)
        return redone

    def spread_lost(self) -> dict[str, list[int]]:
        """Every switch's part of a job that some switch has lost is marked lost too (each
        switch's `Controller.lose`): per switch, the jobs newly marked.

        Why: a job whose spine restarted has lost its state, yet its leaves' parts are
        live; a rank that missed the spine's STATE_LOST and sends next where its leaf
        waits for ranks that stopped would wait there (TNA's leaf has no `job_lost` to
        remember the spine's answer). Admitted lost on every switch, every packet of the
        job meets STATE_LOST at its first switch (docs/fabric.md, lost state)."""
        lost = {
            (j.job, j.epoch) for c in self.controllers.values() for j in c.jobs.jobs() if j.lost
        }
        if not lost:
            return {}
        spread = {name: c.lose(lost) for name, c in self.controllers.items()}
        return {name: ids for name, ids in spread.items() if ids}

    def watch(self, interval: float = 1.0) -> None:
        """Keep every switch configured until stop(); one switch's failure does not stop
        the others being watched, nor a job one of them lost being lost on the others."""
        while not self._stop.wait(interval):
            self._restore(tolerate=True)

    def switch_stats(self) -> dict[str, dict[str, int]]:
        """Each switch's counters (drops by reason, unrouted, no destination)."""
        return {name: stats.switch_stats(c.conn) for name, c in self.controllers.items()}

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.stop()
        for c in self.controllers.values():
            c.close()
