"""Frames in bulk: build a batch from prebuilt templates, parse a batch into columns.

A batch of frames is a (n, width) uint8 matrix plus a length per row: width is the job's
DATA frame (62 + 4 K bytes, 318 at K = 64 values per block), and a row is 62, 66, 70 or
that many bytes long (one per `protocol.Extension`). Building one writes the 42-byte L2-L4
template, the packed headers and the extension (big-endian values or the fingerprint) with
a handful of numpy assignments, however many rows there are; parsing reads the same
columns back. No per-packet Python, no scapy (protocol.py is the one codec; this only
arranges its pieces in matrices).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import protocol as p
from .scratch import Scratch, take

_EXT = p.EXTENSION_OFFSET
_HEADER_COLS = slice(p.P4R_OFFSET, _EXT)
FLAGS_BYTE = p.P4R_OFFSET + 1  # slot_version (bit 7) | flags (bits 6..0)
_MSG_TYPE_BYTE = p.P4R_OFFSET  # protocol (high nibble) | msg_type (low nibble)
_BLOCK_COLS = slice(p.P4R_OFFSET + 12, p.P4R_OFFSET + 16)  # the header's block field
_KINDS = list(p.Extension)
# Bytes every p4reduce frame has, checked at once: EtherType IPv4, version 4 / IHL 5, UDP,
# the p4reduce port (0x5030..0x503F: the high byte and the high nibble of the low one)
_FIXED_COLS = np.array([12, 13, 14, 23, 36, 37])
_FIXED_MASK = np.array([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xF0], np.uint8)
_FIXED_BYTES = np.array([0x08, 0x00, 0x45, 17, 0x50, 0x30], np.uint8)
# the extension other than values that a UDP length means (-1: none), for every UDP
# length a frame can state: one lookup per batch
_KIND_BY_UDP_LENGTH = np.full(1 << 16, -1, np.int8)
for _k in (p.EXT.NONE, p.EXT.STATUS, p.EXT.FINGERPRINT):
    _KIND_BY_UDP_LENGTH[p.UDP_BYTES + p.HEADER_BYTES + p.EXTENSION_BYTES[_k]] = int(_k)


def frame_width(block_values: int = p.BLOCK_VALUES) -> int:
    """Columns of a job's frame matrices: its largest frame, a DATA frame of K values (an
    ANNOUNCE's, 70 bytes, when K is 1 or 2)."""
    return max(p.frame_bytes_with_values(block_values), p.FRAME_BYTES_WITH_FINGERPRINT)


WIDTH = frame_width()  # of a job of the default K (p.BLOCK_VALUES)


@lru_cache(maxsize=None)
def _lengths(block_values: int) -> np.ndarray:
    """Frame bytes per protocol.Extension (its index) in a job of `block_values` values."""
    return np.array([_EXT + p.extension_bytes(k, block_values) for k in _KINDS], np.int64)


@dataclass
class Batch:
    """Frames to send: rows of `frames` up to `lengths` bytes each."""

    frames: np.ndarray  # (n, width) uint8: width = frame_width(K) of the job
    lengths: np.ndarray  # (n,) int64

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def frame(self, i: int) -> bytes:
        return self.frames[i, : int(self.lengths[i])].tobytes()

    @staticmethod
    def empty(width: int = WIDTH) -> "Batch":
        return Batch(np.zeros((0, width), np.uint8), np.zeros(0, np.int64))

    @staticmethod
    def concat(
        batches: list["Batch"], width: int = WIDTH, scratch: Scratch | None = None
    ) -> "Batch":
        """The batches' frames in order (all of one job: one width; `width` when empty), in
        `scratch`'s "concat" buffer when given (valid until its next concat)."""
        batches = [b for b in batches if len(b)]
        if not batches:
            return Batch.empty(width)
        if len(batches) == 1:
            return batches[0]
        frames = [b.frames for b in batches]
        shape = (sum(f.shape[0] for f in frames), frames[0].shape[1])
        out = take(scratch, "concat", shape, np.uint8)
        return Batch(
            np.concatenate(frames, out=out),
            np.concatenate([b.lengths for b in batches]),
        )


class FrameBuilder:
    """Builds batches for one direction (one Endpoints) of a job of `block_values` values
    per block from its prebuilt templates. It reuses a buffer across builds (the values
    in wire byte order): one builder serves one thread (a Worker's)."""

    def __init__(self, ep: p.Endpoints, block_values: int = p.BLOCK_VALUES):
        self.ep = ep
        self.block_values = p.check_block_values(block_values)
        self.width = frame_width(block_values)
        self.lengths = _lengths(block_values)
        self.templates = np.stack(
            [np.frombuffer(p.l2_l4_template(ep, k, block_values), np.uint8) for k in _KINDS]
        )
        self._scratch = Scratch()  # the wire-order values of a build, reused

    def build(
        self,
        columns: dict[str, np.ndarray | int],
        extension: np.ndarray,
        values: np.ndarray | None = None,
        fingerprint: np.ndarray | int | None = None,
        scratch: tuple[Scratch, str] | None = None,
        out: np.ndarray | None = None,
    ) -> Batch:
        """Frames for header columns (protocol.FIELDS names). `extension` (a
        protocol.Extension per row) says what follows the header: VALUES rows get the rows
        of `values` (int32, one per such row, in order), FINGERPRINT rows get `fingerprint`
        as both minimum and maximum (a sender announces its own). `scratch`, a Scratch and
        a name: the frames are built in that buffer (valid until the name's next take),
        where the bytes past a row's frame are left as they were, instead of in a new
        zeroed matrix (a wide job's frames are 64 KB each). `out`, an (n, width) uint8
        array: the frames are built there instead (the engine's kept frames of a run of
        slots), the same way."""
        extension = np.asarray(extension, dtype=np.int64)
        n = extension.shape[0]
        if out is not None:
            frames = out
        elif scratch is None:
            frames = np.zeros((n, self.width), np.uint8)
        else:
            frames = scratch[0].take(scratch[1], (n, self.width), np.uint8)
        frames[:, : p.L2_L4_BYTES] = self.templates[extension]
        frames[:, _HEADER_COLS] = p.pack_headers(columns, n).view(np.uint8).reshape(n, -1)
        with_values = extension == p.EXT.VALUES
        if values is not None and len(values):
            values = np.asarray(values)
            if values.shape[-1] != self.block_values:
                raise p.ProtocolError(
                    f"values of {values.shape[-1]} per block in a job of {self.block_values}"
                )
            end = _EXT + p.values_bytes(self.block_values)
            # converted first, then copied as bytes: the values start 62 bytes into a
            # frame, and numpy's byte-swapping store into that unaligned view is slower
            # than an aligned conversion plus a byte copy (none when they come in the
            # wire's order: Payload.values quantizes into it)
            wire = values
            if values.dtype != p.VALUES_DTYPE or not values.flags.c_contiguous:
                wire = self._scratch.take("values", values.shape, p.VALUES_DTYPE)
                np.copyto(wire, values, casting="unsafe")  # what astype(VALUES_DTYPE) does
            frames[with_values, _EXT:end] = wire.view(np.uint8).reshape(len(values), -1)
        with_fp = extension == p.EXT.FINGERPRINT
        if np.count_nonzero(with_fp):
            if fingerprint is None:
                raise p.ProtocolError("an ANNOUNCE needs its sender's fingerprint")
            fp = np.broadcast_to(np.asarray(fingerprint, np.int64), (n,))[with_fp]
            pair = np.stack([fp, fp], axis=1).astype(">u4").view(np.uint8).reshape(-1, 8)
            frames[with_fp, _EXT : _EXT + p.FINGERPRINT_BYTES] = pair
        return Batch(frames, self.lengths[extension])


@dataclass
class Parsed:
    """Columns of a received batch; rows that are not p4reduce frames are already gone."""

    cols: dict[str, np.ndarray]  # per field of protocol.FIELDS, int64
    has_values: np.ndarray  # (n,) bool: the frame carries K values
    values: np.ndarray  # (n, K) int32 in the wire's byte order (garbage where not has_values)
    src_ip: np.ndarray  # (n,) uint32
    src_mac: np.ndarray  # (n, 6) uint8
    rejected: int  # frames dropped as not p4reduce / truncated
    extension: np.ndarray | None = None  # (n,) protocol.Extension per row
    fingerprint: np.ndarray | None = None  # (n, 2) int64 min, max (FINGERPRINT rows)
    contributors: np.ndarray | None = None  # (n,) int64 bitmap (STATUS rows)

    def __len__(self) -> int:
        return int(self.has_values.shape[0])


def parse_batch(
    frames: np.ndarray, lengths: np.ndarray, block_values: int = p.BLOCK_VALUES
) -> Parsed:
    """Vectorised parse_frame for a (n, width) uint8 matrix of a job of `block_values`
    values per block: checks Ethernet/IPv4/UDP framing like protocol.parse_frame and splits
    headers and extensions into columns. What follows the header is read as parse_frame
    reads it (protocol.carries_values): values where a DATA, a RESULT of a data round or a
    SKIP (of a job whose SKIPs carry a block) has the job's K of them; other lengths are
    what they are whatever the message (the engine checks a message's layout where it
    matters). A frame whose UDP length is none of these, or that is shorter, is rejected."""
    frames = np.asarray(frames)
    if frames.strides[-1] != 1:  # each row's bytes are viewed as wider types below
        frames = np.ascontiguousarray(frames)  # (rows may be apart: a view of a ring)
    lengths = np.asarray(lengths)
    n = lengths.shape[0]
    width = frame_width(block_values)
    f = frames[:n]
    if f.shape[1] < width:  # a narrower matrix: a row longer than it lost its end
        lengths = np.minimum(lengths, f.shape[1])
        f = np.pad(f, ((0, 0), (0, width - f.shape[1])))
    udp_len = f[:, 38].astype(np.int64) << 8 | f[:, 39]
    ext_len = udp_len - (p.UDP_BYTES + p.HEADER_BYTES)
    msg_type = f[:, _MSG_TYPE_BYTE] & 0x0F
    block = np.ascontiguousarray(f[:, _BLOCK_COLS]).view(">u4").reshape(-1)
    data_round = p.carries_values(msg_type, block, ext_len)
    kind = _KIND_BY_UDP_LENGTH[udp_len]  # what follows the header, by its length
    kind[data_round & (ext_len == p.values_bytes(block_values))] = int(p.EXT.VALUES)
    lengths_of = _lengths(block_values)
    ok = (
        (kind >= 0)
        & (lengths >= lengths_of[np.maximum(kind, 0)])
        & ((f[:, _FIXED_COLS] & _FIXED_MASK) == _FIXED_BYTES).all(axis=1)
    )
    if not ok.all():
        f, kind = f[ok], kind[ok]
    hdr = np.ascontiguousarray(f[:, _HEADER_COLS]).view(p.HEADER_DTYPE).reshape(-1)
    # the values as the wire has them (big-endian int32, a strided view of the frames, no
    # copy): the engine reads the rows it stores once, turning them native on the way
    # (numerics.from_packed); numpy reads them as the int32 they are anywhere else
    values = f[:, _EXT : _EXT + p.values_bytes(block_values)].view(p.VALUES_DTYPE)
    ext = f[:, _EXT : _EXT + p.FINGERPRINT_BYTES].view(">u4").astype(np.int64)
    src_ip = f[:, 26:30].view(">u4").reshape(-1).astype(np.uint32)
    return Parsed(
        cols=p.unpack_headers(hdr),
        has_values=kind == p.EXT.VALUES,
        values=values,
        src_ip=src_ip,
        src_mac=f[:, 6:12],
        rejected=int(n - f.shape[0]),
        extension=kind,
        fingerprint=ext,
        contributors=ext[:, 0].copy(),
    )
