"""Frames in bulk: build a batch from prebuilt templates, parse a batch into columns.

A batch of frames is a (n, 318) uint8 matrix plus a length per row (62, 66, 70 or 318: one
per `protocol.Extension`). Building one writes the 42-byte L2-L4 template, the packed
headers and the extension (big-endian values or the fingerprint) with a handful of numpy
assignments, however many rows there are; parsing reads the same columns back. No
per-packet Python, no scapy (protocol.py is the one codec; this only arranges its pieces in
matrices).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import protocol as p

WIDTH = p.FRAME_BYTES_WITH_VALUES
_EXT = p.EXTENSION_OFFSET
_VALUE_COLS = slice(_EXT, _EXT + p.VALUE_BYTES)
_HEADER_COLS = slice(p.P4R_OFFSET, _EXT)
FLAGS_BYTE = p.P4R_OFFSET + 1  # slot_version (bit 7) | flags (bits 6..0)
_KINDS = list(p.Extension)
_LENGTHS = np.array([p.EXTENSION_OFFSET + p.EXTENSION_BYTES[k] for k in _KINDS], np.int64)
_UDP_LENGTH_KIND = {p.UDP_BYTES + p.HEADER_BYTES + p.EXTENSION_BYTES[k]: k for k in _KINDS}


@dataclass
class Batch:
    """Frames to send: rows of `frames` up to `lengths` bytes each."""

    frames: np.ndarray  # (n, WIDTH) uint8
    lengths: np.ndarray  # (n,) int64

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
        return Batch(
            np.concatenate([b.frames for b in batches]),
            np.concatenate([b.lengths for b in batches]),
        )


class FrameBuilder:
    """Builds batches for one direction (one Endpoints) from its prebuilt templates."""

    def __init__(self, ep: p.Endpoints):
        self.ep = ep
        self.templates = np.stack(
            [np.frombuffer(p.l2_l4_template(ep, k), np.uint8) for k in _KINDS]
        )

    def build(
        self,
        columns: dict[str, np.ndarray | int],
        extension: np.ndarray,
        values: np.ndarray | None = None,
        fingerprint: np.ndarray | int | None = None,
    ) -> Batch:
        """Frames for header columns (protocol.FIELDS names). `extension` (a
        protocol.Extension per row) says what follows the header: VALUES rows get the rows
        of `values` (int32, one per such row, in order), FINGERPRINT rows get `fingerprint`
        as both minimum and maximum (a sender announces its own)."""
        extension = np.asarray(extension, dtype=np.int64)
        n = extension.shape[0]
        frames = np.zeros((n, WIDTH), np.uint8)
        frames[:, : p.L2_L4_BYTES] = self.templates[extension]
        frames[:, _HEADER_COLS] = p.pack_headers(columns, n).view(np.uint8).reshape(n, -1)
        with_values = extension == p.Extension.VALUES
        if values is not None and len(values):
            frames[with_values, _VALUE_COLS] = (
                np.asarray(values).astype(p.VALUES_DTYPE).view(np.uint8).reshape(-1, p.VALUE_BYTES)
            )
        with_fp = extension == p.Extension.FINGERPRINT
        if with_fp.any():
            if fingerprint is None:
                raise p.ProtocolError("an ANNOUNCE needs its sender's fingerprint")
            fp = np.broadcast_to(np.asarray(fingerprint, np.int64), (n,))[with_fp]
            pair = np.stack([fp, fp], axis=1).astype(">u4").view(np.uint8).reshape(-1, 8)
            frames[with_fp, _EXT : _EXT + p.FINGERPRINT_BYTES] = pair
        return Batch(frames, _LENGTHS[extension])


@dataclass
class Parsed:
    """Columns of a received batch; rows that are not p4reduce frames are already gone."""

    cols: dict[str, np.ndarray]  # per field of protocol.FIELDS, int64
    has_values: np.ndarray  # (n,) bool: the frame carries K values
    values: np.ndarray  # (n, K) int32 (garbage where not has_values)
    src_ip: np.ndarray  # (n,) uint32
    src_mac: np.ndarray  # (n, 6) uint8
    rejected: int  # frames dropped as not p4reduce / truncated
    extension: np.ndarray | None = None  # (n,) protocol.Extension per row
    fingerprint: np.ndarray | None = None  # (n, 2) int64 min, max (FINGERPRINT rows)
    contributors: np.ndarray | None = None  # (n,) int64 bitmap (STATUS rows)

    def __len__(self) -> int:
        return int(self.has_values.shape[0])


def parse_batch(frames: np.ndarray, lengths: np.ndarray) -> Parsed:
    """Vectorised parse_frame for a (n, >=318) uint8 matrix: checks Ethernet/IPv4/UDP
    framing like protocol.parse_frame and splits headers and extensions into columns. A
    frame whose UDP length is no p4reduce layout, or that is shorter than it, is rejected."""
    frames = np.asarray(frames)
    lengths = np.asarray(lengths)
    n = lengths.shape[0]
    f = frames[:n]
    udp_len = f[:, 38].astype(np.int64) << 8 | f[:, 39]
    kind = np.full(n, -1, np.int64)
    for ulen, k in _UDP_LENGTH_KIND.items():
        kind[udp_len == ulen] = int(k)
    ok = (
        (kind >= 0)
        & (lengths >= _LENGTHS[np.maximum(kind, 0)])
        & (f[:, 12] == 8)
        & (f[:, 13] == 0)
        & (f[:, 14] == 0x45)
        & (f[:, 23] == 17)
        & ((f[:, 36] & 0xFF) == 0x50)
        & ((f[:, 37] & 0xF0) == 0x30)
    )
    if not ok.all():
        f, kind = f[ok], kind[ok]
    hdr = np.ascontiguousarray(f[:, _HEADER_COLS]).view(p.HEADER_DTYPE).reshape(-1)
    values = np.ascontiguousarray(f[:, _VALUE_COLS]).view(p.VALUES_DTYPE).astype(np.int32)
    ext = np.ascontiguousarray(f[:, _EXT : _EXT + p.FINGERPRINT_BYTES]).view(">u4")
    ext = ext.reshape(-1, 2).astype(np.int64)
    src_ip = np.ascontiguousarray(f[:, 26:30]).view(">u4").reshape(-1).astype(np.uint32)
    return Parsed(
        cols=p.unpack_headers(hdr),
        has_values=kind == p.Extension.VALUES,
        values=values,
        src_ip=src_ip,
        src_mac=f[:, 6:12],
        rejected=int(n - f.shape[0]),
        extension=kind,
        fingerprint=ext,
        contributors=ext[:, 0].copy(),
    )
