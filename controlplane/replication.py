"""Multicast groups of the packet replication engine: one replica per rank, rid = rank.

The result of a round is multicast to the job's group; the egress learns which rank a copy
is for from its replica id (egress_rid) and rewrites its addresses (result_destination).
Replicas carry the data plane's port numbers: on Tofino the configured ports' dev ports
(`conn.ports`, p4reduce/target.py); the groups themselves are standard P4Runtime PRE
entries on every target.
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

JOB_GROUP_BASE = 16  # multicast group of job index i is 16 + i; 1..15 are for flooding


def job_group(job_index: int) -> int:
    """The multicast group a job's results are replicated by: one per job index."""
    return JOB_GROUP_BASE + job_index


def multicast_group(group_id: int, replicas: list[tuple[int, int]]) -> p4runtime_pb2.Entity:
    """Entity for a group of (egress port, instance/rid) replicas."""
    entity = p4runtime_pb2.Entity()
    group = entity.packet_replication_engine_entry.multicast_group_entry
    group.multicast_group_id = group_id
    for port, rid in replicas:
        group.replicas.add(egress_port=port, instance=rid)
    return entity


# the replica of a silent leaf's job group towards its uplink (p4src/v1model/uplink.p4:
# EmptyPartial turns it into the leaf's empty partial, or drops it)
UPLINK_REPLICA = 0x100


def job_replicas(conn, job) -> list[tuple[int, int]]:
    """A job's replicas: (the worker's dev port, instance = rank), and a silent leaf's
    (its uplink port, UPLINK_REPLICA)."""
    replicas = [(w.port, w.rank) for w in job.workers]
    if job.uplink is not None and job.silent:
        replicas.append((job.uplink.port, UPLINK_REPLICA))
    return conn.ports.replicas(replicas)


def flood_replicas(conn, ports: list[int]) -> list[tuple[int, int]]:
    """The flood group's replicas: every configured port's dev port, instance 0."""
    return conn.ports.replicas([(port, 0) for port in ports])


def read_groups(conn) -> dict[int, list[tuple[int, int]]]:
    """Every multicast group on the switch: {group id: [(port, rid)]}."""
    query = multicast_group(0, [])
    return {
        e.packet_replication_engine_entry.multicast_group_entry.multicast_group_id: [
            (r.egress_port, r.instance)
            for r in e.packet_replication_engine_entry.multicast_group_entry.replicas
        ]
        for e in conn.read(query)
    }
