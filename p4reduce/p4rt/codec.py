"""P4Runtime's byte strings: the one encoder and decoder of integers for every P4Runtime
value (match fields, action parameters, counter data, packet metadata).

Used by the controller (what it sends), by softswitch (what it accepts and returns) and by
the tests, so all three agree on one encoding. The rules are PI's (p4lang/PI
proto/frontend/src/common.cpp), which simple_switch_grpc runs:

* `encode`: the canonical P4Runtime 1.4 form, leading zero bytes stripped and zero as the
  single byte b"\\x00" (PI's bytestring_pi_to_p4rt); with a bit width, a value that does not
  fit is refused before anything is sent, naming the field;
* `decode`: shorter than the field is fine (zero-padded), longer is fine as long as the
  extra leading bits are zero; a value wider than the field is "Bytestring provided does
  not fit within N bits" (PI's message, which softswitch returns as INVALID_ARGUMENT).

Only the standard library and the p4runtime protos: the controller, softswitch and tests
import this without the rest of either.
"""

from __future__ import annotations

from dataclasses import dataclass


class P4InfoError(ValueError):
    """The P4Info cannot serve a request: it is invalid (PI: "Error when importing p4info"),
    it has no object of that name, or a value does not fit the field it is for. The message
    names the object and the field."""


class CodecError(P4InfoError):
    """A value or byte string that does not fit the P4Info width of its field."""


def nbytes(bitwidth: int) -> int:
    """Bytes of a field of `bitwidth` bits."""
    return (bitwidth + 7) // 8


def encode(value: int, bitwidth: int | None = None, what: str = "value") -> bytes:
    """Canonical P4Runtime byte string of a non-negative integer (0 -> b'\\x00'); with
    `bitwidth`, CodecError naming `what` when the value does not fit."""
    value = int(value)
    if value < 0:
        raise CodecError(f"{what}={value}: a negative value cannot be encoded")
    if bitwidth is not None and value >> bitwidth:
        raise CodecError(f"{what}={value} does not fit in {bitwidth} bits")
    if value == 0:
        return b"\x00"
    return value.to_bytes(nbytes(value.bit_length()), "big")


def decode(data: bytes, bitwidth: int | None = None) -> int:
    """The integer of a P4Runtime byte string, accepting what PI accepts; with `bitwidth`,
    CodecError (PI's message) when it does not fit."""
    value = int.from_bytes(data, "big") if data else 0
    if bitwidth is not None and value >> bitwidth:
        raise CodecError(f"Bytestring provided does not fit within {bitwidth} bits")
    return value


@dataclass(frozen=True)
class PacketMetadataInfo:
    id: int
    name: str
    bitwidth: int


class PacketHeaderCodec:
    """The packet_in / packet_out controller header, serialised as bmv2 and PI do.

    The header is the metadata fields packed MSB first in P4Info order, rounded up to whole
    bytes with zero bits at the end (PI packet_io_mgr.cpp generic_extract / generic_deparse).
    It is prepended to a PacketOut payload before the frame enters the pipeline at the CPU
    port, and stripped from a frame the pipeline sends to the CPU port.
    """

    def __init__(self, fields: list[PacketMetadataInfo]) -> None:
        self.fields = list(fields)
        self.total_bits = sum(f.bitwidth for f in self.fields)
        self.nbytes = nbytes(self.total_bits)
        self._by_id = {f.id: i for i, f in enumerate(self.fields)}

    def decode(self, frame: bytes) -> tuple[list[tuple[int, bytes]], bytes] | None:
        """(metadata [(id, canonical bytes)], payload), or None if the frame is too short
        (PI silently drops such a packet-in)."""
        if len(frame) < self.nbytes:
            return None
        header = int.from_bytes(frame[: self.nbytes], "big")
        offset = 0
        metadata = []
        for f in self.fields:
            shift = self.nbytes * 8 - offset - f.bitwidth
            value = (header >> shift) & ((1 << f.bitwidth) - 1)
            metadata.append((f.id, encode(value)))
            offset += f.bitwidth
        return metadata, frame[self.nbytes :]

    def encode(self, metadata: list[tuple[int, bytes]], payload: bytes) -> bytes:
        """Header + payload.  Unknown metadata id or a too-wide value raises CodecError;
        a missing field is sent as zero (PI does the same, see the TODO in packet_io_mgr.cpp)."""
        values = [0] * len(self.fields)
        for mid, raw in metadata:
            idx = self._by_id.get(mid)
            if idx is None:
                raise CodecError("Unknown metadata id in PacketOut message")
            values[idx] = decode(raw, self.fields[idx].bitwidth)
        header = 0
        offset = 0
        for f, v in zip(self.fields, values):
            header |= v << (self.nbytes * 8 - offset - f.bitwidth)
            offset += f.bitwidth
        return (header.to_bytes(self.nbytes, "big") if self.nbytes else b"") + payload
