"""Linux's AF_PACKET and socket numbers (linux/if_ether.h, linux/if_packet.h,
asm-generic/socket.h, linux/sockios.h) that every raw-packet part of p4reduce uses: the
workers' rings (hostlib.transport), softswitch's ports and their receive ring, the test
harness's veth switches and the benchmarks. Python's socket module names none of them;
kept here once so that no component carries its own copy of the kernel's ABI."""

from __future__ import annotations

ETH_P_ALL = 0x0003  # every protocol (bind, socket)
SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_VERSION = 10
PACKET_IGNORE_OUTGOING = 23
TPACKET_V2 = 1
TP_STATUS_USER = 1  # rx ring: the slot holds a frame for user space
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
PACKET_OUTGOING = 4  # sll_pkttype of a frame this host sent
SO_RCVBUFFORCE = 33  # root may exceed net.core.rmem_max
SIOCGIFMTU = 0x8921
