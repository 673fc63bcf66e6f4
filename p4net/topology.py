"""A Mininet network of P4 switches and N worker hosts, no OpenFlow anywhere.

Two shapes: a star (one switch, every host on its own port) and a two-level fabric (a
spine and two leaves, the hosts split between the leaves, each leaf's last port its
uplink to the spine: p4reduce.fabric's shape). Every switch node runs
`simple_switch_grpc` where it is installed and softswitch otherwise (or whichever `kind`
forces), in the root namespace, with each Mininet link's switch end as a port and its own
gRPC and Thrift ports. The P4 switches are the only switches: no OVS, no OpenFlow
controller. Mininet's hosts are network namespaces joined to the switches by veth pairs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mininet.net import Mininet
from mininet.node import Switch
from mininet.topo import Topo

from p4reduce.target import SOFTSWITCH
from p4reduce import wire
from softswitch.runner import SwitchRunner

SWITCH_MAC = "02:00:00:00:01:00"
SWITCH_IP = "10.0.0.254"
# Link MTUs the topology sets (p4reduce.wire.link_mtu): Ethernet's default, and the jumbo
# size both switch kinds forward (softswitch reads up to 256 KiB per frame, bmv2 captures
# whole frames) and TCP programs such as gloo are measured at as well
DEFAULT_MTU = wire.ETHERNET_MTU
JUMBO_MTU = wire.JUMBO_MTU


class P4Switch(Switch):
    """A Mininet switch node that is a P4 switch process serving P4Runtime."""

    def __init__(
        self,
        name: str,
        kind: str = SOFTSWITCH,
        cancelled: Callable[[], bool] | None = None,
        **params,
    ):
        super().__init__(name, **params)
        self.kind = kind  # the switch process's kind (p4reduce.target)
        self.cancelled = cancelled
        self.runner: SwitchRunner | None = None

    @property
    def grpc_addr(self) -> str:
        assert self.runner is not None, "switch not started"
        return self.runner.grpc_addr

    def port_map(self) -> dict[int, str]:
        return {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}

    def start(self, controllers) -> None:  # noqa: ARG002 -- no OpenFlow controllers
        for name in self.port_map().values():
            # quiet links: no IPv6 autoconfiguration traffic through the switch
            Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6").write_text("1")
        # recorded before it is started: stop() must reach a switch whose start was cut short
        self.runner = SwitchRunner(self.kind, self.port_map())
        self.runner.start(cancelled=self.cancelled)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 -- Mininet's signature
        if self.runner is not None:
            self.runner.stop()
        super().stop(deleteIntfs)


# The switch's name: its links are `<name>-eth<port>` in the root namespace, so two networks
# built side by side (parallel test runs) must not share it. Unique per process. In a
# two-level network it is the spine's (where jobs aggregate), and LEAF_NAMES the leaves'.
SWITCH_NAME = f"s{os.getpid()}"
LEAF_NAMES = (f"a{os.getpid()}", f"b{os.getpid()}")
STAR, TWO_LEVEL = "star", "two-level"
TOPOLOGIES = (STAR, TWO_LEVEL)
# the two-level network's switch addresses: the spine is the star's switch; leaves beside it
LEAF_MACS = ("02:00:00:00:01:01", "02:00:00:00:01:02")
LEAF_IPS = ("10.0.0.252", "10.0.0.253")


@dataclass(frozen=True)
class HostSpec:
    name: str
    port: int
    mac: str
    ip: str
    switch: str = SWITCH_NAME  # the switch the host's link ends on (a leaf in two levels)

    @property
    def link(self) -> str:
        """The switch-side end of the host's link (its counters are the host's traffic)."""
        return f"{self.switch}-eth{self.port}"


def host_specs(n: int, topo: str = STAR) -> list[HostSpec]:
    """Hosts h1..hn (10.0.0.i): on ports 1..n of the star's switch, or the first half on
    ports 1.. of the first leaf and the rest on the second's."""
    if topo == STAR:
        return [
            HostSpec(f"h{i}", i, f"02:00:00:00:00:{i:02x}", f"10.0.0.{i}") for i in range(1, n + 1)
        ]
    per_leaf = leaf_hosts(n)
    return [
        HostSpec(
            f"h{i}",
            (i - 1) % per_leaf + 1,
            f"02:00:00:00:00:{i:02x}",
            f"10.0.0.{i}",
            LEAF_NAMES[(i - 1) // per_leaf],
        )
        for i in range(1, n + 1)
    ]


def leaf_hosts(n: int) -> int:
    """Host ports of each leaf in a two-level network of n hosts (its uplink is the next)."""
    return max(1, -(-n // len(LEAF_NAMES)))


class StarTopo(Topo):
    """One switch, every host on its own switch port (port i = host hi)."""

    def build(self, hosts: list[HostSpec]) -> None:  # type: ignore[override]
        switch = self.addSwitch(SWITCH_NAME)
        for h in hosts:
            node = self.addHost(h.name, ip=f"{h.ip}/24", mac=h.mac)
            self.addLink(node, switch, port2=h.port)


class TwoLevelTopo(Topo):
    """A spine (SWITCH_NAME) and two leaves; leaf i's uplink (its port after its hosts')
    is the spine's port i + 1. Each switch gets its own datapath id (Mininet derives one
    from the name's digits, the same pid in all three)."""

    def build(self, hosts: list[HostSpec]) -> None:  # type: ignore[override]
        spine = self.addSwitch(SWITCH_NAME, dpid="1")
        uplink = leaf_hosts(len(hosts)) + 1
        for i, name in enumerate(LEAF_NAMES):
            leaf = self.addSwitch(name, dpid=str(i + 2))
            self.addLink(leaf, spine, port1=uplink, port2=i + 1)
        for h in hosts:
            node = self.addHost(h.name, ip=f"{h.ip}/24", mac=h.mac)
            self.addLink(node, h.switch, port2=h.port)


def fabric_config(net: Mininet, hosts: list[HostSpec], state_dir: Path) -> dict:
    """The controller's configuration of a started two-level network
    (controlplane.config's [[switches]], [[links]] and [[hosts]])."""
    uplink = leaf_hosts(len(hosts)) + 1
    switches = [
        {
            "name": SWITCH_NAME,
            "role": "spine",
            "grpc_addr": net.get(SWITCH_NAME).grpc_addr,
            "mac": SWITCH_MAC,
            "ip": SWITCH_IP,
            "ports": list(range(1, len(LEAF_NAMES) + 1)),
            "state_file": str(state_dir / f"{SWITCH_NAME}.json"),
        }
    ]
    switches += [
        {
            "name": name,
            "role": "leaf",
            "grpc_addr": net.get(name).grpc_addr,
            "mac": LEAF_MACS[i],
            "ip": LEAF_IPS[i],
            "ports": list(range(1, uplink + 1)),
            "state_file": str(state_dir / f"{name}.json"),
        }
        for i, name in enumerate(LEAF_NAMES)
    ]
    return {
        "switches": switches,
        "links": [
            {"a": f"{name}:{uplink}", "b": f"{SWITCH_NAME}:{i + 1}"}
            for i, name in enumerate(LEAF_NAMES)
        ],
        "hosts": [{"switch": h.switch, "port": h.port, "mac": h.mac, "ip": h.ip} for h in hosts],
    }


def build_network(
    hosts: list[HostSpec],
    kind: str,
    cancelled: Callable[[], bool] | None = None,
    mtu: int = DEFAULT_MTU,
    topo: str = STAR,
) -> Mininet:
    """A started Mininet with the P4 switches serving P4Runtime (not yet configured), its
    links at `mtu` (set_mtu). `cancelled` is polled while a switch starts
    (KeyboardInterrupt when it says so)."""
    topo_class = {STAR: StarTopo, TWO_LEVEL: TwoLevelTopo}[topo]
    topology = topo_class(hosts=hosts)
    net = Mininet(
        topo=topology,
        switch=lambda name, **kw: P4Switch(name, kind=kind, cancelled=cancelled, **kw),
        controller=None,
        autoSetMacs=False,
        waitConnected=False,
    )
    try:
        net.start()
        for h in hosts:
            disable_offloads(net.get(h.name))
        set_mtu(net, mtu)
    except BaseException:
        net.stop()
        raise
    return net


def disable_offloads(host) -> None:
    """TCP between hosts (e.g. gloo in the benchmarks) crosses a switch that reads and writes
    whole frames from user space: the hosts must send real MTU-sized frames with their
    checksums filled in, not 64 KB TSO/GSO super-frames with checksums left to offload,
    which a software switch can neither forward (over the MTU) nor fix (bad checksum)."""
    for intf in host.intfNames():
        if intf != "lo":
            host.cmd(f"ethtool -K {intf} tx off tso off gso off gro off >/dev/null 2>&1")


def set_mtu(net: Mininet, mtu: int) -> None:
    """Every host link at `mtu`, both ends: the host's interface (what its TCP segments to)
    and the switch's port (what the switch process reads and sends). The one place a link's
    MTU is set, so a comparison at two MTUs changes nothing else about the network."""
    if not 68 <= mtu <= 65535:
        raise ValueError(f"MTU {mtu}: outside 68..65535")
    for node in net.hosts + net.switches:  # a two-level network's uplinks too
        for intf in node.intfList():
            if intf.name == "lo" or intf.link is None:
                continue
            for end in (intf, intf.link.intf1 if intf.link.intf2 is intf else intf.link.intf2):
                out = end.node.cmd(f"ip link set dev {end.name} mtu {mtu}; echo $?").strip()
                if not out.endswith("0"):
                    raise RuntimeError(f"{end.name}: setting MTU {mtu} failed: {out}")


def link_mtus(net: Mininet) -> dict[str, int]:
    """Each host link's MTU as its host sees it (what a report states it measured at)."""
    out = {}
    for host in net.hosts:
        for intf in host.intfList():
            if intf.name != "lo":
                out[intf.name] = int(host.cmd(f"cat /sys/class/net/{intf.name}/mtu").strip())
    return out
