"""Blocks, sparsity and block floating point against docs/protocol.md sections 5 and 10."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from hostlib import numerics as nm
from hostlib import protocol as p
from hostlib.scratch import Scratch


def test_blocks_pad_last_block_with_zeros():
    x = np.arange(1, 131, dtype=np.int32)  # 130 values -> 3 blocks
    b = nm.to_blocks(x)
    assert b.shape == (3, 64)
    assert (b.reshape(-1)[:130] == x).all() and (b.reshape(-1)[130:] == 0).all()


def test_nonzero_blocks_found_per_block(rng):
    x = np.zeros(64 * 10 + 5, np.float32)
    x[64 * 3 + 7] = 1.0
    x[64 * 10 + 4] = -2.0  # in the padded last block
    x[64 * 6] = -0.0  # negative zero is zero
    pl = nm.make_payload(x, 2)
    assert pl.nonzero.tolist() == [3, 10]
    assert pl.nblocks == 11


@pytest.mark.parametrize(
    "value,e",
    [(1.0, 0), (0.75, 0), (0.5, -1), (3.0, 2), (4.0, 2), (2.0**-130, -128), (2.0**127, 127)],
)
def test_exponent_is_smallest_power_of_two_covering_max(value, e):
    blk = np.zeros((1, 64))
    blk[0, 5] = -value
    assert nm.block_exponents(blk)[0] == e


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_inf_refused(bad):
    x = np.ones(100, np.float32)
    x[77] = bad
    with pytest.raises(ValueError, match="NaN or Inf.*77"):
        nm.make_payload(x, 2)


def test_refusal_announced_instead_of_raised():
    """The Worker's way: no values, the length and the NONFINITE code (every rank then fails
    the call together; test_worker_loopback)."""
    x = np.ones(200, np.float64)
    x[130] = np.nan
    pl = nm.make_payload(x, 3, announce_refusal=True)
    assert "NaN or Inf" in pl.refused and "130" in pl.refused
    assert pl.nblocks == 4 and pl.nonzero.size == 0
    assert p.describe_fingerprint(pl.fingerprint) == ("nonfinite", 200)
    assert nm.make_payload(np.ones(200), 3, announce_refusal=True).refused == ""


def test_beyond_2_127_refused():
    x = np.ones(10, np.float64)
    x[3] = 2.0**128
    with pytest.raises(ValueError, match="2\\^127"):
        nm.make_payload(x, 2)


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="int32, float32 or float64"):
        nm.make_payload(np.ones(4, np.int64), 1)


@pytest.mark.parametrize("magnitude", [1e-6, 1.0, 1e6])
@pytest.mark.parametrize("worker_count", [1, 2, 3, 8, 32])
def test_quantized_sum_within_documented_bound(magnitude, worker_count, rng):
    """Quantize N ranks' blocks with the switch's exponent (max over ranks), add the int32
    values like the switch, dequantize: |error| <= N * 2^(E-1) / floor(M/N) per element,
    and never overflows int32."""
    xs = [
        rng.standard_normal((50, 64)) * magnitude * rng.uniform(0.1, 10, (50, 1))
        for _ in range(worker_count)
    ]
    exps = np.max([nm.block_exponents(x) for x in xs], axis=0)
    qs = [nm.quantize(x, exps, worker_count) for x in xs]
    total = np.sum([q.astype(np.int64) for q in qs], axis=0)
    assert np.abs(total).max() <= nm.M  # cannot overflow
    assert all(np.abs(q).max() <= nm.level(worker_count) for q in qs)
    got = nm.dequantize(total.astype(np.int32), exps, worker_count)
    exact = np.sum(xs, axis=0)
    bound = nm.error_bound(exps, worker_count)[:, None]
    assert (np.abs(got - exact) <= bound * (1 + 1e-12)).all()
    # The bound is the documented relative one: below N^2 / (2^31 - N) of the block max.
    blockmax = np.max([np.abs(x).max(axis=1) for x in xs], axis=0)
    rel = np.abs(got - exact).max(axis=1) / blockmax
    assert (rel < worker_count**2 / (2**31 - worker_count)).all()


def test_quantization_is_not_trivially_exact(rng):
    """The bound test above would pass for a lossless path too; make sure the bound is
    tight enough to catch a wrong scale (off by one exponent)."""
    x = rng.standard_normal((20, 64))
    e = nm.block_exponents(x)
    q = nm.quantize(x, e + 1, 1)  # wrong: one exponent too large
    wrong = nm.dequantize(q, e, 1)  # dequantized with the right one
    assert (np.abs(wrong - x) > nm.error_bound(e, 1)[:, None]).any()


def test_payload_refuses_switch_exponent_below_own():
    x = np.full(64, 3.0)  # e = 2
    pl = nm.make_payload(x, 2)
    with pytest.raises(p.ProtocolError, match="below"):
        pl.values(np.array([0]), np.array([1 + p.EXPONENT_BIAS]))


def _switch_path(xs: list[np.ndarray], worker_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Every rank quantizes with the negotiated exponent (max over ranks), the switch adds
    the int32 values, the worker dequantizes: the float path of section 10."""
    exps = np.max([nm.block_exponents(x) for x in xs], axis=0)
    total = np.sum([nm.quantize(x, exps, worker_count).astype(np.int64) for x in xs], axis=0)
    assert np.abs(total).max() <= nm.M
    return nm.dequantize(total.astype(np.int32), exps, worker_count), exps


@pytest.mark.parametrize("worker_count", [1, 3, 8, 32])
def test_documented_bounds_at_every_magnitude(worker_count, rng):
    """docs/protocol.md section 10, over the whole float64 range: the absolute bound holds
    for every input; the relative one exactly from a block max of 2^-129 up, and it is
    really lost below (the exponent is clamped at -128), so its domain is not a formality."""
    powers = np.arange(-1074, 128, 3)  # subnormals up to 2^127
    for lo in range(0, powers.size, 64):
        p2 = powers[lo : lo + 64]
        xs = [
            np.ldexp(
                rng.uniform(0.25, 1.0, (p2.size, 64)) * rng.choice([-1, 1], (p2.size, 64)),
                p2[:, None],
            )
            for _ in range(worker_count)
        ]
        got, exps = _switch_path(xs, worker_count)
        exact = np.sum(xs, axis=0)
        err = np.abs(got - exact).max(axis=1)
        blockmax = np.max([np.abs(x).max(axis=1) for x in xs], axis=0)
        assert (exps == nm.negotiated_exponent(blockmax)).all()
        assert (err <= nm.error_bound(exps, worker_count)).all()
        assert (err <= nm.sum_error_bound(blockmax, worker_count)).all()
        rel = err / blockmax
        inside = blockmax >= nm.RELATIVE_MIN
        assert (rel[inside] <= nm.relative_error_bound(worker_count)).all()
        far_below = blockmax < nm.RELATIVE_MIN * 2.0**-40
        assert (rel[far_below] > nm.relative_error_bound(worker_count)).all()


@pytest.mark.parametrize("worker_count", [1, 4])
def test_relative_bound_at_the_edge_of_its_domain(worker_count):
    """Block max exactly 2^-129 (E clamped to -128 = 2 * max: the bound's tightest case),
    and just below it, where only the absolute bound is promised."""
    for m, relative in ((nm.RELATIVE_MIN, True), (nm.RELATIVE_MIN * 0.75, False)):
        x = np.full((1, 64), m)
        x[0, 1:] *= np.linspace(-1, 1, 63) * (1 - 2.0**-30)  # values between the steps
        got, exps = _switch_path([x] * worker_count, worker_count)
        assert exps[0] == nm.MIN_EXPONENT
        err = np.abs(got - worker_count * x).max()
        assert err <= nm.error_bound(exps, worker_count)[0]
        if relative:
            assert err / m <= nm.relative_error_bound(worker_count)


def test_values_far_below_the_quantum_come_back_as_zero():
    """What the absolute bound means in practice: a block whose values are all below half
    a quantum (2^-129 / floor(M/N)) sums to zero, within N * 2^-129 / floor(M/N)."""
    x = np.full((1, 64), 1e-300)
    got, exps = _switch_path([x, x], 2)
    assert (got == 0).all()
    assert np.abs(got - 2 * x).max() <= nm.sum_error_bound(np.array([1e-300]), 2)[0]


@pytest.mark.parametrize("encoding", [p.Encoding.LANES, p.Encoding.PACKED])
def test_int32_halves_in_a_lanes_job_and_always_in_a_packed_one(encoding):
    """A lanes job with int32_halves sends the halves themselves (what the switch adds as
    lanes); a packed job biases them. Either way the exact sum comes back from the halves."""
    x = np.array([2**30 + 5, -(2**31), -1, 70000] + [0] * 124, np.int32)  # 2 blocks
    plain = nm.make_payload(x, 2, encoding)
    halves = nm.make_payload(x, 2, encoding, int32_halves=True)
    assert halves.halves and halves.nblocks == 4 and halves.nonzero.tolist() == [0, 1]
    assert plain.halves == (encoding == p.Encoding.PACKED)
    rows = np.arange(halves.nblocks)
    sent = halves.values(rows, halves.exponent_biased[rows])
    if encoding == p.Encoding.LANES:
        assert (sent == nm.split_halves(nm.to_blocks(x))).all()
    else:
        assert (sent == nm.to_packed(nm.split_halves(nm.to_blocks(x)), 2)).all()
    out = nm.Output(halves)
    out.store(rows, nm.split_halves(nm.to_blocks(x)) * 2, halves.exponent_biased[rows])
    with pytest.raises(OverflowError, match=r"1 block\(s\): block 0 \(elements 0\.\.63\)"):
        out.finish()  # 2 * (2^30 + 5) and 2 * -2^31 do not fit int32
    assert (out.blocks[0, 2:4] == 2 * x[2:4]).all() and (out.blocks[1] == 0).all()
    assert not nm.make_payload(np.ones(3, np.float32), 2, int32_halves=True).halves


@pytest.mark.parametrize("worker_count", [2, 4])
def test_packed_wire_values_quantize_and_sum_exactly(worker_count, rng):
    """A rank's biased lanes are to_packed(quantize(...)), and from_packed takes the N
    biases off the sum of N such lanes read as the wire has them (big-endian:
    framing.parse_batch leaves received values so) as well as native: the exact sum of the
    ranks' quantized values, as native int32."""
    xs = [
        rng.standard_normal((6, 256)) * 10.0 ** rng.integers(-20, 20) for _ in range(worker_count)
    ]
    e = np.max([nm.block_exponents(x) for x in xs], axis=0).astype(np.int32)
    sent = [nm.quantize_packed(x, e, worker_count) for x in xs]
    assert all(
        (s == nm.to_packed(nm.quantize(x, e, worker_count), worker_count)).all()
        for s, x in zip(sent, xs)
    )
    lanes = np.sum([s.view(np.uint32).astype(np.int64) for s in sent], axis=0)
    assert lanes.max() < 2**32  # the switch's lane sum does not carry
    exact = np.sum([nm.quantize(x, e, worker_count).astype(np.int64) for x in xs], axis=0)
    native = lanes.astype(np.uint32).view(np.int32)
    wire = native.astype(p.VALUES_DTYPE)  # the same values in the wire's byte order
    for sums in (native, wire):
        got = nm.from_packed(sums, worker_count)
        assert got.dtype == np.int32 and (got == exact).all()
        out = np.full(sums.shape, -1, np.int32)  # a Scratch buffer: written in place
        into = nm.from_packed(sums, worker_count, out)
        assert np.shares_memory(into, out) and (out == exact).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_sum_is_dequantized_into_the_tensors_dtype_as_float64_rounded(dtype, rng):
    """dequantize straight into float32 is the float64 quotient rounded to float32, bit for
    bit (what the float64 result cast afterwards gives); Output stores it so, and a mean
    divides the float64 quotient before the rounding."""
    sums = rng.integers(-(2**31), 2**31, (5, 300)).astype(np.int32)
    e = rng.integers(-130, 130, 5).clip(nm.MIN_EXPONENT, nm.MAX_EXPONENT)
    wide = nm.dequantize(sums, e, 3)
    assert wide.dtype == np.float64
    got = nm.dequantize(sums.astype(p.VALUES_DTYPE), e, 3, dtype)
    assert got.dtype == dtype and (got == wide.astype(dtype)).all()
    pl = nm.make_payload(np.ones(5 * 300, dtype), 3, block_values=300)
    for divisor in (1, 3):
        out = nm.Output(pl, divisor)
        out.store(np.arange(5), sums, e.astype(np.int16) + p.EXPONENT_BIAS)
        assert (out.finish().reshape(5, 300) == (wide / divisor).astype(dtype)).all()


def test_output_takes_a_packed_bias_off_as_it_dequantizes_whatever_it_holds_back(rng):
    """A float RESULT's lanes stored with the N ranks' packed bias still in them (a rank's
    received values, wire order) give what their exact sums give: stored at once, held
    back in small batches (64 values per block: STORE_VALUES rows at a time), and mixed
    with sums stored without a bias. An int payload's sums must come unbiased."""
    n, k = 3, 64
    pl = nm.make_payload(np.ones(40 * k, np.float32), n, p.Encoding.PACKED, block_values=k)
    sums = rng.integers(-(2**31), 2**31, (40, k)).astype(np.int32)
    e = rng.integers(-20, 20, 40).astype(np.int16) + p.EXPONENT_BIAS
    lanes = (sums.astype(np.int64) + nm.packed_sum_bias(n)) % 2**32
    wire = lanes.astype(np.uint32).astype(">u4").view(p.VALUES_DTYPE)
    want = nm.Output(pl)
    want.store(np.arange(40), sums, e)
    got = nm.Output(pl)
    for part in np.array_split(np.arange(40), 8):  # 5 rows each: held back, mostly
        if part[0] % 2:
            got.store(part, sums[part], e[part])
        else:
            got.store(part, wire[part], e[part], nm.packed_sum_bias(n))
    assert (got.finish() == want.finish()).all()
    ints = nm.make_payload(np.ones(40 * k, np.int32), n, p.Encoding.PACKED, block_values=k)
    with pytest.raises(ValueError, match="unbias"):
        nm.Output(ints).store(np.arange(40), wire, e, nm.packed_sum_bias(n))


@pytest.mark.parametrize("encoding", [p.Encoding.LANES, p.Encoding.PACKED])
def test_quantizing_in_a_scratch_reuses_its_buffers_with_the_same_values(encoding, rng):
    """One Scratch serves a Worker's calls whatever their dtype, block size and batch: the
    values to send are those quantized without it, bit for bit, and a second batch of the
    same shape is quantized in the first one's memory (no new buffer). They come in the
    wire's byte order, the int32 of section 10's quantize (and to_packed) bit for bit."""
    scratch = Scratch()
    for dtype, k, rows in ((np.float64, 300, 5), (np.float32, 64, 9), (np.float32, 300, 2)):
        x = rng.standard_normal(12 * k + 5).astype(dtype) * 10.0 ** rng.integers(-9, 9)
        pl = nm.make_payload(x, 3, encoding, block_values=k)
        blocks = rng.choice(pl.nblocks - 1, rows, replace=False)  # complete blocks
        e = pl.exponent_biased[blocks] + rng.integers(0, 3, rows).astype(np.int16)
        q = nm.quantize(nm.to_blocks(x, k)[blocks], e.astype(np.int32) - p.EXPONENT_BIAS, 3)
        lanes = nm.to_packed(q, 3) if encoding == p.Encoding.PACKED else q
        want = pl.values(blocks, e)
        got = pl.values(blocks, e, scratch)
        assert got.dtype == want.dtype == p.VALUES_DTYPE
        assert (got == want).all() and (got.astype(np.int32) == lanes).all()
        again = pl.values(blocks[::-1], e[::-1], scratch)
        assert np.shares_memory(got, again) and (again == want[::-1]).all()


@pytest.mark.parametrize("encoding", [p.Encoding.LANES, p.Encoding.PACKED])
def test_evenly_spaced_blocks_are_quantized_from_the_tensor_as_gathered_ones(encoding, rng):
    """Blocks b, b+d, b+2d, ... (consecutive slots' blocks) are read in place from the
    tensor instead of gathered: the values sent are the same bit for bit, whatever the
    spacing, and the padded last block (no view of it exists) is still sent as padded."""
    k = 64
    x = rng.standard_normal(12 * k + 5).astype(np.float32)
    pl = nm.make_payload(x, 3, encoding, block_values=k)
    scratch = Scratch()
    for blocks in ([4], [2, 3, 4, 5], [1, 4, 7, 10], [9, 12], [12]):
        blocks = np.array(blocks)
        e = pl.exponent_biased[blocks] + 1
        q = nm.quantize(nm.to_blocks(x, k)[blocks], e.astype(np.int32) - p.EXPONENT_BIAS, 3)
        want = nm.to_packed(q, 3) if encoding == p.Encoding.PACKED else q
        assert (pl.values(blocks, e, scratch).astype(np.int32) == want).all(), blocks


def test_a_warm_scratch_quantizes_wide_blocks_without_tensor_sized_temporaries(rng):
    """After a first batch, quantizing rows of K = 16 000 values allocates no row-sized
    temporary: the gathered rows, their float64 products and the cast all reuse the
    Scratch (fresh large arrays are pages the kernel maps and zeroes on every turn)."""
    k, rows = 16_000, 4
    pl = nm.make_payload(
        rng.standard_normal(8 * k).astype(np.float32), 4, p.Encoding.PACKED, block_values=k
    )
    blocks, scratch = np.arange(rows), Scratch()
    pl.values(blocks, pl.exponent_biased[blocks], scratch)
    tracemalloc.start()
    try:
        pl.values(blocks, pl.exponent_biased[blocks], scratch)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # less than one float64 row (numpy's casting buffers are a fixed 8 192 values); fresh
    # temporaries were 4 rows of float32, float64 and int32: 16 bytes a value
    assert peak < k * 8


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_output_keeps_its_own_copy_of_sums_that_wait_in_a_scratch_view(dtype, rng):
    """Sums handed to Output.store may be a Scratch view the next turn overwrites: a store
    too small to flush at once keeps a copy, so the result is the sums as stored."""
    k, scratch = 300, Scratch()
    sums = rng.integers(-(2**31), 2**31, (5, k)).astype(np.int32)
    e = rng.integers(-20, 20, 5).astype(np.int16) + p.EXPONENT_BIAS
    want = nm.dequantize(sums, e.astype(np.int32) - p.EXPONENT_BIAS, 3, dtype)
    out = nm.Output(nm.make_payload(np.ones(5 * k, dtype), 3, block_values=k), 1, scratch)
    view = scratch.take("received", (5, k), np.int32)
    for b in range(5):
        view[:1] = sums[b]
        out.store(np.array([b]), view[:1], e[b : b + 1])
    view[:] = 0
    assert (out.finish().reshape(5, k) == want).all()


@pytest.mark.parametrize(
    "dtype,halves", [(np.float32, False), (np.float64, False), (np.int32, False), (np.int32, True)]
)
def test_blocks_no_round_came_back_for_are_zero_whatever_the_memory_held(dtype, halves, rng):
    """Output's array starts uninitialised (reused memory holds an earlier call's bytes):
    finish zeroes exactly the blocks no store wrote (runs of them and single ones, the
    partial tail too), and leaves the stored sums as they were."""
    k, nblocks = 100, 9
    pl = nm.make_payload(np.ones(nblocks * k - 30, dtype), 3, int32_halves=halves, block_values=k)
    out = nm.Output(pl)
    out.array.view(np.uint8).fill(0xA5)  # what reused memory may hold
    tensor_rows = np.array([1, 2, 5])
    wire = np.concatenate([2 * tensor_rows, 2 * tensor_rows + 1]) if halves else tensor_rows
    sums = rng.integers(-1000, 1000, (wire.size, k)).astype(np.int32)
    out.store(wire, sums, pl.exponent_biased[wire])
    got = out.finish()
    assert got.size == pl.size
    blocks = np.concatenate([got, np.zeros(nblocks * k - got.size, got.dtype)]).reshape(-1, k)
    unwritten = np.setdiff1d(np.arange(nblocks), tensor_rows)
    assert (blocks[unwritten] == 0).all()
    assert (blocks[tensor_rows] != 0).any()


@pytest.mark.parametrize("width", [1, 50, 64, 128, 256, 1024, 2048, 4096])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_abs_is_abs_then_max_for_every_kind_of_float(width, dtype, rng):
    """max_abs is np.abs(rows).max(axis=1) for rows of either sign, all zeros of either
    sign, and holding NaN or an Inf, at row widths that take each of its methods (folded
    halves, |x| then max, max and minus min)."""
    rows = rng.standard_normal((7, width)).astype(dtype)
    rows[:, -1] = -rows[:, -1]  # the last column's values, folded last, matter too
    rows[1] = -np.abs(rows[1])
    rows[2] = -0.0
    rows[3, 4 % width] = np.nan
    rows[4, 9 % width] = -np.inf
    rows[5, 0] = np.inf
    rows[6] = 0.0
    want = np.abs(rows).max(axis=1)
    got = nm.max_abs(rows)
    assert np.array_equal(got, want, equal_nan=True) and got.dtype == want.dtype


@pytest.mark.parametrize("encoding", [p.Encoding.LANES, p.Encoding.PACKED])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_values_written_into_a_given_array_are_those_returned_otherwise(encoding, dtype, rng):
    """Payload.values with `out` (the values columns of the frames that will carry them)
    writes there, in the wire's byte order, the very values it returns without one."""
    k = 64
    x = (rng.standard_normal(12 * k + 5) * 1000).astype(dtype)
    pl = nm.make_payload(x, 3, encoding, block_values=k)
    blocks = np.array([1, 2, 3, pl.nblocks - 1])  # the last one padded
    e = pl.exponent_biased[blocks] + 1
    want = np.array(pl.values(blocks, e, Scratch()), p.VALUES_DTYPE)
    out = np.full((blocks.size, k), -1, p.VALUES_DTYPE)
    got = pl.values(blocks, e, Scratch(), out)
    assert got is out and (out == want).all()
