"""A P4Runtime server that records every request a controller sends and answers as a
switch running a given pipeline would -- for a pipeline no switch here can run (the TNA
program: no Tofino, no model). p4runtime-shell's own tests check the requests its client
builds the same way: a real gRPC server on loopback, requests compared offline.

What it keeps is what the controller reads back: the pipeline (with its cookie), table
entries and default entries, multicast groups. A const table holds the program's entries
(given, e.g. from the compiler's context.json) and refuses writes as PI does on
simple_switch_grpc and softswitch (tests/controller_tests/test_const_tables.py checks those
two): INSERT -> UNKNOWN, MODIFY and DELETE -> NOT_FOUND (PI keeps no handle for them).
Everything else is accepted as it comes; this is a recorder, not a switch.
"""

from __future__ import annotations

import json
import threading
from concurrent import futures
from pathlib import Path
from typing import Iterator

import grpc
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4reduce.p4rt import P4InfoIndex, encode

Update = p4runtime_pb2.Update
GetType = p4runtime_pb2.GetForwardingPipelineConfigRequest


def entry_key(te: p4runtime_pb2.TableEntry) -> tuple:
    """A table entry's identity: table, priority, match (as the server compares them)."""
    return (
        te.table_id,
        te.priority,
        tuple(sorted(m.SerializeToString(deterministic=True) for m in te.match)),
    )


def _match_field(info, name: str):
    """A match field by the name context.json gives it (a slice key, `hdr.p4r.rank[4:0]`
    in the P4Info, is `hdr.p4r.rank` there)."""
    sliced = [mf for mf in info.match_fields if mf.name.startswith(name + "[")]
    return sliced[0] if len(sliced) == 1 else info.field_named(name)


def context_const_entries(context_json: Path, p4: P4InfoIndex) -> list[p4runtime_pb2.TableEntry]:
    """The const entries bf-p4c compiled into the program (context.json `static_entries`),
    as a P4Runtime server reads them back: match fields and action by P4Info id."""
    out = []
    for table in json.loads(context_json.read_text())["tables"]:
        entries = table.get("static_entries") or []
        if not entries:
            continue
        info = p4.table(table["name"])
        actions = {a["handle"]: a["name"] for a in table["actions"]}
        for e in entries:
            te = p4runtime_pb2.TableEntry(table_id=info.id)
            for m in e["match_key_fields_values"]:
                f = _match_field(info, m["field_name"])
                value = int(m["value"], 16)
                if f.match_type == p4info_pb2.MatchField.EXACT:
                    te.match.add(field_id=f.id).exact.value = encode(value, f.bitwidth)
                    continue
                assert f.match_type == p4info_pb2.MatchField.TERNARY, (info.name, f.name)
                mask = int(m["mask"], 16) & ((1 << f.bitwidth) - 1)  # a slice: its bits
                if mask:  # a don't-care field is left out, as P4Runtime reads it back
                    t = te.match.add(field_id=f.id).ternary
                    t.value, t.mask = encode(value & mask, f.bitwidth), encode(mask, f.bitwidth)
                te.priority = len(entries) - e["priority"]  # context.json: 0 matches first
            action = p4.action(actions[e["action_handle"]])
            te.action.action.action_id = action.id
            for p in e["action_parameters_values"]:
                param = action.param_named(p["parameter_name"])
                te.action.action.params.add(
                    param_id=param.id, value=encode(int(p["value"], 16), param.bitwidth)
                )
            out.append(te)
    return out


class RecordingServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, const_entries: list[p4runtime_pb2.TableEntry]) -> None:
        self._lock = threading.Lock()
        self.const_entries = list(const_entries)
        self.config: p4runtime_pb2.ForwardingPipelineConfig | None = None
        self.p4: P4InfoIndex | None = None
        self.entries: dict[tuple, p4runtime_pb2.TableEntry] = {}
        self.defaults: dict[int, p4runtime_pb2.TableEntry] = {}
        self.groups: dict[int, p4runtime_pb2.MulticastGroupEntry] = {}
        self.writes: list[p4runtime_pb2.WriteRequest] = []
        self.pushes: list[p4runtime_pb2.SetForwardingPipelineConfigRequest] = []
        self.grpc_addr = ""  # set by RecordingServer

    # -- session and pipeline --------------------------------------------------------------

    def StreamChannel(self, request_iterator, context) -> Iterator:  # noqa: N802
        for req in request_iterator:
            if req.HasField("arbitration"):
                rep = p4runtime_pb2.StreamMessageResponse()
                rep.arbitration.CopyFrom(req.arbitration)
                rep.arbitration.status.code = code_pb2.OK  # one client at a time here
                yield rep

    def SetForwardingPipelineConfig(self, request, context):  # noqa: N802
        with self._lock:
            self.pushes.append(request)
            self.config = request.config
            self.p4 = P4InfoIndex.from_proto(request.config.p4info)
            self.entries = {entry_key(e): e for e in self.const_entries}
            self.defaults, self.groups = {}, {}
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):  # noqa: N802
        if self.config is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config")
        rep = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        rep.config.cookie.CopyFrom(self.config.cookie)
        if request.response_type in (GetType.ALL, GetType.P4INFO_AND_COOKIE):
            rep.config.p4info.CopyFrom(self.config.p4info)
        if request.response_type in (GetType.ALL, GetType.DEVICE_CONFIG_AND_COOKIE):
            rep.config.p4_device_config = self.config.p4_device_config
        return rep

    # -- writes and reads ------------------------------------------------------------------

    def Write(self, request, context):  # noqa: N802
        with self._lock:
            self.writes.append(request)
            for u in request.updates:
                error = self._apply(u)
                if error is not None:
                    context.abort(*error)
        return p4runtime_pb2.WriteResponse()

    def _apply(self, u: p4runtime_pb2.Update) -> tuple | None:
        kind = u.entity.WhichOneof("entity")
        if kind == "table_entry":
            return self._table_write(u.type, u.entity.table_entry)
        if kind == "packet_replication_engine_entry":
            group = u.entity.packet_replication_engine_entry.multicast_group_entry
            if u.type == Update.DELETE:
                self.groups.pop(group.multicast_group_id, None)
            else:
                self.groups[group.multicast_group_id] = group
        return None  # counter entries: accepted, nothing to keep

    def _table_write(self, utype: int, te: p4runtime_pb2.TableEntry) -> tuple | None:
        assert self.p4 is not None
        if te.is_default_action:
            self.defaults[te.table_id] = te
            return None
        key = entry_key(te)
        if self.p4.is_const_table(te.table_id):
            if utype == Update.INSERT:
                return grpc.StatusCode.UNKNOWN, "Error when adding match entry to target"
            return grpc.StatusCode.NOT_FOUND, "Cannot find match entry"
        if utype == Update.DELETE:
            if self.entries.pop(key, None) is None:
                return grpc.StatusCode.NOT_FOUND, "Cannot find match entry"
        else:
            self.entries[key] = te
        return None

    def Read(self, request, context):  # noqa: N802
        rep = p4runtime_pb2.ReadResponse()
        with self._lock:
            for q in request.entities:
                kind = q.WhichOneof("entity")
                if kind == "table_entry" and q.table_entry.is_default_action:
                    tid = q.table_entry.table_id
                    found = self.defaults.get(tid, p4runtime_pb2.TableEntry(table_id=tid))
                    rep.entities.add().table_entry.CopyFrom(found)
                    rep.entities[-1].table_entry.is_default_action = True
                elif kind == "table_entry":
                    tid = q.table_entry.table_id
                    for e in self.entries.values():
                        if tid in (0, e.table_id):
                            rep.entities.add().table_entry.CopyFrom(e)
                elif kind == "packet_replication_engine_entry":
                    for g in self.groups.values():
                        rep.entities.add().packet_replication_engine_entry.multicast_group_entry.CopyFrom(
                            g
                        )
        yield rep

    def Capabilities(self, request, context):  # noqa: N802
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version="1.3.0")

    # -- what was sent -----------------------------------------------------------------------

    def updates(self) -> list[p4runtime_pb2.Update]:
        return [u for w in self.writes for u in w.updates]


class RecordingServer:
    """RecordingServicer behind a gRPC server on a free loopback port."""

    def __init__(self, const_entries: list[p4runtime_pb2.TableEntry] = ()) -> None:
        self.servicer = RecordingServicer(list(const_entries))
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.grpc_addr = self.servicer.grpc_addr = f"127.0.0.1:{port}"

    def __enter__(self) -> RecordingServicer:
        self._server.start()
        return self.servicer

    def __exit__(self, *exc) -> None:
        self._server.stop(0)
