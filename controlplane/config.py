"""The declarative switch configuration (TOML) and its validation.

Errors name the field by its path in the file (`jobs[0].workers[2].mac`) and say what is
wrong, because the person reading them is editing that file.

    [switch]
    target = "bmv2"                        # bmv2 (default; also softswitch), tofino, tofino2
    grpc_addr = "127.0.0.1:9559"
    device_id = 1
    election_id = 1
    mac = "02:00:00:00:01:00"
    ip = "10.0.0.254"
    ports = [1, 2, 3, 4]
    state_file = "p4reduce-jobs.json"     # relative to this file; default: see below

    [[switch.hosts]]                       # optional L2 entries for ordinary traffic
    mac = "02:00:00:00:00:01"
    port = 1

    [[jobs]]                               # optional static jobs
    job = 7
    slots = 16
    encoding = "lanes"                     # optional; default: the target's (packed on bmv2)
    int32_halves = true                    # optional; int32 as 16-bit halves, overflow
                                           # checked by the workers (always on Tofino)
    block_values = 2048                    # optional; values per block (DATA packet), one
                                           # of the target's sizes (default 64, the only
                                           # size on Tofino)
    round_mode = "every_rank"              # optional; "silent" or "every_rank" (default:
                                           # the target's first; every_rank only on Tofino)
    window = 16                            # optional; the most slots a rank keeps
                                           # outstanding, 1..slots (default: 16 on bmv2,
                                           # every slot on Tofino)
    workers = [
      { rank = 0, port = 1, mac = "02:00:00:00:00:01", ip = "10.0.0.1" },
      { rank = 1, port = 2, mac = "02:00:00:00:00:02", ip = "10.0.0.2", udp_port = 20529 },
    ]

A Tofino switch (`target = "tofino"` or `"tofino2"`, p4reduce/target.py) adds:

    [switch]
    target = "tofino"
    ports = [1, 2, 3, 4]                   # the operator's port numbers, as everywhere
    cpu_port = 192                         # optional: the CPU (PCIe) dev port, never used
    device_config = "pipeline_config.pb.bin"   # what the P4Runtime server loads
    p4info = "p4reduce.p4info.txtpb"       # optional; default p4src/build/tofino/
    [switch.port_map]                      # optional: configured port -> dev port
    1 = 128                                # (without it the ports are dev ports)
    2 = 136

Every configured port is then mapped, no two to the same dev port, none to the CPU port or
the TNA program's harvest port; jobs default to (and must use) the `lanes` encoding, and
every rank of a job must be in the pipe of the harvest port (pipe = dev port >> 7: pipe 0,
dev ports 0..127, on both chips today; p4reduce/target.py check_pipes).

The state file is where the controller keeps its jobs between runs (and between CLI
calls); it is the single source of truth for jobs, re-read before every change and every
reconcile. Without `state_file`, a configuration loaded from a file keeps its state beside
that file, in `<config stem>.state.json` (`switch.toml` -> `switch.state.json`), so no CLI
call forgets a job; a configuration parsed from a dict without a file (tests, the demo)
must name one or keeps jobs in memory only.

Addresses are validated strictly (p4reduce/addresses.py): canonical spelling, and
worker, host and switch addresses must be unicast (no broadcast, multicast, zero, loopback).

A fabric of several switches (docs/fabric.md; p4reduce/fabric.py checks its shape) names
`[[switches]]` instead of `[switch]`:

    [[switches]]                           # a [switch] table (no hosts) with:
    name = "leaf1"
    role = "leaf"                          # leaf or spine (single: a one-switch fabric)
    ...                                    # state_file default: <stem>.<name>.state.json

    [[links]]
    a = "leaf1:5"                          # switch:port, joining a leaf to the spine
    b = "spine:1"

    [[hosts]]                              # the ranks' hosts, each on a leaf's port
    switch = "leaf1"
    port = 1
    mac = "02:00:00:00:00:01"
    ip = "10.0.0.1"

    [[jobs]]                               # as above; each worker also names its switch
    workers = [{ rank = 0, switch = "leaf1", port = 1, mac = "...", ip = "..." }]

Every switch's L2 entries come from the fabric (every host and switch out of the port
towards it); `Config.switch` is the spine, where jobs are created and aggregate.
"""

from __future__ import annotations

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from p4reduce import wire
from p4reduce.addresses import AddressError, WorkerAddress, unicast_ipv4, unicast_mac
from p4reduce.fabric import (
    ROLES,
    SINGLE,
    Endpoint,
    Fabric,
    FabricError,
    FabricSwitch,
    Host,
    Link,
    fabric,
    place_job,
)
from p4reduce.job import (
    MAX_JOB_ID,
    MAX_SLOT_COUNT,
    JobError,
    resolve_block_values,
    resolve_round_mode,
    resolve_window,
    resolve_encoding,
    resolve_halves,
)
from p4reduce.state import DEFAULT_SWITCH_IP, DEFAULT_SWITCH_MAC, default_state_file
from p4reduce.target import TARGETS, PortMap, Target

from .jobs import check_job_pipes, validate_workers


class ConfigError(ValueError):
    """A configuration file problem: `path` is the field, the message says what is wrong."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


@dataclass
class HostEntry:
    mac: str
    port: int


@dataclass
class StaticJob:
    job: int
    slots: int
    workers: list[WorkerAddress]
    encoding: str | None = None  # None: the target's default
    int32_halves: bool | None = None  # None: the target's choice (p4reduce.job.resolve_halves)
    block_values: int | None = None  # None: the target's default (resolve_block_values)
    round_mode: str | None = None  # None: the target's default (resolve_round_mode)
    window: int | None = None  # None: the target's default (resolve_window)


@dataclass
class SwitchConfig:
    name: str = "switch"  # a fabric's switches are named ([[switches]])
    role: str = SINGLE  # p4reduce.fabric: single, leaf or spine
    grpc_addr: str = "127.0.0.1:9559"
    device_id: int = 1
    election_id: int = 1
    mac: str = DEFAULT_SWITCH_MAC
    ip: str = DEFAULT_SWITCH_IP
    ports: list[int] = field(default_factory=list)
    hosts: list[HostEntry] = field(default_factory=list)
    state_file: Path | None = None
    flood_group: int = 1
    target: str = "bmv2"  # p4reduce/target.py
    port_map: dict[int, int] = field(default_factory=dict)  # configured -> dev port
    cpu_port: int | None = None
    p4info: Path | None = None  # None: the target's committed P4Info
    device_config: Path | None = None  # None: the target's (bmv2: p4src/build/)

    @property
    def target_info(self) -> Target:
        return TARGETS[self.target]


@dataclass
class Config:
    """`switch` is where jobs are created and aggregated (a fabric's spine); `switches`
    every switch the controller programs (just `switch` in a one-switch file). A fabric's
    static jobs name each rank's port on its leaf (the fabric controller places them)."""

    switch: SwitchConfig
    jobs: list[StaticJob] = field(default_factory=list)
    switches: list[SwitchConfig] = field(default_factory=list)
    fabric: Fabric | None = None

    def __post_init__(self) -> None:
        if not self.switches:
            self.switches = [self.switch]

    @property
    def is_fabric(self) -> bool:
        """More than one switch: the fabric controller programs them."""
        return len(self.switches) > 1


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SWITCH_KEYS = {
    "grpc_addr",
    "device_id",
    "election_id",
    "mac",
    "ip",
    "ports",
    "hosts",
    "state_file",
    "flood_group",
    "target",
    "port_map",
    "cpu_port",
    "p4info",
    "device_config",
}
_WORKER_KEYS = {"rank", "port", "mac", "ip", "udp_port"}


def _check_keys(path: str, table: Any, allowed: set[str], required: set[str] = frozenset()):
    if not isinstance(table, dict):
        raise ConfigError(path, f"expected a table, got {type(table).__name__}")
    unknown = sorted(set(table) - allowed, key=str)
    if unknown:
        key = unknown[0]
        if not (isinstance(key, str) and _BARE_KEY.fullmatch(key)):
            key = json.dumps(str(key))  # shown quoted: no raw newline in the message
        raise ConfigError(
            f"{path}.{key}" if path else key, f"unknown key (allowed: {', '.join(sorted(allowed))})"
        )
    for key in sorted(required - set(table)):
        raise ConfigError(f"{path}.{key}" if path else key, "missing")


def _int(path: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(path, f"expected an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ConfigError(path, f"{value} is out of range {lo}..{hi}")
    return value


def _mac(path: str, value: Any) -> str:
    try:
        return unicast_mac(value)
    except AddressError as exc:
        raise ConfigError(path, str(exc)) from None


def _ip(path: str, value: Any) -> str:
    try:
        return unicast_ipv4(value)
    except AddressError as exc:
        raise ConfigError(path, str(exc)) from None


def _list(path: str, value: Any) -> list:
    if not isinstance(value, list):
        raise ConfigError(path, f"expected an array, got {type(value).__name__}")
    return value


def _path(path: str, value: Any, base_dir: Path) -> Path:
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise ConfigError(path, f"expected a file path, got {value!r}")
    return (base_dir / value).resolve()


def _target_ports(sw: dict, cfg: SwitchConfig, ports: set[int], where: str = "switch") -> None:
    """switch.target, port_map and cpu_port: what a Tofino switch needs (target.py)."""
    if "target" in sw:
        if sw["target"] not in TARGETS:
            raise ConfigError(
                f"{where}.target", f"{sw['target']!r} is not one of {', '.join(TARGETS)}"
            )
        cfg.target = sw["target"]
    target = cfg.target_info
    for key in ("port_map", "cpu_port"):
        if key in sw and not target.is_tofino:
            raise ConfigError(
                f"{where}.{key}",
                f"only for a Tofino target (target = "
                f'"tofino" or "tofino2"); {target.name} '
                f"ports are the data plane's own numbers",
            )
    if "cpu_port" in sw:
        cfg.cpu_port = _int(f"{where}.cpu_port", sw["cpu_port"], 0, 511)
    raw = sw.get("port_map", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}.port_map", "expected a table of port = dev port")
    dev_of: dict[int, int] = {}
    for key, dev in raw.items():
        path = f"{where}.port_map.{key}"
        try:
            port = int(key, 10)
        except (TypeError, ValueError):
            raise ConfigError(path, "expected a port number as the key") from None
        if port not in ports:
            raise ConfigError(path, f"port {port} is not in {where}.ports")
        dev_of[port] = _int(path, dev, 0, 511)
    if dev_of:
        unmapped = sorted(ports - set(dev_of))
        if unmapped:
            raise ConfigError(
                f"{where}.port_map", f"port(s) {unmapped} of {where}.ports have no dev port"
            )
        seen: dict[int, int] = {}
        for port in sorted(dev_of):
            if dev_of[port] in seen:
                raise ConfigError(
                    f"{where}.port_map.{port}",
                    f"dev port {dev_of[port]} is also port {seen[dev_of[port]]}'s",
                )
            seen[dev_of[port]] = port
    cfg.port_map = dev_of
    reserved = dict(target.reserved_ports)
    if cfg.cpu_port is not None:
        reserved[cfg.cpu_port] = f"the CPU port ({where}.cpu_port)"
    for port in sorted(ports):
        dev = dev_of.get(port, port)
        if dev in reserved:
            field_path = f"{where}.port_map.{port}" if dev_of else f"{where}.ports"
            raise ConfigError(
                field_path,
                f"port {port} is dev port {dev}, {reserved[dev]}: "
                f"not a worker's or host's port on {target.name}",
            )


def parse(data: dict, base_dir: Path = Path("."), default_state: Path | None = None) -> Config:
    """Validate a configuration; `default_state` is the state file when none is named.

    One step per section, always in this order (switch, its ports and target, files,
    hosts, state file, then the jobs), so a file with several errors reports the same
    one every time. A file with [[switches]] instead of [switch] is a fabric
    (`_parse_fabric`).
    """
    if isinstance(data, dict) and "switches" in data:
        return _parse_fabric(data, base_dir, default_state)
    _check_keys("", data, {"switch", "jobs"}, {"switch"})
    sw = data["switch"]
    _check_keys("switch", sw, _SWITCH_KEYS, {"ports"})
    cfg, ports = _switch(sw, "switch", base_dir, default_state)
    cfg.hosts = _hosts(sw.get("hosts", []), ports)
    return Config(cfg, _jobs(data.get("jobs", []), cfg, ports))


def _switch(
    sw: dict, where: str, base_dir: Path, default_state: Path | None
) -> tuple[SwitchConfig, set[int]]:
    """One switch's table (checked keys) -> its SwitchConfig (without hosts) and ports."""
    cfg = SwitchConfig()
    _switch_scalars(sw, cfg, where)
    ports = _ports(sw["ports"], where)
    cfg.ports = list(sw["ports"])
    _target_ports(sw, cfg, ports, where)
    for key in ("p4info", "device_config"):
        if key in sw:
            setattr(cfg, key, _path(f"{where}.{key}", sw[key], base_dir))
    cfg.state_file = _state_file(sw, base_dir, default_state, where)
    return cfg, ports


def _switch_scalars(sw: dict, cfg: SwitchConfig, where: str = "switch") -> None:
    """switch.grpc_addr, device_id, election_id, flood_group, mac and ip (each optional)."""
    if "grpc_addr" in sw:
        if not isinstance(sw["grpc_addr"], str) or ":" not in sw["grpc_addr"]:
            raise ConfigError(
                f"{where}.grpc_addr", f"expected 'host:port', got {sw['grpc_addr']!r}"
            )
        cfg.grpc_addr = sw["grpc_addr"]
    if "device_id" in sw:
        cfg.device_id = _int(f"{where}.device_id", sw["device_id"], 0, 2**63)
    if "election_id" in sw:
        cfg.election_id = _int(f"{where}.election_id", sw["election_id"], 1, 2**63)
    if "flood_group" in sw:
        cfg.flood_group = _int(f"{where}.flood_group", sw["flood_group"], 1, 15)
    cfg.mac = _mac(f"{where}.mac", sw.get("mac", cfg.mac))
    cfg.ip = _ip(f"{where}.ip", sw.get("ip", cfg.ip))


def _ports(raw: Any, where: str = "switch") -> set[int]:
    """switch.ports: a non-empty list of distinct port numbers; the set every other port
    in the file must be one of."""
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}.ports", "expected a non-empty list of port numbers")
    seen: set[int] = set()
    for i, port in enumerate(raw):
        port = _int(f"{where}.ports[{i}]", port, 0, 510)
        if port in seen:
            raise ConfigError(f"{where}.ports[{i}]", f"duplicate port {port}")
        seen.add(port)
    return seen


def _member_port(path: str, value: Any, ports: set[int], where: str = "switch") -> int:
    """A host's or worker's port: a port number that is one of switch.ports."""
    port = _int(path, value, 0, 510)
    if port not in ports:
        raise ConfigError(path, f"port {port} is not in {where}.ports")
    return port


def _hosts(raw: Any, ports: set[int]) -> list[HostEntry]:
    """[[switch.hosts]]: the L2 entries for ordinary traffic."""
    hosts = []
    for i, host in enumerate(_list("switch.hosts", raw)):
        path = f"switch.hosts[{i}]"
        _check_keys(path, host, {"mac", "port"}, {"mac", "port"})
        port = _member_port(f"{path}.port", host["port"], ports)
        hosts.append(HostEntry(_mac(f"{path}.mac", host["mac"]), port))
    return hosts


def _state_file(
    sw: dict, base_dir: Path, default_state: Path | None, where: str = "switch"
) -> Path | None:
    """switch.state_file, relative to the file's directory; not a directory."""
    if "state_file" not in sw:
        return default_state
    state_file = _path(f"{where}.state_file", sw["state_file"], base_dir)
    if state_file.is_dir():
        raise ConfigError(f"{where}.state_file", f"{state_file} is a directory")
    return state_file


def _jobs(raw: Any, cfg: SwitchConfig, ports: set[int]) -> list[StaticJob]:
    """[[jobs]]: the static jobs, job ids distinct."""
    if not isinstance(raw, list):
        raise ConfigError("jobs", "expected an array of tables ([[jobs]])")
    jobs: list[StaticJob] = []
    job_ids: set[int] = set()
    for j, job in enumerate(raw):
        jobs.append(_job(f"jobs[{j}]", job, cfg, ports, job_ids))
        job_ids.add(jobs[-1].job)
    return jobs


def _target_takes(
    path: str,
    job: dict,
    key: str,
    resolve: Callable[[Target, int, Any], Any],
    cfg: SwitchConfig,
    job_id: int,
) -> Any:
    """The job table's `key` as written (None when absent: the target's default, chosen
    when the job is created), refused here with the field's path when the target cannot
    take it (p4reduce.job's resolve_* rule for that field)."""
    value = job.get(key)
    if value is not None:
        try:
            resolve(cfg.target_info, job_id, value)
        except JobError as exc:
            raise ConfigError(f"{path}.{key}", str(exc)) from None
    return value


def _job(
    path: str,
    job: Any,
    cfg: SwitchConfig,
    ports: set[int],
    job_ids: set[int],
    fabric_ranks: bool = False,
) -> StaticJob:
    """One [[jobs]] table: id, encoding, halves and block size (as the target allows),
    slots, workers."""
    _check_keys(
        path,
        job,
        {
            "job",
            "slots",
            "workers",
            "encoding",
            "int32_halves",
            "block_values",
            "round_mode",
            "window",
        },
        {"job", "slots", "workers"},
    )
    job_id = _int(f"{path}.job", job["job"], 0, MAX_JOB_ID)
    encoding, halves = _job_encoding(path, job, cfg.target_info, job_id)
    block_values = _target_takes(path, job, "block_values", resolve_block_values, cfg, job_id)
    round_mode = _target_takes(path, job, "round_mode", resolve_round_mode, cfg, job_id)
    if job_id in job_ids:
        raise ConfigError(f"{path}.job", f"duplicate job id {job_id}")
    slots = _int(f"{path}.slots", job["slots"], 1, MAX_SLOT_COUNT)
    window = _target_takes(
        path, job, "window", lambda t, j, w: resolve_window(t, j, slots, w), cfg, job_id
    )
    if not isinstance(job["workers"], list):
        raise ConfigError(f"{path}.workers", "expected a list of worker tables")
    workers = [
        _worker(f"{path}.workers[{w}]", worker, ports) for w, worker in enumerate(job["workers"])
    ]
    if not fabric_ranks:  # a fabric's ranks are on leaves: the fabric places them
        try:
            validate_workers(job_id, workers, ports)
            check_job_pipes(cfg.target_info, PortMap(cfg.port_map), job_id, workers)
        except JobError as exc:
            raise ConfigError(f"{path}.workers", str(exc)) from None
    return StaticJob(job_id, slots, workers, encoding, halves, block_values, round_mode, window)


def _job_encoding(
    path: str, job: dict, target: Target, job_id: int
) -> tuple[str | None, bool | None]:
    """A job's optional `encoding` and `int32_halves`, each checked against the target
    (None: the target's default, resolved when the job is installed)."""
    encoding = job.get("encoding")
    if encoding is not None:
        try:
            resolve_encoding(target, job_id, encoding)
        except JobError as exc:
            raise ConfigError(f"{path}.encoding", str(exc)) from None
    halves = job.get("int32_halves")
    if halves is not None:
        if not isinstance(halves, bool):
            raise ConfigError(f"{path}.int32_halves", f"expected true or false, got {halves!r}")
        try:
            resolve_halves(target, job_id, resolve_encoding(target, job_id, encoding), halves)
        except JobError as exc:
            raise ConfigError(f"{path}.int32_halves", str(exc)) from None
    return encoding, halves


def _worker(path: str, worker: Any, ports: set[int]) -> WorkerAddress:
    """One worker of a job: rank, port (one of switch.ports), addresses, UDP port."""
    _check_keys(path, worker, _WORKER_KEYS, {"rank", "port", "mac", "ip"})
    port = _member_port(f"{path}.port", worker["port"], ports)
    udp = _int(
        f"{path}.udp_port",
        worker.get("udp_port", wire.UDP_PORT_BASE),
        wire.UDP_PORT_BASE,
        wire.UDP_PORT_BASE + 15,
    )
    return WorkerAddress(
        rank=_int(f"{path}.rank", worker["rank"], 0, 255),
        port=port,
        mac=_mac(f"{path}.mac", worker["mac"]),
        ip=_ip(f"{path}.ip", worker["ip"]),
        udp_port=udp,
    )


# ---- a fabric: [[switches]], [[links]], [[hosts]] -----------------------------------------

_FABRIC_SWITCH_KEYS = (_SWITCH_KEYS - {"hosts"}) | {"name", "role"}
_FABRIC_HOST_KEYS = {"switch", "port", "mac", "ip"}


def _parse_fabric(data: dict, base_dir: Path, default_state: Path | None) -> Config:
    """A configuration of several switches: each [[switches]] table is a [switch] table
    with a name and a role; [[links]] join `a` and `b` ("switch:port"); [[hosts]] are the
    machines behind the leaves; [[jobs]] name each rank's switch and port. The fabric's
    checks (p4reduce.fabric) name the same paths as the file."""
    _check_keys("", data, {"switches", "links", "hosts", "jobs"}, {"switches"})
    raw = _list("switches", data["switches"])
    switches = [
        _fabric_switch(f"switches[{i}]", sw, base_dir, default_state) for i, sw in enumerate(raw)
    ]
    links = [
        _link(f"links[{i}]", link) for i, link in enumerate(_list("links", data.get("links", [])))
    ]
    hosts = [
        _fabric_host(f"hosts[{i}]", h) for i, h in enumerate(_list("hosts", data.get("hosts", [])))
    ]
    try:
        fab = fabric([_fabric_switch_model(c) for c in switches], links, hosts)
    except FabricError as exc:
        raise ConfigError(exc.path, str(exc).split(": ", 1)[1]) from None
    _check_state_files(switches)
    for cfg in switches:
        cfg.hosts = [HostEntry(mac, port) for mac, port in fab.forwarding(cfg.name)]
    root = next(c for c in switches if c.name == fab.root.name)
    jobs = _fabric_jobs(_list("jobs", data.get("jobs", [])), fab, root)
    return Config(root, jobs, switches, fab)


def _fabric_switch(where: str, sw: Any, base_dir: Path, default_state: Path | None) -> SwitchConfig:
    _check_keys(where, sw, _FABRIC_SWITCH_KEYS, {"name", "role", "ports"})
    name = sw["name"]
    if not isinstance(name, str) or not _BARE_KEY.fullmatch(name):
        raise ConfigError(
            f"{where}.name", f"expected a name of letters, digits, - and _, got {name!r}"
        )
    if sw["role"] not in ROLES:
        raise ConfigError(f"{where}.role", f"{sw['role']!r} is not one of {', '.join(ROLES)}")
    # each switch keeps its own state (its pipeline's cookie; the spine's also the jobs)
    # beside the file's default: what p4reduce.state.default_state_file(file, name) names
    own_state = (
        default_state.with_name(
            default_state.name.removesuffix(".state.json") + f".{name}.state.json"
        )
        if default_state is not None
        else None
    )
    cfg, _ = _switch(sw, where, base_dir, own_state)
    cfg.name, cfg.role = name, sw["role"]
    return cfg


def _fabric_switch_model(cfg: SwitchConfig) -> FabricSwitch:
    return FabricSwitch(
        cfg.name, cfg.role, tuple(cfg.ports), cfg.mac, cfg.ip, cfg.grpc_addr, cfg.device_id
    )


def _endpoint(path: str, value: Any) -> Endpoint:
    """A link's end, written "switch:port"."""
    name, sep, port = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    if not sep or not name or not port.isascii() or not port.isdigit():
        raise ConfigError(path, f'expected "switch:port", got {value!r}')
    return Endpoint(name, _int(path, int(port), 0, 510))


def _link(path: str, link: Any) -> Link:
    _check_keys(path, link, {"a", "b"}, {"a", "b"})
    return Link(_endpoint(f"{path}.a", link["a"]), _endpoint(f"{path}.b", link["b"]))


def _fabric_host(path: str, host: Any) -> Host:
    _check_keys(path, host, _FABRIC_HOST_KEYS, _FABRIC_HOST_KEYS)
    if not isinstance(host["switch"], str):
        raise ConfigError(f"{path}.switch", f"expected a switch's name, got {host['switch']!r}")
    port = _int(f"{path}.port", host["port"], 0, 510)
    return Host(
        _mac(f"{path}.mac", host["mac"]),
        _ip(f"{path}.ip", host["ip"]),
        Endpoint(host["switch"], port),
    )


def _check_state_files(switches: list[SwitchConfig]) -> None:
    """Two switches never share a state file (each records its own pipeline push)."""
    seen: dict[Path, str] = {}
    for i, cfg in enumerate(switches):
        if cfg.state_file is not None and cfg.state_file in seen:
            raise ConfigError(
                f"switches[{i}].state_file", f"{cfg.state_file} is also {seen[cfg.state_file]}'s"
            )
        if cfg.state_file is not None:
            seen[cfg.state_file] = cfg.name


def _fabric_jobs(raw: list, fab: Fabric, root: SwitchConfig) -> list[StaticJob]:
    """A fabric's [[jobs]]: a one-switch job's keys, each worker also naming its `switch`
    (its `port` is that switch's: a host of [[hosts]]); the placement is checked now."""
    jobs: list[StaticJob] = []
    host_ports = {h.at.port for h in fab.hosts}
    for j, job in enumerate(raw):
        path = f"jobs[{j}]"
        leaves = _worker_switches(path, job)
        plain = {
            **job,
            "workers": [{k: v for k, v in w.items() if k != "switch"} for w in job["workers"]],
        }
        static = _job(path, plain, root, host_ports, {s.job for s in jobs}, fabric_ranks=True)
        for w, (worker, leaf) in enumerate(zip(static.workers, leaves)):
            host = fab.host_by_mac(worker.mac)
            if host is None or host.at != Endpoint(leaf, worker.port) or host.ip != worker.ip:
                raise ConfigError(
                    f"{path}.workers[{w}]",
                    f"{worker.mac} {worker.ip} is not a host on {leaf}:{worker.port} ([[hosts]])",
                )
        try:
            place_job(fab, [(w.rank, w.mac, w.port) for w in static.workers])
        except FabricError as exc:
            raise ConfigError(f"{path}.workers", str(exc)) from None
        jobs.append(static)
    return jobs


def _worker_switches(path: str, job: Any) -> list[str]:
    """Each worker's `switch` of a fabric's job (the rest of the job is checked as one
    switch's job is)."""
    if not isinstance(job, dict):
        raise ConfigError(path, f"expected a table, got {type(job).__name__}")
    if "workers" not in job:
        raise ConfigError(f"{path}.workers", "missing")
    if not isinstance(job["workers"], list):
        raise ConfigError(f"{path}.workers", "expected a list of worker tables")
    leaves = []
    for w, worker in enumerate(job["workers"]):
        where = f"{path}.workers[{w}]"
        _check_keys(
            where, worker, _WORKER_KEYS | {"switch"}, {"rank", "switch", "port", "mac", "ip"}
        )
        if not isinstance(worker["switch"], str):
            raise ConfigError(
                f"{where}.switch", f"expected a switch's name, got {worker['switch']!r}"
            )
        leaves.append(worker["switch"])
    return leaves


def load(path: str | Path) -> Config:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"not valid TOML: {exc}") from None
    return parse(data, path.parent, default_state_file(path))
