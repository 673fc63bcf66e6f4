"""A p4reduce switch under test: configured over P4Runtime, driven with real frames.

Workers here are just addresses on the test's veth ends: rank r of a job sits on a switch
port, sends frames built with the one codec (hostlib.protocol) and receives what the switch
sends back. The job is installed with the controller's per-control modules, exactly the
entries the controller writes for a real job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from controlplane import admission, drop_simulator, identity, replication, result_destination
from p4reduce.addresses import WorkerAddress
from controlplane.admission import JobParameters
from controlplane.connection import SwitchConnection
from controlplane.stats import job_stats, switch_stats
from hostlib import protocol as p
from hostlib.protocol import Endpoints, Frame, Header, MsgType

from .targets import SwitchUnderTest

SWITCH_MAC = "02:00:00:00:01:00"
SWITCH_IP = "10.0.0.254"
FINGERPRINT = p.fingerprint(np.int32, 4 * p.BLOCK_VALUES)  # what announces carry unless told


def packed_bias(n: int) -> int:
    """floor((2^31 - 1) / N): written out here, not imported, so the tests check the
    controller's and the worker's value against the specification (protocol.md 10)."""
    return ((1 << 31) - 1) // n


def host_mac(port: int) -> str:
    return f"02:00:00:00:00:{port:02x}"


def host_ip(port: int) -> str:
    return f"10.0.0.{port}"


@dataclass
class TestJob:
    switch: "P4ReduceSwitch"
    params: JobParameters
    workers: list[WorkerAddress]
    by_rank: dict[int, WorkerAddress] = field(init=False)

    def __post_init__(self) -> None:
        self.by_rank = {w.rank: w for w in self.workers}

    def endpoints(self, rank: int) -> Endpoints:
        w = self.by_rank[rank]
        return Endpoints(w.mac, SWITCH_MAC, w.ip, SWITCH_IP, w.udp_port, p.UDP_PORT_BASE)

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
    ) -> bytes:
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
        vals = None if values is None else np.asarray(values, dtype=np.int64)
        fp = (fingerprint, fingerprint) if msg_type == MsgType.ANNOUNCE else None
        return p.build_frame(self.endpoints(rank), header, vals, fingerprint=fp)

    def send(self, rank: int, msg_type: MsgType, **kw) -> None:
        self.switch.proc.send(self.by_rank[rank].port, self.frame(rank, msg_type, **kw))

    def send_frame(self, rank: int, frame: bytes) -> None:
        self.switch.proc.send(self.by_rank[rank].port, frame)

    def result(self, rank: int, timeout: float = 3.0) -> Frame | None:
        """The next p4reduce frame to `rank`, parsed (None if nothing came)."""
        port = self.by_rank[rank].port
        while (raw := self.switch.proc.recv(port, timeout)) is not None:
            try:
                return p.parse_frame(raw)
            except p.ProtocolError:
                continue  # not p4reduce (e.g. a flooded frame): keep waiting
        return None

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
        return job_stats(self.switch.conn, self.params.job_index)

    def remove(self) -> None:
        conn = self.switch.conn
        admission.revoke(conn, self.params, self.workers)
        result_destination.remove_destinations(conn, self.params.job, self.workers)
        conn.delete(replication.multicast_group(self.params.mcast_grp, []))


@dataclass
class P4ReduceSwitch:
    proc: SwitchUnderTest
    conn: SwitchConnection

    def configure_identity(self) -> None:
        identity.set_identity(self.conn, SWITCH_MAC, SWITCH_IP)

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
        mcast_grp: int | None = None,
        encoding: p.Encoding = p.Encoding.LANES,
    ) -> TestJob:
        ports = ports or list(range(1, n + 1))
        assert len(ports) == n
        params = JobParameters(
            job=job,
            job_index=job_index,
            slot_base=slot_base,
            slot_count=slot_count,
            worker_count=n,
            mcast_grp=mcast_grp or 100 + job_index,
            epoch=epoch,
            encoding=int(encoding),
            bias=packed_bias(n) if encoding == p.Encoding.PACKED else 0,
        )
        workers = [
            WorkerAddress(rank, port, host_mac(port), host_ip(port), p.UDP_PORT_BASE + 1)
            for rank, port in enumerate(ports)
        ]
        admission.admit(self.conn, params, workers)
        result_destination.add_destinations(self.conn, job, workers)
        self.conn.insert(
            replication.multicast_group(params.mcast_grp, [(w.port, w.rank) for w in workers])
        )
        return TestJob(self, params, workers)

    def set_loss(self, job: int, **kw) -> None:
        drop_simulator.set_loss(self.conn, job, **kw)

    def switch_stats(self) -> dict[str, int]:
        return switch_stats(self.conn)
