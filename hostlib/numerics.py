"""Blocks, sparsity and block floating point (docs/protocol.md sections 5 and 10).

Everything here is vectorised over whole tensors: the data path must not loop over
elements in Python. `Payload` is what the protocol engine needs from a tensor: the block
matrix, which blocks are non-zero, each block's exponent, and how to quantize a set of
blocks with the exponent the switch negotiated.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from p4reduce.job import block_count, sends_halves
from p4reduce.wire import packed_bias

from . import protocol as p
from .kernels import compiled as _kernels  # the per-value passes (hostlib/_kernels.c)
from .scratch import Scratch, take
from .smallarrays import common_step

M = (1 << 31) - 1  # largest int32: the quantized range
MIN_EXPONENT = -128  # e is clamped below (field carries e + 128)
MAX_EXPONENT = 127
SUPPORTED = (np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.float64))


def level(worker_count: int) -> int:
    """floor(M / N): the largest |q| a rank may send so that N of them cannot overflow."""
    return M // worker_count


def to_packed(lanes: np.ndarray, worker_count: int) -> np.ndarray:
    """int32 lanes -> the packed encoding's biased lanes (the same 4 bytes per lane on the
    wire, returned as int32 so the one codec frames them; values >= 2^31 wrap)."""
    biased = lanes.astype(np.int64) + packed_bias(worker_count)
    return biased.astype(np.uint32).view(np.int32)


def from_packed(sums: np.ndarray, worker_count: int, out: np.ndarray | None = None) -> np.ndarray:
    """A packed round's lanes (sum of N biased lanes, < 2^32) -> the exact int32 sums: the
    N biases subtracted modulo 2^32 (the wrap is the int32 the sum is). `sums` may be in
    either byte order (a received batch's values are the wire's big-endian bytes,
    framing.parse_batch), turned native on the way: one compiled pass (`_kernels`).
    `out`: an int32 array of sums' shape to write (a Scratch buffer), else a new one."""
    dest = np.empty(sums.shape, np.int32) if out is None else out
    _kernels.unbias(_rows(sums), packed_sum_bias(worker_count), _rows(dest, True))
    return dest


def packed_sum_bias(worker_count: int) -> int:
    """The N ranks' packed biases modulo 2^32: what a packed round's lane sums hold beyond
    the exact int32 sums (from_packed subtracts it; a float's dequantize can instead)."""
    return _packed_biases(worker_count)[1]


def _rows(a: np.ndarray, written: bool = False) -> np.ndarray:
    """`a` as the kernels take it, (rows, k) with each row's values contiguous: a 2-D
    array as it is (a view of frames, of evenly spaced blocks), one of another shape as
    rows of its last axis. An array the kernels only read is copied where its values are
    apart; one they write (`written`) never is: a view, or the kernels' ValueError."""
    if a.ndim != 2:
        rows = a.reshape(-1, a.shape[-1] if a.ndim else 1)
        if written and a.size and not np.may_share_memory(rows, a):
            raise ValueError(f"an array of strides {a.strides} cannot be written as rows")
        a = rows
    if not written and a.shape[1] > 1 and a.strides[1] != a.itemsize:
        a = np.ascontiguousarray(a)
    return a


@lru_cache(maxsize=None)
def _packed_biases(worker_count: int) -> tuple[int, int]:
    """A rank's bias (packed_bias) and the N ranks' biases modulo 2^32 (what from_packed
    subtracts)."""
    bias = packed_bias(worker_count)
    return bias, worker_count * bias % (1 << 32)


def half(blocks: np.ndarray, low: bool) -> np.ndarray:
    """The high halves x >> 16 (-2^15..2^15-1) or the low halves x & 0xFFFF (0..2^16-1) of
    int32 values. A packed-encoding job reduces int32 as such halves: N of them sum far
    below the lane's room, so the sum is exact (joined back in Output)."""
    return blocks & 0xFFFF if low else blocks >> 16


def split_halves(blocks: np.ndarray) -> np.ndarray:
    """int32 blocks (B, K) -> (2B, K): row 2b the high halves of block b, row 2b+1 its low
    halves (`half`)."""
    out = np.empty((2 * blocks.shape[0], blocks.shape[1]), np.int32)
    out[0::2] = half(blocks, False)
    out[1::2] = half(blocks, True)
    return out


def overflow_error(blocks, why: str, block_values: int = p.BLOCK_VALUES) -> OverflowError:
    """The error for int32 blocks (of `block_values` values) whose sum does not fit, naming
    them and their elements; `why` says how it was seen (the switch's flag, or the exact
    sum of the halves)."""
    blocks = sorted(int(b) for b in blocks)
    lanes = block_values
    shown = ", ".join(
        f"block {b} (elements {b * lanes}..{b * lanes + lanes - 1})" for b in blocks[:8]
    )
    more = " ..." if len(blocks) > 8 else ""
    return OverflowError(f"int32 sum out of range in {len(blocks)} block(s): {shown}{more}; {why}")


def to_blocks(flat: np.ndarray, block_values: int = p.BLOCK_VALUES) -> np.ndarray:
    """(B, K) view or zero-padded copy of a 1-D array, K = `block_values` (section 5)."""
    n = flat.size
    nblocks = max(1, -(-n // block_values))
    if n == nblocks * block_values:
        return flat.reshape(nblocks, block_values)
    out = np.zeros((nblocks, block_values), dtype=flat.dtype)
    out.reshape(-1)[:n] = flat
    return out


def block_exponents(blocks: np.ndarray) -> np.ndarray:
    """Smallest e with 2^e >= max|x| per block, clamped below at -128 (int16 array)."""
    return exponents_of_max(np.abs(blocks).max(axis=1))


def exponents_of_max(maxabs: np.ndarray) -> np.ndarray:
    """block_exponents from each block's max |x| (one pass over the tensor serves the
    exponents, the non-zero blocks and the NaN/Inf check: make_payload).

    frexp gives max = f * 2^k with 0.5 <= f < 1, so e = k, except e = k - 1 when max is an
    exact power of two (f == 0.5). Zero blocks get -128 (never announced anyway).
    """
    frac, k = np.frexp(np.asarray(maxabs, dtype=np.float64))
    e = k - (frac == 0.5)
    e = np.where(frac == 0, MIN_EXPONENT, e)
    return np.maximum(e, MIN_EXPONENT).astype(np.int16)


def nonfinite_reason(flat: np.ndarray, maxabs: float | None = None) -> str:
    """Why a float tensor cannot be encoded (NaN/Inf, |x| beyond 2^127; section 10), or "".
    `maxabs`, the tensor's max |x| when the caller has it (NaN if any element is NaN: max
    propagates it), saves the scan of a tensor that is fine."""
    if maxabs is not None and np.isfinite(maxabs) and maxabs <= 2.0**MAX_EXPONENT:
        return ""
    if not np.isfinite(flat).all():
        bad = np.flatnonzero(~np.isfinite(flat))
        return (
            f"tensor contains NaN or Inf ({bad.size} elements, first at flat index {int(bad[0])})"
        )
    if flat.size and float(np.abs(flat).max()) > 2.0**MAX_EXPONENT:
        idx = int(np.argmax(np.abs(flat)))
        return (
            f"|x| = {float(np.abs(flat[idx]))!r} at flat index {idx} exceeds 2^127, the "
            f"largest block exponent"
        )
    return ""


def scales(exponents: np.ndarray, worker_count: int) -> np.ndarray:
    """floor(M/N) * 2^-E per row, E = exponents (unbiased): what quantize multiplies a
    row by and dequantize divides a sum by (exact: a power of two scales a float64
    exactly in this range)."""
    return np.ldexp(float(level(worker_count)), -exponents.astype(np.int32))


@lru_cache(maxsize=None)
def _scales_by_biased(worker_count: int) -> np.ndarray:
    """`scales` of every biased exponent E + 128 (0..255): Payload.values looks a batch's
    rows' up instead of computing them (five numpy calls on a few rows, every turn)."""
    return scales(np.arange(256) - p.EXPONENT_BIAS, worker_count)


def quantize(
    blocks: np.ndarray,
    exponents: np.ndarray | None,
    worker_count: int,
    scratch: Scratch | None = None,
    *,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    """q = rint(x * floor(M/N) / 2^E) per row, E = exponents (unbiased) per row -> int32
    (`scale`: the rows' `scales`, when the caller has them, instead of `exponents`).
    Evaluated in float64, rounded half to even: x times the row's scale, floor(M/N) *
    2^-E, is the same rounded product as x * floor(M/N) scaled afterwards (a power of two
    scales a float64 exactly in this range). With `scratch`, the result is a view of its
    buffer (valid until its next quantize)."""
    out = take(scratch, "quantized", blocks.shape, np.int32)
    return _quantized(blocks, exponents, worker_count, 0, out, scale)


def quantize_packed(
    blocks: np.ndarray,
    exponents: np.ndarray | None,
    worker_count: int,
    out: np.ndarray | None = None,
    *,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    """to_packed(quantize(...)): q plus the rank's packed bias modulo 2^32 -- the same
    bits, as q + bias lies in 0..2^32-1 -- written into `out` (an int32 array of any byte
    order, e.g. the wire's columns of the frames that will carry them; else a new one)
    in one pass, no temporary."""
    if out is None:
        out = np.empty(blocks.shape, np.int32)
    bias = _packed_biases(worker_count)[0]
    return _quantized(blocks, exponents, worker_count, bias, out, scale)


def _quantized(
    blocks: np.ndarray,
    exponents: np.ndarray | None,
    worker_count: int,
    bias: int,
    out: np.ndarray,
    scale: np.ndarray | None,
) -> np.ndarray:
    """quantize's q + `bias` (mod 2^32) into `out`: one compiled pass (`_kernels`)."""
    if scale is None:
        scale = scales(np.asarray(exponents), worker_count)
    _kernels.quantize(
        _rows(blocks), np.ascontiguousarray(scale, np.float64), bias, _rows(out, True)
    )
    return out


def dequantize(
    sums: np.ndarray,
    exponents: np.ndarray,
    worker_count: int,
    dtype=np.float64,
    out: np.ndarray | None = None,
    bias: int = 0,
) -> np.ndarray:
    """sum / s = sum * 2^E / floor(M/N) per row, computed in float64, in one pass: the sum
    divided by the row's floor(M/N) * 2^-E (exact: a power of two scales a float64 exactly
    here), the same correctly rounded quotient as dividing by floor(M/N) and scaling by 2^E
    after (no quotient comes near float64's subnormals: |sum| >= 1, E >= -128). Returned as
    `dtype`: each float64 quotient rounded to it, so a float32 result never holds a
    float64 copy of the rows. `sums`: int32 in either byte order, less `bias` modulo 2^32
    (a packed RESULT's lanes with the N ranks' biases in, `from_packed`'s subtraction made
    in the same pass: one read of the received values instead of two). `out`: an array of
    sums' shape and `dtype` to write (a Scratch buffer, the result's rows), else a new
    one."""
    if out is None:
        out = np.empty(sums.shape, dtype)
    divisor = scales(np.asarray(exponents), worker_count)  # s, the rows' quantize scale
    _kernels.dequantize(_rows(sums), divisor, _rows(out, True), bias)
    return out


# float64 evaluation of quantize (x * floor(M/N) is rounded) and dequantize (the division
# by floor(M/N) is rounded) adds at most 2^-21 of the quantization bound each.
FLOAT64_SLACK = 1.0 + 2.0**-20
# Smallest block max for which the relative bound holds: below it the exponent is clamped
# at -128, so 2^E > 2 * max and only the absolute bound is left (section 10).
RELATIVE_MIN = 2.0 ** (MIN_EXPONENT - 1)


def error_bound(exponent: int | np.ndarray, worker_count: int) -> np.ndarray:
    """Documented per-element bound, before rounding to the output dtype (section 10):
    |result - exact sum| <= N * 2^(E-1) / floor(M/N) * FLOAT64_SLACK, for every finite
    input with |x| <= 2^127. E is the negotiated (unbiased) exponent of the block."""
    e = np.asarray(exponent, dtype=np.int32)
    return worker_count * np.ldexp(1.0, e - 1) / level(worker_count) * FLOAT64_SLACK


def negotiated_exponent(blockmax: np.ndarray) -> np.ndarray:
    """E the switch negotiates for blocks whose max |x| over all ranks is `blockmax`: the
    largest of the ranks' exponents, i.e. the exponent of the overall max."""
    return exponents_of_max(blockmax)


def sum_error_bound(blockmax: np.ndarray, worker_count: int) -> np.ndarray:
    """The absolute bound per block from its max |x| over all ranks: what a checker needs."""
    return error_bound(negotiated_exponent(blockmax), worker_count)


def relative_error_bound(worker_count: int) -> float:
    """N^2 / (2^31 - N): error / block max never exceeds this when the block max is at
    least RELATIVE_MIN (2^-129), since then 2^E <= 2 * max and floor(M/N) >= (2^31-N)/N."""
    return worker_count**2 / float((1 << 31) - worker_count) * FLOAT64_SLACK


# Values of a tensor's (B, K) view scanned at once: the temporaries of a whole-tensor
# pass (|x|, x != 0, the halves) stay this size instead of the tensor's, whatever K.
CHUNK_VALUES = 1 << 18


def chunk_rows(block_values: int) -> int:
    """Rows of a (B, K) view in one chunk of about CHUNK_VALUES values (at least one)."""
    return max(1, CHUNK_VALUES // block_values)


def evenly_spaced(blocks: np.ndarray) -> slice | None:
    """`blocks` (sorted or not) as a slice when they are b, b+d, b+2d, ... with d > 0 (a
    batch of consecutive slots' blocks, mostly, or one block): rows a (B, K) array hands
    out as a view, no gather copy. None otherwise (or for no block)."""
    if not blocks.size:
        return None
    first = int(blocks[0])
    if blocks.size == 1:
        return slice(first, first + 1)
    step = common_step(blocks)
    return None if step is None else slice(first, int(blocks[-1]) + 1, step)


def max_abs(rows: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """max |x| of each row of a (rows, K) float array (`out`: where to write it, one float
    of the rows' dtype per row; else a new array), the same value as
    np.abs(rows).max(axis=1) (NaN propagates, an Inf is the max): one compiled pass of
    integer maxima over the values' bits with the sign cleared (`_kernels`), at every
    row width and with no |x| temporary."""
    if out is None:
        out = np.empty(rows.shape[0], rows.dtype)
    _kernels.max_abs(_rows(rows), out)
    return out


def _per_block(full: np.ndarray, tail: np.ndarray, fn, dtype, width: int = 1) -> np.ndarray:
    """fn over the tensor's blocks in chunks of chunk_rows(K) rows: `full` (F, K), then the
    padded `tail` (0 or 1, K). fn maps (rows, K) to (rows,) or (rows, width)."""
    f = full.shape[0]
    rows = chunk_rows(full.shape[1])
    out = np.empty((f + tail.shape[0], width) if width > 1 else f + tail.shape[0], dtype)
    for start in range(0, f, rows):
        stop = min(start + rows, f)
        out[start:stop] = fn(full[start:stop])
    if tail.shape[0]:
        out[f:] = fn(tail)
    return out


@dataclass
class Payload:
    """One tensor cut into blocks, with what the engine needs to send it.

    The blocks are views of the tensor (`full`: its complete blocks; `tail`: the last,
    partial one, zero-padded, the only copy), widened, quantized or split into halves
    only for the rows a batch sends: a payload costs a few bytes per block, not a tensor.
    `nonzero` is sorted; `exponent_biased[b]` is e + 128 of block b (0 for int32 tensors,
    whose exponent the switch carries but nobody uses). With `halves`, block numbers are
    those of the wire (2b: high halves of tensor block b, 2b+1: its low halves).
    """

    full: np.ndarray  # (F, K) view of the tensor's complete blocks, its dtype
    tail: np.ndarray  # (0 or 1, K): the partial last block, zero-padded
    nblocks: int  # blocks on the wire (twice the tensor's with halves)
    nonzero: np.ndarray  # sorted int32 numbers of the blocks with any non-zero value
    exponent_biased: np.ndarray  # (nblocks,) int16 in 0..255
    is_float: bool
    worker_count: int
    size: int = 0  # elements of the tensor
    fingerprint: int = 0  # protocol.fingerprint(dtype, elements): announced
    encoding: p.Encoding = p.Encoding.LANES
    halves: bool = False  # int32 sent as 16-bit halves (split_halves' rows)
    refused: str = ""  # why the values cannot be sent (then: none, and a
    # NONFINITE fingerprint; see make_payload)

    @property
    def dtype(self) -> np.dtype:
        return self.full.dtype

    @property
    def block_values(self) -> int:
        """K, the values per block of the job the payload was cut for."""
        return int(self.full.shape[1])

    def tensor_rows(self, blocks: np.ndarray, scratch: Scratch | None = None) -> np.ndarray:
        """The tensor's blocks `blocks` (tensor numbering) as a (len, K) array: a view of
        the tensor when they are evenly spaced complete blocks, else a copy (in
        `scratch`'s "rows" buffer when given). Read only."""
        f = self.full.shape[0]
        spaced = evenly_spaced(blocks)
        if spaced is not None and spaced.stop <= f:
            return self.full[spaced]  # consecutive slots' blocks, mostly: read in place
        out = take(scratch, "rows", (blocks.size, self.block_values), self.full.dtype)
        if not self.tail.shape[0] or not blocks.size or int(blocks.max()) < f:
            # mode="clip" writes straight into `out` ("raise" buffers a copy); every block
            # is in range here
            return np.take(self.full, blocks, axis=0, out=out, mode="clip")
        inside = blocks < f
        out[inside] = self.full[blocks[inside]]
        out[~inside] = self.tail[0]
        return out

    def _int_lanes(self, rows: np.ndarray) -> np.ndarray:
        """An int32 tensor's lanes for wire blocks `rows` (halves, the packed bias)."""
        if self.halves:
            x = self.tensor_rows(rows >> 1)
            low = (rows & 1).astype(bool)[:, None]
            lanes = np.where(low, half(x, True), half(x, False))
        else:
            lanes = self.tensor_rows(rows)
        if self.encoding == p.Encoding.PACKED:
            return to_packed(lanes, self.worker_count)
        return lanes

    def values(
        self,
        rows: np.ndarray,
        switch_exponent_biased: np.ndarray,
        scratch: Scratch | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """int32 (len(rows), K) to send for these blocks with the switch's exponents. A
        float tensor's are quantized into the wire's byte order (protocol.VALUES_DTYPE),
        in `scratch` when given: the result is then a view of it, valid until the next
        `values` with the same scratch. `out`, an array of the wire's int32 of that shape
        (the values columns of the frames that will carry them,
        framing.values_columns): the values are written there instead and it is
        returned."""
        if not self.is_float:
            lanes = self._int_lanes(rows)
            if out is None:
                return lanes
            np.copyto(out, lanes, casting="unsafe")  # what astype(VALUES_DTYPE) does
            return out
        mine = self.exponent_biased[rows]
        if np.count_nonzero(mine > switch_exponent_biased):
            i = int(np.argmax(mine > switch_exponent_biased))
            raise p.ProtocolError(
                f"switch exponent {int(switch_exponent_biased[i]) - p.EXPONENT_BIAS} for "
                f"block {int(rows[i])} is below this rank's {int(mine[i]) - p.EXPONENT_BIAS}"
                f" (its values would overflow)"
            )
        x = self.tensor_rows(rows, scratch)
        scale = _scales_by_biased(self.worker_count)[switch_exponent_biased]
        # in the wire's byte order already: the frame builder copies these bytes as they are
        # (with `out`, the frames' own columns: nothing to copy)
        wire = take(scratch, "wire", x.shape, p.VALUES_DTYPE) if out is None else out
        packed = self.encoding == p.Encoding.PACKED
        bias = _packed_biases(self.worker_count)[0] if packed else 0
        return _quantized(x, None, self.worker_count, bias, wire, scale)


def make_payload(
    array: np.ndarray,
    worker_count: int,
    encoding: p.Encoding = p.Encoding.LANES,
    *,
    int32_halves: bool = False,
    announce_refusal: bool = False,
    block_values: int = p.BLOCK_VALUES,
) -> Payload:
    """Validate dtype and values, cut into blocks of `block_values` (the job's K), find
    the non-zero blocks (a block is zero when all its K values are) and exponents (one
    per block: block floating point over K values).
    In a packed-encoding job, or with `int32_halves` (a lanes job on a switch that cannot
    flag an overflowed lane), an int32 tensor travels as twice as many blocks of 16-bit
    halves (split_halves): no lane can overflow, and the worker checks the exact sum.

    A float tensor holding NaN/Inf (or |x| > 2^127) raises ValueError, or, with
    `announce_refusal`, becomes a payload with no values and the NONFINITE fingerprint
    (`refused` says why): sent, it makes every rank's call fail together (the Worker's
    way, so that the other ranks neither wait for this one nor get out of step)."""
    a = np.asarray(array)
    if a.dtype not in SUPPORTED:
        raise TypeError(f"dtype {a.dtype} not supported: use int32, float32 or float64")
    flat = a.reshape(-1)  # copies only when a is not contiguous
    halves = a.dtype.kind != "f" and sends_halves(encoding, int32_halves)
    k = p.check_block_values(block_values)
    nblocks = block_count(flat.size, halves, k)
    if nblocks > p.MAX_BLOCK + 1:
        raise ValueError(
            f"tensor of {flat.size} values needs {nblocks} blocks; the protocol"
            f" allows at most {p.MAX_BLOCK + 1}"
        )
    is_float = a.dtype.kind == "f"
    whole = flat.size // k * k
    full = flat[:whole].reshape(-1, k)
    tail = to_blocks(flat[whole:], k) if whole < flat.size or not flat.size else full[:0]
    common = dict(
        full=full,
        tail=tail,
        nblocks=nblocks,
        is_float=is_float,
        worker_count=worker_count,
        size=int(flat.size),
        encoding=encoding,
        halves=halves,
    )
    if is_float:
        # one pass over the tensor: the blocks' max |x| gives exponents, non-zero blocks
        # and (NaN propagates through max, Inf is the max) whether it can be sent at all.
        maxabs = np.empty(full.shape[0] + tail.shape[0], a.dtype)
        max_abs(full, maxabs[: full.shape[0]])
        max_abs(tail, maxabs[full.shape[0] :])
        reason = nonfinite_reason(flat, float(maxabs.max()))
        if reason and not announce_refusal:
            raise ValueError(f"{reason}; nothing was sent")
        if reason:
            return Payload(
                **common,
                nonzero=np.zeros(0, np.int32),
                exponent_biased=np.zeros(nblocks, np.int16),
                fingerprint=p.nonfinite_fingerprint(flat.size),
                refused=reason,
            )
        exps = exponents_of_max(maxabs) + p.EXPONENT_BIAS
        nonzero = np.flatnonzero(maxabs)
    else:
        if halves:

            def halves_nonzero(rows: np.ndarray) -> np.ndarray:
                return split_halves(rows).any(axis=1).reshape(-1, 2)

            mask = _per_block(full, tail, halves_nonzero, bool, width=2).reshape(-1)
        else:
            mask = _per_block(full, tail, lambda rows: rows.any(axis=1), bool)
        exps = np.broadcast_to(np.int16(0), (nblocks,))  # read only, no memory
        nonzero = np.flatnonzero(mask)
    return Payload(
        **common,
        nonzero=nonzero.astype(np.int32),  # block numbers < 2^24
        exponent_biased=exps.astype(np.int16, copy=False),
        fingerprint=p.fingerprint(a.dtype, flat.size),
    )


# Values an Output collects before it stores them (256 blocks of 64): a receive batch may
# hold a few results, and the vectorised store costs the same for 1 row as for 256.
STORE_VALUES = 256 * 64


class Output:
    """Where one call's sums land: the result array itself, written block by block as
    rounds complete (a result's int32 lane sums are dequantized, or joined from halves, a
    few hundred rows at a time), so a call holds its input and its output and no
    tensor-sized staging (docs/hostlib.md, "Memory"). Blocks no round came back for are
    zero: when most of this rank's blocks are non-zero (so most of the result will be
    written) the array starts uninitialised and `finish` zeroes the blocks no store
    wrote (`written`): zeroing 4 MB first cost as much as a pass of the data; otherwise
    it starts as zeros (np.zeros: fresh pages never written are never touched).
    `divisor` divides a float sum
    (op="mean"), in float64 before the cast to the tensor's dtype. `scratch` (the
    Worker's): where dequantized rows wait for their store into the result."""

    def __init__(self, payload: Payload, divisor: int = 1, scratch: Scratch | None = None):
        self.payload = payload
        self.divisor = divisor
        self.scratch = scratch
        rows = payload.full.shape[0] + payload.tail.shape[0]
        dtype = payload.dtype if payload.is_float else np.dtype(np.int32)
        k = payload.block_values
        self.zeroed = 2 * payload.nonzero.size < payload.nblocks  # else finish zeroes
        self.array = (np.zeros if self.zeroed else np.empty)(rows * k, dtype)
        self.blocks = self.array.reshape(rows, k)  # (B, K) view, tensor numbering
        self.written = np.zeros(rows, bool)  # blocks a store wrote (halves: `seen`)
        self.store_rows = max(1, STORE_VALUES // k)
        # halves: which of a block's two rounds came back (1: high, 2: low); the first
        # one's half sum waits in the block's row until the other arrives
        self.seen = np.zeros(rows, np.uint8) if payload.halves else None
        self.overflowed: list[np.ndarray] = []  # tensor blocks whose exact sum overflows
        # what `store` holds back: blocks, sums, biased exponents, the bias left in the sums
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
        self._pending_rows = 0

    def store(
        self, blocks: np.ndarray, sums: np.ndarray, exponent_biased: np.ndarray, bias: int = 0
    ) -> None:
        """The lane sums (int32, less `bias` modulo 2^32: a packed job's N biases, which a
        float's dequantize takes off in its one pass over the values; 0 where the caller
        removed the encoding's bias) of wire blocks `blocks`, each sent with biased exponent
        `exponent_biased` (arrays the caller leaves alone; `sums` may be a Scratch view or
        a received batch's: stored at once, or copied while it waits)."""
        if bias and not self.payload.is_float:
            raise ValueError("only a float's dequantize takes a packed bias off: unbias int sums")
        if self._pending and self._pending[0][3] != bias:
            self.flush()  # (never within a call: its engine stores every round one way)
        if not self._pending and blocks.size >= self.store_rows:
            self._pending.append((blocks, sums, exponent_biased, bias))
            self.flush()
            return
        self._pending.append((blocks, np.array(sums), exponent_biased, bias))
        self._pending_rows += blocks.size
        if self._pending_rows >= self.store_rows:
            self.flush()

    def flush(self) -> None:
        """Store what `store` collected."""
        if not self._pending:
            return
        bias = self._pending[0][3]
        if len(self._pending) == 1:
            blocks, sums, exps, _ = self._pending[0]
        else:
            blocks, sums, exps = (np.concatenate(c) for c in list(zip(*self._pending))[:3])
        self._pending, self._pending_rows = [], 0
        pl = self.payload
        if self.seen is None and not self.zeroed:  # only `finish`'s zeroing reads it
            self.written[blocks] = True
        if pl.is_float:
            # a mean divides the float64 quotient before it is rounded to the tensor's dtype
            dtype = self.array.dtype if self.divisor == 1 else np.float64
            e = exps.astype(np.int32) - p.EXPONENT_BIAS
            rows = self._rows(blocks) if self.divisor == 1 else None
            if rows is not None:  # straight into the result: no pass over a copy
                dequantize(sums, e, pl.worker_count, dtype, rows, bias)
                return
            out = take(self.scratch, "sums", sums.shape, dtype)
            res = dequantize(sums, e, pl.worker_count, dtype, out, bias)
            if self.divisor != 1:
                res /= self.divisor
            self.blocks[blocks] = res
        elif self.seen is None:
            self.blocks[blocks] = sums
        else:
            low = (blocks & 1).astype(bool)
            for part, bit in ((~low, 1), (low, 2)):  # both halves may be in one flush
                if part.all():
                    self._store_half(blocks >> 1, sums, bit)
                elif part.any():
                    self._store_half(blocks[part] >> 1, sums[part], bit)

    def _rows(self, blocks: np.ndarray) -> np.ndarray | None:
        """The result's rows `blocks` as a view when they are evenly spaced
        (`evenly_spaced`), so a flush writes the sums where they belong instead of into a
        buffer first; None otherwise."""
        rows = evenly_spaced(blocks)
        return None if rows is None else self.blocks[rows]

    def _store_half(self, rows: np.ndarray, sums: np.ndarray, bit: int) -> None:
        """Half sums of tensor blocks `rows` (bit 1: high halves, 2: low): kept until the
        block's other half is in, then joined into the exact sum."""
        other = self.seen[rows] != 0  # the other half's round came back before
        self.seen[rows] |= bit
        if not other.any():
            self.blocks[rows] = sums
            return
        if not other.all():
            self.blocks[rows[~other]] = sums[~other]
            rows, sums = rows[other], sums[other]
        kept = self.blocks[rows]
        self._join(rows, *((sums, kept) if bit == 1 else (kept, sums)))

    def _join(self, rows: np.ndarray, high: np.ndarray, low: np.ndarray | int) -> None:
        """The exact int64 sum high * 2^16 + low of tensor blocks `rows`, stored as int32;
        blocks where it does not fit int32 are recorded (the call raises, no wrong sum)."""
        total = high.astype(np.int64) * 65536 + low
        fits = total.astype(np.int32)
        self.blocks[rows] = fits
        wrong = fits != total
        if wrong.any():
            self.overflowed.append(rows[wrong.any(axis=1)])

    def _zero(self, rows: np.ndarray) -> None:
        """Zeros into blocks `rows` (sorted): runs of consecutive rows as one slice each,
        so a call of few blocks written fills the rest of the array in a few passes."""
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        for run in np.split(rows, breaks) if breaks.size < 64 else [rows]:
            if run.size == int(run[-1]) - int(run[0]) + 1:
                self.blocks[int(run[0]) : int(run[-1]) + 1] = 0
            else:
                self.blocks[run] = 0

    def finish(self) -> np.ndarray:
        """The flat result (`size` elements). With halves, a block whose low halves were
        zero everywhere (no round) is its high sum * 2^16; raises OverflowError naming the
        blocks whose exact sum does not fit int32."""
        self.flush()
        unwritten = ~self.written if self.seen is None else self.seen == 0
        if not self.zeroed and np.count_nonzero(unwritten):
            self._zero(np.flatnonzero(unwritten))
        if self.seen is not None:
            only_high = np.flatnonzero(self.seen == 1)
            step = chunk_rows(self.payload.block_values)
            for start in range(0, only_high.size, step):
                rows = only_high[start : start + step]
                self._join(rows, self.blocks[rows], 0)
            if self.overflowed:
                raise overflow_error(
                    np.concatenate(self.overflowed),
                    "the exact sum does not fit int32, no wrong sum returned",
                    self.payload.block_values,
                )
        return self.array[: self.payload.size]
