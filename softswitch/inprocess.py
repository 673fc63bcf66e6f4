"""softswitch's in-process target: a `Device` behind a `P4RuntimeServer` in this process.

Why: the P4 program's packet behaviour, the controller and the workers can all be tested
without root, interfaces or a second process, against the same interpreter and the same
P4Runtime server that `python -m softswitch` runs. The switch is configured over real gRPC
on loopback like any other switch; frames are injected into its ports and what it sends
out is queued per port in this process.

A frame sent is processed before `send` returns (one pipeline, as softswitch's single port
thread), so an empty queue after a send means nothing more is coming for it. Readers that
run in other threads (a worker's transport) wait on `wait(port, timeout)`, woken by a
send that queued a frame on their port. The P4 program's frames come only from frames
sent (p4reduce uses no PacketOut).

`InProcessFabric` joins several such switches by links (p4reduce.fabric's shape: leaves and
a spine): a frame a switch sends out of a linked port enters the switch at the link's
other end, within the same `send`, so a frame crosses the whole fabric before `send`
returns. One lock serves every switch of a fabric (the frames of one send may pass
through all of them); frames between switches are passed along a queue, not by
recursion, so a long path never deepens the stack. Each link end counts what it sent
(frames, bytes) and can lose frames at a seeded rate (`InProcessFabric.set_loss`).
"""

from __future__ import annotations

import random
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from p4reduce.addresses import WorkerAddress
from p4reduce.wire import UDP_PORT_BASE
from softswitch.p4runtime_server import Device, P4RuntimeServer

INPROCESS = "inprocess"


class InProcessSwitch:
    """One switch with ports 1..n_ports in this process, serving P4Runtime on loopback.

    `start` (or the context manager) brings it up, `restart` reboots it on the same gRPC
    port (no pipeline, no state, no queued frames), `stop` stops its server."""

    kind = INPROCESS

    def __init__(
        self,
        n_ports: int = 32,
        device_id: int = 1,
        grpc_port: int = 0,
        wiring: "Wiring | None" = None,
    ):
        self.n_ports = n_ports
        self.device_id = device_id
        self.grpc_port = grpc_port  # 0: a free port, kept across restarts
        self.device: Device | None = None
        self.server: P4RuntimeServer | None = None
        # a switch of a fabric shares the fabric's lock and passes frames along its links
        self.wiring = wiring if wiring is not None else Wiring()
        self.lock = self.wiring.lock
        self.queues: dict[int, deque[bytes]] = {}
        # a reader of port p waits on ready[p]; kept across restarts (a reader may wait)
        self.ready = {port: threading.Condition(self.wiring.lock) for port in range(1, n_ports + 1)}
        # per port: which frames wake its reader (set_wake_filter; none: every frame), and
        # how many such frames are queued there (a reader's wait returns at the first)
        self.wakes: dict[int, Callable[[bytes], bool]] = {}
        self.waking = dict.fromkeys(self.ready, 0)

    # ---- life cycle ------------------------------------------------------------------

    @property
    def grpc_addr(self) -> str:
        assert self.server is not None, "not started"
        return self.server.address

    def start(self, timeout: float = 30.0) -> "InProcessSwitch":  # noqa: ARG002 -- interface
        self.device = Device(device_id=self.device_id)
        self.device.transmit = self._transmit
        self.queues = {port: deque() for port in range(1, self.n_ports + 1)}
        self.waking = dict.fromkeys(self.ready, 0)
        self.server = P4RuntimeServer(self.device, f"127.0.0.1:{self.grpc_port}")
        self.grpc_port = self.server.start()
        return self

    def restart(self, timeout: float = 30.0) -> None:
        """A reboot while frames flow: under the lock every frame is processed under, so
        no frame meets half a switch -- each before it went through the old one, each
        after it meets the new one (no pipeline until a controller pushes one)."""
        with self.lock:
            self.stop()
            self.start(timeout)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(0)
            self.server = None

    def log(self) -> str:
        """The switch's log (the process kinds keep one; this switch logs through Python's
        logging, so there is nothing to return)."""
        return ""

    def __enter__(self) -> "InProcessSwitch":
        return self.start() if self.server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- frames ----------------------------------------------------------------------

    def _check(self, port: int) -> None:
        if port not in self.queues:
            raise ValueError(f"port {port} is not one of this switch's ports 1..{self.n_ports}")

    def _transmit(self, port: int, frame: bytes) -> None:
        # called by device.receive, i.e. with self.lock held by `send_many`
        if self.wiring.tap is not None:
            self.wiring.tap(self, "out", port, frame)
        peer = self.wiring.peers.get((self, port))
        if peer is not None:
            if self.wiring.carry((self, port), frame):
                self.wiring.in_flight.append((peer[0], peer[1], frame))
        elif port in self.queues:
            self.queues[port].append(frame)
            wakes = self.wakes.get(port)
            if wakes is None or wakes(frame):
                self.waking[port] += 1
                self.wiring.woken.add(self.ready[port])

    def _receive(self, port: int, frame: bytes) -> None:
        """A frame entering on `port` (self.lock held); a stopped switch loses it."""
        if self.wiring.tap is not None:
            self.wiring.tap(self, "in", port, frame)
        if self.device is not None and self.server is not None:
            self.device.receive(port, frame)

    def send_many(self, port: int, frames: Iterable[bytes]) -> None:
        """Frames entering on `port`, processed one by one; then the readers of the ports
        that got frames are woken."""
        self._check(port)
        assert self.device is not None, "not started"
        with self.lock:
            in_flight = self.wiring.in_flight
            for frame in frames:
                self._receive(port, bytes(frame))
                while in_flight:  # frames on their way along the fabric's links
                    switch, at, passed = in_flight.popleft()
                    switch._receive(at, passed)
            woken = self.wiring.woken
            for ready in woken:
                ready.notify_all()
            woken.clear()

    def send(self, port: int, frame: bytes) -> None:
        self.send_many(port, (frame,))

    def set_wake_filter(self, port: int, wakes: Callable[[bytes], bool] | None) -> None:
        """The reader of `port` is woken (`wait` returns) only by a frame for which
        `wakes(frame)` is true (None: by every frame); the others wait in the queue for
        its next `take`. Why: every rank of an in-process fabric is a thread of one
        process, and each wake-up is a turn of that rank's loop on the one core all
        ranks and switches share -- a frame its rank acts on only at its next turn
        anyway need not cost one (`p4net.harness.leaf_transport`). Kept across restarts,
        as the readers are."""
        if port not in self.ready:
            raise ValueError(f"port {port} is not one of this switch's ports 1..{self.n_ports}")
        with self.lock:
            if wakes is None:
                self.wakes.pop(port, None)
            else:
                self.wakes[port] = wakes
            self.waking[port] = len(self.queues.get(port, ()))

    def take(self, port: int, max_n: int) -> list[bytes]:
        """Up to `max_n` frames the switch sent out of `port`, oldest first (never waits)."""
        with self.lock:
            q = self.queues[port]
            out = [q.popleft() for _ in range(min(max_n, len(q)))]
            if not q:
                self.waking[port] = 0
            return out

    def queued(self, port: int) -> int:
        """How many frames the switch sent out of `port` wait for its reader."""
        with self.lock:
            return len(self.queues[port])

    def wait(self, port: int, timeout: float) -> None:
        """Until a frame that wakes `port`'s reader is queued (any frame, unless
        `set_wake_filter` says otherwise) or `timeout` passes (a reader in another thread
        than the senders)."""
        with self.lock:
            if not self.waking[port]:
                self.ready[port].wait(timeout)

    def recv(self, port: int, timeout: float = 2.0) -> bytes | None:  # noqa: ARG002
        """Next frame the switch sent out of `port`, or None. Never waits: every frame the
        switch emits for the frames sent so far was queued before `send` returned
        (`timeout` matters to the process kinds only)."""
        self._check(port)
        got = self.take(port, 1)
        return got[0] if got else None

    def recv_all(self, port: int, timeout: float = 0.5) -> list[bytes]:  # noqa: ARG002
        """Every frame queued on `port`."""
        self._check(port)
        return self.take(port, len(self.queues[port]))

    def drain(self) -> None:
        with self.lock:
            for q in self.queues.values():
                q.clear()
            self.waking = dict.fromkeys(self.ready, 0)


@dataclass(eq=False)
class Wiring:
    """What the switches of one fabric share: the lock every frame is processed under
    (each port's reader waits on a condition over it), the links ((switch, port) ->
    (switch, port), both ways), the frames now on a link and the readers' conditions to
    wake once a send is done (`woken`)."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    woken: set[threading.Condition] = field(default_factory=set)
    peers: dict[tuple[InProcessSwitch, int], tuple[InProcessSwitch, int]] = field(
        default_factory=dict
    )
    in_flight: deque[tuple[InProcessSwitch, int, bytes]] = field(default_factory=deque)
    # per link end: what it sent onto the link (frames, bytes, lost) and its loss
    counts: dict[tuple[InProcessSwitch, int], LinkCount] = field(default_factory=dict)
    loss: dict[tuple[InProcessSwitch, int], tuple[float, random.Random]] = field(
        default_factory=dict
    )
    # called with (switch, "in" or "out", port, frame) for each frame a switch takes in
    # or sends out, under the lock (InProcessFabric.set_tap)
    tap: Callable[[InProcessSwitch, str, int, bytes], None] | None = None

    def carry(self, end: tuple[InProcessSwitch, int], frame: bytes) -> bool:
        """Whether a frame sent out of `end` onto its link arrives (the link's simulated
        loss, drawn from the link's own seeded generator), counted either way."""
        count = self.counts.setdefault(end, LinkCount())
        rate, draw = self.loss.get(end, (0.0, None))
        if draw is not None and draw.random() < rate:
            count.lost += 1
            return False
        count.frames += 1
        count.bytes += len(frame)
        return True


@dataclass
class LinkCount:
    """Frames one end of a link sent onto it: carried (and their bytes) and lost."""

    frames: int = 0
    bytes: int = 0
    lost: int = 0


class InProcessFabric:
    """In-process switches joined by links: `switches` names each and its port count,
    `links` are ((name, port), (name, port)) pairs. Every switch serves P4Runtime on its own
    loopback port and is configured like any other; frames are sent into and taken from a
    named switch's ports (`switch(name)`)."""

    def __init__(
        self,
        switches: dict[str, int],
        links: Iterable[tuple[tuple[str, int], tuple[str, int]]] = (),
    ):
        self.wiring = Wiring()
        self.switches = {
            name: InProcessSwitch(n_ports, device_id=i + 1, wiring=self.wiring)
            for i, (name, n_ports) in enumerate(switches.items())
        }
        for a, b in links:
            ends = [(self.switch(name), port) for name, port in (a, b)]
            for (sw, port), peer in ((ends[0], ends[1]), (ends[1], ends[0])):
                if not 1 <= port <= sw.n_ports:
                    raise ValueError(f"link {a} - {b}: port {port} is not 1..{sw.n_ports}")
                if (sw, port) in self.wiring.peers:
                    raise ValueError(f"link {a} - {b}: port {port} is linked twice")
                self.wiring.peers[(sw, port)] = peer

    def set_loss(self, rate: float, seed: int = 1) -> None:
        """Every link loses frames with probability `rate`, each way (0: none): each end
        draws from its own generator seeded from `seed`, so a run is repeatable."""
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"a loss rate is in [0, 1), not {rate}")
        with self.wiring.lock:
            self.wiring.loss = {
                end: (rate, random.Random(seed * 1_000_003 + i))
                for i, end in enumerate(self.wiring.peers)
            }

    def set_tap(self, tap: Callable[[str, str, int, bytes], None] | None) -> None:
        """`tap(switch name, "in" or "out", port, frame)` sees every frame that enters a
        switch of the fabric on a port (from a host or a link, before its pipeline) and
        every frame a pipeline sends out of one (before the link's simulated loss), in the
        order the switches handle them (None: no tap). Why: a run whose outcome depends
        on its threads' timing is understood from the frames it exchanged, which no
        counter keeps (tests/fabric/random_fabric_jobs.py --trace)."""
        names = {sw: name for name, sw in self.switches.items()}
        with self.wiring.lock:
            self.wiring.tap = (
                None
                if tap is None
                else lambda sw, direction, port, frame: tap(names[sw], direction, port, frame)
            )

    def link_counts(self) -> dict[tuple[str, int], LinkCount]:
        """What each link end (switch name, port) sent onto its link so far."""
        names = {sw: name for name, sw in self.switches.items()}
        with self.wiring.lock:
            return {
                (names[sw], port): LinkCount(c.frames, c.bytes, c.lost)
                for (sw, port), c in self.wiring.counts.items()
            }

    def switch(self, name: str) -> InProcessSwitch:
        try:
            return self.switches[name]
        except KeyError:
            raise ValueError(
                f"no switch {name!r} in this fabric ({', '.join(self.switches)})"
            ) from None

    def start(self) -> "InProcessFabric":
        try:
            for sw in self.switches.values():
                sw.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for sw in self.switches.values():
            sw.stop()

    def __enter__(self) -> "InProcessFabric":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def drain(self) -> None:
        for sw in self.switches.values():
            sw.drain()


# ---- a two-level fabric of in-process switches and its configuration --------------------
# (tests/fabric and bench/fabric.py build theirs here: spine `s`, leaves with `hosts` host
# ports each, each leaf's uplink on its port hosts + 1 to the spine's port of its order)


def two_level(leaves: tuple[str, ...], hosts: int) -> InProcessFabric:
    """The spine `s` and `leaves` (not started), each with `hosts` host ports and an uplink
    on port hosts + 1 to the spine's port of the leaf's order."""
    return InProcessFabric(
        {"s": len(leaves), **{name: hosts + 1 for name in leaves}},
        [((name, hosts + 1), ("s", i + 1)) for i, name in enumerate(leaves)],
    )


def host_mac(leaf: int, port: int) -> str:
    """The MAC of the host on port `port` of leaf number `leaf` (1, 2, ...)."""
    return f"02:00:00:10:{leaf:02x}:{port:02x}"


def host_ip(leaf: int, port: int) -> str:
    return f"10.0.{leaf}.{port}"


def two_level_ranks(leaves: int, per_leaf: int) -> list[WorkerAddress]:
    """A job's ranks on a `two_level` fabric of leaves l1, l2, ...: `per_leaf` on each
    leaf's first ports, l1's first."""
    return [
        WorkerAddress(
            (leaf - 1) * per_leaf + port - 1,
            port,
            host_mac(leaf, port),
            host_ip(leaf, port),
            UDP_PORT_BASE,
        )
        for leaf in range(1, leaves + 1)
        for port in range(1, per_leaf + 1)
    ]


def host_leaf(mac: str) -> str:
    """The leaf (l1, l2, ...) of a host whose MAC host_mac gave."""
    return f"l{int(mac.split(':')[4], 16)}"


def two_level_config(
    fab: InProcessFabric,
    state_dir,
    leaves: tuple[str, ...],
    hosts: int,
    jobs: list | None = None,
) -> dict:
    """`two_level`'s configuration file as a dict (controlplane.config's fabric format):
    every switch's P4Runtime address, the links, a host on every leaf port but the uplink;
    each switch's state file in `state_dir`."""
    switches = [
        {
            "name": "s",
            "role": "spine",
            "grpc_addr": fab.switch("s").grpc_addr,
            "mac": "02:00:00:00:01:00",
            "ip": "10.0.0.254",
            "ports": list(range(1, len(leaves) + 1)),
            "state_file": str(state_dir / "s.json"),
        }
    ]
    switches += [
        {
            "name": name,
            "role": "leaf",
            "grpc_addr": fab.switch(name).grpc_addr,
            "device_id": i + 2,
            "mac": f"02:00:00:00:01:{i + 1:02x}",
            "ip": f"10.0.0.{240 + i}",
            "ports": list(range(1, hosts + 2)),
            "state_file": str(state_dir / f"{name}.json"),
        }
        for i, name in enumerate(leaves)
    ]
    links = [{"a": f"{name}:{hosts + 1}", "b": f"s:{i + 1}"} for i, name in enumerate(leaves)]
    host_list = [
        {"switch": name, "port": port, "mac": host_mac(i + 1, port), "ip": host_ip(i + 1, port)}
        for i, name in enumerate(leaves)
        for port in range(1, hosts + 1)
    ]
    data = {"switches": switches, "links": links, "hosts": host_list}
    if jobs:
        data["jobs"] = jobs
    return data
