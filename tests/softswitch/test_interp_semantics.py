"""Semantics checks: arithmetic widths, tables of each match kind, registers, counters,
checksums, hashes, multicast, exit, egress drop.  Expected values come from plain Python on
P4's rules, zlib/scapy, never from the interpreter."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from jsonbuild import Program, assign, ex, f, hx, prim, rd
from softswitch.errors import InvalidArgument
from softswitch.interp.codegen import program_of
from softswitch.interp.hashes import csum16_of_int
from softswitch.interp.pipeline import Pipeline
from softswitch.switch import Switch

STD = "standard_metadata"
HDR = {"type": "header", "value": "o"}


def mask(e: dict, w: int) -> dict:
    return ex("&", e, hx((1 << w) - 1))


def one_action_program(
    out_fields: list[tuple], prims: list[dict], in_fields: list[tuple] | None = None
) -> Program:
    """Parser extracts header 'i' (if given); one action fills header 'o' which is emitted first."""
    p = Program()
    if in_fields:
        p.header("i", in_fields)
        p.state("start", [prim("extract", {"type": "regular", "value": "i"})])
    else:
        p.state("start", [])
    p.header("o", out_fields)
    p.deparse("o", *(["i"] if in_fields else []))
    a = p.action("act", [], [prim("add_header", HDR)] + prims)
    p.call("ingress", "tbl_act", a)
    p.init("ingress", "tbl_act")
    return p


def run(p: Program, frame: bytes = b"", port: int = 0) -> list[tuple[int, bytes]]:
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    return s.process(port, frame)


# -- arithmetic --------------------------------------------------------------------------
def test_unsigned_wraparound_and_widths() -> None:
    a, b = 250, 10
    p = one_action_program(
        [("sum", 8), ("diff", 8), ("prod", 8), ("neg", 8), ("shl", 8), ("shr", 8), ("wide", 16)],
        [
            assign(f("o", "sum"), mask(ex("+", f("i", "a"), f("i", "b")), 8)),
            assign(f("o", "diff"), mask(ex("-", f("i", "b"), f("i", "a")), 8)),
            assign(f("o", "prod"), mask(ex("*", f("i", "a"), f("i", "b")), 8)),
            assign(f("o", "neg"), mask(ex("~", None, f("i", "a")), 8)),
            assign(f("o", "shl"), mask(ex("<<", f("i", "a"), hx(3)), 8)),
            assign(f("o", "shr"), ex(">>", f("i", "a"), hx(3))),
            # no mask in the expression: the 16-bit destination truncates (bmv2 Field::set)
            assign(f("o", "wide"), ex("*", f("i", "a"), hx(1000))),
        ],
        [("a", 8), ("b", 8)],
    )
    out = run(p, bytes([a, b]))
    exp = struct.pack(
        "!BBBBBBH",
        (a + b) % 256,
        (b - a) % 256,
        (a * b) % 256,
        (~a) % 256,
        (a << 3) % 256,
        a >> 3,
        (a * 1000) % 65536,
    ) + bytes([a, b])
    assert out == [(0, exp)]


def test_signed_fields_casts_and_saturation() -> None:
    p = one_action_program(
        [("s", 8, True), ("t", 8, True), ("u", 8), ("sat", 8, True), ("usat", 8), ("big", 8, True)],
        [
            assign(f("o", "s"), ex("-", hx(0), hx(3))),  # -3 -> 0xfd
            assign(f("o", "t"), ex("two_comp_mod", hx(200), hx(8))),  # (int<8>)200 = -56
            assign(f("o", "u"), mask(ex("two_comp_mod", hx(-1), hx(8)), 8)),
            assign(f("o", "sat"), ex("sat_cast", ex("+", hx(100), hx(100)), hx(8))),  # 127
            assign(f("o", "usat"), ex("usat_cast", ex("-", hx(3), hx(10)), hx(8))),  # 0
            assign(f("o", "big"), hx(0x1FF)),
        ],
    )  # wraps to -1
    out = run(p)
    assert out == [(0, bytes([0xFD, (-56) & 0xFF, 0xFF, 127, 0, 0xFF]))]


def test_slices_concat_ternary_division_bools() -> None:
    x = 0xABCD
    p = one_action_program(
        [
            ("hi", 8),
            ("lo4", 4),
            ("pad", 4),
            ("cat", 16),
            ("tern", 8),
            ("div", 8),
            ("mod", 8),
            ("b", 8),
        ],
        [
            assign(f("o", "hi"), mask(ex(">>", f("i", "x"), hx(8)), 8)),  # x[15:8]
            assign(f("o", "lo4"), mask(f("i", "x"), 4)),  # x[3:0]
            assign(
                f("o", "cat"),
                ex(
                    "|",
                    mask(ex("<<", mask(f("i", "x"), 8), hx(8)), 16),
                    mask(ex(">>", f("i", "x"), hx(8)), 8),
                ),
            ),  # x[7:0] ++ x[15:8]
            assign(
                f("o", "tern"), ex("?", hx(1), hx(2), cond=ex("==", f("i", "x"), hx(x))["value"])
            ),
            assign(f("o", "div"), ex("/", hx(200), hx(7))),
            assign(f("o", "mod"), ex("%", hx(200), hx(7))),
            assign(
                f("o", "b"),
                ex(
                    "b2d",
                    None,
                    ex(
                        "and",
                        ex("d2b", None, hx(1)),
                        ex("not", None, ex(">", f("i", "x"), hx(0xFFFF))),
                    ),
                ),
            ),
        ],
        [("x", 16)],
    )
    out = run(p, struct.pack("!H", x))
    exp = (
        bytes([0xAB, (0xD << 4) | 0]) + struct.pack("!H", 0xCDAB) + bytes([1, 200 // 7, 200 % 7, 1])
    )
    assert out == [(0, exp + struct.pack("!H", x))]


def test_set_valid_zeroes_fields_and_packet_length() -> None:
    """add_header on an invalid header zeroes its fields (bmv2 Header::reset) and grows the
    packet-length register that egress sees as standard_metadata.packet_length."""
    p = Program()
    p.header("h", [("a", 16)])
    p.state("start", [])
    p.header("o", [("len", 32), ("a", 16)])
    p.deparse("o", "h")
    a = p.action("ing", [], [prim("add_header", {"type": "header", "value": "h"})])
    p.call("ingress", "t_ing", a)
    p.init("ingress", "t_ing")
    e = p.action(
        "eg",
        [],
        [
            prim("add_header", HDR),
            assign(f("o", "len"), f(STD, "packet_length")),
            assign(f("o", "a"), f("h", "a")),
        ],
    )
    p.call("egress", "t_eg", e)
    p.init("egress", "t_eg")
    out = run(p, b"\x01\x02\x03")
    # the field is loaded from the register when egress starts: 3 bytes + h (2); o is added later
    assert out == [(0, struct.pack("!IH", 3 + 2, 0) + b"\x00\x00" + b"\x01\x02\x03")]


def test_exit_stops_the_control_and_egress_spec_init() -> None:
    p = Program()
    p.state("start", [])
    p.header("o", [("x", 8), ("es", 16)])
    p.deparse("o")
    a1 = p.action(
        "first",
        [],
        [
            prim("add_header", HDR),
            assign(f("o", "x"), hx(1)),
            assign(f(STD, "egress_spec"), hx(3)),
            prim("exit"),
        ],
    )
    a2 = p.action("second", [], [assign(f("o", "x"), hx(2))])
    p.call("ingress", "t1", a1, "t2")
    p.call("ingress", "t2", a2)
    p.init("ingress", "t1")
    e = p.action("eg", [], [assign(f("o", "es"), f(STD, "egress_spec"))])
    p.call("egress", "te", e)
    p.init("egress", "te")
    # egress still runs after an ingress exit; there egress_spec starts at 512 -> 9 bits -> 0
    assert run(p) == [(3, b"\x01\x00\x00")]


def test_every_path_through_joins_of_the_control_graph() -> None:
    """Nodes several others lead to run as blocks of one generated function: a path that
    skips one block on its way to a later one, and a path through both, each take every
    step of its own and no other (the steps are recorded in o.x, two bits each)."""
    p = Program()
    p.header("i", [("a", 8)])
    p.state("start", [prim("extract", {"type": "regular", "value": "i"})])
    p.header("o", [("x", 32)])
    p.deparse("o")
    steps = {
        k: p.action(
            f"step{k}",
            [],
            [assign(f("o", "x"), mask(ex("|", ex("<<", f("o", "x"), hx(2)), hx(k)), 32))],
        )
        for k in (1, 2, 3)
    }

    def chain(name: str, k: int, n: int, last_next: str | None) -> str:
        """n calls of step k, one after another: a node too big to be written at each
        of its predecessors."""
        for j in range(n):
            p.call(
                "ingress", f"{name}_{j}", steps[k], f"{name}_{j + 1}" if j + 1 < n else last_next
            )
        return f"{name}_0"

    def bit(b: int) -> dict:
        return ex("!=", ex("&", f("i", "a"), hx(b)), hx(0))

    p.call("ingress", "t0", p.action("add", [], [prim("add_header", HDR)]), "c1")
    j2 = chain("j2", 1, 7, None)
    p.cond("ingress", "j1", bit(2), chain("ja", 2, 7, j2), chain("jb", 3, 7, j2))
    p.cond("ingress", "c1", bit(1), chain("t1", 1, 1, "j1"), "c3")
    p.cond("ingress", "c3", bit(4), "j1", j2)
    p.init("ingress", "t0")

    def expected(a: int) -> int:
        path = [1] if a & 1 else []
        if a & 1 or a & 4:  # through j1
            path += [2] * 7 if a & 2 else [3] * 7
        x = 0
        for k in path + [1] * 7:  # then j2
            x = ((x << 2) | k) & 0xFFFFFFFF
        return x

    for a in range(8):
        assert run(p, bytes([a])) == [(0, struct.pack("!I", expected(a)))], a


def test_a_node_too_deep_to_inline_is_a_block_for_every_path_to_it() -> None:
    """A small node referenced past the inlining depth becomes a block, and then every
    reference to it is a jump, a shallow one too: the path that skips the block before it
    must skip that block's steps (o.x records the steps taken, two bits each)."""
    p = Program()
    p.header("i", [("a", 8)])
    p.state("start", [prim("extract", {"type": "regular", "value": "i"})])
    p.header("o", [("x", 64)])
    p.deparse("o")

    def step(k: int) -> int:
        x = f("o", "x")
        return p.action(f"step{k}", [], [assign(x, mask(ex("|", ex("<<", x, hx(2)), hx(k)), 64))])

    one, two = step(1), step(2)
    p.call("ingress", "t0", p.action("add", [], [prim("add_header", HDR)]), "e")
    bit = {b: ex("!=", ex("&", f("i", "a"), hx(b)), hx(0)) for b in (1, 2)}
    p.cond("ingress", "e", bit[1], "d_0", "g")
    p.cond("ingress", "g", bit[2], "d_0", "x")
    depth = 26  # one more than controls._MAX_INLINE_DEPTH: the last returns "x"
    for k in range(depth):
        p.call("ingress", f"d_{k}", one, f"d_{k + 1}" if k + 1 < depth else "x")
    p.call("ingress", "x", two)
    p.init("ingress", "t0")

    def expected(a: int) -> int:
        x = 0
        for k in ([1] * depth if a & 3 else []) + [2]:
            x = ((x << 2) | k) & (1 << 64) - 1
        return x

    for a in range(4):
        assert run(p, bytes([a])) == [(0, struct.pack("!Q", expected(a)))], a


def test_mark_to_drop_in_egress_drops() -> None:
    p = Program()
    p.state("start", [])
    p.deparse()
    d = p.action("drop", [], [prim("mark_to_drop", {"type": "header", "value": STD})])
    p.call("egress", "te", d)
    p.init("egress", "te")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    assert s.process(0, b"abc") == []
    assert s.stats()["drop_egress"] == 1


def test_action_with_jumps() -> None:
    # if (i.a == 5) { o.x = 1; } else { o.x = 2; }  lowered with _jump_if_zero / _jump
    p = one_action_program(
        [("x", 8)],
        [
            prim("_jump_if_zero", ex("b2d", None, ex("==", f("i", "a"), hx(5))), hx(4)),
            assign(f("o", "x"), hx(1)),
            prim("_jump", hx(5)),
            prim("no_op"),
            assign(f("o", "x"), hx(2)),
        ],
        [("a", 8)],
    )
    # primitive 0 is add_header, so the targets above are shifted by one
    acts = p.j["actions"][0]["primitives"]
    acts[1]["parameters"][1] = hx(5)
    acts[3]["parameters"][0] = hx(6)
    assert run(p, b"\x05") == [(0, b"\x01\x05")]
    assert run(p, b"\x06") == [(0, b"\x02\x06")]


# -- tables --------------------------------------------------------------------------------
def table_program(keys: list[tuple[str, str, int]], match_type: str) -> Program:
    p = Program()
    p.header("i", [(n, w) for n, _mt, w in keys])
    p.state("start", [prim("extract", {"type": "regular", "value": "i"})])
    p.header("o", [("v", 8), ("hit", 8)])
    p.deparse("o", "i")
    setv = p.action("setv", [("v", 8)], [assign(f("o", "v"), rd(0))])
    miss = p.action("miss", [], [assign(f("o", "v"), hx(0xEE))])
    add = p.action("add_o", [], [prim("add_header", HDR)])
    hit = p.action("mark_hit", [], [assign(f("o", "hit"), hx(1))])
    p.call("ingress", "t_add", add, "t")
    p.table(
        "ingress",
        "t",
        [{"match_type": mt, "name": n, "target": ["i", n], "mask": None} for n, mt, _w in keys],
        [setv, miss],
        miss,
        match_type=match_type,
        next_tables={"__HIT__": "t_hit", "__MISS__": None},
    )
    p.call("ingress", "t_hit", hit)
    p.init("ingress", "t_add")
    return p


def lookup(s: Switch, key: bytes) -> tuple[int, int]:
    out = s.process(0, key)
    assert len(out) == 1
    return out[0][1][0], out[0][1][1]


def test_exact_multi_field_and_hit_miss_branch() -> None:
    p = table_program([("a", "exact", 8), ("b", "exact", 16)], "exact")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    s.table_add("t", [1, 0x0203], "setv", [7])
    assert lookup(s, b"\x01\x02\x03") == (7, 1)
    assert lookup(s, b"\x01\x02\x04") == (0xEE, 0)


def test_lpm_longest_prefix_wins() -> None:
    p = table_program([("dst", "lpm", 32)], "lpm")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    s.table_add("t", [(0x0A000000, 8)], "setv", [8])
    s.table_add("t", [(0x0A010000, 16)], "setv", [16])
    s.table_add("t", [(0x0A010100, 24)], "setv", [24])
    s.table_add("t", [(0, 0)], "setv", [0])
    assert lookup(s, bytes([10, 1, 1, 9]))[0] == 24
    assert lookup(s, bytes([10, 1, 2, 9]))[0] == 16
    assert lookup(s, bytes([10, 2, 2, 9]))[0] == 8
    assert lookup(s, bytes([11, 2, 2, 9]))[0] == 0


def test_ternary_priority_and_ties() -> None:
    p = table_program([("a", "ternary", 8)], "ternary")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    s.table_add("t", [(0x00, 0x00)], "setv", [1], priority=1)
    s.table_add("t", [(0x10, 0xF0)], "setv", [2], priority=10)
    s.table_add("t", [(0x12, 0xFF)], "setv", [3], priority=5)
    assert lookup(s, b"\x12")[0] == 2  # P4Runtime: larger priority wins
    assert lookup(s, b"\x22")[0] == 1
    s.table_add("t", [(0x02, 0x0F)], "setv", [4], priority=10)  # same priority as 0x10/0xF0
    assert lookup(s, b"\x12")[0] == 2  # tie: the older entry (lower handle) wins
    with pytest.raises(InvalidArgument):
        s.table_add("t", [(0x55, 0xFF)], "setv", [5])  # priority required


def test_range_and_optional() -> None:
    p = table_program([("a", "range", 8), ("b", "optional", 8)], "range")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    s.table_add("t", [(10, 20), None], "setv", [1], priority=1)
    s.table_add("t", [(15, 15), 7], "setv", [2], priority=2)
    assert lookup(s, b"\x0f\x07")[0] == 2
    assert lookup(s, b"\x0f\x08")[0] == 1
    assert lookup(s, b"\x15\x07")[0] == 0xEE


def test_const_entries_and_const_default() -> None:
    p = table_program([("a", "ternary", 8)], "ternary")
    t = p.j["pipelines"][0]["tables"][1]
    t["default_entry"]["action_const"] = t["default_entry"]["action_entry_const"] = True
    t["entries"] = [  # p4c: first entry gets the smallest priority number = highest priority
        {
            "match_key": [{"match_type": "ternary", "key": "0x10", "mask": "0xf0"}],
            "action_entry": {"action_id": 0, "action_data": ["0x01"]},
            "priority": 1,
        },
        {
            "match_key": [{"match_type": "ternary", "key": "0x00", "mask": "0x00"}],
            "action_entry": {"action_id": 0, "action_data": ["0x02"]},
            "priority": 2,
        },
    ]
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    assert lookup(s, b"\x1f")[0] == 1
    assert lookup(s, b"\x2f")[0] == 2

    with pytest.raises(InvalidArgument):
        s.table_add("t", [(1, 1)], "setv", [1], priority=3)
    with pytest.raises(InvalidArgument):
        s.table_set_default("t", "setv", [1])
    assert len(s.table_entries("t")) == 2


def test_action_run_switch_next_tables() -> None:
    p = Program()
    p.header("i", [("a", 8)])
    p.state("start", [prim("extract", {"type": "regular", "value": "i"})])
    p.header("o", [("path", 8)])
    p.deparse("o")
    add = p.action("add_o", [], [prim("add_header", HDR)])
    a1 = p.action("one", [], [])
    a2 = p.action("two", [], [])
    m1 = p.action("mark1", [], [assign(f("o", "path"), hx(1))])
    m2 = p.action("mark2", [], [assign(f("o", "path"), hx(2))])
    p.call("ingress", "t_add", add, "t")
    p.table(
        "ingress",
        "t",
        [{"match_type": "exact", "name": "a", "target": ["i", "a"], "mask": None}],
        [a1, a2],
        a2,
        next_tables={"one": "t_m1", "two": "t_m2"},
    )
    p.call("ingress", "t_m1", m1)
    p.call("ingress", "t_m2", m2)
    p.init("ingress", "t_add")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    s.table_add("t", [4], "one", [])
    assert s.process(0, b"\x04") == [(0, b"\x01")]
    assert s.process(0, b"\x05") == [(0, b"\x02")]


# -- registers, counters ---------------------------------------------------------------------
def test_registers_and_counters() -> None:
    p = Program()
    p.header("i", [("idx", 8), ("v", 32)])
    p.state("start", [prim("extract", {"type": "regular", "value": "i"})])
    p.deparse("i")
    p.register("acc", 4, 32)
    p.counter("cnt", 4)
    tmp = p.scalar("tmp", 32)
    reg = {"type": "register_array", "value": "acc"}
    a = p.action(
        "accum",
        [],
        [
            prim("register_read", tmp, reg, f("i", "idx")),
            assign(tmp, mask(ex("+", tmp, f("i", "v")), 32)),
            prim("register_write", reg, f("i", "idx"), tmp),
            assign(f("i", "v"), tmp),
            prim("count", {"type": "counter_array", "value": "cnt"}, f("i", "idx")),
        ],
    )
    p.call("ingress", "t", a)
    p.init("ingress", "t")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    outs = [s.process(0, struct.pack("!BI", 1, v) + b"pad")[0][1] for v in (5, 0xFFFFFFFF, 10)]
    assert [struct.unpack("!BI", o[:5])[1] for o in outs] == [5, 4, 14]  # wraps at 2**32
    assert s.register_read("acc", 1) == 14
    assert s.counter_read("cnt", 1) == (3 * 8, 3)
    # out-of-range index: bmv2 leaves the destination and the register untouched
    o = s.process(0, struct.pack("!BI", 9, 7))[0][1]
    assert struct.unpack("!BI", o)[1] == 7
    s.register_write("acc", 2, 100)
    assert struct.unpack("!BI", s.process(0, struct.pack("!BI", 2, 1))[0][1])[1] == 101
    with pytest.raises(InvalidArgument):
        s.register_write("acc", 2, 1 << 32)
    assert s.register_size("acc") == 4 and s.counter_size("cnt") == 4
    # reloading gives fresh state
    s.load_pipeline(json.dumps(p.j))
    assert s.register_read("acc", 1) == 0


# -- checksums and hashes --------------------------------------------------------------------
def ipv4_program(update: bool, verify: bool) -> Program:
    p = Program()
    p.header("ethernet", [("dst", 48), ("src", 48), ("etype", 16)])
    ip = [
        ("version", 4),
        ("ihl", 4),
        ("diffserv", 8),
        ("totalLen", 16),
        ("identification", 16),
        ("flags", 3),
        ("fragOffset", 13),
        ("ttl", 8),
        ("protocol", 8),
        ("hdrChecksum", 16),
        ("srcAddr", 32),
        ("dstAddr", 32),
    ]
    p.header("ipv4", ip)
    p.state(
        "start",
        [prim("extract", {"type": "regular", "value": "ethernet"})],
        key=[f("ethernet", "etype")],
        transitions=[
            {"type": "hexstr", "value": "0x0800", "mask": None, "next_state": "ip"},
            {"type": "default", "value": None, "mask": None, "next_state": None},
        ],
    )
    p.state("ip", [prim("extract", {"type": "regular", "value": "ipv4"})])
    p.deparse("ethernet", "ipv4")
    p.checksum(
        "cksum",
        ["ipv4", "hdrChecksum"],
        [f("ipv4", n) for n, _w in ip if n != "hdrChecksum"],
        verify=verify,
        update=update,
        if_cond=ex("d2b", None, f("ipv4", "$valid$"))["value"],
    )
    a = p.action(
        "dec_ttl",
        [],
        [
            assign(f("ipv4", "ttl"), mask(ex("+", f("ipv4", "ttl"), hx(0xFF)), 8)),
            assign(
                f("ethernet", "src"), ex("b2d", None, ex("d2b", None, f(STD, "checksum_error")))
            ),
            assign(f(STD, "egress_spec"), hx(1)),
        ],
    )
    p.call("ingress", "t", a)
    p.init("ingress", "t")
    return p


def test_ipv4_checksum_update_matches_scapy() -> None:
    s = Switch()
    s.load_pipeline(json.dumps(ipv4_program(update=True, verify=True).j))
    pkt = (
        Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:00")
        / IP(src="10.0.0.1", dst="10.0.0.2", ttl=64)
        / UDP(sport=1, dport=2)
        / b"hi"
    )
    out = s.process(0, bytes(pkt))
    exp = pkt.copy()
    exp[IP].ttl = 63
    del exp[IP].chksum
    assert out == [(1, bytes(Ether(bytes(exp))))]
    # a corrupted checksum is detected (checksum_error copied into eth.src by the program)
    bad = bytearray(bytes(pkt))
    bad[14 + 10] ^= 0xFF
    out = s.process(0, bytes(bad))
    assert out[0][1][6:12] == b"\x00\x00\x00\x00\x00\x01"
    assert s.stats()["checksum_errors"] == 1


def crc16_arc_bitwise(data: bytes) -> int:
    """Reference CRC-16/ARC (poly 0x8005 reflected, init 0): bit by bit, MSB-first form."""

    def refl(v: int, n: int) -> int:
        return int(format(v, f"0{n}b")[::-1], 2)

    crc = 0
    for b in data:
        crc ^= refl(b, 8) << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return refl(crc, 16)


def test_crc16_reference_check_value() -> None:
    assert crc16_arc_bitwise(b"123456789") == 0xBB3D  # published CRC-16/ARC check value


def rfc1071_bitwise(value: int, nbits: int) -> int:
    """The checksum of an nbits-bit string as RFC 1071 states it: zero-padded to 16-bit
    words, summed with end-around carry one word at a time, complemented."""
    data = (value << (-nbits % 16)).to_bytes(-(-nbits // 16) * 2, "big")
    total = 0
    for (word,) in struct.iter_unpack("!H", data):
        total += word
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@given(st.integers(0, 400).flatmap(lambda n: st.tuples(st.integers(0, (1 << n) - 1), st.just(n))))
@example((0, 0))
@example((0, 160))
@example((0xFFFF, 16))
@example((0xFFFF << 16 | 0xFFFF, 32))
@example((0x1234 << 16 | (0xFFFF - 0x1234), 32))  # words summing to 0xFFFF: checksum 0
@example((0x5, 3))
def test_csum16_on_the_integer_is_rfc1071_on_its_bytes(case: tuple[int, int]) -> None:
    """The calculations' checksum over the packed fields as one integer (no bytes built)
    equals RFC 1071's word-by-word sum, zero and all-ones sums included."""
    value, nbits = case
    assert csum16_of_int(value, nbits) == rfc1071_bitwise(value, nbits)


# inputs of a csum16 calculation: runs of fields of odd widths (one signed), a constant,
# a whole header, each header valid or not: every bit offset mod 16 is reached
CSUM_A = [("a0", 3), ("a1", 13), ("a2", 5), ("a3", 32, True), ("a4", 11)]
CSUM_B = [("b0", 7), ("b1", 48), ("b2", 9)]


@given(
    st.lists(st.integers(0, (1 << 48) - 1), min_size=8, max_size=8),
    st.booleans(),
    st.booleans(),
    st.integers(0, (1 << 20) - 1),
)
@example([0] * 8, True, True, 0)
@example([0] * 8, False, False, 0)
@example([0, 0, 0, 0xFFFF, 0, 0, 0, 0], True, False, 0)
def test_csum16_calculation_is_rfc1071_on_its_bit_string(
    values: list[int], a_valid: bool, b_valid: bool, const: int
) -> None:
    """A generated csum16 calculation (which sums its inputs as residues mod 0xFFFF, never
    building the bit string) equals RFC 1071 over the bit string bmv2 would build: the
    valid headers' fields MSB first (a signed field as its two's complement), the
    constant, the whole header, zero-padded."""
    p = Program()
    p.header("a", CSUM_A)
    p.header("b", CSUM_B)
    p.state("start", [])
    inputs = [f("a", n) for n, *_ in CSUM_A[:3]]
    inputs += [{"type": "hexstr", "value": hex(const), "bitwidth": 20}]
    inputs += [{"type": "header", "value": "b"}]
    inputs += [f("a", n) for n, *_ in CSUM_A[3:]]
    p.checksum("k", ["a", "a1"], inputs, verify=True, update=False)
    c = program_of(json.dumps(p.j).encode()).instantiate()
    layout = c.layout
    F, V = layout.zero_phv()
    X = Pipeline(c).X0[:]
    fields = CSUM_A + CSUM_B
    a, b = layout.headers["a"], layout.headers["b"]
    for k, ((_n, w, *sg), v) in enumerate(zip(fields, values)):
        v &= (1 << w) - 1
        if sg and v >> (w - 1):
            v -= 1 << w  # the signed field holds its negative value
        F[(a.base + k) if k < len(CSUM_A) else (b.base + k - len(CSUM_A))] = v
    V[a.index], V[b.index] = int(a_valid), int(b_valid)
    bits: list[tuple[int, int]] = []  # (value, width) of the bit string, in order
    if a_valid:
        bits += [(values[k], w) for k, (_n, w, *_s) in enumerate(CSUM_A[:3])]
    bits.append((const, 20))
    if b_valid:
        bits += [(values[len(CSUM_A) + k], w) for k, (_n, w) in enumerate(CSUM_B)]
    if a_valid:
        bits += [(values[3 + k], w) for k, (_n, w, *_s) in enumerate(CSUM_A[3:])]
    string, nbits = 0, 0
    for v, w in bits:
        string, nbits = (string << w) | (v & ((1 << w) - 1)), nbits + w
    assert c.ns["CALC0"](F, V, X) == rfc1071_bitwise(string, nbits)


@pytest.mark.parametrize("algo", ["crc32", "crc16", "csum16", "identity"])
def test_hash_based_offset(algo: str) -> None:
    p = Program()
    p.header("i", [("a", 16), ("b", 32), ("c", 4), ("d", 4)])
    p.state("start", [prim("extract", {"type": "regular", "value": "i"})])
    p.header("o", [("h", 32)])
    p.deparse("o")
    p.j["calculations"].append(
        {
            "name": "hc",
            "id": 0,
            "algo": algo,
            "input": [
                f("i", "a"),
                f("i", "b"),
                f("i", "c"),
                {"type": "hexstr", "value": "0x5", "bitwidth": 4},
            ],
        }
    )
    a = p.action(
        "hash",
        [],
        [
            prim("add_header", HDR),
            prim(
                "modify_field_with_hash_based_offset",
                f("o", "h"),
                hx(100),
                {"type": "calculation", "value": "hc"},
                hx(0x10000),
            ),
        ],
    )
    p.call("ingress", "t", a)
    p.init("ingress", "t")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    inp = struct.pack("!HIB", 0x1234, 0xDEADBEEF, 0x9A)
    buf = struct.pack("!HIB", 0x1234, 0xDEADBEEF, 0x95)  # c=9 then the 4-bit constant 5
    if algo == "crc32":
        h = zlib.crc32(buf)
    elif algo == "crc16":
        h = crc16_arc_bitwise(buf)
    elif algo == "csum16":
        words = buf + b"\x00"
        tot = sum(struct.unpack("!%dH" % (len(words) // 2), words))
        while tot >> 16:
            tot = (tot & 0xFFFF) + (tot >> 16)
        h = ~tot & 0xFFFF
    else:
        h = int.from_bytes(buf, "big")
    out = s.process(0, inp)
    assert out == [(0, struct.pack("!I", (h % 0x10000) + 100))]


# -- packet replication engine ---------------------------------------------------------------
def test_multicast_replicas_rid_and_instance_type() -> None:
    p = Program()
    p.header("i", [("x", 8)])
    p.state("start", [prim("extract", {"type": "regular", "value": "i"})])
    p.header("o", [("rid", 16), ("itype", 8), ("port", 16), ("x", 8)])
    p.deparse("o", "i")
    a = p.action("mc", [], [assign(f(STD, "mcast_grp"), hx(1)), assign(f("i", "x"), hx(0x77))])
    p.call("ingress", "t", a)
    p.init("ingress", "t")
    e = p.action(
        "eg",
        [],
        [
            prim("add_header", HDR),
            assign(f("o", "rid"), f(STD, "egress_rid")),
            assign(f("o", "itype"), f(STD, "instance_type")),
            assign(f("o", "port"), f(STD, "egress_port")),
            assign(f("o", "x"), f("i", "x")),
        ],
    )
    p.call("egress", "te", e)
    p.init("egress", "te")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    assert s.process(0, b"\x01") == []  # unknown group: nothing
    s.mc_group_set(1, [(3, 5), (2, 0), (1, 5)])
    out = s.process(0, b"\x01")
    # one L1 node per rid (creation order), ports ascending inside a node; metadata copied
    exp = [
        (port, struct.pack("!HBHB", rid, 5, port, 0x77) + b"\x77")
        for port, rid in [(1, 5), (3, 5), (2, 0)]
    ]
    assert out == exp
    assert s.mc_groups() == {1: [(1, 5), (3, 5), (2, 0)]}
    s.mc_group_delete(1)
    assert s.process(0, b"\x01") == []


def test_throughput_smoke() -> None:
    """The synthetic 64-lane program must stay far above 'unusable' even on a slow CI box."""
    import time

    from synth_p4reduce import build

    s = Switch()
    s.load_pipeline(build())
    s.table_add("forward", [1], "fwd", [2])
    frame = bytes(12) + b"\x88\xb5" + struct.pack("!HH", 5, 0) + struct.pack("!64I", *range(64))
    n = 2000
    t = time.perf_counter()
    for _ in range(n):
        s.process(1, frame)
    pps = n / (time.perf_counter() - t)
    assert s.register_read("lane_3", 5) == 3 * n
    assert pps > 3000, pps


def test_ternary_and_lpm_random_against_brute_force() -> None:
    import random

    rng = random.Random(7)
    p = table_program([("a", "ternary", 8)], "ternary")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    model: dict[tuple[int, int, int], int] = {}  # (value, mask, prio) -> action value
    prios = rng.sample(range(1, 10000), 300)
    for k, prio in enumerate(prios):
        m = rng.randrange(256)
        v = rng.randrange(256) & m
        if (v, m) in {(a, b) for a, b, _ in model}:
            continue
        s.table_add("t", [(v, m)], "setv", [k % 200], priority=prio)
        model[(v, m, prio)] = k % 200
        if rng.random() < 0.3:
            victim = rng.choice(list(model))
            s.table_delete("t", [(victim[0], victim[1])], priority=victim[2])
            del model[victim]
    for key in range(256):
        best = (
            max((pr, val) for (v, m, pr), val in model.items() if key & m == v)
            if any(key & m == v for v, m, _ in model)
            else None
        )
        assert lookup(s, bytes([key]))[0] == (best[1] if best else 0xEE), key

    p = table_program([("d", "lpm", 16)], "lpm")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    routes: dict[tuple[int, int], int] = {}
    for k in range(200):
        plen = rng.randrange(17)
        v = rng.randrange(1 << 16) & (((1 << plen) - 1) << (16 - plen))
        if (v, plen) in routes:
            continue
        routes[(v, plen)] = k % 250
        s.table_add("t", [(v, plen)], "setv", [k % 250])
        if rng.random() < 0.2:
            victim = rng.choice(list(routes))
            s.table_delete("t", [victim])
            del routes[victim]
    for _ in range(500):
        key = rng.randrange(1 << 16)
        cands = [
            (plen, val)
            for (v, plen), val in routes.items()
            if key >> (16 - plen) == v >> (16 - plen)
        ]
        exp = max(cands)[1] if cands else 0xEE
        assert lookup(s, key.to_bytes(2, "big"))[0] == exp
