"""The packet replication engine: multicast groups and clone sessions.

Two layers, as in simple_switch_grpc: ``BmPre`` is bmv2's replication engine
(McSimplePre), owned by the device and outliving pipelines; ``Pipeline.mc_groups`` /
``mc_nodes`` are PI's PreMcMgr view of it, fresh with every pipeline.  Writes go through
PI's checks, then change ``BmPre``, then push the changed group to every live target
(``SwitchTarget.mc_group_set_nodes``), so that the targets replicate exactly as bmv2's
node list says.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

from p4.v1 import p4runtime_pb2

from ..interface import SwitchTarget
from .state import Pipeline, ReplicaPort, out_entity
from .status import Code, P4RTError, target_call

Update = p4runtime_pb2.Update
# PI PreMcMgr::first_reserved_group_id(): group ids above are kept for clone sessions.
FIRST_RESERVED_GROUP_ID = 1 << 15
# PI PreCloneMgr kMinCloneSessionId / kMaxCloneSessionId.
MIN_CLONE_SESSION_ID, MAX_CLONE_SESSION_ID = 1, 32768
# Largest port a multicast replica may name (the interpreter's, and v1model's, 9 bits).
MAX_REPLICA_PORT = 511


class BmPre:
    """bmv2's packet replication engine (McSimplePre) as PI drives it.

    It belongs to the switch process, not to a pipeline: a new pipeline gives P4Runtime a
    fresh, empty view of multicast groups (PI creates a new PreMcMgr) while the groups
    already programmed keep replicating.  Re-creating such a group appends new L1 nodes to
    the surviving ones (McSimplePre::mc_mgrp_create does not replace an existing mgid), and
    deleting it through P4Runtime removes the whole mgid.  Replication order: L1 nodes in
    attach order, ports ascending inside a node (McSimplePre::replicate).
    """

    def __init__(self) -> None:
        self.groups: dict[int, list[int]] = {}  # mgid -> L1 handles
        self.nodes: dict[int, tuple[int, frozenset[int]]] = {}  # handle -> (rid, ports)

    def group_create(self, gid: int) -> None:
        self.groups.setdefault(gid, [])

    def group_destroy(self, gid: int) -> None:
        self.groups.pop(gid, None)

    def node_create(self, rid: int, ports: Iterable[int]) -> int:
        handle = next(h for h in itertools.count() if h not in self.nodes)  # lowest free
        self.nodes[handle] = (rid, frozenset(ports))
        return handle

    def node_update(self, handle: int, ports: Iterable[int]) -> None:
        rid, _ = self.nodes[handle]
        self.nodes[handle] = (rid, frozenset(ports))

    def attach(self, gid: int, handle: int) -> None:
        self.groups[gid].append(handle)

    def node_destroy(self, handle: int) -> None:
        for l1_list in self.groups.values():
            if handle in l1_list:
                l1_list.remove(handle)
        del self.nodes[handle]

    def l1_nodes(self, gid: int) -> list[tuple[int, list[int]]]:
        """The group's L1 nodes (rid, ports) in replication order (Switch.mc_group_set_nodes)."""
        return [(self.nodes[h][0], sorted(self.nodes[h][1])) for h in self.groups.get(gid, [])]

    def replicas(self, gid: int) -> list[tuple[int, int]]:
        """(port, rid) in bmv2's replication order."""
        out: list[tuple[int, int]] = []
        for handle in self.groups.get(gid, []):
            rid, ports = self.nodes[handle]
            out.extend((port, rid) for port in sorted(ports))
        return out

    def push(self, gid: int, targets: Iterable[SwitchTarget], what: str) -> None:
        """Make every target replicate group ``gid`` as this engine holds it."""
        for sw in targets:
            if gid in self.groups:
                target_call(
                    f"Error when {what} in target",
                    sw.mc_group_set_nodes,
                    gid,
                    self.l1_nodes(gid),
                    unsupported=what,
                )
            elif gid in sw.mc_groups():
                target_call(
                    f"Error when {what} in target", sw.mc_group_delete, gid, unsupported=what
                )

    def restore(self, target: SwitchTarget) -> None:
        """Load every group into a new pipeline's target (the PRE survives the change)."""
        for gid in self.groups:
            target_call(
                "Error when restoring multicast group in target",
                target.mc_group_set_nodes,
                gid,
                self.l1_nodes(gid),
                unsupported="restoring multicast group",
            )


def sorted_replicas(nodes: dict[int, set[ReplicaPort]]) -> list[tuple[int, ReplicaPort]]:
    """Deterministic order (rid, then port); PI's order is that of an unordered_map, which the
    P4Runtime spec allows to differ from the write order anyway."""
    out = []
    for rid in sorted(nodes):
        for rp in sorted(nodes[rid], key=lambda r: (r.kind, r.port, r.num_bytes)):
            out.append((rid, rp))
    return out


def _add_replica(replicas: Any, rid: int, rp: ReplicaPort) -> None:
    r = replicas.add()
    if rp.kind == "egress_port":
        r.egress_port = rp.port
    else:
        r.port = rp.port.to_bytes(rp.num_bytes, "big")
    r.instance = rid


def _make_group(replicas: Iterable[p4runtime_pb2.Replica]) -> dict[int, set[ReplicaPort]]:
    """PI PreMcMgr::make_new_group."""
    nodes: dict[int, set[ReplicaPort]] = {}
    for r in replicas:
        kind = r.WhichOneof("port_kind")
        if kind == "egress_port":
            rp = ReplicaPort("egress_port", r.egress_port)
        elif kind == "port":
            raw = bytes(r.port)
            if not raw:
                raise P4RTError(Code.INVALID_ARGUMENT, "Port must not be the empty string")
            if len(raw) > 4:
                raise P4RTError(
                    Code.UNIMPLEMENTED,
                    f"Got port of {len(raw)} bytes, but only 4 bytes are supported",
                )
            value = int.from_bytes(raw, "big")
            if value == 0 or value >= 1 << 31:
                raise P4RTError(Code.INVALID_ARGUMENT, "Port must be non-negative.")
            rp = ReplicaPort("port", value, len(raw))
        else:
            raise P4RTError(Code.INVALID_ARGUMENT, "Missing port in multicast group replica")
        node = nodes.setdefault(r.instance, set())
        if rp in node:
            raise P4RTError(Code.INVALID_ARGUMENT, "Duplicate replica in multicast group")
        node.add(rp)
    return nodes


def _check_target_replicas(nodes: dict[int, set[ReplicaPort]], what: str) -> None:
    """What the target cannot hold fails before any state changes (PI would undo its
    partial work with cleanup tasks; the answer is the same)."""
    for rid, ports in nodes.items():
        if rid > 0xFFFF or any(rp.port > MAX_REPLICA_PORT for rp in ports):
            raise P4RTError(
                Code.UNKNOWN,
                f"Error when {what} in target (rid {rid} or a port above {MAX_REPLICA_PORT})",
            )


# -- writes ------------------------------------------------------------------------------


def pre_write(
    pl: Pipeline,
    utype: int,
    entry: p4runtime_pb2.PacketReplicationEngineEntry,
    pre: BmPre,
    targets: Sequence[SwitchTarget],
) -> None:
    """``targets``: every live target (active and saved pipeline share bmv2's PRE)."""
    which = entry.WhichOneof("type")
    if which == "multicast_group_entry":
        _mc_write(pl, utype, entry.multicast_group_entry, pre, targets)
    elif which == "clone_session_entry":
        _clone_write(pl, utype, entry.clone_session_entry)
    else:
        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid PRE operation")


def _mc_write(
    pl: Pipeline,
    utype: int,
    g: p4runtime_pb2.MulticastGroupEntry,
    pre: BmPre,
    targets: Sequence[SwitchTarget],
) -> None:
    """PI PreMcMgr::group_create / group_modify / group_delete on bmv2's PRE."""
    gid = g.multicast_group_id
    if gid == 0:
        raise P4RTError(Code.INVALID_ARGUMENT, "0 is not a valid group id")
    if gid >= FIRST_RESERVED_GROUP_ID:
        raise P4RTError(Code.OUT_OF_RANGE, "Group id value is too high")
    if utype == Update.UNSPECIFIED:
        raise P4RTError(Code.INVALID_ARGUMENT, "Update type is not set")
    if utype == Update.INSERT:
        if gid in pl.mc_groups:
            raise P4RTError(Code.ALREADY_EXISTS, "Multicast group already exists")
        nodes = _make_group(g.replicas)
        what = "creating multicast group"
        _check_target_replicas(nodes, what)
        pre.group_create(gid)
        handles = {}
        for rid in sorted(nodes):
            handles[rid] = pre.node_create(rid, {rp.port for rp in nodes[rid]})
            pre.attach(gid, handles[rid])
    elif utype == Update.MODIFY:
        if gid not in pl.mc_groups:
            raise P4RTError(Code.NOT_FOUND, "Multicast group does not exist")
        nodes = _make_group(g.replicas)
        what = "modifying multicast group"
        _check_target_replicas(nodes, what)
        handles = _modify_nodes(pre, gid, nodes, pl.mc_groups[gid], pl.mc_nodes[gid])
    elif utype == Update.DELETE:
        if gid not in pl.mc_groups:
            raise P4RTError(Code.NOT_FOUND, "Multicast group does not exist")
        for handle in pl.mc_nodes[gid].values():
            pre.node_destroy(handle)
        pre.group_destroy(gid)
        del pl.mc_groups[gid], pl.mc_nodes[gid]
        pre.push(gid, targets, "deleting multicast group")
        return
    else:
        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid update type")
    pl.mc_groups[gid], pl.mc_nodes[gid] = nodes, handles
    pre.push(gid, targets, what)


def _modify_nodes(
    pre: BmPre,
    gid: int,
    nodes: dict[int, set[ReplicaPort]],
    old_nodes: dict[int, set[ReplicaPort]],
    old_handles: dict[int, int],
) -> dict[int, int]:
    """PI group_modify: keep the node of a rid that stays (updated if its ports changed),
    create nodes for new rids, destroy those of rids that went away."""
    old_handles = dict(old_handles)
    handles = {}
    for rid in sorted(nodes):
        ports = {rp.port for rp in nodes[rid]}
        if rid in old_handles:
            handles[rid] = old_handles.pop(rid)
            if nodes[rid] != old_nodes[rid]:
                pre.node_update(handles[rid], ports)
        else:
            handles[rid] = pre.node_create(rid, ports)
            pre.attach(gid, handles[rid])
    for handle in old_handles.values():
        pre.node_destroy(handle)
    return handles


def _clone_write(pl: Pipeline, utype: int, s: p4runtime_pb2.CloneSessionEntry) -> None:
    sid = s.session_id
    if sid == 0:
        raise P4RTError(Code.INVALID_ARGUMENT, "0 is not a valid session id")
    if utype == Update.UNSPECIFIED:
        raise P4RTError(Code.INVALID_ARGUMENT, "Update type is not set")
    if utype not in (Update.INSERT, Update.MODIFY, Update.DELETE):
        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid update type")
    if not MIN_CLONE_SESSION_ID <= sid < MAX_CLONE_SESSION_ID:
        raise P4RTError(Code.INVALID_ARGUMENT, "Clone session id out-of-range")
    if utype == Update.DELETE:
        if sid not in pl.clone_sessions:
            raise P4RTError(Code.NOT_FOUND, "Clone session id does not exist")
        target_call(
            "Error when resetting clone session in target",
            pl.switch.clone_session_set,
            sid,
            [],
            unsupported="resetting clone session",
        )
        del pl.clone_sessions[sid]
        return
    if utype == Update.INSERT and sid in pl.clone_sessions:
        raise P4RTError(Code.ALREADY_EXISTS, "Clone session id already exists")
    if utype == Update.MODIFY and sid not in pl.clone_sessions:
        raise P4RTError(Code.NOT_FOUND, "Clone session id does not exist")
    nodes = _make_group(s.replicas)
    if s.class_of_service != 0:
        raise P4RTError(Code.UNIMPLEMENTED, "COS for clone sessions not supported yet")
    if s.packet_length_bytes != 0:
        raise P4RTError(
            Code.UNIMPLEMENTED, "softswitch does not truncate clones (packet_length_bytes)"
        )
    target_call(
        "Error when creating clone session in target",
        pl.switch.clone_session_set,
        sid,
        [(rp.port, rid) for rid, rp in sorted_replicas(nodes)],
        unsupported="creating clone session",
    )
    stored = p4runtime_pb2.CloneSessionEntry()
    stored.session_id = sid
    stored.class_of_service = s.class_of_service
    stored.packet_length_bytes = s.packet_length_bytes
    for rid, rp in sorted_replicas(nodes):
        _add_replica(stored.replicas, rid, rp)
    pl.clone_sessions[sid] = stored


# -- reads -------------------------------------------------------------------------------


def pre_read(
    pl: Pipeline, entry: p4runtime_pb2.PacketReplicationEngineEntry, out: list[p4runtime_pb2.Entity]
) -> None:
    which = entry.WhichOneof("type")
    if which == "multicast_group_entry":
        gid = entry.multicast_group_entry.multicast_group_id
        if gid >= FIRST_RESERVED_GROUP_ID:
            raise P4RTError(Code.OUT_OF_RANGE, "Group id value is too high")
        if gid != 0 and gid not in pl.mc_groups:
            raise P4RTError(Code.NOT_FOUND, "Multicast group does not exist")
        for g in [gid] if gid else sorted(pl.mc_groups):
            group = out_entity(out).packet_replication_engine_entry.multicast_group_entry
            group.multicast_group_id = g
            for rid, rp in sorted_replicas(pl.mc_groups[g]):
                _add_replica(group.replicas, rid, rp)
    elif which == "clone_session_entry":
        sid = entry.clone_session_entry.session_id
        if sid != 0 and sid not in pl.clone_sessions:
            raise P4RTError(Code.NOT_FOUND, "Clone session id does not exist")
        for s in [sid] if sid else sorted(pl.clone_sessions):
            out_entity(out).packet_replication_engine_entry.clone_session_entry.CopyFrom(
                pl.clone_sessions[s]
            )
    else:
        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid PRE operation")
