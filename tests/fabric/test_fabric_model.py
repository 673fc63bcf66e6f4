"""The fabric model (p4reduce.fabric): what it accepts, what it refuses and where it says
the mistake is, and the paths and placements it computes."""

from __future__ import annotations

import dataclasses

import pytest

from p4reduce.fabric import (
    AT_SPINE_ALONE,
    IN_LEAF_ROLE,
    LEAF,
    SINGLE,
    SPINE,
    Endpoint,
    FabricError,
    FabricSwitch,
    Host,
    Link,
    fabric,
    place_job,
)
from p4reduce.wire import MAX_JOB_RANKS, MAX_LEAVES, MAX_WORKERS, SKIP_GROWS_TO_VALUES


def switch(name: str, role: str, ports: int, n: int) -> FabricSwitch:
    return FabricSwitch(
        name, role, tuple(range(1, ports + 1)), f"02:00:00:00:01:{n:02x}", f"10.0.1.{n}"
    )


def host(leaf: str, port: int, n: int) -> Host:
    mac, ip = f"02:00:00:10:{n >> 8:02x}:{n & 0xFF:02x}", f"10.{n >> 8}.0.{n & 0xFF}"
    return Host(mac, ip, Endpoint(leaf, port))


def two_level(leaves: int = 2, per_leaf: int = 4):
    """Leaves l1..ln (host ports 1..per_leaf, uplink per_leaf + 1), spine s (port i: li)."""
    switches = [switch("s", SPINE, leaves, 250)]
    switches += [switch(f"l{i}", LEAF, per_leaf + 1, i) for i in range(1, leaves + 1)]
    links = [Link(Endpoint(f"l{i}", per_leaf + 1), Endpoint("s", i)) for i in range(1, leaves + 1)]
    hosts = [
        host(f"l{i}", p, (i - 1) * per_leaf + p)
        for i in range(1, leaves + 1)
        for p in range(1, per_leaf + 1)
    ]
    return switches, links, hosts


def test_two_level_paths_and_forwarding():
    fab = fabric(*two_level())
    assert fab.root.name == "s" and [s.name for s in fab.leaves] == ["l1", "l2"]
    assert fab.port_toward("l1", "l2") == 5  # the uplink
    assert fab.port_toward("s", "l2") == 2
    assert fab.port_toward("l1", "l1") is None
    entries = dict(fab.forwarding("l1"))
    assert entries[fab.hosts[0].mac] == 1  # its own host, out of its own port
    assert entries[fab.hosts[4].mac] == 5  # l2's first host: up
    assert entries[fab.switch("s").mac] == 5 and entries[fab.switch("l2").mac] == 5
    spine = dict(fab.forwarding("s"))
    assert spine[fab.hosts[0].mac] == 1 and spine[fab.hosts[7].mac] == 2


def test_single_switch_is_a_fabric():
    fab = fabric([switch("only", SINGLE, 4, 1)], [], [host("only", 2, 1)])
    assert fab.root.name == "only" and fab.forwarding("only") == [(fab.hosts[0].mac, 2)]


def with_link(links, i, **change):
    out = list(links)
    out[i] = dataclasses.replace(out[i], **change)
    return out


@pytest.mark.parametrize(
    "mutate, path, words",
    [
        (
            lambda s, li, h: (s, with_link(li, 1, a=Endpoint("l9", 5)), h),
            "links[1].a",
            "unknown switch 'l9'",
        ),
        (
            lambda s, li, h: (s, with_link(li, 1, a=Endpoint("l2", 9)), h),
            "links[1].a",
            "port 9 is not",
        ),
        (
            lambda s, li, h: (s, with_link(li, 1, b=Endpoint("s", 1)), h),
            "links[1].b",
            "s:1 is already used by links[0].b",
        ),
        (
            lambda s, li, h: (s, li + [Link(Endpoint("l1", 4), Endpoint("s", 3))], h),
            "links[2].b",
            "port 3",
        ),
        (
            lambda s, li, h: (s, li, h + [host("l1", 5, 99)]),
            "hosts[8].port",
            "l1:5 is already used by links[0].a",
        ),
        (lambda s, li, h: (s, li, h + [host("s", 1, 99)]), "hosts[8].port", "already used"),
        (lambda s, li, h: (s, li[:1], h), "links", "['l2'] are not linked"),
        (lambda s, li, h: (s + [switch("s", LEAF, 2, 7)], li, h), "switches[3].name", "duplicate"),
        (
            lambda s, li, h: (s[:1] + [dataclasses.replace(s[1], role="core")] + s[2:], li, h),
            "switches[1].role",
            "'core'",
        ),
        (
            lambda s, li, h: (s, li, h[:1] + [dataclasses.replace(h[1], mac=h[0].mac)]),
            "hosts[1].mac",
            "also hosts[0]'s",
        ),
        (
            lambda s, li, h: (s, li, [dataclasses.replace(h[0], ip=s[0].ip)]),
            "hosts[0].ip",
            "also switches[0]'s",
        ),
    ],
)
def test_mistakes_are_named(mutate, path, words):
    with pytest.raises(FabricError) as err:
        fabric(*mutate(*two_level()))
    assert err.value.path == path and words in str(err.value), str(err.value)


def test_cycle_is_refused_naming_the_link_that_closes_it():
    switches, links, hosts = two_level()
    switches[1] = dataclasses.replace(switches[1], ports=(1, 2, 3, 4, 5, 6))
    switches[0] = dataclasses.replace(switches[0], ports=(1, 2, 3))
    links.append(Link(Endpoint("l1", 6), Endpoint("s", 3)))
    with pytest.raises(FabricError, match=r"links\[2\]: l1:6 - s:3 closes a cycle"):
        fabric(switches, links, hosts)


def test_a_link_joins_a_leaf_to_the_spine():
    switches, links, hosts = two_level()
    switches[2] = dataclasses.replace(switches[2], ports=(1, 2, 3, 4, 5, 6))
    switches[1] = dataclasses.replace(switches[1], ports=(1, 2, 3, 4, 5, 6))
    links.append(Link(Endpoint("l1", 6), Endpoint("l2", 6)))
    with pytest.raises(FabricError, match="closes a cycle"):
        fabric(switches, links, hosts)
    with pytest.raises(FabricError, match="joins a leaf to a leaf"):
        fabric(switches, links[:1] + links[2:], hosts)


def test_shapes_refused():
    with pytest.raises(FabricError, match="one spine, not 0"):
        fabric([switch("a", LEAF, 2, 1), switch("b", LEAF, 2, 2)])
    with pytest.raises(FabricError, match=r"switches\[1\].role: a single switch"):
        fabric([switch("a", SPINE, 2, 1), switch("b", SINGLE, 2, 2)])
    many = [switch("s", SPINE, MAX_LEAVES + 1, 250)]
    many += [switch(f"l{i}", LEAF, 1, i) for i in range(MAX_LEAVES + 1)]
    with pytest.raises(FabricError, match=f"{MAX_LEAVES + 1} leaves: at most {MAX_LEAVES}"):
        fabric(many)


def test_place_job_across_leaves():
    fab = fabric(*two_level())
    ranks = [(r, h.mac, h.at.port) for r, h in enumerate(fab.hosts)]
    placement = place_job(fab, ranks)
    assert placement.root == "s" and placement.switches == ["l1", "l2", "s"]
    assert placement.by_leaf() == {"l1": [0, 1, 2, 3], "l2": [4, 5, 6, 7]}
    assert [r.root_port for r in placement.ranks] == [1] * 4 + [2] * 4
    # silent rounds: in the leaf role up to SKIP_GROWS_TO_VALUES values per block, above
    # it at the spine alone while its bitmap holds every rank, else in the leaf role too
    assert placement.silent_aggregation(SKIP_GROWS_TO_VALUES) == IN_LEAF_ROLE
    assert placement.silent_aggregation(SKIP_GROWS_TO_VALUES + 64) == AT_SPINE_ALONE
    # the indices the leaf role numbers ranks and leaves by: interleaved ranks
    mixed = place_job(fab, [(r, fab.hosts[(r % 2) * 4 + r // 2].mac, 1 + r // 2) for r in range(8)])
    assert mixed.by_leaf() == {"l1": [0, 2, 4, 6], "l2": [1, 3, 5, 7]}
    assert mixed.leaf_order() == ["l1", "l2"]
    assert [mixed.index_on_leaf(r) for r in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_place_job_refusals():
    fab = fabric(*two_level())
    h = fab.hosts
    with pytest.raises(
        FabricError, match=r"ranks\[1\]: rank 0 is behind two leaves: l1:1 and l2:1"
    ):
        place_job(fab, [(0, h[0].mac, 1), (0, h[4].mac, 1)])
    with pytest.raises(FabricError, match="no host with MAC 02:00:00:00:09:09"):
        place_job(fab, [(0, "02:00:00:00:09:09", 1)])
    with pytest.raises(FabricError, match="is on l1:2, not port 3"):
        place_job(fab, [(0, h[1].mac, 3)])


def test_job_limits_per_leaf_and_per_job():
    fab = fabric(*two_level(leaves=2, per_leaf=MAX_WORKERS + 1))
    crowded = [(r, h.mac, h.at.port) for r, h in enumerate(fab.hosts[: MAX_WORKERS + 1])]
    with pytest.raises(FabricError, match=f"l1: {MAX_WORKERS + 1} ranks of the job on one leaf"):
        place_job(fab, crowded)
    big = fabric(*two_level(leaves=MAX_LEAVES, per_leaf=MAX_WORKERS))
    ranks = [(r, h.mac, h.at.port) for r, h in enumerate(big.hosts)]
    placement = place_job(big, ranks)
    assert len(placement.ranks) == MAX_JOB_RANKS == 1024
    assert placement.silent_aggregation(SKIP_GROWS_TO_VALUES) == IN_LEAF_ROLE
    assert placement.silent_aggregation(16000) == IN_LEAF_ROLE  # every size, 1 024 ranks
