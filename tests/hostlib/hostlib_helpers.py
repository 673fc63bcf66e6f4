"""Helpers for hostlib tests (imported by name: tests/ is not a package)."""
from __future__ import annotations

from typing import Any

from hostlib import protocol as p
from hostlib.framing import Batch

def descriptor(rank: int, workers: int, slot_count: int = 8, job: int = 7,
               epoch: int = 1) -> dict[str, Any]:
    return {"protocol": p.PROTOCOL_VERSION, "job": job, "epoch": epoch, "rank": rank, "workers": workers, "slot_base": 0,
            "slot_count": slot_count, "lanes": 64,
            "switch": {"mac": "02:00:00:00:01:00", "ip": "10.250.0.254", "udp_port": 20528},
            "worker": {"mac": f"02:00:00:00:00:{rank + 1:02x}", "ip": f"10.250.0.{rank + 1}",
                       "udp_port": 20528}}

def decode(batch: Batch) -> list[p.Frame]:
    """Every frame of a batch through the reference codec (protocol.parse_frame)."""
    return [p.parse_frame(batch.frame(i)) for i in range(len(batch))]
