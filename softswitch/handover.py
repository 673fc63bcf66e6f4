"""A port's traffic handed from one AF_PACKET socket to another without losing a frame.

A port's receive ring is sized for its interface's MTU; when the MTU grows, a ring for the
longer frames is needed. Remaking the ring of the socket in use loses frames: the kernel
stops delivering to a socket while it swaps its ring (and empties its queue). So the new
ring goes on a second socket, and the kernel is told, at one instant, to deliver to it
instead of the first: both sockets join one packet fanout group (PACKET_FANOUT_CBPF), whose
classic BPF program names the member that gets each frame. The first socket is then read
to its end and closed, so every frame is read once, and in the order it arrived.

Why the steps are in this order (`hand_over`):

* A socket bound to an interface gets that interface's frames on its own until it joins
  the group, as does the first socket through the group: the new socket is bound with a
  filter that drops everything (`DROP_ALL`), so what it gets on its own is not a copy.
* Setting a group's program again waits for the frames under way (the kernel's
  synchronize_net, once an older program exists): after the new socket joins, steering
  to the first socket again means no frame is still on its way through the new socket's
  own hook, and its filter can let frames in. After steering to the new socket, no frame is
  on its way to the first one, whose ring then holds its last frame.
* A group's sockets get the frames this host sends unless the group was made with
  PACKET_FANOUT_FLAG_IGNORE_OUTGOING (their own PACKET_IGNORE_OUTGOING no longer counts);
  on a kernel without that flag the new socket's filter drops them (`DROP_OUTGOING`).

Each setting of the program after the group's first waits one RCU grace period (tens of
milliseconds): a port's first handover stops the port loop for two of them, a later one
for three, once per MTU change.
"""

from __future__ import annotations

import ctypes
import errno
import socket
import struct

from p4reduce.afpacket import PACKET_OUTGOING, SOL_PACKET

# linux/if_packet.h, asm-generic/socket.h, linux/filter.h, linux/bpf_common.h
PACKET_FANOUT = 18
PACKET_FANOUT_DATA = 22
PACKET_FANOUT_CBPF = 6
PACKET_FANOUT_FLAG_UNIQUEID = 0x2000
PACKET_FANOUT_FLAG_IGNORE_OUTGOING = 0x4000
SO_ATTACH_FILTER = 26
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_RET_K = 0x06
_SKF_AD_PKTTYPE = (-0x1000 + 4) & 0xFFFFFFFF  # ancillary load: the skb's packet type
_WHOLE = 0xFFFFFFFF  # a filter's "keep the frame, all of it"

Program = tuple[tuple[int, int, int, int], ...]  # classic BPF: (code, jt, jf, k) each

DROP_ALL: Program = ((_BPF_RET_K, 0, 0, 0),)
DROP_OUTGOING: Program = (
    (_BPF_LD_W_ABS, 0, 0, _SKF_AD_PKTTYPE),
    (_BPF_JEQ_K, 0, 1, PACKET_OUTGOING),
    (_BPF_RET_K, 0, 0, 0),
    (_BPF_RET_K, 0, 0, _WHOLE),
)


def _steer_to(member: int) -> Program:
    """The group program that hands every frame to the group's `member`-th socket (the
    kernel takes the result modulo the number of members)."""
    return ((_BPF_RET_K, 0, 0, member),)


def _set_program(sock: socket.socket, level: int, option: int, program: Program) -> None:
    """setsockopt with a struct sock_fprog pointing at `program`; the kernel copies it."""
    code = b"".join(struct.pack("HBBI", *ins) for ins in program)
    buf = ctypes.create_string_buffer(code, len(code))
    sock.setsockopt(level, option, struct.pack("HP", len(program), ctypes.addressof(buf)))


def attach_filter(sock: socket.socket, program: Program) -> None:
    """Replace `sock`'s socket filter by `program`."""
    _set_program(sock, socket.SOL_SOCKET, SO_ATTACH_FILTER, program)


def make_group(sock: socket.socket, ignore_outgoing: bool = True) -> int:
    """Put bound `sock` in a new fanout group of its own; its id. A group without a
    program steers every frame to its first member, `sock`. The group ignores frames this
    host sends where the kernel can (`ignore_outgoing`)."""
    kind = PACKET_FANOUT_CBPF | PACKET_FANOUT_FLAG_UNIQUEID
    if ignore_outgoing:
        try:
            sock.setsockopt(
                SOL_PACKET, PACKET_FANOUT, (kind | PACKET_FANOUT_FLAG_IGNORE_OUTGOING) << 16
            )
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            ignore_outgoing = False  # an older kernel: the sockets' filter drops them
    if not ignore_outgoing:
        sock.setsockopt(SOL_PACKET, PACKET_FANOUT, kind << 16)
    return sock.getsockopt(SOL_PACKET, PACKET_FANOUT)


def join_group(sock: socket.socket, group: int) -> None:
    """Join bound `sock` to `group` (as `make_group` returned it: id, kind and flags)."""
    sock.setsockopt(SOL_PACKET, PACKET_FANOUT, group & ~(PACKET_FANOUT_FLAG_UNIQUEID << 16))


def steer(sock: socket.socket, member: int) -> None:
    """Send the frames of `sock`'s group to its `member`-th socket from now on; returns
    once no frame is on its way under the program before (when there was one)."""
    _set_program(sock, SOL_PACKET, PACKET_FANOUT_DATA, _steer_to(member))


def hand_over(old: socket.socket, new: socket.socket, group: int) -> None:
    """Steer `old`'s frames to `new`: `old` is alone in `group`, steered to it; `new` is
    bound to the same interface with `DROP_ALL` as its filter. When this returns `old`
    gets no frame any more (read it to its end, then close it) and `new` gets them all."""
    steer(old, 0)  # `new` will be member 1: keep the frames on `old` when it joins
    # (a group's first program waits for nothing; a later one, as here after a first
    # handover, waits a grace period)
    join_group(new, group)
    steer(old, 0)  # waits out frames still on their way through `new`'s own hook
    attach_filter(new, DROP_OUTGOING)
    steer(old, 1)  # waits out frames still on their way to `old`
