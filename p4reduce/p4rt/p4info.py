"""The P4Info index: one pipeline's objects by id and by name, with their widths and sizes.

The controller names everything the way the P4 program does ("admission", "admit",
"ingress_port") and needs ids, widths and sizes; softswitch receives ids and needs names,
widths and match kinds; the tests need ids without hard-coding p4c's hashes. All three use
this index, so a name resolves to the same object everywhere.

`P4InfoIndex.from_proto` refuses, with P4InfoError, what PI's p4info_proto_reader refuses
(an invalid match type, action scope or counter unit) and duplicate ids, which PI cannot
represent either.

Names: an object is found by its fully qualified name ("P4ReduceIngress.admission.admission"),
its alias, or a dot-separated suffix of its name ("admission.admission", "admission"); a
suffix that names two objects is refused as ambiguous.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from .codec import P4InfoError, PacketHeaderCodec, PacketMetadataInfo, decode, encode

P4Ids = p4info_pb2.P4Ids
MatchType = p4info_pb2.MatchField.MatchType
ActionScope = p4info_pb2.ActionRef.Scope

_MATCH_TYPES = (
    MatchType.EXACT,
    MatchType.LPM,
    MatchType.TERNARY,
    MatchType.RANGE,
    MatchType.OPTIONAL,
)
_SCOPES = (ActionScope.TABLE_AND_DEFAULT, ActionScope.TABLE_ONLY, ActionScope.DEFAULT_ONLY)
_UNITS = (p4info_pb2.CounterSpec.BYTES, p4info_pb2.CounterSpec.PACKETS, p4info_pb2.CounterSpec.BOTH)


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """A P4Info from its text format (p4c's --p4runtime-files *.txtpb)."""
    info = p4info_pb2.P4Info()
    text_format.Merge(Path(path).read_text(), info)
    return info


def resource_type(p4_id: int) -> int:
    """The P4Ids prefix of an id (its most significant byte), as PI's resource_type_from_id."""
    return (p4_id >> 24) & 0xFF


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

    def param_named(self, name: str) -> ParamInfo:
        for p in self.params:
            if p.name == name:
                return p
        raise P4InfoError(
            f"action {self.name}: no parameter {name!r}; has {[p.name for p in self.params]}"
        )


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
        return any(
            mf.match_type in (MatchType.TERNARY, MatchType.RANGE, MatchType.OPTIONAL)
            for mf in self.match_fields
        )

    def direct_resource(self, prefix: int) -> int:
        for rid in self.direct_resource_ids:
            if resource_type(rid) == prefix:
                return rid
        return 0

    def field_named(self, name: str) -> MatchFieldInfo:
        """A match field by its name or a dot-separated suffix of it ("dst" for
        "hdr.ethernet.dst")."""
        found = [mf for mf in self.match_fields if _named(mf.name, "", name)]
        if len(found) != 1:
            raise P4InfoError(
                f"table {self.name}: {'no' if not found else 'ambiguous'} "
                f"match field {name!r}; has "
                f"{[mf.name for mf in self.match_fields]}"
            )
        return found[0]


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


def _named(name: str, alias: str, wanted: str) -> bool:
    return wanted in (name, alias) or name.endswith("." + wanted)


Info = TypeVar("Info", TableInfo, ActionInfo, CounterInfo, RegisterInfo)


@dataclass
class P4InfoIndex:
    """Everything a controller or a server needs from a P4Info, indexed by id and by name."""

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
    aliases: dict[int, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> "P4InfoIndex":
        return cls.from_proto(load_p4info(path))

    @classmethod
    def from_proto(cls, proto: p4info_pb2.P4Info) -> "P4InfoIndex":
        """Index a P4Info; P4InfoError where PI's p4info_proto_reader would fail."""
        idx = cls(proto=proto)
        seen: set[int] = set()

        def claim(preamble, what: str) -> None:
            if preamble.id in seen:
                raise P4InfoError(
                    f"duplicate P4Info id {preamble.id:#x} ({what} {preamble.name!r})"
                )
            seen.add(preamble.id)
            idx.aliases[preamble.id] = preamble.alias

        for a in proto.actions:
            claim(a.preamble, "action")
            params = tuple(ParamInfo(p.id, p.name, p.bitwidth) for p in a.params)
            idx.actions[a.preamble.id] = ActionInfo(a.preamble.id, a.preamble.name, params)
        for t in proto.tables:
            claim(t.preamble, "table")
            mfs = []
            for mf in t.match_fields:
                if mf.match_type not in _MATCH_TYPES:
                    raise P4InfoError(
                        f"Invalid match type for field {mf.name!r} of table {t.preamble.name!r}"
                    )
                mfs.append(MatchFieldInfo(mf.id, mf.name, mf.bitwidth, mf.match_type))
            scopes = {}
            for ref in t.action_refs:
                if ref.scope not in _SCOPES:
                    raise P4InfoError(f"Invalid action scope in table {t.preamble.name!r}")
                scopes[ref.id] = ref.scope
            idx.tables[t.preamble.id] = TableInfo(
                id=t.preamble.id,
                name=t.preamble.name,
                match_fields=tuple(mfs),
                action_scopes=scopes,
                const_default_action_id=t.const_default_action_id,
                is_const=t.is_const_table,
                implementation_id=t.implementation_id,
                direct_resource_ids=tuple(t.direct_resource_ids),
                supports_idle_timeout=(t.idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL),
                size=t.size,
            )
        for c in proto.counters:
            claim(c.preamble, "counter")
            if c.spec.unit not in _UNITS:
                raise P4InfoError(f"Invalid counter unit for {c.preamble.name!r}")
            idx.counters[c.preamble.id] = CounterInfo(
                c.preamble.id, c.preamble.name, c.spec.unit, c.size
            )
        for c in proto.direct_counters:
            claim(c.preamble, "direct counter")
            idx.direct_counters[c.preamble.id] = CounterInfo(
                c.preamble.id, c.preamble.name, c.spec.unit, 0
            )
        for r in proto.registers:
            claim(r.preamble, "register")
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
            idx.registers[r.preamble.id] = RegisterInfo(
                r.preamble.id, r.preamble.name, width, r.size
            )
        # entities known by name only
        for entities, kind, names in (
            (proto.meters, "meter", idx.meters),
            (proto.direct_meters, "direct meter", idx.direct_meters),
            (proto.action_profiles, "action profile", idx.action_profiles),
            (proto.digests, "digest", idx.digests),
            (proto.value_sets, "value set", idx.value_sets),
        ):
            for e in entities:
                claim(e.preamble, kind)
                names[e.preamble.id] = e.preamble.name
        for cpm in proto.controller_packet_metadata:
            fields = [PacketMetadataInfo(m.id, m.name, m.bitwidth) for m in cpm.metadata]
            if cpm.preamble.name == "packet_in":
                idx.packet_in = PacketHeaderCodec(fields)
            elif cpm.preamble.name == "packet_out":
                idx.packet_out = PacketHeaderCodec(fields)
        return idx

    # -- by id ---------------------------------------------------------------------------

    def is_valid_id(self, p4_id: int, prefix: int) -> bool:
        """PI's check_p4_id: right id prefix and present in the P4Info."""
        if resource_type(p4_id) != prefix:
            return False
        table = {
            P4Ids.TABLE: self.tables,
            P4Ids.ACTION: self.actions,
            P4Ids.COUNTER: self.counters,
            P4Ids.DIRECT_COUNTER: self.direct_counters,
            P4Ids.METER: self.meters,
            P4Ids.DIRECT_METER: self.direct_meters,
            P4Ids.ACTION_PROFILE: self.action_profiles,
            P4Ids.REGISTER: self.registers,
            P4Ids.DIGEST: self.digests,
            P4Ids.VALUE_SET: self.value_sets,
        }.get(prefix)
        return table is not None and p4_id in table

    # -- by name -------------------------------------------------------------------------

    def _find(self, kind: str, items: dict[int, Info], name: str) -> Info:
        exact = [x for x in items.values() if x.name == name]
        found = exact or [
            x for x in items.values() if _named(x.name, self.aliases.get(x.id, ""), name)
        ]
        if len(found) == 1:
            return found[0]
        if not found:
            raise P4InfoError(f"no {kind} named {name!r} in the P4Info")
        raise P4InfoError(f"{kind} name {name!r} is ambiguous: {[x.name for x in found]}")

    def table(self, name: str) -> TableInfo:
        return self._find("table", self.tables, name)

    def has_table(self, name: str) -> bool:
        """Whether the program declares a table of this name: a build may leave a control
        out (the production Tofino build has no drop simulator)."""
        try:
            self.table(name)
        except P4InfoError:
            return False
        return True

    def is_const_table(self, table_id: int) -> bool:
        """Whether the program fixes this table's entries (P4Info `is_const_table`: the
        TNA program's rank_bit, bridge_flags, pair_*). A P4Runtime server reads them back
        but refuses to write them, and deleting one fails (NOT_FOUND: PI keeps no handle
        for them), so a controller may read them and must never write or delete one."""
        t = self.tables.get(table_id)
        return t is not None and t.is_const

    def action(self, name: str) -> ActionInfo:
        return self._find("action", self.actions, name)

    def counter(self, name: str) -> CounterInfo:
        return self._find("counter", self.counters, name)

    def register(self, name: str) -> RegisterInfo:
        return self._find("register", self.registers, name)

    # -- table entries from names (the controller's writes) -------------------------------

    def table_entry(
        self,
        table: str,
        match: dict[str, int],
        action: str | None = None,
        params: dict[str, int] | None = None,
        *,
        default: bool = False,
        priority: int = 0,
    ) -> p4runtime_pb2.TableEntry:
        """A TableEntry from names and ints; exact matches only (all p4reduce tables are
        exact). Unknown or missing fields and params, and values that do not fit, are
        P4InfoError naming the table or action and the field."""
        t = self.table(table)
        entry = p4runtime_pb2.TableEntry(table_id=t.id)
        fields = {f.name: f for f in t.match_fields}
        unknown = set(match) - set(fields)
        if unknown:
            raise P4InfoError(
                f"table {table}: no match field(s) {sorted(unknown)}; has {sorted(fields)}"
            )
        if not default:
            missing = set(fields) - set(match)
            if missing:
                raise P4InfoError(f"table {table}: match field(s) {sorted(missing)} missing")
        for name, value in match.items():
            f = fields[name]
            if f.match_type != MatchType.EXACT:
                raise P4InfoError(f"table {table}: field {name} is not exact")
            m = entry.match.add(field_id=f.id)
            m.exact.value = encode(value, f.bitwidth, f"{table}.{name}")
        if default:
            entry.is_default_action = True
        if priority:
            entry.priority = priority
        if action is not None:
            a = self.action(action)
            if a.id not in t.action_scopes:
                raise P4InfoError(f"action {action} is not an action of table {table}")
            params = params or {}
            known = {p.name for p in a.params}
            if set(params) != known:
                raise P4InfoError(
                    f"action {action}: params {sorted(params)} given, {sorted(known)} expected"
                )
            entry.action.action.action_id = a.id
            for p in a.params:
                entry.action.action.params.add(
                    param_id=p.id, value=encode(params[p.name], p.bitwidth, f"{action}.{p.name}")
                )
        return entry

    def describe_entry(self, entry: p4runtime_pb2.TableEntry) -> dict:
        """A TableEntry read back from a switch, as names and ints (exact matches)."""
        table = self.tables.get(entry.table_id)
        if table is None:
            raise P4InfoError(f"no table with id {entry.table_id:#x} in the P4Info")
        fields = {f.id: f.name for f in table.match_fields}
        out: dict = {
            "table": table.name,
            "match": {fields[m.field_id]: decode(m.exact.value) for m in entry.match},
        }
        if entry.action.HasField("action"):
            act = entry.action.action
            a = self.actions.get(act.action_id)
            if a is None:
                raise P4InfoError(f"no action with id {act.action_id:#x} in the P4Info")
            names = {p.id: p.name for p in a.params}
            out["action"] = a.name
            out["params"] = {names[p.param_id]: decode(p.value) for p in act.params}
        return out
