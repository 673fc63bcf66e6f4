"""The drop simulator loses the configured fraction, deterministically from its seed."""

from __future__ import annotations

import zlib

from hostlib.protocol import MsgType

PACKETS = 300


def _roll(seed: int, sequence: int, rank: int | None = None) -> int:
    """The drop simulator's hash: crc32 of seed ++ sequence (ingress), or of ~seed ++
    sequence ++ rank (a result copy in egress), mod 65536."""
    data = seed.to_bytes(4, "big") + sequence.to_bytes(4, "big")
    if rank is not None:
        data = (~seed & 0xFFFFFFFF).to_bytes(4, "big") + sequence.to_bytes(4, "big") + bytes([rank])
    return zlib.crc32(data) & 0xFFFF


def _expected_drops(seed: int, threshold: int, egress_rank: int | None = None) -> set[int]:
    """Sequence numbers whose packet (or result copy to egress_rank) the switch drops."""
    return {i for i in range(PACKETS) if _roll(seed, i, egress_rank) < threshold}


def _responses(switch, job) -> int:
    """N=1: every ANNOUNCE that survives gets exactly one result (the first completes the
    round, later ones are retransmissions served from the slot)."""
    got = 0
    for i in range(PACKETS):
        job.send(0, MsgType.ANNOUNCE, next_block=0)
        if i % 20 == 19:
            got += len(switch.proc.recv_all(1, 0.3))
    return got + len(switch.proc.recv_all(1, 0.5))


def test_ingress_loss_drops_exactly_the_seeded_packets(switch):
    job = switch.add_job(job=50, n=1)
    seed, fraction = 12345, 0.25
    switch.set_loss(50, ingress=fraction, seed=seed)
    expected = _expected_drops(seed, round(fraction * 65536))
    assert 0.15 * PACKETS < len(expected) < 0.35 * PACKETS
    assert _responses(switch, job) == PACKETS - len(expected)
    assert job.stats()["simulated_drops_ingress"] == len(expected)


def test_egress_loss_drops_result_copies(switch):
    job = switch.add_job(job=51, n=1)
    seed, fraction = 777, 0.1
    switch.set_loss(51, egress=fraction, seed=seed)
    expected = _expected_drops(seed, round(fraction * 65536), egress_rank=0)
    assert _responses(switch, job) == PACKETS - len(expected)
    stats = job.stats()
    assert stats["simulated_drops_egress"] == len(expected)
    assert stats["simulated_drops_ingress"] == 0


def test_random_mode_drops_about_the_fraction(switch):
    job = switch.add_job(job=52, n=1)
    switch.set_loss(52, ingress=0.5, use_random=True)
    got = _responses(switch, job)
    assert 0.3 * PACKETS < got < 0.7 * PACKETS
    assert job.stats()["simulated_drops_ingress"] == PACKETS - got


def test_egress_loss_of_each_copy_is_decided_before_replication(switch):
    """Three ranks, every round multicast: which copies are lost depends only on the seed,
    the job's sequence number of the packet that completed the round and the copy's rank
    -- not on the order in which a target's egress threads handle the copies (bmv2 runs
    several). The same rounds reach the same ranks on every target."""
    n, rounds, seed, fraction = 3, 20, 4242, 0.3
    job = switch.add_job(job=53, n=n)
    switch.set_loss(53, egress=fraction, seed=seed)
    threshold = round(fraction * 65536)
    got = {rank: set() for rank in range(n)}
    want = {rank: set() for rank in range(n)}
    for k in range(rounds):
        version = k % 2
        for rank in range(n):
            if k == 0:
                job.send(rank, MsgType.ANNOUNCE, next_block=0)
            else:
                job.send(rank, MsgType.SKIP, version=version, block=k - 1, next_block=k)
        completing = n * k + n - 1  # the job's sequence number of the last
        for rank in range(n):
            if _roll(seed, completing, rank) >= threshold:
                want[rank].add(k)
            for _frame in switch.proc.recv_all(job.by_rank[rank].port, 0.15):
                got[rank].add(k)
    assert got == want
    lost = sum(rounds - len(want[r]) for r in range(n))
    assert 0 < lost < n * rounds and job.stats()["simulated_drops_egress"] == lost
