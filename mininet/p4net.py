"""A Mininet network of one P4 switch and N worker hosts, no OpenFlow anywhere.

The switch node runs `simple_switch_grpc` where it is installed and softswitch otherwise
(or whichever `target` forces), in the root namespace, with each Mininet link's switch end
as a port. The P4 switch is the only switch: no OVS, no OpenFlow controller. Mininet's
hosts are network namespaces joined to the switch by veth pairs.

Imported by path (this directory is not a package, so Debian's `mininet` stays importable).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mininet.net import Mininet
from mininet.node import Switch
from mininet.topo import Topo

REPO = Path(__file__).resolve().parent.parent
SOFTSWITCH, SIMPLE_SWITCH_GRPC = "softswitch", "simple_switch_grpc"
SWITCH_MAC = "02:00:00:00:01:00"
SWITCH_IP = "10.0.0.254"


def resolve_target(target: str) -> str:
    if target in ("auto", ""):
        return SIMPLE_SWITCH_GRPC if shutil.which("simple_switch_grpc") else SOFTSWITCH
    if target in ("bmv2", SIMPLE_SWITCH_GRPC):
        if not shutil.which("simple_switch_grpc"):
            raise RuntimeError("target simple_switch_grpc requested but it is not on PATH")
        return SIMPLE_SWITCH_GRPC
    if target == SOFTSWITCH:
        return SOFTSWITCH
    raise ValueError(f"unknown target {target!r} (auto, softswitch, simple_switch_grpc)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class P4Switch(Switch):
    """A Mininet switch node that is a P4 target process serving P4Runtime."""

    def __init__(self, name: str, target: str = SOFTSWITCH, grpc_port: int = 0,
                 thrift_port: int = 0, **params):
        super().__init__(name, **params)
        self.target = target
        self.grpc_port = grpc_port or free_port()
        self.thrift_port = thrift_port or free_port()
        self.process: subprocess.Popen | None = None
        self.log_file = Path(tempfile.mkstemp(prefix=f"p4reduce-{name}-", suffix=".log")[1])

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def port_map(self) -> dict[int, str]:
        return {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}

    def command(self) -> list[str]:
        ifaces = [a for port, name in sorted(self.port_map().items())
                  for a in ("-i", f"{port}@{name}")]
        if self.target == SOFTSWITCH:
            return [sys.executable, "-m", "softswitch", *ifaces, "--device-id", "1",
                    "--grpc-server-addr", self.grpc_addr]
        return ["simple_switch_grpc", *ifaces, "--no-p4", "--device-id", "1",
                "--thrift-port", str(self.thrift_port), "--",
                "--grpc-server-addr", self.grpc_addr]

    def start(self, controllers) -> None:  # noqa: ARG002 -- no OpenFlow controllers
        for name in self.port_map().values():
            # quiet links: no IPv6 autoconfiguration traffic through the switch
            Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6").write_text("1")
        with open(self.log_file, "w") as log:
            self.process = subprocess.Popen(self.command(), stdout=log,
                                            stderr=subprocess.STDOUT, cwd=REPO,
                                            start_new_session=True)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import grpc
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.grpc_addr) as channel:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.target} exited: {self.log()}")
                try:
                    grpc.channel_ready_future(channel).result(timeout=0.5)
                    return
                except grpc.FutureTimeoutError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{self.target} not serving P4Runtime on "
                                           f"{self.grpc_addr}: {self.log()}") from None

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")[-3000:] if self.log_file.exists() else ""

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 -- Mininet's signature
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log_file.unlink(missing_ok=True)
        super().stop(deleteIntfs)


@dataclass(frozen=True)
class HostSpec:
    name: str
    port: int
    mac: str
    ip: str


def host_specs(n: int) -> list[HostSpec]:
    return [HostSpec(f"h{i}", i, f"02:00:00:00:00:{i:02x}", f"10.0.0.{i}")
            for i in range(1, n + 1)]


class StarTopo(Topo):
    """One switch, every host on its own switch port (port i = host hi)."""

    def build(self, hosts: list[HostSpec]) -> None:  # type: ignore[override]
        switch = self.addSwitch("s1")
        for h in hosts:
            node = self.addHost(h.name, ip=f"{h.ip}/24", mac=h.mac)
            self.addLink(node, switch, port2=h.port)


def build_network(hosts: list[HostSpec], target: str) -> Mininet:
    """A started Mininet with the P4 switch serving P4Runtime (not yet configured)."""
    topo = StarTopo(hosts=hosts)
    net = Mininet(topo=topo, switch=lambda name, **kw: P4Switch(name, target=target, **kw),
                  controller=None, autoSetMacs=False, waitConnected=False)
    try:
        net.start()
    except BaseException:
        net.stop()
        raise
    return net
