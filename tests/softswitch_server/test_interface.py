"""The contract between the P4Runtime server and its target (softswitch.interface).

* The real ``Switch`` satisfies ``SwitchTarget`` member by member: same parameters, same
  defaults, same types -- so the Protocol, not a prose file, is the contract.
* Target failures become statuses by exception class: a refusal the target means
  (``SoftswitchError``) is PI's UNKNOWN, a construct it cannot run is UNIMPLEMENTED, and
  a bug (AttributeError, TypeError, ...) is INTERNAL -- never UNIMPLEMENTED, which would
  tell a controller to work around a feature that is merely broken.  The bugs are real
  exceptions raised by a real ``Switch`` (one method broken by subclassing), reached over
  real gRPC.
"""

from __future__ import annotations

import inspect
import typing

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from softswitch.errors import InvalidArgument
from softswitch.interface import SwitchTarget
from softswitch.p4runtime_server import Device, P4RuntimeServer
from softswitch.switch import Switch

from .helpers import RawClient, batch_errors, device_config, exact_entry, update, Update

DST2 = bytes.fromhex("020000000002")


def _members() -> list[str]:
    return sorted(
        name
        for name in vars(SwitchTarget)
        if not name.startswith("_") and name not in ("__init__",)
    )


def test_switch_satisfies_the_protocol() -> None:
    switch = Switch()
    assert isinstance(switch, SwitchTarget)
    members = _members()
    assert "table_add" in members and "mc_group_set_nodes" in members and "stats" in members
    for name in members:
        proto, real = getattr(SwitchTarget, name), getattr(Switch, name)
        if isinstance(proto, property):
            assert isinstance(real, property), f"Switch.{name} must be a property"
            assert typing.get_type_hints(proto.fget) == typing.get_type_hints(real.fget), name
            continue
        want, got = inspect.signature(proto), inspect.signature(real)
        assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
            (p.name, p.kind, p.default) for p in want.parameters.values()
        ], name
        assert typing.get_type_hints(real) == typing.get_type_hints(proto), name


def test_a_target_missing_a_member_does_not_satisfy_it() -> None:
    class Partial:
        def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
            return []

    assert not isinstance(Partial(), SwitchTarget)


# -- error mapping over gRPC -------------------------------------------------------------


def bug() -> typing.NoReturn:
    """What a bug looks like: an attribute that is not there."""
    return None.missing  # type: ignore[attr-defined,return-value]


class BuggySwitch(Switch):
    """A real Switch with a bug in the methods these tests reach."""

    def table_add(self, *args: typing.Any, **kwargs: typing.Any) -> int:
        bug()

    def counter_size(self, name: str) -> int:
        bug()

    def mc_group_set_nodes(self, group_id: int, nodes: list[tuple[int, list[int]]]) -> None:
        raise TypeError("unhashable type: 'list'")

    def clone_session_set(self, session_id: int, replicas: list[tuple[int, int]]) -> None:
        bug()


class RefusingSwitch(Switch):
    """A real Switch that refuses every entry change (as bmv2 may refuse one)."""

    def table_modify(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        raise InvalidArgument("the target refuses")


class BrokenLoadSwitch(Switch):
    def load_pipeline(self, bmv2_json: bytes | str) -> None:
        bug()


@pytest.fixture
def serve():
    started: list[tuple[P4RuntimeServer, RawClient]] = []

    def start(factory: type[Switch]) -> RawClient:
        device = Device(switch_factory=factory)
        server = P4RuntimeServer(device, "127.0.0.1:0")
        server.start()
        client = RawClient(server.address)
        started.append((server, client))
        client.arbitrate((0, 1))
        return client

    yield start
    for server, client in started:
        client.close()
        server.stop(grace=0.5)


def clone_session(session_id: int) -> p4runtime_pb2.Entity:
    ent = p4runtime_pb2.Entity()
    s = ent.packet_replication_engine_entry.clone_session_entry
    s.session_id = session_id
    s.replicas.add(egress_port=2, instance=0)
    return ent


def mc_group(group_id: int) -> p4runtime_pb2.Entity:
    ent = p4runtime_pb2.Entity()
    g = ent.packet_replication_engine_entry.multicast_group_entry
    g.multicast_group_id = group_id
    g.replicas.add(egress_port=2, instance=1)
    return ent


def test_target_bugs_are_internal_not_unimplemented(serve, p4info, ids) -> None:
    raw = serve(BuggySwitch)
    raw.set_pipeline(p4info, device_config())
    counter = p4runtime_pb2.Entity()
    counter.counter_entry.counter_id = ids.counter("port_counter").id
    counter.counter_entry.index.index = 1
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(
            update(Update.INSERT, exact_entry(ids, DST2, 2)),
            update(Update.INSERT, clone_session(5)),
            update(Update.INSERT, mc_group(1)),
            update(Update.MODIFY, counter),
        )
    errors = batch_errors(exc.value)
    assert [code for code, _ in errors] == [code_pb2.INTERNAL] * 4
    assert "AttributeError" in errors[0][1] and "TypeError" in errors[2][1]
    with pytest.raises(grpc.RpcError) as exc:
        raw.read(counter)
    assert exc.value.code() == grpc.StatusCode.INTERNAL


def test_target_refusals_keep_their_codes(serve, p4info, ids) -> None:
    """The working Switch: clone is a construct it refuses (UNIMPLEMENTED); a refusal of
    the target is PI's UNKNOWN "Error when ... target"."""
    raw = serve(Switch)
    raw.set_pipeline(p4info, device_config())
    with pytest.raises(grpc.RpcError) as exc:
        raw.write(update(Update.INSERT, clone_session(5)))
    assert [code for code, _ in batch_errors(exc.value)] == [code_pb2.UNIMPLEMENTED]

    refusing = serve(RefusingSwitch)
    refusing.set_pipeline(p4info, device_config())
    refusing.write(update(Update.INSERT, exact_entry(ids, DST2, 2)))
    with pytest.raises(grpc.RpcError) as exc:
        refusing.write(update(Update.MODIFY, exact_entry(ids, DST2, 3)))
    assert batch_errors(exc.value) == [
        (
            code_pb2.UNKNOWN,
            "Error when modifying match entry in target (InvalidArgument: the target refuses)",
        )
    ]


def test_a_bug_while_loading_is_internal(serve, p4info) -> None:
    raw = serve(BrokenLoadSwitch)
    with pytest.raises(grpc.RpcError) as exc:
        raw.set_pipeline(p4info, device_config())
    assert exc.value.code() == grpc.StatusCode.INTERNAL
    assert "AttributeError" in exc.value.details()
