"""CounterEntry writes and reads (PI counter_write / counter_read), RegisterEntry reads.

Register reads are softswitch's debugging extension (simple_switch_grpc: UNIMPLEMENTED
"Register reads are not supported yet"); they follow CounterEntry's shape: id 0 reads all,
no index reads every cell.  Register writes stay UNIMPLEMENTED (entities.py).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from p4reduce.p4rt import P4Ids, encode

from .state import Pipeline, out_entity
from .status import Code, P4RTError, invalid_p4_id, target_call

Update = p4runtime_pb2.Update
_BYTES = (p4info_pb2.CounterSpec.BYTES, p4info_pb2.CounterSpec.BOTH)
_PACKETS = (p4info_pb2.CounterSpec.PACKETS, p4info_pb2.CounterSpec.BOTH)


def _negative_index() -> P4RTError:
    return P4RTError(Code.INVALID_ARGUMENT, "A negative number is not a valid index value")


def counter_write(pl: Pipeline, utype: int, c: p4runtime_pb2.CounterEntry) -> None:
    """PI counter_write; bmv2 keeps the unit the P4Info does not cover unchanged."""
    if not pl.info.is_valid_id(c.counter_id, P4Ids.COUNTER):
        raise invalid_p4_id()
    if not c.HasField("index"):
        raise P4RTError(
            Code.UNIMPLEMENTED, "Wildcard write is not supported for indirect counters yet"
        )
    if c.index.index < 0:
        raise _negative_index()
    info = pl.info.counters[c.counter_id]
    index = c.index.index
    if utype == Update.UNSPECIFIED:
        raise P4RTError(Code.INVALID_ARGUMENT, "Update type is not set")
    if utype == Update.INSERT:
        raise P4RTError(Code.INVALID_ARGUMENT, "INSERT update type not supported for counters")
    if utype not in (Update.MODIFY, Update.DELETE):
        raise P4RTError(Code.INVALID_ARGUMENT, "Invalid update type")
    error = "Error when writing to counter"
    size = target_call(error, pl.switch.counter_size, info.name)
    if index >= size:
        raise P4RTError(Code.UNKNOWN, f"{error} (index {index} out of range, size {size})")
    if utype == Update.DELETE:  # PI resets the cell
        new_bytes, new_packets = 0, 0
    else:
        cur_bytes, cur_packets = target_call(error, pl.switch.counter_read, info.name, index)
        new_bytes = c.data.byte_count if info.unit in _BYTES else cur_bytes
        new_packets = c.data.packet_count if info.unit in _PACKETS else cur_packets
    target_call(error, pl.switch.counter_write, info.name, index, new_bytes, new_packets)


def counter_read(
    pl: Pipeline, c: p4runtime_pb2.CounterEntry, out: list[p4runtime_pb2.Entity]
) -> None:
    error = "Error when reading counter from target"
    for cid in _ids(pl, c.counter_id, P4Ids.COUNTER, pl.info.counters):
        info = pl.info.counters[cid]
        size = target_call(error, pl.switch.counter_size, info.name)
        for index in _indices(c, size):
            if index >= size:
                raise P4RTError(Code.UNKNOWN, f"{error} (index {index} out of range, size {size})")
            b, p = target_call(error, pl.switch.counter_read, info.name, index)
            entry = out_entity(out).counter_entry
            entry.counter_id = cid
            entry.index.index = index
            entry.data.byte_count = b
            entry.data.packet_count = p


def register_read(
    pl: Pipeline, r: p4runtime_pb2.RegisterEntry, out: list[p4runtime_pb2.Entity]
) -> None:
    error = "Error when reading register from target"
    for rid in _ids(pl, r.register_id, P4Ids.REGISTER, pl.info.registers):
        info = pl.info.registers[rid]
        size = target_call(error, pl.switch.register_size, info.name)
        indices = _indices(r, size)
        if r.HasField("index") and r.index.index >= size:
            raise P4RTError(
                Code.OUT_OF_RANGE,
                f"index {r.index.index} out of range for register {info.name} of size {size}",
            )
        for index in indices:
            value = target_call(error, pl.switch.register_read, info.name, index)
            entry = out_entity(out).register_entry
            entry.register_id = rid
            entry.index.index = index
            entry.data.CopyFrom(p4data_pb2.P4Data(bitstring=encode(int(value))))


def _indices(
    entry: p4runtime_pb2.CounterEntry | p4runtime_pb2.RegisterEntry, size: int
) -> Iterable[int]:
    """The cells a read addresses: its index, or every cell when it has none."""
    if not entry.HasField("index"):
        return range(size)
    if entry.index.index < 0:
        raise _negative_index()
    return [entry.index.index]


def _ids(pl: Pipeline, p4_id: int, prefix: int, every: Mapping[int, object]) -> list[int]:
    """The ids a read addresses: 0 means all of that kind."""
    if p4_id == 0:
        return list(every)
    if not pl.info.is_valid_id(p4_id, prefix):
        raise invalid_p4_id()
    return [p4_id]
