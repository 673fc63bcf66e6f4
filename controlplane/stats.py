"""Reads the P4 counters: per-job packet counts and the switch-wide drop reasons.

Per-job counters are indexed by the job's `job_index`, which a new job reuses after a
deleted one; `zero_job_counters` (P4Runtime CounterEntry MODIFY, which simple_switch_grpc
and softswitch both implement) makes a new job's statistics start at zero.
"""
from __future__ import annotations

from p4.v1 import p4runtime_pb2

from .connection import SwitchConnection

JOB_COUNTERS = ("aggregated", "rounds_completed", "retransmissions_served", "duplicates",
                "overflows", "state_lost", "slot_out_of_range", "simulated_drops_ingress",
                "simulated_drops_egress")
DROP_REASONS = ("malformed", "unadmitted")
SWITCH_COUNTERS = ("unrouted", "no_destination_drops")


def read_counter(conn: SwitchConnection, name: str, index: int | None = None) -> dict[int, int]:
    """{index: packets} of one counter (every index when index is None)."""
    entity = p4runtime_pb2.Entity()
    entity.counter_entry.counter_id = conn.p4.counter(name).id
    if index is not None:
        entity.counter_entry.index.index = index
    return {e.counter_entry.index.index: e.counter_entry.data.packet_count
            for e in conn.read(entity)}


def zero_job_counters(conn: SwitchConnection, job_index: int) -> None:
    """Set every per-job counter of `job_index` to zero packets, in one write."""
    entities = []
    for name in JOB_COUNTERS:
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = conn.p4.counter(name).id
        entity.counter_entry.index.index = job_index
        entity.counter_entry.data.SetInParent()       # packet_count = byte_count = 0
        entities.append(entity)
    conn.modify(*entities)


def job_stats(conn: SwitchConnection, job_index: int) -> dict[str, int]:
    return {name: read_counter(conn, name, job_index).get(job_index, 0)
            for name in JOB_COUNTERS}


def switch_stats(conn: SwitchConnection) -> dict[str, int]:
    drops = read_counter(conn, "drops")
    out = {f"drops_{reason}": drops.get(i, 0) for i, reason in enumerate(DROP_REASONS)}
    for name in SWITCH_COUNTERS:
        out[name] = read_counter(conn, name, 0).get(0, 0)
    return out
