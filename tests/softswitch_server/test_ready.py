"""The readiness check of the controller's sessions and the switch launcher
(p4reduce.p4rt.ready) against the softswitch's real P4Runtime server over gRPC."""

from __future__ import annotations

import socket
import threading

import grpc

from p4reduce.p4rt.ready import server_answers


def _connectivity_pollers() -> list[threading.Thread]:
    """gRPC's Python threads that poll a channel's connectivity: each runs on the
    channel's connectivity state (grpc._channel's _poll_connectivity, its first argument)."""
    from grpc._channel import _ChannelConnectivityState

    return [
        t
        for t in threading.enumerate()
        if any(isinstance(a, _ChannelConnectivityState) for a in getattr(t, "_args", ()))
    ]


def test_a_server_answers_and_no_connectivity_thread_outlives_the_check(harness):
    """The check leaves no polling thread behind, so a channel closed right after it
    cannot make one raise "Channel closed!" (what channel_ready_future left running)."""
    before = _connectivity_pollers()
    with grpc.insecure_channel(harness.addr) as channel:
        assert server_answers(channel, 5.0)
        assert _connectivity_pollers() == before


def test_no_server_is_no_answer_within_the_timeout():
    """A port nothing listens on: False once the timeout passes, no exception."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert not server_answers(channel, 0.3)
