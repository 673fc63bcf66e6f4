"""The job descriptor (docs/protocol.md section 4): parsed once, validated, immutable.

A worker's whole configuration comes from the controller as JSON; parsing it in one place
means every other module can trust `JobConfig` fields (ranges checked here, not on the data
path).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Mapping

from . import wire as p


class DescriptorError(ValueError):
    """A job descriptor that this worker cannot use; the message names the field."""


@dataclass(frozen=True)
class Address:
    """One end of p4reduce traffic: the switch's or a worker's MAC, IPv4 and UDP port (the
    descriptor's `switch` and `worker`; the controller uses the same type)."""

    mac: str
    ip: str
    udp_port: int = p.UDP_PORT_BASE


@dataclass(frozen=True)
class JobConfig:
    job: int
    epoch: int  # the job's incarnation: admission matches it (protocol.md section 7)
    rank: int
    worker_count: int
    slot_base: int
    slot_count: int
    switch: Address
    worker: Address
    protocol: int = p.PROTOCOL_VERSION
    lanes: int = p.LANES
    encoding: p.Encoding = p.Encoding.LANES  # how values travel (protocol.md section 10)
    # int32 travels as 16-bit halves and the worker checks the exact sum for overflow:
    # always in a packed job, and in a lanes job on a switch that cannot flag an
    # overflowed lane (Tofino: its ALUs return one value, the sum; protocol.md section 10)
    int32_halves: bool = False

    def to_switch(self) -> p.Endpoints:
        """Addresses of this rank's packets to the switch (what admission checks)."""
        return p.Endpoints(
            src_mac=self.worker.mac,
            dst_mac=self.switch.mac,
            src_ip=self.worker.ip,
            dst_ip=self.switch.ip,
            src_port=self.worker.udp_port,
            dst_port=self.switch.udp_port,
        )

    def from_switch(self) -> p.Endpoints:
        """Addresses of the results the switch sends to this rank (section 12)."""
        return p.Endpoints(
            src_mac=self.switch.mac,
            dst_mac=self.worker.mac,
            src_ip=self.switch.ip,
            dst_ip=self.worker.ip,
            src_port=p.UDP_PORT_BASE,
            dst_port=self.worker.udp_port,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "job": self.job,
            "epoch": self.epoch,
            "rank": self.rank,
            "worker_count": self.worker_count,
            "slot_base": self.slot_base,
            "slot_count": self.slot_count,
            "lanes": self.lanes,
            "encoding": self.encoding.name.lower(),
            "int32_halves": self.int32_halves,
            "switch": vars(self.switch).copy(),
            "worker": vars(self.worker).copy(),
        }


def _address(d: Any, where: str, *, port_in_range: bool) -> Address:
    if not isinstance(d, Mapping):
        raise DescriptorError(f"field {where} must be an object with mac, ip, udp_port")
    try:
        mac, ip, port = d["mac"], d["ip"], int(d["udp_port"])
    except KeyError as e:
        raise DescriptorError(f"field {where}.{e.args[0]} missing") from None
    try:
        p.mac_bytes(mac)
        p.ip_bytes(ip)
    except p.ProtocolError as e:
        raise DescriptorError(f"field {where}: {e}") from None
    if port_in_range and port & p.UDP_PORT_MASK != p.UDP_PORT_BASE:
        raise DescriptorError(
            f"field {where}.udp_port={port} not in the p4reduce range "
            f"0x{p.UDP_PORT_BASE:04x}-0x{p.UDP_PORT_BASE + 15:04x}"
        )
    return Address(mac=str(mac).lower(), ip=str(ip), udp_port=port)


def load_descriptor(descriptor: Mapping[str, Any] | str | os.PathLike[str]) -> JobConfig:
    """Accept a dict, a JSON string or a path to a JSON file; refuse what does not fit."""
    if isinstance(descriptor, Mapping):
        d = dict(descriptor)
    else:
        text = os.fspath(descriptor)
        if text.lstrip().startswith("{"):
            d = json.loads(text)
        else:
            with open(text, encoding="utf-8") as f:
                d = json.load(f)
    if not isinstance(d, dict):
        raise DescriptorError("a job descriptor is a JSON object")

    def integer(name: str, lo: int, hi: int) -> int:
        if name not in d:
            raise DescriptorError(f"field {name} missing")
        v = d[name]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise DescriptorError(f"field {name}={v!r} not an integer in {lo}..{hi}")
        return v

    proto = integer("protocol", 0, 15)
    if proto != p.PROTOCOL_VERSION:
        raise DescriptorError(f"field protocol={proto}: this worker speaks {p.PROTOCOL_VERSION}")
    lanes = integer("lanes", 1, 1 << 16)
    if lanes != p.LANES:
        raise DescriptorError(f"field lanes={lanes}: this worker was built for {p.LANES}")
    if "worker_count" not in d and "workers" in d:
        d["worker_count"] = d["workers"]  # its earlier name (docs/CHANGELOG.md)
    worker_count = integer("worker_count", 1, p.MAX_WORKERS)
    names = {e.name.lower(): e for e in p.Encoding}
    encoding = d.get("encoding", "lanes")  # descriptors older than encodings: lanes
    if encoding not in names:
        raise DescriptorError(f"field encoding={encoding!r} not one of {', '.join(names)}")
    int32_halves = d.get("int32_halves", False)  # older descriptors: the switch flags it
    if not isinstance(int32_halves, bool):
        raise DescriptorError(f"field int32_halves={int32_halves!r} is not true or false")
    rank = integer("rank", 0, worker_count - 1)
    cfg = JobConfig(
        job=integer("job", 0, 0xFFFF),
        epoch=integer("epoch", 1, p.MAX_EPOCH),
        rank=rank,
        worker_count=worker_count,
        slot_base=integer("slot_base", 0, 0xFFFF),
        slot_count=integer("slot_count", 1, 0xFFFF),
        switch=_address(d.get("switch"), "switch", port_in_range=False),
        worker=_address(d.get("worker"), "worker", port_in_range=True),
        protocol=proto,
        lanes=lanes,
        encoding=names[encoding],
        int32_halves=int32_halves,
    )
    return cfg
