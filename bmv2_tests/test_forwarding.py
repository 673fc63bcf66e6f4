"""Ordinary traffic still flows: ARP for the switch, L2 forwarding and flooding."""

from __future__ import annotations

from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import ARP, Ether

from controlplane import forwarding

from p4net.harness import SWITCH_IP, SWITCH_MAC, host_ip, host_mac


def test_switch_answers_arp_for_its_address(switch):
    req = Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=host_mac(1), psrc=host_ip(1), pdst=SWITCH_IP
    )
    switch.proc.send(1, bytes(req))
    raw = switch.proc.recv(1)
    assert raw is not None
    reply = Ether(raw)
    assert reply[ARP].op == 2 and reply[ARP].hwsrc == SWITCH_MAC
    assert reply[ARP].psrc == SWITCH_IP and reply[ARP].pdst == host_ip(1)
    assert reply[Ether].dst == host_mac(1)


def test_l2_forwarding_and_flooding(switch):
    forwarding.add_host(switch.conn, host_mac(2), 2)
    forwarding.set_flooding(switch.conn, 1, [1, 2, 3])
    ping = Ether(src=host_mac(1), dst=host_mac(2)) / IP(src=host_ip(1), dst=host_ip(2)) / ICMP()
    switch.proc.send(1, bytes(ping))
    got = switch.proc.recv(2)
    assert got is not None and Ether(got)[IP].dst == host_ip(2)
    assert switch.proc.recv_all(3, 0.3) == []
    arp = Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=host_mac(1), psrc=host_ip(1), pdst=host_ip(3)
    )
    switch.proc.send(1, bytes(arp))
    assert switch.proc.recv(2) is not None and switch.proc.recv(3) is not None
    assert switch.proc.recv_all(1, 0.3) == []  # not back out of its ingress port
    unknown = Ether(src=host_mac(1), dst=host_mac(7)) / IP(src=host_ip(1), dst=host_ip(7))
    before = switch.switch_stats()["unrouted"]
    switch.proc.send(1, bytes(unknown))
    assert all(switch.proc.recv_all(port, 0.2) == [] for port in (2, 3))
    assert switch.switch_stats()["unrouted"] == before + 1
