"""The control-plane state PI keeps beside the target, per loaded program.

PI (and so simple_switch_grpc) remembers what the target does not: entry metadata, how
multicast replicas were spelled, clone sessions.  A ``Pipeline`` is one committed or saved
program with that state and the ``SwitchTarget`` that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4.v1 import p4runtime_pb2

from p4reduce.p4rt import P4InfoIndex

from ..interface import SwitchTarget
from .binding import JsonBinding

# Normalised match key, one item per P4Info match field (P4Info order):
#   exact int; lpm (value, prefix_len); ternary (value, mask); range (lo, hi);
#   optional (value, is_wildcard).  The key of an entry is (fields, priority); the default
#   entry of a table has the key DEFAULT_KEY.
MatchKey = tuple[tuple[Any, ...], int]
DEFAULT_KEY: MatchKey = ((), -1)


@dataclass
class EntryMeta:
    """What PI's TableInfoStore keeps per entry and the target does not."""

    controller_metadata: int = 0
    metadata: bytes = b""
    idle_timeout_ns: int = 0


@dataclass(frozen=True)
class ReplicaPort:
    """PI's ReplicaPort: the port, and how the controller spelled it (for read symmetry)."""

    kind: str  # "egress_port" or "port"
    port: int
    num_bytes: int = 0


@dataclass
class Pipeline:
    """One committed or saved program and the state PI keeps for it."""

    info: P4InfoIndex
    config: p4runtime_pb2.ForwardingPipelineConfig
    switch: SwitchTarget
    binding: JsonBinding
    entries: dict[int, dict[MatchKey, EntryMeta]] = field(default_factory=dict)
    # PI's PreMcMgr: group id -> rid -> replicas (what Read returns), and the bmv2 node
    # handle PI created for each (group id -> rid -> handle in the device's BmPre)
    mc_groups: dict[int, dict[int, set[ReplicaPort]]] = field(default_factory=dict)
    mc_nodes: dict[int, dict[int, int]] = field(default_factory=dict)
    clone_sessions: dict[int, p4runtime_pb2.CloneSessionEntry] = field(default_factory=dict)


def out_entity(out: list[p4runtime_pb2.Entity]) -> p4runtime_pb2.Entity:
    """A new Entity appended to a Read's answer."""
    ent = p4runtime_pb2.Entity()
    out.append(ent)
    return ent
