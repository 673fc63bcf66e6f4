"""Whether a P4Runtime server answers on a channel: the one readiness check of the
controller's sessions and of the switch launcher.

Why not `grpc.channel_ready_future`: it subscribes to the channel's connectivity, which
gRPC's Python runs in a polling thread that lives on for up to 0.2 s after the future
resolves; a channel closed in that window (a short session, a launcher's probe) makes that
thread raise "Cannot invoke RPC: Channel closed!". A Capabilities call with
`wait_for_ready` waits for the connection inside gRPC's core instead, with no thread left
behind, and every P4Runtime server answers it (the call needs no device or pipeline).

gRPC is imported on the call, not with the module: the ground floor loads without it, and
a caller holding a channel has loaded it already.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grpc


def server_answers(channel: grpc.Channel, timeout: float) -> bool:
    """True once a P4Runtime server on `channel` answers a Capabilities request within
    `timeout` seconds. Any answer counts, an error status too: a server sent it. No
    answer: the deadline passed waiting for the connection, or the channel gave up."""
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    try:
        stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=timeout, wait_for_ready=True)
    except grpc.RpcError as exc:
        no_server = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
        return exc.code() not in no_server
    return True
