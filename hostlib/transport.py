"""Raw-socket transport, DPDK-style but in Python: batches in, batches out, no per-packet
Python on the fast paths.

One AF_PACKET socket bound to one interface, protocol ETH_P_IP (so it never sees its own
outgoing frames), with a classic BPF filter (SO_ATTACH_FILTER) that lets only IPv4/UDP to
the p4reduce port range (and, when given, one destination IP / port) reach it. Three modes,
best first; "auto" takes the first that can be set up and `mode` says which one is in use:

* "ring":  PACKET_MMAP TPACKET_V2 RX and TX rings. The rings are numpy matrices over the
           mmap'ed memory: a receive batch is a fancy-index copy of the ready frames plus
           one vectorised status write; a send batch is one copy into free TX frames, one
           status write and one send() to kick the kernel. No syscall per packet, and none
           at all to receive.
* "mmsg":  sendmmsg/recvmmsg through ctypes over fixed numpy buffers: one syscall per batch.
* "plain": send()/recv_into() per frame (when neither is available).

PACKET_QDISC_BYPASS is set when the kernel has it (frames go straight to the driver; a
tcpdump on the sending host does not see them).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import select
import socket
import struct
import subprocess
import warnings
from typing import Iterable

import numpy as np

from . import protocol as p
from .framing import WIDTH, Batch

ETH_P_IP = 0x0800
SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_VERSION = 10
PACKET_LOSS = 14
PACKET_TX_RING = 13
PACKET_QDISC_BYPASS = 20
TPACKET_V2 = 1
SO_ATTACH_FILTER = 26
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
SIOCGIFADDR = 0x8915
SIOCGIFHWADDR = 0x8927
MSG_DONTWAIT = socket.MSG_DONTWAIT

TP_STATUS_USER = 1  # rx: frame belongs to user space
TP_STATUS_SEND_REQUEST = 1  # tx: user asks the kernel to send the frame
TP_STATUS_SENDING = 2
TPACKET2_HDR = 32  # TPACKET_ALIGN(sizeof(struct tpacket2_hdr))
TX_DATA_OFFSET = TPACKET2_HDR  # tp_hdrlen (52) - sizeof(sockaddr_ll) (20)
RING_FRAME = 512  # >= 32 + 16 + 2 + 314 + slack; a page holds 8
RX_FRAMES = 4096
TX_FRAMES = 4096  # > netdev_max_backlog: a frame's pages are not
# reused while a veth peer may still hold them
MODES = ("ring", "mmsg", "plain")


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


def attach_filter(sock: socket.socket, program: bytes) -> None:
    buf = ctypes.create_string_buffer(program)
    fprog = struct.pack("HL", len(program) // 8, ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


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
    """One interface, batched send/recv of p4reduce frames (see module docstring)."""

    def __init__(
        self,
        ifname: str,
        *,
        mode: str = "auto",
        dst_ip: str | None = None,
        dst_port: int | None = None,
        batch: int = 256,
    ):
        if mode != "auto" and mode not in MODES:
            raise ValueError(f"transport mode {mode!r} not one of auto, {', '.join(MODES)}")
        self.ifname = ifname
        self.batch = batch
        self.mode = ""
        self.fallback_reasons: list[str] = []
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
                    sock.setsockopt(socket.SOL_SOCKET, size_opt, 8 << 20)
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
        except BaseException:
            self.close()
            raise
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)

    # -- setup ---------------------------------------------------------------------------

    def _setup_ring(self) -> None:
        s = self.sock
        s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        s.setsockopt(SOL_PACKET, PACKET_LOSS, 1)  # tx: skip malformed frames
        block = 4096
        per_block = block // RING_FRAME
        req = struct.pack("IIII", block, RX_FRAMES // per_block, RING_FRAME, RX_FRAMES)
        s.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
        req = struct.pack("IIII", block, TX_FRAMES // per_block, RING_FRAME, TX_FRAMES)
        s.setsockopt(SOL_PACKET, PACKET_TX_RING, req)
        rx_bytes, tx_bytes = RX_FRAMES * RING_FRAME, TX_FRAMES * RING_FRAME
        self._mm = mmap.mmap(
            s.fileno(), rx_bytes + tx_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
        )
        words = RING_FRAME // 4
        rx8 = np.frombuffer(self._mm, np.uint8, rx_bytes).reshape(RX_FRAMES, RING_FRAME)
        rx32 = np.frombuffer(self._mm, np.uint32, rx_bytes // 4).reshape(RX_FRAMES, words)
        rx16 = np.frombuffer(self._mm, np.uint16, rx_bytes // 2).reshape(RX_FRAMES, words * 2)
        tx8 = np.frombuffer(self._mm, np.uint8, tx_bytes, rx_bytes).reshape(TX_FRAMES, RING_FRAME)
        tx32 = np.frombuffer(self._mm, np.uint32, tx_bytes // 4, rx_bytes).reshape(TX_FRAMES, words)
        self._rx8, self._rx_status, self._rx_snap, self._rx_mac = (
            rx8,
            rx32[:, 0],
            rx32[:, 2],
            rx16[:, 6],
        )
        self._tx8, self._tx_status, self._tx_len = tx8, tx32[:, 0], tx32[:, 1]
        self._rx_head = self._tx_head = 0
        self._rx_ar = np.arange(max(self.batch, 1), dtype=np.int64)
        self._tx_ar = np.arange(TX_FRAMES, dtype=np.int64)
        self.send = self._send_ring  # type: ignore[method-assign]
        self.recv = self._recv_ring  # type: ignore[method-assign]

    def _setup_mmsg(self) -> None:
        if not _HAVE_MMSG:
            raise OSError("libc has no sendmmsg/recvmmsg")
        self._txv = _MsgVec(self.batch, WIDTH)
        self._rxv = _MsgVec(self.batch, WIDTH)
        self.send = self._send_mmsg  # type: ignore[method-assign]
        self.recv = self._recv_mmsg  # type: ignore[method-assign]

    def _setup_plain(self) -> None:
        self._rxbuf = np.zeros((self.batch, WIDTH), np.uint8)
        self.send = self._send_plain  # type: ignore[method-assign]
        self.recv = self._recv_plain  # type: ignore[method-assign]

    # -- interface (replaced per mode in setup) ------------------------------------------

    def send(self, batch: Batch) -> int:  # pragma: no cover - replaced
        raise NotImplementedError

    def recv(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
        raise NotImplementedError

    def wait(self, timeout: float) -> None:
        """Sleep until a frame is readable or `timeout` seconds pass."""
        self._poll.poll(max(0, int(np.ceil(timeout * 1000))))

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

    def __enter__(self) -> "RawSocket":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ring ----------------------------------------------------------------------------

    def _recv_ring(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        max_n = min(max_n, self._rx_ar.size)
        idx = self._rx_ar[:max_n] + self._rx_head
        idx %= RX_FRAMES
        ready = (self._rx_status[idx] & TP_STATUS_USER) != 0
        if not ready[0]:
            return _EMPTY_FRAMES, _EMPTY_LENGTHS
        if not ready.all():
            idx = idx[: int(np.argmin(ready))]
        mac = self._rx_mac[idx]
        m0 = int(mac[0])
        if (mac == m0).all() and m0 + WIDTH <= RING_FRAME:
            frames = self._rx8[idx, m0 : m0 + WIDTH]
        else:  # VLAN-tagged or odd offsets: rare
            frames = np.zeros((idx.size, WIDTH), np.uint8)
            for i, (f, m) in enumerate(zip(idx, mac)):
                k = min(WIDTH, RING_FRAME - int(m))
                frames[i, :k] = self._rx8[f, m : m + k]
        lengths = np.minimum(self._rx_snap[idx], WIDTH).astype(np.int64)
        self._rx_status[idx] = 0  # TP_STATUS_KERNEL: give frames back
        self._rx_head = int(idx[-1] + 1) % RX_FRAMES
        return frames, lengths

    def _send_ring(self, batch: Batch) -> int:
        n, done, stalls = len(batch), 0, 0
        while done < n:
            k = min(n - done, TX_FRAMES)
            idx = self._tx_ar[:k] + self._tx_head
            idx %= TX_FRAMES
            free = self._tx_status[idx] == 0  # TP_STATUS_AVAILABLE
            m = k if free.all() else int(np.argmin(free))
            if m == 0:
                stalls += 1
                self._kick()
                if stalls > 3:
                    select.select([], [self.sock], [], 0.001)
                if stalls > 1000:
                    raise OSError(errno.ENOBUFS, f"TX ring on {self.ifname} stays full")
                continue
            idx = idx[:m]
            self._tx8[idx, TX_DATA_OFFSET : TX_DATA_OFFSET + WIDTH] = batch.frames[done : done + m]
            self._tx_len[idx] = batch.lengths[done : done + m]
            self._tx_status[idx] = TP_STATUS_SEND_REQUEST
            self._tx_head = int(idx[-1] + 1) % TX_FRAMES
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
            v.buf[:k] = batch.frames[done : done + k]
            v.iov_len[:k] = batch.lengths[done : done + k]
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
            return _EMPTY_FRAMES, _EMPTY_LENGTHS
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
                lengths.append(self.sock.recv_into(buf[i], WIDTH, MSG_DONTWAIT))
            except (BlockingIOError, InterruptedError):
                break
        if not lengths:
            return _EMPTY_FRAMES, _EMPTY_LENGTHS
        return buf[: len(lengths)], np.array(lengths, np.int64)


_EMPTY_FRAMES = np.zeros((0, WIDTH), np.uint8)
_EMPTY_LENGTHS = np.zeros(0, np.int64)


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
