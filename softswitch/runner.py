"""Starting a P4 switch process: softswitch or simple_switch_grpc, the same way.

The one place that knows both command lines (the kinds are p4reduce.target's KINDS). The
packet-level suite, the controller tests and the Mininet switch node all start their switch
through `SwitchRunner`, so every switch gets its own gRPC and Thrift ports (checked: the
server answering there must be its process, and no other process may listen there too),
is waited for until it serves P4Runtime, and is stopped by its PID (never by name).
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
from pathlib import Path
from typing import Callable

import grpc

from p4reduce.p4rt.ready import server_answers
from p4reduce.target import KINDS, SIMPLE_SWITCH_GRPC, SOFTSWITCH

# bmv2's log level (--log-level). Its default, trace, formats every trace message of every
# primitive even with no log sink configured: most of what a default-build bmv2 spends per
# packet on p4reduce's program (docs/benchmarks.md, *Per packet*). p4reduce starts it with
# logging off; set P4REDUCE_BMV2_LOG_LEVEL=trace (or debug, info) to get bmv2's behaviour
# back, e.g. with --log-console in a switch's extra_args while debugging.
BMV2_LOG_LEVEL_ENV = "P4REDUCE_BMV2_LOG_LEVEL"
BMV2_LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "off")
# The switch's scheduling priority, as a nice value: it and every rank of a job share the
# host's cores, and the switch is the serial part (one packet thread on softswitch), so a
# round waits whenever the switch waits for a core. Linux's autogroup scheduling gives
# every session an equal share of the cores whatever its processes' nice values, and the
# switch runs in a session of its own (as every Mininet host's processes do), so a dense
# call of 4 ranks had its switch thread runnable but off the cores for longer than it ran
# (bench/call_breakdown.py's "queued"). Its session's group is given this nice value (and
# the process the same, where autogroup is off): the switch then runs whenever it has
# packets, and the ranks, which wait for its results anyway, take the rest. Raising a
# priority needs root (CAP_SYS_NICE); without it the switch runs at the default priority.
SWITCH_NICE = -10
# the switch process's working directory: the one holding this softswitch package (the
# checkout, or site-packages of an installed p4reduce), so `python -m softswitch` runs this
# same code even where the package is importable only from there
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A port free_tcp_port found is free only until something else binds it: another switch
# started beside this one (tests run side by side) may be handed the same port between
# the two. So a launcher checks that the server answering on its gRPC port is its own
# process's, and, where it chose the ports itself, tries new ones this many times.
PORT_ATTEMPTS = 3
_TCP_LISTEN = "0A"  # /proc/net/tcp's state of a listening socket


class PortTaken(RuntimeError):
    """Another process listens on a port the switch was to serve on."""


def listening_inodes(pid: int, port: int) -> set[int]:
    """The inodes of the TCP sockets listening on `port` in process `pid`'s network
    namespace, whoever holds them (/proc/PID/net/tcp and tcp6)."""
    out: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == _TCP_LISTEN and int(f[1].rsplit(":", 1)[1], 16) == port:
                out.add(int(f[9]))
    return out


def held_sockets(pid: int, inodes: set[int]) -> set[int]:
    """Those of the sockets `inodes` that process `pid` has open (none for a process that
    has exited)."""
    by_link = {f"socket:[{i}]": i for i in inodes}
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return set()
    held = set()
    for fd in fds:
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link in by_link:
            held.add(by_link[link])
    return held


def resolve_kind(kind: str) -> str:
    """auto -> simple_switch_grpc where installed, else softswitch; refuses the unknown."""
    if kind in ("auto", ""):
        return SIMPLE_SWITCH_GRPC if shutil.which(SIMPLE_SWITCH_GRPC) else SOFTSWITCH
    if kind in ("bmv2", SIMPLE_SWITCH_GRPC):
        if not shutil.which(SIMPLE_SWITCH_GRPC):
            raise RuntimeError("switch kind simple_switch_grpc requested but it is not on PATH")
        return SIMPLE_SWITCH_GRPC
    if kind in KINDS:
        return kind
    raise ValueError(f"unknown switch kind {kind!r} (auto, {', '.join(KINDS)})")


def prioritize(pid: int, nice: int) -> bool:
    """Give process `pid` -- the leader of its own session -- the scheduling priority
    `nice` (SWITCH_NICE says why): its autogroup's nice value (/proc/PID/autogroup, what
    the scheduler weighs sessions by when autogroup is on) and its own (inherited by the
    threads it starts, what counts when autogroup is off). Best effort: False when either
    could not be set (no root, no such file), the switch then runs as it is."""
    done = True
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError:
        done = False
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError:
        done = False
    return done


class SwitchRunner:
    """One switch process with interfaces {port: ifname} and its own gRPC/Thrift ports."""

    def __init__(
        self,
        kind: str,
        interfaces: dict[int, str],
        device_id: int = 1,
        grpc_port: int = 0,
        thrift_port: int = 0,
        extra_args: tuple[str, ...] = (),
        cpu_port: int | None = None,
        nice: int | None = SWITCH_NICE,
    ):
        self.kind = kind
        self.nice = nice  # SWITCH_NICE; None: the default priority
        self.extra_args = tuple(extra_args)  # target options, e.g. bmv2's --log-level
        self.interfaces = interfaces
        self.device_id = device_id
        self.cpu_port = cpu_port  # PacketIn/PacketOut port (--cpu-port), if any
        self.grpc_port = grpc_port or free_tcp_port()
        self.thrift_port = thrift_port or free_tcp_port()
        self.chose_ports = not (grpc_port or thrift_port)  # may move to others (PortTaken)
        self.process: subprocess.Popen | None = None
        self.log_path = Path(tempfile.mkstemp(prefix=f"{kind}-", suffix=".log")[1])

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def command(self) -> list[str]:
        ifaces = [
            arg
            for port, name in sorted(self.interfaces.items())
            for arg in ("-i", f"{port}@{name}")
        ]
        cpu = [] if self.cpu_port is None else ["--cpu-port", str(self.cpu_port)]
        if self.kind == SOFTSWITCH:
            return [
                sys.executable,
                "-m",
                "softswitch",
                *ifaces,
                "--device-id",
                str(self.device_id),
                "--grpc-server-addr",
                self.grpc_addr,
                *cpu,
                *self.extra_args,
            ]
        return [
            SIMPLE_SWITCH_GRPC,
            *ifaces,
            "--no-p4",
            "--device-id",
            str(self.device_id),
            "--thrift-port",
            str(self.thrift_port),
            *self._log_args(),
            *self.extra_args,
            "--",
            "--grpc-server-addr",
            self.grpc_addr,
            *cpu,
        ]

    def _log_args(self) -> list[str]:
        """bmv2's --log-level unless extra_args set it (bench/primitives.py traces)."""
        if any(a in ("-L", "--log-level") for a in self.extra_args):
            return []
        level = os.environ.get(BMV2_LOG_LEVEL_ENV, "off")
        if level not in BMV2_LOG_LEVELS:
            raise ValueError(
                f"{BMV2_LOG_LEVEL_ENV}={level!r}: not one of {', '.join(BMV2_LOG_LEVELS)}"
            )
        return ["--log-level", level]

    def start(
        self, timeout: float = 30.0, cancelled: Callable[[], bool] | None = None
    ) -> "SwitchRunner":
        """Start the process (its own session, so stop() reaches its children) and wait
        until it serves P4Runtime. `cancelled` is polled while waiting (every 0.5 s); when
        it returns True the wait ends with KeyboardInterrupt, raised here rather than
        inside grpc (see mininet/demo.py's StopRequests). The process is recorded before
        the wait, so stop() reaches it whatever ends the wait. Where another process took
        a port this runner chose (PortTaken), it starts again on new ones (PORT_ATTEMPTS)."""
        attempt = 1
        while True:
            try:
                return self._start_here(timeout, cancelled)
            except PortTaken:
                self._kill(signal.SIGKILL)
                if not self.chose_ports or attempt == PORT_ATTEMPTS:
                    raise
            attempt += 1
            self.grpc_port, self.thrift_port = free_tcp_port(), free_tcp_port()

    def _start_here(self, timeout: float, cancelled: Callable[[], bool] | None) -> "SwitchRunner":
        """Start the process on this runner's ports and wait until it serves."""
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=PACKAGE_ROOT,
                start_new_session=True,
            )
        if self.nice is not None:
            prioritize(self.process.pid, self.nice)
        self._wait_ready(timeout, cancelled)
        return self

    def _wait_ready(self, timeout: float, cancelled: Callable[[], bool] | None = None) -> None:
        """Until this process serves P4Runtime on its gRPC port: a server that answers
        there but is another process's is not it (PortTaken once this one has exited)."""
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.grpc_addr) as channel:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    self._raise_exited()
                if cancelled is not None and cancelled():
                    raise KeyboardInterrupt(f"stopped while {self.kind} was starting")
                if server_answers(channel, 0.5) and self._serves_grpc():
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{self.kind} did not serve P4Runtime on "
                        f"{self.grpc_addr} within {timeout}s:\n"
                        f"{self.log()}"
                    )

    def _serves_grpc(self) -> bool:
        """Whether this process, and only it, listens on the gRPC port. gRPC servers bind
        with SO_REUSEPORT unless told otherwise (simple_switch_grpc's do), so a second
        switch on a port shares it, and a client reaches either: PortTaken where another
        process listens there too. (True where /proc cannot tell: as before.)"""
        assert self.process is not None
        listening = listening_inodes(os.getpid(), self.grpc_port)  # the switch's netns
        if not listening:
            return True
        mine = held_sockets(self.process.pid, listening)
        if mine and mine != listening:
            raise PortTaken(
                f"{self.kind} shares its gRPC port {self.grpc_port} with another process"
            )
        return bool(mine)

    def _raise_exited(self) -> None:
        """The process exited while starting: PortTaken where another process listens on
        one of its ports, else the exit and the log."""
        assert self.process is not None
        served = [("gRPC", self.grpc_port)]
        if self.kind != SOFTSWITCH:  # (softswitch serves no Thrift)
            served.append(("Thrift", self.thrift_port))
        for name, port in served:
            if listening_inodes(os.getpid(), port):
                raise PortTaken(
                    f"{self.kind} could not serve on its {name} port {port}: another "
                    f"process listens there:\n{self.log()}"
                )
        raise RuntimeError(f"{self.kind} exited with {self.process.returncode}:\n{self.log()}")

    def restart(self, timeout: float = 30.0) -> None:
        """Kill and start again on the same ports: a switch reboot (no pipeline, no state)."""
        self._kill(signal.SIGKILL)
        self._start_here(timeout, None)  # on the same ports, whoever took them meanwhile

    def _kill(self, sig: int) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, sig)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        self._kill(signal.SIGTERM)
        self.log_path.unlink(missing_ok=True)

    def log(self) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-4000:]
