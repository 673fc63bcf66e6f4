"""Programs ResultDestination (egress): where each rank's copy of a result goes."""

from __future__ import annotations

from p4reduce.addresses import WorkerAddress, ip_int, mac_int

from .connection import SwitchConnection, table_entity

SECTION = "Result destination"  # docs/protocol.md, in section 12
TABLES = ("result_destination",)
JOB_COUNTERS: tuple[str, ...] = ()
SWITCH_COUNTERS = ("no_destination_drops",)


def destination_entry(
    conn: SwitchConnection, job: int, worker: WorkerAddress, with_action: bool = True
):
    match = {"job": job, "rank": worker.rank}
    if not with_action:
        return conn.p4.table_entry("result_destination", match)
    return conn.p4.table_entry(
        "result_destination",
        match,
        "set_destination",
        {"mac": mac_int(worker.mac), "ip": ip_int(worker.ip), "udp_port": worker.udp_port},
    )


def add_destinations(conn: SwitchConnection, job: int, workers: list[WorkerAddress]) -> None:
    conn.insert(*(table_entity(destination_entry(conn, job, w)) for w in workers))


def remove_destinations(conn: SwitchConnection, job: int, workers: list[WorkerAddress]) -> None:
    conn.delete(*(table_entity(destination_entry(conn, job, w, False)) for w in workers))
