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
import re
from collections import defaultdict
from pathlib import Path

import pytest

from p4reduce.p4rt import P4InfoIndex
from p4reduce import wire
from p4reduce.target import TARGETS, V1MODEL_BLOCK_SIZES

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
    RESULT and STATUS (the two it sends workers) and DATA (a silent leaf's empty partial,
    to the spine; a leaf's other partials keep the type an expression picks)."""
    compared = _values(consts, "p4r.msg_type", {"==", "!="}) - {0}
    written = _values(consts, "p4r.msg_type", {"="})
    known = {int(m) for m in wire.MsgType}
    assert compared <= known, f"P4 compares msg_type with {compared - known}: not in MsgType"
    assert written == {
        int(wire.MsgType.RESULT),
        int(wire.MsgType.STATUS),
        int(wire.MsgType.DATA),
    }
    assert int(wire.MsgType.ANNOUNCE) in compared


def test_flags(consts):
    """Every flag bit the program tests (a shift of `flags`) or writes is a wire.Flag."""
    tested = {1 << s for s in _values(consts, "p4r.flags", {">>"})}
    masks = _values(consts, "p4r.flags", {"&", "=", "|"}) - {0}
    every = int(sum(wire.Flag))
    for value in tested | masks:
        assert value & ~every == 0, f"P4 uses flag bits {value:#x} outside wire.Flag"
    # PACKED's shift reads FLAG_SILENT beside it (admission compares the two bits at once);
    # STATE_LOST is tested on a leaf's partial that reports a restarted leaf, PROBE on a
    # rank's state probe into a round whose result the leaf holds (uplink.p4)
    assert tested == {
        int(f)
        for f in (wire.Flag.CONTINUED, wire.Flag.PACKED, wire.Flag.STATE_LOST, wire.Flag.PROBE)
    }
    assert int(wire.Flag.STATE_LOST) in masks and int(wire.Flag.CONTINUED) in masks


def test_udp_port_range(program, consts):
    (keys, value, mask, nxt) = transitions(program, "parse_udp")[0]
    assert keys == ["udp.dst_port"] and nxt == "parse_p4reduce"
    assert (value, mask) == (wire.UDP_PORT_BASE, wire.UDP_PORT_MASK)
    assert _values(consts, "udp.src_port", {"="}) == {wire.UDP_PORT_BASE}


def test_block_sizes_are_the_targets(program):
    """values.p4's FOR_EACH_BLOCK_SIZE is p4reduce.target's V1MODEL_BLOCK_SIZES, and the
    compiled program has one values header and one register array per size, each a word
    of K 32-bit lanes, one cell per slot entry."""
    text = (REPO / "p4src" / "v1model" / "values.p4").read_text()
    listed = re.search(r"#define FOR_EACH_BLOCK_SIZE\(X\)\s+(.*)", text).group(1)
    sizes = tuple(int(k) for k in re.findall(r"X\((\d+)\)", listed))
    assert sizes == V1MODEL_BLOCK_SIZES
    assert wire.BLOCK_VALUES in sizes and max(sizes) <= wire.MAX_BLOCK_VALUES
    types = {h["name"]: h for h in program["header_types"]}
    registers = {r["name"].rsplit(".", 1)[-1]: r for r in program["register_arrays"]}
    slot_entries = registers["round_overflow"]["size"]
    for k in sizes:
        assert [f[1] for f in types[f"values_{k}_t"]["fields"]] == [32 * k], k
        assert registers[f"sums_{k}"]["bitwidth"] == 32 * k, k
        assert registers[f"sums_{k}"]["size"] == slot_entries, k


def test_a_skip_grows_as_far_as_the_codec_says():
    """The v1model program's SKIP_GROWS_TO_VALUES (a header-only SKIP's RESULT fits in
    simple_switch's 512 bytes of room) is the workers' (wire.skip_carries_values)."""
    text = (REPO / "p4src" / "v1model" / "values.p4").read_text()
    grows = int(re.search(r"#define SKIP_GROWS_TO_VALUES (\d+)", text).group(1))
    assert grows == wire.SKIP_GROWS_TO_VALUES and 4 * grows <= 512
    assert not wire.skip_carries_values(grows) and wire.skip_carries_values(grows + 1)


def test_a_data_frames_length_chooses_its_values_header(program):
    """DATA and SKIP go to the size parser, which picks values_K by the IPv4 total length
    of a frame of K values (wire.mtu_needed(K): 48 + 4K); ANNOUNCE to the fingerprint;
    RESULT and REWIND (a SKIP's layout from a worker, a RESULT's from a silent spine) to
    the fingerprint at its length or at its length with a block (an announce round's in
    the leaf role above 128 values: wire.announce_carries_block), else to the size
    parser; after the fingerprint, values_K at the length of the range and a block of K
    (wire.mtu_needed(K, announce_block=True): 56 + 4K)."""
    chosen = [(value, nxt) for _keys, value, _mask, nxt in transitions(program, "parse_p4reduce")]
    by_next = dict((nxt, value) for value, nxt in chosen)
    assert {value for value, nxt in chosen if nxt == "parse_values"} == {
        int(wire.MsgType.DATA),
        int(wire.MsgType.SKIP),
    }
    assert {value for value, nxt in chosen if nxt == "parse_result"} == {
        int(wire.MsgType.RESULT),
        int(wire.MsgType.REWIND),
    }
    by_result = [(keys, value, nxt) for keys, value, _, nxt in transitions(program, "parse_result")]
    with_block = [wire.mtu_needed(k, announce_block=True) for k in V1MODEL_BLOCK_SIZES]
    assert by_result == [
        (["ipv4.total_len"], length, "parse_fingerprint")
        for length in (wire.mtu_needed(0) + 8, *with_block)
    ]
    assert by_next["parse_fingerprint"] == int(wire.MsgType.ANNOUNCE)
    after_range = [
        (keys, value, nxt) for keys, value, _, nxt in transitions(program, "parse_fingerprint")
    ]
    assert after_range == [
        (["ipv4.total_len"], length, f"parse_values_{k}")
        for k, length in zip(V1MODEL_BLOCK_SIZES, with_block)
    ]
    by_length = {
        nxt: (keys, value) for keys, value, _mask, nxt in transitions(program, "parse_values")
    }
    assert set(by_length) == {f"parse_values_{k}" for k in V1MODEL_BLOCK_SIZES}
    for k in V1MODEL_BLOCK_SIZES:
        assert by_length[f"parse_values_{k}"] == (["ipv4.total_len"], wire.mtu_needed(k)), k


def test_message_lengths(consts, program):
    """The lengths the switch writes into its replies are the workers' layouts: constants
    for the header-only, fingerprint and status layouts, and for values the header-only
    length plus 4 * the job's block_values (4K bytes), plus the fingerprint's 8 where the
    range comes first (wire.frame_bytes_with_fingerprint_and_block)."""
    udp = {UDP_BYTES + wire.HEADER_BYTES + wire.EXTENSION_BYTES[e] for e in EXTENSIONS}
    udp.add(UDP_BYTES + wire.HEADER_BYTES + wire.STATUS_BYTES)
    udp.discard(UDP_BYTES + wire.HEADER_BYTES + wire.VALUE_BYTES)
    assert _values(consts, "udp.length", {"="}) == udp
    assert _values(consts, "ipv4.total_len", {"="}) == {IPV4_BYTES + n for n in udp}
    action = next(a for a in program["actions"] if a["name"].endswith(".set_lengths_with_values"))
    sums = {}
    for primitive in action["primitives"]:
        target, expr = primitive["parameters"]
        sums[".".join(target["value"])] = _length_plus_values(expr["value"])
    assert sums == {
        "ipv4.total_len": IPV4_BYTES + UDP_BYTES + wire.HEADER_BYTES,
        "udp.length": UDP_BYTES + wire.HEADER_BYTES,
    }


def _length_plus_values(expr: dict) -> int:
    """C of an expression C + ((meta.block_values << 2) + (fingerprint valid ? 8 : 0)),
    under p4c's masks."""

    def unmasked(e: dict) -> dict:
        while True:
            if e.get("type") == "expression":
                e = e["value"]
            elif e.get("op") == "&":
                e = e["left"]
            else:
                return e

    total = unmasked(expr)
    assert total["op"] == "+", total
    extension = unmasked(total["right"])
    assert extension["op"] == "+", extension
    fingerprint = unmasked(extension["right"])
    assert fingerprint["op"] == "?", fingerprint
    assert (_constant(fingerprint["left"]), _constant(fingerprint["right"])) == (
        wire.FINGERPRINT_BYTES,
        0,
    )
    assert unmasked(fingerprint["cond"])["right"]["value"] == ["fingerprint", "$valid$"]
    shift = unmasked(extension["left"])
    assert shift["op"] == "<<" and _constant(shift["right"]) == 2, shift
    assert _field(unmasked(shift["left"])) == "scalars.metadata_t.block_values", shift
    return _constant(total["left"])


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
