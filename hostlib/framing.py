"""Frames in bulk: build a batch from the two prebuilt templates, parse a batch into columns.

A batch of frames is a (n, 314) uint8 matrix plus a length per row (58 or 314). Building
one writes the 42-byte L2-L4 template, the packed headers and the big-endian values with a
handful of numpy assignments, however many rows there are; parsing reads the same columns
back. No per-packet Python, no scapy (protocol.py is the one codec; this only arranges its
pieces in matrices).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import protocol as p

WIDTH = p.FRAME_BYTES_WITH_VALUES
_VALUE_COLS = slice(p.VALUES_OFFSET, p.FRAME_BYTES_WITH_VALUES)
_HEADER_COLS = slice(p.P4R_OFFSET, p.VALUES_OFFSET)
FLAGS_BYTE = p.P4R_OFFSET + 1          # slot_version (bit 7) | flags (bits 6..0)


@dataclass
class Batch:
    """Frames to send: rows of `frames` up to `lengths` bytes each."""
    frames: np.ndarray      # (n, WIDTH) uint8
    lengths: np.ndarray     # (n,) int64

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def frame(self, i: int) -> bytes:
        return self.frames[i, : int(self.lengths[i])].tobytes()

    @staticmethod
    def empty() -> "Batch":
        return Batch(np.zeros((0, WIDTH), np.uint8), np.zeros(0, np.int64))

    @staticmethod
    def concat(batches: list["Batch"]) -> "Batch":
        batches = [b for b in batches if len(b)]
        if not batches:
            return Batch.empty()
        if len(batches) == 1:
            return batches[0]
        return Batch(np.concatenate([b.frames for b in batches]),
                     np.concatenate([b.lengths for b in batches]))


class FrameBuilder:
    """Builds batches for one direction (one Endpoints) from its two prebuilt templates."""

    def __init__(self, ep: p.Endpoints):
        self.ep = ep
        self.template_values = np.frombuffer(p.l2_l4_template(ep, True), np.uint8)
        self.template_header = np.frombuffer(p.l2_l4_template(ep, False), np.uint8)

    def build(self, columns: dict[str, np.ndarray | int], with_values: np.ndarray,
              values: np.ndarray | None) -> Batch:
        """Frames for header columns (protocol.FIELDS names); rows with `with_values` get
        the rows of `values` (int32, one per such row, in order)."""
        with_values = np.asarray(with_values, dtype=bool)
        n = with_values.shape[0]
        frames = np.zeros((n, WIDTH), np.uint8)
        frames[:, : p.L2_L4_BYTES] = np.where(with_values[:, None], self.template_values,
                                              self.template_header)
        frames[:, _HEADER_COLS] = p.pack_headers(columns, n).view(np.uint8).reshape(n, -1)
        if values is not None and len(values):
            frames[with_values, _VALUE_COLS] = (
                np.asarray(values).astype(p.VALUES_DTYPE).view(np.uint8).reshape(-1, 256))
        lengths = np.where(with_values, p.FRAME_BYTES_WITH_VALUES, p.FRAME_BYTES_HEADER_ONLY)
        return Batch(frames, lengths.astype(np.int64))


@dataclass
class Parsed:
    """Columns of a received batch; rows that are not p4reduce frames are already gone."""
    cols: dict[str, np.ndarray]     # per field of protocol.FIELDS, int64
    has_values: np.ndarray          # (n,) bool: the frame carries K values
    values: np.ndarray              # (n, K) int32 (garbage where not has_values)
    src_ip: np.ndarray              # (n,) uint32
    src_mac: np.ndarray             # (n, 6) uint8
    rejected: int                   # frames dropped as not p4reduce / truncated

    def __len__(self) -> int:
        return int(self.has_values.shape[0])


def parse_batch(frames: np.ndarray, lengths: np.ndarray) -> Parsed:
    """Vectorised parse_frame for a (n, >=314) uint8 matrix: checks Ethernet/IPv4/UDP
    framing like protocol.parse_frame and splits headers and values into columns."""
    frames = np.asarray(frames)
    lengths = np.asarray(lengths)
    n = lengths.shape[0]
    f = frames[:n]
    ok = (lengths >= p.FRAME_BYTES_HEADER_ONLY) & (f[:, 12] == 8) & (f[:, 13] == 0) \
        & (f[:, 14] == 0x45) & (f[:, 23] == 17) & ((f[:, 36] & 0xFF) == 0x50) \
        & ((f[:, 37] & 0xF0) == 0x30)
    udp_len = f[:, 38].astype(np.int64) << 8 | f[:, 39]
    if not ok.all():
        f, lengths, udp_len = f[ok], lengths[ok], udp_len[ok]
    has_values = (udp_len >= p.UDP_BYTES + p.HEADER_BYTES + p.VALUE_BYTES) \
        & (lengths >= p.FRAME_BYTES_WITH_VALUES)
    hdr = np.ascontiguousarray(f[:, _HEADER_COLS]).view(p.HEADER_DTYPE).reshape(-1)
    values = np.ascontiguousarray(f[:, _VALUE_COLS]).view(p.VALUES_DTYPE).astype(np.int32)
    src_ip = np.ascontiguousarray(f[:, 26:30]).view(">u4").reshape(-1).astype(np.uint32)
    return Parsed(cols=p.unpack_headers(hdr), has_values=has_values, values=values,
                  src_ip=src_ip, src_mac=f[:, 6:12], rejected=int(n - f.shape[0]))
