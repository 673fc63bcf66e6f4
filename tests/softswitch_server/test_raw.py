"""Raw P4Runtime against softswitch: the codes and shapes PI / simple_switch_grpc produce.

Each expectation names the PI source it mirrors (p4lang/PI proto/server/pi_server.cpp,
proto/frontend/src/device_mgr.cpp, pre_mc_mgr.cpp, packet_io_mgr.cpp, common.cpp).
"""

from __future__ import annotations

import json

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from .helpers import (
    RawClient,
    SetAction,
    Update,
    batch_errors,
    device_config,
    ethernet,
    exact_entry,
    update,
)

DST2 = bytes.fromhex("020000000002")
DST3 = bytes.fromhex("020000000003")
GetType = p4runtime_pb2.GetForwardingPipelineConfigRequest


def table_read(client: RawClient, table_id: int = 0, default: bool = False):
    ent = p4runtime_pb2.Entity()
    ent.table_entry.table_id = table_id
    ent.table_entry.is_default_action = default
    return client.read(ent)


# -- no pipeline, arbitration ------------------------------------------------------------


def test_no_pipeline_is_failed_precondition(harness, ids):
    c = RawClient(harness.addr)
    try:
        with pytest.raises(grpc.RpcError) as exc:
            c.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
        assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.RpcError) as exc:
            c.get_pipeline()
        assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        # no stream open + no election id: PI accepts (convenient for grpc_cli) -> no pipeline
        with pytest.raises(grpc.RpcError) as exc:
            c.write(update(Update.INSERT, exact_entry(ids, DST2, 2)), election=False)
        assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        # no stream open but an election id: "Not primary"
        with pytest.raises(grpc.RpcError) as exc:
            c.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))
        assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        c.close()


def test_arbitration_status_and_failover(loaded, raw, ids):
    backup = RawClient(loaded.addr)
    try:
        arb = backup.arbitrate((0, 0))
        assert arb.status.code == code_pb2.ALREADY_EXISTS  # "Is backup"
        assert (arb.election_id.high, arb.election_id.low) == (0, 1)  # the primary's id
        with pytest.raises(grpc.RpcError) as exc:
            backup.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))
        assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert exc.value.details() == "Not primary"

        # a third client with the same election id as the primary is refused
        dup = RawClient(loaded.addr)
        try:
            err = dup.arbitrate((0, 1))
            assert isinstance(err, grpc.RpcError)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        finally:
            dup.close()

        # the primary leaves: the backup is told it is primary now, and may write
        raw.close_stream()
        arb = backup.next_arbitration()
        assert arb.status.code == code_pb2.OK
        assert (arb.election_id.high, arb.election_id.low) == (0, 0)
        backup.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))

        # a new client with a higher id takes over; the old primary is told it is backup
        boss = RawClient(loaded.addr)
        try:
            assert boss.arbitrate((1, 0)).status.code == code_pb2.OK
            arb = backup.next_arbitration()
            assert arb.status.code == code_pb2.ALREADY_EXISTS
            assert (arb.election_id.high, arb.election_id.low) == (1, 0)
        finally:
            boss.close()
    finally:
        backup.close()


# -- SetForwardingPipelineConfig / GetForwardingPipelineConfig -------------------------


def test_get_pipeline_response_types_and_cookie(harness, raw, p4info):
    raw.set_pipeline(p4info, device_config(), cookie=42)
    full = raw.get_pipeline(GetType.ALL)
    assert full.p4info == p4info and full.p4_device_config == device_config()
    assert full.cookie.cookie == 42
    only = raw.get_pipeline(GetType.COOKIE_ONLY)
    assert not only.HasField("p4info") and not only.p4_device_config and only.cookie.cookie == 42
    pc = raw.get_pipeline(GetType.P4INFO_AND_COOKIE)
    assert pc.p4info == p4info and not pc.p4_device_config
    dc = raw.get_pipeline(GetType.DEVICE_CONFIG_AND_COOKIE)
    assert not dc.HasField("p4info") and dc.p4_device_config == device_config()


def test_corrupt_json_is_rejected_and_old_pipeline_stays(loaded, raw, p4info, ids):
    raw.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))
    for bad in (b"{not json", b"[1, 2]", json.dumps({"pipelines": "x"}).encode()):
        with pytest.raises(grpc.RpcError) as exc:
            raw.set_pipeline(p4info, bad)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.value.details()
    # old pipeline and its state are intact, control and data plane
    assert len(table_read(raw, ids.table("l2_exact").id)) == 1
    loaded.ports.inject(1, ethernet(DST2))
    assert loaded.ports.get(2, timeout=2) == ethernet(DST2)


def test_p4info_not_matching_json_is_rejected(loaded, raw, p4info, ids):
    raw.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))
    doc = json.loads(device_config())
    for pipe in doc["pipelines"]:
        pipe["tables"] = [t for t in pipe["tables"] if not t["name"].endswith("route_lpm")]
    with pytest.raises(grpc.RpcError) as exc:
        raw.set_pipeline(p4info, json.dumps(doc).encode())
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "route_lpm" in exc.value.details()
    assert len(table_read(raw, ids.table("l2_exact").id)) == 1

    # a P4Info naming a table the JSON lacks
    other = type(p4info)()
    other.CopyFrom(p4info)
    other.tables[0].preamble.name = "TestIngress.no_such_table"
    with pytest.raises(grpc.RpcError) as exc:
        raw.set_pipeline(other, device_config())
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "no_such_table" in exc.value.details()


def test_verify_only_checks_the_p4info(harness, raw, p4info):
    # PI: VERIFY imports the P4Info and nothing else
    raw.set_pipeline(p4info, b"garbage", action=SetAction.VERIFY)
    with pytest.raises(grpc.RpcError) as exc:
        raw.set_pipeline(p4info, device_config(), action=SetAction.UNSPECIFIED)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # after a SetForwardingPipelineConfig, Get answers (an empty config) instead of
    # FAILED_PRECONDITION, as PI's DeviceMgr now exists
    assert raw.get_pipeline() == p4runtime_pb2.ForwardingPipelineConfig()


def test_verify_and_save_then_commit(harness, raw, p4info, ids):
    raw.set_pipeline(p4info, device_config(), action=SetAction.VERIFY_AND_SAVE)
    # control plane sees the saved pipeline ...
    assert raw.get_pipeline(GetType.P4INFO_AND_COOKIE).p4info == p4info
    raw.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))
    # ... the data plane does not until COMMIT
    harness.ports.inject(1, ethernet(DST2))
    assert harness.ports.poll(2, timeout=0.2) is None
    # a second load while one waits for COMMIT fails (bmv2: ONGOING_SWAP)
    with pytest.raises(grpc.RpcError) as exc:
        raw.set_pipeline(p4info, device_config())
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    raw.set_pipeline(action=SetAction.COMMIT)
    harness.ports.inject(1, ethernet(DST2))
    assert harness.ports.get(2, timeout=2) == ethernet(DST2)
    # nothing left to commit (bmv2: NO_ONGOING_SWAP)
    with pytest.raises(grpc.RpcError) as exc:
        raw.set_pipeline(action=SetAction.COMMIT)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN


def test_reconcile_and_commit(loaded, raw, p4info, ids):
    raw.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))
    # PI replays counters as INSERT, which its own counter_write refuses: with an indirect
    # counter in the P4Info, RECONCILE_AND_COMMIT fails on simple_switch_grpc -- and here
    with pytest.raises(grpc.RpcError) as exc:
        raw.set_pipeline(p4info, device_config(), action=SetAction.RECONCILE_AND_COMMIT)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert "reconciling" in exc.value.details()
    # without counters in the P4Info, table entries survive the new pipeline
    no_counters = type(p4info)()
    no_counters.CopyFrom(p4info)
    del no_counters.counters[:]
    raw.set_pipeline(no_counters, device_config())  # VERIFY_AND_COMMIT: fresh state
    assert table_read(raw) == []
    raw.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))
    raw.set_pipeline(no_counters, device_config(), action=SetAction.RECONCILE_AND_COMMIT)
    assert len(table_read(raw)) == 1
    loaded.ports.inject(1, ethernet(DST2))
    assert loaded.ports.get(2, timeout=2) == ethernet(DST2)


def test_other_device_id(loaded, p4info):
    other = RawClient(loaded.addr, device_id=7)
    try:
        assert other.arbitrate((0, 1)).status.code == code_pb2.OK  # PI arbitrates any id
        with pytest.raises(grpc.RpcError) as exc:
            other.set_pipeline(p4info, device_config())
        assert exc.value.code() == grpc.StatusCode.UNKNOWN  # bmv2 refuses the device id
        with pytest.raises(grpc.RpcError) as exc:
            other.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
        assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        other.close()


# -- Write errors ------------------------------------------------------------------------


def test_batch_errors_per_update(loaded, raw, ids):
    """PI: any failed update -> top-level UNKNOWN, one p4.v1.Error per update (OK ones too)."""
    bad_table = exact_entry(ids, DST3, 3)
    bad_table.table_entry.table_id = 0x02FFFFFF
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(
            update(Update.INSERT, exact_entry(ids, DST2, 2)),
            update(Update.INSERT, exact_entry(ids, DST2, 2)),
            update(Update.INSERT, bad_table),
            update(Update.DELETE, exact_entry(ids, DST3, 3)),
            update(Update.INSERT, exact_entry(ids, DST3, 3)),
        )
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    codes = [c for c, _ in batch_errors(exc.value)]
    assert codes == [
        code_pb2.OK,
        code_pb2.ALREADY_EXISTS,
        code_pb2.INVALID_ARGUMENT,
        code_pb2.NOT_FOUND,
        code_pb2.OK,
    ]
    assert batch_errors(exc.value)[2][1] == "Invalid P4 id"
    assert len(table_read(raw, ids.table("l2_exact").id)) == 2


@pytest.mark.parametrize(
    "mutate, code, message",
    [
        (
            lambda te, ids: setattr(te.match[0].exact, "value", b"\x01" + b"\x00" * 6),
            code_pb2.INVALID_ARGUMENT,
            "Bytestring provided does not fit within 48 bits",
        ),
        (
            lambda te, ids: te.ClearField("match"),
            code_pb2.INVALID_ARGUMENT,
            "Missing non-ternary field in match key",
        ),
        (
            lambda te, ids: setattr(te, "priority", 5),
            code_pb2.INVALID_ARGUMENT,
            "Non-zero priority for non-ternary match",
        ),
        (
            lambda te, ids: te.action.action.params.add(param_id=9, value=b"\x01"),
            code_pb2.INVALID_ARGUMENT,
            "Unexpected number of action parameters",
        ),
        (
            lambda te, ids: setattr(te.action.action, "action_id", ids.action("set_tag").id),
            code_pb2.INVALID_ARGUMENT,
            "Invalid action for table",
        ),
        (
            lambda te, ids: te.ClearField("action"),
            code_pb2.INVALID_ARGUMENT,
            "'action' field must be set",
        ),
        (
            lambda te, ids: setattr(te.action.action.params[0], "value", b"\x02\x00"),
            code_pb2.INVALID_ARGUMENT,
            "Bytestring provided does not fit within 9 bits",
        ),
    ],
)
def test_table_entry_validation(loaded, raw, ids, mutate, code, message):
    ent = exact_entry(ids, DST2, 2)
    mutate(ent.table_entry, ids)
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(update(Update.INSERT, ent))
    assert batch_errors(exc.value) == [(code, message)]


def test_non_canonical_bytes_accepted_read_back_canonical(loaded, raw, ids):
    ent = exact_entry(ids, b"\x00\x00" + DST2, 2)  # leading zero bytes, fits
    ent.table_entry.action.action.params[0].value = b"\x00\x00\x00\x02"
    raw.write(update(Update.INSERT, ent))
    (got,) = table_read(raw, ids.table("l2_exact").id)
    assert got.table_entry.match[0].exact.value == DST2
    assert got.table_entry.action.action.params[0].value == b"\x02"
    short = exact_entry(ids, b"\x05", 5)  # shorter than the field
    raw.write(update(Update.INSERT, short))
    values = sorted(e.table_entry.match[0].exact.value for e in table_read(raw))
    assert values == sorted([b"\x05", DST2])


def test_ternary_rules(loaded, raw, ids):
    t_id = ids.table("acl_ternary").id
    f_type = ids.table("acl_ternary").field_named("ether_type").id

    def acl(value: bytes, mask: bytes, priority: int):
        te = p4runtime_pb2.TableEntry(table_id=t_id, priority=priority)
        m = te.match.add(field_id=f_type)
        m.ternary.value, m.ternary.mask = value, mask
        te.action.action.action_id = ids.action("NoAction").id
        return p4runtime_pb2.Entity(table_entry=te)

    cases = [
        (acl(b"\x08\x00", b"\xff\x00", 0), "Zero priority for ternary match"),
        (
            acl(b"\x08\x01", b"\xff\x00", 1),
            "Invalid ternary value, make sure value & mask == value",
        ),
        (
            acl(b"\x00", b"\x00\x00", 1),
            "Invalid representation of 'don't care' ternary match, "
            "omit match field instead of using 0 mask",
        ),
    ]
    for ent, msg in cases:
        with pytest.raises(grpc.RpcError) as exc:
            raw.write(update(Update.INSERT, ent))
        assert batch_errors(exc.value) == [(code_pb2.INVALID_ARGUMENT, msg)]
    # same key, different priorities: two entries (priority is part of the key)
    raw.write(
        update(Update.INSERT, acl(b"\x08\x00", b"\xff\x00", 1)),
        update(Update.INSERT, acl(b"\x08\x00", b"\xff\x00", 2)),
    )
    got = table_read(raw, t_id)
    assert sorted(e.table_entry.priority for e in got) == [1, 2]
    # the optional field was omitted (wildcard) and is omitted on read
    assert all(len(e.table_entry.match) == 1 for e in got)


def test_lpm_and_range_rules(loaded, raw, ids):
    def lpm(value: bytes, plen: int):
        te = p4runtime_pb2.TableEntry(table_id=ids.table("route_lpm").id)
        m = te.match.add(field_id=ids.table("route_lpm").field_named("addr").id)
        m.lpm.value, m.lpm.prefix_len = value, plen
        te.action.action.action_id = ids.action("drop").id
        return p4runtime_pb2.Entity(table_entry=te)

    for ent, msg in [
        (
            lpm(bytes([10, 1, 0, 0]), 0),
            "Invalid reprsentation of 'don't care' LPM match, omit "
            "match field instead of using a prefix length of 0",
        ),
        (lpm(bytes([10, 1, 0, 0]), 33), "Prefix length cannot be > bitwidth"),
        (lpm(bytes([10, 1, 0, 1]), 16), "Invalid LPM value, incorrect number of trailing zeros"),
    ]:
        with pytest.raises(grpc.RpcError) as exc:
            raw.write(update(Update.INSERT, ent))
        assert batch_errors(exc.value) == [(code_pb2.INVALID_ARGUMENT, msg)]

    def rng(lo: bytes, hi: bytes):
        te = p4runtime_pb2.TableEntry(table_id=ids.table("level_range").id, priority=1)
        m = te.match.add(field_id=ids.table("level_range").field_named("level").id)
        m.range.low, m.range.high = lo, hi
        te.action.action.action_id = ids.action("set_tag").id
        te.action.action.params.add(
            param_id=ids.action("set_tag").param_named("tag").id, value=b"\x01"
        )
        return p4runtime_pb2.Entity(table_entry=te)

    with pytest.raises(grpc.RpcError) as exc:
        raw.write(update(Update.INSERT, rng(b"\x05", b"\x04")))
    assert batch_errors(exc.value) == [
        (code_pb2.INVALID_ARGUMENT, "Invalid range value, make sure low <= high")
    ]
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(update(Update.INSERT, rng(b"\x00\x00", b"\xff\xff")))
    assert batch_errors(exc.value)[0][0] == code_pb2.INVALID_ARGUMENT
    raw.write(update(Update.INSERT, rng(b"\x05", b"\x01\x00")))
    (got,) = table_read(raw, ids.table("level_range").id)
    assert (got.table_entry.match[0].range.low, got.table_entry.match[0].range.high) == (
        b"\x05",
        b"\x01\x00",
    )


def test_default_action_rules(loaded, raw, ids):
    def default(table: str, action: str | None, params=()):
        te = p4runtime_pb2.TableEntry(table_id=ids.table(table).id, is_default_action=True)
        if action:
            te.action.action.action_id = ids.action(action).id
            for pid, value in params:
                te.action.action.params.add(param_id=pid, value=value)
        return p4runtime_pb2.Entity(table_entry=te)

    # const default action: PERMISSION_DENIED (PI validate_action)
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(update(Update.MODIFY, default("const_default", "NoAction")))
    assert batch_errors(exc.value)[0][0] == code_pb2.PERMISSION_DENIED
    # @defaultonly action in a regular entry: PERMISSION_DENIED
    te = p4runtime_pb2.TableEntry(table_id=ids.table("level_range").id, priority=1)
    m = te.match.add(field_id=ids.table("level_range").field_named("level").id)
    m.range.low, m.range.high = b"\x01", b"\x02"
    te.action.action.action_id = ids.action("miss_tag").id
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(update(Update.INSERT, p4runtime_pb2.Entity(table_entry=te)))
    assert batch_errors(exc.value) == [
        (code_pb2.PERMISSION_DENIED, "Cannot use DEFAULT_ONLY action in table entry")
    ]
    # INSERT / DELETE of a default entry
    for kind, msg in (
        (Update.INSERT, "Cannot use INSERT for default entry"),
        (Update.DELETE, "Cannot use DELETE for default entry"),
    ):
        with pytest.raises(grpc.RpcError) as exc:
            raw.write(update(kind, default("l2_exact", "drop")))
        assert batch_errors(exc.value) == [(code_pb2.INVALID_ARGUMENT, msg)]
    # set, read, reset (MODIFY without action) the default entry
    port = ids.action("forward").param_named("port").id
    raw.write(update(Update.MODIFY, default("l2_exact", "forward", [(port, b"\x04")])))
    (got,) = table_read(raw, ids.table("l2_exact").id, default=True)
    assert got.table_entry.is_default_action
    assert got.table_entry.action.action.action_id == ids.action("forward").id
    assert got.table_entry.action.action.params[0].value == b"\x04"
    raw.write(update(Update.MODIFY, default("l2_exact", None)))
    (got,) = table_read(raw, ids.table("l2_exact").id, default=True)
    assert got.table_entry.action.action.action_id == ids.action("drop").id


def test_controller_metadata_round_trip(loaded, raw, ids):
    ent = exact_entry(ids, DST2, 2)
    ent.table_entry.controller_metadata = 0xDEADBEEF
    ent.table_entry.metadata = b"job-7"
    raw.write(update(Update.INSERT, ent))
    (got,) = table_read(raw, ids.table("l2_exact").id)
    assert got.table_entry.controller_metadata == 0xDEADBEEF
    assert got.table_entry.metadata == b"job-7"
    # reading a single entry by its key; a missing key reads nothing (PI: OK, empty)
    probe = p4runtime_pb2.Entity()
    probe.table_entry.CopyFrom(exact_entry(ids, DST2, 0).table_entry)
    probe.table_entry.ClearField("action")
    assert len(raw.read(probe)) == 1
    probe.table_entry.match[0].exact.value = DST3
    assert raw.read(probe) == []


def test_atomic_write_modes_unimplemented(loaded, raw, ids):
    req = p4runtime_pb2.WriteRequest(
        device_id=1, atomicity=p4runtime_pb2.WriteRequest.ROLLBACK_ON_ERROR
    )
    req.election_id.low = 1
    req.updates.append(update(Update.INSERT, exact_entry(ids, DST2, 2)))
    with pytest.raises(grpc.RpcError) as exc:
        raw.stub.Write(req)
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- PRE, counters, registers ------------------------------------------------------------


def mc_entity(group_id: int, replicas: list[tuple[int, int]]) -> p4runtime_pb2.Entity:
    ent = p4runtime_pb2.Entity()
    g = ent.packet_replication_engine_entry.multicast_group_entry
    g.multicast_group_id = group_id
    for port, rid in replicas:
        g.replicas.add(egress_port=port, instance=rid)
    return ent


def test_multicast_groups(loaded, raw, ids):
    raw.write(update(Update.INSERT, mc_entity(1, [(3, 1), (2, 1), (4, 2)])))
    (got,) = raw.read(mc_entity(0, []))
    reps = [
        (r.egress_port, r.instance)
        for r in got.packet_replication_engine_entry.multicast_group_entry.replicas
    ]
    assert sorted(reps) == [(2, 1), (3, 1), (4, 2)]
    # data plane: flood(1) replicates
    te = exact_entry(ids, DST2, 0)
    te.table_entry.action.action.action_id = ids.action("flood").id
    te.table_entry.action.action.params[0].param_id = ids.action("flood").param_named("group").id
    te.table_entry.action.action.params[0].value = b"\x01"
    raw.write(update(Update.INSERT, te))
    loaded.ports.inject(1, ethernet(DST2))
    for port in (2, 3, 4):
        assert loaded.ports.get(port, timeout=2) == ethernet(DST2)

    with pytest.raises(grpc.RpcError) as exc:
        raw.write(
            update(Update.INSERT, mc_entity(1, [(2, 1)])),
            update(Update.MODIFY, mc_entity(9, [(2, 1)])),
            update(Update.INSERT, mc_entity(0, [(2, 1)])),
            update(Update.INSERT, mc_entity(1 << 15, [(2, 1)])),
            update(Update.INSERT, mc_entity(5, [(2, 1), (2, 1)])),
        )
    assert [c for c, _ in batch_errors(exc.value)] == [
        code_pb2.ALREADY_EXISTS,
        code_pb2.NOT_FOUND,
        code_pb2.INVALID_ARGUMENT,
        code_pb2.OUT_OF_RANGE,
        code_pb2.INVALID_ARGUMENT,
    ]
    raw.write(update(Update.MODIFY, mc_entity(1, [(5, 0)])))
    (got,) = raw.read(mc_entity(1, []))
    assert [
        (r.egress_port, r.instance)
        for r in got.packet_replication_engine_entry.multicast_group_entry.replicas
    ] == [(5, 0)]
    raw.write(update(Update.DELETE, mc_entity(1, [])))
    assert raw.read(mc_entity(0, [])) == []
    with pytest.raises(grpc.RpcError) as exc:
        raw.read(mc_entity(1, []))
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND


def test_clone_session_unimplemented(loaded, raw):
    ent = p4runtime_pb2.Entity()
    s = ent.packet_replication_engine_entry.clone_session_entry
    s.session_id = 5
    s.replicas.add(egress_port=2, instance=0)
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(update(Update.INSERT, ent))
    assert batch_errors(exc.value)[0][0] == code_pb2.UNIMPLEMENTED


def counter_entity(cid: int, index: int | None = None, packets: int = 0, bytes_: int = 0):
    ent = p4runtime_pb2.Entity()
    ent.counter_entry.counter_id = cid
    if index is not None:
        ent.counter_entry.index.index = index
    ent.counter_entry.data.packet_count = packets
    ent.counter_entry.data.byte_count = bytes_
    return ent


def test_counters(loaded, raw, ids):
    cid = ids.counter("port_counter").id
    loaded.ports.inject(3, ethernet(DST2))
    loaded.ports.inject(3, ethernet(DST2))
    every = raw.read(counter_entity(0))
    assert len(every) == 64 and every[3].counter_entry.index.index == 3
    (one,) = raw.read(counter_entity(cid, 3))
    assert one.counter_entry.data.packet_count == 2
    assert one.counter_entry.data.byte_count == 2 * len(ethernet(DST2))
    raw.write(update(Update.MODIFY, counter_entity(cid, 3, packets=10, bytes_=1000)))
    (one,) = raw.read(counter_entity(cid, 3))
    assert (one.counter_entry.data.packet_count, one.counter_entry.data.byte_count) == (10, 1000)
    raw.write(update(Update.DELETE, counter_entity(cid, 3)))  # PI: resets the cell
    (one,) = raw.read(counter_entity(cid, 3))
    assert one.counter_entry.data.packet_count == 0
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(
            update(Update.INSERT, counter_entity(cid, 3)),
            update(Update.MODIFY, counter_entity(cid)),
            update(Update.MODIFY, counter_entity(cid, 64)),
        )
    assert [c for c, _ in batch_errors(exc.value)] == [
        code_pb2.INVALID_ARGUMENT,
        code_pb2.UNIMPLEMENTED,
        code_pb2.UNKNOWN,
    ]
    with pytest.raises(grpc.RpcError) as exc:
        raw.read(counter_entity(cid, 64))
    assert exc.value.code() == grpc.StatusCode.UNKNOWN


def test_register_read_extension_and_write_unimplemented(loaded, raw, ids):
    rid = ids.register("last_ether_type").id
    loaded.ports.inject(3, ethernet(DST2, ether_type=0x1234))
    ent = p4runtime_pb2.Entity()
    ent.register_entry.register_id = rid
    ent.register_entry.index.index = 3
    (got,) = raw.read(ent)
    assert got.register_entry.data.bitstring == b"\x12\x34"
    ent.register_entry.ClearField("index")
    assert len(raw.read(ent)) == 16
    ent.register_entry.index.index = 3
    ent.register_entry.data.bitstring = b"\x00\x01"
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(update(Update.MODIFY, ent))
    assert batch_errors(exc.value) == [
        (code_pb2.UNIMPLEMENTED, "Register writes are not supported yet")
    ]


# -- packet I/O ---------------------------------------------------------------------------


def packet_md(p4info, header: str) -> dict[str, int]:
    cpm = next(c for c in p4info.controller_packet_metadata if c.preamble.name == header)
    return {m.name: m.id for m in cpm.metadata}


def test_packet_out_header_serialisation(loaded, raw, p4info):
    md = packet_md(p4info, "packet_out")
    raw.packet_out(ethernet(DST2), {md["egress_port"]: b"\x01\x05", md["flags"]: b"\x07"})
    assert loaded.ports.get(0x105, timeout=2) == ethernet(DST2)
    # unknown metadata id or too-wide value: dropped (PI's stream error reporting is off)
    raw.packet_out(ethernet(DST2), {999: b"\x01"})
    raw.packet_out(ethernet(DST2), {md["egress_port"]: b"\x02\x00"})
    raw.packet_out(ethernet(DST3), {md["egress_port"]: b"\x02"})
    assert loaded.ports.get(2, timeout=2) == ethernet(DST3)
    assert loaded.device.counters["packet_out_dropped"] == 2


def test_packet_in_goes_to_the_primary_only(loaded, raw, ids, p4info):
    te = exact_entry(ids, DST2, 0)
    te.table_entry.action.action.action_id = ids.action("to_cpu").id
    te.table_entry.action.action.params[0].param_id = ids.action("to_cpu").param_named("tag").id
    te.table_entry.action.action.params[0].value = b"\xab\xcd"
    raw.write(update(Update.INSERT, te))
    backup = RawClient(loaded.addr)
    try:
        backup.arbitrate((0, 0))
        loaded.ports.inject(7, ethernet(DST2))
        msg = raw.packets.get(timeout=2)
        md = {v: k for k, v in packet_md(p4info, "packet_in").items()}
        got = {md[m.metadata_id]: m.value for m in msg.metadata}
        assert got == {"ingress_port": b"\x07", "_pad": b"\x00", "tag": b"\xab\xcd"}
        assert msg.payload == ethernet(DST2)
        assert backup.packets.empty()
    finally:
        backup.close()


def test_p4info_import_error_and_unsupported_program(loaded, raw, p4info, ids):
    raw.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))
    # a P4Info PI cannot import (match type unset): UNKNOWN "Error when importing p4info"
    bad = type(p4info)()
    bad.CopyFrom(p4info)
    bad.tables[0].match_fields[0].match_type = 0
    with pytest.raises(grpc.RpcError) as exc:
        raw.set_pipeline(bad, device_config())
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert exc.value.details().startswith("Error when importing p4info")
    # a valid bmv2 JSON the interpreter refuses (a direct counter): UNIMPLEMENTED, named
    doc = json.loads(device_config())
    doc["counter_arrays"].append(
        {
            "name": "TestIngress.direct",
            "id": 99,
            "is_direct": True,
            "binding": "TestIngress.l2_exact",
            "source_info": {},
        }
    )
    with pytest.raises(grpc.RpcError) as exc:
        raw.set_pipeline(p4info, json.dumps(doc).encode())
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "direct counter" in exc.value.details()
    # the old pipeline is untouched
    assert len(table_read(raw, ids.table("l2_exact").id)) == 1
