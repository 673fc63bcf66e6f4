"""The interpreter on real p4c-bm2-ss output (tests/softswitch/p4/build/, built by
p4src/compile.py; tests/test_p4_build.py checks the outputs are current).

Expected packets come from scapy or from a small Python reference of P4's arithmetic,
written from the P4 spec, not from the interpreter.
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

import pytest
from scapy.contrib.mpls import MPLS
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import Dot1Q, Ether

from softswitch.errors import UnsupportedConstruct, InvalidArgument
from softswitch.switch import Switch
from test_interp_semantics import crc16_arc_bitwise

BUILD = Path(__file__).resolve().parent / "p4" / "build"


def compiled(name: str) -> bytes:
    """p4c's JSON for tests/softswitch/p4/<name>.p4."""
    return (BUILD / name / f"{name}.json").read_bytes()


def load(name: str) -> Switch:
    s = Switch()
    s.load_pipeline(compiled(name))
    return s


def u(v: int, w: int) -> int:
    return v & ((1 << w) - 1)


def s_(v: int, w: int) -> int:
    v = u(v, w)
    return v - (1 << w) if v >> (w - 1) else v


def clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


# -- arithmetic --------------------------------------------------------------------------
def arith_reference(a: int, b: int, sa: int, sb: int, x: int, w: int, n: int) -> bytes:
    """P4_16 spec semantics of arith.p4, computed directly."""
    r = [
        ("B", u(a + b, 8)),
        ("B", u(a - b, 8)),
        ("B", u(a * b, 8)),
        ("B", u(~a, 8)),
        ("B", u(a << 3, 8)),
        ("B", a >> 3),
        ("b", s_(sa + sb, 8)),
        ("b", sa >> 2),
        ("B", min(a + b, 255)),
        ("B", max(a - b, 0)),
        ("b", clamp(sa + sb, -128, 127)),
        ("B", (x >> 8) & 0xFF),
        ("B", ((x & 0xF) << 4) | ((x >> 6) & 0xF)),
        ("H", ((x & 0xFF) << 8) | a),
        ("I", a),
        ("B", w & 0xFF),
        ("h", sa),
        ("B", a if a > b else b),
        ("B", 1 if sa < sb else 0),
        ("B", u(a << n, 8)),
        ("I", u(w * 3, 32)),
    ]
    return struct.pack("!" + "".join(f for f, _ in r), *[v for _, v in r])


def arith_input(a: int, b: int, sa: int, sb: int, x: int, w: int, n: int) -> bytes:
    return struct.pack("!BBbbHIB", a, b, sa, sb, x, w, n << 4)


@pytest.mark.parametrize("seed", range(3))
def test_arith_matches_reference(seed: int) -> None:
    sw = load("arith")
    rng = random.Random(seed)
    vectors = [
        (250, 10, -100, -50, 0xABCD, 0x12345678, 5),
        (0, 255, -128, 127, 0, 0xFFFFFFFF, 15),
        (7, 7, 127, 1, 0xFFFF, 1, 0),
    ]
    vectors += [
        (
            rng.randrange(256),
            rng.randrange(256),
            rng.randrange(-128, 128),
            rng.randrange(-128, 128),
            rng.randrange(1 << 16),
            rng.randrange(1 << 32),
            rng.randrange(16),
        )
        for _ in range(200)
    ]
    for v in vectors:
        inp = arith_input(*v)
        assert sw.process(0, inp) == [(1, arith_reference(*v) + inp)], v


# -- parser ---------------------------------------------------------------------------------
def rep(err: int, valid: int, depth: int, la: int) -> bytes:
    return struct.pack("!IBBB", err, valid, depth, la)


ETH = dict(dst="00:00:00:00:00:02", src="00:00:00:00:00:01")


@pytest.mark.parametrize(
    "frame,report",
    [
        (bytes(Ether(**ETH, type=0x0800) / IP() / ICMP()), rep(0, 1, 0, 0)),
        (
            bytes(
                Ether(**ETH, type=0x9100)
                / Dot1Q(vlan=5, type=0x8847)
                / MPLS(label=100, s=0, ttl=64)
                / MPLS(label=200, s=1, ttl=64)
                / b"\xaa\x01rest"
            ),
            rep(0, 1 | 2 | 4 | 8 | 32, 2, 0xAA),
        ),
        (
            bytes(
                Ether(**ETH, type=0x8847)
                / MPLS(s=0, ttl=1)
                / MPLS(s=0, ttl=1)
                / MPLS(s=0, ttl=1)
                / MPLS(s=1, ttl=1)
                / b"xx"
            ),
            rep(2, 1 | 4 | 8 | 16, 3, 0),
        ),
        (bytes(Ether(**ETH, type=0x8847) / MPLS(s=1, ttl=0) / b"\xaa\x00"), rep(3, 1 | 4, 1, 0)),
        (bytes(Ether(**ETH, type=0x8847)) + b"\x00\x01", rep(1, 1, 0, 0)),
        (
            bytes(Ether(**ETH, type=0x8100) / Dot1Q(vlan=7, type=0x88B5) / b"\x55zz"),
            rep(0, 1 | 2, 0, 0x55),
        ),
        (bytes(Ether(**ETH, type=0x88B5)), rep(1, 1, 0, 0)),  # lookahead past the end
        (bytes(Ether(**ETH, type=0x8100) / Dot1Q(vlan=7, type=0x0800) / b"q"), rep(0, 1 | 2, 0, 0)),
        (b"\x01\x02\x03", rep(1, 0, 0, 0)),  # not even an Ethernet header
    ],
)
def test_parser_program(frame: bytes, report: bytes) -> None:
    sw = load("parser")
    # the deparser re-emits every valid header unchanged, then the unparsed bytes
    assert sw.process(0, frame) == [(2, report + frame)]
    # ... however many: a long rest is held as a view of the frame, a short one copied (a
    # longer frame may parse further, so only its bytes after the report are known)
    long = frame + bytes(range(256)) * 36
    [(port, out)] = sw.process(0, long)
    assert port == 2 and out[len(report) :] == long


# -- checksums ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "payload", [b"payload!", bytes(range(256)) * 40 + b"end"], ids=["short", "10 KB"]
)
def test_checksum_program_matches_scapy(payload: bytes) -> None:
    """The UDP checksum covers the payload: a short one and one of ten kilobytes (which
    the walk holds as a view of the frame, not a copy)."""
    sw = load("checksum")
    pkt = (
        Ether(**ETH)
        / IP(src="10.1.2.3", dst="10.9.8.7", ttl=64, id=77)
        / UDP(sport=1234, dport=5678)
        / payload
    )
    out = sw.process(0, bytes(pkt))
    exp = Ether(bytes(pkt))
    exp[IP].ttl = 63
    exp[IP].tos = 0
    del exp[IP].chksum
    del exp[UDP].chksum
    assert out == [(3, bytes(Ether(bytes(exp))))]
    # odd payload length exercises the zero padding of csum16
    pkt2 = Ether(**ETH) / IP(src="1.1.1.1", dst="2.2.2.2") / UDP(sport=9, dport=9) / b"odd"
    exp2 = Ether(bytes(pkt2))
    exp2[IP].ttl -= 1
    del exp2[IP].chksum
    del exp2[UDP].chksum
    assert sw.process(0, bytes(pkt2)) == [(3, bytes(Ether(bytes(exp2))))]


def test_checksum_error_reported_and_fixed() -> None:
    sw = load("checksum")
    pkt = Ether(**ETH) / IP(src="10.1.2.3", dst="10.9.8.7", ttl=9, chksum=0x1234) / ICMP()
    out = sw.process(0, bytes(pkt))
    exp = Ether(bytes(pkt))
    exp[IP].ttl = 8
    exp[IP].tos = 1  # standard_metadata.checksum_error
    del exp[IP].chksum
    assert out == [(3, bytes(Ether(bytes(exp))))]
    assert sw.stats()["checksum_errors"] == 1


# -- tables ---------------------------------------------------------------------------------
def tables_key(e: int, addr: int, t: int, r: int, o1: int, o2: int) -> bytes:
    return struct.pack("!HIBHBB", e, addr, t, r, o1, o2)


def tables_out(sw: Switch, key: bytes) -> tuple[int, ...]:
    out = sw.process(0, key)
    assert len(out) == 1 and out[0][0] == 4 and out[0][1][8:] == key
    return struct.unpack("!8B", out[0][1][:8])


def test_tables_program() -> None:
    sw = load("tables")
    sw.table_add("I.t_exact", [0x0800], "I.set_exact", [1])
    sw.table_add("I.t_lpm", [(0x0A000000, 8)], "I.set_lpm", [8])
    sw.table_add("I.t_lpm", [(0x0A0B0000, 16)], "I.set_lpm", [16])
    sw.table_add("I.t_tern", [(0x40, 0xC0), 0x0800], "I.set_tern", [1], priority=1)
    sw.table_add("I.t_tern", [(0x41, 0xFF), 0x0800], "I.set_tern", [2], priority=2)
    sw.table_add("I.t_range", [(100, 200)], "I.set_range", [1], priority=1)
    sw.table_add("I.t_range", [(150, 160)], "I.set_range", [2], priority=5)
    sw.table_add("I.t_opt", [None, 3], "I.set_opt", [1], priority=1)
    sw.table_add("I.t_opt", [9, None], "I.set_opt", [2], priority=2)
    sw.table_add("I.t_switch", [9], "I.path_a", [])
    # (exact, lpm, tern, range, opt, const, hit_bits, path)
    assert tables_out(sw, tables_key(0x0800, 0x0A0B0C0D, 0x41, 155, 9, 3)) == (
        1,
        16,
        2,
        2,
        2,
        0xCC,
        1 | 2,
        0xA,
    )
    assert tables_out(sw, tables_key(0x0801, 0x0A0C0C0D, 0x42, 120, 1, 3)) == (
        0xEE,
        8,
        0xDD,
        1,
        1,
        0xCC,
        2 | 4,
        0xB,
    )
    assert tables_out(sw, tables_key(0x0800, 0x0B000000, 0x7F, 99, 1, 4)) == (
        1,
        0,
        1,
        0,
        0,
        0xCC,
        1,
        0xB,
    )
    assert tables_out(sw, tables_key(0, 0, 0x12, 0, 0, 0))[5] == 1  # first const entry wins
    assert tables_out(sw, tables_key(0, 0, 0x2F, 0, 0, 0))[5] == 3
    # default action change and an action that drops
    sw.table_set_default("I.t_lpm", "I.set_lpm", [0x77])
    assert tables_out(sw, tables_key(0, 0x0B000000, 0, 0, 0, 0))[1] == 0x77
    sw.table_add("I.t_exact", [0x0666], "I.drop", [])
    assert sw.process(0, tables_key(0x0666, 0, 0, 0, 0, 0)) == []
    with pytest.raises(InvalidArgument):
        sw.table_set_default("I.t_const", "I.set_const", [1])
    with pytest.raises(InvalidArgument):
        sw.table_add("I.t_const", [(1, 0xFF)], "I.set_const", [1], priority=1)


# -- registers, counters, hashes, random, multicast ------------------------------------------
RES_LEN = 29


def stateful_in(idx: int, v: int, mgid: int = 0, drop_rid: int = 0) -> bytes:
    return struct.pack("!BIBB", idx, v, mgid, drop_rid)


def parse_res(b: bytes) -> tuple[int, ...]:
    return struct.unpack("!IIHHIBHIHI", b[:RES_LEN])


def test_stateful_program() -> None:
    sw = load("stateful")
    inp = stateful_in(3, 0xFFFFFFF0)
    out = sw.process(1, inp)
    assert len(out) == 1 and out[0][0] == 5 and out[0][1][RES_LEN:] == inp
    acc, c32, c16, cs, ident, rnd_ok, rid, itype, eport, plen = parse_res(out[0][1])
    data = struct.pack("!BI", 3, 0xFFFFFFF0)
    assert acc == 0xFFFFFFF0
    assert c32 == zlib.crc32(data)
    assert c16 == crc16_arc_bitwise(data)
    words = data + b"\x00"
    tot = sum(struct.unpack("!3H", words))
    tot = (tot & 0xFFFF) + (tot >> 16)
    assert cs == (~tot) & 0xFFFF
    assert ident == 0xFFFFFFF0 % 1000 + 10
    assert (rnd_ok, rid, itype, eport) == (1, 0, 0, 5)
    assert plen == len(inp) + RES_LEN  # setValid grew the packet-length register
    out = sw.process(1, stateful_in(3, 0x20))
    assert parse_res(out[0][1])[0] == 0x10  # (0xFFFFFFF0 + 0x20) mod 2**32
    assert sw.register_read("I.acc", 3) == 0x10
    assert sw.counter_read("I.seen", 3) == (2 * len(inp), 2)
    # multicast: one copy per replica, egress_rid and instance_type=REPLICATION(5) in egress
    sw.mc_group_set(7, [(1, 10), (2, 20), (6, 20)])
    out = sw.process(1, stateful_in(0, 1, mgid=7))
    got = [(port, parse_res(fr)[6:9]) for port, fr in out]
    assert got == [(1, (10, 5, 1)), (2, (20, 5, 2)), (6, (20, 5, 6))]
    out = sw.process(1, stateful_in(0, 1, mgid=7, drop_rid=20))
    assert [p for p, _ in out] == [1]


@pytest.mark.parametrize(
    "name,construct",
    [
        ("refuse_meter", "meter"),
        ("refuse_clone", "clone"),
        ("refuse_hash", "crc32_custom"),
        ("refuse_recirculate", "recirculate"),
        ("refuse_direct_counter", "direct counter"),
    ],
)
def test_refused_programs(name: str, construct: str) -> None:
    sw = load("arith")
    with pytest.raises(UnsupportedConstruct) as ei:
        sw.load_pipeline(compiled(name))
    assert construct in str(ei.value)
    assert sw.process(0, arith_input(1, 2, 3, 4, 5, 6, 7))[0][0] == 1  # old pipeline kept
