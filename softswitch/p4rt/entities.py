"""Write and Read, one entity at a time: dispatch by entity kind (PI DeviceMgr::write_ /
read_ per entity).

The entities softswitch implements go to their module (tables, pre, counters); the ones
it has no state for answer UNIMPLEMENTED, but only after the checks PI makes first
(invalid id, "Table has no direct counters", ...), so that a controller sees the same
answer for a request that is wrong on both targets.
"""

from __future__ import annotations

from typing import Sequence

from p4.v1 import p4runtime_pb2

from p4reduce.p4rt import P4Ids

from ..interface import SwitchTarget
from .counters import counter_read, counter_write, register_read
from .pre import BmPre, pre_read, pre_write
from .state import Pipeline
from .status import Code, P4RTError, invalid_p4_id
from .tables import table_read, table_write


def _unimplemented(what: str) -> P4RTError:
    return P4RTError(Code.UNIMPLEMENTED, f"softswitch does not implement {what}")


def write_one(
    pl: Pipeline,
    utype: int,
    entity: p4runtime_pb2.Entity,
    pre: BmPre,
    targets: Sequence[SwitchTarget],
) -> None:
    """One update; raises P4RTError.  ``pre``/``targets``: the device's replication engine
    and every live target, for multicast writes."""
    which = entity.WhichOneof("entity")
    info = pl.info
    if which == "table_entry":
        table_write(pl, utype, entity.table_entry)
    elif which == "packet_replication_engine_entry":
        pre_write(pl, utype, entity.packet_replication_engine_entry, pre, targets)
    elif which == "counter_entry":
        counter_write(pl, utype, entity.counter_entry)
    elif which == "register_entry":
        # As PI: simple_switch_grpc has no register writes; nobody should design around one.
        raise P4RTError(Code.UNIMPLEMENTED, "Register writes are not supported yet")
    elif which == "value_set_entry":
        raise P4RTError(Code.UNIMPLEMENTED, "ValueSet writes are not supported yet")
    elif which == "extern_entry":
        raise P4RTError(Code.UNIMPLEMENTED, "")
    elif which in ("action_profile_member", "action_profile_group"):
        if not info.is_valid_id(getattr(entity, which).action_profile_id, P4Ids.ACTION_PROFILE):
            raise invalid_p4_id()
        raise _unimplemented("action profiles")
    elif which == "meter_entry":
        if not info.is_valid_id(entity.meter_entry.meter_id, P4Ids.METER):
            raise invalid_p4_id()
        raise _unimplemented("meters")
    elif which in ("direct_counter_entry", "direct_meter_entry"):
        _direct_entry(pl, which, getattr(entity, which), reading=False)
    elif which == "digest_entry":
        if not info.is_valid_id(entity.digest_entry.digest_id, P4Ids.DIGEST):
            raise invalid_p4_id()
        raise _unimplemented("digests")
    else:
        raise P4RTError(Code.UNKNOWN, "Incorrect entity type")


def read_one(pl: Pipeline, ent: p4runtime_pb2.Entity, out: list[p4runtime_pb2.Entity]) -> None:
    """Append what ``ent`` addresses to ``out``; raises P4RTError."""
    which = ent.WhichOneof("entity")
    info = pl.info
    if which == "table_entry":
        table_read(pl, ent.table_entry, out)
    elif which == "packet_replication_engine_entry":
        pre_read(pl, ent.packet_replication_engine_entry, out)
    elif which == "counter_entry":
        counter_read(pl, ent.counter_entry, out)
    elif which == "register_entry":
        register_read(pl, ent.register_entry, out)
    elif which in ("action_profile_member", "action_profile_group"):
        _read_unimplemented(
            pl,
            getattr(ent, which).action_profile_id,
            P4Ids.ACTION_PROFILE,
            bool(info.action_profiles),
            "action profiles",
        )
    elif which == "meter_entry":
        _read_unimplemented(pl, ent.meter_entry.meter_id, P4Ids.METER, bool(info.meters), "meters")
    elif which in ("direct_counter_entry", "direct_meter_entry"):
        _direct_entry(pl, which, getattr(ent, which), reading=True)
    elif which == "value_set_entry":
        raise P4RTError(Code.UNIMPLEMENTED, "ValueSet reads are not supported yet")
    elif which == "digest_entry":
        d_id = ent.digest_entry.digest_id
        if d_id == 0 and not info.digests:
            return
        if d_id != 0 and not info.is_valid_id(d_id, P4Ids.DIGEST):
            raise invalid_p4_id()
        raise _unimplemented("digests")
    else:
        raise P4RTError(Code.UNKNOWN, "Incorrect entity type")


def _read_unimplemented(
    pl: Pipeline, p4_id: int, prefix: int, any_declared: bool, what: str
) -> None:
    """A read of an entity kind softswitch has no state for: a wildcard read of a kind the
    program does not have is empty, as on bmv2."""
    if p4_id == 0:
        if any_declared:
            raise _unimplemented(what)
        return
    if not pl.info.is_valid_id(p4_id, prefix):
        raise invalid_p4_id()
    raise _unimplemented(what)


def _direct_entry(
    pl: Pipeline,
    which: str,
    sub: p4runtime_pb2.DirectCounterEntry | p4runtime_pb2.DirectMeterEntry,
    *,
    reading: bool,
) -> None:
    counter = which == "direct_counter_entry"
    kind = "counters" if counter else "meters"
    if not sub.HasField("table_entry"):
        label = "DirectCounterEntry" if counter else "DirectMeterEntry"
        raise P4RTError(Code.INVALID_ARGUMENT, f"Missing table_entry field in {label}")
    table_id = sub.table_entry.table_id
    if reading and table_id == 0:
        raise P4RTError(
            Code.UNIMPLEMENTED, f"Reading all direct {kind} for ALL tables is not supported yet"
        )
    if not pl.info.is_valid_id(table_id, P4Ids.TABLE):
        raise invalid_p4_id()
    t = pl.info.tables[table_id]
    if not t.direct_resource(P4Ids.DIRECT_COUNTER if counter else P4Ids.DIRECT_METER):
        raise P4RTError(Code.INVALID_ARGUMENT, f"Table has no direct {kind}")
    raise _unimplemented(f"direct {kind}")
