"""hostlib at every block size K (a job's values per block): the reference codec, the bulk
frames, the numerics and the engine, each checked against the reference codec
(protocol.build_frame / parse_frame) or numpy. The network side (jumbo frames, the MTU
error) is in test_transport_netns.py; whole jobs through the switch in test_worker_loopback.py
and tests/test_hostlib_switch.py."""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.engine import AllreduceEngine
from hostlib.framing import FrameBuilder, frame_width, parse_batch
from hostlib.numerics import (
    Output,
    error_bound,
    from_packed,
    make_payload,
)
from hostlib.timers import EngineParams
from p4reduce.job import load_descriptor
from p4reduce.wire import packed_bias

from hostlib_helpers import descriptor

SIZES = (1, 60, 64, 256, 2048, 4096)
EOS = p.END_OF_STREAM
EP = p.Endpoints("02:00:00:00:00:01", "02:00:00:00:01:00", "10.0.0.1", "10.0.0.254")


def _header(msg_type: p.MsgType, block: int, **kw) -> p.Header:
    return p.Header.make(msg_type, job=3, slot=1, rank=2, block=block, next_block=9, **kw)


@pytest.mark.parametrize("k", SIZES)
def test_frames_of_k_values_round_trip(k, rng):
    """A DATA and a data round's RESULT carry K values in 62 + 4K bytes (IPv4 total length
    mtu_needed(K)); the other layouts of the job's frames are unchanged by K."""
    values = rng.integers(-(2**31), 2**31, k)
    for msg in (p.MsgType.DATA, p.MsgType.RESULT):
        h = _header(msg, block=5)
        raw = p.build_frame(EP, h, values, block_values=k)
        assert len(raw) == p.frame_bytes_with_values(k) == 62 + 4 * k
        assert int.from_bytes(raw[16:18], "big") == p.mtu_needed(k) == 48 + 4 * k
        for given in (k, None) if k > 2 else (k,):
            f = p.parse_frame(raw, given)
            assert f.header == h and np.array_equal(f.values, values)
    announce_result = p.build_frame(EP, _header(p.MsgType.RESULT, EOS), fingerprint=(5, 9))
    assert p.parse_frame(announce_result, k).fingerprint == (5, 9)
    status = p.build_frame(EP, _header(p.MsgType.STATUS, 5), contributors=3)
    assert p.parse_frame(status, k).contributors == 3
    skip = p.parse_frame(p.build_frame(EP, _header(p.MsgType.SKIP, 5)), k)
    assert skip.values is None and skip.fingerprint is None


@pytest.mark.parametrize("k", SIZES)
def test_a_block_of_another_size_is_refused_naming_both(k):
    raw = p.build_frame(EP, _header(p.MsgType.DATA, 5), np.zeros(k + 1))
    with pytest.raises(p.ProtocolError, match=f"values: {4 * k} bytes"):
        p.parse_frame(raw, k)
    with pytest.raises(p.ProtocolError, match=rf"shape \({k},\)"):
        p.build_frame(EP, _header(p.MsgType.DATA, 5), np.zeros(k + 1), block_values=k)


@pytest.mark.parametrize("k", (1, 2))
def test_one_or_two_values_are_not_a_status_or_a_fingerprint(k):
    """4 and 8 bytes after the header are also a STATUS and a fingerprint: the message
    (and, for a RESULT, whether its round is a data round) says which."""
    values = np.arange(1, k + 1)
    data_result = p.build_frame(EP, _header(p.MsgType.RESULT, 5), values)
    announce_result = p.build_frame(EP, _header(p.MsgType.RESULT, EOS), fingerprint=(7, 7))
    status = p.build_frame(EP, _header(p.MsgType.STATUS, 5), contributors=6)
    assert np.array_equal(p.parse_frame(data_result, k).values, values)
    assert p.parse_frame(announce_result, k).fingerprint == (7, 7)
    assert p.parse_frame(status, k).contributors == 6
    raws = [data_result, announce_result, status]
    frames = np.zeros((3, frame_width(k)), np.uint8)
    for i, raw in enumerate(raws):
        frames[i, : len(raw)] = np.frombuffer(raw, np.uint8)
    parsed = parse_batch(frames, np.array([len(r) for r in raws]), k)
    assert parsed.rejected == 0
    assert list(parsed.extension) == [p.Extension.VALUES, p.Extension.FINGERPRINT, 3]
    assert np.array_equal(parsed.values[0], values)
    assert tuple(parsed.fingerprint[1]) == (7, 7) and parsed.contributors[2] == 6


def _bulk_headers(rng, n: int, msg_of_kind: dict[int, p.MsgType]):
    kinds = rng.choice(sorted(msg_of_kind), n)
    headers = [
        p.Header.make(
            msg_of_kind[int(kind)],
            job=int(rng.integers(0, 65536)),
            slot=int(rng.integers(0, 65536)),
            rank=int(rng.integers(0, 256)),
            slot_version=int(rng.integers(0, 2)),
            flags=int(rng.integers(0, 128)),
            block=EOS if kind == p.Extension.FINGERPRINT else int(rng.integers(0, EOS)),
            next_block=int(rng.integers(0, EOS + 1)),
            next_exponent=int(rng.integers(0, 256)),
        )
        for kind in kinds
    ]
    cols = {name: np.array([getattr(h, name) for h in headers]) for name in p.FIELD_NAMES}
    return kinds, headers, cols


@pytest.mark.parametrize("k", SIZES)
def test_bulk_frames_are_the_reference_frames(k, rng):
    """FrameBuilder's rows at K are protocol.build_frame's frames; parse_batch reads the
    switch's replies of a job of K as parse_frame does, and rejects a frame of another K."""
    n = 24
    sent = {
        int(p.Extension.VALUES): p.MsgType.DATA,
        int(p.Extension.FINGERPRINT): p.MsgType.ANNOUNCE,
        int(p.Extension.NONE): p.MsgType.SKIP,
    }
    kinds, headers, cols = _bulk_headers(rng, n, sent)
    with_values = kinds == p.Extension.VALUES
    values = rng.integers(-(2**31), 2**31, (int(with_values.sum()), k)).astype(np.int32)
    batch = FrameBuilder(EP, k).build(cols, kinds, values, 0xABCD)
    assert batch.frames.shape == (n, frame_width(k))
    vi = iter(values)
    for i, h in enumerate(headers):
        fp = (0xABCD, 0xABCD) if kinds[i] == p.Extension.FINGERPRINT else None
        ref = p.build_frame(EP, h, next(vi) if with_values[i] else None, fingerprint=fp)
        assert batch.frame(i) == ref, f"frame {i} differs from protocol.build_frame"

    replies = {
        int(p.Extension.VALUES): p.MsgType.RESULT,
        int(p.Extension.FINGERPRINT): p.MsgType.RESULT,
        int(p.Extension.NONE): p.MsgType.RESULT,
    }
    kinds, headers, cols = _bulk_headers(rng, n, replies)
    with_values = kinds == p.Extension.VALUES
    values = rng.integers(-(2**31), 2**31, (int(with_values.sum()), k)).astype(np.int32)
    batch = FrameBuilder(EP, k).build(cols, kinds, values, 77)
    other = p.build_frame(EP, _header(p.MsgType.RESULT, 5), np.zeros(64 if k != 64 else 65))
    frames = np.zeros((n + 1, frame_width(k) + 8), np.uint8)  # wider than the job's: fine
    frames[:n, : batch.frames.shape[1]] = batch.frames
    frames[n, : min(len(other), frames.shape[1])] = np.frombuffer(other, np.uint8)[
        : frames.shape[1]
    ]
    parsed = parse_batch(frames, np.append(batch.lengths, len(other)), k)
    assert parsed.rejected == 1 and len(parsed) == n
    for i in range(n):
        ref = p.parse_frame(batch.frame(i), k)
        assert tuple(int(parsed.cols[f][i]) for f in p.FIELD_NAMES) == tuple(ref.header)
        assert bool(parsed.has_values[i]) == (ref.values is not None)
        if ref.values is not None:
            assert np.array_equal(parsed.values[i], ref.values)
        if ref.fingerprint is not None:
            assert tuple(parsed.fingerprint[i]) == ref.fingerprint


@pytest.mark.parametrize("k", (2048, 4096))
def test_a_frame_cut_short_by_a_narrow_matrix_is_rejected_not_misread(k):
    """A receive matrix narrower than the job's frames (a transport made for a smaller K)
    lost the end of every DATA: such rows are rejected, never read as zeros."""
    raw = p.build_frame(EP, _header(p.MsgType.RESULT, 5), np.ones(k))
    narrow = np.zeros((1, frame_width(64)), np.uint8)
    narrow[0] = np.frombuffer(raw[: narrow.shape[1]], np.uint8)
    parsed = parse_batch(narrow, np.array([len(raw)]), k)
    assert parsed.rejected == 1 and len(parsed) == 0


def test_scapy_dissects_a_block_of_any_size():
    P4Reduce, P4ReduceValues, P4ReduceFingerprint, _ = p.scapy_layers()
    from scapy.layers.l2 import Ether

    for k in (3, 2048):
        pkt = Ether(p.build_frame(EP, _header(p.MsgType.DATA, 5), np.arange(k) - 7))
        assert pkt[P4ReduceValues].values == list(np.arange(k) - 7)
    pkt = Ether(p.build_frame(EP, _header(p.MsgType.RESULT, EOS), fingerprint=(1, 2)))
    assert pkt[P4ReduceFingerprint].fingerprint_max == 2


# -- numerics -----------------------------------------------------------------------------


def _tensor(rng, k: int, blocks: int, zero: tuple[int, ...]) -> np.ndarray:
    """`blocks` blocks of K float32 (the last one partial), the `zero` ones all zero, the
    others scaled 10^-3..10^3 each so their exponents differ."""
    size = blocks * k - k // 3
    x = rng.standard_normal(blocks * k) * np.repeat(10.0 ** rng.integers(-3, 4, blocks), k)
    for b in zero:
        x[b * k : (b + 1) * k] = 0
    return x[:size].astype(np.float32)


@pytest.mark.parametrize("k", (1, 60, 256, 2048))
def test_payload_cuts_blocks_of_k_with_an_exponent_each(k, rng):
    """A block is K values: zero when all K are, its exponent the smallest e with
    2^e >= its max |x|; one rank's quantized block comes back within the bound."""
    blocks, zero = 7, (1, 4)
    x = _tensor(rng, k, blocks, zero)
    pl = make_payload(x, 4, block_values=k)
    assert (pl.block_values, pl.nblocks) == (k, blocks)
    assert list(pl.nonzero) == [b for b in range(blocks) if b not in zero]
    padded = np.zeros(blocks * k, np.float64)
    padded[: x.size] = x
    peak = np.abs(padded.reshape(blocks, k)).max(axis=1)
    e = pl.exponent_biased.astype(np.int64) - p.EXPONENT_BIAS
    nz = peak > 0
    assert (2.0 ** e[nz] >= peak[nz]).all() and (2.0 ** (e[nz] - 1) < peak[nz]).all()
    rows = pl.nonzero
    q = pl.values(rows, pl.exponent_biased[rows])
    assert q.shape == (rows.size, k)
    out = Output(pl)
    out.store(rows, q, pl.exponent_biased[rows].copy())
    got = out.finish()
    bound = np.repeat(error_bound(e, 4), k)[: x.size]
    assert (np.abs(got.astype(np.float64) - x) <= bound).all()


@pytest.mark.parametrize("k", (1, 60, 256, 2048))
def test_packed_int32_halves_sum_exactly_at_k(k, rng):
    """A packed job's int32 tensor travels as blocks of K high and low halves with the
    bias in every lane; N ranks' lanes summed as one wide word (no carry out of a lane),
    with N biases removed, join into the exact int32 sum."""
    n, blocks = 3, 5
    xs = [rng.integers(-(2**29), 2**29, blocks * k - k // 2).astype(np.int32) for _ in range(n)]
    pls = [make_payload(x, n, p.Encoding.PACKED, block_values=k) for x in xs]
    assert pls[0].halves and pls[0].nblocks == 2 * blocks
    rows = np.arange(2 * blocks)
    lanes = [pl.values(rows, np.zeros(rows.size, np.int16)) for pl in pls]
    bias = packed_bias(n)
    for lane in lanes:  # q + bias, q a high (-2^15..2^15-1) or low (0..2^16-1) half
        u = lane.view(np.uint32).astype(np.int64)
        assert (u >= bias - 2**15).all() and (u < bias + 2**16).all()
    wide = sum(lane.view(np.uint32).astype(np.int64) for lane in lanes)
    assert (wide < 2**32).all(), "a lane carried into its neighbour"
    out = Output(pls[0])
    out.store(rows, from_packed(wide.astype(np.uint32).view(np.int32), n), np.zeros(rows.size))
    assert np.array_equal(out.finish(), np.sum(xs, axis=0, dtype=np.int64).astype(np.int32))


# -- the engine ---------------------------------------------------------------------------


def test_engine_sends_and_stores_blocks_of_the_jobs_k(rng):
    """Rank 0 of 2, 4 slots, K = 256: the engine's DATA frames are 62 + 4K bytes of the
    payload's block, the RESULT's K sums land in the block's K elements, and a payload cut
    for another K is refused."""
    k = 256
    cfg = load_descriptor(descriptor(0, 2, slot_count=4, block_values=k))
    x = np.zeros(12 * k, np.int32)
    x[1 * k : 2 * k] = rng.integers(-1000, 1000, k)
    with pytest.raises(ValueError, match="256 values per block: the payload has 64"):
        AllreduceEngine(cfg, make_payload(x, 2), 0.0, EngineParams())
    eng = AllreduceEngine(cfg, make_payload(x, 2, block_values=k), 0.0, EngineParams())
    announces = eng.packets_to_send(0.0)
    assert len(announces) == 4 and announces.frames.shape[1] == frame_width(k)
    fp = p.fingerprint(np.int32, x.size)
    for slot in range(4):
        h = p.Header.make(p.MsgType.RESULT, job=7, slot=slot, rank=0, block=EOS)
        nxt = 1 if slot == 1 else EOS
        eng.on_result(h._replace(next_block=nxt), None, 0.001, fingerprint=(fp, fp))
    data = eng.packets_to_send(0.002)
    assert len(data) == 1 and int(data.lengths[0]) == 62 + 4 * k
    frame = p.parse_frame(data.frame(0), k)
    assert frame.header.msg_type == p.MsgType.DATA and frame.header.block == 1
    assert np.array_equal(frame.values, x[k : 2 * k])
    h = frame.header._replace(msg_type=p.MsgType.RESULT, next_block=EOS)
    eng.on_result(h, 3 * frame.values, 0.003)
    assert eng.done
    assert np.array_equal(eng.output.finish(), 3 * x)


@pytest.mark.parametrize("k", (64, 128, 256, 2048))
def test_a_skip_carries_a_block_of_zeros_above_128_values(k):
    """A SKIP that completes a round comes back as its RESULT, and simple_switch can grow a
    received frame by 512 bytes only: a job of more than 128 values per block sends its
    SKIPs as long as a DATA, with K zeros; up to 128 they are header only."""
    cfg = load_descriptor(descriptor(0, 2, slot_count=4, block_values=k))
    x = np.zeros(12 * k, np.int32)  # this rank has nothing: every round it takes is a SKIP
    eng = AllreduceEngine(cfg, make_payload(x, 2, block_values=k), 0.0, EngineParams())
    eng.packets_to_send(0.0)
    fp = p.fingerprint(np.int32, x.size)
    for slot in range(4):  # the other rank announced block 5 (slot 1); nothing elsewhere
        nxt = 5 if slot == 1 else EOS
        h = p.Header.make(p.MsgType.RESULT, job=7, slot=slot, rank=0, block=EOS, next_block=nxt)
        eng.on_result(h, None, 0.001, fingerprint=(fp, fp))
    (skip,) = [eng.packets_to_send(0.002).frame(0)]
    padded = p.skip_carries_values(k)
    assert padded == (k > 128)
    assert len(skip) == (62 + 4 * k if padded else 62)
    frame = p.parse_frame(skip, k)
    assert frame.header.msg_type == p.MsgType.SKIP and frame.header.block == 5
    if padded:
        assert frame.values.shape == (k,) and not frame.values.any()
        with pytest.raises(p.ProtocolError, match="its SKIPs are header only"):
            p.parse_frame(skip, 64)
    else:
        assert frame.values is None
    retransmitted = eng.packets_to_send(10.0)  # its timer expired: the same frame again
    assert len(retransmitted) == 1 and int(retransmitted.lengths[0]) == len(skip)


# -- an ANNOUNCE with a block (the leaf role of silent rounds above 128 values) ------------


def test_an_announce_with_a_block_and_the_answers_made_from_it_read_as_the_range(rng):
    """Above SKIP_GROWS_TO_VALUES a leaf-role ANNOUNCE carries a block after its range
    (70 + 4K bytes), and so do the RESULTs and REWINDs made from it: every parser reads
    them as the range, given the job's K; at 128 values or without K the layout is
    none."""
    k = 256
    for msg, block in ((p.MsgType.ANNOUNCE, EOS), (p.MsgType.RESULT, EOS), (p.MsgType.REWIND, 3)):
        raw = p.build_frame(EP, _header(msg, block), np.zeros(k), fingerprint=(5, 9))
        assert len(raw) == p.frame_bytes_with_fingerprint_and_block(k) == 70 + 4 * k
        assert int.from_bytes(raw[16:18], "big") == p.mtu_needed(k, announce_block=True)
        assert p.ipv4_checksum(raw[14:34]) == 0
        f = p.parse_frame(raw, k)
        assert f.fingerprint == (5, 9) and f.values is None and f.header.msg_type == msg
        parsed = parse_batch(np.frombuffer(raw, np.uint8)[None, :], np.array([len(raw)]), k)
        assert parsed.rejected == 0 and not parsed.has_values[0]
        assert parsed.extension[0] == p.EXT.FINGERPRINT
        assert tuple(parsed.fingerprint[0]) == (5, 9)
    data = p.build_frame(EP, _header(p.MsgType.DATA, 3), np.zeros(k), fingerprint=(5, 9))
    with pytest.raises(p.ProtocolError, match="DATA message"):
        p.parse_frame(data, k)
    narrow = p.build_frame(EP, _header(p.MsgType.RESULT, EOS), np.zeros(128), fingerprint=(5, 9))
    with pytest.raises(p.ProtocolError, match="RESULT message"):
        p.parse_frame(narrow, 128)
    rows = np.frombuffer(narrow, np.uint8)[None, :]
    assert parse_batch(rows, np.array([len(narrow)]), 128).rejected == 1


def test_a_leaf_role_silent_rank_above_128_values_announces_with_a_block():
    """JobConfig.announce_block from the descriptor: the leaf role (wire_rank), silent
    rounds and more than SKIP_GROWS_TO_VALUES values per block, all three. Its engine's
    ANNOUNCEs are then 70 + 4K bytes, zeros after the range (the builder's scratch rows
    reused), and each is parsed back as the range."""
    k = 256

    def config(values: int, mode: str, leaf: bool):
        d = descriptor(1, 2, slot_count=4, block_values=values, round_mode=mode)
        if leaf:
            d |= {"wire_rank": 1, "leaf_ranks": [0, 1]}
        return load_descriptor(d)

    cfg = config(k, "silent", True)
    assert cfg.announce_block
    assert not config(128, "silent", True).announce_block
    assert not config(k, "every_rank", True).announce_block
    assert not config(k, "silent", False).announce_block
    x = np.zeros(12 * k, np.int32)
    x[5 * k : 6 * k] = 7
    eng = AllreduceEngine(cfg, make_payload(x, 2, block_values=k), 0.0, EngineParams())
    announces = eng.packets_to_send(0.0)
    assert len(announces) == 4 and set(announces.lengths.tolist()) == {70 + 4 * k}
    fp = p.fingerprint(np.int32, x.size)
    for i in range(4):
        f = p.parse_frame(announces.frame(i), k)
        assert f.header.msg_type == p.MsgType.ANNOUNCE and f.fingerprint == (fp, fp)
    # the block is zeros even in rows that held other bytes (a reused buffer)
    builder = FrameBuilder(cfg.to_switch(), k, cfg.announce_block)
    assert builder.width == 70 + 4 * k
    dirty = np.full((2, builder.width), 0xAB, np.uint8)
    h = p.Header.make(p.MsgType.ANNOUNCE, job=7, slot=1, rank=1)
    cols = {name: np.full(2, v, np.int64) for name, v in zip(p.FIELD_NAMES, h)}
    batch = builder.build(cols, np.full(2, p.EXT.FINGERPRINT), fingerprint=fp, out=dirty)
    for i in range(2):
        assert p.parse_frame(batch.frame(i), k).fingerprint == (fp, fp)
        assert not batch.frames[i, 70 : 70 + 4 * k].any()
