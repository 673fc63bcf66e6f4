"""Programs Admission: one entry per (ingress port, MAC, IPv4, job, epoch, rank) of a job's
workers.

The epoch in the key is the job's incarnation: a worker of a deleted job still sends its old
epoch, which no entry matches, whatever ids and addresses a later job reuses. The action
carries the job's parameters (job index, slot range, worker count, multicast group, value
encoding and its bias, values per block, round mode), so admission is also where a job's slots are
handed to the data plane. A job whose state the switch lost (its pipeline was pushed while
the job existed) is admitted with `admit_lost`, the same parameters: every packet of that
incarnation is answered STATE_LOST, so its ranks fail at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4reduce import wire
from p4reduce.addresses import WorkerAddress, ip_int, mac_int
from p4reduce.job import Job, encoding_named, round_mode_named

from .connection import SwitchConnection, table_entity
from .replication import job_group

SECTION = "7. Admission"  # docs/protocol.md
TABLES = ("admission",)
JOB_COUNTERS = ("slot_out_of_range", "wrong_encoding")
SWITCH_COUNTERS: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobParameters:
    job: int
    job_index: int
    slot_base: int
    slot_count: int
    worker_count: int
    mcast_grp: int
    epoch: int
    encoding: int = 0  # wire.Encoding: LANES 0, PACKED 1
    bias: int = 0  # PACKED: floor((2^31 - 1) / worker_count), what a SKIP adds
    block_values: int = wire.BLOCK_VALUES  # K, the values per block
    round_mode: int = 0  # wire.RoundMode: EVERY_RANK 0, SILENT 1
    lost: bool = False  # the switch lost the incarnation's state: admit_lost


def job_parameters(job: Job) -> JobParameters:
    """The admit action's parameters for `job`: how the controller maps a job onto the
    data plane (its multicast group, the encoding's number and the packed bias)."""
    encoding = encoding_named(job.encoding)
    packed = encoding == wire.Encoding.PACKED
    return JobParameters(
        job=job.job,
        job_index=job.job_index,
        slot_base=job.slot_base,
        slot_count=job.slot_count,
        worker_count=job.worker_count,
        mcast_grp=job_group(job.job_index),
        epoch=job.epoch,
        encoding=int(encoding),
        bias=wire.packed_bias(job.ranks_in_all) if packed else 0,  # N: the whole job's
        block_values=job.block_values,
        round_mode=int(round_mode_named(job.round_mode)),
        lost=job.lost,
    )


def admission_entry(
    conn: SwitchConnection, job: JobParameters, worker: WorkerAddress, with_action: bool = True
):
    match = {
        "ingress_port": conn.ports(worker.port),
        "src_mac": mac_int(worker.mac),
        "src_ip": ip_int(worker.ip),
        "job": job.job,
        "epoch": job.epoch,
        "rank": worker.rank,
    }
    if not with_action:
        return conn.p4.table_entry("admission", match)
    return conn.p4.table_entry(
        "admission",
        match,
        "admit_lost" if job.lost else "admit",
        {
            "job_index": job.job_index,
            "slot_base": job.slot_base,
            "slot_count": job.slot_count,
            "worker_count": job.worker_count,
            "mcast_grp": job.mcast_grp,
            "encoding": job.encoding,
            "bias": job.bias,
            "block_values": job.block_values,
            "round_mode": job.round_mode,
        },
    )


def admit(conn: SwitchConnection, job: JobParameters, workers: list[WorkerAddress]) -> None:
    conn.insert(*(table_entity(admission_entry(conn, job, w)) for w in workers))


def revoke(conn: SwitchConnection, job: JobParameters, workers: list[WorkerAddress]) -> None:
    conn.delete(*(table_entity(admission_entry(conn, job, w, False)) for w in workers))
