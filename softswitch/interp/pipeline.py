"""simple_switch's packet walk (targets/simple_switch/simple_switch.cpp) over compiled code.

receive_: metadata zeroed, ingress_port / packet_length / instance_type=NORMAL set.
ingress_thread: parse (a parser error does not drop: the packet continues with
standard_metadata.parser_error set, the failing header left invalid and the unparsed bytes
as payload), verify checksums, ingress, reset exit flag, then: mcast_grp != 0 -> multicast
(instance_type=REPLICATION, one copy per (port, rid) with egress_rid set, PHV copied);
else egress_spec == 511 -> drop; else instance_type=NORMAL and enqueue to egress_spec.
egress_thread: egress_port=port, egress_spec=512 (truncated to the field width), packet_length
from the packet-length register, egress, egress_spec == 511 -> drop, deparse (a frame grown
by more than GROWTH_ROOM bytes, which simple_switch's packet buffer cannot hold, dropped).
"""

from __future__ import annotations

import time
from typing import Any

from .codegen import Compiled
from .gen import DROP_PORT, AssertFailure
from .expr import X_EXIT, X_INLEN, X_PAYLOAD, X_PKTLEN

PKT_INSTANCE_TYPE_NORMAL = 0
PKT_INSTANCE_TYPE_REPLICATION = 5
# unparsed payloads up to this many bytes are sliced (a copy costs less than a view's setup)
_COPY_BELOW = 512
# the bytes simple_switch lets a received frame grow by: its packet buffer is the frame's
# length plus this (receive_), and a deparser that writes past it aborts the process; a
# frame out longer than that is dropped here and counted (drop_outgrew_packet_buffer)
GROWTH_ROOM = 512
# standard metadata only the program reads: the walk skips them when it never mentions one
_UNSEEN_UNLESS_MENTIONED = frozenset(
    (
        "ingress_global_timestamp",
        "egress_global_timestamp",
        "priority",
        "q_enq_timestamp",
        "q_enq_qdepth",
        "q_deq_timedelta",
        "q_deq_qdepth",
        "q_qid",
    )
)


class Pipeline:
    """One loaded program plus its PRE state; not thread safe (Switch holds the lock)."""

    def __init__(self, c: Compiled) -> None:
        self.c = c
        self.F0, self.V0 = c.layout.zero_phv()
        self.mc_groups: dict[int, list[tuple[int, int]]] = {}
        self.stats: dict[str, int] = {}
        self.start_ns = time.monotonic_ns()
        # metadata the program never mentions is never filled in (nothing could see it):
        # the clock is read only for a timestamp the program uses
        mentioned = c.mentioned
        i = {
            k: (None if k in _UNSEEN_UNLESS_MENTIONED and v not in mentioned else v)
            for k, v in c.idx.items()
        }
        self.i_ingress_port = i["ingress_port"]
        self.i_egress_spec = i["egress_spec"]
        self.i_egress_port = i["egress_port"]
        self.i_instance_type = i["instance_type"]
        self.i_packet_length = i["packet_length"]
        self.i_parser_error = i["parser_error"]
        self.i_checksum_error = i["checksum_error"]
        self.i_mcast_grp = i["mcast_grp"]
        self.i_egress_rid = i["egress_rid"]
        self.i_ig_ts = i["ingress_global_timestamp"]
        self.i_eg_ts = i["egress_global_timestamp"]
        self.i_priority = i["priority"]
        q = [i["q_enq_timestamp"], i["q_enq_qdepth"], i["q_deq_timedelta"], i["q_deq_qdepth"]]
        self.q = q if c.with_queueing and any(x is not None for x in q) else None
        self.i_qid = i["q_qid"] if self.q is not None else None
        w = c.widths
        self.egress_spec_init = (DROP_PORT + 1) & ((1 << w["egress_spec"]) - 1)
        self.port_mask = (1 << w["ingress_port"]) - 1
        self.len_mask = (1 << w["packet_length"]) - 1
        self.no_error = c.errors["NoError"]
        self.n_stacks = c.n_stacks
        self.X0: list[Any] = [0, 0, 0, b""] + [0] * c.n_stacks

    def _count(self, key: str) -> None:
        self.stats[key] = self.stats.get(key, 0) + 1

    def _now_us(self) -> int:
        return (time.monotonic_ns() - self.start_ns) // 1000

    # -- data plane ----------------------------------------------------------------------
    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        c = self.c
        F = self.F0[:]
        V = self.V0[:]
        n = len(frame)
        X = self.X0[:]
        X[X_PKTLEN] = X[X_INLEN] = n
        F[self.i_ingress_port] = ingress_port & self.port_mask
        F[self.i_packet_length] = n & self.len_mask
        F[self.i_instance_type] = PKT_INSTANCE_TYPE_NORMAL
        if self.i_ig_ts is not None:
            F[self.i_ig_ts] = self._now_us()
        err = self.no_error
        pos = 0
        if c.parser is not None:
            st = c.parser
            while st is not None:
                st, pos, err = st(F, V, X, frame, pos)
            if err != self.no_error:
                self._count("parser_errors")
        # the unparsed rest, not a copy of it: the deparser joins it (and a checksum over
        # the payload reads it) as it is; a frame of tens of kilobytes (a jumbo TCP
        # segment that only crosses the switch) is then copied once, into the frame out
        X[X_PAYLOAD] = memoryview(frame)[pos:] if n - pos > _COPY_BELOW else frame[pos:]
        if self.i_parser_error is not None:
            F[self.i_parser_error] = err
        cks = c.verify(F, V, X)
        if cks:
            self._count("checksum_errors")
        if self.i_checksum_error is not None:
            F[self.i_checksum_error] = cks
        node = c.ingress
        while node is not None:
            if X[X_EXIT]:
                break
            node = node(F, V, X)
        X[X_EXIT] = 0
        mgid = F[self.i_mcast_grp] if self.i_mcast_grp is not None else 0
        out: list[tuple[int, bytes]] = []
        if mgid != 0:
            F[self.i_instance_type] = PKT_INSTANCE_TYPE_REPLICATION
            replicas = self.mc_groups.get(mgid)
            if replicas is None:
                self._count("drop_unknown_mcast_group")
                return out
            i_rid, last = self.i_egress_rid, len(replicas) - 1
            for k, (port, rid) in enumerate(replicas):
                if i_rid is not None:
                    F[i_rid] = rid
                if k == last:  # nothing reads the ingress PHV after its last copy
                    self._egress(port, F, V, X, out)
                else:
                    self._egress(port, F[:], V[:], X[:], out)
            return out
        egress_spec = F[self.i_egress_spec]
        if egress_spec == DROP_PORT:
            self._count("drop_ingress")
            return out
        F[self.i_instance_type] = PKT_INSTANCE_TYPE_NORMAL
        self._egress(egress_spec, F, V, X, out)
        return out

    def _egress(
        self, port: int, F: list[int], V: list[int], X: list[Any], out: list[tuple[int, bytes]]
    ) -> None:
        c = self.c
        if self.i_priority is not None and F[self.i_priority] >= 1:
            # simple_switch runs with one queue per port: "Priority out of range"
            self._count("drop_priority_out_of_range")
            return
        q = self.q
        if q is not None:
            if q[0] is not None:
                F[q[0]] = self._now_us() & ((1 << c.layout.widths[q[0]]) - 1)
            for k in (q[1], q[2], q[3], self.i_qid):
                if k is not None:
                    F[k] = 0
        if self.i_eg_ts is not None:
            F[self.i_eg_ts] = self._now_us()
        F[self.i_egress_port] = port
        F[self.i_egress_spec] = self.egress_spec_init
        F[self.i_packet_length] = X[X_PKTLEN] & self.len_mask
        node = c.egress
        while node is not None:
            if X[X_EXIT]:
                break
            node = node(F, V, X)
        if F[self.i_egress_spec] == DROP_PORT:
            self._count("drop_egress")
            return
        data = c.deparse(F, V, X)
        if len(data) > X[X_INLEN] + GROWTH_ROOM:
            self._count("drop_outgrew_packet_buffer")
            return
        out.append((port, data))


__all__ = ["Pipeline", "AssertFailure"]
