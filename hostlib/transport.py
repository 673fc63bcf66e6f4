"""Raw-socket transport, DPDK-style but in Python: batches in, batches out, no per-packet
Python on the fast paths.

One AF_PACKET socket bound to one interface, protocol ETH_P_IP (so it never sees its own
outgoing frames), with a classic BPF filter (SO_ATTACH_FILTER) that lets only IPv4/UDP to
the p4reduce port range (and, when given, one destination IP / port) reach it. Three modes,
best first; "auto" takes the first that can be set up and `mode` says which one is in use:

* "ring":  PACKET_MMAP TPACKET_V2 RX and TX rings. The rings are numpy matrices over the
           mmap'ed memory: a receive batch is a view of the ready frames in the ring
           itself (given back to the kernel with one status write at the next receive);
           a send batch is one copy into free TX frames, one status write and one send()
           to kick the kernel. No syscall per packet, and none at all to receive.
* "mmsg":  sendmmsg/recvmmsg through ctypes over fixed numpy buffers: one syscall per batch.
* "plain": send()/recv_into() per frame (when neither is available).

PACKET_QDISC_BYPASS is set when the kernel has it (frames go straight to the driver; a
tcpdump on the sending host does not see them).

Beside the packet socket, the host's own IP stack sees every frame to the rank's address and
port too; with no socket on that port it would answer each (rate-limited by the kernel)
with an ICMP port unreachable, which costs the kernel a route lookup per frame and the
switch a packet to receive and drop. So a RawSocket with a destination IP and port also
holds a UDP socket bound there (`port_sink`) whose filter drops every datagram: the
kernel finds a socket, drops the datagram at its filter, queues nothing and sends
nothing.

Every buffer is sized from the job's frame (62 + 4 K bytes for K values per block, up to
64 KB): ring frames, buffer rows and the socket buffers. An interface whose MTU cannot carry
the job's DATA frames is refused when the socket is made (MtuTooSmall), not discovered as
silent loss mid-call.
"""

from __future__ import annotations

import ctypes
import errno
import math
import mmap
import select
import socket
import struct
import subprocess
import warnings
from typing import Iterable

import numpy as np

from p4reduce.afpacket import (
    PACKET_RX_RING,
    PACKET_VERSION,
    SIOCGIFMTU,
    SO_RCVBUFFORCE,
    SOL_PACKET,
    TP_STATUS_USER,
    TPACKET_V2,
)

from . import protocol as p
from .framing import Batch, frame_width

ETH_P_IP = 0x0800
PACKET_LOSS = 14
PACKET_TX_RING = 13
PACKET_QDISC_BYPASS = 20
SO_ATTACH_FILTER = 26
SO_SNDBUFFORCE = 32
SIOCGIFADDR = 0x8915
SIOCGIFHWADDR = 0x8927
MSG_DONTWAIT = socket.MSG_DONTWAIT

TP_STATUS_SEND_REQUEST = 1  # tx: user asks the kernel to send the frame
TP_STATUS_SENDING = 2
TPACKET2_HDR = 32  # TPACKET_ALIGN(sizeof(struct tpacket2_hdr))
TX_DATA_OFFSET = TPACKET2_HDR  # tp_hdrlen (52) - sizeof(sockaddr_ll) (20)
# Bytes of a ring frame before a packet's first byte: an RX frame's packet starts at 66
# (tpacket2_hdr, sockaddr_ll, aligned), a TX frame's at TX_DATA_OFFSET; the rest is slack
RING_HEADROOM = 96
MIN_RING_FRAME = 512  # a page holds 8 (K = 64: 96 + 318 bytes)
RING_BYTES = 16 << 20  # of each ring, once frames grow past MIN_RING_FRAME
MAX_RING_FRAMES = 4096
# > netdev_max_backlog (1 000): a sent frame's pages are given back when the veth peer
# takes the packet, and must not be rewritten while its backlog may still hold them
MIN_RING_FRAMES = 1024
MIN_SOCKET_BUFFER = 8 << 20
MODES = ("ring", "mmsg", "plain")


def ring_frame_bytes(width: int) -> int:
    """Bytes of a PACKET_MMAP ring frame that holds a frame of `width` bytes: a power of
    two, so a ring block (a power of two of pages) holds whole frames with no gap."""
    need = RING_HEADROOM + width
    return max(MIN_RING_FRAME, 1 << (need - 1).bit_length())


def ring_frame_count(frame: int) -> int:
    """Frames of each ring: MAX_RING_FRAMES of 512 bytes (2 MB), fewer as frames grow, so a
    ring stays near RING_BYTES, and never fewer than MIN_RING_FRAMES."""
    return min(MAX_RING_FRAMES, max(MIN_RING_FRAMES, RING_BYTES // frame))


def socket_buffer_bytes(width: int) -> int:
    """SO_RCVBUF / SO_SNDBUF for frames of `width` bytes: room for MIN_RING_FRAMES of them
    at what the kernel charges each (its buffer, a power of two with the shared info,
    and the sk_buff), at least MIN_SOCKET_BUFFER."""
    truesize = (1 << (width + 320 - 1).bit_length()) + 256
    return max(MIN_SOCKET_BUFFER, MIN_RING_FRAMES * truesize)


# ---------------------------------------------------------------------------------------
# Interface lookup


def _ioctl_ip(sock: socket.socket, ifname: str) -> str | None:
    import fcntl

    try:
        res = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("16s16x", ifname.encode()[:15]))
    except OSError:
        return None
    return socket.inet_ntoa(res[20:24])


def interface_for_ip(ip: str) -> str:
    """Name of the interface that owns IPv4 address `ip` (descriptor worker.ip)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _idx, name in socket.if_nameindex():
            if _ioctl_ip(s, name) == ip:
                return name
    try:  # secondary addresses: ask iproute2
        out = subprocess.run(
            ["ip", "-o", "-4", "addr", "show"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) > 3 and parts[3].split("/")[0] == ip:
                return parts[1].split("@")[0]
    except (OSError, subprocess.SubprocessError):
        pass
    raise OSError(f"no interface owns {ip} (descriptor worker.ip); give interface=")


class MtuTooSmall(OSError):
    """The interface's MTU is below what the job's DATA frames need (wire.mtu_needed)."""


def interface_mtu(ifname: str) -> int:
    """The MTU of `ifname` as this process's network namespace sees it (an ioctl: a
    Mininet host shares the root's /sys, so /sys/class/net would name another interface)."""
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        res = fcntl.ioctl(s.fileno(), SIOCGIFMTU, struct.pack("16s16x", ifname.encode()[:15]))
    return struct.unpack_from("i", res, 16)[0]


def check_interface_mtu(ifname: str, block_values: int, announce_block: bool = False) -> None:
    """MtuTooSmall unless `ifname` carries the DATA frames of a job of `block_values`
    values per block (and its ANNOUNCEs where they carry a block, `announce_block`):
    what a too-small MTU does instead is drop every DATA and RESULT silently, and the
    call would fail only at its deadline, naming no cause."""
    need, have = p.mtu_needed(block_values, announce_block), interface_mtu(ifname)
    if have < need:
        frames = (
            f"ANNOUNCE frames of {p.frame_bytes_with_fingerprint_and_block(block_values)} "
            "bytes, a fingerprint range and a block: the leaf role of silent rounds"
            if announce_block
            else f"DATA frames of {p.frame_bytes_with_values(block_values)} bytes"
        )
        raise MtuTooSmall(
            f"interface {ifname} has MTU {have}, but the job's {block_values} values per "
            f"block need MTU {need} ({frames}"
            f"): raise it on both ends of the link (ip link set dev {ifname} mtu "
            f"{need}; Mininet links: p4net.topology.set_mtu), or create the job with fewer "
            f"values per block"
        )


def interface_mac(ifname: str) -> str:
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        res = fcntl.ioctl(s.fileno(), SIOCGIFHWADDR, struct.pack("16s16x", ifname.encode()))
    return ":".join(f"{b:02x}" for b in res[18:24])


# ---------------------------------------------------------------------------------------
# Classic BPF


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def bpf_program(dst_ip: str | None = None, dst_port: int | None = None) -> bytes:
    """IPv4 (no options, no fragments) / UDP to the p4reduce ports [/ this IP / this port].

    Offsets are from the Ethernet header (AF_PACKET SOCK_RAW).
    """
    LDH, LDB, LDW = 0x28, 0x30, 0x20
    JEQ, JSET, AND, RET = 0x15, 0x45, 0x54, 0x06
    prog: list[tuple[int, str | int, str | int, int]] = [
        (LDH, 0, 0, 12),
        (JEQ, 0, "drop", ETH_P_IP),
        (LDB, 0, 0, 14),
        (JEQ, 0, "drop", 0x45),
        (LDB, 0, 0, 23),
        (JEQ, 0, "drop", 17),
        (LDH, 0, 0, 20),
        (JSET, "drop", 0, 0x1FFF),
        (LDH, 0, 0, 36),
    ]
    if dst_port is not None:
        prog.append((JEQ, 0, "drop", dst_port))
    else:
        prog += [(AND, 0, 0, p.UDP_PORT_MASK), (JEQ, 0, "drop", p.UDP_PORT_BASE)]
    if dst_ip is not None:
        prog += [(LDW, 0, 0, 30), (JEQ, 0, "drop", int.from_bytes(p.ip_bytes(dst_ip), "big"))]
    prog += [(RET, 0, 0, 0x40000), (RET, 0, 0, 0)]
    drop = len(prog) - 1
    out = b""
    for i, (code, jt, jf, k) in enumerate(prog):
        jt_n = drop - i - 1 if jt == "drop" else int(jt)
        jf_n = drop - i - 1 if jf == "drop" else int(jf)
        out += _ins(code, jt_n, jf_n, k)
    return out


DROP_ALL = _ins(0x06, 0, 0, 0)  # ret #0: a classic BPF program that keeps nothing


def attach_filter(sock: socket.socket, program: bytes) -> None:
    buf = ctypes.create_string_buffer(program)
    fprog = struct.pack("HL", len(program) // 8, ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def port_sink(ip: str, port: int) -> socket.socket:
    """A UDP socket on `ip`:`port` that keeps no datagram: its filter (attached before the
    bind, so none is ever queued) drops each one, and the kernel, having found a socket,
    sends no ICMP port unreachable for the frames the packet socket takes. SO_REUSEPORT
    lets two ranks of one job on one host and namespace share an address; OSError when
    the address is not this namespace's or another program holds the port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        attach_filter(s, DROP_ALL)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind((ip, port))
    except BaseException:
        s.close()
        raise
    return s


# ---------------------------------------------------------------------------------------
# sendmmsg / recvmmsg


class _iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _msghdr(ctypes.Structure):
    _fields_ = [
        ("msg_name", ctypes.c_void_p),
        ("msg_namelen", ctypes.c_uint32),
        ("msg_iov", ctypes.POINTER(_iovec)),
        ("msg_iovlen", ctypes.c_size_t),
        ("msg_control", ctypes.c_void_p),
        ("msg_controllen", ctypes.c_size_t),
        ("msg_flags", ctypes.c_int),
    ]


class _mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _msghdr), ("msg_len", ctypes.c_uint)]


_LIBC = ctypes.CDLL(None, use_errno=True)
_HAVE_MMSG = hasattr(_LIBC, "sendmmsg") and hasattr(_LIBC, "recvmmsg")


class _MsgVec:
    """A fixed buffer of `n` frames with an mmsghdr vector pointing at its rows; lengths
    (iov_len in, msg_len out) are numpy views over the C structs."""

    def __init__(self, n: int, width: int):
        self.n = n
        self.buf = np.zeros((n, width), np.uint8)
        self.iov = (_iovec * n)()
        self.msgs = (_mmsghdr * n)()
        base = self.buf.ctypes.data
        for i in range(n):  # once, at setup
            self.iov[i].iov_base = base + i * width
            self.iov[i].iov_len = width
            self.msgs[i].msg_hdr.msg_iov = ctypes.pointer(self.iov[i])
            self.msgs[i].msg_hdr.msg_iovlen = 1
        self.iov_len = np.frombuffer(
            self.iov,
            dtype=np.dtype({"names": ["l"], "formats": ["<u8"], "offsets": [8], "itemsize": 16}),
        )["l"]
        self.msg_len = np.frombuffer(
            self.msgs,
            dtype=np.dtype(
                {
                    "names": ["l"],
                    "formats": ["<u4"],
                    "offsets": [_mmsghdr.msg_len.offset],
                    "itemsize": ctypes.sizeof(_mmsghdr),
                }
            ),
        )["l"]


# ---------------------------------------------------------------------------------------


class RawSocket:
    """One interface, batched send/recv of the frames of a job of `block_values` values
    per block (see module docstring; `announce_block`: its ANNOUNCEs carry a block,
    JobConfig.announce_block); MtuTooSmall if the interface cannot carry them.

    With `dst_ip` and `dst_port` (a rank's socket) and `sink` true, it also holds a
    `port_sink` there; when that cannot be bound the socket works all the same, the
    kernel answers the frames with ICMP, and `sink_skipped` says why."""

    def __init__(
        self,
        ifname: str,
        *,
        mode: str = "auto",
        dst_ip: str | None = None,
        dst_port: int | None = None,
        batch: int = 256,
        block_values: int = p.BLOCK_VALUES,
        sink: bool = True,
        announce_block: bool = False,
    ):
        if mode != "auto" and mode not in MODES:
            raise ValueError(f"transport mode {mode!r} not one of auto, {', '.join(MODES)}")
        check_interface_mtu(ifname, block_values, announce_block)
        self.ifname = ifname
        self.batch = batch
        self.width = width = frame_width(block_values, announce_block)
        self.ring_frame = ring_frame_bytes(width)
        self._empty = np.zeros((0, width), np.uint8), np.zeros(0, np.int64)
        self.mode = ""
        self.fallback_reasons: list[str] = []
        self.sink: socket.socket | None = None
        self.sink_skipped = "" if sink and dst_ip and dst_port else "no sink asked for"
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # receives nothing yet
        self.sock = sock
        try:
            attach_filter(sock, bpf_program(dst_ip, dst_port))
            try:
                sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
            except OSError:
                pass
            for size_opt in (SO_RCVBUFFORCE, SO_SNDBUFFORCE):
                try:
                    sock.setsockopt(socket.SOL_SOCKET, size_opt, socket_buffer_bytes(width))
                except OSError:
                    pass
            for m in MODES if mode == "auto" else (mode,):
                try:
                    getattr(self, f"_setup_{m}")()
                    self.mode = m
                    break
                except (OSError, AttributeError) as e:
                    self.fallback_reasons.append(f"{m}: {e}")
                    if mode != "auto":
                        raise
            sock.bind((ifname, ETH_P_IP))
            # Frames that slipped in before the filter: none can, protocol was 0 until bind.
            if not self.sink_skipped:
                self._open_sink(str(dst_ip), int(dst_port or 0))
        except BaseException:
            self.close()
            raise
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)

    # -- setup ---------------------------------------------------------------------------

    def _open_sink(self, ip: str, port: int) -> None:
        """The port_sink on the rank's address, or the reason there is none: never an
        error, since the transport works without it (the kernel then sends ICMP)."""
        try:
            self.sink = port_sink(ip, port)
        except OSError as e:
            self.sink_skipped = f"UDP {ip}:{port} not bound ({e.strerror or e})"

    def _setup_ring(self) -> None:
        s = self.sock
        s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        s.setsockopt(SOL_PACKET, PACKET_LOSS, 1)  # tx: skip malformed frames
        frame = self.ring_frame
        self.ring_frames = count = ring_frame_count(frame)
        block = max(mmap.PAGESIZE, frame)  # both powers of two: whole frames per block
        req = struct.pack("IIII", block, count // (block // frame), frame, count)
        s.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
        s.setsockopt(SOL_PACKET, PACKET_TX_RING, req)
        ring_bytes = count * frame
        self._mm = mmap.mmap(
            s.fileno(), 2 * ring_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
        )
        words = frame // 4
        rx8 = np.frombuffer(self._mm, np.uint8, ring_bytes).reshape(count, frame)
        rx32 = np.frombuffer(self._mm, np.uint32, ring_bytes // 4).reshape(count, words)
        rx16 = np.frombuffer(self._mm, np.uint16, ring_bytes // 2).reshape(count, words * 2)
        tx8 = np.frombuffer(self._mm, np.uint8, ring_bytes, ring_bytes).reshape(count, frame)
        tx32 = np.frombuffer(self._mm, np.uint32, ring_bytes // 4, ring_bytes).reshape(count, words)
        self._rx8, self._rx_status, self._rx_snap, self._rx_mac = (
            rx8,
            rx32[:, 0],
            rx32[:, 2],
            rx16[:, 6],
        )
        self._tx8, self._tx_status, self._tx_len = tx8, tx32[:, 0], tx32[:, 1]
        self._rx_head = self._tx_head = 0
        self._held: tuple[int, int] | None = None  # ring frames of the last batch
        self.send = self._send_ring  # type: ignore[method-assign]
        self.recv = self._recv_ring  # type: ignore[method-assign]

    def _setup_mmsg(self) -> None:
        if not _HAVE_MMSG:
            raise OSError("libc has no sendmmsg/recvmmsg")
        self._txv = _MsgVec(self.batch, self.width)
        self._rxv = _MsgVec(self.batch, self.width)
        self.send = self._send_mmsg  # type: ignore[method-assign]
        self.recv = self._recv_mmsg  # type: ignore[method-assign]

    def _setup_plain(self) -> None:
        self._rxbuf = np.zeros((self.batch, self.width), np.uint8)
        self.send = self._send_plain  # type: ignore[method-assign]
        self.recv = self._recv_plain  # type: ignore[method-assign]

    # -- interface (replaced per mode in setup) ------------------------------------------

    def send(self, batch: Batch) -> int:  # pragma: no cover - replaced
        raise NotImplementedError

    def recv(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
        raise NotImplementedError

    def ready(self, limit: int) -> int | None:
        """How many received frames wait from the ring's head on, up to `limit` and the
        ring's end, without taking them (the Worker's gather asks); None outside the ring
        mode, whose kernel queue cannot be counted without reading it."""
        if self.mode != "ring":
            return None
        return self._ready_run(self._rx_head, max(limit, 0)) - self._rx_head

    def _ready_run(self, head: int, limit: int) -> int:
        """Where the run of frames ready for user space from `head` on stops: at most
        `limit` of them, never past the ring's end."""
        stop = min(head + limit, self.ring_frames)
        if stop - head == 1:  # (one frame: its status word, without a numpy pass)
            return stop if self._rx_status[head] & TP_STATUS_USER else head
        if stop > head:
            ready = self._rx_status[head:stop] & TP_STATUS_USER
            if np.count_nonzero(ready) < stop - head:
                stop = head + int(np.argmin(ready))
        return stop

    def wait(self, timeout: float) -> None:
        """Sleep until a frame is readable or `timeout` seconds pass."""
        self._poll.poll(max(0, math.ceil(timeout * 1000)))

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        sock, self.sock = getattr(self, "sock", None), None  # type: ignore[assignment]
        for name in ("_rx8", "_rx_status", "_rx_snap", "_rx_mac", "_tx8", "_tx_status", "_tx_len"):
            if hasattr(self, name):
                delattr(self, name)
        mm = getattr(self, "_mm", None)
        if mm is not None:
            try:
                mm.close()
            except BufferError:  # a caller still holds a view of the ring
                pass
            self._mm = None
        if sock is not None:
            sock.close()
        sink, self.sink = getattr(self, "sink", None), None
        if sink is not None:
            sink.close()

    def __enter__(self) -> "RawSocket":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ring ----------------------------------------------------------------------------

    def _recv_ring(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ready frames from the ring's head on, as a view of the ring itself (no copy:
        a wide job's frames are 64 KB each) when they share one MAC offset: the kernel gets
        them back at the next recv (`_release`), so they are valid until then, as a
        batch of the other modes is valid until their buffer's next fill. A batch stops at
        the ring's end (the next one starts at its beginning), so it is one slice."""
        self._release()
        # the next frame's status alone first: most calls (a worker's busy poll) find the
        # ring empty, and the vectorised look at max_n frames below costs numpy calls
        head = self._rx_head
        if not self._rx_status[head] & TP_STATUS_USER:
            return self._empty
        count, width, frame = self.ring_frames, self.width, self.ring_frame
        stop = self._ready_run(head, min(max_n, max(self.batch, 1)))
        mac = self._rx_mac[head:stop]
        m0 = int(mac[0])
        if (stop - head == 1 or not np.count_nonzero(mac != m0)) and m0 + width <= frame:
            frames = self._rx8[head:stop, m0 : m0 + width]
            self._held = (head, stop)  # given back at the next recv
        else:  # VLAN-tagged or odd offsets: rare
            frames = np.zeros((stop - head, width), np.uint8)
            for i, m in enumerate(mac):
                k = min(width, frame - int(m))
                frames[i, :k] = self._rx8[head + i, m : m + k]
            self._rx_status[head:stop] = 0  # TP_STATUS_KERNEL: give frames back
        lengths = np.minimum(self._rx_snap[head:stop], width, dtype=np.int64)
        self._rx_head = stop % count
        return frames, lengths

    def _release(self) -> None:
        """Give the frames of the last batch (a view of the ring) back to the kernel."""
        if self._held is not None:
            start, stop = self._held
            self._rx_status[start:stop] = 0  # TP_STATUS_KERNEL
            self._held = None

    def _send_ring(self, batch: Batch) -> int:
        """Copies the batch into the free TX frames from the ring's head on, a run of
        frames that stops at the ring's end (the rest goes from its beginning) so that
        each copy is one slice, and kicks the kernel once per run. Each run copies its
        rows up to its longest frame (Batch.extent), not the matrix's width: a run of a
        wide-block job's ANNOUNCEs is 70 bytes a frame, not 64 KB."""
        n, done, stalls, count = len(batch), 0, 0, self.ring_frames
        width = batch.frames.shape[1]
        if width > self.width:
            raise ValueError(f"frames of {width} bytes on a socket made for {self.width}")
        while done < n:
            head = self._tx_head
            stop = head + min(n - done, count - head)
            busy = self._tx_status[head:stop]  # != 0 (TP_STATUS_AVAILABLE): still the kernel's
            if np.count_nonzero(busy):
                stop = head + int(np.argmax(busy != 0))
            if stop == head:
                stalls += 1
                self._kick()
                if stalls > 3:
                    select.select([], [self.sock], [], 0.001)
                if stalls > 1000:
                    raise OSError(errno.ENOBUFS, f"TX ring on {self.ifname} stays full")
                continue
            m = stop - head
            rows = slice(done, done + m)
            end = batch.extent(rows)
            self._tx8[head:stop, TX_DATA_OFFSET : TX_DATA_OFFSET + end] = batch.frames[rows, :end]
            self._tx_len[head:stop] = batch.lengths[rows]
            self._tx_status[head:stop] = TP_STATUS_SEND_REQUEST
            self._tx_head = stop % count
            done += m
            self._kick()
        return n

    def _kick(self) -> None:
        try:
            self.sock.send(b"", MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            if e.errno not in (errno.ENOBUFS, errno.EAGAIN):
                raise

    # -- mmsg ----------------------------------------------------------------------------

    def _send_mmsg(self, batch: Batch) -> int:
        v, fd, n, done, stalls = self._txv, self.sock.fileno(), len(batch), 0, 0
        while done < n:
            k = min(n - done, v.n)
            rows = slice(done, done + k)
            end = batch.extent(rows)  # the frames' bytes, not the matrix's width
            v.buf[:k, :end] = batch.frames[rows, :end]
            v.iov_len[:k] = batch.lengths[rows]
            r = _LIBC.sendmmsg(fd, v.msgs, k, 0)
            if r < 0:
                err = ctypes.get_errno()
                if err in (errno.EAGAIN, errno.ENOBUFS, errno.EINTR) and stalls < 1000:
                    stalls += 1
                    select.select([], [self.sock], [], 0.001)
                    continue
                raise OSError(err, f"sendmmsg on {self.ifname}: {errno.errorcode.get(err)}")
            done += r
        return n

    def _recv_mmsg(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        v = self._rxv
        k = min(max_n, v.n)
        r = _LIBC.recvmmsg(self.sock.fileno(), v.msgs, k, MSG_DONTWAIT, None)
        if r <= 0:
            if r < 0 and ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
                err = ctypes.get_errno()
                raise OSError(err, f"recvmmsg on {self.ifname}: {errno.errorcode.get(err)}")
            return self._empty
        return v.buf[:r], v.msg_len[:r].astype(np.int64)

    # -- plain ---------------------------------------------------------------------------

    def _send_plain(self, batch: Batch) -> int:
        for i in range(len(batch)):
            self.sock.send(batch.frames[i, : int(batch.lengths[i])])
        return len(batch)

    def _recv_plain(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        buf = self._rxbuf
        lengths = []
        for i in range(min(max_n, buf.shape[0])):
            try:
                lengths.append(self.sock.recv_into(buf[i], self.width, MSG_DONTWAIT))
            except (BlockingIOError, InterruptedError):
                break
        if not lengths:
            return self._empty
        return buf[: len(lengths)], np.array(lengths, np.int64)


def wait_any(socks: Iterable[RawSocket], timeout: float) -> None:
    """Sleep until any of the sockets is readable or `timeout` seconds pass."""
    select.select([s.sock for s in socks], [], [], timeout)


def check_interface_mac(ifname: str, mac: str) -> None:
    """Warn when results (sent to the descriptor's MAC) would not be addressed to this NIC."""
    try:
        have = interface_mac(ifname)
    except OSError:
        return
    if have.lower() != mac.lower():
        warnings.warn(
            f"interface {ifname} has MAC {have}, the descriptor says {mac}: "
            "results addressed to the descriptor's MAC may be filtered by the NIC",
            stacklevel=3,
        )
