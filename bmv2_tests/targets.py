"""Switch targets for the packet-level suite: the same veth ports, the same P4Runtime.

A target is a switch process whose ports are the switch ends of veth pairs; the tests send
and receive real frames on the other ends with AF_PACKET sockets and configure the switch
over real P4Runtime gRPC. softswitch and simple_switch_grpc are started the same way, so
the suite's assertions cannot tell them apart -- which is the point.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

SOFTSWITCH = "softswitch"
SIMPLE_SWITCH_GRPC = "simple_switch_grpc"
TARGETS = (SOFTSWITCH, SIMPLE_SWITCH_GRPC)
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def skip_reason(kind: str) -> str | None:
    """Why a target cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "veth interfaces need root"
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    if kind == SIMPLE_SWITCH_GRPC and shutil.which("simple_switch_grpc") is None:
        return ("simple_switch_grpc is not on PATH (bmv2 cannot be installed from any "
                "package registry; build behavioral-model with PI to run this target)")
    return None


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    """One switch on `n_ports` veth ports (numbered 1..n), with its own gRPC/Thrift ports."""
    kind: str
    n_ports: int
    device_id: int = 1
    grpc_port: int = field(default_factory=free_tcp_port)
    thrift_port: int = field(default_factory=free_tcp_port)
    pairs: dict[int, VethPair] = field(default_factory=dict)
    sockets: dict[int, socket.socket] = field(default_factory=dict)
    process: subprocess.Popen | None = None
    log_path: Path | None = None

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def command(self) -> list[str]:
        ifaces = [arg for port, pair in sorted(self.pairs.items())
                  for arg in ("-i", f"{port}@{pair.switch_end}")]
        if self.kind == SOFTSWITCH:
            return [sys.executable, "-m", "softswitch", *ifaces, "--device-id",
                    str(self.device_id), "--grpc-server-addr", self.grpc_addr]
        return ["simple_switch_grpc", *ifaces, "--no-p4", "--device-id", str(self.device_id),
                "--thrift-port", str(self.thrift_port), "--",
                "--grpc-server-addr", self.grpc_addr]

    def start(self, timeout: float = 30.0) -> "SwitchProcess":
        tag = secrets.token_hex(3)
        try:
            for port in range(1, self.n_ports + 1):
                pair = VethPair(f"p4r{tag}{port}s", f"p4r{tag}{port}h")
                self.pairs[port] = pair
                pair.create()
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                sock.bind((pair.host_end, 0))
                sock.setblocking(False)
                self.sockets[port] = sock
            fd, name = tempfile.mkstemp(prefix=f"{self.kind}-", suffix=".log")
            self.log_path = Path(name)
            repo = Path(__file__).resolve().parent.parent
            self.process = subprocess.Popen(self.command(), stdout=fd, stderr=subprocess.STDOUT,
                                            cwd=repo, start_new_session=True)
            os.close(fd)
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.grpc_addr) as channel:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"{self.kind} exited with {self.process.returncode}:\n"
                                       f"{self.log()}")
                try:
                    grpc.channel_ready_future(channel).result(timeout=0.5)
                    return
                except grpc.FutureTimeoutError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{self.kind} did not serve gRPC on "
                                           f"{self.grpc_addr} within {timeout}s:\n{self.log()}")

    def restart(self, timeout: float = 30.0) -> None:
        """Kill the switch process and start it again on the same ports (a switch reboot:
        it comes back with no pipeline and no state)."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND)
        repo = Path(__file__).resolve().parent.parent
        self.process = subprocess.Popen(self.command(), stdout=fd, stderr=subprocess.STDOUT,
                                        cwd=repo, start_new_session=True)
        os.close(fd)
        self._wait_ready(timeout)

    def log(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """Stop what this object started, by PID, and delete its interfaces."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()
        for pair in self.pairs.values():
            pair.delete()
        self.pairs.clear()
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

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
        import select
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
        frames = []
        while (frame := self.recv(port, timeout)) is not None:
            frames.append(frame)
        return frames
