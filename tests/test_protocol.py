"""The codec: round trips, field limits, malformed input, and agreement with scapy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostlib import protocol as p
from hostlib.protocol import Endpoints, Flag, Header, MsgType, ProtocolError

EP = Endpoints("02:00:00:00:00:01", "02:00:00:00:01:00", "10.0.0.1", "10.0.0.254", 0x5031, 0x5030)


def test_header_is_20_bytes_and_fields_fill_them():
    assert sum(f.bits for f in p.FIELDS) == 8 * p.HEADER_BYTES
    assert p.HEADER_DTYPE.itemsize == p.HEADER_BYTES


def test_header_bytes_are_big_endian_in_wire_order():
    h = Header.make(
        MsgType.DATA,
        job=0x0102,
        slot=0x0304,
        rank=5,
        slot_version=1,
        flags=Flag.RETRANSMIT,
        block=0x0A0B0C,
        next_block=0x0D0E0F,
        next_exponent=0x81,
        epoch=0x11223344,
    )
    raw = p.encode_header(h)
    assert raw == bytes(
        [
            0x22,
            0x82,
            0x01,
            0x02,
            0x03,
            0x04,
            0x05,
            0x81,
            0x11,
            0x22,
            0x33,
            0x44,
            0x00,
            0x0A,
            0x0B,
            0x0C,
            0x00,
            0x0D,
            0x0E,
            0x0F,
        ]
    )
    assert p.decode_header(raw) == h


@pytest.mark.parametrize(
    "field,value",
    [
        ("rank", 256),
        ("slot", 1 << 16),
        ("flags", 128),
        ("slot_version", 2),
        ("msg_type", 16),
        ("job", -1),
    ],
)
def test_out_of_range_field_is_refused_by_name(field, value):
    h = Header.make(MsgType.SKIP, job=1, slot=0, rank=0)._replace(**{field: value})
    with pytest.raises(ProtocolError, match=field):
        p.encode_header(h)


def test_batch_encode_matches_single_encode():
    rng = np.random.default_rng(1)
    n = 50
    cols = {f.name: rng.integers(0, 1 << min(f.bits, 31), n) for f in p.FIELDS}
    batch = p.pack_headers(cols).tobytes()
    for i in range(n):
        h = Header(*(int(cols[name][i]) for name in p.FIELD_NAMES))
        assert batch[20 * i : 20 * (i + 1)] == p.encode_header(h)
    back = p.unpack_headers(np.frombuffer(batch, dtype=p.HEADER_DTYPE))
    for name in p.FIELD_NAMES:
        assert np.array_equal(back[name], cols[name])


def test_frame_round_trip_with_values():
    values = np.array([(-1) ** i * (i * 1000003) for i in range(p.BLOCK_VALUES)], dtype=np.int32)
    values[0], values[1] = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    h = Header.make(MsgType.DATA, job=3, slot=1, rank=2, block=9, next_block=17, next_exponent=140)
    frame = p.build_frame(EP, h, values)
    assert len(frame) == p.FRAME_BYTES_WITH_VALUES
    parsed = p.parse_frame(frame)
    assert parsed.header == h
    assert np.array_equal(parsed.values, values)
    assert parsed.src_ip == bytes([10, 0, 0, 1]) and parsed.dst_port == 0x5030


def test_frame_agrees_with_scapy_dissection_and_checksum():
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    P4Reduce, P4ReduceValues, P4ReduceFingerprint, P4ReduceStatus = p.scapy_layers()
    values = np.arange(p.BLOCK_VALUES, dtype=np.int32) - 7
    h = Header.make(
        MsgType.DATA,
        job=300,
        slot=7,
        rank=1,
        slot_version=1,
        block=4,
        next_block=p.END_OF_STREAM,
        next_exponent=3,
    )
    frame = p.build_frame(EP, h, values)
    pkt = Ether(frame)
    assert pkt[IP].len == len(frame) - 14
    assert pkt[UDP].len == len(frame) - 34
    original = pkt[IP].chksum
    del pkt[IP].chksum
    assert Ether(bytes(pkt))[IP].chksum == original  # scapy recomputes the same
    assert {k: pkt[P4Reduce].fields[k] for k in p.FIELD_NAMES} == h._asdict()
    assert pkt[P4ReduceValues].values == list(values)
    # and scapy-built bytes parse with the fast codec
    built = bytes(
        Ether(dst=EP.dst_mac, src=EP.src_mac)
        / IP(src=EP.src_ip, dst=EP.dst_ip)
        / UDP(sport=0x5031, dport=0x5030, chksum=0)
        / P4Reduce(**h._asdict())
        / P4ReduceValues(values=list(values))
    )
    assert p.parse_frame(built).header == h
    # the extensions of ANNOUNCE / STATUS dissect the same way
    a = Header.make(MsgType.ANNOUNCE, job=3, slot=2, rank=1, epoch=9, next_block=5)
    pkt = Ether(p.build_frame(EP, a, fingerprint=(0x101, 0x202)))
    assert (pkt[P4ReduceFingerprint].fingerprint_min, pkt[P4ReduceFingerprint].fingerprint_max) == (
        0x101,
        0x202,
    )
    st = Header.make(MsgType.STATUS, job=3, slot=2, rank=1, epoch=9)
    pkt = Ether(p.build_frame(EP, st, contributors=0b1011))
    assert pkt[P4ReduceStatus].contributors == 0b1011
    assert p.parse_frame(bytes(pkt)).contributors == 0b1011


# Every layout a message type has, as the codec's build_frame arguments.
LAYOUTS = [
    (MsgType.ANNOUNCE, {"fingerprint": (0x101, 0x202)}),
    (MsgType.DATA, {"values": np.arange(p.BLOCK_VALUES, dtype=np.int32) - 31}),
    (MsgType.SKIP, {}),
    (MsgType.RESULT, {"values": np.arange(p.BLOCK_VALUES, dtype=np.int32) * -3}),
    (MsgType.RESULT, {"fingerprint": (0x303, 0x404)}),
    (MsgType.RESULT, {}),
    (MsgType.STATUS, {"contributors": 0b1011}),
]


def _scapy_extension(kwargs: dict):
    """The scapy extension layer holding the same values as build_frame's `kwargs`."""
    _, values, fingerprint, status = p.scapy_layers()
    if "values" in kwargs:
        return values(values=[int(v) for v in kwargs["values"]])
    if "fingerprint" in kwargs:
        low, high = kwargs["fingerprint"]
        return fingerprint(fingerprint_min=low, fingerprint_max=high)
    if "contributors" in kwargs:
        return status(contributors=kwargs["contributors"])
    return None


def test_scapy_shows_message_type_and_flags_by_name():
    from scapy.layers.l2 import Ether

    P4Reduce = p.scapy_layers()[0]
    h = Header.make(
        MsgType.DATA, job=3, slot=1, rank=2, flags=Flag.RETRANSMIT | Flag.CONTINUED, block=4
    )
    pkt = Ether(p.build_frame(EP, h, np.zeros(p.BLOCK_VALUES, dtype=np.int32)))[P4Reduce]
    assert "msg_type=DATA" in repr(pkt) and "flags=RETRANSMIT+CONTINUED" in repr(pkt)
    shown = pkt.show(dump=True)
    assert "msg_type  = DATA" in shown and "flags     = RETRANSMIT+CONTINUED" in shown
    # every bit of the 7 is named by the wire module's table, the newest too
    skip = h._replace(msg_type=MsgType.SKIP, flags=Flag.SILENT | Flag.PACKED)
    assert "flags=PACKED+SILENT" in repr(Ether(p.build_frame(EP, skip))[P4Reduce])


@pytest.mark.parametrize(
    "msg_type,kwargs", LAYOUTS, ids=[f"{m.name}-{sorted(k) or 'header'}" for m, k in LAYOUTS]
)
@settings(max_examples=25, deadline=None)
@given(flags=st.integers(0, 127), slot_version=st.integers(0, 1), rank=st.integers(0, 255))
def test_scapy_layer_dissects_and_builds_the_codecs_bytes(
    msg_type, kwargs, flags, slot_version, rank
):
    """Each message type: the codec's frame dissects to the message type's and flags'
    names, and scapy, given those names, builds the codec's bytes again."""
    from scapy.layers.l2 import Ether

    P4Reduce = p.scapy_layers()[0]
    h = Header.make(
        msg_type, job=300, slot=7, rank=rank, slot_version=slot_version, flags=flags, epoch=9
    )
    frame = p.build_frame(EP, h, **kwargs)
    pkt = Ether(frame)
    layer = pkt[P4Reduce]
    assert {k: layer.fields[k] for k in p.FIELD_NAMES} == h._asdict()
    assert layer.sprintf("%msg_type%") == msg_type.name
    names = [n for n in layer.sprintf("%flags%").split("+") if n]
    assert [n for n in names if not n.startswith("bit_")] == [f.name for f in Flag if f & flags]
    assert bytes(pkt) == frame
    by_name = {**h._asdict(), "msg_type": msg_type.name, "flags": "+".join(names)}
    rebuilt = P4Reduce(**by_name)
    extension = _scapy_extension(kwargs)
    if extension is not None:
        rebuilt = rebuilt / extension
    assert bytes(rebuilt) == frame[p.P4R_OFFSET :]


def test_extension_frames_round_trip_and_sizes():
    a = Header.make(MsgType.ANNOUNCE, job=3, slot=2, rank=1, next_block=5)
    f = p.build_frame(EP, a, fingerprint=(7, 9))
    assert len(f) == p.FRAME_BYTES_WITH_FINGERPRINT == 70
    assert p.parse_frame(f).fingerprint == (7, 9)
    st = p.build_frame(EP, a._replace(msg_type=MsgType.STATUS), contributors=5)
    assert len(st) == p.FRAME_BYTES_WITH_STATUS == 66
    skip = p.build_frame(EP, a._replace(msg_type=MsgType.SKIP))
    assert len(skip) == p.FRAME_BYTES_HEADER_ONLY == 62
    with pytest.raises(ProtocolError, match="ANNOUNCE message with none"):
        p.parse_frame(p.build_frame(EP, a))
    for extensions in ({"contributors": 1}, {"fingerprint": (1, 1), "contributors": 1}):
        with pytest.raises(ProtocolError, match="at most one"):
            p.build_frame(EP, a, np.zeros(64), **extensions)
    with pytest.raises(ProtocolError, match="at most one"):
        p.build_frame(EP, a, fingerprint=(1, 1), contributors=1)


def test_fingerprint_is_exact_and_describes_the_difference():
    f32 = p.fingerprint(np.float32, 1000)
    i32 = p.fingerprint(np.int32, 1000)
    assert f32 != i32 and p.describe_fingerprint(f32) == ("float32", 1000)
    assert p.fingerprint_disagreement(i32, f32) == "dtype int32 vs float32"
    assert (
        p.fingerprint_disagreement(p.fingerprint(np.float64, 5), p.fingerprint(np.float64, 6))
        == "length 5 vs 6 elements"
    )
    assert p.fingerprint(np.float64, p.MAX_ELEMENTS) < 1 << 32
    with pytest.raises(ValueError, match="int16"):
        p.fingerprint(np.int16, 3)
    # a refused float tensor: same length, a code no dtype has, always the larger one
    bad = p.nonfinite_fingerprint(1000)
    assert p.describe_fingerprint(bad) == ("nonfinite", 1000)
    assert bad > max(f32, i32, p.fingerprint(np.float64, 1000))
    assert "NaN or Inf" in p.fingerprint_disagreement(f32, bad)
    assert p.fingerprint_disagreement(p.fingerprint(np.float32, 999), bad).endswith(
        "length 999 vs 1000 elements"
    )


@pytest.mark.parametrize(
    "cut,needle",
    [(20, "truncated frame"), (50, "truncated p4reduce header"), (200, "udp length 284 needs 318")],
)
def test_truncated_frames_name_what_is_missing(cut, needle):
    h = Header.make(MsgType.DATA, job=1, slot=0, rank=0, block=0, next_block=1)
    frame = p.build_frame(EP, h, np.zeros(p.BLOCK_VALUES))
    with pytest.raises(ProtocolError, match=needle):
        p.parse_frame(frame[:cut])


def test_data_message_without_values_is_malformed():
    h = Header.make(MsgType.DATA, job=1, slot=0, rank=0, block=0, next_block=1)
    with pytest.raises(ProtocolError, match="DATA message with none after the header"):
        p.parse_frame(p.build_frame(EP, h))


def test_validate_header_names_the_field():
    h = Header.make(MsgType.RESULT, job=1, slot=0, rank=0)
    with pytest.raises(ProtocolError, match="msg_type"):
        p.validate_header(h, from_switch=False)
    p.validate_header(h, from_switch=True)
    with pytest.raises(ProtocolError, match="protocol"):
        p.validate_header(h._replace(protocol=1), from_switch=True)
    with pytest.raises(ProtocolError, match="next_block"):
        p.validate_header(h._replace(next_block=1 << 24), from_switch=True)


def test_bad_addresses_are_named():
    with pytest.raises(ProtocolError, match="MAC"):
        p.mac_bytes("02:00:00:00:00")
    with pytest.raises(ProtocolError, match="IPv4"):
        p.ip_bytes("10.0.0.300")


def test_frame_text_names_every_header_field_and_what_the_frame_carries():
    """hostlib.protocol.frame_text, the one line on a frame that a test's difference and a
    fabric's frame trace print: each field by name, flags by name, the extension."""
    h = p.Header.make(
        p.MsgType.STATUS,
        job=3,
        slot=5,
        rank=2,
        slot_version=1,
        block=7,
        next_block=9,
        flags=p.Flag.SILENT | p.Flag.CACHED,
    )
    text = p.frame_text(p.parse_frame(p.build_frame(EP, h, contributors=0b101)))
    assert text == (
        "STATUS job 3 slot 5 version 1 rank 2 block 7 next 9 flags CACHED|SILENT contributors 0x5"
    )
    data = h._replace(msg_type=int(p.MsgType.DATA), flags=0)
    values = np.arange(64, dtype=np.int32) - 4
    text = p.frame_text(p.parse_frame(p.build_frame(EP, data, values)))
    assert text.startswith("DATA job 3 slot 5") and text.endswith("flags 0 values[0] -4")
