"""The real p4reduce program in this process: workers' tests run against the switch itself.

Why: a worker test is only as good as the switch it talks to. This loads the committed p4c
output (p4src/build/p4reduce.json) into a softswitch `Device`, serves it over P4Runtime on
loopback, and programs it with the controller's own `JobManager` -- the same entries a real
job gets, drop simulator included. Worker threads reach it through `InProcessTransport`
(the `hostlib.worker.Transport` protocol): no root, no interfaces, no second model of the
protocol to drift from p4src/.

Imported by name (tests/ is on sys.path in the hostlib tests' conftest).
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

from controlplane import identity
from controlplane.addresses import Address, WorkerAddress
from controlplane.connection import SwitchConnection
from controlplane.jobs import Job, JobManager
from controlplane.stats import job_stats
from hostlib import protocol as p
from hostlib.framing import WIDTH, Batch
from softswitch.p4runtime_server import Device, P4RuntimeServer

SWITCH = Address("02:00:00:00:01:00", "10.250.0.254")


def worker_address(rank: int, port: int | None = None) -> WorkerAddress:
    port = rank + 1 if port is None else port
    return WorkerAddress(
        rank=rank,
        port=port,
        mac=f"02:00:00:00:00:{port:02x}",
        ip=f"10.250.0.{port}",
        udp_port=p.UDP_PORT_BASE,
    )


class InProcessSwitch:
    """softswitch + P4Runtime server + controller session, all in this process."""

    def __init__(self, ports: int = 32, switch: Address = SWITCH):
        self.address = switch
        self.device = Device(device_id=1)
        self.server = P4RuntimeServer(self.device, "127.0.0.1:0")
        self.server.start()
        self.lock = threading.Condition()
        self.queues: dict[int, deque[bytes]] = {port: deque() for port in range(1, ports + 1)}
        self.device.transmit = self._transmit
        self.conn = SwitchConnection(self.server.address).connect(retries=5)
        self.conn.push_pipeline()
        identity.set_identity(self.conn, switch.mac, switch.ip)
        self.jobs = JobManager(self.conn, switch, None, set(self.queues))

    def close(self) -> None:
        self.conn.close()
        self.server.stop(0)

    def __enter__(self) -> "InProcessSwitch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- jobs ----------------------------------------------------------------------------

    def create_job(
        self,
        workers: int,
        slots: int = 8,
        job: int = 7,
        ports: list[int] | None = None,
        encoding: str = "packed",
        int32_halves: bool | None = None,
    ) -> Job:
        ports = ports or list(range(1, workers + 1))
        return self.jobs.create(
            job,
            [worker_address(r, port) for r, port in enumerate(ports)],
            slots,
            encoding,
            int32_halves,
        )

    def descriptors(self, job: Job) -> list[dict]:
        return job.descriptors(self.address)

    def set_loss(self, job: Job, ingress: float = 0.0, egress: float = 0.0, seed: int = 1) -> None:
        self.jobs.set_loss(job.job, ingress=ingress, egress=egress, seed=seed)

    def stats(self, job: Job) -> dict[str, int]:
        """The job's counters (the controller zeroes them when it creates the job)."""
        return job_stats(self.conn, job.job_index)

    # -- frames --------------------------------------------------------------------------

    def _transmit(self, port: int, frame: bytes) -> None:
        # called by device.receive, i.e. with self.lock held by `send`
        if port in self.queues:
            self.queues[port].append(frame)

    def send(self, port: int, frames: list[bytes]) -> None:
        """Frames entering on `port`, processed one by one (the softswitch is one pipeline)."""
        with self.lock:
            for frame in frames:
                self.device.receive(port, frame)
            self.lock.notify_all()

    def transport(self, port: int) -> "InProcessTransport":
        return InProcessTransport(self, port)


def frame_rows(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Frames as a transport's recv returns them: a (n, WIDTH) uint8 matrix and lengths."""
    frames = np.zeros((len(items), WIDTH), np.uint8)
    lengths = np.zeros(len(items), np.int64)
    for i, f in enumerate(items):
        n = min(len(f), WIDTH)
        frames[i, :n] = np.frombuffer(f, np.uint8, n)
        lengths[i] = len(f)
    return frames, lengths


class InProcessTransport:
    """One worker's link to the in-process switch (same interface as transport.RawSocket)."""

    mode = "inprocess"

    def __init__(self, switch: InProcessSwitch, port: int):
        self.switch, self.port = switch, port
        self.drop_sends = 0  # tests: lose this many of the next sent frames

    def send(self, batch: Batch) -> int:
        frames = [batch.frame(i) for i in range(len(batch))]
        if self.drop_sends:
            lost, self.drop_sends = (
                min(self.drop_sends, len(frames)),
                max(0, self.drop_sends - len(frames)),
            )
            frames = frames[lost:]
        self.switch.send(self.port, frames)
        return len(batch)

    def recv(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        with self.switch.lock:
            q = self.switch.queues[self.port]
            items = [q.popleft() for _ in range(min(max_n, len(q)))]
        return frame_rows(items)

    def wait(self, timeout: float) -> None:
        with self.switch.lock:
            if not self.switch.queues[self.port]:
                self.switch.lock.wait(timeout)

    def close(self) -> None:
        pass
