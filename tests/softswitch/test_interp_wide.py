"""Wide fields and registers held as numpy limbs (softswitch/interp/wide.py) give exactly
what P4's fixed-width arithmetic gives.

Expected values are computed with plain Python ints modulo 2^W, independently of the
limbs: carries that cross limbs, a carry chain the width of the field, the carry out of
the top bit, sums over several packets held in a register, and the wide value flowing
into operations the fast path does not cover (a shift, a mask, a compare, a control-plane
read).
"""

from __future__ import annotations

import json
import random
import struct

from hypothesis import example, given, settings
from hypothesis import strategies as st

from jsonbuild import Program, assign, ex, f, hx, prim
from softswitch.interp.wide import LAZY_BYTES, Wide, wide_add, wide_bytes
from softswitch.switch import Switch

STD = "standard_metadata"
NB = LAZY_BYTES  # the narrowest wide field: held as limbs
W = 8 * NB
MASK = (1 << W) - 1
LANE = (1 << 32) - 1
ETH = bytes(12) + b"\x12\x34"

ALL_ONES = MASK
# a limb run of all ones from bit 0 up (a carry into it crosses every limb of the run)
RUN3 = (1 << 96) - 1
TOP = 1 << (W - 1)


def random_wide() -> st.SearchStrategy[int]:
    """A random W-bit value from a small seed (W random bits are more than hypothesis
    draws per example)."""
    return st.integers(0, 1 << 32).map(lambda seed: random.Random(seed).getrandbits(W))


def wide_values() -> st.SearchStrategy[int]:
    """W-bit values that make carries: random, all ones, limbs of all ones, top bit set."""
    rnd = random_wide()
    ones_from = st.integers(1, W).map(lambda k: (1 << k) - 1)
    lanes = st.lists(st.sampled_from([0, 1, LANE, LANE - 1, 1 << 31]), min_size=1, max_size=6)
    limbs = lanes.map(lambda xs: sum(x << (32 * i) for i, x in enumerate(xs)))
    tops = rnd.map(lambda v: v | TOP)
    return st.one_of(rnd, ones_from, limbs, tops, st.just(0))


def accumulator() -> Switch:
    """Per packet: r[0] += blk.v (mod 2^W), the sum sent back in blk, and out: the sum's top
    32 bits (a shift), its low 32 bits (a mask) and whether it is zero (a compare)."""
    p = Program()
    p.header("ethernet", [("dst", 48), ("src", 48), ("etype", 16)])
    p.header("blk", [("v", W)])
    p.header("out", [("top", 32), ("low", 32), ("zero", 8)])
    p.state(
        "start",
        [prim("extract", {"type": "regular", "value": "ethernet"})],
        key=[f("ethernet", "etype")],
        transitions=[
            {"type": "hexstr", "value": "0x1234", "mask": None, "next_state": "blk"},
            {"type": "default", "value": None, "mask": None, "next_state": None},
        ],
    )
    p.state("blk", [prim("extract", {"type": "regular", "value": "blk"})])
    p.deparse("ethernet", "out", "blk")
    p.register("r", 2, W)
    held = p.scalar("held", W)  # a wide metadata field among narrow ones
    p.scalar("narrow", 8)
    reg = {"type": "register_array", "value": "r"}
    v = f("blk", "v")
    a = p.action(
        "acc",
        [],
        [
            prim("register_read", held, reg, hx(0)),
            assign(v, ex("&", ex("+", v, held), hx(MASK))),
            prim("register_write", reg, hx(0), v),
            prim("add_header", {"type": "header", "value": "out"}),
            assign(f("out", "top"), ex("&", ex(">>", v, hx(W - 32)), hx(LANE))),
            assign(f("out", "low"), ex("&", v, hx(LANE))),
            assign(f("out", "zero"), ex("b2d", None, ex("==", v, hx(0)))),
            assign(f(STD, "mcast_grp"), hx(1)),
        ],
    )
    p.call("ingress", "acc", a)
    p.init("ingress", "acc")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    s.mc_group_set(1, [(1, 0), (2, 0)])  # two copies share the sum
    return s


def expected(total: int) -> bytes:
    out = struct.pack("!IIB", total >> (W - 32), total & LANE, int(total == 0))
    return ETH + out + total.to_bytes(NB, "big")


SWITCH = accumulator()


@settings(max_examples=25, deadline=None)
@given(wide_values(), st.lists(wide_values(), min_size=1, max_size=4))
@example(ALL_ONES, [1])  # a carry chain the width of the field, out of the top discarded
@example(0, [ALL_ONES, 1])  # the same, both operands packets
@example(RUN3, [1])  # a chain across three limbs
@example(TOP, [TOP])  # only the carry out of the top bit: the sum is 0
@example(ALL_ONES, [ALL_ONES, ALL_ONES, ALL_ONES])
def test_register_sums_over_packets_are_exact(start: int, blocks: list[int]) -> None:
    """Each packet's sum, its copies, the register and the narrow fields cut from the sum
    equal Python int arithmetic modulo 2^W."""
    SWITCH.register_write("r", 0, start)
    total = start
    for block in blocks:
        total = (total + block) & MASK
        out = SWITCH.process(3, ETH + block.to_bytes(NB, "big"))
        assert out == [(1, expected(total)), (2, expected(total))]
    assert SWITCH.register_read("r", 0) == total


@settings(max_examples=40, deadline=None)
@given(st.lists(wide_values(), min_size=2, max_size=6))
@example([ALL_ONES, 1])
@example([RUN3, 1, ALL_ONES])
def test_wide_add_of_limbs_is_the_int_sum(values: list[int]) -> None:
    """A chain of `wide_add`s on limbs (as a register accumulates them), its int and its
    bytes, against the int sum modulo 2^W."""
    frames = [b"\xee" * 3 + v.to_bytes(NB, "big") for v in values]
    acc: object = Wide.view(frames[0], 3, NB)
    for fr in frames[1:]:
        acc = wide_add(acc, Wide.view(fr, 3, NB), W, MASK)
    total = sum(values) & MASK
    assert wide_bytes(acc, NB) == total.to_bytes(NB, "big")
    assert int(acc) == total  # type: ignore[call-overload]


def test_a_wide_sum_with_an_int_operand_and_a_narrow_field_stays_an_int() -> None:
    """An int operand (a value computed by other operations) added to limbs, and a field
    narrower than LAZY_BYTES, give the same bytes as ints do."""
    a = (1 << (W - 1)) | 12345
    b = MASK - 5
    limbs = Wide.view(a.to_bytes(NB, "big"), 0, NB)
    assert wide_bytes(wide_add(limbs, b, W, MASK), NB) == ((a + b) & MASK).to_bytes(NB, "big")
    assert wide_add(7, 9, W, MASK) == 16


def spread(c: int) -> Switch:
    """blk.v = (blk.v + ((hdr.b * c) & MASK)) & MASK: a 32-bit value times a constant word
    (p4reduce's bias spread over every lane), added to a wide field."""
    p = Program()
    p.header("hdr", [("b", 32)])
    p.header("blk", [("v", W)])
    p.state(
        "start",
        [
            prim("extract", {"type": "regular", "value": "hdr"}),
            prim("extract", {"type": "regular", "value": "blk"}),
        ],
    )
    p.deparse("hdr", "blk")
    v = f("blk", "v")
    product = ex("&", ex("*", f("hdr", "b"), hx(c)), hx(MASK))
    a = p.action("add", [], [assign(v, ex("&", ex("+", v, product), hx(MASK)))])
    p.call("ingress", "add", a)
    p.init("ingress", "add")
    s = Switch()
    s.load_pipeline(json.dumps(p.j))
    return s


EVERY_LANE = sum(1 << (32 * k) for k in range(W // 32))  # 1 in every limb
# limbs up to 2^32 - 1 (their products up to ~2^64), W - 31 bits: the product fits W + 1
ANY_WORD = random.Random(7).getrandbits(W - 32) | 1 << (W - 32)
SPREADS = {c: spread(c) for c in (EVERY_LANE, ANY_WORD)}


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(sorted(SPREADS)), st.integers(0, LANE), wide_values())
@example(EVERY_LANE, LANE, ALL_ONES)
@example(ANY_WORD, LANE, ALL_ONES)
@example(ANY_WORD, 0, RUN3)
def test_a_narrow_value_times_a_constant_word_added_is_exact(c: int, b: int, block: int) -> None:
    """The product's limbs (lanes up to ~2^64 before their carries) plus the block."""
    got = SPREADS[c].process(0, struct.pack("!I", b) + block.to_bytes(NB, "big"))
    want = (block + ((b * c) & MASK)) & MASK
    assert got == [(0, struct.pack("!I", b) + want.to_bytes(NB, "big"))]
