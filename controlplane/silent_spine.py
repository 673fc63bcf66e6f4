"""Programs SilentSpine (p4src/v1model/silent_spine.p4): the spine of a two-level job of
silent rounds expects every leaf in every round (docs/fabric.md, "Silent rounds on a
fabric").

Each leaf of such a job runs silent rounds towards its ranks and sends the spine a
partial in every round (an empty one when none of its ranks took part), so the spine's
job has one `silent_spine` entry (job -> every_leaf): its rounds wait for every leaf, and
it never runs more than one round ahead of one. A one-switch job, a leaf's and an
every-rank spine's have none. The TNA program runs no silent job (docs/tofino.md) and
has no such table.
"""

from __future__ import annotations

from p4reduce.job import Job

from .connection import SwitchConnection, table_entity

SECTION = "Across two levels"  # docs/protocol.md, in section 13
TABLES = ("silent_spine",)
JOB_COUNTERS: tuple[str, ...] = ()
SWITCH_COUNTERS: tuple[str, ...] = ()


def spine_entry(conn: SwitchConnection, job: int, with_action: bool = True):
    if not with_action:
        return conn.p4.table_entry("silent_spine", {"job": job})
    return conn.p4.table_entry("silent_spine", {"job": job}, "every_leaf", {})


def job_entries(conn: SwitchConnection, job: Job) -> list:
    """The spine's entry of a silent job in the leaf and spine roles (none for another)."""
    return [spine_entry(conn, job.job)] if job.silent and job.spine_role else []


def add(conn: SwitchConnection, job: Job) -> None:
    entries = job_entries(conn, job)
    if entries:
        conn.insert(*(table_entity(e) for e in entries))


def remove(conn: SwitchConnection, job: Job) -> None:
    if job_entries(conn, job):
        conn.delete(table_entity(spine_entry(conn, job.job, False)))
