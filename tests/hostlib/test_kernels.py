"""hostlib's compiled kernels (hostlib/_kernels.c) against section 10's arithmetic done
in Python's own numbers: int, Fraction and float, no rounding but the ones the rule states.

numerics' quantize, from_packed and dequantize run in these kernels; the oracle here
computes each value on its own: the product as one float64 multiply, rounded half to
even to an integer; the quotient in rationals, rounded once by float() (correctly
rounded), then to the tensor's dtype."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostlib import _kernels
from hostlib import numerics as nm
from hostlib import protocol as p


def _exact_q(x: float, e: int, n: int) -> int:
    """rint(x * s), s = floor(M/N) * 2^-E (exact in float64): the product rounded once to
    float64 (Python's float multiply, section 10's evaluation), then to the nearest
    integer, half to even (round())."""
    return round(float(x) * (nm.level(n) * 2.0**-e))


def _exact_sum(q: int, e: int, n: int) -> float:
    """q * 2^E / floor(M/N), rounded once to float64."""
    return float(Fraction(q) * Fraction(2) ** e / nm.level(n))


def _row_values(rng: np.random.Generator, k: int, dtype) -> tuple[np.ndarray, int]:
    """A row of k values of one magnitude, with ties (x * scale = m + 1/2) among them, and
    the exponent of its max (block_exponents)."""
    e = int(rng.integers(-120, 120))
    x = (rng.uniform(-1, 1, k) * 2.0**e).astype(dtype)
    # values whose product with floor(M/N) * 2^-E is exactly half an odd or even integer
    half = np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float64)[: k - 1]
    ties = half * 2.0**e / nm.level(4)
    x[: ties.size] = ties.astype(dtype)
    x[ties.size] = 0.0
    return x, int(nm.block_exponents(x[None, :])[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("packed", [False, True])
def test_quantize_is_the_exactly_rounded_product_plus_bias_in_the_wires_order(dtype, packed, rng):
    n = 4
    rows = [_row_values(rng, 37, dtype) for _ in range(6)]
    x = np.stack([r for r, _ in rows])
    e = np.array([e for _, e in rows], np.int32)
    bias = nm.packed_bias(n) if packed else 0
    got = nm.quantize_packed(x, e, n, np.empty(x.shape, p.VALUES_DTYPE)) if packed else None
    native = nm.quantize(x, e, n) if not packed else None
    for r in range(x.shape[0]):
        for i in range(x.shape[1]):
            want = (_exact_q(float(x[r, i]), int(e[r]), n) + bias) % 2**32
            have = int(got[r, i]) % 2**32 if packed else int(native[r, i]) % 2**32
            assert have == want, (r, i, float(x[r, i]))
    if packed:  # the wire's bytes: big-endian
        raw = got.tobytes()
        assert int.from_bytes(raw[:4], "big") == int(got[0, 0]) % 2**32


@settings(max_examples=60, deadline=None)
@given(
    k=st.integers(1, 70),
    n=st.integers(2, 64),
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_quantize_then_dequantize_matches_rationals_at_any_shape(k, n, seed, dtype):
    """Any row width and job size: the quantized integers, the N biases taken off their
    packed sum (unbias), and the quotient rounded to the tensor's dtype, each as the
    rationals give it -- also where dequantize takes the biases off the received lanes
    itself, in its one pass (what a rank does with a float RESULT)."""
    rng = np.random.default_rng(seed)
    xs = [np.stack([_row_values(rng, k, dtype)[0] for _ in range(3)]) for _ in range(2)]
    e = np.max([nm.block_exponents(x) for x in xs], axis=0).astype(np.int32)
    sent = [nm.quantize_packed(x, e, n, np.empty(x.shape, p.VALUES_DTYPE)) for x in xs]
    lanes = sum(s.astype(np.int64) % 2**32 for s in sent) % 2**32
    wire = lanes.astype(np.uint32).astype(">u4").view(p.VALUES_DTYPE)
    sums = nm.from_packed(wire, n)
    got = nm.dequantize(sums, e, n, dtype)
    fused = nm.dequantize(wire, e, n, dtype, bias=nm.packed_sum_bias(n))
    for r in range(3):
        for i in range(k):
            q = sum(_exact_q(float(x[r, i]), int(e[r]), n) for x in xs)
            unbiased = (int(lanes[r, i]) - n * nm.packed_bias(n)) % 2**32
            assert int(sums[r, i]) % 2**32 == unbiased
            s = int(sums[r, i])
            assert got[r, i] == dtype(_exact_sum(s, int(e[r]), n)), (r, i, s)
            assert fused[r, i] == got[r, i], (r, i, s)
            if n == 2:  # two ranks sent: the unbiased sum is their integers' sum
                assert s == q


def test_kernels_write_only_the_rows_values_of_a_view_of_frames(rng):
    """Rows that are a view of wider frames (framing.values_columns): the kernels write
    each row's values and nothing between them."""
    x = rng.standard_normal((5, 16)).astype(np.float32)
    frames = np.full((5, 100), 0xEE, np.uint8)
    cols = frames[:, 20:84].view(p.VALUES_DTYPE)
    e = nm.block_exponents(x).astype(np.int32)
    nm.quantize_packed(x, e, 4, cols)
    assert (frames[:, :20] == 0xEE).all() and (frames[:, 84:] == 0xEE).all()
    assert (cols == nm.quantize_packed(x, e, 4)).all()
    out = np.full((5, 40), 7.0, np.float32)
    nm.dequantize(nm.from_packed(cols, 4), e, 4, np.float32, out[:, 10:26])
    assert (out[:, :10] == 7.0).all() and (out[:, 26:] == 7.0).all()


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_rows_at_any_byte_offset_give_the_aligned_rows_values(offset, rng):
    """A frame's values start where its headers end, and a tensor may be a view at any
    byte offset: the kernels read and write such rows as they do aligned ones."""

    def at(offset: int, shape: tuple[int, int], dtype) -> np.ndarray:
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.ndarray(shape, dtype, np.zeros(size + 8, np.uint8), offset)

    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((7, 33)).astype(dtype)
        moved = at(offset, x.shape, dtype)
        moved[...] = x
        e = nm.block_exponents(x).astype(np.int32)
        want = nm.quantize_packed(x, e, 4, np.empty(x.shape, p.VALUES_DTYPE))
        got = nm.quantize_packed(moved, e, 4, at(offset, x.shape, p.VALUES_DTYPE))
        assert (got == want).all()
        sums = nm.from_packed(got, 4, at(offset, x.shape, np.int32))
        assert (sums == nm.from_packed(want, 4)).all()
        out = nm.dequantize(sums, e, 4, dtype, at(offset, x.shape, dtype))
        assert (out == nm.dequantize(nm.from_packed(want, 4), e, 4, dtype)).all()
        peaks = nm.max_abs(moved, at(offset, (7, 1), dtype)[:, 0])
        assert (peaks == np.abs(x).max(axis=1)).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_abs_orders_every_kind_of_float_as_abs_then_max_does(dtype, rng):
    """max_abs compares bits, not floats: every pair of the special values (both zeros,
    the smallest subnormal, the largest finite, both infinities, NaNs of either sign and
    other payloads) and ordinary values, in each order, gives np.abs(row).max() -- a NaN
    wherever one is in the row (its sign cleared), else Inf wherever one is."""
    info = np.finfo(dtype)
    uint = np.uint32 if dtype == np.float32 else np.uint64
    quiet = np.array([np.nan], dtype)
    other_nan = (quiet.view(uint) | uint(1)).view(dtype)  # another payload
    special = np.concatenate(
        [
            np.array([0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal], dtype),
            np.array([info.max, -info.max, np.inf, -np.inf, 1.5, -2.25], dtype),
            quiet,
            -quiet,
            other_nan,
        ]
    )
    pairs = np.array(np.meshgrid(special, special)).T.reshape(-1, 2)
    rows = np.concatenate([pairs, rng.standard_normal(pairs.shape).astype(dtype)], axis=1)
    want = np.abs(rows).max(axis=1)
    got = nm.max_abs(rows)
    assert np.array_equal(got, want, equal_nan=True)
    assert not np.signbit(got).any()


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: _kernels.quantize(
                np.zeros((2, 4), np.float32), np.ones(2), 0, np.zeros((4, 2), np.int32)
            ),
            "shape",
        ),
        (
            lambda: _kernels.quantize(
                np.zeros((2, 4), np.float32), np.ones(2), 0, np.zeros((2, 8), np.int32)[:, ::2]
            ),
            "not contiguous",
        ),
        (
            lambda: _kernels.quantize(
                np.zeros((2, 4), np.int32), np.ones(2), 0, np.zeros((2, 4), np.int32)
            ),
            "float32/float64",
        ),
        (
            lambda: _kernels.quantize(
                np.zeros((2, 4), np.float32), np.ones(3), 0, np.zeros((2, 4), np.int32)
            ),
            "scale",
        ),
        (
            lambda: _kernels.dequantize(
                np.zeros((2, 4), np.int32), np.ones(2), np.zeros((2, 4), np.int32)
            ),
            "int32 sums into native float32/float64",
        ),
        (
            lambda: _kernels.unbias(np.zeros(4, np.int32), 0, np.zeros(4, np.int32)),
            "dimensions",
        ),
        (
            lambda: _kernels.max_abs(np.zeros((2, 4), np.int32), np.zeros(2, np.int32)),
            "native float32/float64 values",
        ),
        (
            lambda: _kernels.max_abs(np.zeros((2, 4), np.float32), np.zeros(2, np.float64)),
            "one contiguous native float of the values' type per row",
        ),
        (
            lambda: _kernels.max_abs(np.zeros((2, 4), np.float32), np.zeros(3, np.float32)),
            "per row",
        ),
        (lambda: _numbers(np.zeros((2, 8), np.uint8), [0, 1], [1], [0], [255]), "add up"),
        (lambda: _numbers(np.zeros((2, 8), np.uint8), [7, 8], [2], [0], [255]), "outside"),
        (lambda: _numbers(np.zeros((2, 8), np.uint8), [0] * 9, [9], [0], [255]), "1 to 8"),
        (lambda: _numbers(np.zeros((2, 8), np.uint16), [0], [1], [0], [255]), "uint8"),
        (lambda: _numbers(np.zeros((2, 8), np.uint8), [0], [1], [0], [255], rows=3), "out"),
    ],
)
def test_kernels_refuse_what_they_cannot_read_or_write_saying_what(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def _numbers(frames, columns, widths, shift, mask, rows=None) -> np.ndarray:
    out = np.full((len(widths), frames.shape[0] if rows is None else rows), -1, np.int64)
    _kernels.numbers(
        frames,
        np.array(columns, np.intp),
        *(np.array(a, np.int64) for a in (widths, shift, mask)),
        out,
    )
    return out


def test_numbers_reads_each_rows_big_endian_numbers_shifted_and_masked(rng):
    """Rows any distance apart (a view of wider frames), numbers of 1 to 8 bytes from any
    columns in any order: each is int.from_bytes of its bytes, big-endian, shifted and
    masked."""
    wide = rng.integers(0, 256, (6, 40), dtype=np.uint8)
    frames = wide[:, 3:30]
    specs = [([0], 0, 0xFF), ([5, 2, 9], 3, 0xFFF), (list(range(10, 18)), 1, (1 << 62) - 1)]
    cols = [col for c, _, _ in specs for col in c]
    got = _numbers(
        frames,
        cols,
        [len(c) for c, _, _ in specs],
        [s for _, s, _ in specs],
        [m for _, _, m in specs],
    )
    for r in range(frames.shape[0]):
        for j, (c, shift, mask) in enumerate(specs):
            want = (int.from_bytes(bytes(frames[r, c].tolist()), "big") >> shift) & mask
            assert int(got[j, r]) == want, (r, j)


def test_a_read_only_out_is_refused_and_left_as_it_was():
    out = np.zeros((2, 4), np.int32)
    out.setflags(write=False)
    with pytest.raises((ValueError, BufferError), match="writable|read-only"):
        _kernels.quantize(np.ones((2, 4), np.float32), np.ones(2), 0, out)
    assert (out == 0).all()
