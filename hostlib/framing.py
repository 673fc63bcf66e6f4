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
from .kernels import compiled as _kernels  # a batch's header numbers
from .scratch import Scratch, take
from .smallarrays import largest

_EXT = p.EXTENSION_OFFSET
# each header field's 32-bit word, shift in it and largest value (protocol's layout)
_HEADER_LAYOUT = tuple(
    np.asarray(a, np.int64) for a in (p.FIELD_WORD, p.FIELD_SHIFT, p.FIELD_LIMIT)
)
FLAGS_BYTE = p.P4R_OFFSET + 1  # slot_version (bit 7) | flags (bits 6..0)
_KINDS = list(p.Extension)
# the extension other than values that a UDP length means (-1: none), for every UDP
# length a frame can state: one lookup per batch
_KIND_BY_UDP_LENGTH = np.full(1 << 16, -1, np.int8)
for _k in (p.EXT.NONE, p.EXT.STATUS, p.EXT.FINGERPRINT):
    _KIND_BY_UDP_LENGTH[p.UDP_BYTES + p.HEADER_BYTES + p.EXTENSION_BYTES[_k]] = int(_k)


def _gather_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What parse_batch reads of a frame, for the compiled `numbers` (hostlib/_kernels.c):
    the byte columns of every number, each number's width in bytes (its columns, in order,
    are big-endian), and its shift and mask: a header field is its 32-bit word
    (protocol.FIELD_WORD) shifted and masked as protocol.fields_of_words does."""
    word = [[p.P4R_OFFSET + 4 * w + i for i in range(4)] for w in range(p.HEADER_WORDS)]
    rows = [
        # the bytes every p4reduce frame has, as one number: EtherType IPv4, version 4 /
        # IHL 5, UDP, the p4reduce port (0x5030..0x503F: its last nibble, shifted out, is any)
        ([12, 13, 14, 23, 36, 37], 4, (1 << 44) - 1),
        ([38, 39], 0, 0xFFFF),  # UDP length
        ([26, 27, 28, 29], 0, 0xFFFFFFFF),  # source IPv4 address
        *((word[w], s, m) for w, s, m in zip(p.FIELD_WORD, p.FIELD_SHIFT, p.FIELD_LIMIT)),
        *(([_EXT + 4 * w + i for i in range(4)], 0, 0xFFFFFFFF) for w in range(2)),  # fp/status
    ]
    cols = np.array([c for row, _, _ in rows for c in row], np.intp)
    widths = np.array([len(row) for row, _, _ in rows], np.int64)
    shift = np.array([s for _, s, _ in rows], np.int64)
    mask = np.array([m for _, _, m in rows], np.int64)
    return cols, widths, shift, mask


_GATHER_COLS, _GATHER_WIDTHS, _GATHER_SHIFT, _GATHER_MASK = _gather_rows()
_FIXED, _UDP_LENGTH, _SRC_IP = 0, 1, 2
_FIELDS = slice(3, 3 + len(p.FIELD_NAMES))
_EXTENSION_WORDS = slice(_FIELDS.stop, _FIELDS.stop + 2)
_MSG_TYPE, _BLOCK = p.FIELD_NAMES.index("msg_type"), p.FIELD_NAMES.index("block")
# parse_batch's constants as 0-d arrays: numpy compares an array with one of them sooner
# than with a Python int (which it converts on every call)
_FIXED_BYTES = np.array(0x0800_45_11_50_3)  # the fixed number's bytes, past the port's nibble
_EOS = np.array(p.END_OF_STREAM)
_VALUES = np.array(p.EXT.VALUES, np.int8)


def frame_width(block_values: int = p.BLOCK_VALUES, announce_block: bool = False) -> int:
    """Columns of a job's frame matrices: its largest frame, a DATA frame of K values (an
    ANNOUNCE's, 70 bytes, when K is 1 or 2), or where its ANNOUNCEs carry a block after
    their fingerprint range (`announce_block`: wire.announce_carries_block) such an
    ANNOUNCE, 8 bytes longer."""
    if announce_block:
        return p.frame_bytes_with_fingerprint_and_block(block_values)
    return max(p.frame_bytes_with_values(block_values), p.FRAME_BYTES_WITH_FINGERPRINT)


WIDTH = frame_width()  # of a job of the default K (p.BLOCK_VALUES)


def frame_matrix(scratch: Scratch, name: str, n: int, width: int) -> np.ndarray:
    """An (n, width) uint8 matrix of frames in `scratch`'s buffer `name`, laid out so that
    every row's values (from byte 62, EXTENSION_OFFSET: no multiple of 4) start 4-byte
    aligned: rows a multiple of 4 bytes apart, the first placed 2 bytes into the buffer.
    Values quantized straight into such a row (`values_columns`) are stored as fast as
    into an aligned array of their own (numpy's byte-swapping store into unaligned
    columns is slower), with no copy into the frame after."""
    stride = -(-width // 4) * 4
    raw = scratch.take(name, (n * stride + 4,), np.uint8)
    lead = -(raw.ctypes.data + _EXT) % 4
    return raw[lead : lead + n * stride].reshape(n, stride)[:, :width]


def values_columns(frames: np.ndarray, block_values: int) -> np.ndarray:
    """The values of (n, width) DATA frames of K = `block_values` values: an (n, K) view
    of their bytes as the wire's int32 (protocol.VALUES_DTYPE)."""
    return frames[:, _EXT : _EXT + p.values_bytes(block_values)].view(p.VALUES_DTYPE)


def _in_place(values: np.ndarray, frames: np.ndarray, block_values: int) -> bool:
    """Whether `values` are the values columns of `frames` themselves (written there
    before the build: nothing to copy)."""
    if values.dtype != p.VALUES_DTYPE or values.shape[0] != frames.shape[0]:
        return False
    cols = values_columns(frames, block_values)
    return values.strides == cols.strides and (
        values.__array_interface__["data"][0] == cols.__array_interface__["data"][0]
    )


@lru_cache(maxsize=None)
def _lengths(block_values: int) -> np.ndarray:
    """Frame bytes per protocol.Extension (its index) in a job of `block_values` values."""
    return np.array([_EXT + p.extension_bytes(k, block_values) for k in _KINDS], np.int64)


@dataclass(frozen=True)
class _Layout:
    """What parse_batch needs of a job of K values per block, made once per K."""

    width: int  # frame_width(K)
    values_udp_length: np.ndarray  # the UDP length of a frame of K values (0-d)
    # the extension of a frame of that UDP length, by msg_type and whether its block is
    # not END_OF_STREAM: VALUES where protocol.carries_values says so, else what the
    # length means otherwise (K = 1 or 2: a STATUS's or a fingerprint's)
    values_kind: np.ndarray  # (16, 2) int8
    # the bytes a frame must have, by its extension (-1, its last entry: unbounded)
    need: np.ndarray  # (5,) int64
    # the extension other than values by UDP length: _KIND_BY_UDP_LENGTH, and above
    # SKIP_GROWS_TO_VALUES the length of a fingerprint range and a block read as the range
    # (an announce round's answer in the leaf role: protocol._fingerprint_and_block)
    kind_by_udp_length: np.ndarray  # (65536,) int8


@lru_cache(maxsize=None)
def _layout(block_values: int) -> _Layout:
    vb = p.values_bytes(block_values)
    udp = p.UDP_BYTES + p.HEADER_BYTES + vb
    other = int(_KIND_BY_UDP_LENGTH[udp])
    by_length = _KIND_BY_UDP_LENGTH
    if p.skip_carries_values(block_values):
        by_length = _KIND_BY_UDP_LENGTH.copy()
        by_length[udp + p.FINGERPRINT_BYTES] = p.EXT.FINGERPRINT
    # carries_values reads a block only as END_OF_STREAM or not (MAX_BLOCK: any other)
    blocks = (p.END_OF_STREAM, p.MAX_BLOCK)
    kind = [
        [int(p.EXT.VALUES) if p.carries_values(m, b, vb) else other for b in blocks]
        for m in range(16)
    ]
    need = np.append(_lengths(block_values), np.iinfo(np.int64).max)
    return _Layout(
        frame_width(block_values), np.array(udp), np.array(kind, np.int8), need, by_length
    )


@dataclass
class Batch:
    """Frames to send: rows of `frames` up to `lengths` bytes each."""

    frames: np.ndarray  # (n, width) uint8: width = frame_width(K) of the job
    lengths: np.ndarray  # (n,) int64

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def frame(self, i: int) -> bytes:
        return self.frames[i, : int(self.lengths[i])].tobytes()

    def extent(self, rows: slice = slice(None)) -> int:
        """Bytes of `rows`' longest frame (0 for none): what a copy of these frames out
        needs of each row, since the bytes past a frame's length are never sent -- an
        ANNOUNCE or a header-only SKIP of a wide-block job is 70 bytes of a 64 KB row."""
        lengths = self.lengths[rows]
        return int(largest(lengths)) if lengths.size else 0

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
    in wire byte order): one builder serves one thread (a Worker's). With
    `announce_block` (wire.announce_carries_block: the leaf role of silent rounds above
    SKIP_GROWS_TO_VALUES values per block) its FINGERPRINT rows, ANNOUNCEs, carry a block
    of zeros after the range."""

    def __init__(
        self, ep: p.Endpoints, block_values: int = p.BLOCK_VALUES, announce_block: bool = False
    ):
        self.ep = ep
        self.block_values = p.check_block_values(block_values)
        self.announce_block = announce_block
        self.width = frame_width(block_values, announce_block)
        self.lengths = _lengths(block_values).copy()
        if announce_block:
            self.lengths[p.EXT.FINGERPRINT] += p.values_bytes(block_values)
        self.templates = np.stack(
            [
                np.frombuffer(p.l2_l4_template(ep, k, block_values, announce_block), np.uint8)
                for k in _KINDS
            ]
        )
        self._scratch = Scratch()  # the wire-order values of a build, reused

    def build(
        self,
        columns: dict[str, np.ndarray | int],
        extension: np.ndarray,
        values: np.ndarray | None = None,
        fingerprint: int | None = None,
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
        # rows per extension: a batch is mostly of one (its template is then broadcast,
        # its values copied to every row), and the masks below are only made when mixed
        count = np.bincount(extension, minlength=len(_KINDS)).tolist()
        if n and count[extension[0]] == n:
            frames[:, : p.L2_L4_BYTES] = self.templates[extension[0]]
        else:
            frames[:, : p.L2_L4_BYTES] = self.templates[extension]
        # the header's fields checked, packed into its 32-bit words and stored big-endian
        # in one compiled pass (header_words' packing); a field out of range is named
        fields = p.header_fields(columns, n)
        bad = _kernels.header(fields, *_HEADER_LAYOUT, frames, p.P4R_OFFSET)
        if bad >= 0:
            p.check_fields(fields)  # names the field and its value
            raise p.ProtocolError(f"field {p.FIELD_NAMES[bad]} out of range")
        if values is not None and len(values):
            values = np.asarray(values)
            if values.shape[-1] != self.block_values:
                raise p.ProtocolError(
                    f"values of {values.shape[-1]} per block in a job of {self.block_values}"
                )
            end = _EXT + p.values_bytes(self.block_values)
            if count[p.EXT.VALUES] == n and _in_place(values, frames, self.block_values):
                pass  # quantized into these frames already (engine._release)
            else:
                # converted first, then copied as bytes: the values start 62 bytes into a
                # frame, and numpy's byte-swapping store into that unaligned view is
                # slower than an aligned conversion plus a byte copy (none when they come
                # in the wire's order: Payload.values quantizes into it)
                wire = values
                if values.dtype != p.VALUES_DTYPE or not values.flags.c_contiguous:
                    wire = self._scratch.take("values", values.shape, p.VALUES_DTYPE)
                    np.copyto(wire, values, casting="unsafe")  # what astype(VALUES_DTYPE) does
                rows = slice(None) if count[p.EXT.VALUES] == n else extension == p.EXT.VALUES
                frames[rows, _EXT:end] = wire.view(np.uint8).reshape(len(values), -1)
        if count[p.EXT.FINGERPRINT]:
            if fingerprint is None:
                raise p.ProtocolError("an ANNOUNCE needs its sender's fingerprint")
            rows = slice(None) if count[p.EXT.FINGERPRINT] == n else extension == p.EXT.FINGERPRINT
            # the sender's own as minimum and maximum: the same 8 bytes in every such row
            word = (int(fingerprint) & 0xFFFFFFFF).to_bytes(4, "big")
            frames[rows, _EXT : _EXT + p.FINGERPRINT_BYTES] = np.frombuffer(word * 2, np.uint8)
            if self.announce_block:  # the block after the range: zeros (a row may be reused)
                frames[rows, _EXT + p.FINGERPRINT_BYTES : self.width] = 0
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
    lay = _layout(block_values)
    f = frames[:n]
    if f.shape[1] < lay.width:  # a narrower matrix: a row longer than it lost its end
        lengths = np.minimum(lengths, f.shape[1])
        f = np.pad(f, ((0, 0), (0, lay.width - f.shape[1])))
    # every number read below (but the values) in one compiled call (_gather_rows): a
    # batch is mostly a few frames, where each numpy call costs more than its bytes
    num = np.empty((_GATHER_WIDTHS.size, n), np.int64)
    _kernels.numbers(f, _GATHER_COLS, _GATHER_WIDTHS, _GATHER_SHIFT, _GATHER_MASK, num)
    cols = num[_FIELDS]
    udp_len = num[_UDP_LENGTH]
    kind = np.where(  # what follows the header, by its length and (values) its message
        udp_len == lay.values_udp_length,
        lay.values_kind[cols[_MSG_TYPE], (cols[_BLOCK] != _EOS).view(np.uint8)],
        lay.kind_by_udp_length[udp_len],
    )
    ok = (lengths >= lay.need[kind]) & (num[_FIXED] == _FIXED_BYTES)
    if np.count_nonzero(ok) != n:
        f, kind, num, cols = f[ok], kind[ok], num[:, ok], cols[:, ok]
    # the values as the wire has them (big-endian int32, a strided view of the frames, no
    # copy): the engine reads the rows it stores once, turning them native on the way
    # (numerics.from_packed); numpy reads them as the int32 they are anywhere else
    values = values_columns(f, block_values)
    ext = num[_EXTENSION_WORDS]
    return Parsed(
        cols=dict(zip(p.FIELD_NAMES, cols)),
        has_values=kind == _VALUES,
        values=values,
        src_ip=num[_SRC_IP].astype(np.uint32),
        src_mac=f[:, 6:12],
        rejected=int(n - f.shape[0]),
        extension=kind,
        fingerprint=ext.T,
        contributors=ext[0],
    )
