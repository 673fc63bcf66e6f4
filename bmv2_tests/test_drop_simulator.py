"""The drop simulator loses the configured fraction, deterministically from its seed."""
from __future__ import annotations

import zlib

from hostlib.protocol import MsgType

PACKETS = 300


def _expected_drops(seed: int, threshold: int, salt_invert: bool = False) -> set[int]:
    """Sequence numbers the switch must drop: crc32(seed ++ sequence) mod 65536 < threshold."""
    s = (~seed & 0xFFFFFFFF) if salt_invert else seed
    return {i for i in range(PACKETS)
            if zlib.crc32(s.to_bytes(4, "big") + i.to_bytes(4, "big")) & 0xFFFF < threshold}


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
    expected = _expected_drops(seed, round(fraction * 65536), salt_invert=True)
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
