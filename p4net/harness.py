"""A switch under test with a controller session: how tests and benchmarks configure it.

Why one module: the packet-level suite, the worker tests and the benchmarks all need a
switch with the real P4 program, a pipeline pushed over P4Runtime, the switch's identity
and jobs -- and the jobs must be exactly what the controller writes for a real job. So
`SwitchSession` configures jobs only through the controller's own `JobManager`: `create_job`
as an operator would (the manager picks the job's index, slots and epoch), `add_job` with
an index, slots and epoch the test chooses (the manager's `install`, the entries of a real
job). Jobs are then driven frame by frame (`TestJob`) or by real workers through
`InProcessTransport` (the `hostlib.worker.Transport` protocol on an in-process port).
"""

from __future__ import annotations

import functools
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from controlplane import identity
from p4reduce.addresses import Address, WorkerAddress
from controlplane.admission import JobParameters, job_parameters
from controlplane.connection import SwitchConnection
from controlplane.jobs import JobManager
from controlplane.stats import job_stats, switch_stats
from hostlib import protocol as p
from hostlib.engine import acts_at_once
from hostlib.framing import WIDTH, Batch
from hostlib.protocol import Endpoints, Frame, Header, MsgType
from p4reduce.job import Job, Uplink, load_descriptor
from p4reduce.wire import Flag, RoundMode, skip_carries_values
from softswitch.inprocess import InProcessFabric, InProcessSwitch, host_leaf

from .switches import SwitchUnderTest

SWITCH_MAC = "02:00:00:00:01:00"
SWITCH_IP = "10.0.0.254"
SWITCH = Address(SWITCH_MAC, SWITCH_IP)
FINGERPRINT = p.fingerprint(np.int32, 4 * p.BLOCK_VALUES)  # what announces carry unless told
# the workers' UDP port: not the switch's, so a result sent to the wrong port is seen
WORKER_UDP_PORT = p.UDP_PORT_BASE + 1
# the spine a test plays above a switch in the leaf role (docs/fabric.md): its address,
# and the leaf's rank in the spine's job (`TestJob.spine_frame`)
SPINE = Address("02:00:00:00:0f:00", "10.0.9.254")
LEAF_RANK = 1


def host_mac(port: int) -> str:
    return f"02:00:00:00:00:{port:02x}"


def host_ip(port: int) -> str:
    return f"10.0.0.{port}"


def worker_address(rank: int, port: int | None = None) -> WorkerAddress:
    """Rank `rank` on switch port `port` (default rank + 1)."""
    port = rank + 1 if port is None else port
    return WorkerAddress(rank, port, host_mac(port), host_ip(port), WORKER_UDP_PORT)


class SwitchSession:
    """A started switch under test, a fresh pipeline pushed over P4Runtime, the switch's
    identity set, and the controller's `JobManager` for its jobs."""

    def __init__(self, proc: SwitchUnderTest, switch: Address = SWITCH, owned: bool = False):
        self.proc = proc
        self.address = switch
        self.owned = owned  # stop `proc` on close (a switch this session started)
        self.conn = SwitchConnection(proc.grpc_addr).connect(retries=5)
        try:
            self.conn.push_pipeline()  # a fresh pipeline: every register and entry is new
            self.configure_identity()
            proc.drain()
            self.jobs = JobManager(self.conn, switch, None, None)
        except BaseException:
            self.close()
            raise

    def configure_identity(self) -> None:
        """The switch's MAC and IP (again after a test pushes the pipeline anew)."""
        identity.set_identity(self.conn, self.address.mac, self.address.ip)

    def lose_state(self, reinstall: bool = True) -> None:
        """What a switch restart leaves: a fresh pipeline (every register and entry new),
        the switch's identity set again and, with `reinstall`, every job the controller
        knows installed again, as it restores them; without, the caller adds its jobs."""
        self.conn.push_pipeline()
        self.configure_identity()
        if reinstall:
            self.jobs.reinstall_all()

    @classmethod
    def inprocess(cls, ports: int = 32, switch: Address = SWITCH) -> "SwitchSession":
        """A session on a new in-process softswitch with ports 1..`ports`, stopped on close."""
        proc = InProcessSwitch(ports).start()
        try:
            return cls(proc, switch, owned=True)
        except BaseException:
            proc.stop()
            raise

    def close(self) -> None:
        self.conn.close()
        if self.owned:
            self.proc.stop()

    def __enter__(self) -> "SwitchSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def device(self):
        """The in-process switch's softswitch `Device` (an in-process session only)."""
        assert isinstance(self.proc, InProcessSwitch), "no device: not an in-process switch"
        return self.proc.device

    # -- jobs --------------------------------------------------------------------------

    def create_job(
        self,
        workers: int,
        slots: int = 8,
        job: int = 7,
        ports: list[int] | None = None,
        encoding: str = "packed",
        int32_halves: bool | None = None,
        block_values: int | None = None,
        round_mode: str | None = None,
        window: int | None = None,
    ) -> Job:
        """A job of `workers` ranks (rank r on ports[r], default r + 1), created as the
        controller creates one (`block_values`, `round_mode`, `window` None: the target's
        default)."""
        ports = ports or list(range(1, workers + 1))
        return self.jobs.create(
            job,
            [worker_address(r, port) for r, port in enumerate(ports)],
            slots,
            encoding,
            int32_halves,
            block_values,
            round_mode,
            window,
        )

    def add_job(
        self,
        job: int,
        n: int,
        *,
        slot_base: int = 0,
        slot_count: int = 4,
        job_index: int = 0,
        epoch: int = 1,
        ports: list[int] | None = None,
        encoding: p.Encoding = p.Encoding.LANES,
        block_values: int = p.BLOCK_VALUES,
        round_mode: RoundMode = RoundMode.EVERY_RANK,
        uplink: Uplink | None = None,
        ranks_in_job: list[int] | None = None,
        job_ranks: int | None = None,
    ) -> TestJob:
        """A job whose index, slots and epoch the test chooses, adopted by the controller's
        `JobManager.adopt` (the entries a real job gets, and the manager knows it, so that
        `TestJob.remove` and `set_loss` are the controller's too); with `uplink` (and the
        whole job's `ranks_in_job` and `job_ranks`) a leaf's part of a job in the leaf role."""
        ports = ports or list(range(1, n + 1))
        assert len(ports) == n
        spec = Job(
            job=job,
            job_index=job_index,
            slot_base=slot_base,
            slot_count=slot_count,
            epoch=epoch,
            workers=[worker_address(rank, port) for rank, port in enumerate(ports)],
            encoding=p.Encoding(encoding).name.lower(),
            block_values=block_values,
            round_mode=RoundMode(round_mode).name.lower(),
            uplink=uplink,
            ranks_in_job=ranks_in_job,
            job_ranks=job_ranks,
        )
        self.jobs.adopt(spec)
        return TestJob(self, spec)

    def descriptors(self, job: Job) -> list[dict]:
        return job.descriptors(self.address)

    def set_loss(self, job: int, **kw) -> None:
        """Job `job`'s simulated loss (JobManager.set_loss's keywords)."""
        self.jobs.set_loss(job, **kw)

    def restart_loss_sequence(self, job: Job) -> None:
        """Number job's packets for the drop simulator from 0 again, as on a fresh switch:
        its seed then loses the same packets whatever jobs ran on the switch before (the
        sequence is kept per job index across jobs). In-process only: bmv2's P4Runtime
        server writes no register."""
        name = self.conn.p4.register("ingress_sequence").name
        self.device.active.switch.register_write(name, job.job_index, 0)

    def stats(self, job: Job) -> dict[str, int]:
        """The job's counters (the controller zeroes them when it creates the job)."""
        return job_stats(self.conn, job.job_index)

    def switch_stats(self) -> dict[str, int]:
        return switch_stats(self.conn)

    def transport(self, port: int, width: int | None = None) -> "InProcessTransport":
        """Rank's link on `port`; `width`: the longest frame it receives whole (a RESULT of
        its job's K values: p4reduce.wire.frame_bytes_with_values), None: every frame whole."""
        assert isinstance(self.proc, InProcessSwitch), "workers' transports are in-process"
        return InProcessTransport(self.proc, port, width)


@contextmanager
def record_ingress(session: SwitchSession) -> Iterator[list[tuple[int, bytes]]]:
    """While the block runs, every frame the in-process switch of `session` takes in, with
    its port, in the order it took them (the switch still runs each): a call's traffic, to
    replay into other switches."""
    import threading

    device = session.device
    receive, lock = device.receive, threading.Lock()
    frames: list[tuple[int, bytes]] = []

    def recorded(port: int, frame: bytes) -> None:
        with lock:  # the order the switch saw them in is the order kept
            frames.append((port, bytes(frame)))
            receive(port, frame)

    device.receive = recorded
    try:
        yield frames
    finally:
        device.receive = receive


def frame_rows(items: list[bytes], width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Frames as a transport's recv returns them: a (n, width) uint8 matrix (longer frames
    cut, as a socket's receive ring cuts them) and their lengths. Without a width, as wide
    as the widest frame (a job's of K values: 62 + 4K bytes) and at least WIDTH."""
    if width is None:
        width = max([WIDTH, *(len(f) for f in items)])
    frames = np.zeros((len(items), width), np.uint8)
    lengths = np.zeros(len(items), np.int64)
    for i, f in enumerate(items):
        n = min(len(f), width)
        frames[i, :n] = np.frombuffer(f, np.uint8, n)
        lengths[i] = len(f)
    return frames, lengths


class InProcessTransport:
    """One worker's link to an in-process switch port (the interface of
    hostlib.transport.RawSocket)."""

    mode = "inprocess"

    def __init__(self, switch: InProcessSwitch, port: int, width: int | None = None):
        self.switch, self.port, self.width = switch, port, width
        self.drop_sends = 0  # tests: lose this many of the next sent frames

    def send(self, batch: Batch) -> int:
        frames = [batch.frame(i) for i in range(len(batch))]
        if self.drop_sends:
            lost = min(self.drop_sends, len(frames))
            self.drop_sends -= lost
            frames = frames[lost:]
        self.switch.send_many(self.port, frames)
        return len(batch)

    def recv(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        return frame_rows(self.switch.take(self.port, max_n), self.width)

    def wait(self, timeout: float) -> None:
        self.switch.wait(self.port, timeout)

    def ready(self, limit: int) -> int:
        """How many frames wait on the port, up to `limit` (the Worker's gather asks)."""
        return min(self.switch.queued(self.port), max(limit, 0))

    def close(self) -> None:
        self.switch.set_wake_filter(self.port, None)


def leaf_transport(
    fab: InProcessFabric, worker: WorkerAddress, descriptor: dict
) -> InProcessTransport:
    """The transport of a rank of a two-level in-process fabric (softswitch.inprocess
    two_level) on its leaf's port. A rank in the leaf role (its descriptor's `wire_rank`)
    is woken only by frames it acts on before its next timer (`hostlib.engine
    .acts_at_once`): not by a STATUS that only holds its round, which its next turn takes
    in first. Why: its leaf sends every STATUS to all its ranks, and here each wake-up is
    a turn of a rank thread on the one core every rank and switch shares; with 5 % loss
    on every link those turns were most of a call's CPU (docs/fabric.md, "What the one
    core does, and the ranks' turns")."""
    transport = InProcessTransport(fab.switch(host_leaf(worker.mac)), worker.port)
    wire_rank = load_descriptor(descriptor).wire_rank
    if wire_rank is not None:
        transport.switch.set_wake_filter(
            worker.port, functools.partial(acts_at_once, rank_on_wire=wire_rank)
        )
    return transport


# How long a rank thread of an in-process fabric spins on an empty port before it sleeps
# (hostlib.Worker's busy_poll): never. A rank on its own host spins on its own core; here
# every turn of a rank's loop is time on the one core all ranks and switches share, and
# the port's wait returns at once when a frame that wakes the rank is queued
# (leaf_transport).
RANK_BUSY_POLL = 0.0


def leaf_worker(
    fab: InProcessFabric, worker: WorkerAddress, descriptor: dict, timeout: float, deadline: float
):
    """The hostlib Worker of a rank thread of a two-level in-process fabric: on its leaf's
    port (`leaf_transport`), never spinning (RANK_BUSY_POLL). The one way such ranks are
    made, by `allreduce_on_leaves` and bench/fabric.py's running job alike."""
    from hostlib import Worker

    return Worker(
        descriptor,
        transport=leaf_transport(fab, worker, descriptor),
        timeout=timeout,
        deadline=deadline,
        busy_poll=RANK_BUSY_POLL,
    )


# The interpreter's thread switch interval while many ranks run as threads of this process
# (ranks_interleaved). Python's default is 5 ms.
RANK_SWITCH_INTERVAL = 5e-4


@contextmanager
def ranks_interleaved(interval: float = RANK_SWITCH_INTERVAL) -> Iterator[None]:
    """Run the block with the interpreter's thread switch interval at most `interval`,
    then restore it (process-wide: one such run at a time).

    Why: when every rank of a job is a thread of one process (the in-process fabric), a
    thread keeps the interpreter for up to the switch interval while the others, frames
    queued, wait their turn. At Python's 5 ms a leaf's STATUS reached its 16 rank threads
    only after many other threads' turns; ranks whose timers fired meanwhile asked again
    with the STATUS that would have held them still queued, each ask another STATUS to all
    16 -- an effect of the simulation (a rank on its own host reacts within microseconds),
    not of the protocol (docs/fabric.md, "Where the time goes with loss, in one
    process")."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(min(old, interval))
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def on_leaves(
    fab: InProcessFabric,
    descriptors: list[dict],
    workers: list[WorkerAddress],
    body: Callable[[int, Any], None],
    timeout: float,
    deadline: float,
    join: float,
) -> tuple[float, dict[int, BaseException], list[int]]:
    """Every rank of a job on a two-level in-process fabric (softswitch.inprocess
    two_level) as a hostlib Worker (`leaf_worker`) in its own thread on its leaf's port,
    running `body(rank, worker)`, the threads interleaved finely (`ranks_interleaved`):
    (seconds, what each rank's Worker or body raised, the ranks still running after
    `join` seconds each). The one way such ranks run: `allreduce_on_leaves` and the
    random fabric jobs (tests/fabric/random_fabric_jobs.py) give it their calls."""
    import threading
    import time

    raised: dict[int, BaseException] = {}

    def run(r: int) -> None:
        try:
            with leaf_worker(fab, workers[r], descriptors[r], timeout, deadline) as w:
                body(r, w)
        except BaseException as exc:  # the caller judges every rank
            raised[r] = exc

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(len(workers))]
    with ranks_interleaved():
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(join)
        seconds = time.monotonic() - start
    return seconds, raised, [r for r, t in enumerate(threads) if t.is_alive()]


def allreduce_on_leaves(
    fab: InProcessFabric,
    descriptors: list[dict],
    workers: list[WorkerAddress],
    tensors: list[np.ndarray],
    timeout: float,
    deadline: float,
    join: float,
) -> tuple[float, list, list]:
    """Every rank's allreduce of its tensor (`on_leaves`): (seconds, each rank's result
    or the exception it raised, each rank's WorkerStats or None)."""
    results: list = [None] * len(workers)
    stats: list = [None] * len(workers)

    def body(r: int, w) -> None:
        results[r] = w.allreduce(tensors[r])
        stats[r] = w.stats

    seconds, raised, _ = on_leaves(fab, descriptors, workers, body, timeout, deadline, join)
    for r, exc in raised.items():
        results[r] = exc
    return seconds, results, stats


@dataclass
class TestJob:
    """A job installed on a switch under test, driven frame by frame: rank r is an address
    on a switch port that sends frames built with the one codec (hostlib.protocol) and
    receives what the switch sends back."""

    switch: "SwitchSession"
    job: Job
    by_rank: dict[int, WorkerAddress] = field(init=False)

    def __post_init__(self) -> None:
        self.by_rank = {w.rank: w for w in self.job.workers}

    @property
    def params(self) -> JobParameters:
        return job_parameters(self.job)

    @property
    def workers(self) -> list[WorkerAddress]:
        return self.job.workers

    @property
    def silent(self) -> bool:
        """A job of silent rounds: its frames carry FLAG_SILENT (`frame` adds it)."""
        return self.job.silent

    def endpoints(self, rank: int) -> Endpoints:
        w, switch = self.by_rank[rank], self.switch.address
        return Endpoints(w.mac, switch.mac, w.ip, switch.ip, w.udp_port, p.UDP_PORT_BASE)

    def frame(
        self,
        rank: int,
        msg_type: MsgType,
        *,
        slot: int = 0,
        version: int = 0,
        block: int = p.END_OF_STREAM,
        next_block: int = p.END_OF_STREAM,
        next_exponent: int = 0,
        values=None,
        flags: int = 0,
        job: int | None = None,
        epoch: int | None = None,
        fingerprint: int = FINGERPRINT,
        pad_skip: bool = True,
        mode_flag: bool = True,
    ) -> bytes:
        """One frame from `rank`. A SKIP or REWIND of a job whose SKIPs carry a values
        block (p4reduce.wire.skip_carries_values), and an ANNOUNCE of a job whose
        ANNOUNCEs carry one after the fingerprint range (Job.announce_block), get one of
        zeros unless `pad_skip` is False; a silent job's frame gets FLAG_SILENT unless
        `mode_flag` is False."""
        if mode_flag and self.silent:
            flags |= Flag.SILENT
        header = Header.make(
            msg_type,
            job=self.params.job if job is None else job,
            slot=slot,
            rank=rank,
            slot_version=version,
            flags=flags,
            block=block,
            next_block=next_block,
            next_exponent=next_exponent,
            epoch=self.params.epoch if epoch is None else epoch,
        )
        fp = (fingerprint, fingerprint) if msg_type == MsgType.ANNOUNCE else None
        header_only = msg_type in (MsgType.SKIP, MsgType.REWIND)
        if header_only and pad_skip and skip_carries_values(self.job.block_values):
            values = np.zeros(self.job.block_values, np.int64)
        if fp is not None and pad_skip and self.job.announce_block:
            values = np.zeros(self.job.block_values, np.int64)
        if values is None:
            return p.build_frame(self.endpoints(rank), header, fingerprint=fp)
        values = np.asarray(values, dtype=np.int64)
        return p.build_frame(self.endpoints(rank), header, values, fingerprint=fp)

    def spine_frame(self, flags: int = 0, **kw) -> bytes:
        """A frame of the spine (SPINE) to this job's leaf part: its RESULT, or `msg_type`
        (`kw`: header fields, and values, fingerprint or contributors); rank LEAF_RANK and
        the job's epoch unless given."""
        values, fingerprint = kw.pop("values", None), kw.pop("fingerprint", None)
        contributors = kw.pop("contributors", None)
        switch = self.switch.address
        ep = Endpoints(SPINE.mac, switch.mac, SPINE.ip, switch.ip, p.UDP_PORT_BASE, p.UDP_PORT_BASE)
        header = Header.make(
            kw.pop("msg_type", MsgType.RESULT),
            job=self.params.job,
            rank=kw.pop("rank", LEAF_RANK),
            epoch=kw.pop("epoch", self.params.epoch),
            flags=flags,
            **kw,
        )
        values = None if values is None else np.asarray(values, np.int64)
        return p.build_frame(ep, header, values, fingerprint=fingerprint, contributors=contributors)

    def send(self, rank: int, msg_type: MsgType, **kw) -> None:
        self.switch.proc.send(self.by_rank[rank].port, self.frame(rank, msg_type, **kw))

    def send_frame(self, rank: int, frame: bytes) -> None:
        self.switch.proc.send(self.by_rank[rank].port, frame)

    def result(self, rank: int, timeout: float = 3.0) -> Frame | None:
        """The next p4reduce frame to `rank`, parsed (None if nothing came)."""
        port = self.by_rank[rank].port
        while (raw := self.switch.proc.recv(port, timeout)) is not None:
            try:
                return self.parse(raw)
            except p.ProtocolError:
                continue  # not p4reduce (e.g. a flooded frame): keep waiting
        return None

    def parse(self, raw: bytes) -> Frame:
        """A frame of this job, parsed: with the job's K where its ANNOUNCEs carry a block
        (a fingerprint range followed by a block reads as the range only given that K,
        protocol.extension_kind), else of any K as before."""
        return p.parse_frame(raw, self.job.block_values if self.job.announce_block else None)

    def results(self, timeout: float = 3.0) -> dict[int, Frame]:
        out = {}
        for w in self.workers:
            got = self.result(w.rank, timeout)
            assert got is not None, f"rank {w.rank} got no result"
            out[w.rank] = got
        return out

    def assert_silent(self, timeout: float = 0.4) -> None:
        for w in self.workers:
            extra = self.switch.proc.recv_all(w.port, timeout)
            assert not extra, f"rank {w.rank} got {len(extra)} unexpected frame(s)"

    def round(
        self,
        version: int,
        block: int,
        blocks: dict[int, np.ndarray | None],
        announce: dict[int, tuple[int, int]],
        slot: int = 0,
        flags: int = 0,
    ) -> dict[int, Frame]:
        """One round: every rank sends DATA (values given) or SKIP; returns each result."""
        for rank in sorted(blocks):
            nb, ne = announce[rank]
            values = blocks[rank]
            kind = MsgType.DATA if values is not None else MsgType.SKIP
            self.send(
                rank,
                kind,
                slot=slot,
                version=version,
                block=block,
                next_block=nb,
                next_exponent=ne,
                values=values,
                flags=flags,
            )
        return self.results()

    def stats(self) -> dict[str, int]:
        return self.switch.stats(self.job)

    def remove(self) -> None:
        """Every entry of the job removed, by the controller's own delete."""
        self.switch.jobs.delete(self.job.job)
