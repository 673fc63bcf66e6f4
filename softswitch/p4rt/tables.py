"""TableEntry writes and reads (PI device_mgr.cpp table_write / table_read).

Each check happens in PI's order, with PI's code and message, before the target is
touched; the target (``SwitchTarget.table_*``) only sees valid entries in its own form
(match.py converts).  Entry metadata the target does not keep lives in
``Pipeline.entries``.
"""

from __future__ import annotations

import logging

from p4.v1 import p4runtime_pb2

from p4reduce.p4rt import ActionScope, CodecError, P4Ids, TableInfo, decode, encode

from .match import fill_match, from_switch_entry, match_key, switch_priority, to_switch_match
from .state import DEFAULT_KEY, EntryMeta, Pipeline, out_entity
from .status import Code, P4RTError, invalid_p4_id, target_call

log = logging.getLogger("softswitch.p4runtime")

Update = p4runtime_pb2.Update
# bmv2's PI layer inverts priorities around INT_MAX; a larger one is a target error.
BM_MAX_PRIORITY = (1 << 31) - 1


# -- writes ------------------------------------------------------------------------------


def table_write(pl: Pipeline, utype: int, te: p4runtime_pb2.TableEntry) -> None:
    if not pl.info.is_valid_id(te.table_id, P4Ids.TABLE):
        raise invalid_p4_id()
    if te.HasField("time_since_last_hit"):
        raise P4RTError(
            Code.INVALID_ARGUMENT, "has_time_since_last_hit must not be set in WriteRequest"
        )
    if utype == Update.UNSPECIFIED:
        raise P4RTError(Code.INVALID_ARGUMENT, "Update type is not set")
    if utype == Update.INSERT:
        _insert(pl, te)
    elif utype == Update.MODIFY:
        _modify(pl, te)
    elif utype == Update.DELETE:
        _delete(pl, te)
    else:
        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid update type")


def _insert(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
    if te.is_default_action:
        raise P4RTError(Code.INVALID_ARGUMENT, "Cannot use INSERT for default entry")
    if not te.HasField("action"):
        raise P4RTError(Code.INVALID_ARGUMENT, "'action' field must be set")
    t = pl.info.tables[te.table_id]
    key = match_key(pl, te)
    _validate_action(pl, te)
    action, params = _action_data(pl, t, te.action)
    _direct_resources(pl, te)
    _validate_ttl(pl, te)
    store = pl.entries[t.id]
    if key in store:
        raise P4RTError(
            Code.ALREADY_EXISTS, "Match entry exists, use MODIFY if you wish to change action"
        )
    if key[1] < 0 or key[1] > BM_MAX_PRIORITY:
        raise P4RTError(
            Code.UNKNOWN, "Error when adding match entry to target (unsupported priority)"
        )
    target_call(
        "Error when adding match entry to target",
        pl.switch.table_add,
        t.name,
        to_switch_match(pl, t, key),
        action,
        params,
        switch_priority(t, key),
    )
    store[key] = EntryMeta(te.controller_metadata, bytes(te.metadata), te.idle_timeout_ns)


def _modify(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
    t = pl.info.tables[te.table_id]
    key = match_key(pl, te)
    _validate_action(pl, te)
    action_data = None
    if te.HasField("action"):
        action_data = _action_data(pl, t, te.action)
    elif not te.is_default_action:
        raise P4RTError(Code.INVALID_ARGUMENT, "'action' field must be set for non-default entries")
    _direct_resources(pl, te)
    _validate_ttl(pl, te)
    meta = pl.entries[t.id].get(key)
    if meta is None:
        raise P4RTError(Code.NOT_FOUND, "Cannot find match entry")
    error = "Error when modifying match entry in target"
    if not te.is_default_action:
        assert action_data is not None
        target_call(
            error,
            pl.switch.table_modify,
            t.name,
            to_switch_match(pl, t, key),
            action_data[0],
            action_data[1],
            switch_priority(t, key),
        )
    elif action_data is not None:
        target_call(error, pl.switch.table_set_default, t.name, action_data[0], action_data[1])
    else:
        target_call(error, pl.switch.table_reset_default, t.name)
    if action_data is None:
        meta.controller_metadata, meta.metadata, meta.idle_timeout_ns = 0, b"", 0
    else:
        meta.controller_metadata = te.controller_metadata
        meta.metadata = bytes(te.metadata)
        meta.idle_timeout_ns = te.idle_timeout_ns


def _delete(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
    if te.is_default_action:
        raise P4RTError(Code.INVALID_ARGUMENT, "Cannot use DELETE for default entry")
    t = pl.info.tables[te.table_id]
    key = match_key(pl, te)
    store = pl.entries[t.id]
    if key not in store:
        raise P4RTError(Code.NOT_FOUND, "Cannot find match entry")
    target_call(
        "Error when deleting match entry in target",
        pl.switch.table_delete,
        t.name,
        to_switch_match(pl, t, key),
        switch_priority(t, key),
    )
    del store[key]


def _validate_action(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
    """PI validate_action (INSERT and MODIFY)."""
    t = pl.info.tables[te.table_id]
    indirect = t.implementation_id != 0
    if indirect and te.is_default_action:
        raise P4RTError(
            Code.INVALID_ARGUMENT, f"Cannot set / reset default action for indirect table {t.id}"
        )
    if te.is_default_action and t.const_default_action_id:
        raise P4RTError(
            Code.PERMISSION_DENIED,
            f"Cannot set / reset default action for table {t.id} which has a const default action",
        )
    if not te.HasField("action"):
        return
    kind = te.action.WhichOneof("type")
    if indirect and kind == "action":
        raise P4RTError(
            Code.INVALID_ARGUMENT, f"Cannot provide direct action for indirect table {t.id}"
        )
    if not indirect and kind != "action":
        raise P4RTError(
            Code.INVALID_ARGUMENT, f"Cannot provide indirect action for direct table {t.id}"
        )
    if indirect:
        return
    aid = te.action.action.action_id
    if not pl.info.is_valid_id(aid, P4Ids.ACTION):
        raise invalid_p4_id()
    scope = t.action_scopes.get(aid)
    if scope is None:
        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid action for table")
    if scope == ActionScope.TABLE_ONLY and te.is_default_action:
        raise P4RTError(Code.PERMISSION_DENIED, "Cannot use TABLE_ONLY action as default action")
    if scope == ActionScope.DEFAULT_ONLY and not te.is_default_action:
        raise P4RTError(Code.PERMISSION_DENIED, "Cannot use DEFAULT_ONLY action in table entry")


def _action_data(
    pl: Pipeline, table: TableInfo, action: p4runtime_pb2.TableAction
) -> tuple[str, list[int]]:
    """PI construct_action_data -> (JSON action name, params in JSON order)."""
    if table.implementation_id != 0:
        raise P4RTError(
            Code.UNIMPLEMENTED, "softswitch does not implement action profiles / selectors"
        )
    a = pl.info.actions[action.action.action_id]
    params = action.action.params
    if len(params) != len(a.params):
        raise P4RTError(Code.INVALID_ARGUMENT, "Unexpected number of action parameters")
    values: dict[int, int] = {}
    for p in params:
        info = a.param(p.param_id)
        if info is None:
            raise P4RTError(Code.INVALID_ARGUMENT, "Unknown action parameter")
        try:
            values[p.param_id] = decode(p.value, info.bitwidth)
        except CodecError as exc:
            raise P4RTError(Code.INVALID_ARGUMENT, str(exc)) from None
    if len(values) != len(a.params):
        raise P4RTError(Code.INVALID_ARGUMENT, "Duplicate action parameter")
    order = pl.binding.actions[a.id].json_param_order
    return a.name, [values[a.params[i].id] for i in order]


def _direct_resources(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
    t = pl.info.tables[te.table_id]
    if te.HasField("meter_config"):
        if not t.direct_resource(P4Ids.DIRECT_METER):
            raise P4RTError(Code.INVALID_ARGUMENT, "Table has no direct meters")
        raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement direct meters")
    if te.HasField("counter_data"):
        if not t.direct_resource(P4Ids.DIRECT_COUNTER):
            raise P4RTError(Code.INVALID_ARGUMENT, "Table has no direct counters")
        raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement direct counters")


def _validate_ttl(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> None:
    t = pl.info.tables[te.table_id]
    if te.idle_timeout_ns < 0:
        raise P4RTError(Code.INVALID_ARGUMENT, "idle_timeout_ns must be a positive value")
    if te.idle_timeout_ns > 0 and not t.supports_idle_timeout:
        raise P4RTError(
            Code.INVALID_ARGUMENT,
            "idle_timeout_ns must be set to 0 for tables which do not support idle timeout",
        )
    if te.idle_timeout_ns > 0:
        raise P4RTError(Code.UNIMPLEMENTED, "softswitch does not implement idle timeout")


# -- reads -------------------------------------------------------------------------------


def table_read(pl: Pipeline, te: p4runtime_pb2.TableEntry, out: list[p4runtime_pb2.Entity]) -> None:
    """Entries matching the request: ``table_id`` 0 reads every table in P4Info order."""
    if te.table_id == 0:
        for t_id in pl.info.tables:
            _read_table(pl, t_id, te, out)
        return
    if not pl.info.is_valid_id(te.table_id, P4Ids.TABLE):
        raise invalid_p4_id()
    _read_table(pl, te.table_id, te, out)


def _read_table(
    pl: Pipeline, t_id: int, req: p4runtime_pb2.TableEntry, out: list[p4runtime_pb2.Entity]
) -> None:
    t = pl.info.tables[t_id]
    if req.is_default_action:
        _read_default(pl, t, req, out)
        return
    if req.HasField("time_since_last_hit") and not t.supports_idle_timeout:
        raise P4RTError(
            Code.INVALID_ARGUMENT,
            "Do not set time_since_last_hit for a ReadRequest if the table "
            "does not support idle timeout; yes, that includes wildcard reads",
        )
    wanted = None
    if len(req.match) > 0:
        probe = p4runtime_pb2.TableEntry()
        probe.CopyFrom(req)
        probe.table_id = t_id
        wanted = match_key(pl, probe)
    entries = target_call(
        "Error when reading table entries from target", pl.switch.table_entries, t.name
    )
    store = pl.entries.get(t.id, {})
    for entry in entries:
        key = from_switch_entry(pl, t, entry)
        if wanted is not None and key != wanted:
            continue
        te = out_entity(out).table_entry
        te.table_id = t.id
        fill_match(t, key, te)
        _fill_action(pl, t, entry.action, entry.params, te)
        if t.is_const:
            continue  # PI: const entries are not in its store, no metadata to return
        meta = store.get(key)
        if meta is not None:
            te.controller_metadata = meta.controller_metadata
            te.metadata = meta.metadata
            te.idle_timeout_ns = meta.idle_timeout_ns


def _read_default(
    pl: Pipeline, t: TableInfo, req: p4runtime_pb2.TableEntry, out: list[p4runtime_pb2.Entity]
) -> None:
    if req.HasField("time_since_last_hit"):
        raise P4RTError(
            Code.INVALID_ARGUMENT,
            "Default table entries do not support entry ageing, do not set "
            "'time_since_last_hit' in your ReadRequest",
        )
    action, params = target_call(
        "Error when reading default entry from target", pl.switch.table_get_default, t.name
    )
    te = out_entity(out).table_entry
    te.table_id = t.id
    te.is_default_action = True
    if action:
        _fill_action(pl, t, action, params, te)
    meta = pl.entries.get(t.id, {}).get(DEFAULT_KEY)
    if meta is not None:
        te.controller_metadata = meta.controller_metadata
        te.metadata = meta.metadata


def _fill_action(
    pl: Pipeline, t: TableInfo, action: str, params: list[int], te: p4runtime_pb2.TableEntry
) -> None:
    a = next((x for x in pl.info.actions.values() if x.name == action), None)
    if a is None:
        log.warning("table %s: action %r is not in the P4Info, read without action", t.name, action)
        return
    act = te.action.action
    act.action_id = a.id
    order = pl.binding.actions[a.id].json_param_order
    by_p4info = [0] * len(a.params)
    for j, i in enumerate(order):
        if j < len(params):
            by_p4info[i] = int(params[j])
    for p, v in zip(a.params, by_p4info):
        act.params.add(param_id=p.id, value=encode(v))
