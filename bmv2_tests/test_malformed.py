"""Malformed p4reduce frames are dropped and counted; the switch keeps working."""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.protocol import MsgType

BLOCK_VALUES = p.BLOCK_VALUES


def _ipv4(frame: bytearray, **changes: int) -> bytes:
    """The frame with IPv4 header bytes changed ({offset in the IPv4 header: value}) and
    its checksum made right again, so only the change itself is wrong."""
    for off, value in changes.items():
        frame[14 + int(off[1:])] = value
    frame[24:26] = b"\0\0"
    frame[24:26] = p.ipv4_checksum(bytes(frame[14:34])).to_bytes(2, "big")
    return bytes(frame)


def _lengths(frame: bytes, ipv4_delta: int = 0, udp_delta: int = 0) -> bytes:
    f = bytearray(frame)
    ip_len = int.from_bytes(f[16:18], "big") + ipv4_delta
    udp_len = int.from_bytes(f[38:40], "big") + udp_delta
    f[16:18] = ip_len.to_bytes(2, "big")
    f[38:40] = udp_len.to_bytes(2, "big")
    return _ipv4(f)


def _bad_frames(job):
    data = job.frame(0, MsgType.DATA, version=1, block=0, values=np.ones(BLOCK_VALUES))
    announce = job.frame(0, MsgType.ANNOUNCE, next_block=0)
    skip = job.frame(0, MsgType.SKIP, version=1, block=0)
    bad_csum = bytearray(announce)
    bad_csum[24] ^= 0xFF
    bad_version = bytearray(announce)
    bad_version[p.P4R_OFFSET] = (1 << 4) | MsgType.ANNOUNCE
    bad_type = bytearray(announce)
    bad_type[p.P4R_OFFSET] = (p.PROTOCOL_VERSION << 4) | MsgType.RESULT
    wide_next = bytearray(announce)
    wide_next[p.P4R_OFFSET + 16] = 0x01
    wide_block = bytearray(skip)
    wide_block[p.P4R_OFFSET + 12] = 0x01
    return {
        "truncated values": data[:100],
        "truncated header": announce[:50],
        "truncated fingerprint": _lengths(announce[:-8], -8, -8),
        "bad ipv4 checksum": bytes(bad_csum),
        "protocol 1": bytes(bad_version),
        "RESULT from a worker": bytes(bad_type),
        "next_block over 24 bits": bytes(wide_next),
        "block over 24 bits": bytes(wide_block),
        "ipv4 version 6": _ipv4(bytearray(announce), b0=0x65),
        "ipv4 first fragment": _ipv4(bytearray(announce), b6=0x20),
        "ipv4 later fragment": _ipv4(bytearray(announce), b7=0x08),
        "ipv4 options": _ipv4(bytearray(announce + b"\0\0\0\0"), b0=0x46),
        "trailing bytes": data + b"\xaa" * 40,
        "ipv4 length too long": _lengths(data, ipv4_delta=4),
        "udp length too short": _lengths(skip, udp_delta=-2),
        "lengths of a DATA on a SKIP": _lengths(
            skip + bytes(4 * BLOCK_VALUES), 4 * BLOCK_VALUES, 4 * BLOCK_VALUES
        ),
    }


CASES = [
    "truncated values",
    "truncated header",
    "truncated fingerprint",
    "bad ipv4 checksum",
    "protocol 1",
    "RESULT from a worker",
    "next_block over 24 bits",
    "block over 24 bits",
    "ipv4 version 6",
    "ipv4 first fragment",
    "ipv4 later fragment",
    "ipv4 options",
    "trailing bytes",
    "ipv4 length too long",
    "udp length too short",
    "lengths of a DATA on a SKIP",
]


@pytest.mark.parametrize("case", CASES)
def test_malformed_frame_is_dropped_and_counted(switch, case):
    job = switch.add_job(job=40, n=1)
    before = switch.switch_stats()["drops_malformed"]
    job.send_frame(0, _bad_frames(job)[case])
    job.assert_silent()
    assert switch.switch_stats()["drops_malformed"] == before + 1
    # and the switch still aggregates
    job.send(0, MsgType.ANNOUNCE, next_block=0)
    assert job.result(0) is not None
