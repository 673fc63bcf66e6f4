"""Build small bmv2 JSON programs in the shape p4c-bm2-ss emits, for unit tests that must run
without p4c.  The programs compiled by real p4c live in tests/softswitch/p4/.
"""

from __future__ import annotations

import copy
from typing import Any

STD_FIELDS = [
    ["ingress_port", 9, False],
    ["egress_spec", 9, False],
    ["egress_port", 9, False],
    ["instance_type", 32, False],
    ["packet_length", 32, False],
    ["enq_timestamp", 32, False],
    ["enq_qdepth", 19, False],
    ["deq_timedelta", 32, False],
    ["deq_qdepth", 19, False],
    ["ingress_global_timestamp", 48, False],
    ["egress_global_timestamp", 48, False],
    ["mcast_grp", 16, False],
    ["egress_rid", 16, False],
    ["checksum_error", 1, False],
    ["parser_error", 32, False],
    ["priority", 3, False],
    ["_padding", 3, False],
]
ALIASES = [
    ["queueing_metadata.enq_timestamp", ["standard_metadata", "enq_timestamp"]],
    ["queueing_metadata.enq_qdepth", ["standard_metadata", "enq_qdepth"]],
    ["queueing_metadata.deq_timedelta", ["standard_metadata", "deq_timedelta"]],
    ["queueing_metadata.deq_qdepth", ["standard_metadata", "deq_qdepth"]],
    [
        "intrinsic_metadata.ingress_global_timestamp",
        ["standard_metadata", "ingress_global_timestamp"],
    ],
    [
        "intrinsic_metadata.egress_global_timestamp",
        ["standard_metadata", "egress_global_timestamp"],
    ],
    ["intrinsic_metadata.mcast_grp", ["standard_metadata", "mcast_grp"]],
    ["intrinsic_metadata.egress_rid", ["standard_metadata", "egress_rid"]],
    ["intrinsic_metadata.priority", ["standard_metadata", "priority"]],
]
ERRORS = [
    ["NoError", 0],
    ["PacketTooShort", 1],
    ["NoMatch", 2],
    ["StackOutOfBounds", 3],
    ["HeaderTooShort", 4],
    ["ParserTimeout", 5],
    ["ParserInvalidArgument", 6],
]


def f(h: str, name: str) -> dict[str, Any]:
    return {"type": "field", "value": [h, name]}


def hx(v: int) -> dict[str, Any]:
    return {"type": "hexstr", "value": ("-0x%x" % -v) if v < 0 else "0x%x" % v}


def rd(i: int) -> dict[str, Any]:
    return {"type": "runtime_data", "value": i}


def ex(op: str, left: Any, right: Any, **kw: Any) -> dict[str, Any]:
    v = {"op": op, "left": left, "right": right}
    v.update(kw)
    return {"type": "expression", "value": v}


def prim(op: str, *params: Any) -> dict[str, Any]:
    return {"op": op, "parameters": list(params)}


def assign(dst: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    return prim("assign", dst, src)


class Program:
    def __init__(self) -> None:
        self.j: dict[str, Any] = {
            "__meta__": {"version": [2, 23], "compiler": "tests/softswitch/jsonbuild.py"},
            "header_types": [
                {"name": "scalars_0", "id": 0, "fields": []},
                {"name": "standard_metadata", "id": 1, "fields": copy.deepcopy(STD_FIELDS)},
            ],
            "headers": [
                {
                    "name": "scalars",
                    "id": 0,
                    "header_type": "scalars_0",
                    "metadata": True,
                    "pi_omit": True,
                },
                {
                    "name": "standard_metadata",
                    "id": 1,
                    "header_type": "standard_metadata",
                    "metadata": True,
                    "pi_omit": True,
                },
            ],
            "header_stacks": [],
            "header_union_types": [],
            "header_unions": [],
            "header_union_stacks": [],
            "field_lists": [],
            "errors": copy.deepcopy(ERRORS),
            "enums": [],
            "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": []}],
            "parse_vsets": [],
            "deparsers": [{"name": "deparser", "id": 0, "order": [], "primitives": []}],
            "meter_arrays": [],
            "counter_arrays": [],
            "register_arrays": [],
            "calculations": [],
            "learn_lists": [],
            "actions": [],
            "pipelines": [
                {
                    "name": "ingress",
                    "id": 0,
                    "init_table": None,
                    "tables": [],
                    "action_profiles": [],
                    "conditionals": [],
                },
                {
                    "name": "egress",
                    "id": 1,
                    "init_table": None,
                    "tables": [],
                    "action_profiles": [],
                    "conditionals": [],
                },
            ],
            "checksums": [],
            "force_arith": [],
            "extern_instances": [],
            "field_aliases": copy.deepcopy(ALIASES),
        }
        self._ids = 100

    def nid(self) -> int:
        self._ids += 1
        return self._ids

    def scalar(self, name: str, width: int, signed: bool = False) -> dict[str, Any]:
        self.j["header_types"][0]["fields"].append([name, width, signed])
        return f("scalars", name)

    def header(self, name: str, fields: list[tuple[str, int] | tuple[str, int, bool]]) -> None:
        tid = len(self.j["header_types"])
        self.j["header_types"].append(
            {
                "name": name + "_t",
                "id": tid,
                "fields": [[x[0], x[1], x[2] if len(x) > 2 else False] for x in fields],
            }
        )
        self.j["headers"].append(
            {
                "name": name,
                "id": len(self.j["headers"]),
                "header_type": name + "_t",
                "metadata": False,
            }
        )

    def state(
        self,
        name: str,
        ops: list[dict[str, Any]],
        key: list[dict[str, Any]] | None = None,
        transitions: list[dict[str, Any]] | None = None,
    ) -> None:
        self.j["parsers"][0]["parse_states"].append(
            {
                "name": name,
                "id": len(self.j["parsers"][0]["parse_states"]),
                "parser_ops": ops,
                "transition_key": key or [],
                "transitions": transitions
                or [{"type": "default", "value": None, "mask": None, "next_state": None}],
            }
        )

    def deparse(self, *headers: str) -> None:
        self.j["deparsers"][0]["order"] = list(headers)

    def action(self, name: str, params: list[tuple[str, int]], prims: list[dict[str, Any]]) -> int:
        aid = len(self.j["actions"])
        self.j["actions"].append(
            {
                "name": name,
                "id": aid,
                "runtime_data": [{"name": n, "bitwidth": w} for n, w in params],
                "primitives": prims,
            }
        )
        return aid

    def _pl(self, pipeline: str) -> dict[str, Any]:
        return next(p for p in self.j["pipelines"] if p["name"] == pipeline)

    def table(
        self,
        pipeline: str,
        name: str,
        key: list[dict[str, Any]],
        actions: list[int],
        default: int,
        default_data: list[int] | None = None,
        next_tables: dict[str, Any] | None = None,
        base_next: str | None = None,
        match_type: str = "exact",
        const_default: bool = False,
        entries: list[dict[str, Any]] | None = None,
        max_size: int = 1024,
    ) -> None:
        names = [self.j["actions"][a]["name"] for a in actions]
        t = {
            "name": name,
            "id": self.nid(),
            "key": key,
            "match_type": match_type,
            "type": "simple",
            "max_size": max_size,
            "with_counters": False,
            "support_timeout": False,
            "direct_meters": None,
            "action_ids": actions,
            "actions": names,
            "base_default_next": base_next,
            "next_tables": next_tables
            if next_tables is not None
            else {n: base_next for n in names},
            "default_entry": {
                "action_id": default,
                "action_const": const_default,
                "action_data": ["0x%x" % d for d in (default_data or [])],
                "action_entry_const": const_default,
            },
        }
        if entries is not None:
            t["entries"] = entries
        self._pl(pipeline)["tables"].append(t)

    def call(self, pipeline: str, name: str, action: int, next_node: str | None = None) -> None:
        """A p4c 'dummy table': keyless, const default action = a direct action call."""
        self.table(
            pipeline,
            name,
            [],
            [action],
            action,
            next_tables={self.j["actions"][action]["name"]: next_node},
            base_next=next_node,
            const_default=True,
        )

    def cond(
        self,
        pipeline: str,
        name: str,
        expr: dict[str, Any],
        true_next: str | None,
        false_next: str | None,
    ) -> None:
        self._pl(pipeline)["conditionals"].append(
            {
                "name": name,
                "id": self.nid(),
                "expression": expr["value"] if expr.get("type") == "expression" else expr,
                "true_next": true_next,
                "false_next": false_next,
            }
        )

    def init(self, pipeline: str, node: str) -> None:
        self._pl(pipeline)["init_table"] = node

    def register(self, name: str, size: int, width: int) -> None:
        self.j["register_arrays"].append(
            {"name": name, "id": len(self.j["register_arrays"]), "size": size, "bitwidth": width}
        )

    def counter(self, name: str, size: int) -> None:
        self.j["counter_arrays"].append(
            {"name": name, "id": len(self.j["counter_arrays"]), "size": size, "is_direct": False}
        )

    def checksum(
        self,
        name: str,
        target: list[str],
        inputs: list[dict[str, Any]],
        *,
        verify: bool,
        update: bool,
        if_cond: Any = None,
        algo: str = "csum16",
    ) -> None:
        """A calculation `algo` over `inputs` and a checksum `name` of it into field
        `target` (header, field), verified and/or updated, under `if_cond` (None: always)."""
        calc = f"{name}_calc"
        self.j["calculations"].append(
            {"name": calc, "id": len(self.j["calculations"]), "algo": algo, "input": inputs}
        )
        self.j["checksums"].append(
            {
                "name": name,
                "id": len(self.j["checksums"]),
                "target": target,
                "type": "generic",
                "calculation": calc,
                "verify": verify,
                "update": update,
                "if_cond": if_cond,
            }
        )
