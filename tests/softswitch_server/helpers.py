"""Shared pieces of the server tests: the compiled test program, an in-process switch with
a real gRPC server on a free loopback port, and a raw P4Runtime client for the cases
p4runtime-shell cannot express (wrong ids, batches, arbitration details, packet I/O)."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4reduce import p4rt
from p4reduce.p4rt import P4InfoIndex
from softswitch.p4runtime_server import Device, P4RuntimeServer
from softswitch.ports import InProcessPorts

# p4c's outputs, built by p4src/compile.py (tests/test_p4_build.py checks they are current)
P4DIR = Path(__file__).resolve().parent / "p4" / "build" / "server_test"
P4INFO_PATH = P4DIR / "server_test.p4info.txtpb"
JSON_PATH = P4DIR / "server_test.json"
CPU_PORT = 255

REPO = Path(__file__).resolve().parents[2]
# softswitch's command line as the checkout runs it (an installed p4reduce-softswitch, or
# one run inside a network namespace, is another prefix of the same arguments)
SOFTSWITCH_CLI = (sys.executable, "-m", "softswitch")


def start_cli(
    *args: str, command: Sequence[str] = SOFTSWITCH_CLI, cwd: Path = REPO, env=None
) -> tuple[subprocess.Popen, str]:
    """Start the CLI on a free loopback port; returns (process, grpc address) once it says
    it listens (the line simple_switch_grpc prints too)."""
    proc = subprocess.Popen(
        [*command, "--grpc-server-addr", "127.0.0.1:0", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.match(r"Server listening on (\S+)", line)
    if not m:
        proc.kill()
        _out, err = proc.communicate()
        raise AssertionError(f"no 'Server listening' line: {line!r}\n{err}")
    return proc, m.group(1)


def stop_cli(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
Update = p4runtime_pb2.Update


def require_build() -> None:
    if not (P4INFO_PATH.exists() and JSON_PATH.exists()):
        pytest.fail(
            f"p4c outputs missing in {P4DIR}: run "
            f"python p4src/compile.py tests/softswitch_server/p4/server_test.p4"
        )


def load_p4info() -> p4info_pb2.P4Info:
    """The test program's P4Info; `P4InfoIndex.from_proto` of it finds ids by name, so tests
    never hard-code p4c's hashes."""
    require_build()
    return p4rt.load_p4info(P4INFO_PATH)


def device_config() -> bytes:
    require_build()
    return JSON_PATH.read_bytes()


@dataclass
class Harness:
    """softswitch in this process: Device + in-process ports + gRPC on 127.0.0.1:<free>."""

    device: Device
    ports: InProcessPorts
    server: P4RuntimeServer

    @property
    def addr(self) -> str:
        return self.server.address

    @classmethod
    def start(cls, device_id: int = 1, cpu_port: int | None = CPU_PORT) -> "Harness":
        device = Device(device_id=device_id, cpu_port=cpu_port)
        ports = InProcessPorts()
        ports.attach(device)
        server = P4RuntimeServer(device, "127.0.0.1:0")
        server.start()
        return cls(device, ports, server)

    def stop(self) -> None:
        self.server.stop(grace=0.5)


def batch_errors(exc: grpc.RpcError) -> list[tuple[int, str]]:
    """(canonical_code, message) per update of a failed Write, from the binary details."""
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            out = []
            for any_msg in status.details:
                err = p4runtime_pb2.Error()
                assert any_msg.Unpack(err)
                out.append((err.canonical_code, err.message))
            return out
    raise AssertionError("no grpc-status-details-bin in the Write error")


class RawClient:
    """Plain stubs; ``arbitrate`` opens the StreamChannel and returns the first answer."""

    def __init__(self, addr: str, device_id: int = 1, election_id: tuple[int, int] = (0, 1)):
        self.device_id = device_id
        self.election_id = election_id
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._out: queue.Queue = queue.Queue()
        self.arbitrations: queue.Queue = queue.Queue()
        self.packets: queue.Queue = queue.Queue()
        self.stream_error: grpc.RpcError | None = None
        self._reader: threading.Thread | None = None

    def arbitrate(
        self, election_id: tuple[int, int] | None = None, timeout: float = 5.0
    ) -> p4runtime_pb2.MasterArbitrationUpdate:
        if election_id is not None:
            self.election_id = election_id
        if self._reader is None:

            def requests():
                while True:
                    item = self._out.get()
                    if item is None:
                        return
                    yield item

            stream = self.stub.StreamChannel(requests())

            def read():
                try:
                    for msg in stream:
                        if msg.HasField("arbitration"):
                            self.arbitrations.put(msg.arbitration)
                        elif msg.HasField("packet"):
                            self.packets.put(msg.packet)
                except grpc.RpcError as exc:
                    self.stream_error = exc
                    self.arbitrations.put(exc)

            self._reader = threading.Thread(target=read, daemon=True)
            self._reader.start()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high, req.arbitration.election_id.low = self.election_id
        self._out.put(req)
        return self.next_arbitration(timeout)

    def next_arbitration(self, timeout: float = 5.0):
        return self.arbitrations.get(timeout=timeout)

    def packet_out(self, payload: bytes, metadata: dict[int, bytes] | None = None) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.payload = payload
        for mid, value in (metadata or {}).items():
            req.packet.metadata.add(metadata_id=mid, value=value)
        self._out.put(req)

    def close_stream(self) -> None:
        self._out.put(None)
        if self._reader is not None:
            self._reader.join(timeout=5)
            self._reader = None

    def close(self) -> None:
        self.close_stream()
        self.channel.close()

    def _elect(self, req) -> None:
        req.election_id.high, req.election_id.low = self.election_id

    def set_pipeline(
        self,
        p4info: p4info_pb2.P4Info | None = None,
        json_bytes: bytes | None = None,
        action: int = SetAction.VERIFY_AND_COMMIT,
        cookie: int | None = None,
        election: bool = True,
    ) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, action=action
        )
        if election:
            self._elect(req)
        if p4info is not None:
            req.config.p4info.CopyFrom(p4info)
        if json_bytes is not None:
            req.config.p4_device_config = json_bytes
        if cookie is not None:
            req.config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(req, timeout=30)

    def get_pipeline(self, response_type: int = 0) -> p4runtime_pb2.ForwardingPipelineConfig:
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=response_type
        )
        return self.stub.GetForwardingPipelineConfig(req, timeout=10).config

    def write(self, *updates: p4runtime_pb2.Update, election: bool = True) -> None:
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        if election:
            self._elect(req)
        req.updates.extend(updates)
        self.stub.Write(req, timeout=10)

    def read(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        return [e for rep in self.stub.Read(req, timeout=10) for e in rep.entities]


def update(kind: int, entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=kind, entity=entity)


def table_entity(**kwargs) -> p4runtime_pb2.Entity:
    return p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(**kwargs))


def exact_entry(ids: P4InfoIndex, dst: bytes, port: int) -> p4runtime_pb2.Entity:
    """l2_exact: dst -> forward(port)."""
    te = p4runtime_pb2.TableEntry(table_id=ids.table("l2_exact").id)
    te.match.add(field_id=ids.table("l2_exact").field_named("dst").id).exact.value = dst
    te.action.action.action_id = ids.action("forward").id
    te.action.action.params.add(
        param_id=ids.action("forward").param_named("port").id, value=port.to_bytes(2, "big")
    )
    return p4runtime_pb2.Entity(table_entry=te)


def ethernet(
    dst: bytes,
    src: bytes = b"\x02\x00\x00\x00\x00\x01",
    ether_type: int = 0x0800,
    payload: bytes = b"\x00" * 46,
) -> bytes:
    return dst + src + ether_type.to_bytes(2, "big") + payload


OK = code_pb2.OK
