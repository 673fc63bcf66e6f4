"""Every constant the P4 program shares with the Python side equals what was compiled.

The workers (p4reduce.wire) and the switch agree on the wire format only through numbers
written twice: once in p4src/common/constants.p4, once in Python. These tests read the
numbers back from the *compiled* program -- the bmv2 JSON's parser transitions, the
constants its conditions compare header fields with and its actions assign, register
widths, header layouts; the TNA P4Info's tables -- and compare them with p4reduce.wire, so a
constant changed on one side only fails here, naming both values.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from p4reduce.p4rt import P4InfoIndex
from p4reduce import wire
from p4reduce.target import TARGETS

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "p4src" / "build"
BMV2_JSON = BUILD / "p4reduce.json"
TNA_TARGETS = ("tofino", "tofino2")

EXTENSIONS = (wire.Extension.NONE, wire.Extension.VALUES, wire.Extension.FINGERPRINT)
UDP_BYTES, IPV4_BYTES = 8, 20


def _field(expr) -> str | None:
    if isinstance(expr, dict) and expr.get("type") == "field":
        return ".".join(expr["value"])
    return None


def _constant(expr) -> int | None:
    if isinstance(expr, dict) and expr.get("type") == "hexstr":
        return int(expr["value"], 16)
    return None


def constants_by_field(program: dict) -> dict[str, set[tuple[str, int]]]:
    """{"hdr.field": {(operator, constant)}}: every constant a condition or expression of
    the compiled program puts beside a field (==, !=, &, >>, |, ...), and every constant an
    action assigns to one ("=")."""
    found: dict[str, set[tuple[str, int]]] = defaultdict(set)

    def walk(node) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        value = node.get("value")
        if node.get("type") == "expression" and isinstance(value, dict) and "op" in value:
            left, right = value.get("left"), value.get("right")
            for a, b in ((left, right), (right, left)):
                name, const = _field(a), _constant(b)
                if name is not None and const is not None:
                    found[name].add((value["op"], const))
        for child in node.values():
            walk(child)

    walk(program["pipelines"])
    for action in program["actions"]:
        for primitive in action["primitives"]:
            params = primitive["parameters"]
            if primitive["op"] == "assign":
                name, const = _field(params[0]), _constant(params[1])
                if name is not None and const is not None:
                    found[name].add(("=", const))
            walk(params)
    return found


def transitions(program: dict, state: str) -> list[tuple[list[str], int, int | None, str]]:
    """(key fields, value, mask, next state) of a parser state's non-default transitions."""
    out = []
    for parser in program["parsers"]:
        for s in parser["parse_states"]:
            if s["name"] != state:
                continue
            keys = [".".join(k["value"]) for k in s["transition_key"]]
            for t in s["transitions"]:
                if t.get("value") not in (None, "default"):
                    mask = int(t["mask"], 16) if t.get("mask") else None
                    out.append((keys, int(t["value"], 16), mask, t["next_state"]))
    return out


@pytest.fixture(scope="module")
def program() -> dict:
    return json.loads(BMV2_JSON.read_text())


@pytest.fixture(scope="module")
def consts(program) -> dict[str, set[tuple[str, int]]]:
    return constants_by_field(program)


def _values(consts, name: str, ops: set[str]) -> set[int]:
    return {c for op, c in consts.get(name, set()) if op in ops}


def test_protocol_version(consts):
    assert _values(consts, "p4r.protocol", {"==", "!="}) == {wire.PROTOCOL_VERSION}


def test_message_types(consts):
    """The program checks and writes only message types the workers know, and writes
    RESULT and STATUS (the two it sends)."""
    compared = _values(consts, "p4r.msg_type", {"==", "!="}) - {0}
    written = _values(consts, "p4r.msg_type", {"="})
    known = {int(m) for m in wire.MsgType}
    assert compared <= known, f"P4 compares msg_type with {compared - known}: not in MsgType"
    assert written == {int(wire.MsgType.RESULT), int(wire.MsgType.STATUS)}
    assert int(wire.MsgType.ANNOUNCE) in compared


def test_flags(consts):
    """Every flag bit the program tests (a shift of `flags`) or writes is a wire.Flag."""
    tested = {1 << s for s in _values(consts, "p4r.flags", {">>"})}
    masks = _values(consts, "p4r.flags", {"&", "=", "|"}) - {0}
    every = int(sum(wire.Flag))
    for value in tested | masks:
        assert value & ~every == 0, f"P4 uses flag bits {value:#x} outside wire.Flag"
    assert tested == {int(wire.Flag.CONTINUED), int(wire.Flag.PACKED)}
    assert int(wire.Flag.STATE_LOST) in masks and int(wire.Flag.CONTINUED) in masks


def test_udp_port_range(program, consts):
    (keys, value, mask, nxt) = transitions(program, "parse_udp")[0]
    assert keys == ["udp.dst_port"] and nxt == "parse_p4reduce"
    assert (value, mask) == (wire.UDP_PORT_BASE, wire.UDP_PORT_MASK)
    assert _values(consts, "udp.src_port", {"="}) == {wire.UDP_PORT_BASE}


def test_encodings_choose_the_values_parser(program):
    """DATA with FLAG_PACKED's bit equal to Encoding.PACKED is parsed as packed values, with
    Encoding.LANES as lanes."""
    by_next = {
        nxt: value
        for keys, value, _mask, nxt in transitions(program, "parse_p4reduce")
        if keys[0] == "p4r.msg_type"
    }
    data = int(wire.MsgType.DATA) << 8
    assert by_next["parse_values"] == data | int(wire.Encoding.LANES)
    assert by_next["parse_packed_values"] == data | int(wire.Encoding.PACKED)
    assert by_next["parse_fingerprint"] == int(wire.MsgType.ANNOUNCE) << 8


def test_message_lengths(consts):
    """The lengths the switch writes into its replies are the workers' layouts."""
    udp = {UDP_BYTES + wire.HEADER_BYTES + wire.EXTENSION_BYTES[e] for e in EXTENSIONS}
    udp.add(UDP_BYTES + wire.HEADER_BYTES + wire.STATUS_BYTES)
    assert _values(consts, "udp.length", {"="}) == udp
    assert _values(consts, "ipv4.total_len", {"="}) == {IPV4_BYTES + n for n in udp}


def test_lanes_per_block(program):
    values = next(h for h in program["header_types"] if h["name"] == "values_t")
    assert len(values["fields"]) == wire.BLOCK_VALUES
    assert {f[1] for f in values["fields"]} == {32}
    packed = next(h for h in program["header_types"] if h["name"] == "packed_values_t")
    assert sum(f[1] for f in packed["fields"]) == 8 * wire.VALUE_BYTES


def test_header_layout(program):
    header = next(h for h in program["header_types"] if h["name"] == "p4reduce_t")
    assert [(f[0], f[1]) for f in header["fields"]] == [(f.name, f.bits) for f in wire.FIELDS]


def test_epoch_lost_bit_and_max_workers(program, consts):
    """The switch marks a lost slot with the bit above the largest epoch, and its bitmap
    has one bit per worker (a pair of MAX_WORKERS-bit halves)."""
    assert ("|", wire.MAX_EPOCH + 1) in consts["p4r.epoch"]
    bitmap = next(r for r in program["register_arrays"] if r["name"].endswith(".bitmap"))
    assert bitmap["bitwidth"] == 2 * wire.MAX_WORKERS


def test_end_of_stream(program):
    """END_OF_STREAM is what the switch compares blocks with and writes as the next block."""
    text = json.dumps(program["pipelines"]) + json.dumps(program["actions"])
    assert f'"{wire.END_OF_STREAM:#08x}"' in text.replace("0x00", "0x"), (
        f"END_OF_STREAM {wire.END_OF_STREAM:#x} appears nowhere in the compiled program"
    )


@pytest.mark.parametrize("target", TNA_TARGETS)
def test_tna_tables_carry_the_same_constants(target):
    """From the TNA P4Info: one rank_bit entry per worker, one lane pair table per two
    lanes, the per-job counters as wide as the bmv2 ones."""
    path = BUILD / target / "p4reduce.p4info.txtpb"
    if not path.exists():
        pytest.skip(f"p4src/build/{target}/ has not been compiled (make p4-tofino)")
    info = P4InfoIndex.load(path)
    tables = {t.name.rsplit(".", 1)[-1]: t for t in info.tables.values()}
    assert tables["rank_bit"].size == wire.MAX_WORKERS
    pairs = [n for n in tables if n.startswith("pair_")]
    assert (2 * len(pairs),) == TARGETS[target].block_sizes
