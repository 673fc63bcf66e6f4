"""The fabric: several switches, the links between them and the ranks behind each leaf.

Why one module: the controller (which switches to program, what each forwards where), the
Mininet and in-process networks (which ports to join) and a job's placement (where it
aggregates, which ranks sit behind which leaf) all need the same answers, and each must
refuse the same mistakes. So the model is validated here once, with errors that name what
is wrong and where (`links[1].b`, `hosts[3].port`), and everything else asks it.

The shape is two levels or one: a single switch (role ``single``), or one ``spine`` and up
to MAX_LEAVES ``leaf`` switches, each leaf joined to the spine by exactly one link. Ranks
sit on host ports of a leaf (or of the single switch), never on the spine. The links form
a tree (a cycle is refused, naming the link that closes it), so there is exactly one path
between any two switches and every switch knows the one port that leads towards any host
or switch (`port_toward`).

A job of up to MAX_JOB_RANKS ranks (MAX_WORKERS per leaf on at most MAX_LEAVES leaves) is
placed by `place_job`: each rank's leaf and the port towards it on the aggregating switch.
Plain Python (no controller, no numpy): the controller, the networks and the tests load it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .addresses import AddressError, unicast_ipv4, unicast_mac
from .wire import MAX_JOB_RANKS, MAX_LEAVES, MAX_WORKERS, SKIP_GROWS_TO_VALUES

SINGLE, LEAF, SPINE = "single", "leaf", "spine"
ROLES = (SINGLE, LEAF, SPINE)
# How a job runs on a fabric: in the leaf and spine roles (each leaf aggregates its ranks,
# the spine the leaves), or at the spine alone (the leaves carry its ranks' frames at
# layer 2; only silent rounds of at most MAX_WORKERS ranks above SKIP_GROWS_TO_VALUES
# values per block). docs/fabric.md.
IN_LEAF_ROLE, AT_SPINE_ALONE = "leaf role", "spine alone"
MAX_PORT = 510


class FabricError(ValueError):
    """A fabric that cannot be: `path` names the part (`links[2].a`), the message why."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Endpoint:
    """One end of a link or a host's attachment: a port of a named switch."""

    switch: str
    port: int

    def __str__(self) -> str:
        return f"{self.switch}:{self.port}"


@dataclass(frozen=True)
class FabricSwitch:
    """A switch of the fabric: its role, where its P4Runtime server is, its own address
    (what frames to it are sent to) and its ports."""

    name: str
    role: str
    ports: tuple[int, ...]
    mac: str
    ip: str
    grpc_addr: str = "127.0.0.1:9559"
    device_id: int = 1


@dataclass(frozen=True)
class Link:
    a: Endpoint
    b: Endpoint

    def other(self, switch: str) -> Endpoint:
        """The end that is not on `switch`."""
        return self.b if self.a.switch == switch else self.a

    def end_on(self, switch: str) -> Endpoint:
        return self.a if self.a.switch == switch else self.b


@dataclass(frozen=True)
class Host:
    """A host (a rank's machine) on a port of a leaf or of the single switch."""

    mac: str
    ip: str
    at: Endpoint


@dataclass(frozen=True)
class Fabric:
    """A validated fabric (build it with `fabric(...)`, which checks everything)."""

    switches: tuple[FabricSwitch, ...]
    links: tuple[Link, ...] = ()
    hosts: tuple[Host, ...] = ()
    _by_name: dict[str, FabricSwitch] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({s.name: s for s in self.switches})

    def switch(self, name: str) -> FabricSwitch:
        try:
            return self._by_name[name]
        except KeyError:
            raise FabricError(name, f"no such switch (have: {', '.join(self._by_name)})") from None

    @property
    def spine(self) -> FabricSwitch | None:
        return next((s for s in self.switches if s.role == SPINE), None)

    @property
    def leaves(self) -> list[FabricSwitch]:
        return [s for s in self.switches if s.role == LEAF]

    @property
    def root(self) -> FabricSwitch:
        """Where a job aggregates today: the spine, or the one switch of a flat fabric."""
        return self.spine or self.switches[0]

    def neighbours(self, name: str) -> list[tuple[int, str]]:
        """(port on `name`, the switch at its other end) for every link of `name`."""
        return [
            (link.end_on(name).port, link.other(name).switch)
            for link in self.links
            if name in (link.a.switch, link.b.switch)
        ]

    def host_by_mac(self, mac: str) -> Host | None:
        return next((h for h in self.hosts if h.mac == mac), None)

    def port_toward(self, source: str, target: str) -> int | None:
        """The port of switch `source` on the one path to switch `target` (None: the same
        switch). A tree: a depth-first walk finds the only path."""
        if source == target:
            return None
        stack = [(source, None, None)]  # (switch, came from, first port taken)
        while stack:
            here, came_from, first = stack.pop()
            for port, there in self.neighbours(here):
                if there == came_from:
                    continue
                taken = port if first is None else first
                if there == target:
                    return taken
                stack.append((there, here, taken))
        raise FabricError(target, f"not reachable from {source}")

    def port_toward_host(self, source: str, host: Host) -> int:
        """The port of `source` that leads to `host` (its own port when it is on `source`)."""
        toward = self.port_toward(source, host.at.switch)
        return host.at.port if toward is None else toward

    def forwarding(self, name: str) -> list[tuple[str, int]]:
        """Switch `name`'s L2 entries (MAC, port): every host and every other switch, each
        out of the port towards it. The frames of a job cross the fabric by these: a rank
        sends to the aggregating switch's MAC, every switch on the way forwards it."""
        entries = [(h.mac, self.port_toward_host(name, h)) for h in self.hosts]
        for other in self.switches:
            toward = self.port_toward(name, other.name)
            if toward is not None:
                entries.append((other.mac, toward))
        return entries


def fabric(
    switches: Sequence[FabricSwitch],
    links: Sequence[Link] = (),
    hosts: Sequence[Host] = (),
) -> Fabric:
    """A Fabric, or FabricError naming the first thing wrong (switches, then links, then
    the tree's shape, then hosts: the same error every time for the same input)."""
    _check_switches(switches)
    by_name = {s.name: s for s in switches}
    used: dict[Endpoint, str] = {}
    for i, link in enumerate(links):
        for end, where in ((link.a, f"links[{i}].a"), (link.b, f"links[{i}].b")):
            _check_endpoint(end, where, by_name, used)
        if link.a.switch == link.b.switch:
            raise FabricError(f"links[{i}]", f"joins {link.a.switch} to itself")
    _check_tree(switches, links)
    for i, host in enumerate(hosts):
        _check_host(host, f"hosts[{i}]", by_name, used)
    _check_addresses(switches, hosts)
    return Fabric(tuple(switches), tuple(links), tuple(hosts))


def _check_switches(switches: Sequence[FabricSwitch]) -> None:
    """Names distinct, roles known, ports distinct and in range, the mix of roles one of
    the two shapes."""
    if not switches:
        raise FabricError("switches", "a fabric needs at least one switch")
    names: set[str] = set()
    for i, s in enumerate(switches):
        where = f"switches[{i}]"
        if not s.name or not isinstance(s.name, str):
            raise FabricError(f"{where}.name", f"expected a non-empty name, got {s.name!r}")
        if s.name in names:
            raise FabricError(f"{where}.name", f"duplicate switch name {s.name!r}")
        names.add(s.name)
        if s.role not in ROLES:
            raise FabricError(f"{where}.role", f"{s.role!r} is not one of {', '.join(ROLES)}")
        if not s.ports:
            raise FabricError(f"{where}.ports", "a switch needs at least one port")
        for p, port in enumerate(s.ports):
            if not 0 <= port <= MAX_PORT:
                raise FabricError(f"{where}.ports[{p}]", f"{port} is out of range 0..{MAX_PORT}")
            if s.ports.index(port) != p:
                raise FabricError(f"{where}.ports[{p}]", f"duplicate port {port}")
    roles = [s.role for s in switches]
    if SINGLE in roles and len(switches) > 1:
        i = roles.index(SINGLE)
        raise FabricError(
            f"switches[{i}].role",
            "a single switch is the whole fabric; with several, each is a leaf or the spine",
        )
    if len(switches) > 1:
        if roles.count(SPINE) != 1:
            raise FabricError(
                "switches", f"a two-level fabric has one spine, not {roles.count(SPINE)}"
            )
        if roles.count(LEAF) > MAX_LEAVES:
            raise FabricError("switches", f"{roles.count(LEAF)} leaves: at most {MAX_LEAVES}")


def _check_endpoint(
    end: Endpoint, where: str, by_name: dict[str, FabricSwitch], used: dict[Endpoint, str]
) -> None:
    """A link's end or a host's port: a port of a known switch, used by nothing else."""
    if end.switch not in by_name:
        raise FabricError(where, f"unknown switch {end.switch!r} (have: {', '.join(by_name)})")
    if end.port not in by_name[end.switch].ports:
        raise FabricError(
            where,
            f"port {end.port} is not one of {end.switch}'s ports {list(by_name[end.switch].ports)}",
        )
    if end in used:
        raise FabricError(where, f"{end} is already used by {used[end]}")
    used[end] = where


def _check_tree(switches: Sequence[FabricSwitch], links: Sequence[Link]) -> None:
    """The links join every switch into one tree of the two-level shape: no cycle (the
    link that would close one is named), every leaf on the spine by one link, nothing
    left unjoined."""
    parent = {s.name: s.name for s in switches}

    def find(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    role = {s.name: s.role for s in switches}
    for i, link in enumerate(links):
        ra, rb = find(link.a.switch), find(link.b.switch)
        if ra == rb:
            raise FabricError(
                f"links[{i}]",
                f"{link.a} - {link.b} closes a cycle: {link.a.switch} and {link.b.switch} "
                "are already joined (a fabric is a tree: one path between two switches)",
            )
        parent[ra] = rb
        if {role[link.a.switch], role[link.b.switch]} != {LEAF, SPINE}:
            raise FabricError(
                f"links[{i}]",
                f"{link.a} - {link.b} joins a {role[link.a.switch]} to a "
                f"{role[link.b.switch]}: a link joins a leaf to the spine",
            )
    roots = {find(s.name) for s in switches}
    if len(roots) > 1:
        alone = sorted(s.name for s in switches if find(s.name) != find(switches[0].name))
        raise FabricError("links", f"switch(es) {alone} are not linked to {switches[0].name}")


def _check_host(
    host: Host, where: str, by_name: dict[str, FabricSwitch], used: dict[Endpoint, str]
) -> None:
    _check_endpoint(host.at, f"{where}.port", by_name, used)
    if by_name[host.at.switch].role == SPINE:
        raise FabricError(
            f"{where}.switch", f"{host.at.switch} is the spine: hosts sit behind a leaf"
        )


def _check_addresses(switches: Sequence[FabricSwitch], hosts: Sequence[Host]) -> None:
    """Every switch and host address unicast and nobody's but its own."""
    seen: dict[str, str] = {}
    named = [(f"switches[{i}]", s.mac, s.ip) for i, s in enumerate(switches)]
    named += [(f"hosts[{i}]", h.mac, h.ip) for i, h in enumerate(hosts)]
    for where, mac, ip in named:
        for key, value, check in (("mac", mac, unicast_mac), ("ip", ip, unicast_ipv4)):
            try:
                check(value)
            except AddressError as exc:
                raise FabricError(f"{where}.{key}", str(exc)) from None
            if value in seen:
                raise FabricError(f"{where}.{key}", f"{value} is also {seen[value]}'s")
            seen[value] = where


# ---- a job on the fabric -----------------------------------------------------------------


@dataclass(frozen=True)
class RankPlace:
    """Where one rank of a job is: its host, its leaf (or single switch) and the port of
    the aggregating switch that leads to it."""

    rank: int
    host: Host
    root_port: int

    @property
    def leaf(self) -> str:
        return self.host.at.switch


@dataclass(frozen=True)
class Placement:
    """A job's ranks on the fabric and where it aggregates (`root`)."""

    root: str
    ranks: tuple[RankPlace, ...]

    def by_leaf(self) -> dict[str, list[int]]:
        """The job's ranks behind each of its leaves."""
        out: dict[str, list[int]] = {}
        for r in self.ranks:
            out.setdefault(r.leaf, []).append(r.rank)
        return out

    def leaf_order(self) -> list[str]:
        """The job's leaves in the order of their first rank: leaf i is rank i of the
        spine's job in the leaf role (docs/fabric.md)."""
        return list(self.by_leaf())

    def index_on_leaf(self, rank: int) -> int:
        """Rank `rank`'s index among its leaf's ranks of the job (0..31): its bit in the
        leaf's bitmap and its rank on the wire to the leaf, in the leaf role."""
        place = next(r for r in self.ranks if r.rank == rank)
        return self.by_leaf()[place.leaf].index(rank)

    @property
    def switches(self) -> list[str]:
        """Every switch the job's frames cross: its leaves and its root."""
        return sorted({self.root, *(r.leaf for r in self.ranks)})

    def silent_aggregation(self, block_values: int) -> str:
        """Where a job of silent rounds at `block_values` values per block aggregates:
        IN_LEAF_ROLE up to SKIP_GROWS_TO_VALUES values per block -- each uplink then
        carries one frame each way per round, where at the spine alone it carries each of
        its ranks' packets up and each rank's copy of every result down -- and above that
        for a job of more ranks than one switch's contributor bitmap holds (MAX_WORKERS),
        its ranks' ANNOUNCEs then carrying a block (wire.announce_carries_block: a leaf
        makes its empty partial from the announce round's RESULT); AT_SPINE_ALONE for the
        other jobs above SKIP_GROWS_TO_VALUES, whose ANNOUNCEs stay a header and a
        fingerprint range and whose links need carry no frame longer than a DATA
        (docs/fabric.md, "Silent rounds on a fabric")."""
        if block_values <= SKIP_GROWS_TO_VALUES or len(self.ranks) > MAX_WORKERS:
            return IN_LEAF_ROLE
        return AT_SPINE_ALONE


def place_job(fab: Fabric, ranks: Iterable[tuple[int, str, int]]) -> Placement:
    """Place a job's ranks, each (rank, host MAC, port on its leaf): FabricError when a rank
    is not on a known host of that port, a rank appears behind two leaves or twice, the
    ranks are not 0..N-1, a leaf
    holds more than MAX_WORKERS of the job's ranks, or the job has more than
    MAX_JOB_RANKS."""
    root = fab.root.name
    places: dict[int, RankPlace] = {}
    for i, (rank, mac, port) in enumerate(ranks):
        where = f"ranks[{i}]"
        host = fab.host_by_mac(mac)
        if host is None:
            raise FabricError(where, f"rank {rank}: no host with MAC {mac} in the fabric")
        if host.at.port != port:
            raise FabricError(where, f"rank {rank}: host {mac} is on {host.at}, not port {port}")
        if rank in places:
            first = places[rank].host.at
            what = "two leaves" if first.switch != host.at.switch else "two ports"
            raise FabricError(where, f"rank {rank} is behind {what}: {first} and {host.at}")
        places[rank] = RankPlace(rank, host, fab.port_toward_host(root, host))
    if sorted(places) != list(range(len(places))):
        raise FabricError(
            "ranks", f"ranks must be 0..{len(places) - 1} without gaps, got {sorted(places)}"
        )
    if len(places) > MAX_JOB_RANKS:
        raise FabricError("ranks", f"{len(places)} ranks: a job has at most {MAX_JOB_RANKS}")
    placement = Placement(root, tuple(places[r] for r in sorted(places)))
    for leaf, on_leaf in placement.by_leaf().items():
        if len(on_leaf) > MAX_WORKERS:
            raise FabricError(
                leaf, f"{len(on_leaf)} ranks of the job on one leaf: at most {MAX_WORKERS}"
            )
    return placement
