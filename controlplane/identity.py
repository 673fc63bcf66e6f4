"""Programs SwitchIdentity: the switch's own MAC and IPv4 (docs/protocol.md section 15).

`switch_identity` has no key; its default action `set_identity(mac, ip)` gives the source
of every result and the address the switch answers ARP for.
"""

from __future__ import annotations

from p4reduce.addresses import ip_int, mac_int

from .connection import SwitchConnection, table_entity

SECTION = "15. Switch identity and forwarding"  # docs/protocol.md
TABLES = ("switch_identity",)
JOB_COUNTERS: tuple[str, ...] = ()
SWITCH_COUNTERS: tuple[str, ...] = ()


def identity_entry(conn: SwitchConnection, mac: str, ip: str):
    """The default action of `switch_identity` (the table has no key)."""
    return conn.p4.table_entry(
        "switch_identity", {}, "set_identity", {"mac": mac_int(mac), "ip": ip_int(ip)}, default=True
    )


def set_identity(conn: SwitchConnection, mac: str, ip: str) -> None:
    conn.modify(table_entity(identity_entry(conn, mac, ip)))
