"""Fixtures: every test runs on each target (in-process softswitch always; softswitch and
simple_switch_grpc on veth pairs where root and the binary are available; bmv2_tests/
targets.py says which and why), with a fresh pipeline pushed over P4Runtime."""

from __future__ import annotations

import pytest

from controlplane.connection import SwitchConnection

from .harness import P4ReduceSwitch
from .targets import params, start

PORTS = 9


@pytest.fixture(scope="module", params=params())
def switch_process(request):
    proc = start(request.param, PORTS)
    yield proc
    proc.stop()


@pytest.fixture
def switch(switch_process):
    conn = SwitchConnection(switch_process.grpc_addr).connect(retries=3)
    try:
        conn.push_pipeline()  # a fresh pipeline: every register and entry is new
        sw = P4ReduceSwitch(switch_process, conn)
        sw.configure_identity()
        switch_process.drain()
        yield sw
    finally:
        conn.close()
