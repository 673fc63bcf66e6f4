"""The real client: p4runtime-shell drives softswitch exactly as it drives simple_switch_grpc."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import code_pb2

import p4runtime_sh.shell as sh
from p4runtime_sh.p4runtime import P4RuntimeClient, P4RuntimeWriteException
from p4runtime_sh.shell import FwdPipeConfig
from p4.v1 import p4runtime_pb2

from .helpers import CPU_PORT, JSON_PATH, P4INFO_PATH, ethernet, require_build

DST2 = bytes.fromhex("020000000002")


@pytest.fixture
def shell(harness):
    require_build()
    sh.setup(
        device_id=1,
        grpc_addr=harness.addr,
        election_id=(0, 1),
        config=FwdPipeConfig(str(P4INFO_PATH), str(JSON_PATH)),
        verbose=False,
    )
    try:
        yield sh
    finally:
        sh.teardown()


def entries(table: str) -> list:
    return list(sh.TableEntry(table).read())


def test_push_insert_read_modify_delete(harness, shell):
    assert sh.client.api_version() == "1.3.0"  # what PI (simple_switch_grpc) reports
    te = sh.TableEntry("l2_exact")(action="forward")
    te.match["hdr.ethernet.dst"] = "02:00:00:00:00:02"
    te.action["port"] = "2"
    te.insert()

    got = entries("l2_exact")
    assert len(got) == 1
    msg = got[0].msg()
    assert msg.match[0].exact.value == DST2  # canonical: 6 bytes, no leading zero
    assert msg.action.action.params[0].value == b"\x02"  # canonical: one byte

    harness.ports.inject(1, ethernet(DST2))
    assert harness.ports.get(2, timeout=2) == ethernet(DST2)

    te.action["port"] = "3"
    te.modify()
    harness.ports.inject(1, ethernet(DST2))
    assert harness.ports.get(3, timeout=2) == ethernet(DST2)

    te.delete()
    assert entries("l2_exact") == []
    harness.ports.inject(1, ethernet(DST2))
    assert harness.ports.poll(3, timeout=0.2) is None  # default action: drop


def test_insert_twice_already_exists_delete_missing_not_found(shell):
    te = sh.TableEntry("l2_exact")(action="forward")
    te.match["hdr.ethernet.dst"] = "02:00:00:00:00:02"
    te.action["port"] = "2"
    te.insert()
    with pytest.raises(P4RuntimeWriteException) as exc:
        te.insert()
    assert [(i, e.canonical_code) for i, e in exc.value.errors] == [(0, code_pb2.ALREADY_EXISTS)]
    te.delete()
    with pytest.raises(P4RuntimeWriteException) as exc:
        te.delete()
    assert [(i, e.canonical_code) for i, e in exc.value.errors] == [(0, code_pb2.NOT_FOUND)]


def test_default_entry_modify_and_read(harness, shell):
    d = sh.TableEntry("l2_exact")(action="forward", is_default=True)
    d.action["port"] = "4"
    d.modify()
    (got,) = list(sh.TableEntry("l2_exact")(is_default=True).read())
    assert got.is_default
    harness.ports.inject(1, ethernet(DST2))
    assert harness.ports.get(4, timeout=2) == ethernet(DST2)


def test_ternary_optional_lpm_range(harness, shell):
    acl = sh.TableEntry("acl_ternary")(action="set_tag")
    acl.match["hdr.ethernet.ether_type"] = "0x0800&&&0xff00"
    acl.match["std.ingress_port"] = "1"
    acl.action["tag"] = "7"
    acl.priority = 10
    acl.insert()
    lpm = sh.TableEntry("route_lpm")(action="forward")
    lpm.match["hdr.probe.addr"] = "10.1.0.0/16"
    lpm.action["port"] = "5"
    lpm.insert()
    rng = sh.TableEntry("level_range")(action="set_tag")
    rng.match["hdr.probe.level"] = "10..20"
    rng.action["tag"] = "9"
    rng.priority = 1
    rng.insert()

    (a,) = entries("acl_ternary")
    assert a.priority == 10
    (lpm,) = entries("route_lpm")
    assert lpm.msg().match[0].lpm.prefix_len == 16
    assert lpm.msg().match[0].lpm.value == bytes([10, 1, 0, 0])
    (r,) = entries("level_range")
    assert r.priority == 1

    probe = bytes.fromhex("0a010203") + (15).to_bytes(2, "big") + b"\x00\x00"
    frame = ethernet(DST2, ether_type=0x88B5, payload=probe + b"\x00" * 38)
    harness.ports.inject(1, frame)
    assert harness.ports.get(5, timeout=2) == frame


def test_second_client_with_lower_election_id_cannot_write(harness, shell):
    backup = P4RuntimeClient(1, harness.addr, (0, 0))
    try:
        te = sh.TableEntry("l2_exact")(action="forward")
        te.match["hdr.ethernet.dst"] = "02:00:00:00:00:02"
        te.action["port"] = "2"
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        update.entity.table_entry.CopyFrom(te.msg())
        with pytest.raises(grpc.RpcError) as exc:
            backup.write_update(update)
        assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # the backup may read
        req = p4runtime_pb2.Entity()
        req.table_entry.table_id = te.msg().table_id
        assert [e for rep in backup.read_one(req) for e in rep.entities] == []
        # and the primary still writes
        te.insert()
        assert len(entries("l2_exact")) == 1
    finally:
        backup.tear_down()


def test_packet_out_and_packet_in_through_cpu_port(harness, shell, p4info):
    # PacketOut: header [egress_port:9 flags:3 pad:4] prepended, the pipeline sends it out
    pkt = sh.PacketOut(payload=ethernet(DST2), egress_port="3", flags="5")
    pkt.send()
    assert harness.ports.get(3, timeout=2) == ethernet(DST2)

    # PacketIn: to_cpu(tag) sends to the CPU port; the server strips the packet_in header
    sniffer = sh.PacketIn()
    te = sh.TableEntry("l2_exact")(action="to_cpu")
    te.match["hdr.ethernet.dst"] = "02:00:00:00:00:02"
    te.action["tag"] = "0x1234"
    te.insert()
    harness.ports.inject(7, ethernet(DST2))
    (msg,) = list(sniffer.sniff(timeout=2))
    assert msg.packet.payload == ethernet(DST2)
    names = {
        m.id: m.name
        for m in p4info.controller_packet_metadata[
            [c.preamble.name for c in p4info.controller_packet_metadata].index("packet_in")
        ].metadata
    }
    md = {names[m.metadata_id]: m.value for m in msg.packet.metadata}
    assert md == {"ingress_port": b"\x07", "_pad": b"\x00", "tag": b"\x12\x34"}
    assert harness.device.cpu_port == CPU_PORT
