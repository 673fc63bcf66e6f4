"""Programs the DropSimulator: a job loses a fraction of its packets in the switch.

Fractions are of 65536 in the data plane; here they are floats in [0, 1).
"""
from __future__ import annotations

from .connection import SwitchConnection, table_entity
from .p4info import P4InfoError

SCALE = 65536


def threshold(fraction: float, what: str) -> int:
    if not 0.0 <= fraction < 1.0:
        raise P4InfoError(f"{what} loss fraction {fraction} must be in [0, 1)")
    return int(round(fraction * SCALE))


def set_loss(conn: SwitchConnection, job: int, ingress: float = 0.0, egress: float = 0.0,
             seed: int = 1, use_random: bool = False, replace: bool = False) -> None:
    """Lose `ingress` of the job's packets on the way in and `egress` of its result copies."""
    entry = conn.p4.table_entry("drop_simulator", {"job": job}, "simulate_loss", {
        "ingress_threshold": threshold(ingress, "ingress"),
        "egress_threshold": threshold(egress, "egress"),
        "seed": seed & 0xFFFFFFFF, "use_random": int(use_random)})
    (conn.modify if replace else conn.insert)(table_entity(entry))


def clear_loss(conn: SwitchConnection, job: int) -> None:
    conn.delete(table_entity(conn.p4.table_entry("drop_simulator", {"job": job})))
