"""Programs Forwarding: L2 entries and flooding for everything that is not p4reduce.

Ordinary traffic (ARP, ping, control) between hosts goes through `l2_forward`; broadcast is
a multicast group of every port, and the P4 egress drops the copy that would go back out
of the ingress port. Frames with no entry are dropped and counted in `unrouted`
(docs/protocol.md section 15).
"""

from __future__ import annotations

from p4reduce.addresses import mac_int
from p4reduce.p4rt import P4InfoError

from .connection import SwitchConnection, table_entity
from .replication import flood_replicas, multicast_group

SECTION = "15. Switch identity and forwarding"  # docs/protocol.md
TABLES = ("l2_forward",)
JOB_COUNTERS: tuple[str, ...] = ()
SWITCH_COUNTERS = ("unrouted",)

BROADCAST_MAC = "ff:ff:ff:ff:ff:ff"


def l2_entry(conn: SwitchConnection, mac: str, port: int | None = None):
    if port is None:
        return conn.p4.table_entry("l2_forward", {"dst_mac": mac_int(mac)})
    return conn.p4.table_entry(
        "l2_forward", {"dst_mac": mac_int(mac)}, "forward", {"port": conn.ports(port)}
    )


def add_host(conn: SwitchConnection, mac: str, port: int) -> None:
    conn.insert(table_entity(l2_entry(conn, mac, port)))


def remove_host(conn: SwitchConnection, mac: str) -> None:
    conn.delete(table_entity(l2_entry(conn, mac)))


def flood_entry(conn: SwitchConnection, group: int):
    """Broadcast frames go to multicast group `group`."""
    return conn.p4.table_entry(
        "l2_forward", {"dst_mac": mac_int(BROADCAST_MAC)}, "flood", {"group": group}
    )


def set_flooding(conn: SwitchConnection, group: int, ports: list[int], create: bool = True) -> None:
    """Broadcast frames go to `group`, which replicates to every port (rid 0)."""
    if not ports:
        raise P4InfoError("flooding needs at least one port")
    mc = multicast_group(group, flood_replicas(conn, ports))
    entry = flood_entry(conn, group)
    if create:
        conn.insert(mc, table_entity(entry))
    else:
        conn.modify(mc, table_entity(entry))
