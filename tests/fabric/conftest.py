"""A two-level in-process fabric (softswitch.inprocess.InProcessFabric) and its
configuration: spine `s`, leaves `l1` and `l2`, HOSTS hosts per leaf on ports 1..HOSTS,
each leaf's uplink on port HOSTS + 1 to the spine's port 1 or 2 (softswitch.inprocess's
two_level and two_level_config)."""

from __future__ import annotations

import pytest

from softswitch.inprocess import InProcessFabric, host_ip, host_mac, two_level, two_level_config

HOSTS = 17  # per leaf: one more than half of MAX_WORKERS, so a job too big for the spine fits
UPLINK = HOSTS + 1
LEAVES = ("l1", "l2")

__all__ = ["HOSTS", "UPLINK", "LEAVES", "host_ip", "host_mac", "fabric_config", "new_fabric"]


def fabric_config(
    fab: InProcessFabric, tmp_path, jobs: list | None = None, leaves: tuple[str, ...] = LEAVES
) -> dict:
    """The fabric's configuration file as a dict (controlplane.config's format)."""
    return two_level_config(fab, tmp_path, leaves, HOSTS, jobs)


def new_fabric(leaves: tuple[str, ...]) -> InProcessFabric:
    """The spine `s` and `leaves` (not started), each leaf's uplink on the spine's port of
    its order."""
    return two_level(leaves, HOSTS)


@pytest.fixture
def inprocess_fabric():
    with new_fabric(LEAVES) as fab:
        yield fab
