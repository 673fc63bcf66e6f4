"""A port's PACKET_MMAP receive ring (TPACKET_V2): frames in without a syscall each.

`recvmsg` costs a frame two syscalls (CPython resolves the AF_PACKET source address's
interface name with an ioctl) plus the ancillary data's objects: about 5 us of a Python
switch's frame whatever its size. With a ring the kernel writes each frame into a shared
slot; reading one is a status check, a header unpack and one copy out of the slot, and
the switch only sleeps in `select` when every ring is empty.

A ring slot holds one frame of the interface's MTU (read when the ring is made). A longer
frame (the MTU grew since) is not lost: with PACKET_COPY_THRESH the kernel also queues it
whole on the socket and marks its slot TP_STATUS_COPY, and it is read from there with
`recvmsg`; the ports loop then hands the port to a new socket with a ring for the larger
frames (softswitch.handover). Only when the socket's buffer is full too is a long frame
cut short, counted and dropped.
"""

from __future__ import annotations

import fcntl
import mmap
import socket
import struct

from p4reduce.afpacket import (
    PACKET_RX_RING,
    PACKET_VERSION,
    SIOCGIFMTU,
    SOL_PACKET,
    TP_STATUS_USER,
    TP_STATUS_VLAN_TPID_VALID,
    TP_STATUS_VLAN_VALID,
    TPACKET_V2,
)

PACKET_COPY_THRESH = 7
TP_STATUS_COPY = 1 << 1
# struct tpacket2_hdr: tp_status, tp_len, tp_snaplen, tp_mac, tp_net, tp_sec, tp_nsec,
# tp_vlan_tci, tp_vlan_tpid; the sockaddr_ll follows at TPACKET_ALIGN(32), its
# sll_pkttype at byte 10
_HDR = struct.Struct("IIIHHIIHH")
_PKTTYPE_AT = 32 + 10
_RELEASE = bytes(4)  # tp_status = TP_STATUS_KERNEL: the slot goes back to the kernel
_VLAN = struct.Struct("!HH")
# A slot holds the kernel's header (a SOCK_RAW packet starts at byte 66), room for a VLAN
# tag and a frame of the MTU; a power of two, so a ring block holds whole slots
RING_HEADROOM = 66 + 4
ETH_HEADER = 14
MIN_SLOT = 2048
RING_BYTES = 16 << 20  # per port: 8 192 slots at MTU 1 500, 512 at a 16 KiB MTU
MIN_SLOTS = 128


def interface_mtu(sock: socket.socket, ifname: str) -> int:
    """The MTU of `ifname` (SIOCGIFMTU)."""
    req = struct.pack("16si", ifname.encode()[:15], 0)
    return struct.unpack_from("16si", fcntl.ioctl(sock.fileno(), SIOCGIFMTU, req))[1]


def slot_bytes(frame: int) -> int:
    """Bytes of a ring slot that holds a frame of `frame` bytes."""
    need = RING_HEADROOM + frame
    return max(MIN_SLOT, 1 << (need - 1).bit_length())


class RxRing:
    """The receive ring of one bound AF_PACKET socket (see the module docstring)."""

    def __init__(self, sock: socket.socket, ifname: str) -> None:
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        sock.setsockopt(SOL_PACKET, PACKET_COPY_THRESH, 1)
        frame = ETH_HEADER + interface_mtu(sock, ifname)
        slot = slot_bytes(frame)
        slots = max(MIN_SLOTS, RING_BYTES // slot)
        block = max(mmap.PAGESIZE, slot)
        req = struct.pack("IIII", block, slots * slot // block, slot, slots)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
        self._mm: mmap.mmap | None = mmap.mmap(
            sock.fileno(), slots * slot, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
        )
        self.slot, self.slots, self.head = slot, slots, 0
        self.frame = slot - RING_HEADROOM

    def unmap(self) -> None:
        """Unmap the ring; the kernel frees it when its socket closes."""
        mm, self._mm = self._mm, None
        if mm is not None:
            mm.close()

    def take(self) -> tuple[bytes | None, int, int, bool]:
        """The next frame, with its VLAN tag put back: (frame, its length on the wire, its
        packet type, False); (None, 0, 0, False) when the ring is empty. A frame longer
        than a slot comes back as (None, length, type, queued): queued when the whole frame
        waits in the socket's queue (read it with recvmsg), else it was cut short."""
        mm, off = self._mm, self.head * self.slot
        if mm is None or not mm[off] & TP_STATUS_USER:
            return None, 0, 0, False
        status, wire, snap, mac, _net, _s, _ns, tci, tpid = _HDR.unpack_from(mm, off)
        pkttype = mm[off + _PKTTYPE_AT]
        data = mm[off + mac : off + mac + snap] if snap == wire else None
        mm[off : off + 4] = _RELEASE
        self.head = (self.head + 1) % self.slots
        if data is None:
            return None, wire, pkttype, bool(status & TP_STATUS_COPY)
        return with_vlan(data, status, tci, tpid), wire, pkttype, False


def with_vlan(data: bytes, status: int, tci: int, tpid: int) -> bytes:
    """`data` with the VLAN tag the kernel moved to metadata put back (as libpcap does for
    bmv2); `status`, `tci`, `tpid` as in a tpacket header or tpacket_auxdata."""
    if status & TP_STATUS_VLAN_VALID and len(data) >= 12:
        if not status & TP_STATUS_VLAN_TPID_VALID or tpid == 0:
            tpid = 0x8100
        data = data[:12] + _VLAN.pack(tpid, tci) + data[12:]
    return data
