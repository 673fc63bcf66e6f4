"""Programs Uplink (p4src/v1model/uplink.p4, p4src/tna/uplink.p4): a job's way from a
leaf to the spine in the leaf role (docs/fabric.md, "The leaf and spine roles";
docs/tofino.md, "The leaf role on TNA").

A leaf's job has one `uplink` entry (job -> the leaf's port towards the spine, the spine's
MAC and IPv4, the leaf's rank in the spine's job) and one more admission entry: the
spine's RESULT arriving on that port from the spine's addresses, with the leaf's rank in
the spine's job, is admitted with the job's parameters (so it reaches the job's slots)
and stored as the round's result. A job without them is a one-switch job.

Both programs declare the uplink table with the same names, so the P4Info parity of
controlplane/surface.py covers it. A build without the leaf role (a Tofino build that
leaves it out: docs/tofino.md) has no uplink table, and a leaf's job is refused there
(`check_leaf_role`) instead of being admitted as a one-switch job that would multicast
each leaf's partial to its ranks as the result.
"""

from __future__ import annotations

from p4reduce.addresses import WorkerAddress, ip_int, mac_int
from p4reduce.wire import UDP_PORT_BASE
from p4reduce.job import Job, JobError, Uplink
from p4reduce.target import TARGETS

from . import admission
from .connection import SwitchConnection, table_entity

SECTION = "Across two levels"  # docs/protocol.md, in section 13
TABLES = ("uplink",)
JOB_COUNTERS: tuple[str, ...] = ()
SWITCH_COUNTERS: tuple[str, ...] = ()


def check_leaf_role(conn: SwitchConnection, job: Job) -> None:
    """JobError for a leaf's job on a switch whose program has no leaf role (no `uplink`
    table in its P4Info), naming the target (from the P4Info's architecture) and the
    builds that have the role."""
    if job.uplink is None or conn.p4.has_table("uplink"):
        return
    arch = conn.p4.proto.pkg_info.arch or "unknown"
    target = next((t.name for t in TARGETS.values() if t.arch == arch), "unknown")
    raise JobError(
        f"job {job.job}: the switch at {conn.grpc_addr} runs a {target} ({arch}) build "
        f"without the leaf role (its P4Info has no uplink table), so it cannot be this job's leaf: "
        f"load a build with the leaf role (the v1model program, or a Tofino build with the "
        f"winner check -- either production build, Tofino 2's test build: docs/tofino.md, "
        f"'The leaf role on TNA') or make this switch the job's only one"
    )


def spine_as_sender(uplink: Uplink) -> WorkerAddress:
    """The spine as admission sees its RESULTs at the leaf: on the uplink port, from the
    spine's addresses, with the leaf's rank in the spine's job."""
    return WorkerAddress(uplink.rank, uplink.port, uplink.mac, uplink.ip, UDP_PORT_BASE)


def uplink_entry(conn: SwitchConnection, job: int, uplink: Uplink, with_action: bool = True):
    match = {"job": job}
    if not with_action:
        return conn.p4.table_entry("uplink", match)
    return conn.p4.table_entry(
        "uplink",
        match,
        "set_uplink",
        {
            "port": conn.ports(uplink.port),
            "spine_mac": mac_int(uplink.mac),
            "spine_ip": ip_int(uplink.ip),
            "rank": uplink.rank,
        },
    )


def job_entries(conn: SwitchConnection, job: Job) -> list:
    """A leaf's job's entries of the leaf role (none for any other job)."""
    if job.uplink is None:
        return []
    check_leaf_role(conn, job)
    params = admission.job_parameters(job)
    return [
        uplink_entry(conn, job.job, job.uplink),
        admission.admission_entry(conn, params, spine_as_sender(job.uplink)),
    ]


def add(conn: SwitchConnection, job: Job) -> None:
    entries = job_entries(conn, job)
    if entries:
        conn.insert(*(table_entity(e) for e in entries))


def remove(conn: SwitchConnection, job: Job) -> None:
    if job.uplink is None:
        return
    params = admission.job_parameters(job)
    conn.delete(
        table_entity(uplink_entry(conn, job.job, job.uplink, False)),
        table_entity(admission.admission_entry(conn, params, spine_as_sender(job.uplink), False)),
    )
