"""The switch targets the tests run on, what each test needs, and the switch under test.

One module owns three things that used to be copied across the test tree:

* **The targets.** Every target serves real P4Runtime over gRPC on loopback, so the tests
  configure it with the controller's own modules, and every target has the same frame
  interface (`SwitchUnderTest`: send, recv, recv_all, drain, restart, stop):

  - ``inprocess``: softswitch's `Device` and `P4RuntimeServer` in this process; frames are
    injected into and collected from in-process ports. Needs nothing: the P4 program's
    packet behaviour is tested without root, in the default run.
  - ``softswitch``: ``python -m softswitch`` on veth pairs (needs root).
  - ``simple_switch_grpc``: bmv2 on veth pairs (needs root and the binary on PATH).

* **The skip rule.** A test says what it needs with a pytest marker declared in
  pyproject.toml -- ``root``, ``bmv2``, ``mininet`` -- or gets the markers of its target
  through `params`. `unmet` is the one rule that turns a need into a skip reason; the
  repository's conftest.py applies it to every marked test before its fixtures run. So
  ``pytest -m "not root"`` selects exactly what runs without root.

* **The switch process.** `start` brings a target up: `InProcessTarget` here, or
  `SwitchProcess` (veth pairs + `softswitch.runner.SwitchRunner`, which knows both
  command lines), each with its own gRPC/Thrift ports, stopped by PID.
"""

from __future__ import annotations

import os
import secrets
import select
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Protocol

from p4reduce.target import SIMPLE_SWITCH_GRPC, SOFTSWITCH
from softswitch.runner import SwitchRunner

__all__ = [
    "INPROCESS",
    "SOFTSWITCH",
    "SIMPLE_SWITCH_GRPC",
    "TARGETS",
    "VETH_TARGETS",
    "NEEDS",
    "SwitchUnderTest",
    "InProcessTarget",
    "SwitchProcess",
    "params",
    "start",
    "unmet",
]

INPROCESS = "inprocess"
TARGETS = (INPROCESS, SOFTSWITCH, SIMPLE_SWITCH_GRPC)
# the targets that run as a process on real interfaces (what Mininet hosts can reach)
VETH_TARGETS = (SOFTSWITCH, SIMPLE_SWITCH_GRPC)
# what each target needs, as marker names (pyproject.toml declares them)
NEEDS: dict[str, tuple[str, ...]] = {
    INPROCESS: (),
    SOFTSWITCH: ("root",),
    SIMPLE_SWITCH_GRPC: ("root", "bmv2"),
}
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


# ---- what a test needs ---------------------------------------------------------------


def unmet(need: str) -> str | None:
    """Why `need` (a marker name: root, bmv2, mininet) cannot be met here, or None.

    The one place that decides: every skip for a missing privilege or tool says this."""
    if need == "root":
        if os.geteuid() != 0:
            return "needs root (veth interfaces, network namespaces)"
        if shutil.which("ip") is None:
            return "needs iproute2 ('ip'): run make install"
        return None
    if need == "bmv2":
        if shutil.which(SIMPLE_SWITCH_GRPC) is None:
            return (
                "simple_switch_grpc is not on PATH (bmv2 is in no package registry; "
                "CI installs ../shared/toolchain, or build behavioral-model with PI)"
            )
        return None
    if need == "mininet":
        if shutil.which("mnexec") is None:
            return "needs Debian's mininet (mnexec): run make install"
        return unmet("root")
    raise ValueError(f"unknown need {need!r} (root, bmv2, mininet)")


def unmet_needs(marker_names: Iterable[str]) -> str | None:
    """The first unmet need among a test's markers (others are not needs), or None."""
    for name in marker_names:
        if name in ("root", "bmv2", "mininet") and (reason := unmet(name)):
            return f"{name}: {reason}"
    return None


def params(kinds: Iterable[str] = TARGETS, needs: tuple[str, ...] = ()) -> list[Any]:
    """Targets as pytest params (fixture or parametrize) carrying their needs as markers,
    plus `needs` common to all (e.g. ("root", "mininet") for a Mininet test)."""
    import pytest

    out = []
    for kind in kinds:
        names = dict.fromkeys(needs + NEEDS[kind])  # ordered, no duplicates
        out.append(
            pytest.param(kind, id=kind, marks=[getattr(pytest.mark, name) for name in names])
        )
    return out


# ---- the switch under test -----------------------------------------------------------


class SwitchUnderTest(Protocol):
    """What the packet-level and controller tests use, whatever the target."""

    kind: str

    @property
    def grpc_addr(self) -> str: ...
    def send(self, port: int, frame: bytes) -> None: ...
    def recv(self, port: int, timeout: float = 2.0) -> bytes | None: ...
    def recv_all(self, port: int, timeout: float = 0.5) -> list[bytes]: ...
    def drain(self) -> None: ...
    def restart(self, timeout: float = 30.0) -> None: ...
    def log(self) -> str: ...
    def stop(self) -> None: ...


def start(kind: str, n_ports: int) -> SwitchUnderTest:
    """A started switch of `kind` with ports 1..n_ports (the caller stops it)."""
    if kind == INPROCESS:
        return InProcessTarget(n_ports).start()
    if kind in VETH_TARGETS:
        return SwitchProcess(kind, n_ports=n_ports).start()
    raise ValueError(f"unknown target {kind!r} ({', '.join(TARGETS)})")


def _recv_all(switch: SwitchUnderTest, port: int, timeout: float) -> list[bytes]:
    frames = []
    while (frame := switch.recv(port, timeout)) is not None:
        frames.append(frame)
    return frames


@dataclass
class InProcessTarget:
    """softswitch in this process: a `Device` behind a `P4RuntimeServer` on loopback, with
    in-process ports (tests/inprocess_switch.py is the hostlib tests' variant: worker
    transports, woken by a condition, and jobs from the controller's JobManager). A frame
    sent is processed before `send` returns (one pipeline, as softswitch's single port
    thread); what the switch emits waits in a per-port queue.
    The P4 program's frames come only from frames sent (p4reduce uses no PacketOut)."""

    n_ports: int
    device_id: int = 1
    kind: str = INPROCESS
    grpc_port: int = 0  # 0: a free port, kept across restarts
    device: Any = None
    ports: Any = None
    server: Any = None

    @property
    def grpc_addr(self) -> str:
        assert self.server is not None, "not started"
        return self.server.address

    def start(self, timeout: float = 30.0) -> "InProcessTarget":
        # imported here: the interpreter is heavy and veth-only callers never need it
        from softswitch.p4runtime_server import Device, P4RuntimeServer
        from softswitch.ports import InProcessPorts

        self.device = Device(device_id=self.device_id)
        self.ports = InProcessPorts()
        self.ports.attach(self.device)
        self.server = P4RuntimeServer(self.device, f"127.0.0.1:{self.grpc_port}")
        self.grpc_port = self.server.start()
        return self

    def restart(self, timeout: float = 30.0) -> None:
        """A switch reboot on the same gRPC port: no pipeline, no state, no queued frames."""
        self.stop()
        self.start(timeout)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(0)
            self.server = None

    def log(self) -> str:
        return ""

    def _check(self, port: int) -> None:
        if not 1 <= port <= self.n_ports:
            raise ValueError(f"port {port} is not one of this switch's ports 1..{self.n_ports}")

    def send(self, port: int, frame: bytes) -> None:
        self._check(port)
        self.ports.inject(port, frame)

    def recv(self, port: int, timeout: float = 2.0) -> bytes | None:
        """Next frame the switch sent out of `port`, or None. Never waits: every frame the
        switch emits for the frames sent so far was queued before `send` returned, so an
        empty queue means nothing more is coming (`timeout` matters to veth targets only)."""
        self._check(port)
        return self.ports.poll(port, 0.0)

    def recv_all(self, port: int, timeout: float = 0.5) -> list[bytes]:
        """Every frame out of `port` until `timeout` passes with none."""
        return _recv_all(self, port, timeout)

    def drain(self) -> None:
        for port in range(1, self.n_ports + 1):
            self.ports.drain(port)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


@dataclass
class VethPair:
    switch_end: str
    host_end: str

    def create(self) -> None:
        _ip("link", "add", self.switch_end, "type", "veth", "peer", "name", self.host_end)
        for name in (self.switch_end, self.host_end):
            # no IPv6 router/neighbour solicitations: the only frames are the test's own
            Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6").write_text("1")
            _ip("link", "set", name, "mtu", "9000")
            _ip("link", "set", name, "up")

    def delete(self) -> None:
        _ip("link", "del", self.switch_end, check=False)


@dataclass
class SwitchProcess:
    """One switch process on `n_ports` veth ports (numbered 1..n), with its own gRPC/Thrift
    ports; the tests send and receive real frames on the host ends with AF_PACKET sockets."""

    kind: str
    n_ports: int
    device_id: int = 1
    extra_args: tuple[str, ...] = ()  # passed to the switch (e.g. bmv2's logging)
    pairs: dict[int, VethPair] = field(default_factory=dict)
    sockets: dict[int, socket.socket] = field(default_factory=dict)
    runner: SwitchRunner | None = None

    @property
    def grpc_addr(self) -> str:
        assert self.runner is not None
        return self.runner.grpc_addr

    def start(self, timeout: float = 30.0) -> "SwitchProcess":
        tag = secrets.token_hex(3)
        try:
            for port in range(1, self.n_ports + 1):
                pair = VethPair(f"p4r{tag}{port}s", f"p4r{tag}{port}h")
                self.pairs[port] = pair
                pair.create()
                # protocol 0 receives nothing until bound to the one interface: a socket
                # created for ETH_P_ALL would queue every interface's frames until then
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                sock.bind((pair.host_end, ETH_P_ALL))
                sock.setblocking(False)
                self.sockets[port] = sock
            self.runner = SwitchRunner(
                self.kind,
                {port: pair.switch_end for port, pair in self.pairs.items()},
                self.device_id,
                extra_args=self.extra_args,
            )
            self.runner.start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self, timeout: float = 30.0) -> None:
        """A switch reboot on the same ports: it comes back with no pipeline and no state."""
        assert self.runner is not None
        self.runner.restart(timeout)

    def log(self) -> str:
        return self.runner.log() if self.runner is not None else ""

    def stop(self) -> None:
        """Stop what this object started, by PID, and delete its interfaces."""
        if self.runner is not None:
            self.runner.stop()
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()
        for pair in self.pairs.values():
            pair.delete()
        self.pairs.clear()

    # ---- frames --------------------------------------------------------------------
    def send(self, port: int, frame: bytes) -> None:
        self.sockets[port].send(frame)

    def drain(self) -> None:
        for sock in self.sockets.values():
            while True:
                try:
                    sock.recv(65535)
                except BlockingIOError:
                    break

    def recv(self, port: int, timeout: float = 2.0) -> bytes | None:
        """Next frame the switch sent out of `port` (frames we sent ourselves are skipped)."""
        sock = self.sockets[port]
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([sock], [], [], remaining)
            if not ready:
                return None
            data, addr = sock.recvfrom(65535)
            if addr[2] == PACKET_OUTGOING:
                continue
            return data

    def recv_all(self, port: int, timeout: float = 0.5) -> list[bytes]:
        """Every frame out of `port` until `timeout` passes with none."""
        return _recv_all(self, port, timeout)
