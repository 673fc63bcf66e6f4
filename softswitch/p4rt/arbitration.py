"""StreamChannel connections and primary election (PI pi_server.cpp DeviceState).

Per device id the connection with the highest election id is primary; only the primary
may Write, Set, and exchange packets.  Every change is announced to the affected
connections as PI does it: OK "Is primary" or ALREADY_EXISTS "Is backup".
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import Any

from p4.v1 import p4runtime_pb2

from .status import Code, P4RTError

log = logging.getLogger("softswitch.p4runtime")

# PI pi_server.cpp DeviceState::max_connections.
MAX_CONNECTIONS = 16
# PacketIns queued for a primary that does not read its stream are dropped beyond this.
MAX_PENDING_STREAM_MESSAGES = 4096

END = object()  # put in an outbox: the stream ends


@dataclass(eq=False)
class Connection:
    """One StreamChannel.  Everything sent to the client goes through ``outbox``, so that
    arbitration notices and PacketIns from different threads keep their order."""

    id: int
    outbox: "queue.Queue[Any]" = field(default_factory=queue.Queue)
    device_id: int | None = None
    election_id: tuple[int, int] = (0, 0)

    def send(self, msg: p4runtime_pb2.StreamMessageResponse, droppable: bool = False) -> bool:
        if droppable and self.outbox.qsize() >= MAX_PENDING_STREAM_MESSAGES:
            return False
        self.outbox.put(msg)
        return True


class Arbitration:
    """PI pi_server.cpp DeviceState connection handling: per device id, the connection
    with the highest election id is primary; every change is announced to the affected
    connections with OK ("Is primary") or ALREADY_EXISTS ("Is backup")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[int, list[Connection]] = {}

    def _sorted(self, device_id: int) -> list[Connection]:
        conns = self._conns.setdefault(device_id, [])
        conns.sort(key=lambda c: c.election_id, reverse=True)
        return conns

    def add(self, conn: Connection, device_id: int, election_id: tuple[int, int]) -> None:
        with self._lock:
            conns = self._sorted(device_id)
            if len(conns) >= MAX_CONNECTIONS:
                raise P4RTError(Code.RESOURCE_EXHAUSTED, "Too many connections")
            if any(c.election_id == election_id for c in conns):
                raise P4RTError(Code.INVALID_ARGUMENT, "Election id already exists")
            conn.device_id = device_id
            conn.election_id = election_id
            conns.append(conn)
            conns = self._sorted(device_id)
            log.info(
                "device %d: new connection %d, election id %s", device_id, conn.id, election_id
            )
            if conns[0] is conn:
                self._notify_all(device_id)
            else:
                self._notify_one(device_id, conn)

    def update(self, conn: Connection, election_id: tuple[int, int]) -> None:
        with self._lock:
            assert conn.device_id is not None
            if conn.election_id == election_id:
                return
            conns = self._sorted(conn.device_id)
            was_primary = conns[0] is conn
            if any(c.election_id == election_id for c in conns if c is not conn):
                raise P4RTError(Code.INVALID_ARGUMENT, "New election id already exists")
            conn.election_id = election_id
            conns = self._sorted(conn.device_id)
            if (conns[0] is conn) != was_primary:
                self._notify_all(conn.device_id)
            else:
                self._notify_one(conn.device_id, conn)

    def remove(self, conn: Connection) -> None:
        with self._lock:
            if conn.device_id is None:
                return
            conns = self._sorted(conn.device_id)
            if conn not in conns:
                return
            was_primary = conns[0] is conn
            conns.remove(conn)
            log.info("device %d: connection %d removed", conn.device_id, conn.id)
            if was_primary:
                self._notify_all(conn.device_id)

    def count(self, device_id: int) -> int:
        with self._lock:
            return len(self._conns.get(device_id, []))

    def primary(self, device_id: int) -> Connection | None:
        with self._lock:
            conns = self._sorted(device_id)
            return conns[0] if conns else None

    def is_primary_election_id(self, device_id: int, election_id: tuple[int, int]) -> bool:
        p = self.primary(device_id)
        return p is not None and p.election_id == election_id

    def _notify_one(self, device_id: int, conn: Connection) -> None:
        conns = self._conns[device_id]
        primary = conns[0]
        msg = p4runtime_pb2.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = device_id
        arb.election_id.high, arb.election_id.low = primary.election_id
        if conn is primary:
            arb.status.code = Code.OK
            arb.status.message = "Is primary"
        else:
            arb.status.code = Code.ALREADY_EXISTS
            arb.status.message = "Is backup"
        conn.send(msg)

    def _notify_all(self, device_id: int) -> None:
        for c in list(self._conns.get(device_id, [])):
            self._notify_one(device_id, c)
