"""softswitch.runner.SwitchRunner serves on ports of its own: a P4Runtime server that
another process runs on its gRPC port is never taken for the switch, and a runner whose
chosen port another switch took first starts again on new ones (tests start switches
side by side, each asking the kernel for a free port)."""

from __future__ import annotations

import grpc
import pytest

from p4reduce.p4rt.ready import server_answers
from p4reduce.target import SIMPLE_SWITCH_GRPC, SOFTSWITCH
from softswitch.inprocess import InProcessSwitch
from softswitch.runner import PortTaken, SwitchRunner


@pytest.fixture
def other_server():
    """A P4Runtime server of this test process (an in-process switch): its port."""
    other = InProcessSwitch(1).start()
    yield int(other.grpc_addr.rsplit(":", 1)[1])
    other.stop()


def test_a_server_on_the_given_port_is_not_taken_for_the_switch(other_server):
    runner = SwitchRunner(SOFTSWITCH, {}, grpc_port=other_server, nice=None)
    try:
        with pytest.raises(PortTaken, match=f"gRPC port {other_server}"):
            runner.start(timeout=20)
    finally:
        runner.stop()


def test_a_runner_whose_chosen_port_was_taken_starts_on_new_ones(other_server):
    runner = SwitchRunner(SOFTSWITCH, {}, nice=None)
    runner.grpc_port = other_server  # taken between its choice and the switch's start
    try:
        runner.start(timeout=20)
        assert runner.grpc_port != other_server
        with grpc.insecure_channel(runner.grpc_addr) as channel:
            assert server_answers(channel, 5.0)
        assert runner.process is not None and runner.process.poll() is None
    finally:
        runner.stop()


@pytest.mark.bmv2
def test_a_switch_that_would_share_its_port_with_another_is_refused():
    """simple_switch_grpc binds with SO_REUSEPORT: a second one on the first one's port
    would listen beside it, each client reaching either. The runner refuses it."""
    first = SwitchRunner(SIMPLE_SWITCH_GRPC, {}, nice=None).start(timeout=30)
    second = SwitchRunner(SIMPLE_SWITCH_GRPC, {}, grpc_port=first.grpc_port, nice=None)
    try:
        with pytest.raises(PortTaken, match=f"port {first.grpc_port}"):
            second.start(timeout=30)
        assert first.process is not None and first.process.poll() is None
    finally:
        second.stop()
        first.stop()
