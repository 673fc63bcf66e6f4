"""Malformed p4reduce frames are dropped and counted; the switch keeps working."""
from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.protocol import MsgType

LANES = p.LANES


def _bad_frames(job):
    data = job.frame(0, MsgType.DATA, version=1, block=0, values=np.ones(LANES))
    announce = job.frame(0, MsgType.ANNOUNCE, next_block=0)
    bad_csum = bytearray(announce)
    bad_csum[24] ^= 0xFF
    bad_version = bytearray(announce)
    bad_version[p.P4R_OFFSET] = (2 << 4) | MsgType.ANNOUNCE
    bad_type = bytearray(announce)
    bad_type[p.P4R_OFFSET] = (1 << 4) | MsgType.RESULT
    wide_next = bytearray(announce)
    wide_next[p.P4R_OFFSET + 12] = 0x01
    return {"truncated values": data[:100], "truncated header": announce[:50],
            "bad ipv4 checksum": bytes(bad_csum), "protocol 2": bytes(bad_version),
            "RESULT from a worker": bytes(bad_type), "next_block over 24 bits": bytes(wide_next)}


@pytest.mark.parametrize("case", ["truncated values", "truncated header", "bad ipv4 checksum",
                                  "protocol 2", "RESULT from a worker",
                                  "next_block over 24 bits"])
def test_malformed_frame_is_dropped_and_counted(switch, case):
    job = switch.add_job(job=40, n=1)
    before = switch.switch_stats()["drops_malformed"]
    job.send_frame(0, _bad_frames(job)[case])
    job.assert_silent()
    assert switch.switch_stats()["drops_malformed"] == before + 1
    # and the switch still aggregates
    job.send(0, MsgType.ANNOUNCE, next_block=0)
    assert job.result(0) is not None
