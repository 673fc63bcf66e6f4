"""P4Runtime server for softswitch: the same wire behaviour as simple_switch_grpc.

CI has no bmv2, so the controller talks to softswitch exactly as it talks to
simple_switch_grpc; wherever the two can be told apart, softswitch is wrong.  The behaviour
therefore mirrors p4lang/PI (proto/server/pi_server.cpp for the service, arbitration and
stream; proto/frontend/src/device_mgr.cpp and friends for each entity), which is what
simple_switch_grpc runs, down to the status codes and messages.  Deliberate differences are
listed in docs/softswitch_server.md, each with its reason.

The implementation is the package softswitch.p4rt (one module per concern); this module
is the stable import path (``softswitch.p4runtime_server.Device``, ``P4RuntimeServer``).
"""

from __future__ import annotations

from softswitch.p4rt.arbitration import (
    MAX_CONNECTIONS,
    MAX_PENDING_STREAM_MESSAGES,
    Arbitration,
    Connection,
)
from softswitch.p4rt.device import Device
from softswitch.p4rt.pre import (
    FIRST_RESERVED_GROUP_ID,
    MAX_CLONE_SESSION_ID,
    MAX_REPLICA_PORT,
    MIN_CLONE_SESSION_ID,
    BmPre,
)
from softswitch.p4rt.service import (
    ERROR_SPACE,
    P4RUNTIME_API_VERSION,
    P4RuntimeServer,
    P4RuntimeServicer,
    check_loopback,
)
from softswitch.p4rt.state import DEFAULT_KEY, EntryMeta, MatchKey, Pipeline, ReplicaPort
from softswitch.p4rt.status import Code, P4RTError
from softswitch.p4rt.tables import BM_MAX_PRIORITY

__all__ = [
    "Arbitration",
    "BM_MAX_PRIORITY",
    "BmPre",
    "Code",
    "Connection",
    "DEFAULT_KEY",
    "Device",
    "ERROR_SPACE",
    "EntryMeta",
    "FIRST_RESERVED_GROUP_ID",
    "MAX_CLONE_SESSION_ID",
    "MAX_CONNECTIONS",
    "MAX_PENDING_STREAM_MESSAGES",
    "MAX_REPLICA_PORT",
    "MatchKey",
    "MIN_CLONE_SESSION_ID",
    "P4RTError",
    "P4RUNTIME_API_VERSION",
    "P4RuntimeServer",
    "P4RuntimeServicer",
    "Pipeline",
    "ReplicaPort",
    "check_loopback",
]
