"""Applies the one skip rule (bmv2_tests/kinds.py `unmet`) to every test of the
repository: a test marked root, bmv2 or mininet -- by hand or through its target's
params -- is skipped with the reason before any of its fixtures start a switch.

And keeps Mininet networks one at a time when the suite runs in several processes
(`make test`: pytest-xdist with --dist loadgroup): Mininet names its switches, hosts and
their interfaces in the root namespace the same way in every network (s1, s1-eth1, ...),
so two at once would collide. Every test marked mininet joins one xdist group, which one
process runs in order, and runs first, so that the longest group starts at once while
the other processes take the rest. Everything else names what it creates uniquely (veth
pairs and namespaces by a random tag, each switch its own gRPC and Thrift ports)."""

from __future__ import annotations

import pytest

from bmv2_tests.kinds import unmet_needs


MININET_GROUP = "mininet"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Mininet tests first, in their own order, all in one xdist group."""
    for item in items:
        if item.get_closest_marker("mininet"):
            item.add_marker(pytest.mark.xdist_group(MININET_GROUP))
    items.sort(key=lambda item: item.get_closest_marker("mininet") is None)  # stable


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = unmet_needs(mark.name for mark in item.iter_markers())
    if reason:
        pytest.skip(reason)
