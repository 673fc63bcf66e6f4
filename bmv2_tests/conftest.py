"""Fixtures: every test runs on each kind of switch under test (in-process softswitch
always; softswitch and simple_switch_grpc on veth pairs where root and the binary are
available; bmv2_tests/kinds.py says which and why), with a fresh pipeline pushed over
P4Runtime and jobs configured through the controller's JobManager (p4net.harness)."""

from __future__ import annotations

import pytest

from p4net.harness import SwitchSession
from p4net.switches import start_switch

from .kinds import params

PORTS = 9


@pytest.fixture(scope="module", params=params())
def switch_process(request):
    proc = start_switch(request.param, PORTS)
    yield proc
    proc.stop()


@pytest.fixture
def switch(switch_process):
    with SwitchSession(switch_process) as session:
        yield session
