"""Multicast groups of the packet replication engine: one replica per rank, rid = rank.

The result of a round is multicast to the job's group; the egress learns which rank a copy
is for from its replica id (egress_rid) and rewrites its addresses (result_destination).
"""
from __future__ import annotations

from p4.v1 import p4runtime_pb2


def multicast_group(group_id: int, replicas: list[tuple[int, int]]) -> p4runtime_pb2.Entity:
    """Entity for a group of (egress port, instance/rid) replicas."""
    entity = p4runtime_pb2.Entity()
    group = entity.packet_replication_engine_entry.multicast_group_entry
    group.multicast_group_id = group_id
    for port, rid in replicas:
        group.replicas.add(egress_port=port, instance=rid)
    return entity


def read_groups(conn) -> dict[int, list[tuple[int, int]]]:
    """Every multicast group on the switch: {group id: [(port, rid)]}."""
    query = multicast_group(0, [])
    return {e.packet_replication_engine_entry.multicast_group_entry.multicast_group_id:
            [(r.egress_port, r.instance)
             for r in e.packet_replication_engine_entry.multicast_group_entry.replicas]
            for e in conn.read(query)}
