"""Fixtures: every test runs on each available target (softswitch always; simple_switch_grpc
where it is on PATH), with a fresh pipeline pushed over P4Runtime."""
from __future__ import annotations

import pytest

from controlplane.connection import SwitchConnection

from .harness import P4ReduceSwitch
from .targets import TARGETS, running

PORTS = 9


@pytest.fixture(scope="module", params=TARGETS)
def switch_process(request):
    proc = running(request.param, PORTS)
    yield proc
    proc.stop()


@pytest.fixture
def switch(switch_process):
    conn = SwitchConnection(switch_process.grpc_addr).connect(retries=3)
    try:
        conn.push_pipeline()           # a fresh pipeline: every register and entry is new
        sw = P4ReduceSwitch(switch_process, conn)
        sw.configure_identity()
        switch_process.drain()
        yield sw
    finally:
        conn.close()
