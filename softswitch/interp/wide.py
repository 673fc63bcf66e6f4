"""Wide field and register values kept as bytes or numpy limbs until an int is needed.

Why: a wide field (a p4reduce block: 2 048 to 512 000 bits) costs more in CPython's
``int.from_bytes`` / ``int.to_bytes`` (byte by byte) than the rest of its packet, while
what the packet does with it is often only "read it, add it to a register, write the sum,
emit it". A `Wide` holds such a value as the bytes it arrived in (no copy: a view of the
frame) and as 32-bit limbs in uint64 lanes (numpy), so parse -> add -> register ->
deparse never builds a Python int. The generated code (see ``expr.ExprCompiler``) stores
a `Wide` only in a field or register of exactly its width, adds two of them with
`wide_add`, and converts with `as_int` wherever any other operation reads the value: the
fast path covers the add modulo 2^W, everything else runs on the exact int.

Exactness: a `Wide`'s lanes are carry-save (lane k may exceed 2^32: its value is
sum(lane_k * 2^(32 * (n - 1 - k))) mod 2^W, lane 0 most significant), so an add is one
vector add; the carries are resolved when the value's bytes or int are needed
(`_normalize`), exactly: a carry out of lane 0 is the bit P4's ``bit<W>`` add discards, a
carry that crosses limbs is propagated (a few vector passes, then one exact int step for a
chain longer than that). Each `Wide` knows a bound on its lanes, so a lane can never
overflow 64 bits: a sum whose bound would is made of its operands' resolved limbs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# A field at least this many bytes wide (a p4reduce block's values: 256 bytes and up) is
# a "wide" one: its int <-> bytes conversions, byte by byte in CPython, cost more than the
# rest of its packet
WIDE_BYTES = 256
# ... and from this many bytes on (2 048 32-bit values) it is held as a `Wide`: below it, a
# vector add's fixed cost (a few numpy calls of ~1 us) is more than the int conversions
# it saves (bench/packet_profile.py at 256..64 000-byte blocks)
LAZY_BYTES = 8192
LANE_BITS = 32
LANE_MASK = np.uint64((1 << LANE_BITS) - 1)
LIMB = 1 << LANE_BITS  # a normalized lane is below this
# a lane of a sum is below the sum of its terms' lane bounds: resolve the carries before
# that bound could pass 2^64
MAX_LANE = 1 << 64
# vector carry passes before the exact int step (a chain longer than this is rare: an
# all-ones limb run plus a carry into it)
CARRY_PASSES = 4


def lazy_width(width: int, signed: bool) -> bool:
    """Whether a field or register of `width` bits holds `Wide` values: unsigned, at least
    `LAZY_BYTES` wide, a whole number of 32-bit limbs."""
    return not signed and width >= 8 * LAZY_BYTES and width % LANE_BITS == 0


class Wide:
    """One unsigned value of ``4 * n`` bytes, immutable: several PHVs and a register may
    hold the same object (a multicast's copies share their ingress PHV's values)."""

    __slots__ = ("n", "_buf", "_off", "_bytes", "_lanes", "_hi", "_int")

    def __init__(self, n: int) -> None:
        self.n = n  # limbs
        self._buf: bytes | None = None  # big-endian bytes of the value start at _off
        self._off = 0
        self._bytes: bytes | None = None
        self._lanes: np.ndarray | None = None  # uint64, carry-save
        self._hi = LIMB  # every lane is below _hi
        self._int: int | None = None

    @classmethod
    def view(cls, data: bytes, pos: int, nbytes: int) -> Wide:
        """The value of ``data[pos:pos + nbytes]`` (big-endian), without copying it; `data`
        is immutable (a frame), so the view stays true."""
        w = cls(nbytes // 4)
        w._buf, w._off = data, pos
        if pos == 0 and len(data) == nbytes:
            w._bytes = data
        return w

    @classmethod
    def of_int(cls, v: int, n: int) -> Wide:
        w = cls(n)
        w._int = v
        return w

    # -- forms -----------------------------------------------------------------------------
    def lanes(self) -> np.ndarray:
        """The limbs as uint64 lanes, most significant first (carry-save)."""
        a = self._lanes
        if a is None:
            a = self._lanes = self.new_lanes()
        return a

    def new_lanes(self) -> np.ndarray:
        """A new array of the limbs (the caller's to change) when none is held, else the
        held one (not to be changed)."""
        if self._lanes is not None:
            return self._lanes
        if self._buf is None:
            self._bytes = self.to_bytes()
            self._buf, self._off = self._bytes, 0
        return np.frombuffer(self._buf, ">u4", self.n, self._off).astype(np.uint64)

    def to_bytes(self) -> bytes:
        """The value's 4n big-endian bytes (made once per object)."""
        b = self._bytes
        if b is None:
            if self._buf is not None:
                b = self._buf[self._off : self._off + 4 * self.n]
            elif self._lanes is not None:
                a = self._lanes = _normalize(self._lanes, self._hi)
                self._hi = LIMB  # the same value, its carries resolved
                b = a.astype(">u4").tobytes()
            else:
                assert self._int is not None
                b = self._int.to_bytes(4 * self.n, "big")
            self._bytes = b
        return b

    def __int__(self) -> int:
        v = self._int
        if v is None:
            v = self._int = int.from_bytes(self.to_bytes(), "big")
        return v

    __index__ = __int__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (int, Wide)):
            return int(self) == int(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(int(self))

    def __repr__(self) -> str:
        return f"Wide({4 * self.n} bytes)"


def _normalize(a: np.ndarray, hi: int) -> np.ndarray:
    """Carry-save lanes as limbs below 2^32 (a new array), the carry out of lane 0 dropped:
    the value modulo 2^(32n), exactly."""
    if hi <= LIMB or not int(a.max()) >> LANE_BITS:
        return a  # every lane already below 2^32 (one reduction, no allocation)
    for _ in range(CARRY_PASSES):
        c = a >> np.uint64(LANE_BITS)
        a = a & LANE_MASK  # a new array: `a` may be a held value's lanes
        a[:-1] += c[1:]
        if not int(a.max()) >> LANE_BITS:
            return a
    # a long carry chain: one exact step on ints. a = lows + carries * 2^32 (per lane)
    c = a >> np.uint64(LANE_BITS)
    a &= LANE_MASK
    n = len(a)
    low = int.from_bytes(a.astype(">u4").tobytes(), "big")
    high = int.from_bytes(c.astype(">u4").tobytes(), "big") << LANE_BITS
    v = (low + high) & ((1 << (LANE_BITS * n)) - 1)
    return np.frombuffer(v.to_bytes(4 * n, "big"), ">u4").astype(np.uint64)


def as_int(v: Any) -> int:
    """The int of a field or register value (`Wide` or int): what every operation other
    than `wide_add` reads."""
    return v if type(v) is int else int(v)


def wide_bytes(v: Any, nbytes: int) -> bytes:
    """A wide field's bytes for the deparser (an int's, or a `Wide`'s own); 0 (an
    all-zero block) without to_bytes' byte-by-byte padding."""
    if type(v) is int:
        return v.to_bytes(nbytes, "big") if v else bytes(nbytes)
    return v.to_bytes()


def wide_add(a: Any, b: Any, w: int, mask: int) -> Any:
    """``(a + b) & mask`` (mask = 2^w - 1) for two w-bit values, each an int or a `Wide`
    of w bits: a `Wide` when either is one (a vector add of limbs), an int otherwise."""
    ta, tb = type(a) is int, type(b) is int
    if ta and tb:
        s = a + b
        return s & mask if s >> w else s
    if ta and not a:
        return b
    if tb and not b:
        return a
    if (ta and b._int is not None) or (tb and a._int is not None):
        s = as_int(a) + as_int(b)  # the Wide's int is known: no conversion either way
        return s & mask if s >> w else s
    if ta:
        a = _as_wide(a, b)
    elif tb:
        b = _as_wide(b, a)
    out = Wide(a.n)
    hi = a._hi + b._hi
    if hi > MAX_LANE:
        out._lanes, out._hi = _normalize(a.lanes(), a._hi) + _normalize(b.lanes(), b._hi), 2 * LIMB
        return out
    if a._lanes is not None:
        a, b = b, a
    if a._lanes is None:  # a packet's block: its limbs in a new array, the sum made in it
        s = a.new_lanes()
        s += b.lanes()
    else:
        s = a._lanes + b._lanes
    out._lanes, out._hi = s, hi
    return out


def wide_mul(v: int, limbs: np.ndarray, top: int) -> Any:
    """``(v * c) mod 2^W`` for 0 <= v < 2^32 and a constant c given as its W-bit limbs
    (`const_limbs`; `top`: the largest): a `Wide` whose lane k is ``v * c_k`` (below 2^64,
    carry-save), so a narrow value times a constant word -- p4reduce's bias spread over
    every lane -- joins a `wide_add` without an int."""
    if not v:
        return 0
    out = Wide(len(limbs))
    out._lanes, out._hi = limbs * np.uint64(v), v * top + 1
    return out


def const_limbs(c: int, w: int) -> np.ndarray:
    """The limbs (uint64 lanes, most significant first) of ``c mod 2^w``."""
    return np.frombuffer((c & ((1 << w) - 1)).to_bytes(w // 8, "big"), ">u4").astype(np.uint64)


def _as_wide(v: int, like: Wide) -> Wide:
    """An int operand as a `Wide` of `like`'s width (its bytes: one to_bytes, cheaper than
    the from_bytes the other way round)."""
    return Wide.of_int(v, like.n)
