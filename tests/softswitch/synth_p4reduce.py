"""A synthetic bmv2 JSON shaped like p4reduce's hot path (LANES 32-bit lanes, each a register
read + add + overflow check + register write per packet), for throughput measurement before
(and independently of) the real p4c output."""

from __future__ import annotations

import json

from jsonbuild import Program, assign, ex, f, hx, prim, rd

LANES = 64
M32 = 0xFFFFFFFF


def build(lanes: int = LANES) -> str:
    p = Program()
    p.header("ethernet", [("dst", 48), ("src", 48), ("etype", 16)])
    p.header("agg", [("slot", 16), ("flags", 16)])
    p.header("values", [(f"v{i}", 32) for i in range(lanes)])
    stored = p.scalar("stored", 32)
    s = p.scalar("sum", 32)
    ovf = p.scalar("lane_overflow", 32)
    idx = p.scalar("slot_index", 16)
    p.state(
        "start",
        [prim("extract", {"type": "regular", "value": "ethernet"})],
        key=[f("ethernet", "etype")],
        transitions=[
            {"type": "hexstr", "value": "0x88b5", "mask": None, "next_state": "agg"},
            {"type": "default", "value": None, "mask": None, "next_state": None},
        ],
    )
    p.state(
        "agg",
        [
            prim("extract", {"type": "regular", "value": "agg"}),
            prim("extract", {"type": "regular", "value": "values"}),
        ],
    )
    for k in p.j["parsers"][0]["parse_states"]:
        for op in k["parser_ops"]:
            op["op"] = "extract"
    p.deparse("ethernet", "agg", "values")
    for i in range(lanes):
        p.register(f"lane_{i}", 1024, 32)
    prims = [assign(ovf, hx(0)), assign(idx, f("agg", "slot"))]
    for i in range(lanes):
        v = f("values", f"v{i}")
        prims += [
            prim("register_read", stored, {"type": "register_array", "value": f"lane_{i}"}, idx),
            assign(s, ex("&", ex("+", stored, v), hx(M32))),
            assign(ovf, ex("&", ex("|", ovf, ex("&", ex("^", s, stored), ex("^", s, v))), hx(M32))),
            prim("register_write", {"type": "register_array", "value": f"lane_{i}"}, idx, s),
            assign(v, s),
        ]
    add = p.action("add_data", [], prims)
    fwd = p.action("fwd", [("port", 9)], [assign(f("standard_metadata", "egress_spec"), rd(0))])
    drop = p.action(
        "drop", [], [prim("mark_to_drop", {"type": "header", "value": "standard_metadata"})]
    )
    p.cond("ingress", "node_valid", ex("d2b", None, f("values", "$valid$")), "tbl_add", "forward")
    p.call("ingress", "tbl_add", add, "forward")
    p.table(
        "ingress",
        "forward",
        [
            {
                "match_type": "exact",
                "name": "port",
                "target": ["standard_metadata", "ingress_port"],
                "mask": None,
            }
        ],
        [fwd, drop],
        drop,
    )
    p.init("ingress", "node_valid")
    return json.dumps(p.j)
