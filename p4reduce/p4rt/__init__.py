"""P4Runtime as the controller, softswitch and the tests all speak it: the canonical byte
encoding of values (`codec`) and the P4Info index (`p4info`).

Why here, and light: the controller is the product and softswitch one of its targets, so
the shared protocol layer lives with the controller and the test switch depends on it, not
the other way round. It imports only the standard library, protobuf and the p4runtime
protos (controlplane/__init__ is empty), so softswitch and the tests load it without the
controller's gRPC session, jobs or configuration.
"""

from .codec import CodecError, P4InfoError, PacketHeaderCodec, decode, encode, nbytes
from .p4info import (
    ActionInfo,
    ActionScope,
    CounterInfo,
    MatchFieldInfo,
    MatchType,
    P4Ids,
    P4InfoIndex,
    ParamInfo,
    RegisterInfo,
    TableInfo,
    load_p4info,
    resource_type,
)

__all__ = [
    "CodecError",
    "P4InfoError",
    "PacketHeaderCodec",
    "decode",
    "encode",
    "nbytes",
    "ActionInfo",
    "ActionScope",
    "CounterInfo",
    "MatchFieldInfo",
    "MatchType",
    "P4Ids",
    "P4InfoIndex",
    "ParamInfo",
    "RegisterInfo",
    "TableInfo",
    "load_p4info",
    "resource_type",
]
