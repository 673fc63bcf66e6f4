#!/usr/bin/env python3
"""What hostlib's data path costs per value at each block size, with no network.

A worker encodes a tensor (make_payload's scan, then per batch of packets: quantize, add
the packed bias, build the frames) and decodes the switch's results (parse the frames,
remove the N biases, dequantize into the output). Both work on batches (numpy, and
hostlib's compiled kernels for the per-value passes), so their cost per value falls as a
packet carries more values; this measures by how much, for a
dense float32 tensor in a packed job of N ranks, batches of `--batch` packets (a job's
slots outstanding at once):

    python bench/hostlib_codec.py [--values 1048576] [--sizes 64,2048] [--batch 64]

Prints nanoseconds per value, encode and decode, best of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hostlib import protocol as p
from hostlib.framing import FrameBuilder, parse_batch
from hostlib.numerics import Output, from_packed, make_payload

WORKERS = 4
EP = p.Endpoints("02:00:00:00:00:01", "02:00:00:00:01:00", "10.0.0.1", "10.0.0.254")


def _columns(blocks: np.ndarray, msg_type: p.MsgType) -> dict[str, np.ndarray | int]:
    cols: dict[str, np.ndarray | int] = {name: 0 for name in p.FIELD_NAMES}
    cols.update(protocol=p.PROTOCOL_VERSION, msg_type=int(msg_type), job=1, epoch=1)
    cols.update(slot=blocks % 64, block=blocks, next_block=p.END_OF_STREAM)
    return cols


def once(x: np.ndarray, k: int, batch: int) -> tuple[float, float]:
    """(encode seconds, decode seconds) of one pass over `x` at K = k."""
    t0 = time.perf_counter()
    pl = make_payload(x, WORKERS, p.Encoding.PACKED, block_values=k)
    out_builder = FrameBuilder(EP, k)
    sent = []
    for start in range(0, pl.nblocks, batch):
        rows = np.arange(start, min(start + batch, pl.nblocks))
        lanes = pl.values(rows, pl.exponent_biased[rows])
        ext = np.full(rows.size, int(p.Extension.VALUES))
        sent.append((rows, out_builder.build(_columns(rows, p.MsgType.DATA), ext, lanes)))
    t1 = time.perf_counter()
    # the switch's RESULT carries N ranks' biased lanes summed: here N times this rank's
    results = []
    for rows, b in sent:
        r = b.frames.copy()
        lanes = r[:, p.EXTENSION_OFFSET :].view(">u4").astype(np.int64) * WORKERS
        r[:, p.EXTENSION_OFFSET :] = lanes.astype(">u4").view(np.uint8)
        r[:, p.P4R_OFFSET] = (p.PROTOCOL_VERSION << 4) | int(p.MsgType.RESULT)
        results.append((rows, r, b.lengths))
    t2 = time.perf_counter()
    out = Output(pl)
    for rows, frames, lengths in results:
        parsed = parse_batch(frames, lengths, k)
        sums = from_packed(parsed.values, WORKERS)
        out.store(parsed.cols["block"], sums, pl.exponent_biased[rows])
    got = out.finish()
    t3 = time.perf_counter()
    assert np.allclose(got, WORKERS * x, rtol=1e-4, atol=1e-6), "decode lost the sum"
    return t1 - t0, t3 - t2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=int, default=1 << 20)
    ap.add_argument("--sizes", default="64,2048", help="comma-separated values per block")
    ap.add_argument("--batch", type=int, default=64, help="packets per batch")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    x = np.random.default_rng(1).standard_normal(a.values).astype(np.float32)
    print(f"{a.values} float32 values, packed, {WORKERS} ranks, {a.batch} packets per batch")
    print(f"{'K':>6} {'encode ns/value':>16} {'decode ns/value':>16}")
    for k in (int(s) for s in a.sizes.split(",")):
        enc, dec = (min(t) for t in zip(*(once(x, k, a.batch) for _ in range(a.repeat))))
        print(f"{k:>6} {1e9 * enc / a.values:16.2f} {1e9 * dec / a.values:16.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
