"""PacketIn / PacketOut <-> frames (PI packet_io_mgr.cpp).

The controller headers are the P4Info's ``packet_in`` / ``packet_out`` controller packet
metadata (``p4reduce.p4rt.PacketHeaderCodec``): a PacketOut gets its header prepended before the
frame enters at the CPU port; a frame that leaves on the CPU port has its header stripped
and becomes a PacketIn.  Without such a header the payload passes as is.
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from p4reduce.p4rt import CodecError

from .state import Pipeline


def packet_in_message(pl: Pipeline | None, frame: bytes) -> p4runtime_pb2.PacketIn | None:
    """The PacketIn for a frame sent to the CPU port; None when it is shorter than the
    packet_in header (PI drops it silently)."""
    msg = p4runtime_pb2.PacketIn()
    codec = pl.info.packet_in if pl is not None else None
    if codec is None:
        msg.payload = frame
        return msg
    decoded = codec.decode(frame)
    if decoded is None:
        return None
    metadata, payload = decoded
    msg.payload = payload
    for mid, value in metadata:
        msg.metadata.add(metadata_id=mid, value=value)
    return msg


def packet_out_frame(pl: Pipeline, packet: p4runtime_pb2.PacketOut) -> bytes:
    """The frame a PacketOut injects at the CPU port; raises CodecError for metadata the
    P4Info does not allow (unknown id, value too wide, metadata without a header)."""
    codec = pl.info.packet_out
    if codec is not None:
        return codec.encode([(m.metadata_id, m.value) for m in packet.metadata], packet.payload)
    if len(packet.metadata) > 0:
        raise CodecError("Unexpected metadata in PacketOut message")
    return bytes(packet.payload)
