"""A two-level in-process fabric (softswitch.inprocess.InProcessFabric) and its
configuration: spine `s`, leaves `l1` and `l2`, HOSTS hosts per leaf on ports 1..HOSTS,
each leaf's uplink on port HOSTS + 1 to the spine's port 1 or 2."""

from __future__ import annotations

import pytest

from softswitch.inprocess import InProcessFabric

HOSTS = 17  # per leaf: one more than half of MAX_WORKERS, so a job too big for the spine fits
UPLINK = HOSTS + 1
LEAVES = ("l1", "l2")


def host_mac(leaf: int, port: int) -> str:
    return f"02:00:00:10:{leaf:02x}:{port:02x}"


def host_ip(leaf: int, port: int) -> str:
    return f"10.0.{leaf}.{port}"


def fabric_config(
    fab: InProcessFabric, tmp_path, jobs: list | None = None, leaves: tuple[str, ...] = LEAVES
) -> dict:
    """The fabric's configuration file as a dict (controlplane.config's format)."""
    switches = [
        {
            "name": "s",
            "role": "spine",
            "grpc_addr": fab.switch("s").grpc_addr,
            "mac": "02:00:00:00:01:00",
            "ip": "10.0.0.254",
            "ports": list(range(1, len(leaves) + 1)),
            "state_file": str(tmp_path / "s.json"),
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
            "ports": list(range(1, UPLINK + 1)),
            "state_file": str(tmp_path / f"{name}.json"),
        }
        for i, name in enumerate(leaves)
    ]
    links = [{"a": f"{name}:{UPLINK}", "b": f"s:{i + 1}"} for i, name in enumerate(leaves)]
    hosts = [
        {"switch": name, "port": port, "mac": host_mac(i + 1, port), "ip": host_ip(i + 1, port)}
        for i, name in enumerate(leaves)
        for port in range(1, HOSTS + 1)
    ]
    data = {"switches": switches, "links": links, "hosts": hosts}
    if jobs:
        data["jobs"] = jobs
    return data


def new_fabric(leaves: tuple[str, ...]) -> InProcessFabric:
    """The spine `s` and `leaves` (not started), each leaf's uplink on the spine's port of
    its order."""
    return InProcessFabric(
        {"s": len(leaves), **{name: UPLINK for name in leaves}},
        [((name, UPLINK), ("s", i + 1)) for i, name in enumerate(leaves)],
    )


@pytest.fixture
def inprocess_fabric():
    with new_fabric(LEAVES) as fab:
        yield fab
