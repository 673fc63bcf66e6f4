"""Where softswitch frames come from and go to.

Two implementations of one small interface:

* ``InProcessPorts``  for unit tests: ``inject(port, frame)`` runs the frame through the
  switch in the caller's thread; everything the switch emits (also later, e.g. from a
  PacketOut) is queued per port and collected with a blocking ``get(port, timeout)``.
* ``AfPacketPorts``   for real Linux interfaces (veth pairs under Mininet or in tests):
  one AF_PACKET raw socket per ``-i N@ifname``, one poll thread for all of them, which
  mirrors simple_switch's single ingress thread, so packet order across ports is the
  order the kernel delivered them.

Both are wired to a ``Device`` (softswitch.p4runtime_server) with ``attach``: the device's
``receive(port, frame)`` is called for each arriving frame and the device calls the ports'
``transmit(port, frame)`` for each emitted frame.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import queue
import selectors
import socket
import struct
import threading
import time
from typing import Any, Callable, Protocol

from p4reduce.afpacket import (
    ETH_P_ALL,
    PACKET_IGNORE_OUTGOING,
    PACKET_OUTGOING,
    SO_RCVBUFFORCE,
    SOL_PACKET,
)

from . import handover
from .rxring import ETH_HEADER, RxRing, interface_mtu, with_vlan

log = logging.getLogger("softswitch.ports")

# linux/if_packet.h (the rest: p4reduce.afpacket)
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_AUXDATA = 8
_AUXDATA = struct.Struct("IIIHHHH")  # struct tpacket_auxdata
_RECV_BUFSIZE = 1 << 18  # larger than any GRO'd frame a veth can hand us
# Frames read from one socket per poll round: the ports are served round robin, one frame
# each at a time and this many each at most, so a port with a deep backlog (a job with
# many slots) delays another port's next frame by at most one frame per busy port, not by
# its whole backlog (docs/reliability.md, "Jobs share the switch").
_RX_BATCH = 16


class Receiver(Protocol):
    def receive(self, ingress_port: int, frame: bytes) -> None: ...


def parse_interface_spec(spec: str) -> tuple[int, str]:
    """simple_switch's ``-i N@ifname`` -> (N, ifname), with a clear error otherwise."""
    port_s, sep, ifname = spec.partition("@")
    if not sep or not ifname or not port_s:
        raise ValueError(f"bad interface {spec!r}: expected PORT@IFNAME, e.g. 1@veth1")
    try:
        port = int(port_s, 0)
    except ValueError:
        raise ValueError(f"bad interface {spec!r}: port {port_s!r} is not a number") from None
    if port < 0:
        raise ValueError(f"bad interface {spec!r}: port must be >= 0")
    return port, ifname


class Ports:
    """Common part: attach to a device, per-port counters."""

    def __init__(self) -> None:
        self._receive: Callable[[int, bytes], None] | None = None
        self._first_commit: threading.Event | None = None
        self._stats_lock = threading.Lock()
        self.stats: dict[int, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )

    def attach(self, device: Any) -> None:
        """Connect to a Device: frames in go to device.receive, device output comes back
        through self.transmit."""
        self._receive = device.receive
        self._first_commit = getattr(device, "first_commit", None)
        device.transmit = self.transmit

    def _count(self, port: int, what: str, n: int = 1) -> None:
        with self._stats_lock:
            self.stats[port][what] += n

    def _deliver(self, port: int, frame: bytes) -> None:
        self._count(port, "rx")
        if self._receive is None:
            self._count(port, "rx_unattached")
            return
        try:
            self._receive(port, frame)
        except Exception:  # the device never raises; a bug there must not kill the port
            self._count(port, "rx_errors")
            log.exception("processing a %d-byte frame from port %d failed", len(frame), port)

    def transmit(self, port: int, frame: bytes) -> None:
        raise NotImplementedError

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def __enter__(self) -> "Ports":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class InProcessPorts(Ports):
    """Ports that exist only in this process, for tests.

    Every port number is valid; output to a port nobody reads just queues up.
    """

    def __init__(self) -> None:
        super().__init__()
        self._queues: dict[int, queue.Queue[bytes]] = {}
        self._qlock = threading.Lock()

    def _queue(self, port: int) -> queue.Queue[bytes]:
        with self._qlock:
            q = self._queues.get(port)
            if q is None:
                q = self._queues[port] = queue.Queue()
            return q

    def inject(self, port: int, frame: bytes) -> None:
        """A frame arrives on ``port``; processed synchronously, outputs are queued."""
        self._deliver(port, bytes(frame))

    def transmit(self, port: int, frame: bytes) -> None:
        self._count(port, "tx")
        self._queue(port).put(bytes(frame))

    def get(self, port: int, timeout: float = 1.0) -> bytes:
        """Next frame the switch sent on ``port``; raises TimeoutError if none in time."""
        try:
            return self._queue(port).get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no frame on port {port} within {timeout}s") from None

    def poll(self, port: int, timeout: float = 0.0) -> bytes | None:
        """Like get, but None instead of an exception (for "nothing came out" checks)."""
        try:
            return (
                self._queue(port).get(timeout=timeout)
                if timeout > 0
                else self._queue(port).get_nowait()
            )
        except queue.Empty:
            return None

    def drain(self, port: int) -> list[bytes]:
        """Everything queued on ``port`` right now."""
        out = []
        q = self._queue(port)
        while True:
            try:
                out.append(q.get_nowait())
            except queue.Empty:
                return out

    def pending(self) -> dict[int, int]:
        """Number of queued frames per port (ports with none omitted)."""
        with self._qlock:
            return {p: q.qsize() for p, q in self._queues.items() if q.qsize()}


class AfPacketPorts(Ports):
    """Linux interfaces through AF_PACKET raw sockets (needs CAP_NET_RAW).

    Each interface is put in promiscuous mode for as long as its socket is open (a packet
    membership, dropped by the kernel when the socket closes).  Frames this host sends on
    the interface -- ours included -- are PACKET_OUTGOING and are not switch input; they are
    filtered by PACKET_IGNORE_OUTGOING where the kernel has it and by the packet type
    otherwise.  VLAN tags the kernel moved to metadata are put back (PACKET_AUXDATA), as
    libpcap does for bmv2.
    """

    def __init__(self, interfaces: dict[int, str] | list[tuple[int, str]]) -> None:
        super().__init__()
        items = list(interfaces.items()) if isinstance(interfaces, dict) else list(interfaces)
        seen_ports: set[int] = set()
        seen_names: set[str] = set()
        for port, name in items:
            if port in seen_ports:
                raise ValueError(f"port {port} is given twice")
            if name in seen_names:
                raise ValueError(f"interface {name!r} is given twice")
            seen_ports.add(port)
            seen_names.add(name)
        self.interfaces = dict(items)
        self._socks: dict[int, socket.socket] = {}
        self._rings: dict[int, RxRing] = {}
        # each port's fanout group, once its socket has been handed over (`_refit`)
        self._groups: dict[int, int] = {}
        self._unfit: set[int] = set()  # ports whose handover failed: they keep their ring
        self._sel: selectors.BaseSelector | None = None
        # One receive buffer for every frame read from a socket's queue: recvmsg(256 KiB)
        # would allocate (and the allocator map and unmap) 256 KiB per frame; the frame's
        # own bytes are copied out of it.
        self._rxbuf = memoryview(bytearray(_RECV_BUFSIZE))
        self._ancbuf = socket.CMSG_SPACE(_AUXDATA.size)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake_r, self._wake_w = -1, -1

    def _open(
        self, port: int, ifname: str, muted: bool = False
    ) -> tuple[socket.socket, RxRing | None]:
        """A bound socket on `ifname` and its receive ring (None without PACKET_MMAP);
        `muted`, it drops every frame until its filter changes (handover.DROP_ALL)."""
        try:
            ifindex = socket.if_nametoindex(ifname)
        except OSError:
            raise OSError(errno.ENODEV, f"no such interface {ifname!r} (port {port})") from None
        # protocol 0 until bound: a socket created with ETH_P_ALL sees every interface's
        # traffic until bind() narrows it down.
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        ring: RxRing | None = None
        try:
            # A Python switch is slower than the hosts that feed it: bursts wait in the
            # socket buffer. SO_RCVBUF is capped by net.core.rmem_max (~200 KiB, some 150
            # frames); as root SO_RCVBUFFORCE is not.
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                pass  # kernel < 4.20: the pkttype check below does the job
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            if muted:
                handover.attach_filter(sock, handover.DROP_ALL)
            try:
                ring = RxRing(sock, ifname)
            except OSError as exc:  # no PACKET_MMAP: one recvmsg per frame
                log.warning("port %d (%s): no receive ring (%s)", port, ifname, exc)
            sock.bind((ifname, ETH_P_ALL))  # CPython applies htons to the protocol
            sock.setblocking(False)
        except OSError:
            _close(sock, ring)
            raise
        return sock, ring

    def ring_frames(self) -> dict[int, int]:
        """The largest frame each port's receive ring holds (ports without one left out)."""
        return {port: ring.frame for port, ring in self._rings.items()}

    def start(self) -> None:
        if self._thread is not None:
            return
        try:
            for port, ifname in self.interfaces.items():
                self._socks[port], ring = self._open(port, ifname)
                if ring is not None:
                    self._rings[port] = ring
                log.info("port %d: %s", port, ifname)
        except OSError:
            self._close_sockets()
            raise
        self._wake_r, self._wake_w = os.pipe()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="softswitch-ports", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        self._thread.join(timeout=5)
        self._thread = None
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1
        self._close_sockets()

    def _close_sockets(self) -> None:
        for port, sock in self._socks.items():
            _close(sock, self._rings.get(port))
        self._socks.clear()
        self._rings.clear()
        self._groups.clear()
        self._unfit.clear()

    def _loop(self) -> None:
        # Like bmv2, start reading only once the device has committed its first pipeline;
        # until then frames wait in the socket buffers (and are then processed in order).
        first_commit = self._first_commit
        if first_commit is not None:
            while not first_commit.wait(0.2):
                if self._stop.is_set():
                    return
        sel = self._sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        for port, sock in self._socks.items():
            sel.register(sock, selectors.EVENT_READ, port)
        order = list(self._socks)
        busy = False
        try:
            while not self._stop.is_set():
                events = sel.select(timeout=0 if busy else None)
                woken = {key.data for key, _ in events if key.data is not None}
                ready = [p for p in order if p in woken or p in self._rings]
                took: set[int] = set()
                # one frame of each ready port after another, up to _RX_BATCH each: the
                # packets of one round, one from each rank's port, are taken together, so
                # the round completes (and its result goes out to the ranks) before the
                # next rounds' packets of the first port, not after all of them
                for _ in range(_RX_BATCH):
                    if not ready:
                        break
                    ready = [port for port in ready if self._take_one(port)]
                    took.update(ready)
                busy = bool(ready)
                if woken - took:
                    self._clear_errors(woken - took)
        except Exception:
            log.exception("port loop crashed")
        finally:
            self._sel = None
            sel.close()

    def _clear_errors(self, ports: set[int]) -> None:
        """Read (and so clear) the pending error of each ring port whose socket was ready
        but gave no frame. An error the kernel sets on a packet socket (ENETDOWN when its
        interface goes down or away) keeps it ready until read; a ring port never calls
        recv, so unread, that error had the loop wake without end and spin on a core.
        Counted as rx_errors; the port reads again once its interface is back up."""
        for port in ports:
            sock = self._socks.get(port)
            if sock is None or port not in self._rings:
                continue  # a socket-queue port's recvmsg reads the error (rx_errors)
            try:
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            except OSError:
                continue
            if err:
                self._count(port, "rx_errors")
                log.warning("port %d (%s): %s", port, self.interfaces.get(port), os.strerror(err))

    def _take_one(self, port: int) -> bool:
        """Read and deliver one frame of `port`; False when it had none (or failed)."""
        ring = self._rings.get(port)
        return self._take_ring(port, ring) if ring is not None else self._take_queued(port)

    def _take_queued(self, port: int) -> bool:
        """Read and deliver one frame of `port`'s socket queue; False when it had none."""
        rxbuf, ancbuf = self._rxbuf, self._ancbuf
        try:
            n, anc, flags, addr = self._socks[port].recvmsg_into([rxbuf], ancbuf)
            data = bytes(rxbuf[:n])
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            self._count(port, "rx_errors")
            log.warning("port %d: receive failed: %s", port, exc)
            return False
        frame = self._frame(port, data, anc, flags, addr)
        if frame is not None:
            self._deliver(port, frame)
        return True

    def _take_ring(self, port: int, ring: RxRing, refit: bool = True) -> bool:
        """Deliver the next frame of `port`'s ring; False when it is empty. A frame longer
        than the ring's slots is read whole from the socket's queue, and (`refit`) the
        port handed to a new socket with a ring for the new MTU (`_refit`)."""
        frame, wire, pkttype, queued = ring.take()
        if frame is not None or not wire:
            return self._hand_on(port, frame, pkttype)
        self._long_frame(port, ring, wire, queued)
        if refit:
            self._refit(port, ring)
        return True

    def _long_frame(self, port: int, ring: RxRing, wire: int, queued: bool) -> None:
        """A frame longer than the ring's slots: from the socket's queue, or counted lost."""
        self._count(port, "rx_longer_than_ring")
        log.debug(
            "port %d (%s): a %d-byte frame is longer than the receive ring's %d-byte slots",
            port,
            self.interfaces[port],
            wire,
            ring.frame,
        )
        if queued:
            self._take_queued(port)
        else:
            self._count(port, "rx_truncated")
            log.warning("port %d: a %d-byte frame was cut short and dropped", port, wire)

    def _hand_on(self, port: int, frame: bytes | None, pkttype: int) -> bool:
        """Deliver a frame taken from a ring (not one this host sent); False for none."""
        if frame is None:
            return False
        if pkttype == PACKET_OUTGOING:
            self._count(port, "rx_outgoing_ignored")
        else:
            self._deliver(port, frame)
        return True

    def _refit(self, port: int, ring: RxRing) -> None:
        """If `port`'s MTU grew past its ring's slots, hand the port to a new socket with
        a ring for the new MTU, losing and reordering no frame (softswitch.handover): the
        frames the old ring still holds are delivered first. On failure (a kernel without
        fanout groups) the port keeps its socket and reads long frames through recvmsg."""
        if port in self._unfit:
            return
        ifname = self.interfaces[port]
        old = self._socks[port]
        try:
            if ETH_HEADER + interface_mtu(old, ifname) <= ring.frame:
                return  # a frame longer than the MTU (GRO): rare, read through recvmsg
            new, new_ring = self._open(port, ifname, muted=True)
            if new_ring is None:  # no PACKET_MMAP now: nothing to hand over to
                _close(new, None)
                raise OSError(errno.EOPNOTSUPP, "no receive ring")
        except OSError as exc:
            self._unfit.add(port)
            log.warning("port %d (%s): no ring for the new MTU: %s", port, ifname, exc)
            return
        began = time.monotonic()
        try:
            group = self._groups.get(port)
            if group is None:
                group = handover.make_group(old)
            handover.hand_over(old, new, group)
        except OSError as exc:
            _close(new, new_ring)
            self._unfit.add(port)
            log.warning("port %d (%s): no handover to a new ring: %s", port, ifname, exc)
            return
        self._groups[port] = group
        while self._take_ring(port, ring, refit=False):
            pass  # what the old ring (and its socket's queue) still holds goes first
        self._socks[port], self._rings[port] = new, new_ring
        if self._sel is not None:
            self._sel.unregister(old)
            self._sel.register(new, selectors.EVENT_READ, port)
        _close(old, ring)
        self._count(port, "rx_ring_refits")
        log.info(
            "port %d (%s): MTU grew: handed to a new receive ring in %.0f ms",
            port,
            ifname,
            (time.monotonic() - began) * 1e3,
        )

    def _frame(
        self, port: int, data: bytes, anc: list[tuple[int, int, bytes]], flags: int, addr: Any
    ) -> bytes | None:
        if len(addr) > 2 and addr[2] == PACKET_OUTGOING:
            self._count(port, "rx_outgoing_ignored")
            return None
        if flags & socket.MSG_TRUNC:
            self._count(port, "rx_truncated")
            log.warning("port %d: frame larger than %d bytes dropped", port, _RECV_BUFSIZE)
            return None
        for level, ctype, cdata in anc:
            if level == SOL_PACKET and ctype == PACKET_AUXDATA and len(cdata) >= _AUXDATA.size:
                status, _len, _snap, _mac, _net, tci, tpid = _AUXDATA.unpack_from(cdata)
                data = with_vlan(data, status, tci, tpid)
        return data

    def transmit(self, port: int, frame: bytes) -> None:
        sock = self._socks.get(port)
        if sock is None:
            self._count(port, "tx_no_such_port")
            return
        try:
            sock.send(frame)
            self._count(port, "tx")
        except OSError as exc:  # EMSGSIZE (over the MTU), ENOBUFS, ENETDOWN...
            self._count(port, "tx_errors")
            log.warning(
                "port %d (%s): send of %d bytes failed: %s",
                port,
                self.interfaces.get(port),
                len(frame),
                exc,
            )


def _close(sock: socket.socket, ring: RxRing | None) -> None:
    """Unmap `ring` (if any) and close `sock`: the kernel frees the ring with the socket."""
    if ring is not None:
        ring.unmap()
    try:
        sock.close()
    except OSError:
        pass
