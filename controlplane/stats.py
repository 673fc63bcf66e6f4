"""Reads the P4 counters: per-job packet counts and the switch-wide drop reasons.

Per-job counters are indexed by the job's `job_index`, which a new job reuses after a
deleted one; `zero_job_counters` (P4Runtime CounterEntry MODIFY, which simple_switch_grpc
and softswitch both implement) makes a new job's statistics start at zero.
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from . import (
    admission,
    drop_simulator,
    forwarding,
    pipeline,
    result,
    result_destination,
    rewind,
)
from .connection import SwitchConnection

# Each controller module names the counters its P4 control declares; these are the lists
# of all of them (tests/controller_tests/test_control_modules.py checks against the P4Info)
JOB_COUNTERS = (
    result.JOB_COUNTERS + admission.JOB_COUNTERS + drop_simulator.JOB_COUNTERS + rewind.JOB_COUNTERS
)
DROP_REASONS = pipeline.DROP_REASONS
SWITCH_COUNTERS = forwarding.SWITCH_COUNTERS + result_destination.SWITCH_COUNTERS


def read_counter(conn: SwitchConnection, name: str, index: int | None = None) -> dict[int, int]:
    """{index: packets} of one counter (every index when index is None)."""
    entity = p4runtime_pb2.Entity()
    entity.counter_entry.counter_id = conn.p4.counter(name).id
    if index is not None:
        entity.counter_entry.index.index = index
    return {
        e.counter_entry.index.index: e.counter_entry.data.packet_count for e in conn.read(entity)
    }


def zero_job_counters(conn: SwitchConnection, job_index: int) -> None:
    """Set every per-job counter of `job_index` to zero packets, in one write."""
    entities = []
    for name in JOB_COUNTERS:
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = conn.p4.counter(name).id
        entity.counter_entry.index.index = job_index
        entity.counter_entry.data.SetInParent()  # packet_count = byte_count = 0
        entities.append(entity)
    conn.modify(*entities)


def job_stats(conn: SwitchConnection, job_index: int) -> dict[str, int]:
    return {name: read_counter(conn, name, job_index).get(job_index, 0) for name in JOB_COUNTERS}


def switch_stats(conn: SwitchConnection) -> dict[str, int]:
    (drops_counter,) = pipeline.SWITCH_COUNTERS
    drops = read_counter(conn, drops_counter)
    out = {f"drops_{reason}": drops.get(i, 0) for i, reason in enumerate(DROP_REASONS)}
    for name in SWITCH_COUNTERS:
        out[name] = read_counter(conn, name, 0).get(0, 0)
    return out
