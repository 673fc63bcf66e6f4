"""Blocks, sparsity and block floating point (docs/protocol.md sections 5 and 10).

Everything here is vectorised over whole tensors: the data path must not loop over
elements in Python. `Payload` is what the protocol engine needs from a tensor: the block
matrix, which blocks are non-zero, each block's exponent, and how to quantize a set of
blocks with the exponent the switch negotiated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import protocol as p
from .wire import packed_bias

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


def from_packed(sums: np.ndarray, worker_count: int) -> np.ndarray:
    """A packed round's lanes (sum of N biased lanes, < 2^32) -> the exact int32 sums."""
    unbiased = sums.view(np.uint32).astype(np.int64) - worker_count * packed_bias(worker_count)
    return unbiased.astype(np.int32)


def split_halves(blocks: np.ndarray) -> np.ndarray:
    """int32 blocks (B, K) -> (2B, K): row 2b the high halves x >> 16 (-2^15..2^15-1),
    row 2b+1 the low halves x & 0xFFFF (0..2^16-1) of block b. A packed-encoding job
    reduces int32 this way: N halves sum far below the lane's room, so the sum is exact."""
    out = np.empty((2 * blocks.shape[0], blocks.shape[1]), np.int32)
    out[0::2] = blocks >> 16
    out[1::2] = blocks & 0xFFFF
    return out


def join_halves(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(2B, K) summed halves -> (the exact int64 sums (B, K), the blocks whose sum does not
    fit int32): the worker detects int32 overflow exactly, from the true sum."""
    total = sums[0::2].astype(np.int64) * 65536 + sums[1::2].astype(np.int64)
    info = np.iinfo(np.int32)
    over = np.flatnonzero(((total < info.min) | (total > info.max)).any(axis=1))
    return total, over


def overflow_error(blocks, why: str) -> OverflowError:
    """The error for int32 blocks whose sum does not fit, naming them and their elements;
    `why` says how it was seen (the switch's flag, or the exact sum of the halves)."""
    blocks = sorted(int(b) for b in blocks)
    lanes = p.LANES
    shown = ", ".join(
        f"block {b} (elements {b * lanes}..{b * lanes + lanes - 1})" for b in blocks[:8]
    )
    more = " ..." if len(blocks) > 8 else ""
    return OverflowError(f"int32 sum out of range in {len(blocks)} block(s): {shown}{more}; {why}")


def to_blocks(flat: np.ndarray, lanes: int = p.LANES) -> np.ndarray:
    """(B, lanes) view or zero-padded copy of a 1-D array (section 5)."""
    n = flat.size
    nblocks = max(1, -(-n // lanes))
    if n == nblocks * lanes:
        return flat.reshape(nblocks, lanes)
    out = np.zeros((nblocks, lanes), dtype=flat.dtype)
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


def quantize(blocks: np.ndarray, exponents: np.ndarray, worker_count: int) -> np.ndarray:
    """q = rint(x * floor(M/N) / 2^E) per row, E = exponents (unbiased) per row -> int32."""
    scaled = np.ldexp(
        blocks.astype(np.float64) * float(level(worker_count)), -exponents.astype(np.int32)[:, None]
    )
    return np.rint(scaled).astype(np.int32)


def dequantize(sums: np.ndarray, exponents: np.ndarray, worker_count: int) -> np.ndarray:
    """sum / s = sum * 2^E / floor(M/N) per row (float64)."""
    return np.ldexp(sums.astype(np.float64), exponents.astype(np.int32)[:, None]) / float(
        level(worker_count)
    )


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


@dataclass
class Payload:
    """One tensor cut into blocks, with what the engine needs to send it.

    `nonzero` is sorted; `exponent_biased[b]` is e + 128 of block b (0 for int32 tensors,
    whose exponent the switch carries but nobody uses).
    """

    blocks: np.ndarray  # (B, K): int32, or float64 for floating tensors
    nonzero: np.ndarray  # sorted int64 indices of blocks with any non-zero value
    exponent_biased: np.ndarray  # (B,) int16 in 0..255
    is_float: bool
    worker_count: int
    fingerprint: int = 0  # protocol.fingerprint(dtype, elements): announced
    encoding: p.Encoding = p.Encoding.LANES
    halves: bool = False  # int32 sent as 16-bit halves: blocks are split_halves rows
    refused: str = ""  # why the values cannot be sent (then: none, and a
    # NONFINITE fingerprint; see make_payload)

    @property
    def nblocks(self) -> int:
        return int(self.blocks.shape[0])

    def values(self, rows: np.ndarray, switch_exponent_biased: np.ndarray) -> np.ndarray:
        """int32 (len(rows), K) to send for these blocks with the switch's exponents."""
        if not self.is_float:
            rows_out = self.blocks[rows]
            if self.encoding == p.Encoding.PACKED:
                return to_packed(rows_out, self.worker_count)
            return rows_out
        mine = self.exponent_biased[rows]
        if np.any(mine > switch_exponent_biased):
            i = int(np.argmax(mine > switch_exponent_biased))
            raise p.ProtocolError(
                f"switch exponent {int(switch_exponent_biased[i]) - p.EXPONENT_BIAS} for "
                f"block {int(rows[i])} is below this rank's {int(mine[i]) - p.EXPONENT_BIAS}"
                f" (its values would overflow)"
            )
        q = quantize(
            self.blocks[rows],
            switch_exponent_biased.astype(np.int32) - p.EXPONENT_BIAS,
            self.worker_count,
        )
        return to_packed(q, self.worker_count) if self.encoding == p.Encoding.PACKED else q


def make_payload(
    array: np.ndarray,
    worker_count: int,
    encoding: p.Encoding = p.Encoding.LANES,
    *,
    int32_halves: bool = False,
    announce_refusal: bool = False,
) -> Payload:
    """Validate dtype and values, cut into blocks, find non-zero blocks and exponents.
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
    halves = a.dtype.kind != "f" and (int32_halves or encoding == p.Encoding.PACKED)
    nblocks = max(1, -(-flat.size // p.LANES)) * (2 if halves else 1)
    if nblocks > p.MAX_BLOCK + 1:
        raise ValueError(
            f"tensor of {flat.size} values needs {nblocks} blocks; the protocol"
            f" allows at most {p.MAX_BLOCK + 1}"
        )
    is_float = a.dtype.kind == "f"
    if is_float:
        # one pass over the tensor: the blocks' max |x| gives exponents, non-zero blocks
        # and (NaN propagates through max, Inf is the max) whether it can be sent at all.
        # The blocks keep their dtype: quantize widens only the rows it sends.
        blocks = to_blocks(flat)
        maxabs = np.abs(blocks).max(axis=1)
        reason = nonfinite_reason(flat, float(maxabs.max()))
        if reason and not announce_refusal:
            raise ValueError(f"{reason}; nothing was sent")
        if reason:
            return Payload(
                blocks=np.zeros((nblocks, p.LANES)),
                nonzero=np.zeros(0, np.int64),
                exponent_biased=np.zeros(nblocks, np.int16),
                is_float=True,
                worker_count=worker_count,
                fingerprint=p.nonfinite_fingerprint(flat.size),
                encoding=encoding,
                refused=reason,
            )
        exps = exponents_of_max(maxabs) + p.EXPONENT_BIAS
        nonzero = np.flatnonzero(maxabs).astype(np.int64)
    else:
        blocks = to_blocks(flat)
        if halves:
            blocks = split_halves(blocks)
        exps = np.zeros(blocks.shape[0], dtype=np.int16)
        nonzero = np.flatnonzero(np.any(blocks != 0, axis=1)).astype(np.int64)
    return Payload(
        blocks=blocks,
        nonzero=nonzero,
        exponent_biased=exps.astype(np.int16),
        is_float=is_float,
        worker_count=worker_count,
        fingerprint=p.fingerprint(a.dtype, flat.size),
        encoding=encoding,
        halves=halves,
    )
