"""The p4reduce wire format's constants and field table, without numpy.

Why a module of its own: the controller needs the UDP ports, the limits (MAX_WORKERS,
MAX_EPOCH), the protocol version and the descriptor's address types, and must not pull in
the worker's data path (numpy, the engine, the Worker) to get them. Everything here is
plain Python; `hostlib.protocol` builds the numpy and scapy codecs from the same `FIELDS`
and re-exports every name defined here, so `protocol.X` keeps working for the data path.

Everything is big-endian, like every network header. docs/protocol.md is the specification.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from enum import IntEnum, IntFlag

PROTOCOL_VERSION = 2
# K, the int32 values per block (= per DATA packet), is a job's (JobConfig.block_values);
# BLOCK_VALUES is a job's unless its creator names another, and the only size of a program
# whose switch cannot take others (p4reduce.target.Target.block_sizes)
BLOCK_VALUES = 64
VALUE_BYTES = 4 * BLOCK_VALUES  # of a block of BLOCK_VALUES; values_bytes(k) for any K
# the largest K any switch program could carry: its DATA frame, an IPv4 packet of 48 + 4 K
# bytes, stays within IPv4's total length (65 535; K <= 16 371) and a veth's largest MTU
MAX_BLOCK_VALUES = 16_000
HEADER_BYTES = 20
FINGERPRINT_BYTES = 8  # ANNOUNCE and its RESULT: fingerprint_min, fingerprint_max
STATUS_BYTES = 4  # STATUS: contributors
UDP_PORT_BASE = 0x5030  # destination ports 0x5030..0x503F carry p4reduce
UDP_PORT_MASK = 0xFFF0
UDP_PORTS = range(UDP_PORT_BASE, UDP_PORT_BASE + 16)
END_OF_STREAM = 0x00FFFFFF  # next_block that ends a slot; block of the announce round
MAX_BLOCK = END_OF_STREAM - 1
EXPONENT_BIAS = 128  # next_exponent = e + 128, 2^e >= max |x| of the block
MAX_WORKERS = 32  # width of the switch's contributor bitmap
# a job across a fabric (p4reduce.fabric): MAX_WORKERS ranks per leaf on at most MAX_LEAVES
# leaves, the spine's bitmap counting leaves
MAX_LEAVES = 32
MAX_JOB_RANKS = MAX_WORKERS * MAX_LEAVES
MAX_EPOCH = (1 << 31) - 1  # epochs 1..2^31-1; the switch marks lost slots with bit 31

ETH_BYTES = 14
IPV4_BYTES = 20
UDP_BYTES = 8
L2_L4_BYTES = ETH_BYTES + IPV4_BYTES + UDP_BYTES  # 42
P4R_OFFSET = L2_L4_BYTES  # header starts here in a frame
EXTENSION_OFFSET = P4R_OFFSET + HEADER_BYTES  # 62: values, fingerprint or status
FRAME_BYTES_HEADER_ONLY = EXTENSION_OFFSET  # 62
FRAME_BYTES_WITH_VALUES = EXTENSION_OFFSET + VALUE_BYTES  # 318
FRAME_BYTES_WITH_FINGERPRINT = EXTENSION_OFFSET + FINGERPRINT_BYTES  # 70
FRAME_BYTES_WITH_STATUS = EXTENSION_OFFSET + STATUS_BYTES  # 66


def values_bytes(block_values: int) -> int:
    """Bytes of a block's values on the wire (K int32)."""
    return 4 * block_values


def frame_bytes_with_values(block_values: int) -> int:
    """Bytes of a DATA frame (and a RESULT with values) of a job of `block_values` values
    per block, Ethernet header included (62 + 4 K; 318 at K = 64)."""
    return EXTENSION_OFFSET + values_bytes(block_values)


def frame_bytes_with_fingerprint_and_block(block_values: int) -> int:
    """Bytes of an ANNOUNCE that carries a block after its fingerprint range
    (announce_carries_block), and of the RESULTs made from one: 70 + 4 K."""
    return EXTENSION_OFFSET + FINGERPRINT_BYTES + values_bytes(block_values)


def mtu_needed(block_values: int, announce_block: bool = False) -> int:
    """The smallest interface MTU (IPv4 packet bytes) that carries a DATA frame of a job of
    `block_values` values per block: 48 + 4 K (304 at K = 64, 8 240 at 2 048, 32 816 at
    8 192, 64 048 at 16 000); 8 bytes more where its ANNOUNCEs carry a block
    (`announce_block`: announce_carries_block)."""
    if announce_block:
        return frame_bytes_with_fingerprint_and_block(block_values) - ETH_BYTES
    return frame_bytes_with_values(block_values) - ETH_BYTES


# Link MTUs: Ethernet's default, and the jumbo size Mininet links, veth pairs and common
# NICs carry; a job whose frames need more gets exactly what they need (veth: up to 65 535)
ETHERNET_MTU = 1500
JUMBO_MTU = 9000


def link_mtu(block_values: int, mtu: int = ETHERNET_MTU, announce_block: bool = False) -> int:
    """The MTU a link now at `mtu` is set to for a job of `block_values` values per block:
    kept when it carries the job's DATA frames (a link never shrinks for a job), else the
    jumbo size when that is enough, else exactly mtu_needed. The one rule for every link
    the demo, the bench and the example's ranks set, so that gloo, measured at each MTU
    p4reduce's jobs use, gets the same links (1 500 up to 256 values per block, 9 000 up
    to 2 048, then exactly 48 + 4K: 16 432 at 4 096, 32 816 at 8 192, 64 048 at 16 000;
    8 bytes more for a job whose ANNOUNCEs carry a block, `announce_block`)."""
    need = mtu_needed(block_values, announce_block)
    if need <= mtu:
        return mtu
    return JUMBO_MTU if need <= JUMBO_MTU else need


# The most values a header-only SKIP may come back as: the RESULT a completing SKIP
# becomes grows the frame by 4 K bytes, and simple_switch gives a received frame 512 bytes
# of room. A SKIP of a job of more values per block carries a block of its job's size
# (zeros: a SKIP's values are ignored), so it is already as long as the RESULT; the
# v1model program drops a header-only one (docs/protocol.md section 3), except a silent
# job's closing SKIP, whose round's RESULT carries no values.
SKIP_GROWS_TO_VALUES = 128


def skip_carries_values(block_values: int) -> bool:
    """Whether a SKIP of a job of `block_values` values per block carries a values block
    (ignored) rather than the header only; a silent job's closing SKIP never does."""
    return block_values > SKIP_GROWS_TO_VALUES


def announce_carries_block(block_values: int, leaf_role: bool) -> bool:
    """Whether a rank's ANNOUNCE carries a block of its job's size after its fingerprint
    range (zeros, ignored): in the leaf role of silent rounds (`leaf_role`) above
    SKIP_GROWS_TO_VALUES values per block. A leaf makes its empty partial, a DATA of K
    values, from the spine's RESULT of an announce or rewind round, and that RESULT is as
    long as the ANNOUNCE that completed the round: a fingerprint range alone would have to
    grow by 4 K - 8 bytes, more than simple_switch lets a received frame grow
    (docs/fabric.md, "The leaf and spine roles"). The answers made from such a packet
    keep its block after the range, and a rank reads them as the range alone."""
    return leaf_role and skip_carries_values(block_values)


class MsgType(IntEnum):
    ANNOUNCE = 1  # round 0 of a slot: header only, announces the first non-zero block
    DATA = 2  # a non-zero block: header + the job's K int32 values
    SKIP = 3  # the sender's block of this round is zero: header only
    RESULT = 4  # switch -> workers: the round's sum (unless announce round) + next block
    STATUS = 5  # switch -> worker: the round is incomplete; who has contributed
    # silent rounds only (RoundMode.SILENT): worker -> switch, "I lack the result of block
    # next_block: re-aggregate this slot from there"; switch -> workers, a RESULT whose next
    # round is a rewind round from next_block (docs/protocol.md)
    REWIND = 6


class Flag(IntFlag):
    OVERFLOW = 0x01  # an int32 partial sum of the round overflowed
    RETRANSMIT = 0x02  # worker -> switch: this is a retransmission
    CACHED = 0x04  # switch -> worker: result served from the slot by unicast
    # switch -> worker, on a STATUS only (CACHED's bit): the spine's STATUS relayed by the
    # rank's leaf (docs/fabric.md): the round is complete there, its bitmap counts leaves
    RELAYED = 0x04
    # worker -> switch, on an every-rank job's packet (CACHED's bit): a state probe
    # (hostlib's engine), which a leaf sends up to the spine even when it holds the
    # round's result (docs/protocol.md section 8)
    PROBE = 0x04
    CONTINUED = 0x08  # worker -> switch: the sender had a result on this slot in this job
    STATE_LOST = 0x10  # switch -> worker: the slot lost the job's state (switch restart)
    PACKED = 0x20  # both ways: the packet belongs to a packed-encoding job (values are
    # bias-shifted lanes the switch adds as one 2048-bit word)
    SILENT = 0x40  # both ways: the packet belongs to a job of silent rounds (RoundMode)
    # silent rounds' loss recovery, each in a direction its bit is free in (protocol.md 2):
    # worker -> switch, on a silent job's DATA (CACHED's bit): the sender holds every
    # earlier result of the slot in this call
    COVERED = 0x04
    # switch -> worker, on a silent job's RESULT (RETRANSMIT's bit): the round ended the
    # slot's call, no closing round follows
    ENDED = 0x02
    # switch -> worker, on a RESULT (CONTINUED's bit; the v1model program's): a packet of
    # the round, or a request after the round before it, was a retransmission -- the
    # round's time includes a repair, so the workers' timers do not learn from it
    REPAIRED = 0x08


class Encoding(IntEnum):
    """How a job's values travel and are added (chosen at job creation, docs/protocol.md 10).

    LANES: 64 int32 lanes, added lane by lane with overflow detection (int32 jobs; every
    target). PACKED: each lane carries q + bias (never negative, N-way sums below 2^32), and
    the switch adds the whole block as one 2048-bit word (quantized float jobs on v1model).
    """

    LANES = 0
    PACKED = 1


class RoundMode(IntEnum):
    """Who sends in a round (chosen at job creation, the job's admission entry; every packet
    of the job says it with FLAG_SILENT, like FLAG_PACKED says the encoding, so the two
    never mix in a job: a packet of the other mode is dropped and counted).

    EVERY_RANK: every rank sends one packet per slot per round (DATA, or a SKIP announcing
    its next non-zero block). SILENT: a rank sends only for its own non-zero blocks, plus
    each slot's announce round and, where some rank sat out the slot's last round, its
    closing round; the switch keeps every rank's next block and takes their minimum
    (docs/protocol.md).
    """

    EVERY_RANK = 0
    SILENT = 1


class Extension(IntEnum):
    """What follows the header in a frame (one of them at most; the layout is fixed by the
    message type: DATA values, ANNOUNCE fingerprint, STATUS status)."""

    NONE = 0
    VALUES = 1
    FINGERPRINT = 2
    STATUS = 3


EXTENSION_BYTES = {
    Extension.NONE: 0,
    Extension.VALUES: VALUE_BYTES,
    Extension.FINGERPRINT: FINGERPRINT_BYTES,
    Extension.STATUS: STATUS_BYTES,
}


class ProtocolError(ValueError):
    """Bytes or field values that are not a valid p4reduce message; says which field."""


@dataclass(frozen=True)
class Field:
    name: str
    bits: int


# The header, in wire order. Same names and widths as p4reduce_t in p4src/common/headers.p4.
FIELDS: tuple[Field, ...] = (
    Field("protocol", 4),
    Field("msg_type", 4),
    Field("slot_version", 1),
    Field("flags", 7),
    Field("job", 16),
    Field("slot", 16),
    Field("rank", 8),
    Field("next_exponent", 8),
    Field("epoch", 32),
    Field("block", 32),
    Field("next_block", 32),
)
FIELD_NAMES = tuple(f.name for f in FIELDS)

# The extensions that follow the header (fingerprint_t and round_status_t in headers.p4).
FINGERPRINT_FIELDS: tuple[Field, ...] = (Field("fingerprint_min", 32), Field("fingerprint_max", 32))
STATUS_FIELDS: tuple[Field, ...] = (Field("contributors", 32),)


def mac_bytes(mac: str | bytes) -> bytes:
    if isinstance(mac, bytes):
        if len(mac) != 6:
            raise ProtocolError(f"MAC address must be 6 bytes, got {len(mac)}")
        return mac
    parts = mac.split(":")
    if len(parts) != 6:
        raise ProtocolError(f"bad MAC address {mac!r}")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise ProtocolError(f"bad MAC address {mac!r}") from None


def ip_bytes(ip: str | bytes) -> bytes:
    if isinstance(ip, bytes):
        return ip
    try:
        return ipaddress.IPv4Address(ip).packed
    except ValueError:
        raise ProtocolError(f"bad IPv4 address {ip!r}") from None


def ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@dataclass(frozen=True)
class Endpoints:
    """Addresses of one direction of p4reduce traffic (worker -> switch or the reverse)."""

    src_mac: str
    dst_mac: str
    src_ip: str
    dst_ip: str
    src_port: int = UDP_PORT_BASE
    dst_port: int = UDP_PORT_BASE


def packed_bias(worker_count: int) -> int:
    """What a rank adds to every lane of a packed-encoding job, and the switch adds for a
    SKIP: floor(M/N), M = 2^31 - 1. Every sent lane is then in 0..2*floor(M/N) (quantized
    floats) or floor(M/N)-2^15..floor(M/N)+2^16-1 (int32 halves), so N of them sum below
    2^32 and one 2048-bit add cannot carry from one lane into the next (docs/protocol.md
    section 10). Here, without numpy, because the controller puts it in admission too."""
    return ((1 << 31) - 1) // worker_count
