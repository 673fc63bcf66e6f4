"""Helpers for hostlib tests (imported by name: tests/ is not a package)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hostlib import protocol as p
from p4reduce.addresses import Address
from p4reduce.job import JobConfig
from hostlib.framing import Batch, frame_width


def descriptor(
    rank: int,
    worker_count: int,
    slot_count: int = 8,
    job: int = 7,
    epoch: int = 1,
    encoding: str = "lanes",
    block_values: int = p.BLOCK_VALUES,
    round_mode: str = "every_rank",
) -> dict[str, Any]:
    """A descriptor as the controller writes one (JobConfig.to_dict, the one writer)."""
    return JobConfig(
        job=job,
        epoch=epoch,
        rank=rank,
        worker_count=worker_count,
        slot_base=0,
        slot_count=slot_count,
        switch=Address("02:00:00:00:01:00", "10.250.0.254"),
        worker=Address(f"02:00:00:00:00:{rank + 1:02x}", f"10.250.0.{rank + 1}"),
        encoding=p.Encoding[encoding.upper()],
        block_values=block_values,
        round_mode=p.RoundMode[round_mode.upper()],
    ).to_dict()


def decode(batch: Batch) -> list[p.Frame]:
    """Every frame of a batch through the reference codec (protocol.parse_frame)."""
    return [p.parse_frame(batch.frame(i)) for i in range(len(batch))]


# The engine tests' job: rank 0 of 2 with 4 slots; the tensor has 12 blocks of which 1, 4
# and 9 are non-zero (slot s owns blocks s, s+4, s+8).
ENGINE_T0 = 100.0


def engine_tensor():

    x = np.zeros(12 * 64, np.int32)
    for b in (1, 4, 9):
        x[b * 64 : (b + 1) * 64] = np.arange(64) + 1000 * b
    return x


def make_engine(params, slot_versions=None, rtt=None, now=ENGINE_T0):
    from p4reduce.job import load_descriptor
    from hostlib.engine import AllreduceEngine
    from hostlib.numerics import make_payload

    cfg = load_descriptor(descriptor(0, 2, slot_count=4))
    return AllreduceEngine(
        cfg, make_payload(engine_tensor(), 2), now, params, slot_versions, rtt=rtt
    )


def job_transport(session, port: int, block_values: int):
    """A rank's link to the in-process switch, its receive rows as wide as the job's frames."""
    return session.transport(port, frame_width(block_values))


def allow_silent(session) -> bool:
    """Let `session`'s JobManager create jobs of silent rounds when the loaded program runs
    them (its P4Info has the REWIND step) although the target does not list them yet (the
    default round mode flips once both sides work). False: this build cannot."""
    import dataclasses

    target = session.jobs.target
    if "silent" in target.round_modes:
        return True
    if "rewind" not in target.p4info.read_text():
        return False
    session.jobs.target = dataclasses.replace(target, round_modes=(*target.round_modes, "silent"))
    return True
