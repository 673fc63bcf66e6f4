"""Throw-away network namespaces for end-to-end tests and the benchmark.

Topology for N workers: one namespace "switch" and one per rank; rank i's namespace holds
veth end `<tag>w<i>` (the descriptor's worker MAC and IP), the switch namespace holds the
peer `<tag>s<i>` (the switch MAC). Names carry a random tag so parallel runs never collide,
and everything is deleted on exit, also after a failure (deleting a namespace deletes its
veth ends). Needs root and iproute2. Addresses exist only inside these namespaces.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import subprocess
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from p4reduce.addresses import Address
from p4reduce.job import JobConfig

from .protocol import BLOCK_VALUES, UDP_PORT_BASE

SWITCH_MAC = "02:00:00:00:01:00"
SWITCH_IP = "10.250.0.254"
SUBNET = "10.250.0.{}/24"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=20)


def available() -> str | None:
    """None when namespaces can be made here, else the reason."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs)"
    try:
        _ip("-V")
    except (OSError, subprocess.SubprocessError) as e:
        return f"iproute2 not usable: {e}"
    return None


class Topology:
    """`with Topology(n) as t:` -> t.descriptors, t.worker_ns[i], t.switch_ns, t.switch_if."""

    def __init__(
        self,
        worker_count: int,
        *,
        job: int = 7,
        slot_count: int = 64,
        udp_port: int = UDP_PORT_BASE,
        block_values: int = BLOCK_VALUES,
        mtu: int | None = None,
    ):
        self.tag = "p4r" + secrets.token_hex(3)
        self.worker_count = worker_count
        self.mtu = mtu  # of both ends of every veth pair; None: the kernel's (1 500)
        self.switch_ns = f"{self.tag}-sw"
        self.worker_ns = [f"{self.tag}-w{i}" for i in range(worker_count)]
        self.switch_if = [f"{self.tag}s{i}" for i in range(worker_count)]
        self.worker_if = [f"{self.tag}w{i}" for i in range(worker_count)]
        self.descriptors: list[dict[str, Any]] = [
            JobConfig(
                job=job,
                epoch=1,
                rank=i,
                worker_count=worker_count,
                slot_base=0,
                slot_count=slot_count,
                switch=Address(SWITCH_MAC, SWITCH_IP, UDP_PORT_BASE),
                worker=Address(f"02:00:00:00:00:{i + 1:02x}", SUBNET.format(i + 1)[:-3], udp_port),
                block_values=block_values,
            ).to_dict()
            for i in range(worker_count)
        ]
        self._made: list[str] = []

    def __enter__(self) -> "Topology":
        try:
            self._create()
        except BaseException:
            self.delete()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def _create(self) -> None:
        for ns in [self.switch_ns, *self.worker_ns]:
            _ip("netns", "add", ns)
            self._made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        for i in range(self.worker_count):
            w, s = self.worker_if[i], self.switch_if[i]
            _ip(
                "link",
                "add",
                w,
                "netns",
                self.worker_ns[i],
                "type",
                "veth",
                "peer",
                "name",
                s,
                "netns",
                self.switch_ns,
            )
            d = self.descriptors[i]["worker"]
            _ip("-n", self.worker_ns[i], "link", "set", w, "address", d["mac"])
            _ip("-n", self.worker_ns[i], "addr", "add", SUBNET.format(i + 1), "dev", w)
            _ip("-n", self.worker_ns[i], "link", "set", w, "up")
            _ip("-n", self.switch_ns, "link", "set", s, "address", SWITCH_MAC)
            _ip("-n", self.switch_ns, "link", "set", s, "up")
            if self.mtu is not None:
                self.set_mtu(i, self.mtu)
            for ns, dev in ((self.worker_ns[i], w), (self.switch_ns, s)):
                subprocess.run(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        "sysctl",
                        "-qw",
                        f"net.ipv6.conf.{dev}.disable_ipv6=1",
                    ],
                    capture_output=True,
                    check=False,
                    timeout=20,
                )

    def set_mtu(self, i: int, mtu: int) -> None:
        """Both ends of worker i's veth pair at `mtu` (a job of K values per block needs
        wire.mtu_needed(K))."""
        _ip("-n", self.worker_ns[i], "link", "set", "dev", self.worker_if[i], "mtu", str(mtu))
        _ip("-n", self.switch_ns, "link", "set", "dev", self.switch_if[i], "mtu", str(mtu))

    def delete(self) -> None:
        for ns in reversed(self._made):
            _ip("netns", "del", ns, check=False)
        self._made = []

    def exec_argv(self, ns: str, argv: Sequence[str]) -> list[str]:
        """argv that runs `argv` inside namespace `ns`."""
        return ["ip", "netns", "exec", ns, *argv]


CLONE_NEWNET = 0x40000000


@contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the block with the calling thread inside namespace `name` (sockets opened there
    stay there after the block). Lets one test process own sockets in several namespaces.
    `name` is an `ip netns` name or a path such as /proc/PID/ns/net (a Mininet host)."""
    libc = ctypes.CDLL(None, use_errno=True)
    path = name if name.startswith("/") else f"/var/run/netns/{name}"
    with open("/proc/thread-self/ns/net", "rb") as home, open(path, "rb") as target:
        if libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name} failed")
        try:
            yield
        finally:
            if libc.setns(home.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the original namespace")
