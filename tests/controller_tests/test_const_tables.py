"""`p4reduce-ctl up` and its reconcile leave const tables alone: their entries are the
program's (P4Info `is_const_table`), a P4Runtime server refuses to write them, and deleting
one fails -- so a controller that deleted what it did not want would fail on the first one.

* Offline, the TNA program (no Tofino here): the controller brings up a recording P4Runtime
  server (tests/controller_tests/p4runtime_recorder.py) that holds the committed TNA P4Info
  and the const entries bf-p4c compiled in (context.json), and the requests it sends are
  compared -- as p4runtime-shell's tests compare requests -- with those it sends the same
  server holding the v1model P4Info: the same writes by name, none of a const table.
* On real switches (in-process softswitch, softswitch and simple_switch_grpc): the v1model
  program with one const table (tests/controller_tests/p4/const_entries.p4) is pushed, a
  job created, `up` run again; the const entries are read back unchanged and still count
  frames, and the second `up` sends no write at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from p4reduce import target as build
from p4reduce.addresses import WorkerAddress
from controlplane.config import parse
from controlplane.connection import SwitchConnection, SwitchError, same_p4info
from controlplane.controller import PIPELINE_KEPT, PIPELINE_PUSHED, Controller
from p4reduce.p4rt import P4InfoError, P4InfoIndex, load_p4info
from controlplane.stats import read_counter

from .conftest import SWITCH_IP, SWITCH_MAC, count_writes, host
from .p4runtime_recorder import RecordingServer, context_const_entries

HERE = Path(__file__).resolve().parent
CONST_BUILD = HERE / "p4" / "build" / "const_entries"
CONST_P4INFO = CONST_BUILD / "const_entries.p4info.txtpb"
CONST_JSON = CONST_BUILD / "const_entries.json"
# the const entries of const_entries.p4's port_class: ingress port -> class counted
PORT_CLASS = {1: 1, 2: 2, 3: 3}
Update = p4runtime_pb2.Update


def _workers(ports: list[int]) -> list[WorkerAddress]:
    return [WorkerAddress(r, port, *host(port), 0x5030) for r, port in enumerate(ports)]


def _switch(grpc_addr: str, tmp_path: Path, **more) -> dict:
    return {
        "grpc_addr": grpc_addr,
        "mac": SWITCH_MAC,
        "ip": SWITCH_IP,
        "election_id": 10,
        "ports": [1, 2, 3, 4],
        "hosts": [{"mac": host(1)[0], "port": 1}],
        "state_file": str(tmp_path / "jobs.json"),
        **more,
    }


def _static_job() -> dict:
    return {
        "job": 7,
        "slots": 4,
        "workers": [
            {"rank": r, "port": port, "mac": host(port)[0], "ip": host(port)[1]}
            for r, port in enumerate((1, 2))
        ],
    }


def _bring_up_twice(cfg) -> tuple[str, str]:
    """`up` (a push: a fresh state file), a job created, then a controller restart's `up`."""
    ctl = Controller(cfg)
    try:
        first = ctl.up()
        ctl.jobs.create(8, _workers([3, 4]), 4)
    finally:
        ctl.close()
    again = Controller(cfg)
    try:
        return first, again.up()
    finally:
        again.close()


# -- offline: the TNA P4Info and its const entries -------------------------------------------


def _bare(name: str) -> str:
    """A P4Info name without the `pipe.` prefix bf-p4c may add (not a difference)."""
    return name.removeprefix("pipe.")


def _named(p4: P4InfoIndex, u: p4runtime_pb2.Update) -> tuple:
    """An update by names and ints, so requests for two P4Infos compare."""
    kind = u.entity.WhichOneof("entity")
    if kind == "table_entry":
        te = u.entity.table_entry
        d = p4.describe_entry(te)
        return (
            u.type,
            _bare(d["table"]),
            te.is_default_action,
            tuple(sorted(d["match"].items())),
            _bare(d.get("action", "")),
            tuple(sorted(d.get("params", {}).items())),
        )
    if kind == "counter_entry":
        ce = u.entity.counter_entry
        return (u.type, _bare(p4.counters[ce.counter_id].name), ce.index.index)
    group = u.entity.packet_replication_engine_entry.multicast_group_entry
    return (
        u.type,
        "group",
        group.multicast_group_id,
        tuple((r.egress_port, r.instance) for r in group.replicas),
    )


def _tofino_config(grpc_addr: str, tmp_path: Path, target: str, p4info: Path):
    tmp_path.mkdir()
    device_config = tmp_path / "pipeline_config.pb.bin"
    device_config.write_bytes(b"stands in for bf_pipeline_builder's output")
    sw = _switch(
        grpc_addr,
        tmp_path,
        target=target,
        # dev ports in pipe 0, the read-out port's
        port_map={"1": 8, "2": 16, "3": 24, "4": 32},
        p4info=str(p4info),
        device_config=str(device_config),
    )
    return parse({"switch": sw, "jobs": [_static_job()]}, tmp_path)


def _tables_made_gateways(context_json: Path) -> set[str]:
    """Tables of context.json with no static entries and a `-gateway` condition attached:
    bf-p4c compiled their const entry into the gateway."""
    tables = json.loads(context_json.read_text())["tables"]
    attached = {t.get("attached_to") for t in tables if t.get("table_type") == "condition"}
    return {
        t["name"]
        for t in tables
        if t.get("table_type") == "match" and not t.get("static_entries") and t["name"] in attached
    }


@pytest.mark.parametrize("target", ["tofino", "tofino2"])
def test_up_against_the_tna_p4info_never_writes_a_const_table(tmp_path, target):
    tna_p4info = build.BUILD_DIR / target / "p4reduce.p4info.txtpb"
    tna = P4InfoIndex.load(tna_p4info)
    const = context_const_entries(build.BUILD_DIR / target / "context.json", tna)
    const_tables = {t.id for t in tna.tables.values() if t.is_const}
    # the compiler's const entries are those of the P4Info's tables with initial entries,
    # but for a table whose one entry bf-p4c turned into a gateway (the driver holds the
    # table with no entries: nothing to read back)
    gateways = _tables_made_gateways(build.BUILD_DIR / target / "context.json")
    assert {e.table_id for e in const} == {
        t.preamble.id
        for t in tna.proto.tables
        if t.has_initial_entries and t.preamble.name not in gateways
    }

    with RecordingServer(const) as tofino:
        cfg = _tofino_config(tofino.grpc_addr, tmp_path / "tna", target, tna_p4info)
        assert _bring_up_twice(cfg) == (PIPELINE_PUSHED, PIPELINE_KEPT)
        after_first = len(tofino.writes)
    with RecordingServer() as bmv2:
        cfg = _tofino_config(bmv2.grpc_addr, tmp_path / "v1", target, build.DEFAULT_P4INFO)
        assert _bring_up_twice(cfg) == (PIPELINE_PUSHED, PIPELINE_KEPT)
    v1model = P4InfoIndex.load(build.DEFAULT_P4INFO)

    touched = [u for u in tofino.updates() if u.entity.table_entry.table_id in const_tables]
    assert touched == [], f"{len(touched)} update(s) of const tables: {touched[:3]}"
    # every const entry is where the program put it
    assert sorted(e.SerializeToString() for e in const) == sorted(
        e.SerializeToString() for e in tofino.entries.values() if e.table_id in const_tables
    )
    # the same writes, by name, as against the v1model P4Info, in the same order
    sent = [_named(tna, u) for u in tofino.updates()]
    assert sent == [_named(v1model, u) for u in bmv2.updates()]
    assert {u[0] for u in sent} == {Update.INSERT, Update.MODIFY}
    # the restart's `up` found the switch right: it wrote nothing
    assert len(tofino.writes) == after_first
    (push,) = tofino.pushes
    assert same_p4info(push.config.p4info, load_p4info(tna_p4info))


def test_loss_on_a_production_tofino_build_is_refused_by_name(tmp_path):
    """The production Tofino build has no drop simulator: `up` and job creation work, and
    asking for loss is one clear error (no write sent, the job keeps no loss)."""
    tna_p4info = build.BUILD_DIR / "tofino" / "p4reduce.p4info.txtpb"
    tna = P4InfoIndex.load(tna_p4info)
    assert not tna.has_table("drop_simulator")
    with RecordingServer(
        context_const_entries(build.BUILD_DIR / "tofino" / "context.json", tna)
    ) as sw:
        ctl = Controller(_tofino_config(sw.grpc_addr, tmp_path / "tna", "tofino", tna_p4info))
        try:
            ctl.up()
            writes = len(sw.writes)
            with pytest.raises(
                P4InfoError, match="job 7: this switch's pipeline has no drop simulator"
            ):
                ctl.jobs.set_loss(7, ingress=0.1)
            assert len(sw.writes) == writes
            assert ctl.jobs.get(7).loss is None
        finally:
            ctl.close()


# -- real switches: a v1model program with const entries -------------------------------------


@pytest.fixture
def const_config(switch_process, tmp_path):
    sw = _switch(
        switch_process.grpc_addr,
        tmp_path,
        p4info=str(CONST_P4INFO),
        device_config=str(CONST_JSON),
    )
    return parse({"switch": sw, "jobs": [_static_job()]}, tmp_path)


def _port_class_entries(conn: SwitchConnection) -> dict[int, int]:
    query = p4runtime_pb2.Entity()
    query.table_entry.table_id = conn.p4.table("port_class").id
    out = {}
    for e in conn.read(query):
        d = conn.p4.describe_entry(e.table_entry)
        out[d["match"]["standard_metadata.ingress_port"]] = d["params"]["class"]
    return out


def test_up_leaves_const_entries_alone(const_config, switch_process, monkeypatch):
    """A reconcile that took the three port_class entries for stale would delete them and
    fail on the first (NOT_FOUND): `up` right after its push would fail."""
    writes = count_writes(switch_process, monkeypatch)
    ctl = Controller(const_config)
    try:
        assert ctl.up() == PIPELINE_PUSHED
        ctl.jobs.create(8, _workers([3, 4]), 4)
        assert _port_class_entries(ctl.conn) == PORT_CLASS
        n = len(writes) if writes is not None else 0
    finally:
        ctl.close()
    again = Controller(const_config)
    try:
        assert again.up() == PIPELINE_KEPT
        assert again.reconcile().changes == 0
        assert _port_class_entries(again.conn) == PORT_CLASS
        if writes is not None:
            assert len(writes) == n, "an unchanged switch got writes on `up`"
        # the const entries still do their work: a frame on port 2 is counted as class 2
        before = read_counter(again.conn, "port_classes")
        switch_process.send(2, bytes.fromhex("ffffffffffff02000000000288b5") + bytes(46))
        switch_process.recv_all(1, 0.5)
        after = read_counter(again.conn, "port_classes")
        assert after.get(2, 0) == before.get(2, 0) + 1
    finally:
        again.close()


def test_the_switch_refuses_writes_to_a_const_table(const_config, switch_process):
    """What the controller guards against, on every target: the switch itself refuses an
    INSERT (UNKNOWN) and a MODIFY or DELETE (NOT_FOUND) of a const table's entry, and the
    controller's connection refuses to send one at all."""
    ctl = Controller(const_config)
    try:
        ctl.up()
        p4 = ctl.conn.p4
        entry = p4.table_entry(
            "port_class", {"standard_metadata.ingress_port": 1}, "count_class", {"class": 0}
        )
        with pytest.raises(SwitchError, match="table ConstEntriesIngress.port_class is const"):
            ctl.conn.insert(p4runtime_pb2.Entity(table_entry=entry))
        ctl.conn.objects = None  # past the guard: what the switch says
        codes = {}
        for utype in (Update.INSERT, Update.MODIFY, Update.DELETE):
            sent = p4runtime_pb2.TableEntry()
            sent.CopyFrom(entry)
            if utype == Update.DELETE:
                sent.ClearField("action")
            with pytest.raises(SwitchError) as info:
                ctl.conn.write([Update(type=utype, entity=p4runtime_pb2.Entity(table_entry=sent))])
            codes[utype] = info.value.code
        ctl.conn.objects = p4
        assert codes == {
            Update.INSERT: "UNKNOWN",
            Update.MODIFY: "NOT_FOUND",
            Update.DELETE: "NOT_FOUND",
        }
        assert _port_class_entries(ctl.conn) == PORT_CLASS
    finally:
        ctl.close()
