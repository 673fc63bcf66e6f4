"""Strict validation of the addresses an operator gives the controller.

Why strict: the data path encodes addresses with lenient parsers (`p4reduce.wire`
accepts " 0x2:0:0:0:0:1"), so a typo there is silently turned into *some* address and the
job's packets are then dropped as unadmitted, or results go nowhere. Here a worker's or the
switch's address must be written the one canonical way and must name one host:

* MAC: six two-digit hex groups separated by colons ("02:00:00:00:00:01"), not the
  all-zero address, not broadcast, not multicast (lowest bit of the first octet set).
* IPv4: dotted quad of decimal numbers without leading zeros, a unicast host address: not
  0.0.0.0/8 ("this network"), not 127.0.0.0/8 (loopback: never on a switch port), not
  multicast (224.0.0.0/4), not reserved (240.0.0.0/4, which includes 255.255.255.255).

Every check raises `AddressError` (a ValueError) whose message names the value and the
rule; callers prefix where the value came from (config field, `--worker` argument).

The one address module: besides the checks, the address types (`Address`, one end of
p4reduce traffic, as the job descriptor and the controller's configuration name it;
`WorkerAddress`, a rank's place on the switch) and the integers P4Runtime carries for a MAC
or an IPv4 (`mac_int`, `ip_int`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from .wire import UDP_PORT_BASE, ip_bytes, mac_bytes

__all__ = [
    "Address",
    "AddressError",
    "WorkerAddress",
    "ip_int",
    "mac_int",
    "unicast_ipv4",
    "unicast_mac",
]

_MAC = re.compile(r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}")
_IPV4 = re.compile(r"(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}")


@dataclass(frozen=True)
class Address:
    """One end of p4reduce traffic: the switch's or a worker's MAC, IPv4 and UDP port (the
    descriptor's `switch` and `worker`)."""

    mac: str
    ip: str
    udp_port: int = UDP_PORT_BASE


class AddressError(ValueError):
    """An address that is malformed or cannot be a single host's."""


def unicast_mac(value: object) -> str:
    """The MAC in lower case, or AddressError."""
    if not isinstance(value, str) or not _MAC.fullmatch(value):
        raise AddressError(
            f"bad MAC address {value!r} (expected six two-digit hex groups "
            "separated by ':', e.g. 02:00:00:00:00:01)"
        )
    octets = bytes(int(x, 16) for x in value.split(":"))
    if octets == bytes(6):
        raise AddressError(f"MAC address {value!r} is the all-zero address, not a host's")
    if octets == b"\xff" * 6:
        raise AddressError(f"MAC address {value!r} is the broadcast address, not a host's")
    if octets[0] & 1:
        raise AddressError(
            f"MAC address {value!r} is a multicast address (lowest bit of "
            "the first octet set), not a host's"
        )
    return value.lower()


def unicast_ipv4(value: object) -> str:
    """The IPv4 address as given, or AddressError."""
    if not isinstance(value, str) or not _IPV4.fullmatch(value):
        raise AddressError(
            f"bad IPv4 address {value!r} (expected a dotted quad such as "
            "10.0.0.1, no leading zeros)"
        )
    try:
        ip = ipaddress.IPv4Address(value)
    except ValueError:
        raise AddressError(f"bad IPv4 address {value!r} (each part must be 0..255)") from None
    if ip in _THIS_NETWORK:
        raise AddressError(f"IPv4 address {value} is in 0.0.0.0/8 (unspecified), not a host's")
    if ip.is_loopback:
        raise AddressError(
            f"IPv4 address {value} is a loopback address, not reachable through a switch port"
        )
    if ip.is_multicast:
        raise AddressError(f"IPv4 address {value} is a multicast address, not a host's")
    if ip in _RESERVED:
        what = (
            "the broadcast address"
            if value == "255.255.255.255"
            else "in the reserved range 240.0.0.0/4"
        )
        raise AddressError(f"IPv4 address {value} is {what}, not a host's")
    return value


_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
_RESERVED = ipaddress.IPv4Network("240.0.0.0/4")


def mac_int(mac: str) -> int:
    """A MAC ("02:00:00:00:00:01") as the integer of a 48-bit P4Runtime field."""
    return int.from_bytes(mac_bytes(mac), "big")


def ip_int(ip: str) -> int:
    """An IPv4 ("10.0.0.1") as the integer of a 32-bit P4Runtime field."""
    return int.from_bytes(ip_bytes(ip), "big")


@dataclass(frozen=True)
class WorkerAddress:
    """Where rank `rank` of a job is: its switch port, and its `address` (MAC, IPv4, UDP
    port), which admission matches and results are sent to."""

    rank: int
    port: int
    mac: str
    ip: str
    udp_port: int

    @property
    def address(self) -> Address:
        return Address(self.mac, self.ip, self.udp_port)
