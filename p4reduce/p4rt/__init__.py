"""P4Runtime as the controller, softswitch and the tests all speak it: the canonical byte
encoding of values (`codec`) and the P4Info index (`p4info`).

Why on the ground floor, and light: the controller writes entries with it and softswitch
serves them with it, and neither may import the other. It imports only the standard
library, protobuf and the p4runtime protos, so each loads it without the other's gRPC
session, jobs, configuration or interpreter.
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
