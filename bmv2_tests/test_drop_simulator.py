"""The drop simulator loses the configured fraction, deterministically from its seed."""

from __future__ import annotations

import time

import numpy as np

from controlplane.stats import read_counter
from hostlib.protocol import MsgType

PACKETS = 300
M32 = 0xFFFFFFFF


def _mix32(x: int) -> int:
    """murmur3's 32-bit finalizer, as drop_simulator.p4 writes it."""
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & M32
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & M32
    return x ^ (x >> 16)


def _roll(seed: int, sequence: int, rank: int | None = None) -> int:
    """The drop simulator's roll, mod 65536: the packet's key mix32(sequence + seed x
    0x9E3779B9) (ingress), or mix32(key ^ rank) (its result copy to `rank`, in egress)."""
    key = _mix32((sequence + seed * 0x9E3779B9) & M32)
    return (key if rank is None else _mix32(key ^ rank)) & 0xFFFF


def _expected_drops(
    seed: int, threshold: int, egress_rank: int | None = None, packets: int = PACKETS
) -> set[int]:
    """Sequence numbers whose packet (or result copy to egress_rank) the switch drops."""
    return {i for i in range(packets) if _roll(seed, i, egress_rank) < threshold}


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


def _lost_one_by_one(switch, job, packets: int) -> np.ndarray:
    """Whether the switch lost each of `packets` ANNOUNCEs of rank 0 on the way in, packet
    by packet: either its answer comes back or the simulator's counter counts it."""
    port, index = job.by_rank[0].port, job.job.job_index
    lost, counted = np.zeros(packets, bool), 0
    for i in range(packets):
        job.send(0, MsgType.ANNOUNCE, next_block=0)
        give_up = time.monotonic() + 5.0
        while not switch.proc.recv_all(port, 0.002):
            now = read_counter(switch.conn, "simulated_drops_ingress", index).get(index, 0)
            if now > counted:
                counted, lost[i] = now, True
                break
            assert time.monotonic() < give_up, f"packet {i}: neither answered nor counted lost"
    return lost


def test_a_lost_packet_makes_its_neighbours_loss_no_likelier(switch):
    """Which packets are lost, read one by one: exactly the seeded ones, and after a
    lost packet the next one, or one a steady resend rhythm later (16 packets), is lost
    with about the configured chance. Loss correlated along the sequence -- crc32, affine
    in the sequence number's bits, lost the next packet with 0.6 and the 16th with 0.75
    at 0.25 -- gave a rank resending at a steady pace runs of loss that independent loss
    gives once in millions of tries, and named it silent."""
    packets, seed, fraction = 800, 7, 0.25
    job = switch.add_job(job=54, n=1)
    switch.set_loss(54, ingress=fraction, seed=seed)
    lost = _lost_one_by_one(switch, job, packets)
    threshold = round(fraction * 65536)
    assert set(np.flatnonzero(lost).tolist()) == _expected_drops(seed, threshold, None, packets)
    assert abs(lost.mean() - fraction) < 0.05
    for stride in (1, 2, 15, 16, 17, 32):
        after_a_loss = lost[stride:][lost[:-stride]]
        assert after_a_loss.mean() < 1.5 * fraction, (stride, after_a_loss.mean())
