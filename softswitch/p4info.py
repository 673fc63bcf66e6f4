"""P4Info helper: ids <-> names, widths, and the P4Runtime byte-string codec.

The interpreter (softswitch.switch.Switch) only knows the fully qualified names p4c writes
into the bmv2 JSON; the controller only speaks P4Info ids and byte strings.  This module is
the translation layer between the two, kept apart from the gRPC server so that it can be
unit-tested without a network and reused by tools.

Byte strings follow PI (p4lang/PI proto/frontend/src/common.cpp), which is what
simple_switch_grpc runs:

* input (``bytes_to_int``): shorter than the field is fine (zero-padded), longer is fine
  as long as the extra leading bytes/bits are zero; a value that does not fit in the
  field's bit width is INVALID_ARGUMENT "Bytestring provided does not fit within N bits";
* output (``int_to_bytes``): the canonical P4Runtime 1.4 form, i.e. leading zero bytes
  stripped, zero encoded as a single ``b"\\x00"`` (PI's ``bytestring_pi_to_p4rt``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from p4.config.v1 import p4info_pb2

P4Ids = p4info_pb2.P4Ids
MatchType = p4info_pb2.MatchField.MatchType
ActionScope = p4info_pb2.ActionRef.Scope

# P4Info match type -> the "match_type" strings the bmv2 JSON may use for that table key.
# p4c-bm2-ss writes an optional key as "ternary" (bmv2 has no optional match unit; PI's
# bmv2 layer sends optional as a ternary with an all-ones or all-zero mask).
_JSON_MATCH_TYPE = {
    MatchType.EXACT: ("exact",),
    MatchType.LPM: ("lpm",),
    MatchType.TERNARY: ("ternary",),
    MatchType.RANGE: ("range",),
    MatchType.OPTIONAL: ("optional", "ternary"),
}


class CodecError(ValueError):
    """A byte string or value the controller sent cannot be encoded for the P4Info width."""


class P4InfoError(ValueError):
    """The P4Info itself cannot be imported (PI: "Error when importing p4info")."""


def resource_type(p4_id: int) -> int:
    """The P4Ids prefix of an id (its most significant byte), as PI's resource_type_from_id."""
    return (p4_id >> 24) & 0xFF


def bytes_to_int(data: bytes, bitwidth: int) -> int:
    """Decode a P4Runtime byte string for a field of ``bitwidth`` bits, accepting what PI accepts."""
    value = int.from_bytes(data, "big") if data else 0
    if value >> bitwidth:
        raise CodecError(f"Bytestring provided does not fit within {bitwidth} bits")
    return value


def int_to_bytes(value: int) -> bytes:
    """Encode a non-negative integer in canonical P4Runtime form (PI: strip leading zero bytes)."""
    if value < 0:
        raise CodecError(f"negative value {value} cannot be encoded")
    if value == 0:
        return b"\x00"
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def nbytes(bitwidth: int) -> int:
    return (bitwidth + 7) // 8


@dataclass(frozen=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    match_type: int  # p4info_pb2.MatchField.MatchType


@dataclass(frozen=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True)
class ActionInfo:
    id: int
    name: str
    params: tuple[ParamInfo, ...]

    def param(self, param_id: int) -> ParamInfo | None:
        for p in self.params:
            if p.id == param_id:
                return p
        return None


@dataclass(frozen=True)
class TableInfo:
    id: int
    name: str
    match_fields: tuple[MatchFieldInfo, ...]
    action_scopes: dict[int, int]  # action id -> ActionRef.Scope
    const_default_action_id: int
    is_const: bool
    implementation_id: int
    direct_resource_ids: tuple[int, ...]
    supports_idle_timeout: bool
    size: int

    @property
    def needs_priority(self) -> bool:
        """PI: a table needs a priority iff one of its fields is ternary, range or optional."""
        return any(mf.match_type in (MatchType.TERNARY, MatchType.RANGE, MatchType.OPTIONAL)
                   for mf in self.match_fields)

    def direct_resource(self, prefix: int) -> int:
        for rid in self.direct_resource_ids:
            if resource_type(rid) == prefix:
                return rid
        return 0


@dataclass(frozen=True)
class CounterInfo:
    id: int
    name: str
    unit: int  # p4info_pb2.CounterSpec.Unit
    size: int


@dataclass(frozen=True)
class RegisterInfo:
    id: int
    name: str
    bitwidth: int
    size: int


@dataclass(frozen=True)
class PacketMetadataInfo:
    id: int
    name: str
    bitwidth: int


class PacketHeaderCodec:
    """The packet_in / packet_out controller header, serialised as bmv2 and PI do.

    The header is the metadata fields packed MSB first in P4Info order, rounded up to whole
    bytes with zero bits at the end (PI packet_io_mgr.cpp generic_extract / generic_deparse).
    It is prepended to a PacketOut payload before the frame enters the pipeline at the CPU
    port, and stripped from a frame the pipeline sends to the CPU port.
    """

    def __init__(self, fields: list[PacketMetadataInfo]) -> None:
        self.fields = list(fields)
        self.total_bits = sum(f.bitwidth for f in self.fields)
        self.nbytes = nbytes(self.total_bits)
        self._by_id = {f.id: i for i, f in enumerate(self.fields)}

    def decode(self, frame: bytes) -> tuple[list[tuple[int, bytes]], bytes] | None:
        """(metadata [(id, canonical bytes)], payload), or None if the frame is too short
        (PI silently drops such a packet-in)."""
        if len(frame) < self.nbytes:
            return None
        header = int.from_bytes(frame[:self.nbytes], "big")
        offset = 0
        metadata = []
        for f in self.fields:
            shift = self.nbytes * 8 - offset - f.bitwidth
            value = (header >> shift) & ((1 << f.bitwidth) - 1)
            metadata.append((f.id, int_to_bytes(value)))
            offset += f.bitwidth
        return metadata, frame[self.nbytes:]

    def encode(self, metadata: list[tuple[int, bytes]], payload: bytes) -> bytes:
        """Header + payload.  Unknown metadata id or a too-wide value raises CodecError;
        a missing field is sent as zero (PI does the same, see the TODO in packet_io_mgr.cpp)."""
        values = [0] * len(self.fields)
        for mid, raw in metadata:
            idx = self._by_id.get(mid)
            if idx is None:
                raise CodecError("Unknown metadata id in PacketOut message")
            values[idx] = bytes_to_int(raw, self.fields[idx].bitwidth)
        header = 0
        offset = 0
        for f, v in zip(self.fields, values):
            header |= v << (self.nbytes * 8 - offset - f.bitwidth)
            offset += f.bitwidth
        return (header.to_bytes(self.nbytes, "big") if self.nbytes else b"") + payload


@dataclass
class P4InfoIndex:
    """Everything the server needs from a P4Info, indexed by id and by name."""

    proto: p4info_pb2.P4Info
    tables: dict[int, TableInfo] = field(default_factory=dict)
    actions: dict[int, ActionInfo] = field(default_factory=dict)
    counters: dict[int, CounterInfo] = field(default_factory=dict)
    direct_counters: dict[int, CounterInfo] = field(default_factory=dict)
    meters: dict[int, str] = field(default_factory=dict)
    direct_meters: dict[int, str] = field(default_factory=dict)
    action_profiles: dict[int, str] = field(default_factory=dict)
    registers: dict[int, RegisterInfo] = field(default_factory=dict)
    digests: dict[int, str] = field(default_factory=dict)
    value_sets: dict[int, str] = field(default_factory=dict)
    packet_in: PacketHeaderCodec | None = None
    packet_out: PacketHeaderCodec | None = None
    _action_by_name: dict[str, int] = field(default_factory=dict)
    _table_by_name: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_proto(cls, proto: p4info_pb2.P4Info) -> "P4InfoIndex":
        """Index a P4Info; raises P4InfoError where PI's p4info_proto_reader would fail
        (invalid match type or action scope, invalid counter unit) and on duplicate ids,
        which PI cannot represent either."""
        idx = cls(proto=proto)
        seen: set[int] = set()

        def claim(p4_id: int, what: str, name: str) -> None:
            if p4_id in seen:
                raise P4InfoError(f"duplicate P4Info id {p4_id:#x} ({what} {name!r})")
            seen.add(p4_id)

        for a in proto.actions:
            claim(a.preamble.id, "action", a.preamble.name)
            params = tuple(ParamInfo(p.id, p.name, p.bitwidth) for p in a.params)
            idx.actions[a.preamble.id] = ActionInfo(a.preamble.id, a.preamble.name, params)
            idx._action_by_name[a.preamble.name] = a.preamble.id
        for t in proto.tables:
            claim(t.preamble.id, "table", t.preamble.name)
            mfs = []
            for mf in t.match_fields:
                if mf.match_type not in _JSON_MATCH_TYPE:
                    raise P4InfoError(
                        f"Invalid match type for field {mf.name!r} of table {t.preamble.name!r}")
                mfs.append(MatchFieldInfo(mf.id, mf.name, mf.bitwidth, mf.match_type))
            scopes = {}
            for ref in t.action_refs:
                if ref.scope not in (ActionScope.TABLE_AND_DEFAULT, ActionScope.TABLE_ONLY,
                                     ActionScope.DEFAULT_ONLY):
                    raise P4InfoError(f"Invalid action scope in table {t.preamble.name!r}")
                scopes[ref.id] = ref.scope
            idx.tables[t.preamble.id] = TableInfo(
                id=t.preamble.id, name=t.preamble.name, match_fields=tuple(mfs),
                action_scopes=scopes, const_default_action_id=t.const_default_action_id,
                is_const=t.is_const_table, implementation_id=t.implementation_id,
                direct_resource_ids=tuple(t.direct_resource_ids),
                supports_idle_timeout=(
                    t.idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL),
                size=t.size)
            idx._table_by_name[t.preamble.name] = t.preamble.id
        for c in proto.counters:
            claim(c.preamble.id, "counter", c.preamble.name)
            if c.spec.unit not in (p4info_pb2.CounterSpec.BYTES, p4info_pb2.CounterSpec.PACKETS,
                                   p4info_pb2.CounterSpec.BOTH):
                raise P4InfoError(f"Invalid counter unit for {c.preamble.name!r}")
            idx.counters[c.preamble.id] = CounterInfo(c.preamble.id, c.preamble.name,
                                                      c.spec.unit, c.size)
        for c in proto.direct_counters:
            claim(c.preamble.id, "direct counter", c.preamble.name)
            idx.direct_counters[c.preamble.id] = CounterInfo(c.preamble.id, c.preamble.name,
                                                             c.spec.unit, 0)
        for m in proto.meters:
            claim(m.preamble.id, "meter", m.preamble.name)
            idx.meters[m.preamble.id] = m.preamble.name
        for m in proto.direct_meters:
            claim(m.preamble.id, "direct meter", m.preamble.name)
            idx.direct_meters[m.preamble.id] = m.preamble.name
        for ap in proto.action_profiles:
            claim(ap.preamble.id, "action profile", ap.preamble.name)
            idx.action_profiles[ap.preamble.id] = ap.preamble.name
        for r in proto.registers:
            claim(r.preamble.id, "register", r.preamble.name)
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
            idx.registers[r.preamble.id] = RegisterInfo(r.preamble.id, r.preamble.name,
                                                        width, r.size)
        for d in proto.digests:
            claim(d.preamble.id, "digest", d.preamble.name)
            idx.digests[d.preamble.id] = d.preamble.name
        for vs in proto.value_sets:
            claim(vs.preamble.id, "value set", vs.preamble.name)
            idx.value_sets[vs.preamble.id] = vs.preamble.name
        for cpm in proto.controller_packet_metadata:
            fields = [PacketMetadataInfo(m.id, m.name, m.bitwidth) for m in cpm.metadata]
            if cpm.preamble.name == "packet_in":
                idx.packet_in = PacketHeaderCodec(fields)
            elif cpm.preamble.name == "packet_out":
                idx.packet_out = PacketHeaderCodec(fields)
        return idx

    # -- lookups -------------------------------------------------------------------------

    def is_valid_id(self, p4_id: int, prefix: int) -> bool:
        """PI's check_p4_id: right id prefix and present in the P4Info."""
        if resource_type(p4_id) != prefix:
            return False
        table = {
            P4Ids.TABLE: self.tables, P4Ids.ACTION: self.actions, P4Ids.COUNTER: self.counters,
            P4Ids.DIRECT_COUNTER: self.direct_counters, P4Ids.METER: self.meters,
            P4Ids.DIRECT_METER: self.direct_meters, P4Ids.ACTION_PROFILE: self.action_profiles,
            P4Ids.REGISTER: self.registers, P4Ids.DIGEST: self.digests,
            P4Ids.VALUE_SET: self.value_sets,
        }.get(prefix)
        return table is not None and p4_id in table

    def action_id(self, name: str) -> int | None:
        return self._action_by_name.get(name)

    def table_id(self, name: str) -> int | None:
        return self._table_by_name.get(name)


# -- P4Info <-> bmv2 JSON binding ---------------------------------------------------------

@dataclass(frozen=True)
class TableBinding:
    """Where each P4Info match field sits in the JSON key (the Switch wants JSON key order)
    and how the JSON spells its match kind (the Switch wants that representation)."""

    json_key_order: tuple[int, ...]  # json_key_order[j] = index into TableInfo.match_fields
    json_match_types: tuple[str, ...]  # json_match_types[j] = JSON key j's "match_type"


@dataclass(frozen=True)
class ActionBinding:
    """Where each P4Info param sits in the JSON runtime_data (the Switch wants JSON order)."""

    json_param_order: tuple[int, ...]  # json_param_order[j] = index into ActionInfo.params


@dataclass
class JsonBinding:
    tables: dict[int, TableBinding]
    actions: dict[int, ActionBinding]


def parse_device_config(raw: bytes) -> dict[str, Any]:
    """The bmv2 JSON as simple_switch_grpc takes it: p4_device_config is the raw JSON bytes."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"p4_device_config is not UTF-8 text (expected the bmv2 JSON): {exc}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"p4_device_config is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("p4_device_config is not a bmv2 JSON object")
    return doc


def _order(p4_names: list[str], json_names: list[str | None]) -> tuple[int, ...] | None:
    """Permutation mapping JSON positions to P4Info positions: by name when every JSON
    element is named after a P4Info one, else positional (older p4c leaves keys unnamed)."""
    if len(p4_names) != len(json_names):
        return None
    if all(n is not None for n in json_names) and sorted(json_names) == sorted(p4_names) \
            and len(set(p4_names)) == len(p4_names):
        return tuple(p4_names.index(n) for n in json_names)  # type: ignore[arg-type]
    return tuple(range(len(p4_names)))


def bind_to_json(idx: P4InfoIndex, doc: dict[str, Any]) -> JsonBinding:
    """See _bind_to_json; a JSON of the wrong shape is a ValueError too, never a crash."""
    try:
        return _bind_to_json(idx, doc)
    except (AttributeError, TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"malformed bmv2 JSON ({type(exc).__name__}: {exc})") from None


def _bind_to_json(idx: P4InfoIndex, doc: dict[str, Any]) -> JsonBinding:
    """Check that every object the P4Info names exists in the bmv2 JSON with the same shape,
    and compute the field orders the Switch needs.  Raises ValueError listing every problem.

    bmv2 itself never compares the two (its PI layer looks objects up by name at each write
    and fails there); rejecting a mismatched pair up front turns a late, per-write failure
    into one clear error at SetForwardingPipelineConfig and keeps the old pipeline.
    Only P4Info -> JSON is checked: the JSON legitimately has more (compiler-generated
    tables such as tbl_act, @hidden objects).
    """
    problems: list[str] = []
    json_tables: dict[str, dict] = {}
    for pipe in doc.get("pipelines", []) or []:
        for t in pipe.get("tables", []) or []:
            json_tables[t.get("name")] = t
    json_actions: dict[str, list[dict]] = {}
    for a in doc.get("actions", []) or []:
        json_actions.setdefault(a.get("name"), []).append(a)

    actions: dict[int, ActionBinding] = {}
    for a in idx.actions.values():
        cands = json_actions.get(a.name)
        if not cands:
            problems.append(f"action {a.name!r} is not in the JSON")
            continue
        p4_names = [p.name for p in a.params]
        bound = None
        for cand in cands:
            rd = cand.get("runtime_data", []) or []
            order = _order(p4_names, [r.get("name") for r in rd])
            if order is None:
                continue
            if all(rd[j].get("bitwidth") == a.params[order[j]].bitwidth for j in range(len(rd))):
                bound = ActionBinding(order)
                break
        if bound is None:
            rd = cands[0].get("runtime_data", []) or []
            problems.append(
                f"action {a.name!r}: P4Info params "
                f"{[(p.name, p.bitwidth) for p in a.params]} do not match JSON runtime_data "
                f"{[(r.get('name'), r.get('bitwidth')) for r in rd]}")
            continue
        actions[a.id] = bound

    tables: dict[int, TableBinding] = {}
    for t in idx.tables.values():
        jt = json_tables.get(t.name)
        if jt is None:
            problems.append(f"table {t.name!r} is not in the JSON")
            continue
        key = jt.get("key", []) or []
        order = _order([mf.name for mf in t.match_fields], [k.get("name") for k in key])
        if order is None:
            problems.append(f"table {t.name!r}: P4Info has {len(t.match_fields)} match fields, "
                            f"the JSON key has {len(key)}")
            continue
        for j, k in enumerate(key):
            mf = t.match_fields[order[j]]
            if k.get("match_type") not in _JSON_MATCH_TYPE[mf.match_type]:
                problems.append(f"table {t.name!r} field {mf.name!r}: P4Info match type "
                                f"{_JSON_MATCH_TYPE[mf.match_type][0]}, JSON "
                                f"{k.get('match_type')}")
        json_table_actions = set(jt.get("actions", []) or [])
        for aid in t.action_scopes:
            a = idx.actions.get(aid)
            if a is None:
                problems.append(f"table {t.name!r} refers to unknown action id {aid:#x}")
            elif a.name not in json_table_actions:
                problems.append(f"table {t.name!r}: action {a.name!r} is not one of its "
                                f"actions in the JSON")
        tables[t.id] = TableBinding(order, tuple(str(k.get("match_type")) for k in key))

    json_counters = {c.get("name"): c for c in doc.get("counter_arrays", []) or []}
    for c in idx.counters.values():
        jc = json_counters.get(c.name)
        if jc is None or jc.get("is_direct"):
            problems.append(f"counter {c.name!r} is not an indirect counter in the JSON")
        elif jc.get("size") != c.size:
            problems.append(f"counter {c.name!r}: P4Info size {c.size}, JSON {jc.get('size')}")
    for c in idx.direct_counters.values():
        jc = json_counters.get(c.name)
        if jc is None or not jc.get("is_direct"):
            problems.append(f"direct counter {c.name!r} is not a direct counter in the JSON")
    json_registers = {r.get("name"): r for r in doc.get("register_arrays", []) or []}
    for r in idx.registers.values():
        jr = json_registers.get(r.name)
        if jr is None:
            problems.append(f"register {r.name!r} is not in the JSON")
        elif jr.get("size") != r.size or jr.get("bitwidth") != r.bitwidth:
            problems.append(f"register {r.name!r}: P4Info {r.size} x bit<{r.bitwidth}>, "
                            f"JSON {jr.get('size')} x bit<{jr.get('bitwidth')}>")
    json_meters = {m.get("name") for m in doc.get("meter_arrays", []) or []}
    for name in list(idx.meters.values()) + list(idx.direct_meters.values()):
        if name not in json_meters:
            problems.append(f"meter {name!r} is not in the JSON")
    if problems:
        raise ValueError("P4Info does not match the bmv2 JSON: " + "; ".join(problems))
    return JsonBinding(tables=tables, actions=actions)
