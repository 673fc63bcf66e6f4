"""A pure-Python stand-in for the p4reduce switch (docs/protocol.md sections 6-13).

Why: the worker's transport and engine need something that answers exactly like the switch
-- bitmaps with shadow copies, round counts, int32 sums with sticky overflow, the minimum
key for next block/exponent, multicast results, cached unicast answers to retransmissions,
duplicates dropped -- at packet rates far above bmv2, and with injectable loss. The state
layout mirrors p4src/ (one array per register), so a behaviour seen here is the one the
switch specifies.

It is vectorised: a received batch is processed in *waves*, each wave taking the earliest
remaining packet of every slot, so packets of one slot keep their arrival order (the switch
processes them one by one) while different slots are handled together.

`ReflectorCore` is the state machine (bytes in, bytes out); `LoopbackFabric` connects
in-process workers to it; `serve()` runs it on raw sockets (`python -m hostlib.reflector`).
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from . import protocol as p
from .config import JobConfig, load_descriptor
from .framing import WIDTH, Batch, Parsed, parse_batch

EOS = p.END_OF_STREAM


@dataclass
class ReflectorCounters:
    aggregated: int = 0
    rounds_completed: int = 0
    retransmissions_served: int = 0
    duplicates: int = 0
    overflows: int = 0
    malformed: int = 0
    unadmitted: int = 0
    slot_out_of_range: int = 0
    simulated_drops_ingress: int = 0
    simulated_drops_egress: int = 0
    results_sent: int = 0


@dataclass
class Loss:
    """Fractions of admitted packets (ingress) and of result copies (egress) to drop."""
    ingress: float = 0.0
    egress: float = 0.0
    seed: int = 1


class ReflectorCore:
    """One job on a switch: N ranks, S slots. Feed it parsed worker packets, get results."""

    def __init__(self, descriptors: Iterable[JobConfig | Mapping[str, Any] | str],
                 loss: Loss | None = None):
        cfgs = [d if isinstance(d, JobConfig) else load_descriptor(d) for d in descriptors]
        if not cfgs:
            raise ValueError("a reflector needs the descriptor of every rank")
        c0 = cfgs[0]
        self.job, self.workers, self.slots = c0.job, c0.workers, c0.slot_count
        ranks = sorted(c.rank for c in cfgs)
        if ranks != list(range(self.workers)) or any(
                (c.job, c.workers, c.slot_count, c.switch) !=
                (c0.job, c0.workers, c0.slot_count, c0.switch) for c in cfgs):
            raise ValueError("descriptors must be ranks 0..N-1 of one job on one switch")
        self.cfgs = sorted(cfgs, key=lambda c: c.rank)
        self.loss = loss or Loss()
        self.rng = np.random.default_rng(self.loss.seed)
        self.counters = ReflectorCounters()
        S = self.slots
        self.bitmap = np.zeros((S, 2), np.int64)          # one bit per rank, per version
        self.count = np.zeros((S, 2), np.int64)
        self.lanes = np.zeros((S, 2, p.LANES), np.int32)
        self.overflow = np.zeros((S, 2), bool)
        self.next_key = np.zeros((S, 2), np.int64)
        self.rank_ip = np.array([int.from_bytes(p.ip_bytes(c.worker.ip), "big")
                                 for c in self.cfgs], np.uint32)
        t_val = [np.frombuffer(p.l2_l4_template(c.from_switch(), True), np.uint8)
                 for c in self.cfgs]
        t_hdr = [np.frombuffer(p.l2_l4_template(c.from_switch(), False), np.uint8)
                 for c in self.cfgs]
        self.template_values = np.stack(t_val)
        self.template_header = np.stack(t_hdr)

    # -- the data plane ------------------------------------------------------------------

    def process_frames(self, frames: np.ndarray, lengths: np.ndarray) -> dict[int, Batch]:
        parsed = parse_batch(frames, lengths)
        self.counters.malformed += parsed.rejected
        return self.process(parsed)

    def process(self, r: Parsed) -> dict[int, Batch]:
        """Sections 7-13 for a batch; returns result frames per destination rank."""
        c = r.cols
        n = len(r)
        if n == 0:
            return {}
        ctr = self.counters
        malformed = ((c["protocol"] != p.PROTOCOL_VERSION) | (c["msg_type"] == 0)
                     | (c["msg_type"] > p.MsgType.SKIP) | (c["next_block"] > EOS)
                     | ((c["msg_type"] == p.MsgType.DATA) & ~r.has_values))
        rank = c["rank"]
        admitted = ~malformed & (c["job"] == self.job) & (rank < self.workers)
        admitted[admitted] &= self.rank_ip[rank[admitted]] == r.src_ip[admitted]
        ctr.malformed += int(malformed.sum())
        ctr.unadmitted += int((~malformed & ~admitted).sum())
        in_range = admitted & (c["slot"] < self.slots)
        ctr.slot_out_of_range += int((admitted & ~in_range).sum())
        keep = in_range
        if self.loss.ingress > 0:
            lost = keep & (self.rng.random(n) < self.loss.ingress)
            ctr.simulated_drops_ingress += int(lost.sum())
            keep &= ~lost
        idx = np.flatnonzero(keep)
        res_idx: list[np.ndarray] = []
        res_cached: list[np.ndarray] = []
        while idx.size:
            _, first = np.unique(c["slot"][idx], return_index=True)
            wave = idx[first]
            idx = np.delete(idx, first)
            w, cached = self._wave(r, wave)
            res_idx.append(w)
            res_cached.append(cached)
        if not res_idx:
            return {}
        return self._results(r, np.concatenate(res_idx), np.concatenate(res_cached))

    def _wave(self, r: Parsed, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """At most one packet per slot: bitmap, count, values, overflow, next key."""
        c, ctr, N = r.cols, self.counters, self.workers
        s, v = c["slot"][w], c["slot_version"][w]
        bit = np.left_shift(1, c["rank"][w])
        mine, other = self.bitmap[s, v], self.bitmap[s, 1 - v]
        first = mine == 0
        dup = (mine & bit) != 0
        self.bitmap[s, v] = mine | bit
        self.bitmap[s, 1 - v] = other & ~bit
        cnt = self.count[s, v]
        nd = ~dup
        newc = np.where(first, 1, cnt + 1)
        self.count[s[nd], v[nd]] = newc[nd]
        complete = nd & (newc == N)
        done = dup & (cnt == N)
        ctr.duplicates += int((dup & ~done).sum())
        ctr.retransmissions_served += int(done.sum())
        ctr.aggregated += int(nd.sum())
        ctr.rounds_completed += int(complete.sum())

        mt = c["msg_type"][w]
        vals = r.values[w]
        data = nd & (mt == p.MsgType.DATA)
        lane_ovf = np.zeros(w.shape, bool)
        fd = data & first
        self.lanes[s[fd], v[fd]] = vals[fd]
        ad = data & ~first
        if ad.any():
            total = self.lanes[s[ad], v[ad]].astype(np.int64) + vals[ad]
            wrapped = ((total + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
            lane_ovf[ad] = (total != wrapped).any(axis=1)
            self.lanes[s[ad], v[ad]] = wrapped.astype(np.int32)
        fs = nd & first & (mt == p.MsgType.SKIP)
        self.lanes[s[fs], v[fs]] = 0
        sticky = np.where(first, lane_ovf, self.overflow[s, v] | lane_ovf)
        self.overflow[s[nd], v[nd]] = sticky[nd]
        ctr.overflows += int((complete & self.overflow[s, v]).sum())
        key = (c["next_block"][w] << 8) | (255 - c["next_exponent"][w])
        newkey = np.where(first, key, np.minimum(key, self.next_key[s, v]))
        self.next_key[s[nd], v[nd]] = newkey[nd]
        out = complete | done
        return w[out], done[out]

    def _results(self, r: Parsed, w: np.ndarray, cached: np.ndarray) -> dict[int, Batch]:
        """Multicast completed rounds to every rank, unicast cached ones to the sender."""
        c, N = r.cols, self.workers
        copies = np.where(cached, 1, N)
        rows = np.repeat(w, copies)
        is_cached = np.repeat(cached, copies)
        starts = np.cumsum(copies) - copies
        dest = np.arange(rows.size) - np.repeat(starts, copies)   # 0..N-1 per multicast
        dest = np.where(is_cached, c["rank"][rows], dest)
        if self.loss.egress > 0:
            lost = self.rng.random(rows.size) < self.loss.egress
            self.counters.simulated_drops_egress += int(lost.sum())
            rows, is_cached, dest = rows[~lost], is_cached[~lost], dest[~lost]
        m = rows.size
        if m == 0:
            return {}
        s, v = c["slot"][rows], c["slot_version"][rows]
        key = self.next_key[s, v]
        with_values = c["msg_type"][rows] != p.MsgType.ANNOUNCE
        flags = np.where(self.overflow[s, v], int(p.Flag.OVERFLOW), 0) \
            | np.where(is_cached, int(p.Flag.CACHED), 0)
        cols = {"protocol": p.PROTOCOL_VERSION, "msg_type": int(p.MsgType.RESULT),
                "slot_version": v, "flags": flags, "job": self.job, "slot": s,
                "rank": dest, "next_exponent": 255 - (key & 0xFF), "block": c["block"][rows],
                "next_block": key >> 8}
        frames = np.zeros((m, WIDTH), np.uint8)
        frames[:, :p.L2_L4_BYTES] = np.where(with_values[:, None],
                                             self.template_values[dest],
                                             self.template_header[dest])
        frames[:, p.P4R_OFFSET:p.VALUES_OFFSET] = \
            p.pack_headers(cols, m).view(np.uint8).reshape(m, -1)
        frames[:, p.VALUES_OFFSET:] = \
            self.lanes[s, v].astype(p.VALUES_DTYPE).view(np.uint8).reshape(m, -1)
        lengths = np.where(with_values, p.FRAME_BYTES_WITH_VALUES,
                           p.FRAME_BYTES_HEADER_ONLY).astype(np.int64)
        self.counters.results_sent += m
        out: dict[int, Batch] = {}
        if N == 1:
            return {0: Batch(frames, lengths)}
        for rank in np.unique(dest):
            sel = dest == rank
            out[int(rank)] = Batch(frames[sel], lengths[sel])
        return out


# ---------------------------------------------------------------------------------------
# In-process fabric: workers in threads of one process, no sockets (unit tests)


class LoopbackTransport:
    """Transport of one rank into a LoopbackFabric (same interface as transport.RawSocket)."""
    mode = "loopback"

    def __init__(self, fabric: "LoopbackFabric", rank: int):
        self.fabric, self.rank = fabric, rank

    def send(self, batch: Batch) -> int:
        self.fabric.deliver(batch)
        return len(batch)

    def recv(self, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        return self.fabric.take(self.rank, max_n)

    def wait(self, timeout: float) -> None:
        self.fabric.wait(self.rank, timeout)

    def close(self) -> None:
        pass


class LoopbackFabric:
    """Connects in-process workers to a ReflectorCore; `drop` can lose frames on the way."""

    def __init__(self, core: ReflectorCore):
        self.core = core
        self.queues: dict[int, deque[tuple[np.ndarray, int]]] = {
            r: deque() for r in range(core.workers)}
        self.cond = threading.Condition()

    def port(self, rank: int) -> LoopbackTransport:
        return LoopbackTransport(self, rank)

    def deliver(self, batch: Batch) -> None:
        with self.cond:
            out = self.core.process_frames(batch.frames, batch.lengths)
            for rank, b in out.items():
                q = self.queues[rank]
                for i in range(len(b)):
                    q.append((b.frames[i], int(b.lengths[i])))
            if out:
                self.cond.notify_all()

    def take(self, rank: int, max_n: int) -> tuple[np.ndarray, np.ndarray]:
        with self.cond:
            q = self.queues[rank]
            k = min(max_n, len(q))
            items = [q.popleft() for _ in range(k)]
        if not items:
            return np.zeros((0, WIDTH), np.uint8), np.zeros(0, np.int64)
        return (np.stack([f for f, _ in items]), np.array([n for _, n in items], np.int64))

    def wait(self, rank: int, timeout: float) -> None:
        with self.cond:
            if not self.queues[rank]:
                self.cond.wait(timeout)


# ---------------------------------------------------------------------------------------
# On raw sockets


def serve(core: ReflectorCore, interfaces: Mapping[int, str], *, duration: float | None = None,
          idle_exit: float | None = None, transport_mode: str = "auto", batch: int = 512,
          ready: Callable[[], None] | None = None,
          stop: threading.Event | None = None) -> None:
    """Answer worker packets arriving on the given interfaces (rank -> interface name).

    Stops after `duration` seconds, after `idle_exit` seconds without a packet, or when
    `stop` is set. One poll loop over all interfaces.
    """
    from .transport import RawSocket, wait_any

    by_name: dict[str, RawSocket] = {}
    socks: dict[int, RawSocket] = {}
    for rank, ifname in interfaces.items():
        if ifname not in by_name:
            by_name[ifname] = RawSocket(ifname, mode=transport_mode,
                                        dst_ip=core.cfgs[0].switch.ip, batch=batch)
        socks[rank] = by_name[ifname]
    uniq = list(by_name.values())
    if ready is not None:
        ready()
    start = last = time.monotonic()
    try:
        while True:
            got = 0
            for sock in uniq:
                frames, lengths = sock.recv(batch)
                if lengths.size:
                    got += lengths.size
                    for rank, b in core.process_frames(frames, lengths).items():
                        socks[rank].send(b)
            now = time.monotonic()
            if got:
                last = now
                continue
            if stop is not None and stop.is_set():
                return
            if duration is not None and now - start > duration:
                return
            if idle_exit is not None and now - last > idle_exit:
                return
            wait_any(uniq, 0.01)
    finally:
        for sock in uniq:
            sock.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hostlib.reflector",
        description="Answer p4reduce workers like the switch (pure Python, on raw sockets).")
    ap.add_argument("--descriptor", action="append", required=True,
                    help="descriptor (JSON file or string) of one rank; give all N")
    ap.add_argument("--interface", action="append", required=True,
                    help="interface per rank, in rank order (or one for all)")
    ap.add_argument("--loss-ingress", type=float, default=0.0)
    ap.add_argument("--loss-egress", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--idle-exit", type=float, default=None)
    ap.add_argument("--transport", default="auto", choices=["auto", "ring", "mmsg", "plain"])
    ap.add_argument("--counters", help="write counters as JSON here on exit")
    a = ap.parse_args(argv)
    core = ReflectorCore(a.descriptor, Loss(a.loss_ingress, a.loss_egress, a.seed))
    ifs = a.interface * core.workers if len(a.interface) == 1 else a.interface
    if len(ifs) != core.workers:
        ap.error(f"give one --interface or {core.workers}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        serve(core, dict(enumerate(ifs)), duration=a.duration, idle_exit=a.idle_exit,
              transport_mode=a.transport, stop=stop,
              ready=lambda: print("reflector ready", flush=True))
    finally:
        if a.counters:
            with open(a.counters, "w", encoding="utf-8") as f:
                json.dump(vars(core.counters), f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
