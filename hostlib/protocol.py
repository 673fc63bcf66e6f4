"""The p4reduce wire format: one field table, two codecs.

`FIELDS` (in `p4reduce.wire`, with the constants, re-exported here) is the single description
of the 20-byte p4reduce header. From it come
  * the numpy structured dtype used on the data path (encode/decode whole batches of headers
    with no per-packet Python), and
  * the scapy layer `P4Reduce` used by tests and for dissecting captures.
The P4 program declares the same header (`p4src/common/headers.p4`); a test compares the
compiled bmv2 JSON's header type with this table, so the three cannot drift apart.

Everything is big-endian, like every network header. docs/protocol.md is the specification.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from p4reduce.wire import (  # noqa: F401 (re-exported: the one place these are defined)
    PROTOCOL_VERSION,
    BLOCK_VALUES,
    MAX_BLOCK_VALUES,
    VALUE_BYTES,
    values_bytes,
    frame_bytes_with_values,
    mtu_needed,
    SKIP_GROWS_TO_VALUES,
    skip_carries_values,
    announce_carries_block,
    frame_bytes_with_fingerprint_and_block,
    HEADER_BYTES,
    FINGERPRINT_BYTES,
    STATUS_BYTES,
    UDP_PORT_BASE,
    UDP_PORT_MASK,
    UDP_PORTS,
    END_OF_STREAM,
    MAX_BLOCK,
    EXPONENT_BIAS,
    MAX_WORKERS,
    MAX_LEAVES,
    MAX_JOB_RANKS,
    MAX_EPOCH,
    ETH_BYTES,
    IPV4_BYTES,
    UDP_BYTES,
    L2_L4_BYTES,
    P4R_OFFSET,
    EXTENSION_OFFSET,
    FRAME_BYTES_HEADER_ONLY,
    FRAME_BYTES_WITH_VALUES,
    FRAME_BYTES_WITH_FINGERPRINT,
    FRAME_BYTES_WITH_STATUS,
    MsgType,
    Flag,
    Encoding,
    RoundMode,
    Extension,
    EXTENSION_BYTES,
    ProtocolError,
    Field,
    FIELDS,
    FIELD_NAMES,
    FINGERPRINT_FIELDS,
    STATUS_FIELDS,
    mac_bytes,
    ip_bytes,
    ipv4_checksum,
    Endpoints,
)


def _byte_groups(fields: tuple[Field, ...]) -> list[tuple[str, int, list[tuple[Field, int]]]]:
    """Group sub-byte fields into whole bytes: [(column, bytes, [(field, shift)])].

    Fields of 8, 16 or 32 bits are their own column; a run of narrower fields that fills a
    byte shares one uint8 column, each field at its shift (first field in the high bits).
    """
    groups: list[tuple[str, int, list[tuple[Field, int]]]] = []
    pending: list[Field] = []
    pending_bits = 0
    for f in fields:
        if f.bits % 8 == 0 and not pending:
            groups.append((f.name, f.bits // 8, [(f, 0)]))
            continue
        pending.append(f)
        pending_bits += f.bits
        if pending_bits == 8:
            shift = 8
            members = []
            for p in pending:
                shift -= p.bits
                members.append((p, shift))
            groups.append(("_" + "_".join(p.name for p in pending), 1, members))
            pending, pending_bits = [], 0
        elif pending_bits > 8:
            raise AssertionError(f"field {f.name} straddles a byte boundary")
    assert not pending, "header fields must fill whole bytes"
    return groups


_GROUPS = _byte_groups(FIELDS)
_NUMPY_TYPE = {1: "u1", 2: ">u2", 4: ">u4"}
HEADER_DTYPE = np.dtype([(name, _NUMPY_TYPE[size]) for name, size, _ in _GROUPS])
assert HEADER_DTYPE.itemsize == HEADER_BYTES
VALUES_DTYPE = np.dtype(">i4")
_LIMITS = {f.name: (1 << f.bits) - 1 for f in FIELDS}


class Header(NamedTuple):
    """One p4reduce header, field by field (the names of FIELDS)."""

    protocol: int
    msg_type: int
    slot_version: int
    flags: int
    job: int
    slot: int
    rank: int
    next_exponent: int
    epoch: int
    block: int
    next_block: int

    @classmethod
    def make(
        cls,
        msg_type: int,
        *,
        job: int,
        slot: int,
        rank: int,
        epoch: int = 1,
        slot_version: int = 0,
        flags: int = 0,
        block: int = END_OF_STREAM,
        next_block: int = END_OF_STREAM,
        next_exponent: int = 0,
        protocol: int = PROTOCOL_VERSION,
    ) -> "Header":
        return cls(
            protocol,
            int(msg_type),
            slot_version,
            int(flags),
            job,
            slot,
            rank,
            next_exponent,
            epoch,
            block,
            next_block,
        )


def check_field(name: str, value: int) -> None:
    """Raise ProtocolError naming the field when value does not fit its width."""
    limit = _LIMITS[name]
    if not 0 <= int(value) <= limit:
        raise ProtocolError(f"field {name}={value} out of range 0..{limit}")


# The header is five big-endian 32-bit words and no field straddles two: pack_headers adds
# each field, shifted to its place, into its word with one matrix product, and
# fields_of_words (and framing.parse_batch, from the same FIELD_WORD, FIELD_SHIFT and
# FIELD_LIMIT) shifts and masks the fields back out of the words, a fixed handful of numpy
# calls per batch whatever its size: a worker packs and parses a batch per receive, often
# of one frame, where a call per field (eleven) would cost more than the frame itself.
HEADER_WORDS = HEADER_BYTES // 4


def _word_layout(fields: tuple[Field, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(word, shift) per field: the 32-bit word of the header it lies in and how far above
    the word's lowest bit it starts."""
    word, shift, bit = [], [], 0
    for f in fields:
        end = bit + f.bits
        if bit // 32 != (end - 1) // 32:
            raise AssertionError(f"field {f.name} straddles a 32-bit word")
        word.append(bit // 32)
        shift.append(32 * (bit // 32 + 1) - end)
        bit = end
    assert bit == 32 * HEADER_WORDS, "header fields must fill whole words"
    return np.array(word, np.intp), np.array(shift, np.int64)


# per field (FIELD_NAMES' order): its word, its shift in it, its largest value
FIELD_WORD, FIELD_SHIFT = _word_layout(FIELDS)
FIELD_LIMIT = np.array([_LIMITS[n] for n in FIELD_NAMES], np.int64)
_SHIFT_COLUMN = FIELD_SHIFT[:, None]
_LIMIT_COLUMN = FIELD_LIMIT[:, None]
_LIMIT_UNSIGNED = _LIMIT_COLUMN.astype(np.uint64)  # a negative field, seen unsigned, is above
_PACK = np.zeros((HEADER_WORDS, len(FIELDS)), np.int64)  # words = _PACK @ fields
_PACK[FIELD_WORD, np.arange(len(FIELDS))] = 1 << FIELD_SHIFT
_FIELD_SET = frozenset(FIELD_NAMES)


def header_words(columns: dict[str, np.ndarray | int], count: int | None = None) -> np.ndarray:
    """The five 32-bit words of `count` headers, a (5, count) int64 matrix, from per-field
    columns or scalars (pack_headers' work). Every field must be given; values are
    range-checked per field."""
    cols = header_fields(columns, count)
    check_fields(cols)
    return np.dot(_PACK, cols)


def header_fields(columns: dict[str, np.ndarray | int], count: int | None = None) -> np.ndarray:
    """The (11, count) int64 field matrix (FIELD_NAMES' order) of per-field columns or
    scalars, not yet range-checked (check_fields; FrameBuilder packs and checks it in one
    compiled pass). Every field must be given."""
    if columns.keys() != _FIELD_SET:
        missing = _FIELD_SET - columns.keys()
        if missing:
            raise ProtocolError(f"missing header fields: {sorted(missing)}")
        raise ProtocolError(f"unknown header fields: {sorted(columns.keys() - _FIELD_SET)}")
    if count is None:
        sizes = {np.size(v) for v in columns.values() if np.ndim(v) > 0}
        count = sizes.pop() if sizes else 1
        if sizes:
            raise ProtocolError("header columns have different lengths")
    cols = np.empty((len(FIELD_NAMES), count), np.int64)
    for i, name in enumerate(FIELD_NAMES):
        cols[i] = columns[name]
    return cols


def check_fields(cols: np.ndarray) -> None:
    """ProtocolError naming the first field of a header_fields matrix out of its range."""
    if np.count_nonzero(cols.view(np.uint64) > _LIMIT_UNSIGNED):
        bad = (cols < 0) | (cols > _LIMIT_COLUMN)
        i = int(np.argmax(bad.any(axis=1)))
        name = FIELD_NAMES[i]
        raise ProtocolError(f"field {name}={cols[i][bad[i]][0]} out of range 0..{_LIMITS[name]}")


def pack_headers(columns: dict[str, np.ndarray | int], count: int | None = None) -> np.ndarray:
    """Build `count` headers (an array of HEADER_DTYPE) from per-field columns or scalars.

    Vectorised: this is how the data path writes a whole batch of headers at once.
    Every field must be given; values are range-checked per field.
    """
    words = header_words(columns, count)
    return np.ascontiguousarray(words.T, ">u4").view(HEADER_DTYPE).reshape(-1)


def fields_of_words(words: np.ndarray) -> np.ndarray:
    """The (11, n) int64 field columns (FIELD_NAMES' order) of headers given as their five
    32-bit words, a (5, n) matrix of any integer type that holds them."""
    return (words[FIELD_WORD] >> _SHIFT_COLUMN) & _LIMIT_COLUMN


def unpack_headers(headers: np.ndarray) -> dict[str, np.ndarray]:
    """Split an array of HEADER_DTYPE into per-field columns (vectorised)."""
    words = np.ascontiguousarray(headers).view(">u4").reshape(-1, HEADER_WORDS).T
    return dict(zip(FIELD_NAMES, fields_of_words(words.astype(np.int64))))


def encode_header(header: Header) -> bytes:
    for name, value in zip(FIELD_NAMES, header):
        check_field(name, value)
    return pack_headers(dict(zip(FIELD_NAMES, header)), 1).tobytes()


def decode_header(data: bytes | memoryview, offset: int = 0) -> Header:
    if len(data) - offset < HEADER_BYTES:
        raise ProtocolError(
            f"truncated p4reduce header: {len(data) - offset} of {HEADER_BYTES} bytes"
        )
    arr = np.frombuffer(data, dtype=HEADER_DTYPE, count=1, offset=offset)
    cols = unpack_headers(arr)
    return Header(*(int(cols[n][0]) for n in FIELD_NAMES))


def validate_header(h: Header, *, from_switch: bool) -> None:
    """Semantic checks beyond field widths; raises ProtocolError naming the field."""
    if h.protocol != PROTOCOL_VERSION:
        raise ProtocolError(f"field protocol={h.protocol}, expected {PROTOCOL_VERSION}")
    allowed = (
        (MsgType.RESULT, MsgType.STATUS, MsgType.REWIND)
        if from_switch
        else (MsgType.ANNOUNCE, MsgType.DATA, MsgType.SKIP, MsgType.REWIND)
    )
    if h.msg_type not in allowed:
        raise ProtocolError(f"field msg_type={h.msg_type} not one of {[m.name for m in allowed]}")
    if h.next_block > END_OF_STREAM:
        raise ProtocolError(f"field next_block={h.next_block} above END_OF_STREAM")
    if h.block > END_OF_STREAM:
        raise ProtocolError(f"field block={h.block} above END_OF_STREAM")


# ---------------------------------------------------------------------------------------
# Whole frames: Ethernet / IPv4 / UDP / p4reduce / values


def extension_bytes(extension: Extension, block_values: int = BLOCK_VALUES) -> int:
    """Bytes after the header of a frame with `extension`, in a job of `block_values` values
    per block (only the values' length depends on the job)."""
    if extension == Extension.VALUES:
        return values_bytes(block_values)
    return EXTENSION_BYTES[Extension(extension)]


def check_block_values(block_values: int) -> int:
    """`block_values`, or ProtocolError unless it is a K some switch program could carry."""
    if isinstance(block_values, bool) or not 1 <= int(block_values) <= MAX_BLOCK_VALUES:
        raise ProtocolError(f"block_values={block_values} not in 1..{MAX_BLOCK_VALUES}")
    return int(block_values)


def l2_l4_template(
    ep: Endpoints,
    extension: Extension | bool,
    block_values: int = BLOCK_VALUES,
    announce_block: bool = False,
) -> bytes:
    """The 42 bytes before the p4reduce header, IPv4 checksum included.

    A job's frames come in four sizes (one per `Extension`; the values' one is the job's
    K), so a sender precomputes their templates once and copies them in bulk; nothing per
    packet is recomputed. A bool is read as "with values" or "header only". With
    `announce_block` a fingerprint range is followed by a block of K values
    (wire.announce_carries_block).
    """
    if isinstance(extension, bool):
        extension = Extension.VALUES if extension else Extension.NONE
    payload = HEADER_BYTES + extension_bytes(Extension(extension), block_values)
    if announce_block and extension == Extension.FINGERPRINT:
        payload += values_bytes(block_values)
    eth = mac_bytes(ep.dst_mac) + mac_bytes(ep.src_mac) + b"\x08\x00"
    ip_wo_csum = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        IPV4_BYTES + UDP_BYTES + payload,
        0,
        0x4000,
        64,
        17,
        0,
        ip_bytes(ep.src_ip),
        ip_bytes(ep.dst_ip),
    )
    csum = ipv4_checksum(ip_wo_csum)
    ip = ip_wo_csum[:10] + struct.pack("!H", csum) + ip_wo_csum[12:]
    udp = struct.pack("!HHHH", ep.src_port, ep.dst_port, UDP_BYTES + payload, 0)
    return eth + ip + udp


def build_frame(
    ep: Endpoints,
    header: Header,
    values: np.ndarray | None = None,
    *,
    fingerprint: tuple[int, int] | None = None,
    contributors: int | None = None,
    block_values: int | None = None,
) -> bytes:
    """One complete frame (tests, tools). The data path uses templates + pack_headers.

    At most one extension: `values` (DATA, RESULT of a data round: a block of any K
    1..MAX_BLOCK_VALUES, exactly `block_values` when given), `fingerprint` (min, max)
    (ANNOUNCE, RESULT of an announce round) or `contributors` (STATUS); or `fingerprint`
    and then `values`, where an ANNOUNCE carries a block after its range
    (wire.announce_carries_block).
    """
    given = [x is not None for x in (values, fingerprint, contributors)]
    if sum(given) > 1 and given != [True, True, False]:
        raise ProtocolError(
            "a frame carries at most one of values, fingerprint, contributors (or a "
            "fingerprint and values)"
        )
    body = encode_header(header)
    extension = Extension.NONE
    if values is not None:
        values = np.asarray(values)
        k = values.shape[0] if values.ndim == 1 else -1
        if values.ndim != 1 or not 1 <= k <= MAX_BLOCK_VALUES:
            raise ProtocolError(
                f"values must be one block of 1..{MAX_BLOCK_VALUES} values, got shape "
                f"{values.shape}"
            )
        if block_values is not None and k != block_values:
            raise ProtocolError(f"values must have shape ({block_values},), got {values.shape}")
        extension = Extension.VALUES
    if fingerprint is not None:  # before the values, where both are given
        for f, v in zip(FINGERPRINT_FIELDS, fingerprint):
            _check_extension_field(f, v)
        body += struct.pack("!II", *fingerprint)
        extension = Extension.FINGERPRINT
    if values is not None:
        body += np.asarray(values, dtype=np.int64).astype(VALUES_DTYPE).tobytes()
    if contributors is not None:
        _check_extension_field(STATUS_FIELDS[0], contributors)
        body += struct.pack("!I", contributors)
        extension = Extension.STATUS
    k = len(values) if values is not None else BLOCK_VALUES
    both = values is not None and fingerprint is not None  # the range, then a block
    return l2_l4_template(ep, extension, k, announce_block=both) + body


def _check_extension_field(f: Field, value: int) -> None:
    if not 0 <= int(value) < 1 << f.bits:
        raise ProtocolError(f"field {f.name}={value} out of range 0..{(1 << f.bits) - 1}")


class Frame(NamedTuple):
    src_mac: bytes
    dst_mac: bytes
    src_ip: bytes
    dst_ip: bytes
    src_port: int
    dst_port: int
    header: Header
    values: np.ndarray | None
    fingerprint: tuple[int, int] | None = None  # (min, max)
    contributors: int | None = None


def carries_values(msg_type, block, extension):
    """Whether a message's bytes after the header are a block's values: a DATA's always,
    a RESULT's when it answers a data round (its block is not END_OF_STREAM), a SKIP's
    when it has any (a job whose SKIPs carry a block: wire.skip_carries_values); a
    REWIND's as a RESULT's (the switch's: the completed round's sums) or as a SKIP's (a
    rank's request: K zeros), never when it is a fingerprint; a silent job's closing
    RESULT (block END_OF_STREAM) when it kept the K zeros of the SKIPs it was made from. Written
    with & and | so that one rule serves a frame (ints: a bool) and a batch's columns
    (numpy arrays: a mask). It reads `block` only as END_OF_STREAM or not: framing.parse_batch
    evaluates it once per job for every message type and both kinds of block, and looks a
    batch's rows up in that table."""
    rewind = msg_type == MSG.REWIND
    sums = (msg_type == MSG.RESULT) | rewind
    return (msg_type == MSG.DATA) | (
        (extension != 0)
        & (
            (sums & (block != END_OF_STREAM))
            | (sums & (extension > FINGERPRINT_BYTES))  # a closing RESULT made from K zeros
            | (msg_type == MSG.SKIP)
            | (rewind & (extension != FINGERPRINT_BYTES))
        )
    )


# The members of MsgType, Extension and Flag as plain ints, for numpy: an array compared
# with (or filled from) an IntEnum member is slower than with a plain int (numpy takes an
# int subclass through its generic scalar conversion on every call), and the data path
# makes dozens of such calls per receive batch (carries_values, the engines' result
# handling, the frame builder)
MSG = SimpleNamespace(**{name: int(m) for name, m in MsgType.__members__.items()})
EXT = SimpleNamespace(**{name: int(m) for name, m in Extension.__members__.items()})
FLAG = SimpleNamespace(**{name: int(m) for name, m in Flag.__members__.items()})


# what may follow the header of each message besides values (docs/protocol.md section 2)
_OTHER_EXTENSIONS = {
    MsgType.ANNOUNCE: (Extension.FINGERPRINT,),
    MsgType.DATA: (),
    MsgType.SKIP: (Extension.NONE,),
    MsgType.STATUS: (Extension.STATUS,),
    MsgType.RESULT: (Extension.FINGERPRINT, Extension.NONE),
    MsgType.REWIND: (Extension.FINGERPRINT, Extension.NONE),
}
_NOT_VALUES = (Extension.NONE, Extension.STATUS, Extension.FINGERPRINT)


def extension_kind(
    msg_type: int, block: int, extension: int, block_values: int | None = None
) -> Extension:
    """What the `extension` bytes after a header are, from the message: DATA carries
    values, ANNOUNCE a fingerprint, SKIP nothing (or, in a job of more than
    SKIP_GROWS_TO_VALUES values per block, a block of zeros the switch ignores), STATUS its
    bitmap; a RESULT carries the round's sums (a data round: its block is not
    END_OF_STREAM), the fingerprint range (an announce round) or nothing. Values are the
    job's K int32 (`block_values`), so a K of 1 or 2 is not taken for a STATUS or a
    fingerprint; None: any whole number 1..MAX of them where the length is no other layout
    of the message. ProtocolError when the length fits
    no layout of the message."""
    carries = bool(carries_values(msg_type, block, extension))
    if msg_type == MsgType.SKIP and carries and block_values is not None:
        if not skip_carries_values(block_values):
            raise ProtocolError(
                f"SKIP message with {extension} bytes after the header in a job of "
                f"{block_values} values per block (its SKIPs are header only)"
            )
    if carries and block_values is not None and extension == values_bytes(block_values):
        return Extension.VALUES
    if _fingerprint_and_block(msg_type, extension, block_values):
        return Extension.FINGERPRINT
    for kind in _OTHER_EXTENSIONS.get(msg_type, _NOT_VALUES):  # unknown types: by length
        if EXTENSION_BYTES[kind] == extension:
            return kind
    if carries and block_values is None and extension % 4 == 0:
        if 1 <= extension // 4 <= MAX_BLOCK_VALUES:
            return Extension.VALUES
    if carries:
        want = "4 K bytes" if block_values is None else f"{values_bytes(block_values)} bytes"
        raise ProtocolError(
            f"{_with(msg_type, extension, block_values)} after the header (values: {want})"
        )
    raise ProtocolError(f"{_with(msg_type, extension, block_values)} after the header")


def _fingerprint_and_block(msg_type: int, extension: int, block_values: int | None) -> bool:
    """Whether `extension` bytes are a fingerprint range followed by a block of the job's
    size: an ANNOUNCE in the leaf role of silent rounds above SKIP_GROWS_TO_VALUES values
    per block (wire.announce_carries_block), and the announce or rewind round's RESULTs
    (and REWINDs) made from one. Read as the range: the block is ignored."""
    return (
        block_values is not None
        and skip_carries_values(block_values)
        and msg_type in (MsgType.ANNOUNCE, MsgType.RESULT, MsgType.REWIND)
        and extension == FINGERPRINT_BYTES + values_bytes(block_values)
    )


def type_name(msg_type: int) -> str:
    """A message type's name, or its number where it names none (a forged frame's)."""
    return MsgType(msg_type).name if msg_type in iter(MsgType) else f"msg_type {msg_type}"


def frame_text(f: Frame) -> str:
    """One line on a parsed frame, for people reading a run: its header field by field
    and what it carries (a test's difference, a fabric's frame trace)."""
    h = f.header
    if f.fingerprint is not None:
        carries = f" fingerprint {f.fingerprint[0]:#x}..{f.fingerprint[1]:#x}"
    elif f.contributors is not None:
        carries = f" contributors {f.contributors:#x}"
    elif f.values is not None:
        carries = f" values[0] {int(f.values[0])}" if f.values.size else " values"
    else:
        carries = ""
    flags = Flag(h.flags).name or 0
    return (
        f"{type_name(h.msg_type)} job {h.job} slot {h.slot} version {h.slot_version} "
        f"rank {h.rank} block {h.block} next {h.next_block} flags {flags}{carries}"
    )


def _with(msg_type: int, extension: int, block_values: int | None) -> str:
    """The start of a layout error: `DATA message with none`, `... with 12 bytes`."""
    name = type_name(msg_type)
    what = {EXTENSION_BYTES[k]: k.name.lower() for k in _NOT_VALUES}.get(extension)
    if block_values and extension == values_bytes(block_values):
        what = "values"
    return f"{name} message with {what or f'{extension} bytes'}"


def parse_frame(frame: bytes, block_values: int | None = None) -> Frame:
    """Parse and check a p4reduce frame; ProtocolError names what is wrong. Values are a
    block of `block_values` (the job's K) or, when None, of as many as the frame carries."""
    n = len(frame)
    if n < L2_L4_BYTES:
        raise ProtocolError(f"truncated frame: {n} bytes, Ethernet/IPv4/UDP need {L2_L4_BYTES}")
    if frame[12:14] != b"\x08\x00":
        raise ProtocolError(f"field ether_type=0x{frame[12:14].hex()} is not IPv4")
    if frame[14] != 0x45:
        raise ProtocolError(f"field ipv4 version/ihl=0x{frame[14]:02x}, expected 0x45")
    if frame[23] != 17:
        raise ProtocolError(f"field ipv4 protocol={frame[23]} is not UDP")
    src_port, dst_port, udp_len = struct.unpack_from("!HHH", frame, 34)
    if dst_port & UDP_PORT_MASK != UDP_PORT_BASE:
        raise ProtocolError(f"field udp dst_port={dst_port} not a p4reduce port")
    header = decode_header(frame, P4R_OFFSET)
    extension = udp_len - UDP_BYTES - HEADER_BYTES
    if extension < 0:
        raise ProtocolError(f"field udp length={udp_len}: shorter than the p4reduce header")
    try:
        kind = extension_kind(header.msg_type, header.block, extension, block_values)
    except ProtocolError as e:
        raise ProtocolError(f"{e} (udp length {udp_len})") from None
    if n < EXTENSION_OFFSET + extension:
        raise ProtocolError(
            f"truncated frame: {n} bytes, udp length {udp_len} needs {EXTENSION_OFFSET + extension}"
        )
    values = fingerprint = contributors = None
    if kind == Extension.VALUES:
        values = np.frombuffer(
            frame, dtype=VALUES_DTYPE, count=extension // 4, offset=EXTENSION_OFFSET
        ).astype(np.int32)
    elif kind == Extension.FINGERPRINT:
        fingerprint = struct.unpack_from("!II", frame, EXTENSION_OFFSET)
    elif kind == Extension.STATUS:
        (contributors,) = struct.unpack_from("!I", frame, EXTENSION_OFFSET)
    return Frame(
        frame[6:12],
        frame[0:6],
        frame[26:30],
        frame[30:34],
        src_port,
        dst_port,
        header,
        values,
        fingerprint,
        contributors,
    )


# ---------------------------------------------------------------------------------------
# Fingerprint: what a rank reduces (docs/protocol.md section 3)


class DtypeCode(IntEnum):
    """How the switch sees a tensor's elements (the low 2 bits of a fingerprint).

    NONFINITE is no dtype: a rank whose float tensor cannot be encoded (NaN, Inf, |x| >
    2^127) still takes part in the call, announcing its length with this code and no
    values. No other rank announces it, so the fingerprint range differs and every rank
    raises: no rank waits for the refused one, and none is left a call behind (which
    would pair its next tensor with the others' current one)."""

    INT32 = 0
    FLOAT32 = 1
    FLOAT64 = 2
    NONFINITE = 3


# a fingerprint holds 30 bits of length: 2^24 blocks of 64 values, and the most any tensor
# has, whatever its job's block size
MAX_ELEMENTS = (1 << 30) - 1
_DTYPE_CODES = {
    np.dtype(np.int32): DtypeCode.INT32,
    np.dtype(np.float32): DtypeCode.FLOAT32,
    np.dtype(np.float64): DtypeCode.FLOAT64,
}


def fingerprint(dtype: np.dtype, elements: int) -> int:
    """The exact (never hashed) 32-bit fingerprint: elements << 2 | dtype code. Exact, so two
    ranks that reduce different things can never look alike."""
    dt = np.dtype(dtype)
    if dt not in _DTYPE_CODES:
        raise ValueError(f"dtype {dt} has no p4reduce encoding")
    if not 0 <= elements <= MAX_ELEMENTS:
        raise ValueError(f"{elements} elements: at most {MAX_ELEMENTS} fit a fingerprint")
    return (int(elements) << 2) | int(_DTYPE_CODES[dt])


def nonfinite_fingerprint(elements: int) -> int:
    """The fingerprint of a rank whose float tensor of `elements` values holds NaN/Inf."""
    if not 0 <= elements <= MAX_ELEMENTS:
        raise ValueError(f"{elements} elements: at most {MAX_ELEMENTS} fit a fingerprint")
    return (int(elements) << 2) | int(DtypeCode.NONFINITE)


def describe_fingerprint(fp: int) -> tuple[str, int]:
    """(dtype name, elements) of a fingerprint."""
    return DtypeCode(fp & 3).name.lower(), fp >> 2


def fingerprint_disagreement(low: int, high: int) -> str:
    """What two fingerprints (the switch's minimum and maximum) disagree on, in words."""
    (d0, n0), (d1, n1) = describe_fingerprint(low), describe_fingerprint(high)
    parts = []
    if "nonfinite" in (d0, d1):
        parts.append(
            "a rank's float tensor holds NaN or Inf (or |x| > 2^127), which the "
            "protocol cannot carry"
        )
    elif d0 != d1:
        parts.append(f"dtype {d0} vs {d1}")
    if n0 != n1:
        parts.append(f"length {n0} vs {n1} elements")
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------
# scapy layer, generated from the same field table (tests, debugging, captures)


def _scapy_layers():
    from scapy.fields import (
        BitEnumField,
        BitField,
        FieldListField,
        FlagsField,
        SignedIntField,
    )
    from scapy.layers.inet import UDP
    from scapy.packet import Packet, bind_layers

    # Fields shown by name, from the wire module's own tables (MsgType, Flag), so a
    # dissected packet prints `msg_type=DATA flags=RETRANSMIT+CONTINUED`; a flag bit the
    # table does not name shows as bit_N.
    named = {
        "msg_type": lambda f: BitEnumField(f.name, 0, f.bits, MsgType),
        "flags": lambda f: FlagsField(f.name, 0, f.bits, {int(x): x.name for x in Flag}),
    }

    def bits(fields: tuple[Field, ...]) -> list:
        """scapy fields in wire order and width, generated from a field table."""
        return [
            named[f.name](f)
            if f.name in named
            else BitField(f.name, PROTOCOL_VERSION if f.name == "protocol" else 0, f.bits)
            for f in fields
        ]

    class P4Reduce(Packet):
        name = "p4reduce"
        fields_desc = bits(FIELDS)

        def guess_payload_class(self, payload: bytes):
            n = len(payload)
            if n >= 4 and carries_values(self.msg_type, self.block, n):  # the job's K values
                return P4ReduceValues
            fingerprinted = (MsgType.ANNOUNCE, MsgType.RESULT, MsgType.REWIND)
            if self.msg_type in fingerprinted and n >= FINGERPRINT_BYTES:
                return P4ReduceFingerprint
            if self.msg_type == MsgType.STATUS and n >= STATUS_BYTES:
                return P4ReduceStatus
            return super().guess_payload_class(payload)

    class _Extension(Packet):
        def extract_padding(self, s: bytes):
            return b"", s

    class P4ReduceValues(_Extension):
        name = "p4reduce values"
        fields_desc = [
            # no count: the values fill the UDP payload (a job's K is its own); scapy
            # stops a list at conf.max_list_count (100) unless told its own limit
            FieldListField(
                "values", [0] * BLOCK_VALUES, SignedIntField("v", 0), max_count=MAX_BLOCK_VALUES
            )
        ]

    class P4ReduceFingerprint(_Extension):
        name = "p4reduce fingerprint"
        fields_desc = bits(FINGERPRINT_FIELDS)

    class P4ReduceStatus(_Extension):
        name = "p4reduce status"
        fields_desc = bits(STATUS_FIELDS)

    for port in UDP_PORTS:
        bind_layers(UDP, P4Reduce, dport=port)
    return P4Reduce, P4ReduceValues, P4ReduceFingerprint, P4ReduceStatus


def scapy_layers():
    """(P4Reduce, P4ReduceValues, P4ReduceFingerprint, P4ReduceStatus) scapy classes, bound
    to the p4reduce UDP ports.

    Lazy so the data path never imports scapy.
    """
    global _SCAPY
    if _SCAPY is None:
        _SCAPY = _scapy_layers()
    return _SCAPY


_SCAPY = None
