"""P4Info lookups and P4Runtime value encoding.

The controller names everything the way the P4 program does ("admission", "admit",
"ingress_port"), and this module turns names into P4Info ids and Python ints into
P4Runtime's canonical byte strings. Knowing widths from the P4Info, it refuses a value that
does not fit before anything is sent, naming the table/action and field.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

REPO = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO / "p4src" / "build"
DEFAULT_P4INFO = BUILD_DIR / "p4reduce.p4info.txtpb"
DEFAULT_DEVICE_CONFIG = BUILD_DIR / "p4reduce.json"


class P4InfoError(ValueError):
    """A name that is not in the P4Info, or a value that does not fit its field."""


def load_p4info(path: str | Path = DEFAULT_P4INFO) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    text_format.Merge(Path(path).read_text(), info)
    return info


def encode(value: int, bitwidth: int, what: str) -> bytes:
    """Canonical P4Runtime byte string: big-endian, no leading zero bytes (0 -> b'\\x00')."""
    value = int(value)
    if value < 0 or value >= 1 << bitwidth:
        raise P4InfoError(f"{what}={value} does not fit in {bitwidth} bits")
    if value == 0:
        return b"\x00"
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def decode(data: bytes) -> int:
    return int.from_bytes(data, "big")


def _matches(preamble, name: str) -> bool:
    return name in (preamble.name, preamble.alias) or preamble.name.endswith("." + name)


@dataclass
class P4Objects:
    """Name -> P4Info object maps for one pipeline."""
    info: p4info_pb2.P4Info

    def _find(self, kind: str, items, name: str):
        found = [x for x in items if _matches(x.preamble, name)]
        if len(found) == 1:
            return found[0]
        if not found:
            raise P4InfoError(f"no {kind} named {name!r} in the P4Info")
        raise P4InfoError(f"{kind} name {name!r} is ambiguous: "
                          f"{[x.preamble.name for x in found]}")

    def table(self, name: str) -> p4info_pb2.Table:
        return self._find("table", self.info.tables, name)

    def action(self, name: str) -> p4info_pb2.Action:
        return self._find("action", self.info.actions, name)

    def counter(self, name: str) -> p4info_pb2.Counter:
        return self._find("counter", self.info.counters, name)

    def register(self, name: str) -> p4info_pb2.Register:
        return self._find("register", self.info.registers, name)

    def table_entry(self, table: str, match: dict[str, int], action: str | None = None,
                    params: dict[str, int] | None = None, *, default: bool = False,
                    priority: int = 0) -> p4runtime_pb2.TableEntry:
        """A TableEntry from names; exact matches only (all p4reduce tables are exact)."""
        t = self.table(table)
        entry = p4runtime_pb2.TableEntry(table_id=t.preamble.id)
        fields = {f.name: f for f in t.match_fields}
        unknown = set(match) - set(fields)
        if unknown:
            raise P4InfoError(f"table {table}: no match field(s) {sorted(unknown)}; "
                              f"has {sorted(fields)}")
        if not default:
            missing = set(fields) - set(match)
            if missing:
                raise P4InfoError(f"table {table}: match field(s) {sorted(missing)} missing")
        for name, value in match.items():
            f = fields[name]
            if f.match_type != p4info_pb2.MatchField.EXACT:
                raise P4InfoError(f"table {table}: field {name} is not exact")
            m = entry.match.add(field_id=f.id)
            m.exact.value = encode(value, f.bitwidth, f"{table}.{name}")
        if default:
            entry.is_default_action = True
        if priority:
            entry.priority = priority
        if action is not None:
            a = self.action(action)
            allowed = {r.id for r in t.action_refs}
            if a.preamble.id not in allowed:
                raise P4InfoError(f"action {action} is not an action of table {table}")
            params = params or {}
            known = {p.name: p for p in a.params}
            if set(params) != set(known):
                raise P4InfoError(f"action {action}: params {sorted(params)} given, "
                                  f"{sorted(known)} expected")
            entry.action.action.action_id = a.preamble.id
            for p in a.params:
                entry.action.action.params.add(
                    param_id=p.id, value=encode(params[p.name], p.bitwidth,
                                                f"{action}.{p.name}"))
        return entry

    def action_name(self, action_id: int) -> str:
        for a in self.info.actions:
            if a.preamble.id == action_id:
                return a.preamble.name
        raise P4InfoError(f"no action with id {action_id}")

    def describe_entry(self, entry: p4runtime_pb2.TableEntry) -> dict:
        """A TableEntry read back from the switch, as names and ints."""
        table = next(t for t in self.info.tables if t.preamble.id == entry.table_id)
        fields = {f.id: f.name for f in table.match_fields}
        out: dict = {"table": table.preamble.name,
                     "match": {fields[m.field_id]: decode(m.exact.value) for m in entry.match}}
        if entry.action.HasField("action"):
            act = entry.action.action
            a = next(x for x in self.info.actions if x.preamble.id == act.action_id)
            names = {p.id: p.name for p in a.params}
            out["action"] = a.preamble.name
            out["params"] = {names[p.param_id]: decode(p.value) for p in act.params}
        return out
