"""Bulk frames (template + pack_headers) against the reference codec (build/parse_frame)."""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from p4reduce.job import load_descriptor
from hostlib.framing import Batch, FrameBuilder, frame_matrix, parse_batch, values_columns
from hostlib.scratch import Scratch

from hostlib_helpers import descriptor


def _random_headers(rng, n):
    return [
        p.Header.make(
            int(rng.choice([1, 2, 3, 4])),
            job=int(rng.integers(0, 65536)),
            slot=int(rng.integers(0, 65536)),
            rank=int(rng.integers(0, 256)),
            slot_version=int(rng.integers(0, 2)),
            flags=int(rng.integers(0, 128)),
            block=int(rng.integers(0, p.END_OF_STREAM + 1)),
            next_block=int(rng.integers(0, p.END_OF_STREAM + 1)),
            next_exponent=int(rng.integers(0, 256)),
        )
        for _ in range(n)
    ]


def test_template_plus_pack_headers_equals_build_frame(rng):
    cfg = load_descriptor(descriptor(2, 4))
    ep = cfg.to_switch()
    headers = _random_headers(rng, 40)
    extension = rng.choice(
        [int(p.Extension.NONE), int(p.Extension.VALUES), int(p.Extension.FINGERPRINT)], 40
    )
    with_values = extension == p.Extension.VALUES
    values = rng.integers(-(2**31), 2**31, size=(int(with_values.sum()), 64)).astype(np.int32)
    cols = {name: np.array([getattr(h, name) for h in headers]) for name in p.FIELD_NAMES}
    fp = 0xABCD1234
    batch = FrameBuilder(ep).build(cols, extension, values, fp)
    vi = iter(values)
    for i, h in enumerate(headers):
        ref = p.build_frame(
            ep,
            h,
            next(vi) if with_values[i] else None,
            fingerprint=(fp, fp) if extension[i] == p.Extension.FINGERPRINT else None,
        )
        assert batch.frame(i) == ref, f"frame {i} differs from protocol.build_frame"


@pytest.mark.parametrize("field, value", [("slot", -1), ("block", 1 << 32), ("rank", 256)])
def test_a_batch_with_a_field_out_of_range_is_refused_by_name_and_nothing_written(
    field, value, rng
):
    """FrameBuilder checks, packs and stores the headers in one compiled pass: one field
    out of range in one row names the field, and no row's header is written."""
    ep = load_descriptor(descriptor(2, 4)).to_switch()
    headers = _random_headers(rng, 6)
    cols = {name: np.array([getattr(h, name) for h in headers]) for name in p.FIELD_NAMES}
    cols[field][4] = value
    out = np.full((6, FrameBuilder(ep).width), 0xAB, np.uint8)
    with pytest.raises(p.ProtocolError, match=f"field {field}={value} out of range"):
        FrameBuilder(ep).build(cols, np.zeros(6, np.int64), out=out)
    assert (out[:, p.P4R_OFFSET :] == 0xAB).all()


def test_parse_batch_matches_parse_frame(rng):
    cfg = load_descriptor(descriptor(0, 2))
    ep = cfg.from_switch()
    headers = [h._replace(msg_type=p.MsgType.RESULT) for h in _random_headers(rng, 30)]
    frames = np.zeros((31, p.FRAME_BYTES_WITH_VALUES), np.uint8)
    lengths = np.zeros(31, np.int64)
    refs = []
    for i, h in enumerate(headers):
        vals = rng.integers(-1000, 1000, 64) if i % 3 else None
        fp = (i, 1000 + i) if i % 3 == 0 and i % 2 else None
        st = i if i % 6 == 0 else None
        if st is not None:
            h = h._replace(msg_type=p.MsgType.STATUS)
        raw = p.build_frame(ep, h, vals, fingerprint=fp, contributors=st)
        refs.append(p.parse_frame(raw))
        frames[i, : len(raw)] = np.frombuffer(raw, np.uint8)
        lengths[i] = len(raw)
    junk = bytearray(p.build_frame(ep, headers[0]))
    junk[36:38] = (9999).to_bytes(2, "big")  # not a p4reduce port
    frames[30, : len(junk)] = np.frombuffer(bytes(junk), np.uint8)
    lengths[30] = len(junk)
    parsed = parse_batch(frames, lengths)
    assert parsed.rejected == 1 and len(parsed) == 30
    for i, ref in enumerate(refs):
        assert tuple(int(parsed.cols[n][i]) for n in p.FIELD_NAMES) == tuple(ref.header)
        assert bool(parsed.has_values[i]) == (ref.values is not None)
        if ref.values is not None:
            assert (parsed.values[i] == ref.values).all()
        if ref.fingerprint is not None:
            assert tuple(parsed.fingerprint[i]) == ref.fingerprint
        if ref.contributors is not None:
            assert parsed.contributors[i] == ref.contributors
            assert parsed.extension[i] == p.Extension.STATUS


def test_truncated_frame_is_rejected():
    cfg = load_descriptor(descriptor(0, 1))
    raw = p.build_frame(cfg.from_switch(), p.Header.make(4, job=7, slot=0, rank=0), np.arange(64))
    frames = np.zeros((1, p.FRAME_BYTES_WITH_VALUES), np.uint8)
    frames[0, :200] = np.frombuffer(raw[:200], np.uint8)
    parsed = parse_batch(frames, np.array([200]))
    assert parsed.rejected == 1 and len(parsed) == 0


@pytest.mark.parametrize(
    "field,value",
    [
        ("protocol", 1),
        ("block_values", 0),
        ("block_values", p.MAX_BLOCK_VALUES + 1),
        ("epoch", 0),
        ("epoch", 1 << 31),
    ],
)
def test_descriptor_with_other_protocol_or_block_values_refused(field, value):
    from p4reduce.job import DescriptorError

    d = descriptor(0, 1)
    d[field] = value
    with pytest.raises(DescriptorError, match=field):
        load_descriptor(d)


def test_descriptor_from_json_string_and_path(tmp_path):
    import json

    d = descriptor(1, 3)
    assert load_descriptor(json.dumps(d)).rank == 1
    f = tmp_path / "d.json"
    f.write_text(json.dumps(d))
    assert load_descriptor(f).worker_count == 3
    assert load_descriptor(str(f)).worker.ip == "10.250.0.2"


def test_descriptor_names_the_worker_count_and_still_reads_its_earlier_name():
    """Written as `worker_count` (the name P4 and the controller use); a descriptor written
    before the rename says `workers` and is read the same."""
    d = descriptor(2, 3)
    assert d["worker_count"] == 3 and "workers" not in d
    d["workers"] = d.pop("worker_count")
    assert load_descriptor(d).worker_count == 3
    del d["workers"]
    from p4reduce.job import DescriptorError

    with pytest.raises(DescriptorError, match="worker_count missing"):
        load_descriptor(d)


def test_descriptor_names_the_block_values_and_still_reads_its_earlier_name():
    """Written as `block_values` (values per block: not the `lanes` encoding); a descriptor
    written before the rename says `lanes` and is read the same, and checked the same."""
    from p4reduce.job import DescriptorError

    d = descriptor(0, 2)
    assert d["block_values"] == p.BLOCK_VALUES and "lanes" not in d
    d["lanes"] = d.pop("block_values")
    assert load_descriptor(d).block_values == p.BLOCK_VALUES
    d["lanes"] = 256
    assert load_descriptor(d).block_values == 256
    d["lanes"] = 0
    with pytest.raises(DescriptorError, match="block_values=0"):
        load_descriptor(d)


def test_descriptor_carries_int32_halves_and_refuses_a_non_boolean():
    """A descriptor without the field is the switch-flags-overflow case (descriptors older
    than the field); a string such as "false" is refused, not read as true."""
    from p4reduce.job import DescriptorError

    d = descriptor(0, 2)
    assert load_descriptor(d).int32_halves is False
    d["int32_halves"] = True
    cfg = load_descriptor(d)
    assert cfg.int32_halves is True and load_descriptor(cfg.to_dict()).int32_halves is True
    d["int32_halves"] = "false"
    with pytest.raises(DescriptorError, match="int32_halves='false'"):
        load_descriptor(d)


@pytest.mark.parametrize("k", [1, 2, 64, 200])
def test_parse_batch_reads_every_message_and_length_as_carries_values_says(k):
    """Every message type, block (END_OF_STREAM, others, above it) and length after the
    header: a frame is kept with values exactly where protocol.carries_values says its
    length is the job's K values, kept without where the length is another layout's, and
    dropped (counted) otherwise."""
    cfg = load_descriptor(descriptor(0, 2))
    ep = cfg.from_switch()
    vb = p.values_bytes(k)
    others = {0: p.EXT.NONE, 4: p.EXT.STATUS, 8: p.EXT.FINGERPRINT}
    cases = [
        (m, block, ext)
        for m in range(16)
        for block in (0, 5, p.MAX_BLOCK, p.END_OF_STREAM, (1 << 32) - 1)
        for ext in sorted({0, 4, 8, 12, vb, vb + 4})
    ]
    width = max(p.frame_bytes_with_values(k), p.FRAME_BYTES_WITH_FINGERPRINT) + 8
    frames = np.zeros((len(cases), width), np.uint8)
    lengths = np.zeros(len(cases), np.int64)
    for i, (m, block, ext) in enumerate(cases):
        raw = bytearray(p.l2_l4_template(ep, p.Extension.NONE))
        raw[38:40] = (p.UDP_BYTES + p.HEADER_BYTES + ext).to_bytes(2, "big")
        cols = {n: 0 for n in p.FIELD_NAMES}
        cols.update(protocol=p.PROTOCOL_VERSION, msg_type=m, block=block, job=i)
        raw += p.pack_headers(cols, 1).tobytes() + bytes(j * 7 % 256 for j in range(ext))
        frames[i, : len(raw)] = np.frombuffer(bytes(raw), np.uint8)
        lengths[i] = p.EXTENSION_OFFSET + ext
    parsed = parse_batch(frames[:, : width - 8], lengths, k)
    kept = {int(j): i for i, j in enumerate(parsed.cols["job"])}
    for i, (m, block, ext) in enumerate(cases):
        values = ext == vb and bool(p.carries_values(m, block, ext))
        want = p.EXT.VALUES if values else others.get(ext)
        if want is None:
            assert i not in kept, (m, block, ext)
            continue
        assert i in kept, (m, block, ext)
        assert parsed.extension[kept[i]] == want, (m, block, ext)
        assert bool(parsed.has_values[kept[i]]) == values
    assert parsed.rejected == len(cases) - len(kept)


def test_a_batchs_extent_is_its_longest_frame_among_the_rows_asked():
    """What a transport copies of each row of a run (Batch.extent): the longest frame's
    bytes of those rows -- an ANNOUNCE run of a wide job is 70 bytes a row, a run with
    one DATA frame its whole width -- and nothing for no row."""
    k = 16_000
    width = p.frame_bytes_with_values(k)
    lengths = np.array([70, 70, width, 66, 70], np.int64)
    batch = Batch(np.zeros((5, width), np.uint8), lengths)
    assert batch.extent() == width
    assert batch.extent(slice(0, 2)) == 70
    assert batch.extent(slice(2, 4)) == width
    assert batch.extent(slice(3, 5)) == 70
    assert batch.extent(slice(5, 5)) == 0 and Batch.empty(width).extent() == 0


@pytest.mark.parametrize("rows", [1, 3, 8])
def test_values_written_into_aligned_frames_build_the_frames_protocol_builds(rows, rng):
    """A frame_matrix's rows have their values columns 4-byte aligned (the row's byte 62,
    whatever the width), and values written there first (values_columns: what
    Payload.values does for the engine's kept frames) give the frames protocol.build_frame
    makes, not copied again; values from elsewhere are copied in as before."""
    k = 301  # width 62 + 4 * 301: an odd number of 2-byte halves, rows not 4-aligned
    cfg = load_descriptor(descriptor(2, 4, block_values=k))
    ep = cfg.to_switch()
    builder = FrameBuilder(ep, k)
    headers = _random_headers(rng, rows)
    cols = {name: np.array([getattr(h, name) for h in headers]) for name in p.FIELD_NAMES}
    values = rng.integers(-(2**31), 2**31, size=(rows, k)).astype(np.int32)
    frames = frame_matrix(Scratch(), "kept", rows, builder.width)
    assert frames.shape == (rows, builder.width)
    in_frames = values_columns(frames, k)
    assert in_frames.flags.aligned and in_frames.shape == (rows, k)
    in_frames[...] = values
    extension = np.full(rows, int(p.Extension.VALUES))
    built = builder.build(cols, extension, in_frames, out=frames)
    elsewhere = builder.build(
        cols, extension, values, out=frame_matrix(Scratch(), "x", rows, builder.width)
    )
    for i, h in enumerate(headers):
        ref = p.build_frame(ep, h, values[i], block_values=k)
        assert built.frame(i) == elsewhere.frame(i) == ref, f"frame {i}"
