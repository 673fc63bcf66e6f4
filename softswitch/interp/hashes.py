"""Hash / checksum algorithms exactly as bmv2 computes them (src/bm_sim/calculations.cpp).

Only these are implemented; any other algorithm named in the JSON is refused at load time.
"""

from __future__ import annotations

import binascii
import sys
import zlib
from typing import Callable


def _crc16_arc_table() -> list[int]:
    # bmv2 'crc16': reflected CRC-16 with poly 0x8005, init 0, xorout 0 (CRC-16/ARC).
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC16_TABLE = _crc16_arc_table()
_LITTLE = sys.byteorder == "little"


def crc16(data: bytes) -> int:
    crc = 0
    t = _CRC16_TABLE
    for b in data:
        crc = (crc >> 8) ^ t[(crc ^ b) & 0xFF]
    return crc


def crc32(data: bytes) -> int:
    # bmv2 'crc32' is the standard reflected CRC-32 (init/xorout 0xFFFFFFFF) == zlib.crc32.
    return zlib.crc32(data) & 0xFFFFFFFF


def crc_ccitt(data: bytes) -> int:
    # bmv2 'crcCCITT': poly 0x1021, init 0xFFFF, not reflected, xorout 0 (CCITT-FALSE).
    return binascii.crc_hqx(data, 0xFFFF)


def _fold(data: bytes) -> int:
    # Ones' complement sums are byte-order independent (RFC 1071 sec. 2B): sum native
    # words with C speed, fold, then swap to network order on little-endian hosts.
    total = sum(memoryview(data).cast("H"))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    if _LITTLE:
        total = ((total & 0xFF) << 8) | (total >> 8)
    return (~total) & 0xFFFF


def csum16_full(data: bytes) -> int:
    """RFC 1071 ones' complement checksum; an odd trailing byte is padded with zero, as in
    bmv2's cksum16 (which sums little-endian words and byte-swaps at the end)."""
    if len(data) & 1:
        data = data + b"\x00"
    if not data:
        return 0xFFFF
    return _fold(data)


def csum16_of_int(value: int, nbits: int) -> int:
    """csum16_full of the `nbits`-bit string `value` (MSB first), without building its
    bytes: big-endian 16-bit words w_i make value * 2^pad = sum w_i * 2^(16 i), and
    2^16 = 1 (mod 0xFFFF), so the words' ones' complement sum is that residue (0xFFFF
    for a non-zero multiple of 0xFFFF: folding never yields 0 from a non-zero sum; 0 for
    an all-zero string, whose checksum is then 0xFFFF, as csum16_full's). So any
    non-negative `value` congruent to the string's integer mod 0xFFFF, and zero exactly
    when it is, gives the same checksum (ON_RESIDUE)."""
    v = value << (-nbits % 16)
    if not v:
        return 0xFFFF
    r = v % 0xFFFF
    return 0xFFFF - r if r else 0


def identity(data: bytes) -> int:
    """bmv2 'identity': the first (up to) 8 bytes read as a big-endian integer."""
    return int.from_bytes(data[:8], "big")


ALGORITHMS: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16,
    "crc32": crc32,
    "crcCCITT": crc_ccitt,
    "csum16": csum16_full,
    "cksum16": csum16_full,
    "identity": identity,
}

# Algorithms that have a form over the input as an integer (value, bits) that depends on
# the value only through its residue mod 0xFFFF and whether it is zero: a calculation
# without payload hands them a sum congruent to its input's integer (calc.py), instead of
# building the input's bytes or integer.
ON_RESIDUE: dict[str, Callable[[int, int], int]] = {
    "csum16": csum16_of_int,
    "cksum16": csum16_of_int,
}
