"""P4Runtime server for softswitch: the same wire behaviour as simple_switch_grpc.

CI has no bmv2, so the controller talks to softswitch exactly as it talks to
simple_switch_grpc; wherever the two can be told apart, softswitch is wrong.  The behaviour
here therefore mirrors p4lang/PI (proto/server/pi_server.cpp for the service, arbitration
and stream; proto/frontend/src/device_mgr.cpp and friends for each entity), which is what
simple_switch_grpc runs, down to the status codes and messages.  Deliberate differences are
listed in docs/softswitch_server.md, each with its reason.

Layout:

* ``Pipeline``   one loaded program: P4Info index, bmv2 JSON, a Switch, and the control-plane
                 state PI keeps beside the target (entry metadata, multicast groups, clone
                 sessions);
* ``Device``     the device behind one device id: the active pipeline (data plane), an
                 optional saved one (VERIFY_AND_SAVE, control plane until COMMIT), every
                 Write/Read/Set/Get, and the packet path including the CPU port;
* ``Arbitration`` StreamChannel connections per device id and primary election;
* ``P4RuntimeServicer`` / ``P4RuntimeServer``  the gRPC glue.
"""
from __future__ import annotations

import itertools
import logging
import queue
import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2, p4runtime_pb2_grpc

from softswitch.p4info import (
    ActionScope, CodecError, JsonBinding, MatchType, P4Ids, P4InfoError, P4InfoIndex,
    TableInfo, bind_to_json, bytes_to_int, int_to_bytes, nbytes, parse_device_config,
)

log = logging.getLogger("softswitch.p4runtime")

# What PI (and so simple_switch_grpc) reports in CapabilitiesResponse (pi_server.cpp).
P4RUNTIME_API_VERSION = "1.3.0"
# PI: "ALL-sswitch-p4org" is the error space of every p4.v1.Error it reports.
ERROR_SPACE = "ALL-sswitch-p4org"
# PI pi_server.cpp DeviceState::max_connections.
MAX_CONNECTIONS = 16
# PI PreMcMgr::first_reserved_group_id(): group ids above are kept for clone sessions.
FIRST_RESERVED_GROUP_ID = 1 << 15
# PI PreCloneMgr kMinCloneSessionId / kMaxCloneSessionId.
MIN_CLONE_SESSION_ID, MAX_CLONE_SESSION_ID = 1, 32768
# bmv2's PI layer inverts priorities around INT_MAX; a larger one is a target error.
BM_MAX_PRIORITY = (1 << 31) - 1
# Largest port a multicast replica may name (the interpreter's, and v1model's, 9 bits).
MAX_REPLICA_PORT = 511
# PacketIns queued for a primary that does not read its stream are dropped beyond this.
MAX_PENDING_STREAM_MESSAGES = 4096

Code = code_pb2
SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetType = p4runtime_pb2.GetForwardingPipelineConfigRequest
Update = p4runtime_pb2.Update


class P4RTError(Exception):
    """A failure with the canonical google.rpc code and message PI would produce."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_status(self) -> status_pb2.Status:
        return status_pb2.Status(code=self.code, message=self.message)


def _invalid_p4_id() -> P4RTError:
    return P4RTError(Code.INVALID_ARGUMENT, "Invalid P4 id")


def _sw_error_name(exc: BaseException) -> str:
    return type(exc).__name__


def _is_unsupported(exc: BaseException) -> bool:
    """UnsupportedConstruct from softswitch.errors (checked by name so that a fake Switch in
    unit tests needs no import of the interpreter)."""
    return any(c.__name__ == "UnsupportedConstruct" for c in type(exc).__mro__)


# -- control-plane state beside the target -------------------------------------------------

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
    switch: Any  # softswitch.switch.Switch (or a stand-in with the same interface)
    binding: JsonBinding
    entries: dict[int, dict[MatchKey, EntryMeta]] = field(default_factory=dict)
    # PI's PreMcMgr: group id -> rid -> replicas (what Read returns), and the bmv2 node
    # handle PI created for each (group id -> rid -> handle in the device's BmPre)
    mc_groups: dict[int, dict[int, set[ReplicaPort]]] = field(default_factory=dict)
    mc_nodes: dict[int, dict[int, int]] = field(default_factory=dict)
    clone_sessions: dict[int, p4runtime_pb2.CloneSessionEntry] = field(default_factory=dict)


def _sorted_replicas(nodes: dict[int, set[ReplicaPort]]) -> list[tuple[int, ReplicaPort]]:
    """Deterministic order (rid, then port); PI's order is that of an unordered_map, which the
    P4Runtime spec allows to differ from the write order anyway."""
    out = []
    for rid in sorted(nodes):
        for rp in sorted(nodes[rid], key=lambda r: (r.kind, r.port, r.num_bytes)):
            out.append((rid, rp))
    return out


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
        self.groups: dict[int, list[int]] = {}              # mgid -> L1 handles
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
        out = []
        for handle in self.groups.get(gid, []):
            rid, ports = self.nodes[handle]
            out.extend((port, rid) for port in sorted(ports))
        return out


class Device:
    """The device behind one device id: pipelines, P4Runtime entities, and the packet path.

    Control-plane calls are serialised by one lock (PI's AccessArbitration allows some
    concurrency, but the observable result of a batch is the same).  The data plane does not
    take that lock: it uses whichever pipeline is active when a frame arrives, as bmv2 does
    across a config swap.
    """

    def __init__(self, *, device_id: int = 1, cpu_port: int | None = None, trace: bool = False,
                 switch_factory: Callable[[], Any] | None = None) -> None:
        if cpu_port is not None and cpu_port <= 0:
            raise ValueError("cpu port must be a positive port number (0 is not valid, as "
                             "for simple_switch_grpc --cpu-port)")
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.trace = trace
        self._switch_factory = switch_factory or self._default_switch_factory
        self._lock = threading.RLock()
        self.active: Pipeline | None = None   # data plane (and control plane if no saved one)
        self.saved: Pipeline | None = None    # VERIFY_AND_SAVE, waiting for COMMIT
        # PI creates its DeviceMgr on the first SetForwardingPipelineConfig, whatever its
        # outcome; before that Read/Write/Get answer FAILED_PRECONDITION, after it Get
        # answers an empty config.
        self.mgr_created = False
        # Set when the first pipeline is committed, never cleared.  bmv2 starts reading its
        # ports only then (SwitchWContexts::start_and_return waits for config_loaded): frames
        # arriving earlier wait in the kernel and are processed by the first pipeline.
        # AfPacketPorts does the same.
        self.first_commit = threading.Event()
        self.pre = BmPre()  # outlives pipelines, as bmv2's PRE does
        self.transmit: Callable[[int, bytes], None] | None = None
        self.packet_in_sink: Callable[[p4runtime_pb2.PacketIn], None] | None = None
        self.counters: dict[str, int] = {
            "rx_frames": 0, "no_pipeline_drops": 0, "process_errors": 0, "tx_frames": 0,
            "tx_unattached": 0, "packet_in": 0, "packet_in_dropped": 0, "packet_out": 0,
            "packet_out_dropped": 0,
        }
        self._counters_lock = threading.Lock()

    def _default_switch_factory(self) -> Any:
        from softswitch.switch import Switch  # imported late: the interpreter is heavy
        return Switch(device_id=self.device_id, cpu_port=self.cpu_port, trace=self.trace)

    def _count(self, name: str, n: int = 1) -> None:
        with self._counters_lock:
            self.counters[name] = self.counters.get(name, 0) + n

    @property
    def control(self) -> Pipeline | None:
        """The pipeline Write/Read/Get address: PI switches its P4Info on VERIFY_AND_SAVE,
        and bmv2 sends runtime calls to the loaded-but-not-swapped config."""
        return self.saved if self.saved is not None else self.active

    # -- data plane ----------------------------------------------------------------------

    def receive(self, ingress_port: int, frame: bytes) -> None:
        """A frame arrived on a port: run it through the active pipeline and send what comes
        out.  Never raises: ports call this from their receive threads."""
        self._count("rx_frames")
        pl = self.active
        if pl is None:
            self._count("no_pipeline_drops")
            return
        try:
            outs = pl.switch.process(ingress_port, frame)
        except Exception:  # the Switch promises not to raise for a bad frame; be safe anyway
            self._count("process_errors")
            log.exception("Switch.process raised for a %d-byte frame on port %d",
                          len(frame), ingress_port)
            return
        for port, out in outs:
            if self.cpu_port is not None and port == self.cpu_port:
                self._packet_in(out)
            elif self.transmit is not None:
                self._count("tx_frames")
                self.transmit(port, out)
            else:
                self._count("tx_unattached")

    def _packet_in(self, frame: bytes) -> None:
        """A frame egressed on the CPU port: strip the packet_in header (PI packet_io_mgr)."""
        pl = self.control
        msg = p4runtime_pb2.PacketIn()
        codec = pl.info.packet_in if pl is not None else None
        if codec is not None:
            decoded = codec.decode(frame)
            if decoded is None:  # shorter than the header: PI drops it silently
                self._count("packet_in_dropped")
                return
            metadata, payload = decoded
            msg.payload = payload
            for mid, value in metadata:
                msg.metadata.add(metadata_id=mid, value=value)
        else:
            msg.payload = frame
        sink = self.packet_in_sink
        if sink is None:
            self._count("packet_in_dropped")
            return
        self._count("packet_in")
        sink(msg)

    def packet_out(self, packet: p4runtime_pb2.PacketOut) -> None:
        """A PacketOut from the primary: prepend the packet_out header and inject the frame
        at the CPU port.  Errors are dropped silently, as PI does with its default stream
        error reporting (DISABLED)."""
        pl = self.control
        if pl is None:
            self._count("packet_out_dropped")
            return
        codec = pl.info.packet_out
        try:
            if codec is not None:
                frame = codec.encode([(m.metadata_id, m.value) for m in packet.metadata],
                                     packet.payload)
            elif len(packet.metadata) > 0:
                raise CodecError("Unexpected metadata in PacketOut message")
            else:
                frame = packet.payload
        except CodecError as exc:
            self._count("packet_out_dropped")
            log.warning("PacketOut dropped: %s", exc)
            return
        if self.cpu_port is None:  # bmv2: PI_STATUS_PACKETOUT_SEND_ERROR
            self._count("packet_out_dropped")
            log.warning("PacketOut dropped: no --cpu-port configured")
            return
        self._count("packet_out")
        self.receive(self.cpu_port, frame)

    # -- SetForwardingPipelineConfig / GetForwardingPipelineConfig ------------------------

    def set_pipeline(self, action: int, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        """PI DeviceMgr::pipeline_config_set, with bmv2's load/swap behind it.

        On any error the previous pipeline stays, with its state.
        """
        with self._lock:
            self.mgr_created = True
            if action == SetAction.UNSPECIFIED:
                raise P4RTError(Code.INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")
            if action not in (SetAction.VERIFY, SetAction.VERIFY_AND_SAVE,
                              SetAction.VERIFY_AND_COMMIT, SetAction.COMMIT,
                              SetAction.RECONCILE_AND_COMMIT):
                return  # PI: an action value it does not know matches no branch -> OK
            info = None
            if action != SetAction.COMMIT:
                try:
                    info = P4InfoIndex.from_proto(config.p4info)
                except P4InfoError as exc:
                    raise P4RTError(Code.UNKNOWN, f"Error when importing p4info: {exc}")
            if action == SetAction.VERIFY:
                return  # PI only imports the P4Info for VERIFY
            if action == SetAction.COMMIT:
                if self.saved is None:  # bmv2 swap_configs: NO_ONGOING_SWAP
                    raise P4RTError(Code.UNKNOWN, "Error in second phase of device update "
                                                  "(no saved config to commit)")
                self.active, self.saved = self.saved, None
                self.first_commit.set()
                log.info("device %d: committed the saved pipeline", self.device_id)
                return
            assert info is not None
            if self.saved is not None:  # bmv2 load_new_config: ONGOING_SWAP
                raise P4RTError(Code.UNKNOWN, "Error in first phase of device update (a config "
                                              "saved with VERIFY_AND_SAVE awaits COMMIT)")
            saved_state = None
            if action == SetAction.RECONCILE_AND_COMMIT and self.control is not None:
                saved_state = self._save_forwarding_state(self.control)
            new = self._build_pipeline(info, config)
            if saved_state is not None:
                errors = self._write_batch(new, [Update(type=Update.INSERT, entity=e)
                                                 for e in saved_state])
                failed = [f"{i}: {e.message}" for i, e in enumerate(errors)
                          if e is not None]
                if failed:
                    raise P4RTError(Code.UNKNOWN, "Error when reconciling config ("
                                    + "; ".join(failed[:5]) + ")")
            if action == SetAction.VERIFY_AND_SAVE:
                self.saved = new
                log.info("device %d: pipeline saved, waiting for COMMIT", self.device_id)
            else:
                self.active = new
                self.first_commit.set()
                log.info("device %d: pipeline committed (%d tables)", self.device_id,
                         len(info.tables))

    def _build_pipeline(self, info: P4InfoIndex,
                        config: p4runtime_pb2.ForwardingPipelineConfig) -> Pipeline:
        """Parse, cross-check and load a new program into a fresh Switch.

        bmv2 1.15.5 gives no usable answer for a bad JSON (a syntax error throws out of
        jsoncpp through PI and kills the process; a structural error is ignored by
        Context::load_new_config and a half-built config is swapped in), so the codes here
        follow the P4Runtime spec: INVALID_ARGUMENT for a config that is wrong,
        UNIMPLEMENTED for one softswitch cannot run.
        """
        raw = bytes(config.p4_device_config)
        try:
            doc = parse_device_config(raw)
        except ValueError as exc:
            raise P4RTError(Code.INVALID_ARGUMENT, str(exc))
        # The interpreter validates the JSON's structure (with the better messages) before
        # the P4Info is bound to it.
        switch = self._switch_factory()
        try:
            switch.load_pipeline(raw)
        except Exception as exc:
            if _is_unsupported(exc):
                raise P4RTError(Code.UNIMPLEMENTED,
                                f"softswitch cannot run this program: {exc}")
            if any(c.__name__ == "PipelineError" for c in type(exc).__mro__):
                raise P4RTError(Code.INVALID_ARGUMENT, f"invalid bmv2 JSON: {exc}")
            log.exception("Switch.load_pipeline failed unexpectedly")
            raise P4RTError(Code.INTERNAL, f"softswitch failed to load the program: "
                                           f"{_sw_error_name(exc)}: {exc}")
        try:
            binding = bind_to_json(info, doc)
        except ValueError as exc:
            raise P4RTError(Code.INVALID_ARGUMENT, str(exc))
        for gid in self.pre.groups:  # the PRE survives the pipeline change
            self._switch_call(switch.mc_group_set_nodes, "restoring multicast group", gid,
                              self.pre.l1_nodes(gid))
        stored = p4runtime_pb2.ForwardingPipelineConfig()
        stored.CopyFrom(config)
        pl = Pipeline(info=info, config=stored, switch=switch, binding=binding)
        for t_id in info.tables:
            # PI adds every table's default entry to its store at p4_change.
            pl.entries[t_id] = {DEFAULT_KEY: EntryMeta()}
        return pl

    def get_pipeline(self, response_type: int) -> p4runtime_pb2.ForwardingPipelineConfig:
        """PI DeviceMgr::pipeline_config_get."""
        with self._lock:
            out = p4runtime_pb2.ForwardingPipelineConfig()
            pl = self.control
            if pl is None:
                return out  # PI: no config set yet -> an empty config, OK
            cfg = pl.config
            if response_type == GetType.ALL:
                out.p4info.CopyFrom(cfg.p4info)
                out.p4_device_config = cfg.p4_device_config
            elif response_type == GetType.COOKIE_ONLY:
                pass
            elif response_type == GetType.P4INFO_AND_COOKIE:
                out.p4info.CopyFrom(cfg.p4info)
            elif response_type == GetType.DEVICE_CONFIG_AND_COOKIE:
                out.p4_device_config = cfg.p4_device_config
            else:
                raise P4RTError(Code.INVALID_ARGUMENT,
                                "Invalid response_type in GetForwardingPipelineConfigRequest")
            if cfg.HasField("cookie"):
                out.cookie.CopyFrom(cfg.cookie)
            return out

    def _save_forwarding_state(self, pl: Pipeline) -> list[p4runtime_pb2.Entity]:
        """PI save_forwarding_state: read action profiles, tables, meters, counters (in that
        order) so RECONCILE_AND_COMMIT can replay them as INSERTs into the new pipeline."""
        entities = []
        for make in (lambda e: e.action_profile_member.SetInParent(),
                     lambda e: e.action_profile_group.SetInParent(),
                     lambda e: e.table_entry.SetInParent(),
                     lambda e: e.meter_entry.SetInParent(),
                     lambda e: e.counter_entry.SetInParent()):
            ent = p4runtime_pb2.Entity()
            make(ent)
            entities.append(ent)
        out: list[p4runtime_pb2.Entity] = []
        for ent in entities:
            self._read_one(pl, ent, out)
        return out

    # -- Write -----------------------------------------------------------------------------

    def write(self, request: p4runtime_pb2.WriteRequest) -> list[P4RTError | None]:
        """PI DeviceMgr::write_: one result per update, in order (None = OK)."""
        with self._lock:
            pl = self.control
            if pl is None:
                raise P4RTError(Code.FAILED_PRECONDITION,
                                "No forwarding pipeline config set for this device")
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RTError(Code.UNIMPLEMENTED,
                                "Support for atomic write modes has not been implemented yet")
            return self._write_batch(pl, request.updates)

    def _write_batch(self, pl: Pipeline,
                     updates: Iterable[p4runtime_pb2.Update]) -> list[P4RTError | None]:
        results: list[P4RTError | None] = []
        for upd in updates:
            try:
                self._write_one(pl, upd.type, upd.entity)
                results.append(None)
            except P4RTError as exc:
                log.info("write update %d failed: %s (%s)", len(results),
                         code_pb2.Code.Name(exc.code), exc.message)
                results.append(exc)
        return results

    def _write_one(self, pl: Pipeline, utype: int, entity: p4runtime_pb2.Entity) -> None:
        which = entity.WhichOneof("entity")
        info = pl.info
        if which == "table_entry":
            self._table_write(pl, utype, entity.table_entry)
        elif which == "packet_replication_engine_entry":
            self._pre_write(pl, utype, entity.packet_replication_engine_entry)
        elif which == "counter_entry":
            self._counter_write(pl, utype, entity.counter_entry)
        elif which == "register_entry":
            # As PI: simple_switch_grpc has no register writes; nobody should design around one.
            raise P4RTError(Code.UNIMPLEMENTED, "Register writes are not supported yet")
        elif which == "value_set_entry":
            raise P4RTError(Code.UNIMPLEMENTED, "ValueSet writes are not supported yet")
        elif which == "extern_entry":
            raise P4RTError(Code.UNIMPLEMENTED, "")
        elif which in ("action_profile_member", "action_profile_group"):
            ap_id = getattr(entity, which).action_profile_id
            if not info.is_valid_id(ap_id, P4Ids.ACTION_PROFILE):
                raise _invalid_p4_id()
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement action profiles")
        elif which == "meter_entry":
            if not info.is_valid_id(entity.meter_entry.meter_id, P4Ids.METER):
                raise _invalid_p4_id()
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement meters")
        elif which in ("direct_counter_entry", "direct_meter_entry"):
            sub = getattr(entity, which)
            label = "DirectCounterEntry" if which == "direct_counter_entry" else "DirectMeterEntry"
            if not sub.HasField("table_entry"):
                raise P4RTError(Code.INVALID_ARGUMENT, f"Missing table_entry field in {label}")
            if not info.is_valid_id(sub.table_entry.table_id, P4Ids.TABLE):
                raise _invalid_p4_id()
            self._direct_resource_unsupported(pl, sub.table_entry.table_id,
                                              which == "direct_counter_entry")
        elif which == "digest_entry":
            if not info.is_valid_id(entity.digest_entry.digest_id, P4Ids.DIGEST):
                raise _invalid_p4_id()
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement digests")
        else:
            raise P4RTError(Code.UNKNOWN, "Incorrect entity type")

    @staticmethod
    def _direct_resource_unsupported(pl: Pipeline, table_id: int, counter: bool) -> None:
        t = pl.info.tables[table_id]
        prefix = P4Ids.DIRECT_COUNTER if counter else P4Ids.DIRECT_METER
        if not t.direct_resource(prefix):
            raise P4RTError(Code.INVALID_ARGUMENT, "Table has no direct counters" if counter
                            else "Table has no direct meters")
        raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement direct "
                        + ("counters" if counter else "meters"))

    # -- tables ----------------------------------------------------------------------------

    def _table_write(self, pl: Pipeline, utype: int, te: p4runtime_pb2.TableEntry) -> None:
        if not pl.info.is_valid_id(te.table_id, P4Ids.TABLE):
            raise _invalid_p4_id()
        if te.HasField("time_since_last_hit"):
            raise P4RTError(Code.INVALID_ARGUMENT,
                            "has_time_since_last_hit must not be set in WriteRequest")
        if utype == Update.UNSPECIFIED:
            raise P4RTError(Code.INVALID_ARGUMENT, "Update type is not set")
        if utype == Update.INSERT:
            self._table_insert(pl, te)
        elif utype == Update.MODIFY:
            self._table_modify(pl, te)
        elif utype == Update.DELETE:
            self._table_delete(pl, te)
        else:
            raise P4RTError(Code.INVALID_ARGUMENT, "Invalid update type")

    @staticmethod
    def _match_key(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> MatchKey:
        """PI construct_match_key: validate and normalise the match of a TableEntry."""
        if te.is_default_action:
            if len(te.match) > 0:
                raise P4RTError(Code.INVALID_ARGUMENT, "Non-empty key for default entry")
            if te.priority != 0:
                raise P4RTError(Code.INVALID_ARGUMENT, "Non-zero priority for default entry")
            return DEFAULT_KEY
        t = pl.info.tables[te.table_id]
        if len(te.match) > len(t.match_fields):
            raise P4RTError(Code.INVALID_ARGUMENT, "Too many fields in match key")
        fields: list[Any] = []
        matched = 0
        try:
            for mf_info in t.match_fields:
                mf = next((m for m in te.match if m.field_id == mf_info.id), None)
                w = mf_info.bitwidth
                mt = mf_info.match_type
                if mf is None:
                    if mt == MatchType.LPM:
                        fields.append((0, 0))
                    elif mt == MatchType.TERNARY:
                        fields.append((0, 0))
                    elif mt == MatchType.OPTIONAL:
                        fields.append((0, True))
                    elif mt == MatchType.RANGE:
                        fields.append((0, (1 << w) - 1))
                    else:
                        raise P4RTError(Code.INVALID_ARGUMENT,
                                        "Missing non-ternary field in match key")
                    continue
                matched += 1
                kind = mf.WhichOneof("field_match_type")
                if mt == MatchType.EXACT:
                    if kind != "exact":
                        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid match type")
                    fields.append(bytes_to_int(mf.exact.value, w))
                elif mt == MatchType.LPM:
                    if kind != "lpm":
                        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid match type")
                    value = bytes_to_int(mf.lpm.value, w)
                    plen = mf.lpm.prefix_len
                    if plen < 0:
                        raise P4RTError(Code.INVALID_ARGUMENT, "Prefix length cannot be < 0")
                    if plen > w:
                        raise P4RTError(Code.INVALID_ARGUMENT,
                                        "Prefix length cannot be > bitwidth")
                    if plen == 0:
                        raise P4RTError(Code.INVALID_ARGUMENT,
                                        "Invalid reprsentation of 'don't care' LPM match, "
                                        "omit match field instead of using a prefix length "
                                        "of 0")
                    # PI counts the prefix from the top of the byte-padded value, as bmv2
                    # does (common.cpp check_prefix_trailing_zeros).
                    trailing = nbytes(w) * 8 - plen
                    if trailing > 0 and value & ((1 << trailing) - 1):
                        raise P4RTError(Code.INVALID_ARGUMENT,
                                        "Invalid LPM value, incorrect number of trailing zeros")
                    fields.append((value, plen))
                elif mt == MatchType.TERNARY:
                    if kind != "ternary":
                        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid match type")
                    value = bytes_to_int(mf.ternary.value, w)
                    mask = bytes_to_int(mf.ternary.mask, w)
                    if not any(mf.ternary.mask):
                        raise P4RTError(Code.INVALID_ARGUMENT,
                                        "Invalid representation of 'don't care' ternary "
                                        "match, omit match field instead of using 0 mask")
                    if value & mask != value:
                        raise P4RTError(Code.INVALID_ARGUMENT,
                                        "Invalid ternary value, make sure value & mask == value")
                    fields.append((value, mask))
                elif mt == MatchType.RANGE:
                    if kind != "range":
                        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid match type")
                    lo = bytes_to_int(mf.range.low, w)
                    hi = bytes_to_int(mf.range.high, w)
                    raw_lo, raw_hi = bytes(mf.range.low), bytes(mf.range.high)
                    # PI judges "don't care" on the raw strings: low all zero and high all
                    # 0xff of the same length (match_key_helpers.cpp).
                    if not any(raw_lo) and raw_hi == b"\xff" * len(raw_lo):
                        raise P4RTError(Code.INVALID_ARGUMENT,
                                        "Invalid representation of 'don't care' range match, "
                                        "omit match field instead of using low=0 and "
                                        "high=2**bitwidth-1")
                    if lo > hi:
                        raise P4RTError(Code.INVALID_ARGUMENT,
                                        "Invalid range value, make sure low <= high")
                    fields.append((lo, hi))
                else:  # OPTIONAL
                    if kind != "optional":
                        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid match type")
                    fields.append((bytes_to_int(mf.optional.value, w), False))
        except CodecError as exc:
            raise P4RTError(Code.INVALID_ARGUMENT, str(exc))
        if matched != len(te.match):
            raise P4RTError(Code.INVALID_ARGUMENT, "Unknown field in match key")
        need = t.needs_priority
        if not need and te.priority > 0:
            raise P4RTError(Code.INVALID_ARGUMENT, "Non-zero priority for non-ternary match")
        if need and te.priority == 0:
            raise P4RTError(Code.INVALID_ARGUMENT, "Zero priority for ternary match")
        return tuple(fields), (te.priority if need else 0)

    @staticmethod
    def _validate_action(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
        """PI validate_action (INSERT and MODIFY)."""
        t = pl.info.tables[te.table_id]
        indirect = t.implementation_id != 0
        if indirect and te.is_default_action:
            raise P4RTError(Code.INVALID_ARGUMENT,
                            f"Cannot set / reset default action for indirect table {t.id}")
        if te.is_default_action and t.const_default_action_id:
            raise P4RTError(Code.PERMISSION_DENIED,
                            f"Cannot set / reset default action for table {t.id} which has a "
                            f"const default action")
        if not te.HasField("action"):
            return
        kind = te.action.WhichOneof("type")
        if indirect and kind == "action":
            raise P4RTError(Code.INVALID_ARGUMENT,
                            f"Cannot provide direct action for indirect table {t.id}")
        if not indirect and kind != "action":
            raise P4RTError(Code.INVALID_ARGUMENT,
                            f"Cannot provide indirect action for direct table {t.id}")
        if indirect:
            return
        aid = te.action.action.action_id
        if not pl.info.is_valid_id(aid, P4Ids.ACTION):
            raise _invalid_p4_id()
        scope = t.action_scopes.get(aid)
        if scope is None:
            raise P4RTError(Code.INVALID_ARGUMENT, "Invalid action for table")
        if scope == ActionScope.TABLE_ONLY and te.is_default_action:
            raise P4RTError(Code.PERMISSION_DENIED,
                            "Cannot use TABLE_ONLY action as default action")
        if scope == ActionScope.DEFAULT_ONLY and not te.is_default_action:
            raise P4RTError(Code.PERMISSION_DENIED,
                            "Cannot use DEFAULT_ONLY action in table entry")

    @staticmethod
    def _action_data(pl: Pipeline, table: TableInfo,
                     action: p4runtime_pb2.TableAction) -> tuple[str, list[int]]:
        """PI construct_action_data -> (JSON action name, params in JSON order)."""
        if table.implementation_id != 0:
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement action "
                                                "profiles / selectors")
        a = pl.info.actions[action.action.action_id]
        params = action.action.params
        if len(params) != len(a.params):
            raise P4RTError(Code.INVALID_ARGUMENT, "Unexpected number of action parameters")
        values: dict[int, int] = {}
        for p in params:
            info = a.param(p.param_id)
            if info is None:
                raise P4RTError(Code.INVALID_ARGUMENT, "Unknown action parameter")
            try:
                values[p.param_id] = bytes_to_int(p.value, info.bitwidth)
            except CodecError as exc:
                raise P4RTError(Code.INVALID_ARGUMENT, str(exc))
        if len(values) != len(a.params):
            raise P4RTError(Code.INVALID_ARGUMENT, "Duplicate action parameter")
        order = pl.binding.actions[a.id].json_param_order
        return a.name, [values[a.params[i].id] for i in order]

    @staticmethod
    def _direct_resources(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
        t = pl.info.tables[te.table_id]
        if te.HasField("meter_config"):
            if not t.direct_resource(P4Ids.DIRECT_METER):
                raise P4RTError(Code.INVALID_ARGUMENT, "Table has no direct meters")
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement direct meters")
        if te.HasField("counter_data"):
            if not t.direct_resource(P4Ids.DIRECT_COUNTER):
                raise P4RTError(Code.INVALID_ARGUMENT, "Table has no direct counters")
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement direct counters")

    @staticmethod
    def _validate_ttl(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
        t = pl.info.tables[te.table_id]
        if te.idle_timeout_ns < 0:
            raise P4RTError(Code.INVALID_ARGUMENT, "idle_timeout_ns must be a positive value")
        if te.idle_timeout_ns > 0 and not t.supports_idle_timeout:
            raise P4RTError(Code.INVALID_ARGUMENT,
                            "idle_timeout_ns must be set to 0 for tables which do not support "
                            "idle timeout")
        if te.idle_timeout_ns > 0:
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement idle timeout")

    @staticmethod
    def _to_switch_match(pl: Pipeline, t: TableInfo, key: MatchKey) -> list[Any]:
        """Normalised key (P4Info order) -> the Switch's match list (JSON key order)."""
        fields, _ = key
        out: list[Any] = []
        binding = pl.binding.tables[t.id]
        for i, json_type in zip(binding.json_key_order, binding.json_match_types):
            f = fields[i]
            mf = t.match_fields[i]
            if mf.match_type == MatchType.OPTIONAL:
                if json_type == "ternary":  # how p4c-bm2-ss writes an optional key
                    out.append((0, 0) if f[1] else (f[0], (1 << mf.bitwidth) - 1))
                else:
                    out.append(None if f[1] else f[0])
            else:
                out.append(f)
        return out

    @staticmethod
    def _switch_priority(t: TableInfo, key: MatchKey) -> int | None:
        """P4Runtime priority (higher wins) for the Switch, None where the table has none."""
        return key[1] if t.needs_priority else None

    def _table_insert(self, pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
        if te.is_default_action:
            raise P4RTError(Code.INVALID_ARGUMENT, "Cannot use INSERT for default entry")
        if not te.HasField("action"):
            raise P4RTError(Code.INVALID_ARGUMENT, "'action' field must be set")
        t = pl.info.tables[te.table_id]
        key = self._match_key(pl, te)
        self._validate_action(pl, te)
        action, params = self._action_data(pl, t, te.action)
        self._direct_resources(pl, te)
        self._validate_ttl(pl, te)
        store = pl.entries[t.id]
        if key in store:
            raise P4RTError(Code.ALREADY_EXISTS,
                            "Match entry exists, use MODIFY if you wish to change action")
        if key[1] < 0 or key[1] > BM_MAX_PRIORITY:
            raise P4RTError(Code.UNKNOWN, "Error when adding match entry to target "
                                          "(unsupported priority)")
        try:
            pl.switch.table_add(t.name, self._to_switch_match(pl, t, key), action, params,
                                self._switch_priority(t, key))
        except Exception as exc:
            raise P4RTError(Code.UNKNOWN, f"Error when adding match entry to target "
                                          f"({_sw_error_name(exc)}: {exc})")
        store[key] = EntryMeta(te.controller_metadata, bytes(te.metadata), te.idle_timeout_ns)

    def _table_modify(self, pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
        t = pl.info.tables[te.table_id]
        key = self._match_key(pl, te)
        self._validate_action(pl, te)
        action_data = None
        if te.HasField("action"):
            action_data = self._action_data(pl, t, te.action)
        elif not te.is_default_action:
            raise P4RTError(Code.INVALID_ARGUMENT,
                            "'action' field must be set for non-default entries")
        self._direct_resources(pl, te)
        self._validate_ttl(pl, te)
        meta = pl.entries[t.id].get(key)
        if meta is None:
            raise P4RTError(Code.NOT_FOUND, "Cannot find match entry")
        try:
            if te.is_default_action:
                if action_data is not None:
                    pl.switch.table_set_default(t.name, action_data[0], action_data[1])
                else:
                    pl.switch.table_reset_default(t.name)
            else:
                assert action_data is not None
                pl.switch.table_modify(t.name, self._to_switch_match(pl, t, key),
                                       action_data[0], action_data[1],
                                       self._switch_priority(t, key))
        except Exception as exc:
            raise P4RTError(Code.UNKNOWN, f"Error when modifying match entry in target "
                                          f"({_sw_error_name(exc)}: {exc})")
        if action_data is None:
            meta.controller_metadata, meta.metadata, meta.idle_timeout_ns = 0, b"", 0
        else:
            meta.controller_metadata = te.controller_metadata
            meta.metadata = bytes(te.metadata)
            meta.idle_timeout_ns = te.idle_timeout_ns

    def _table_delete(self, pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
        if te.is_default_action:
            raise P4RTError(Code.INVALID_ARGUMENT, "Cannot use DELETE for default entry")
        t = pl.info.tables[te.table_id]
        key = self._match_key(pl, te)
        store = pl.entries[t.id]
        if key not in store:
            raise P4RTError(Code.NOT_FOUND, "Cannot find match entry")
        try:
            pl.switch.table_delete(t.name, self._to_switch_match(pl, t, key),
                                   self._switch_priority(t, key))
        except Exception as exc:
            raise P4RTError(Code.UNKNOWN, f"Error when deleting match entry in target "
                                          f"({_sw_error_name(exc)}: {exc})")
        del store[key]

    # -- Read ------------------------------------------------------------------------------

    def read(self, request: p4runtime_pb2.ReadRequest
             ) -> tuple[list[p4runtime_pb2.Entity], P4RTError | None]:
        """PI DeviceMgr::read_: the entities read before the first error, and that error."""
        with self._lock:
            pl = self.control
            if pl is None:
                raise P4RTError(Code.FAILED_PRECONDITION,
                                "No forwarding pipeline config set for this device")
            out: list[p4runtime_pb2.Entity] = []
            for ent in request.entities:
                try:
                    self._read_one(pl, ent, out)
                except P4RTError as exc:
                    return out, exc
            return out, None

    def _read_one(self, pl: Pipeline, ent: p4runtime_pb2.Entity,
                  out: list[p4runtime_pb2.Entity]) -> None:
        which = ent.WhichOneof("entity")
        info = pl.info
        if which == "table_entry":
            te = ent.table_entry
            if te.table_id == 0:
                for t_id in info.tables:
                    self._table_read_one(pl, t_id, te, out)
            else:
                if not info.is_valid_id(te.table_id, P4Ids.TABLE):
                    raise _invalid_p4_id()
                self._table_read_one(pl, te.table_id, te, out)
        elif which == "packet_replication_engine_entry":
            self._pre_read(pl, ent.packet_replication_engine_entry, out)
        elif which == "counter_entry":
            self._counter_read(pl, ent.counter_entry, out)
        elif which == "register_entry":
            self._register_read(pl, ent.register_entry, out)
        elif which in ("action_profile_member", "action_profile_group"):
            ap_id = getattr(ent, which).action_profile_id
            if ap_id == 0:
                if info.action_profiles:
                    raise P4RTError(Code.UNIMPLEMENTED,
                                    "softswitch does not implement action profiles")
                return
            if not info.is_valid_id(ap_id, P4Ids.ACTION_PROFILE):
                raise _invalid_p4_id()
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement action profiles")
        elif which == "meter_entry":
            m_id = ent.meter_entry.meter_id
            if m_id == 0:
                if info.meters:
                    raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement meters")
                return
            if not info.is_valid_id(m_id, P4Ids.METER):
                raise _invalid_p4_id()
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement meters")
        elif which in ("direct_counter_entry", "direct_meter_entry"):
            sub = getattr(ent, which)
            counter = which == "direct_counter_entry"
            label = "DirectCounterEntry" if counter else "DirectMeterEntry"
            if not sub.HasField("table_entry"):
                raise P4RTError(Code.INVALID_ARGUMENT, f"Missing table_entry field in {label}")
            if sub.table_entry.table_id == 0:
                raise P4RTError(Code.UNIMPLEMENTED,
                                "Reading all direct " + ("counters" if counter else "meters")
                                + " for ALL tables is not supported yet")
            if not info.is_valid_id(sub.table_entry.table_id, P4Ids.TABLE):
                raise _invalid_p4_id()
            self._direct_resource_unsupported(pl, sub.table_entry.table_id, counter)
        elif which == "value_set_entry":
            raise P4RTError(Code.UNIMPLEMENTED, "ValueSet reads are not supported yet")
        elif which == "digest_entry":
            d_id = ent.digest_entry.digest_id
            if d_id == 0 and not info.digests:
                return
            if d_id != 0 and not info.is_valid_id(d_id, P4Ids.DIGEST):
                raise _invalid_p4_id()
            raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement digests")
        else:
            raise P4RTError(Code.UNKNOWN, "Incorrect entity type")

    def _from_switch_entry(self, pl: Pipeline, t: TableInfo, entry: Any) -> MatchKey:
        """A Switch Entry (JSON key order, Switch priority) -> normalised key."""
        order = pl.binding.tables[t.id].json_key_order
        fields: list[Any] = [None] * len(t.match_fields)
        for j, i in enumerate(order):
            v = entry.match[j]
            mt = t.match_fields[i].match_type
            if mt == MatchType.EXACT:
                fields[i] = int(v)
            elif mt == MatchType.OPTIONAL:
                if isinstance(v, (tuple, list)):  # JSON ternary: mask 0 is the wildcard
                    fields[i] = (0, True) if int(v[1]) == 0 else (int(v[0]), False)
                else:
                    fields[i] = (0, True) if v is None else (int(v), False)
            else:
                fields[i] = (int(v[0]), int(v[1]))
        prio = entry.priority if t.needs_priority and entry.priority is not None else 0
        return tuple(fields), int(prio)

    def _table_read_one(self, pl: Pipeline, t_id: int, req: p4runtime_pb2.TableEntry,
                        out: list[p4runtime_pb2.Entity]) -> None:
        t = pl.info.tables[t_id]
        if req.is_default_action:
            self._table_read_default(pl, t, req, out)
            return
        if req.HasField("time_since_last_hit") and not t.supports_idle_timeout:
            raise P4RTError(Code.INVALID_ARGUMENT,
                            "Do not set time_since_last_hit for a ReadRequest if the table "
                            "does not support idle timeout; yes, that includes wildcard reads")
        wanted = None
        if len(req.match) > 0:
            probe = p4runtime_pb2.TableEntry()
            probe.CopyFrom(req)
            probe.table_id = t_id
            wanted = self._match_key(pl, probe)
        try:
            entries = pl.switch.table_entries(t.name)
        except Exception as exc:
            raise P4RTError(Code.UNKNOWN, f"Error when reading table entries from target "
                                          f"({_sw_error_name(exc)}: {exc})")
        store = pl.entries.get(t.id, {})
        for entry in entries:
            key = self._from_switch_entry(pl, t, entry)
            if wanted is not None and key != wanted:
                continue
            te = out_entity(out).table_entry
            te.table_id = t.id
            self._fill_match(t, key, te)
            self._fill_action(pl, t, entry.action, entry.params, te)
            if t.is_const:
                continue  # PI: const entries are not in its store, no metadata to return
            meta = store.get(key)
            if meta is not None:
                te.controller_metadata = meta.controller_metadata
                te.metadata = meta.metadata
                te.idle_timeout_ns = meta.idle_timeout_ns

    def _table_read_default(self, pl: Pipeline, t: TableInfo, req: p4runtime_pb2.TableEntry,
                            out: list[p4runtime_pb2.Entity]) -> None:
        if req.HasField("time_since_last_hit"):
            raise P4RTError(Code.INVALID_ARGUMENT,
                            "Default table entries do not support entry ageing, do not set "
                            "'time_since_last_hit' in your ReadRequest")
        try:
            action, params = pl.switch.table_get_default(t.name)
        except Exception as exc:
            raise P4RTError(Code.UNKNOWN, f"Error when reading default entry from target "
                                          f"({_sw_error_name(exc)}: {exc})")
        te = out_entity(out).table_entry
        te.table_id = t.id
        te.is_default_action = True
        if action:
            self._fill_action(pl, t, action, params, te)
        meta = pl.entries.get(t.id, {}).get(DEFAULT_KEY)
        if meta is not None:
            te.controller_metadata = meta.controller_metadata
            te.metadata = meta.metadata

    @staticmethod
    def _fill_match(t: TableInfo, key: MatchKey, te: p4runtime_pb2.TableEntry) -> None:
        """PI parse_match_key: don't-care fields are omitted, values canonical."""
        fields, prio = key
        if prio > 0:
            te.priority = prio
        for mf_info, f in zip(t.match_fields, fields):
            mt = mf_info.match_type
            if mt == MatchType.EXACT:
                te.match.add(field_id=mf_info.id).exact.value = int_to_bytes(f)
            elif mt == MatchType.LPM:
                if f[1] == 0:
                    continue
                m = te.match.add(field_id=mf_info.id)
                m.lpm.value = int_to_bytes(f[0])
                m.lpm.prefix_len = f[1]
            elif mt == MatchType.TERNARY:
                if f[1] == 0:
                    continue
                m = te.match.add(field_id=mf_info.id)
                m.ternary.value = int_to_bytes(f[0])
                m.ternary.mask = int_to_bytes(f[1])
            elif mt == MatchType.RANGE:
                # PI omits the field only when it spans the whole byte-padded range.
                if f[0] == 0 and f[1] == (1 << (nbytes(mf_info.bitwidth) * 8)) - 1:
                    continue
                m = te.match.add(field_id=mf_info.id)
                m.range.low = int_to_bytes(f[0])
                m.range.high = int_to_bytes(f[1])
            else:
                if f[1]:
                    continue
                te.match.add(field_id=mf_info.id).optional.value = int_to_bytes(f[0])

    @staticmethod
    def _fill_action(pl: Pipeline, t: TableInfo, action: str, params: list[int],
                     te: p4runtime_pb2.TableEntry) -> None:
        aid = pl.info.action_id(action)
        if aid is None:
            log.warning("table %s: action %r is not in the P4Info, read without action",
                        t.name, action)
            return
        a = pl.info.actions[aid]
        act = te.action.action
        act.action_id = aid
        order = pl.binding.actions[aid].json_param_order
        by_p4info = [0] * len(a.params)
        for j, i in enumerate(order):
            if j < len(params):
                by_p4info[i] = int(params[j])
        for p, v in zip(a.params, by_p4info):
            act.params.add(param_id=p.id, value=int_to_bytes(v))

    # -- packet replication engine ---------------------------------------------------------

    def _pre_write(self, pl: Pipeline, utype: int,
                   pre: p4runtime_pb2.PacketReplicationEngineEntry) -> None:
        which = pre.WhichOneof("type")
        if which == "multicast_group_entry":
            self._mc_write(pl, utype, pre.multicast_group_entry)
        elif which == "clone_session_entry":
            self._clone_write(pl, utype, pre.clone_session_entry)
        else:
            raise P4RTError(Code.INVALID_ARGUMENT, "Invalid PRE operation")

    @staticmethod
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
                    raise P4RTError(Code.UNIMPLEMENTED,
                                    f"Got port of {len(raw)} bytes, but only 4 bytes are "
                                    f"supported")
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

    @staticmethod
    def _switch_replicas(nodes: dict[int, set[ReplicaPort]]) -> list[tuple[int, int]]:
        return [(rp.port, rid) for rid, rp in _sorted_replicas(nodes)]

    @staticmethod
    def _check_target_replicas(nodes: dict[int, set[ReplicaPort]], what: str) -> None:
        """What the target cannot hold fails before any state changes (PI would undo its
        partial work with cleanup tasks; the answer is the same)."""
        for rid, ports in nodes.items():
            if rid > 0xFFFF or any(rp.port > MAX_REPLICA_PORT for rp in ports):
                raise P4RTError(Code.UNKNOWN, f"Error when {what} in target (rid {rid} or a "
                                              f"port above {MAX_REPLICA_PORT})")

    def _sync_mc(self, gid: int, what: str) -> None:
        """Push the PRE's group to every live Switch (the PRE is shared by the active and a
        saved pipeline, as in bmv2)."""
        switches = {id(p.switch): p.switch for p in (self.active, self.saved) if p is not None}
        for sw in switches.values():
            if gid in self.pre.groups:
                self._switch_call(sw.mc_group_set_nodes, what, gid, self.pre.l1_nodes(gid))
            elif gid in sw.mc_groups():
                self._switch_call(sw.mc_group_delete, what, gid)

    def _mc_write(self, pl: Pipeline, utype: int, g: p4runtime_pb2.MulticastGroupEntry) -> None:
        """PI PreMcMgr::group_create / group_modify / group_delete on bmv2's PRE."""
        gid = g.multicast_group_id
        if gid == 0:
            raise P4RTError(Code.INVALID_ARGUMENT, "0 is not a valid group id")
        if gid >= FIRST_RESERVED_GROUP_ID:
            raise P4RTError(Code.OUT_OF_RANGE, "Group id value is too high")
        if utype == Update.UNSPECIFIED:
            raise P4RTError(Code.INVALID_ARGUMENT, "Update type is not set")
        pre = self.pre
        if utype == Update.INSERT:
            if gid in pl.mc_groups:
                raise P4RTError(Code.ALREADY_EXISTS, "Multicast group already exists")
            nodes = self._make_group(g.replicas)
            self._check_target_replicas(nodes, "creating multicast group")
            pre.group_create(gid)
            handles = {}
            for rid in sorted(nodes):
                handles[rid] = pre.node_create(rid, {rp.port for rp in nodes[rid]})
                pre.attach(gid, handles[rid])
            pl.mc_groups[gid], pl.mc_nodes[gid] = nodes, handles
            self._sync_mc(gid, "creating multicast group")
        elif utype == Update.MODIFY:
            if gid not in pl.mc_groups:
                raise P4RTError(Code.NOT_FOUND, "Multicast group does not exist")
            nodes = self._make_group(g.replicas)
            self._check_target_replicas(nodes, "modifying multicast group")
            old_nodes, old_handles = pl.mc_groups[gid], dict(pl.mc_nodes[gid])
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
            pl.mc_groups[gid], pl.mc_nodes[gid] = nodes, handles
            self._sync_mc(gid, "modifying multicast group")
        elif utype == Update.DELETE:
            if gid not in pl.mc_groups:
                raise P4RTError(Code.NOT_FOUND, "Multicast group does not exist")
            for handle in pl.mc_nodes[gid].values():
                pre.node_destroy(handle)
            pre.group_destroy(gid)
            del pl.mc_groups[gid], pl.mc_nodes[gid]
            self._sync_mc(gid, "deleting multicast group")
        else:
            raise P4RTError(Code.INVALID_ARGUMENT, "Invalid update type")

    @staticmethod
    def _switch_call(fn: Callable[..., Any], what: str, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            if _is_unsupported(exc) or isinstance(exc, (AttributeError, NotImplementedError)):
                raise P4RTError(Code.UNIMPLEMENTED, f"softswitch does not support {what} "
                                                    f"({exc})")
            raise P4RTError(Code.UNKNOWN, f"Error when {what} in target "
                                          f"({_sw_error_name(exc)}: {exc})")

    def _clone_write(self, pl: Pipeline, utype: int,
                     s: p4runtime_pb2.CloneSessionEntry) -> None:
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
            self._switch_call(pl.switch.clone_session_set, "resetting clone session", sid, [])
            del pl.clone_sessions[sid]
            return
        if utype == Update.INSERT and sid in pl.clone_sessions:
            raise P4RTError(Code.ALREADY_EXISTS, "Clone session id already exists")
        if utype == Update.MODIFY and sid not in pl.clone_sessions:
            raise P4RTError(Code.NOT_FOUND, "Clone session id does not exist")
        nodes = self._make_group(s.replicas)
        if s.class_of_service != 0:
            raise P4RTError(Code.UNIMPLEMENTED, "COS for clone sessions not supported yet")
        if s.packet_length_bytes != 0:
            raise P4RTError(Code.UNIMPLEMENTED,
                            "softswitch does not truncate clones (packet_length_bytes)")
        self._switch_call(pl.switch.clone_session_set, "creating clone session", sid,
                          self._switch_replicas(nodes))
        stored = p4runtime_pb2.CloneSessionEntry()
        stored.session_id = sid
        stored.class_of_service = s.class_of_service
        stored.packet_length_bytes = s.packet_length_bytes
        for rid, rp in _sorted_replicas(nodes):
            _add_replica(stored.replicas, rid, rp)
        pl.clone_sessions[sid] = stored

    def _pre_read(self, pl: Pipeline, pre: p4runtime_pb2.PacketReplicationEngineEntry,
                  out: list[p4runtime_pb2.Entity]) -> None:
        which = pre.WhichOneof("type")
        if which == "multicast_group_entry":
            gid = pre.multicast_group_entry.multicast_group_id
            if gid >= FIRST_RESERVED_GROUP_ID:
                raise P4RTError(Code.OUT_OF_RANGE, "Group id value is too high")
            if gid != 0 and gid not in pl.mc_groups:
                raise P4RTError(Code.NOT_FOUND, "Multicast group does not exist")
            for g in ([gid] if gid else sorted(pl.mc_groups)):
                entry = out_entity(out).packet_replication_engine_entry.multicast_group_entry
                entry.multicast_group_id = g
                for rid, rp in _sorted_replicas(pl.mc_groups[g]):
                    _add_replica(entry.replicas, rid, rp)
        elif which == "clone_session_entry":
            sid = pre.clone_session_entry.session_id
            if sid != 0 and sid not in pl.clone_sessions:
                raise P4RTError(Code.NOT_FOUND, "Clone session id does not exist")
            for s in ([sid] if sid else sorted(pl.clone_sessions)):
                out_entity(out).packet_replication_engine_entry.clone_session_entry.CopyFrom(
                    pl.clone_sessions[s])
        else:
            raise P4RTError(Code.INVALID_ARGUMENT, "Invalid PRE operation")

    # -- counters and registers ------------------------------------------------------------

    def _counter_write(self, pl: Pipeline, utype: int, c: p4runtime_pb2.CounterEntry) -> None:
        """PI counter_write; bmv2 keeps the unit the P4Info does not cover unchanged."""
        if not pl.info.is_valid_id(c.counter_id, P4Ids.COUNTER):
            raise _invalid_p4_id()
        if not c.HasField("index"):
            raise P4RTError(Code.UNIMPLEMENTED,
                            "Wildcard write is not supported for indirect counters yet")
        if c.index.index < 0:
            raise P4RTError(Code.INVALID_ARGUMENT, "A negative number is not a valid index value")
        info = pl.info.counters[c.counter_id]
        index = c.index.index
        if utype == Update.UNSPECIFIED:
            raise P4RTError(Code.INVALID_ARGUMENT, "Update type is not set")
        if utype == Update.INSERT:
            raise P4RTError(Code.INVALID_ARGUMENT, "INSERT update type not supported for counters")
        if utype not in (Update.MODIFY, Update.DELETE):
            raise P4RTError(Code.INVALID_ARGUMENT, "Invalid update type")
        try:
            if index >= pl.switch.counter_size(info.name):
                raise IndexError(f"index {index} out of range")
            if utype == Update.DELETE:  # PI resets the cell
                new_bytes, new_packets = 0, 0
            else:
                cur_bytes, cur_packets = pl.switch.counter_read(info.name, index)
                unit = info.unit
                new_bytes = c.data.byte_count if unit in (
                    p4info_pb2.CounterSpec.BYTES, p4info_pb2.CounterSpec.BOTH) else cur_bytes
                new_packets = c.data.packet_count if unit in (
                    p4info_pb2.CounterSpec.PACKETS, p4info_pb2.CounterSpec.BOTH) else cur_packets
            pl.switch.counter_write(info.name, index, new_bytes, new_packets)
        except Exception as exc:
            raise P4RTError(Code.UNKNOWN, f"Error when writing to counter "
                                          f"({_sw_error_name(exc)}: {exc})")

    def _counter_read(self, pl: Pipeline, c: p4runtime_pb2.CounterEntry,
                      out: list[p4runtime_pb2.Entity]) -> None:
        if c.counter_id == 0:
            ids = list(pl.info.counters)
        else:
            if not pl.info.is_valid_id(c.counter_id, P4Ids.COUNTER):
                raise _invalid_p4_id()
            ids = [c.counter_id]
        for cid in ids:
            info = pl.info.counters[cid]
            try:
                size = pl.switch.counter_size(info.name)
            except Exception as exc:
                raise P4RTError(Code.UNKNOWN, f"Error when reading counter from target "
                                              f"({_sw_error_name(exc)}: {exc})")
            if c.HasField("index"):
                if c.index.index < 0:
                    raise P4RTError(Code.INVALID_ARGUMENT,
                                    "A negative number is not a valid index value")
                indices: Iterable[int] = [c.index.index]
            else:
                indices = range(size)
            for index in indices:
                try:
                    if index >= size:
                        raise IndexError(f"index {index} out of range (size {size})")
                    b, p = pl.switch.counter_read(info.name, index)
                except Exception as exc:
                    raise P4RTError(Code.UNKNOWN, f"Error when reading counter from target "
                                                  f"({_sw_error_name(exc)}: {exc})")
                entry = out_entity(out).counter_entry
                entry.counter_id = cid
                entry.index.index = index
                entry.data.byte_count = b
                entry.data.packet_count = p

    def _register_read(self, pl: Pipeline, r: p4runtime_pb2.RegisterEntry,
                       out: list[p4runtime_pb2.Entity]) -> None:
        """Debugging extension: simple_switch_grpc answers UNIMPLEMENTED ("Register reads are
        not supported yet").  Semantics follow CounterEntry: id 0 = all, no index = all."""
        if r.register_id == 0:
            ids = list(pl.info.registers)
        else:
            if not pl.info.is_valid_id(r.register_id, P4Ids.REGISTER):
                raise _invalid_p4_id()
            ids = [r.register_id]
        for rid in ids:
            info = pl.info.registers[rid]
            try:
                size = pl.switch.register_size(info.name)
            except Exception as exc:
                raise P4RTError(Code.UNKNOWN, f"Error when reading register from target "
                                              f"({_sw_error_name(exc)}: {exc})")
            if r.HasField("index"):
                if r.index.index < 0:
                    raise P4RTError(Code.INVALID_ARGUMENT,
                                    "A negative number is not a valid index value")
                if r.index.index >= size:
                    raise P4RTError(Code.OUT_OF_RANGE,
                                    f"index {r.index.index} out of range for register "
                                    f"{info.name} of size {size}")
                indices: Iterable[int] = [r.index.index]
            else:
                indices = range(size)
            for index in indices:
                try:
                    value = pl.switch.register_read(info.name, index)
                except Exception as exc:
                    raise P4RTError(Code.UNKNOWN, f"Error when reading register from target "
                                                  f"({_sw_error_name(exc)}: {exc})")
                entry = out_entity(out).register_entry
                entry.register_id = rid
                entry.index.index = index
                entry.data.CopyFrom(p4data_pb2.P4Data(bitstring=int_to_bytes(int(value))))


def out_entity(out: list[p4runtime_pb2.Entity]) -> p4runtime_pb2.Entity:
    ent = p4runtime_pb2.Entity()
    out.append(ent)
    return ent


def _add_replica(replicas: Any, rid: int, rp: ReplicaPort) -> None:
    r = replicas.add()
    if rp.kind == "egress_port":
        r.egress_port = rp.port
    else:
        r.port = rp.port.to_bytes(rp.num_bytes, "big")
    r.instance = rid


# -- arbitration --------------------------------------------------------------------------

_END = object()


@dataclass(eq=False)
class Connection:
    """One StreamChannel.  Everything sent to the client goes through ``outbox``, so that
    arbitration notices and PacketIns from different threads keep their order."""

    id: int
    outbox: "queue.Queue[Any]" = field(default_factory=queue.Queue)
    device_id: int | None = None
    election_id: tuple[int, int] = (0, 0)

    def send(self, msg: p4runtime_pb2.StreamMessageResponse, droppable: bool = False) -> bool:
        if droppable and self.outbox.qsize() >= MAX_PENDING_STREAM_MESSAGES:
            return False
        self.outbox.put(msg)
        return True


class Arbitration:
    """PI pi_server.cpp DeviceState connection handling: per device id, the connection
    with the highest election id is primary; every change is announced to the affected
    connections with OK ("Is primary") or ALREADY_EXISTS ("Is backup")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[int, list[Connection]] = {}

    def _sorted(self, device_id: int) -> list[Connection]:
        conns = self._conns.setdefault(device_id, [])
        conns.sort(key=lambda c: c.election_id, reverse=True)
        return conns

    def add(self, conn: Connection, device_id: int, election_id: tuple[int, int]) -> None:
        with self._lock:
            conns = self._sorted(device_id)
            if len(conns) >= MAX_CONNECTIONS:
                raise P4RTError(Code.RESOURCE_EXHAUSTED, "Too many connections")
            if any(c.election_id == election_id for c in conns):
                raise P4RTError(Code.INVALID_ARGUMENT, "Election id already exists")
            conn.device_id = device_id
            conn.election_id = election_id
            conns.append(conn)
            conns = self._sorted(device_id)
            log.info("device %d: new connection %d, election id %s", device_id, conn.id,
                     election_id)
            if conns[0] is conn:
                self._notify_all(device_id)
            else:
                self._notify_one(device_id, conn)

    def update(self, conn: Connection, election_id: tuple[int, int]) -> None:
        with self._lock:
            assert conn.device_id is not None
            if conn.election_id == election_id:
                return
            conns = self._sorted(conn.device_id)
            was_primary = conns[0] is conn
            if any(c.election_id == election_id for c in conns if c is not conn):
                raise P4RTError(Code.INVALID_ARGUMENT, "New election id already exists")
            conn.election_id = election_id
            conns = self._sorted(conn.device_id)
            if (conns[0] is conn) != was_primary:
                self._notify_all(conn.device_id)
            else:
                self._notify_one(conn.device_id, conn)

    def remove(self, conn: Connection) -> None:
        with self._lock:
            if conn.device_id is None:
                return
            conns = self._sorted(conn.device_id)
            if conn not in conns:
                return
            was_primary = conns[0] is conn
            conns.remove(conn)
            log.info("device %d: connection %d removed", conn.device_id, conn.id)
            if was_primary:
                self._notify_all(conn.device_id)

    def count(self, device_id: int) -> int:
        with self._lock:
            return len(self._conns.get(device_id, []))

    def primary(self, device_id: int) -> Connection | None:
        with self._lock:
            conns = self._sorted(device_id)
            return conns[0] if conns else None

    def is_primary_election_id(self, device_id: int, election_id: tuple[int, int]) -> bool:
        p = self.primary(device_id)
        return p is not None and p.election_id == election_id

    def _notify_one(self, device_id: int, conn: Connection) -> None:
        conns = self._conns[device_id]
        primary = conns[0]
        msg = p4runtime_pb2.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = device_id
        arb.election_id.high, arb.election_id.low = primary.election_id
        if conn is primary:
            arb.status.code = Code.OK
            arb.status.message = "Is primary"
        else:
            arb.status.code = Code.ALREADY_EXISTS
            arb.status.message = "Is backup"
        conn.send(msg)

    def _notify_all(self, device_id: int) -> None:
        for c in list(self._conns.get(device_id, [])):
            self._notify_one(device_id, c)


# -- gRPC service -------------------------------------------------------------------------

def _abort_with(context: grpc.ServicerContext, err: P4RTError, details: bool = True) -> None:
    """End the RPC like PI's to_grpc_status: code, message, and (for statuses produced by
    the DeviceMgr layer) the google.rpc.Status in grpc-status-details-bin."""
    if details:
        context.set_trailing_metadata(
            (("grpc-status-details-bin", err.to_status().SerializeToString()),))
    context.set_code(_GRPC_CODE.get(err.code, grpc.StatusCode.UNKNOWN))
    context.set_details(err.message)


_GRPC_CODE = {c.value[0]: c for c in grpc.StatusCode}


def _u128(msg: p4runtime_pb2.Uint128) -> tuple[int, int]:
    return msg.high, msg.low


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """pi_server.cpp P4RuntimeServiceImpl, for one real device id."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.arbitration = Arbitration()
        self._conn_ids = itertools.count(1)
        # device ids other than ours for which a SetForwardingPipelineConfig created a
        # (pipeline-less) DeviceMgr in PI
        self._other_mgrs: set[int] = set()
        device.packet_in_sink = self._send_packet_in

    def _send_packet_in(self, packet: p4runtime_pb2.PacketIn) -> None:
        primary = self.arbitration.primary(self.device.device_id)
        if primary is None:  # PI: no primary, no packet-in
            self.device._count("packet_in_dropped")
            return
        msg = p4runtime_pb2.StreamMessageResponse()
        msg.packet.CopyFrom(packet)
        if not primary.send(msg, droppable=True):
            self.device._count("packet_in_dropped")

    def _check_primary(self, device_id: int, has_election_id: bool,
                       election_id: tuple[int, int]) -> None:
        """PI: with no stream open, only requests without election id are accepted (handy
        for grpc_cli); otherwise the request must carry the primary's election id."""
        n = self.arbitration.count(device_id)
        if n == 0 and has_election_id:
            raise P4RTError(Code.PERMISSION_DENIED, "Not primary")
        if n > 0 and not self.arbitration.is_primary_election_id(device_id, election_id):
            raise P4RTError(Code.PERMISSION_DENIED, "Not primary")

    def _no_pipeline(self) -> P4RTError:
        return P4RTError(Code.FAILED_PRECONDITION,
                         "No forwarding pipeline config set for this device")

    # Unary RPCs ----------------------------------------------------------------------------

    def Capabilities(self, request, context):  # noqa: N802 (gRPC method name)
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    def Write(self, request, context):  # noqa: N802
        try:
            self._check_primary(request.device_id, request.HasField("election_id"),
                                _u128(request.election_id))
        except P4RTError as err:
            _abort_with(context, err, details=False)
            return p4runtime_pb2.WriteResponse()
        if request.device_id != self.device.device_id or not self.device.mgr_created:
            _abort_with(context, self._no_pipeline(), details=False)
            return p4runtime_pb2.WriteResponse()
        try:
            results = self.device.write(request)
        except P4RTError as err:
            _abort_with(context, err, details=err.code != Code.FAILED_PRECONDITION)
            return p4runtime_pb2.WriteResponse()
        if any(r is not None for r in results):
            status = status_pb2.Status(code=Code.UNKNOWN)
            for r in results:
                if r is None:
                    err_msg = p4runtime_pb2.Error(code=Code.OK)
                else:
                    err_msg = p4runtime_pb2.Error(canonical_code=r.code, message=r.message,
                                                  space=ERROR_SPACE)
                status.details.add().Pack(err_msg)
            context.set_trailing_metadata(
                (("grpc-status-details-bin", status.SerializeToString()),))
            context.set_code(grpc.StatusCode.UNKNOWN)
            context.set_details(status.message)
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):  # noqa: N802
        if request.device_id != self.device.device_id or not self.device.mgr_created:
            _abort_with(context, self._no_pipeline(), details=False)
            return
        try:
            entities, err = self.device.read(request)
        except P4RTError as e:
            _abort_with(context, e, details=e.code != Code.FAILED_PRECONDITION)
            return
        # PI always writes one ReadResponse, with what it read before any error.
        yield p4runtime_pb2.ReadResponse(entities=entities)
        if err is not None:
            _abort_with(context, err)

    def SetForwardingPipelineConfig(self, request, context):  # noqa: N802
        try:
            self._check_primary(request.device_id, request.HasField("election_id"),
                                _u128(request.election_id))
        except P4RTError as err:
            _abort_with(context, err, details=False)
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        try:
            if request.device_id == self.device.device_id:
                self.device.set_pipeline(request.action, request.config)
            else:
                self._set_other_device(request)
        except P4RTError as err:
            log.warning("SetForwardingPipelineConfig(%s) failed: %s",
                        SetAction.Action.Name(request.action)
                        if request.action in SetAction.Action.values() else request.action,
                        err.message)
            _abort_with(context, err)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _set_other_device(self, request: p4runtime_pb2.SetForwardingPipelineConfigRequest
                          ) -> None:
        """PI creates a DeviceMgr for any device id, then bmv2 refuses to be assigned to an
        id other than its --device-id."""
        self._other_mgrs.add(request.device_id)
        action = request.action
        if action == SetAction.UNSPECIFIED:
            raise P4RTError(Code.INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")
        if action != SetAction.COMMIT:
            try:
                P4InfoIndex.from_proto(request.config.p4info)
            except P4InfoError as exc:
                raise P4RTError(Code.UNKNOWN, f"Error when importing p4info: {exc}")
        if action == SetAction.VERIFY:
            return
        if action == SetAction.COMMIT:
            raise P4RTError(Code.UNKNOWN, "Error in second phase of device update")
        raise P4RTError(Code.UNKNOWN,
                        f"Error when trying to assign device (this switch is device id "
                        f"{self.device.device_id}, not {request.device_id})")

    def GetForwardingPipelineConfig(self, request, context):  # noqa: N802
        if request.device_id != self.device.device_id:
            if request.device_id in self._other_mgrs:
                return p4runtime_pb2.GetForwardingPipelineConfigResponse()
            _abort_with(context, self._no_pipeline(), details=False)
            return p4runtime_pb2.GetForwardingPipelineConfigResponse()
        if not self.device.mgr_created:
            _abort_with(context, self._no_pipeline(), details=False)
            return p4runtime_pb2.GetForwardingPipelineConfigResponse()
        try:
            config = self.device.get_pipeline(request.response_type)
        except P4RTError as err:
            _abort_with(context, err)
            return p4runtime_pb2.GetForwardingPipelineConfigResponse()
        return p4runtime_pb2.GetForwardingPipelineConfigResponse(config=config)

    # StreamChannel -------------------------------------------------------------------------

    def StreamChannel(self, request_iterator, context):  # noqa: N802
        conn = Connection(id=next(self._conn_ids))
        context.add_callback(lambda: conn.outbox.put(_END))
        reader = threading.Thread(target=self._stream_reader,
                                  args=(conn, request_iterator),
                                  name=f"p4rt-stream-{conn.id}", daemon=True)
        reader.start()
        try:
            while True:
                item = conn.outbox.get()
                if item is _END:
                    return
                if isinstance(item, P4RTError):
                    _abort_with(context, item, details=False)
                    return
                yield item
        finally:
            self.arbitration.remove(conn)

    def _stream_reader(self, conn: Connection,
                       request_iterator: Iterator[p4runtime_pb2.StreamMessageRequest]) -> None:
        """pi_server.cpp StreamChannel loop; runs beside the response generator."""
        try:
            for req in request_iterator:
                kind = req.WhichOneof("update")
                if kind == "arbitration":
                    device_id = req.arbitration.device_id
                    election_id = _u128(req.arbitration.election_id)
                    if conn.device_id is not None and conn.device_id != device_id:
                        conn.outbox.put(P4RTError(Code.FAILED_PRECONDITION,
                                                  "Invalid device id"))
                        return
                    try:
                        if conn.device_id is None:
                            self.arbitration.add(conn, device_id, election_id)
                        else:
                            self.arbitration.update(conn, election_id)
                    except P4RTError as err:
                        self.arbitration.remove(conn)
                        conn.outbox.put(err)
                        return
                elif kind == "packet":
                    if conn.device_id is None or conn.device_id != self.device.device_id:
                        continue
                    if self.arbitration.primary(conn.device_id) is not conn:
                        continue  # PI ignores stream messages from backups
                    if not self.device.mgr_created:
                        continue
                    self.device.packet_out(req.packet)
                # digest_ack and others: no digests in softswitch; PI ignores "other"
        except grpc.RpcError:
            pass  # the client went away; the callback ends the response side
        except Exception:
            log.exception("StreamChannel reader failed")
        conn.outbox.put(_END)


def _host_of(address: str) -> str:
    if address.startswith("["):
        return address[1:address.index("]")]
    return address.rsplit(":", 1)[0]


def check_loopback(address: str) -> None:
    """softswitch is a test target: it only listens on loopback addresses."""
    import ipaddress
    host = _host_of(address)
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(f"refusing to listen on {address!r}: softswitch only binds loopback "
                     f"addresses (127.0.0.0/8, ::1, localhost)")


class P4RuntimeServer:
    """The gRPC server around one Device."""

    def __init__(self, device: Device, address: str = "127.0.0.1:9559",
                 max_workers: int = 64) -> None:
        check_loopback(address)
        self.device = device
        self.servicer = P4RuntimeServicer(device)
        self._requested = address
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers,
                                       thread_name_prefix="p4rt"),
            options=[
                ("grpc.max_receive_message_length", 256 * 1024 * 1024),  # as PI
                ("grpc.so_reuseport", 0),  # a port already in use is an error, not shared
            ])
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, self._server)
        self.port: int | None = None

    @property
    def address(self) -> str:
        host = _host_of(self._requested)
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self.port}"

    def start(self) -> int:
        """Bind and start; returns the bound TCP port (useful with port 0)."""
        try:
            port = self._server.add_insecure_port(self._requested)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self._requested}: {exc}") from None
        if port == 0:
            raise OSError(f"cannot listen on {self._requested} (address in use?)")
        self.port = port
        self._server.start()
        log.info("P4Runtime server listening on %s (device id %d)", self.address,
                 self.device.device_id)
        return port

    def stop(self, grace: float | None = 1.0) -> None:
        self._server.stop(grace).wait()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self._server.wait_for_termination(timeout)
