"""Controller tests run against a real switch over real P4Runtime, on every target of
p4net.switches (in-process softswitch always; softswitch and simple_switch_grpc on veth
ports where they can run: bmv2_tests/kinds.py)."""

from __future__ import annotations

import pytest

from bmv2_tests.kinds import params
from controlplane.config import parse
from p4net.switches import start_switch

PORTS = 4
SWITCH_MAC = "02:00:00:00:01:00"
SWITCH_IP = "10.0.0.254"


def host(port: int) -> tuple[str, str]:
    return f"02:00:00:00:00:{port:02x}", f"10.0.0.{port}"


def count_writes(switch_process, monkeypatch) -> list | None:
    """The WriteRequests the switch receives from now on, or None where they cannot be
    counted (a switch in another process). In-process: every request reaching the
    Device's write, after gRPC, as the switch sees them."""
    if switch_process.kind != "inprocess":
        return None
    seen: list = []
    write = switch_process.device.write

    def counted(request):
        seen.append(request)
        return write(request)

    monkeypatch.setattr(switch_process.device, "write", counted)
    return seen


@pytest.fixture(scope="module", params=params())
def switch_process(request):
    proc = start_switch(request.param, PORTS)
    yield proc
    proc.stop()


@pytest.fixture
def config(switch_process, tmp_path):
    """A fresh configuration (and state file) per test. `up` with a fresh state file pushes
    the pipeline (it cannot know the epochs in the slots), so every test starts clean."""
    return parse(
        {
            "switch": {
                "grpc_addr": switch_process.grpc_addr,
                "mac": SWITCH_MAC,
                "ip": SWITCH_IP,
                "election_id": 10,
                "ports": list(range(1, PORTS + 1)),
                "state_file": str(tmp_path / "jobs.json"),
            }
        },
        tmp_path,
    )


@pytest.fixture
def controller(config):
    """A controller that brought the switch up with `config`, closed after the test."""
    from controlplane.controller import Controller

    ctl = Controller(config)
    ctl.up()
    yield ctl
    ctl.close()
