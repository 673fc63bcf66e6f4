"""Reconciling a switch's tables and multicast groups with the controller's state.

Why: pushing the pipeline again resets every register, so jobs that are running when a
controller restarts would lose their slots' partial rounds and fail (SwitchStateLost).
When the switch already runs our pipeline, the controller instead reads what is there,
writes what is missing, modifies what differs and removes what is stale, and leaves every
matching entry (and every register) alone: on a switch that is already right it sends no
write at all. After a fresh pipeline push the same code fills empty tables.

Entries of const tables (fixed by the program, as the TNA program's rank_bit, bridge_flags
and pair_* are) are neither taken for stale nor written: a P4Runtime server refuses both.

The desired state is the configuration (identity, flooding, L2 hosts) plus every job of the
state file (admission, result destinations, multicast group, drop simulator). Entries are
compared by their P4Runtime content (table, match, priority -> action), with values
decoded to integers because targets may return byte strings padded differently.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from . import (
    admission,
    drop_simulator,
    forwarding,
    identity,
    result_destination,
    silent_spine,
    uplink,
)
from p4reduce.job import Job

from .config import SwitchConfig
from .connection import SwitchConnection, SwitchError, table_entity
from .replication import flood_replicas, job_replicas, multicast_group, read_groups

log = logging.getLogger(__name__)

# Tables in the order missing entries are written (what an entry refers to first: a
# result needs its destinations before admission lets the job's packets in); stale
# entries are removed in the reverse order.
WRITE_ORDER = ("result_destination", "drop_simulator", "l2_forward", "uplink", "admission")

EntryKey = tuple
Replicas = list[tuple[int, int]]


@dataclass
class DesiredState:
    entries: list[p4runtime_pb2.TableEntry] = field(default_factory=list)
    defaults: list[p4runtime_pb2.TableEntry] = field(default_factory=list)
    groups: dict[int, Replicas] = field(default_factory=dict)


@dataclass
class ReconcileReport:
    """What reconciling changed, per kind (all zero: the switch was already right)."""

    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    kept: int = 0
    groups_inserted: int = 0
    groups_modified: int = 0
    groups_deleted: int = 0
    defaults_modified: int = 0

    @property
    def changes(self) -> int:
        return (
            self.inserted
            + self.modified
            + self.deleted
            + self.groups_inserted
            + self.groups_modified
            + self.groups_deleted
            + self.defaults_modified
        )


def job_entries(conn: SwitchConnection, job: Job) -> list[p4runtime_pb2.TableEntry]:
    """Every table entry of one job (its multicast group is separate)."""
    entries = [result_destination.destination_entry(conn, job.job, w) for w in job.workers]
    if job.loss:
        entries.append(drop_simulator.loss_entry(conn, job.job, **job.loss))
    entries += [
        admission.admission_entry(conn, admission.job_parameters(job), w) for w in job.workers
    ]
    return entries + uplink.job_entries(conn, job) + silent_spine.job_entries(conn, job)


def desired_state(conn: SwitchConnection, sw: SwitchConfig, jobs: Iterable[Job]) -> DesiredState:
    state = DesiredState()
    state.defaults.append(identity.identity_entry(conn, sw.mac, sw.ip))
    state.groups[sw.flood_group] = flood_replicas(conn, sw.ports)
    state.entries.append(forwarding.flood_entry(conn, sw.flood_group))
    state.entries += [forwarding.l2_entry(conn, h.mac, h.port) for h in sw.hosts]
    for job in jobs:
        state.groups[admission.job_parameters(job).mcast_grp] = job_replicas(conn, job)
        state.entries += job_entries(conn, job)
    return state


def _ints(msg) -> tuple:
    """A match field or action as comparable ints (bytes decoded, fields by number)."""
    out = []
    for desc, value in msg.ListFields():
        if isinstance(value, bytes):
            value = int.from_bytes(value, "big")
        elif hasattr(value, "ListFields"):
            value = _ints(value)
        out.append((desc.number, value))
    return tuple(out)


def entry_key(entry: p4runtime_pb2.TableEntry) -> EntryKey:
    return (
        entry.table_id,
        entry.priority,
        tuple(sorted((m.field_id, _ints(m)) for m in entry.match)),
    )


def entry_action(entry: p4runtime_pb2.TableEntry) -> tuple:
    action = entry.action
    if action.HasField("action"):
        return (
            "action",
            action.action.action_id,
            tuple(
                sorted((p.param_id, int.from_bytes(p.value, "big")) for p in action.action.params)
            ),
        )
    return ("other", action.SerializeToString(deterministic=True))


def _update(kind: int, entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=kind, entity=entity)


def read_entries(conn: SwitchConnection) -> list[p4runtime_pb2.TableEntry]:
    """Every non-default entry of every table the controller may write (one wildcard
    read). Entries of const tables are the program's, not the controller's: they are
    never stale, and deleting one fails (P4InfoIndex.is_const_table)."""
    query = p4runtime_pb2.Entity()
    query.table_entry.table_id = 0
    return [
        e.table_entry
        for e in conn.read(query)
        if not e.table_entry.is_default_action
        and not conn.p4.is_const_table(e.table_entry.table_id)
    ]


def _read_default(conn: SwitchConnection, table_id: int) -> p4runtime_pb2.TableEntry | None:
    query = p4runtime_pb2.Entity()
    query.table_entry.table_id = table_id
    query.table_entry.is_default_action = True
    try:
        found = conn.read(query)
    except SwitchError:
        return None  # cannot tell: the caller writes it
    return found[0].table_entry if found else None


def reconcile(conn: SwitchConnection, desired: DesiredState) -> ReconcileReport:
    """Make the switch hold exactly `desired`, touching only what differs."""
    report = ReconcileReport()
    # a table the program lacks (a production Tofino build has no drop_simulator) has no
    # entries to order
    order = {
        conn.p4.table(name).id: i for i, name in enumerate(WRITE_ORDER) if conn.p4.has_table(name)
    }

    # multicast groups first: admission entries name them
    current_groups = read_groups(conn)
    writes: list[p4runtime_pb2.Update] = []
    for gid, replicas in sorted(desired.groups.items()):
        have = current_groups.get(gid)
        if have is None:
            writes.append(_update(p4runtime_pb2.Update.INSERT, multicast_group(gid, replicas)))
            report.groups_inserted += 1
        elif sorted(have) != sorted(replicas):
            writes.append(_update(p4runtime_pb2.Update.MODIFY, multicast_group(gid, replicas)))
            report.groups_modified += 1
    conn.write(writes)

    for entry in desired.defaults:
        have = _read_default(conn, entry.table_id)
        if have is None or entry_action(have) != entry_action(entry):
            conn.modify(table_entity(entry))
            report.defaults_modified += 1

    current = {entry_key(e): e for e in read_entries(conn)}
    wanted = {entry_key(e): e for e in desired.entries}
    inserts: list[p4runtime_pb2.TableEntry] = []
    modifies: list[p4runtime_pb2.TableEntry] = []
    for key, entry in wanted.items():
        have = current.get(key)
        if have is None:
            inserts.append(entry)
        elif entry_action(have) != entry_action(entry):
            modifies.append(entry)
        else:
            report.kept += 1
    stale = [e for key, e in current.items() if key not in wanted]
    rank = lambda e: order.get(e.table_id, len(order))  # noqa: E731
    for kind, entries in (
        (p4runtime_pb2.Update.MODIFY, modifies),
        (p4runtime_pb2.Update.INSERT, inserts),
    ):
        for table_rank in sorted({rank(e) for e in entries}):
            conn.write(_update(kind, table_entity(e)) for e in entries if rank(e) == table_rank)
    report.inserted, report.modified = len(inserts), len(modifies)
    for table_rank in sorted({rank(e) for e in stale}, reverse=True):
        doomed = [e for e in stale if rank(e) == table_rank]
        for e in doomed:
            e.ClearField("action")  # a DELETE names the key only
        conn.write(_update(p4runtime_pb2.Update.DELETE, table_entity(e)) for e in doomed)
    report.deleted = len(stale)

    stale_groups = sorted(set(current_groups) - set(desired.groups))
    conn.write(
        _update(p4runtime_pb2.Update.DELETE, multicast_group(gid, [])) for gid in stale_groups
    )
    report.groups_deleted = len(stale_groups)
    if report.changes:
        log.info("reconciled: %s", report)
    return report
