"""The P4Info bound to a bmv2 JSON: do the two describe the same program, and where does each
P4Info field sit in the JSON (the interpreter wants JSON order and JSON match kinds).

The P4Info itself is indexed by `p4reduce.p4rt` (shared with the controller and the
tests); this module is the part only a bmv2-JSON target needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from p4reduce.p4rt import MatchType, P4InfoIndex

from ..bmv2_json import document

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
    """The bmv2 JSON as simple_switch_grpc takes it: p4_device_config is the raw JSON bytes
    (parsed once per config's bytes, bmv2_json.document: the interpreter reads the same
    document; neither changes it)."""
    try:
        doc = document(raw)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"p4_device_config is not UTF-8 text (expected the bmv2 JSON): {exc}"
        ) from None
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
    if (
        all(n is not None for n in json_names)
        and sorted(json_names) == sorted(p4_names)
        and len(set(p4_names)) == len(p4_names)
    ):
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
                f"{[(r.get('name'), r.get('bitwidth')) for r in rd]}"
            )
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
            problems.append(
                f"table {t.name!r}: P4Info has {len(t.match_fields)} match fields, "
                f"the JSON key has {len(key)}"
            )
            continue
        for j, k in enumerate(key):
            mf = t.match_fields[order[j]]
            if k.get("match_type") not in _JSON_MATCH_TYPE[mf.match_type]:
                problems.append(
                    f"table {t.name!r} field {mf.name!r}: P4Info match type "
                    f"{_JSON_MATCH_TYPE[mf.match_type][0]}, JSON "
                    f"{k.get('match_type')}"
                )
        json_table_actions = set(jt.get("actions", []) or [])
        for aid in t.action_scopes:
            a = idx.actions.get(aid)
            if a is None:
                problems.append(f"table {t.name!r} refers to unknown action id {aid:#x}")
            elif a.name not in json_table_actions:
                problems.append(
                    f"table {t.name!r}: action {a.name!r} is not one of its actions in the JSON"
                )
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
            problems.append(
                f"register {r.name!r}: P4Info {r.size} x bit<{r.bitwidth}>, "
                f"JSON {jr.get('size')} x bit<{jr.get('bitwidth')}>"
            )
    json_meters = {m.get("name") for m in doc.get("meter_arrays", []) or []}
    for name in list(idx.meters.values()) + list(idx.direct_meters.values()):
        if name not in json_meters:
            problems.append(f"meter {name!r} is not in the JSON")
    if problems:
        raise ValueError("P4Info does not match the bmv2 JSON: " + "; ".join(problems))
    return JsonBinding(tables=tables, actions=actions)
