"""Programs the DropSimulator: a job loses a fraction of its packets in the switch.

The data plane drops a packet when a 16-bit roll (0..65535) is below the threshold, so a
threshold t loses t/65536 of the packets. Here loss is a probability p in [0, 1); it maps
to t = round(p * 65536), clamped to 65535: every p in the documented range is accepted, and
the largest loss the switch can simulate is 65535/65536 (p from 0.99999237 up, e.g.
0.999999, all give that).
"""

from __future__ import annotations

import math

from p4reduce.p4rt import P4InfoError

from .connection import SwitchConnection, table_entity

SECTION = "14. Drop simulator"  # docs/protocol.md
TABLES = ("drop_simulator",)
# DropSimulatorEgress (instance drop_simulator_egress) is this control's egress half
JOB_COUNTERS = ("simulated_drops_ingress", "simulated_drops_egress")
SWITCH_COUNTERS: tuple[str, ...] = ()

SCALE = 65536
MAX_THRESHOLD = SCALE - 1


def threshold(fraction: float, what: str) -> int:
    """The 16-bit threshold for loss probability `fraction` in [0, 1)."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, (int, float))
        or math.isnan(fraction)
        or not 0.0 <= fraction < 1.0
    ):
        raise P4InfoError(f"{what} loss {fraction!r} must be a probability in [0, 1)")
    return min(int(round(fraction * SCALE)), MAX_THRESHOLD)


def loss_entry(
    conn: SwitchConnection,
    job: int,
    ingress: float = 0.0,
    egress: float = 0.0,
    seed: int = 1,
    use_random: bool = False,
):
    """The job's `drop_simulator` entry."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 32:
        raise P4InfoError(f"drop simulator seed {seed!r} must be an integer in 0..2^32-1")
    if not conn.p4.has_table("drop_simulator"):
        raise P4InfoError(
            f"job {job}: this switch's pipeline has no drop simulator (a production Tofino "
            "build leaves it out; load the test build, p4src/build/tofino*-test, to "
            "simulate loss)"
        )
    return conn.p4.table_entry(
        "drop_simulator",
        {"job": job},
        "simulate_loss",
        {
            "ingress_threshold": threshold(ingress, "ingress"),
            "egress_threshold": threshold(egress, "egress"),
            "seed": seed,
            "use_random": int(use_random),
        },
    )


def set_loss(
    conn: SwitchConnection,
    job: int,
    ingress: float = 0.0,
    egress: float = 0.0,
    seed: int = 1,
    use_random: bool = False,
    replace: bool = False,
) -> None:
    """Lose `ingress` of the job's packets on the way in and `egress` of its result copies."""
    entry = loss_entry(conn, job, ingress, egress, seed, use_random)
    (conn.modify if replace else conn.insert)(table_entity(entry))


def clear_loss(conn: SwitchConnection, job: int) -> None:
    conn.delete(table_entity(conn.p4.table_entry("drop_simulator", {"job": job})))
