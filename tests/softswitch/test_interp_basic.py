"""Interpreter unit tests on hand-built bmv2 JSON (no p4c needed).

Expected outputs are computed independently of the implementation: with scapy for packet
bytes and with plain Python arithmetic on P4's fixed-width rules for values.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from jsonbuild import Program, assign, ex, f, hx, prim, rd
from softswitch.errors import InvalidArgument, NotFound, PipelineError, UnsupportedConstruct
from softswitch.switch import Switch

STD = "standard_metadata"


def eth_parser(p: Program, next_on: dict[int, str] | None = None) -> None:
    p.header("ethernet", [("dst", 48), ("src", 48), ("etype", 16)])
    trans = [
        {"type": "hexstr", "value": "0x%04x" % v, "mask": None, "next_state": s}
        for v, s in (next_on or {}).items()
    ]
    trans.append({"type": "default", "value": None, "mask": None, "next_state": None})
    p.state(
        "start",
        [prim("extract", {"type": "regular", "value": "ethernet"})],
        key=[f("ethernet", "etype")],
        transitions=trans,
    )


def forward_to(
    p: Program,
    port: int,
    pipeline: str = "ingress",
    name: str = "set_port",
    next_node: str | None = None,
) -> int:
    a = p.action(f"fwd{port}", [], [assign(f(STD, "egress_spec"), hx(port))])
    p.call(pipeline, name, a, next_node)
    return a


def load(p: Program) -> Switch:
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    return s


# --------------------------------------------------------------------------------------
def test_forward_and_deparse_unchanged_bytes() -> None:
    p = Program()
    eth_parser(p)
    p.deparse("ethernet")
    forward_to(p, 7)
    p.init("ingress", "set_port")
    s = load(p)
    pkt = bytes(
        Ether(dst="00:11:22:33:44:55", src="66:77:88:99:aa:bb")
        / IP(dst="10.0.0.1")
        / UDP()
        / b"xyz"
    )
    assert s.process(3, pkt) == [(7, pkt)]


@pytest.mark.parametrize(
    "block",
    [bytes(256), bytes(255) + b"\x01", b"\xff" * 256],
    ids=["zero", "zero-but-its-last-byte", "sum-wraps-to-zero"],
)
def test_a_wide_field_parses_adds_and_deparses_exactly_zero_or_not(block: bytes) -> None:
    """A 2 048-bit field, which the parser and deparser take a shortcut for when it is all
    zero: + 1 modulo 2^2048 gives the bytes plain Python arithmetic gives, whether the
    block in or the sum out is the zero one."""
    p = Program()
    eth_parser(p, {0x1234: "blk"})
    p.header("blk", [("v", 2048)])
    p.state("blk", [prim("extract", {"type": "regular", "value": "blk"})])
    p.deparse("ethernet", "blk")
    one_more = ex("&", ex("+", f("blk", "v"), hx(1)), hx((1 << 2048) - 1))
    a = p.action("inc", [], [assign(f("blk", "v"), one_more), assign(f(STD, "egress_spec"), hx(2))])
    p.call("ingress", "inc", a)
    p.init("ingress", "inc")
    s = load(p)
    eth = bytes(Ether(dst="00:11:22:33:44:55", src="66:77:88:99:aa:bb", type=0x1234))
    want = ((int.from_bytes(block, "big") + 1) % (1 << 2048)).to_bytes(256, "big")
    assert s.process(1, eth + block + b"tail") == [(2, eth + want + b"tail")]
    assert s.process(1, eth + block[:-1]) == [(2, eth + block[:-1])]  # too short: unparsed


def test_no_forwarding_goes_to_port_0_and_drop_port_drops() -> None:
    # egress_spec is zero-initialised metadata: a program that sets nothing sends to port 0.
    p = Program()
    eth_parser(p)
    p.deparse("ethernet")
    s = load(p)
    pkt = bytes(Ether() / b"abc")
    assert s.process(5, pkt) == [(0, pkt)]
    p2 = Program()
    eth_parser(p2)
    p2.deparse("ethernet")
    forward_to(p2, 511)
    p2.init("ingress", "set_port")
    s2 = load(p2)
    assert s2.process(5, pkt) == []
    assert s2.stats()["drop_ingress"] == 1


@pytest.mark.parametrize("grow", [512, 520])
def test_a_frame_grown_past_simple_switchs_packet_buffer_is_dropped_and_counted(
    grow: int,
) -> None:
    """simple_switch holds a received frame in a buffer 512 bytes longer than the frame
    and aborts when a deparser writes past it: a frame out longer than that is dropped and
    counted (drop_outgrew_packet_buffer), one 512 bytes longer leaves."""
    p = Program()
    eth_parser(p)
    p.header("big", [("v", 8 * grow)])
    p.deparse("ethernet", "big")
    a = p.action(
        "grow",
        [],
        [
            prim("add_header", {"type": "header", "value": "big"}),
            assign(f(STD, "egress_spec"), hx(2)),
        ],
    )
    p.call("ingress", "grow", a)
    p.init("ingress", "grow")
    s = load(p)
    pkt = bytes(Ether(dst="00:11:22:33:44:55", src="66:77:88:99:aa:bb") / b"payload")
    out = s.process(1, pkt)
    if grow <= 512:
        assert out == [(2, pkt[:14] + bytes(grow) + pkt[14:])]
        assert "drop_outgrew_packet_buffer" not in s.stats()
    else:
        assert out == []
        assert s.stats()["drop_outgrew_packet_buffer"] == 1


def test_parser_error_does_not_drop_and_header_stays_invalid() -> None:
    """simple_switch: PacketTooShort sets parser_error, leaves the header invalid, keeps the
    unparsed bytes as payload and the packet goes on through ingress/egress."""
    p = Program()
    eth_parser(p, {0x1234: "h"})
    p.header("h", [("a", 32), ("b", 32)])
    p.state("h", [prim("extract", {"type": "regular", "value": "h"})])
    p.header("out", [("err", 32), ("hvalid", 8)])
    p.deparse("ethernet", "out", "h")
    a = p.action(
        "report",
        [],
        [
            prim("add_header", {"type": "header", "value": "out"}),
            assign(f("out", "err"), f(STD, "parser_error")),
            assign(f("out", "hvalid"), ex("b2d", None, ex("d2b", None, f("h", "$valid$")))),
            assign(f(STD, "egress_spec"), hx(1)),
        ],
    )
    p.call("ingress", "report", a)
    p.init("ingress", "report")
    s = load(p)
    eth = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="00:00:00:00:00:01", type=0x1234))
    short = eth + b"\x01\x02\x03"  # 3 bytes: h needs 8
    out = s.process(0, short)
    assert out == [(1, eth + struct.pack("!IB", 1, 0) + b"\x01\x02\x03")]
    ok = eth + bytes(range(8)) + b"tail"
    out = s.process(0, ok)
    assert out == [(1, eth + struct.pack("!IB", 0, 1) + bytes(range(8)) + b"tail")]
    assert s.stats()["parser_errors"] == 1


def test_select_with_mask_and_multi_field_key_and_lookahead() -> None:
    p = Program()
    p.header("ethernet", [("dst", 48), ("src", 48), ("etype", 16)])
    p.header("tag", [("x", 4), ("y", 12)])
    p.header("m", [("v", 8)])
    p.scalar("mark", 8)
    la = p.scalar("la", 16)
    p.state(
        "start",
        [
            prim("extract", {"type": "regular", "value": "ethernet"}),
            {"op": "set", "parameters": [la, {"type": "lookahead", "value": [0, 16]}]},
        ],
        key=[f("ethernet", "etype")],
        transitions=[
            {"type": "hexstr", "value": "0x8100", "mask": "0xff00", "next_state": "tag"},
            {"type": "default", "value": None, "mask": None, "next_state": None},
        ],
    )
    # key = tag.x (4 bits, padded to 1 byte) ++ lookahead<8> at bit 0 of the remaining data
    p.state(
        "tag",
        [prim("extract", {"type": "regular", "value": "tag"})],
        key=[f("tag", "x"), {"type": "lookahead", "value": [0, 8]}],
        transitions=[
            {"type": "hexstr", "value": "0x0a42", "mask": None, "next_state": "m"},
            {"type": "default", "value": None, "mask": None, "next_state": None},
        ],
    )
    p.state("m", [prim("extract", {"type": "regular", "value": "m"})])
    p.header("o", [("mark", 8), ("la", 16)])
    p.deparse("o", "ethernet", "tag", "m")
    a = p.action(
        "rep",
        [],
        [
            prim("add_header", {"type": "header", "value": "o"}),
            assign(f("o", "mark"), ex("b2d", None, ex("d2b", None, f("m", "$valid$")))),
            assign(f("o", "la"), la),
            assign(f(STD, "egress_spec"), hx(2)),
        ],
    )
    p.call("ingress", "rep", a)
    p.init("ingress", "rep")
    s = load(p)
    eth = bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x81FF))
    # 0x81ff matches 0x8100/0xff00; tag.x = 0xa; next byte 0x42 -> state m
    pkt = eth + b"\xa0\x01" + b"\x42" + b"zz"
    assert s.process(0, pkt) == [(2, b"\x01" + b"\xa0\x01" + pkt)]
    pkt2 = eth + b"\xa0\x01" + b"\x43" + b"zz"  # lookahead mismatch: m not extracted
    assert s.process(0, pkt2) == [(2, b"\x00" + b"\xa0\x01" + pkt2)]


def test_verify_sets_custom_error() -> None:
    p = Program()
    p.j["errors"].append(["Bad", 7])
    p.header("h", [("a", 8)])
    p.state(
        "start",
        [
            prim("extract", {"type": "regular", "value": "h"}),
            {"op": "verify", "parameters": [ex("<", f("h", "a"), hx(10)), hx(7)]},
        ],
    )
    p.header("o", [("e", 8)])
    p.deparse("o", "h")
    a = p.action(
        "rep",
        [],
        [
            prim("add_header", {"type": "header", "value": "o"}),
            assign(f("o", "e"), f(STD, "parser_error")),
        ],
    )
    p.call("ingress", "rep", a)
    p.init("ingress", "rep")
    s = load(p)
    assert s.process(0, b"\x05") == [(0, b"\x00\x05")]
    assert s.process(0, b"\x0b") == [(0, b"\x07\x0b")]  # h extracted before verify failed


def test_header_stack_extract_and_overflow() -> None:
    p = Program()
    p.header("s0", [("v", 8)])
    p.header("s1", [("v", 8)])
    p.j["header_stacks"].append(
        {"name": "s", "id": 0, "header_type": "s0_t", "size": 2, "header_ids": [2, 3]}
    )
    p.j["headers"][3]["header_type"] = "s0_t"
    p.state(
        "start",
        [prim("extract", {"type": "stack", "value": "s"})],
        key=[{"type": "stack_field", "value": ["s", "v"]}],
        transitions=[
            {"type": "hexstr", "value": "0x01", "mask": None, "next_state": "start"},
            {"type": "default", "value": None, "mask": None, "next_state": None},
        ],
    )
    p.header("o", [("e", 8)])
    p.deparse("o", "s0", "s1")
    a = p.action(
        "rep",
        [],
        [
            prim("add_header", {"type": "header", "value": "o"}),
            assign(f("o", "e"), f(STD, "parser_error")),
        ],
    )
    p.call("ingress", "rep", a)
    p.init("ingress", "rep")
    s = load(p)
    assert s.process(0, b"\x01\x02\x09") == [(0, b"\x00\x01\x02\x09")]
    # third extract into a 2-deep stack: StackOutOfBounds (3), two elements valid
    assert s.process(0, b"\x01\x01\x01\x09") == [(0, b"\x03\x01\x01\x01\x09")]


def test_malformed_frames_never_raise() -> None:
    p = Program()
    eth_parser(p)
    p.deparse("ethernet")
    s = load(p)
    for fr in [b"", b"\x00", bytes(13)]:
        out = s.process(0, fr)
        assert out == [(0, fr)]  # nothing extracted: all bytes are payload
    assert s.stats()["parser_errors"] == 3
    assert s.stats()["frames_in"] == 3


def test_load_errors_keep_old_pipeline() -> None:
    p = Program()
    eth_parser(p)
    p.deparse("ethernet")
    forward_to(p, 4)
    p.init("ingress", "set_port")
    s = load(p)
    pkt = bytes(Ether() / b"12345")
    with pytest.raises(PipelineError):
        s.load_pipeline("{not json")
    with pytest.raises(PipelineError):
        s.load_pipeline(json.dumps({"__meta__": {"version": [2, 23]}, "headers": [{"name": "x"}]}))
    bad = Program()
    bad.action(
        "m",
        [],
        [
            prim(
                "execute_meter",
                {"type": "meter_array", "value": "mm"},
                hx(0),
                f(STD, "egress_spec"),
            )
        ],
    )
    with pytest.raises(UnsupportedConstruct, match='primitive "execute_meter".*action "m"'):
        s.load_pipeline(json.dumps(bad.j))
    assert s.process(0, pkt) == [(4, pkt)]


@pytest.mark.parametrize(
    "op,construct",
    [
        ("clone_ingress_pkt_to_egress", "clone_ingress_pkt_to_egress"),
        ("resubmit", "resubmit"),
        ("recirculate", "recirculate"),
        ("generate_digest", "generate_digest"),
        ("truncate", "truncate"),
        ("some_future_primitive", "some_future_primitive"),
    ],
)
def test_unsupported_primitives_named(op: str, construct: str) -> None:
    p = Program()
    p.action("act_x", [], [prim(op, hx(1))])
    with pytest.raises(UnsupportedConstruct) as ei:
        load(p)
    assert f'primitive "{construct}"' in str(ei.value) and 'action "act_x"' in str(ei.value)


def test_unsupported_hash_algorithm_named() -> None:
    p = Program()
    d = p.scalar("d", 16)
    p.j["calculations"].append(
        {"name": "calc_c", "id": 0, "algo": "crc32_custom", "input": [f(STD, "ingress_port")]}
    )
    p.action(
        "h",
        [],
        [
            prim(
                "modify_field_with_hash_based_offset",
                d,
                hx(0),
                {"type": "calculation", "value": "calc_c"},
                hx(0x10000),
            )
        ],
    )
    with pytest.raises(
        UnsupportedConstruct, match='hash algorithm "crc32_custom".*calculation "calc_c"'
    ):
        load(p)


def test_unsupported_table_features_named() -> None:
    p = Program()
    p.state("start", [])
    a = p.action("a", [], [])
    p.table("ingress", "t_counted", [], [a], a)
    p.j["pipelines"][0]["tables"][0]["with_counters"] = True
    with pytest.raises(UnsupportedConstruct, match='direct counters.*table "t_counted"'):
        load(p)
    p2 = Program()
    p2.j["meter_arrays"].append(
        {"name": "mtr", "id": 0, "type": "bytes", "rate_count": 2, "size": 4, "is_direct": False}
    )
    with pytest.raises(UnsupportedConstruct, match="meter"):
        load(p2)


def test_control_plane_errors() -> None:
    p = Program()
    eth_parser(p)
    p.deparse("ethernet")
    a = p.action("fwd", [("port", 9)], [assign(f(STD, "egress_spec"), rd(0))])
    b = p.action("nop", [], [])
    p.table(
        "ingress",
        "t",
        [{"match_type": "exact", "name": "etype", "target": ["ethernet", "etype"], "mask": None}],
        [a, b],
        b,
    )
    p.init("ingress", "t")
    s = load(p)
    s.table_add("t", [0x800], "fwd", [3])
    from softswitch.errors import AlreadyExists

    with pytest.raises(AlreadyExists):
        s.table_add("t", [0x800], "fwd", [4])
    with pytest.raises(InvalidArgument):
        s.table_add("t", [0x10000], "fwd", [4])  # key wider than 16 bits
    with pytest.raises(InvalidArgument):
        s.table_add("t", [1], "fwd", [512])  # param wider than 9 bits
    with pytest.raises(InvalidArgument):
        s.table_add("t", [1], "fwd", [])  # wrong param count
    with pytest.raises(InvalidArgument):
        s.table_add("t", [1], "nosuch", [])
    with pytest.raises(NotFound):
        s.table_add("nosuch", [1], "fwd", [1])
    with pytest.raises(NotFound):
        s.table_delete("t", [0x801])
    s.table_modify("t", [0x800], "fwd", [9])
    pkt = bytes(Ether(type=0x800) / (b"x" * 3))
    assert s.process(0, pkt) == [(9, pkt)]
    s.table_delete("t", [0x800])
    assert s.process(0, pkt) == [(0, pkt)]
    assert s.table_get_default("t") == ("nop", [])
    s.table_set_default("t", "fwd", [6])
    assert s.process(0, pkt) == [(6, pkt)]
    s.table_reset_default("t")
    assert s.table_get_default("t") == ("nop", [])


def test_fuzzed_json_only_raises_pipeline_errors() -> None:
    """Random damage to a valid program: always a PipelineError, old pipeline still works."""
    import random

    from synth_p4reduce import build

    good = json.loads(build(lanes=4))
    s = Switch()
    s.load_pipeline(json.dumps(good))
    s.table_add("forward", [1], "fwd", [2])
    frame = bytes(12) + b"\x88\xb5" + struct.pack("!HH", 5, 0) + struct.pack("!4I", 1, 2, 3, 4)
    expected = s.process(1, frame)
    rng = random.Random(1)

    def mutate(node: object) -> object:
        if isinstance(node, dict) and node:
            k = rng.choice(list(node))
            if rng.random() < 0.3:
                del node[k]
            else:
                node[k] = mutate(node[k])
            return node
        if isinstance(node, list) and node:
            i = rng.randrange(len(node))
            if rng.random() < 0.3:
                del node[i]
            else:
                node[i] = mutate(node[i])
            return node
        return rng.choice([None, "x", -1, 10**30, [], {}, True, 3.5])

    for _ in range(300):
        j = json.loads(json.dumps(good))
        for _ in range(rng.randrange(1, 4)):
            mutate(j)
        try:
            s2 = Switch()
            s2.load_pipeline(json.dumps(j))
            s2.process(1, frame)  # whatever loaded must not raise either
        except PipelineError:
            pass
    with pytest.raises(PipelineError):
        s.load_pipeline(b"\xff\xfe")
    assert s.process(1, frame)[0][0] == expected[0][0]


def test_no_pipeline_and_concurrent_use() -> None:
    import threading

    s = Switch()
    assert not s.pipeline_loaded
    assert s.process(0, b"abc") == []
    assert s.stats()["no_pipeline"] == 1
    with pytest.raises(NotFound):
        s.table_add("t", [1], "a", [])
    p = Program()
    eth_parser(p)
    p.deparse("ethernet")
    a = p.action("fwd", [("port", 9)], [assign(f(STD, "egress_spec"), rd(0))])
    b = p.action("nop", [], [])
    p.table(
        "ingress",
        "t",
        [{"match_type": "exact", "name": "src", "target": ["ethernet", "src"], "mask": None}],
        [a, b],
        b,
        max_size=100000,
    )
    p.init("ingress", "t")
    s.load_pipeline(json.dumps(p.j))
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(2000):
                s.table_add("t", [i], "fwd", [i % 500])
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    def reader() -> None:
        try:
            for i in range(2000):
                fr = bytes(6) + i.to_bytes(6, "big") + b"\x12\x34"
                out = s.process(0, fr)
                assert out[0][0] in (0, i % 500)
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    ts = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert len(s.table_entries("t")) == 2000


def test_log_msg_printed_only_when_tracing(capsys: pytest.CaptureFixture[str]) -> None:
    p = Program()
    p.header("h", [("a", 8)])
    p.state("start", [prim("extract", {"type": "regular", "value": "h"})])
    p.deparse("h")
    a = p.action(
        "log",
        [],
        [
            prim(
                "log_msg",
                {"type": "string", "value": "a={} b={}"},
                {"type": "parameters_vector", "value": [f("h", "a"), hx(7)]},
            )
        ],
    )
    p.call("ingress", "t", a)
    p.init("ingress", "t")
    quiet = Switch()
    quiet.load_pipeline(json.dumps(p.j))
    quiet.process(0, b"\x05")
    assert "a=5" not in capsys.readouterr().err
    loud = Switch(trace=True)
    loud.load_pipeline(json.dumps(p.j))
    loud.process(0, b"\x05")
    assert "a=5 b=7" in capsys.readouterr().err


def test_pipelines_of_the_same_bytes_share_no_state() -> None:
    """Loading bytes a switch compiled before reuses the compiled module (each fresh
    pipeline a test or a controller pushes) but never its state: a table entry, the
    registers a packet summed into and a written register of one pipeline are in no other
    pipeline of the same bytes, on another switch or on the same one loaded again."""
    from synth_p4reduce import build

    raw = build(lanes=4).encode()
    a, b = Switch(), Switch()
    a.load_pipeline(raw)
    b.load_pipeline(raw)
    a.table_add("forward", [1], "fwd", [2])
    a.register_write("lane_3", 9, 77)
    values = (1, 2, 3, 4)
    frame = bytes(12) + b"\x88\xb5" + struct.pack("!HH", 5, 0) + struct.pack("!4I", *values)
    out = a.process(1, frame)
    assert [port for port, _ in out] == [2]
    assert out[0][1][-16:] == struct.pack("!4I", *values)  # 0 + each value
    assert [a.register_read(f"lane_{i}", 5) for i in range(4)] == list(values)
    # the other switch: no entry (its default drops), registers untouched
    assert b.process(1, frame) == []
    assert [b.register_read(f"lane_{i}", 5) for i in range(4)] == list(values)  # its own sum
    assert b.register_read("lane_3", 9) == 0
    # the same switch loaded again: a fresh pipeline, nothing of the old one
    a.load_pipeline(raw)
    assert a.process(1, frame) == []
    assert a.register_read("lane_3", 9) == 0
    assert [a.register_read(f"lane_{i}", 5) for i in range(4)] == list(values)
    assert a.register_read("lane_0", 5) == b.register_read("lane_0", 5)
    a.process(1, frame)
    assert a.register_read("lane_0", 5) == 2 * values[0] != b.register_read("lane_0", 5)


def test_the_generated_module_does_not_change_with_the_hash_seed() -> None:
    """Two interpreters with different string hashes generate the same module from the
    same JSON (a table program whose tables have several next nodes: the order of the
    generated functions follows them), so a program's code is reproducible."""
    program = Path(__file__).parent / "p4" / "build" / "tables" / "tables.json"
    code = (
        "import hashlib, json, sys\n"
        "from softswitch.interp.codegen import Program\n"
        "src = Program(json.load(open(sys.argv[1]))).g.src.text()\n"
        "print(hashlib.sha256(src.encode()).hexdigest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code, str(program)],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3, 4)
    }
    assert len(digests) == 1, digests
