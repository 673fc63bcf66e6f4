"""How a rank finds its job: from a descriptor, or from the controller's job id and its rank.

Launchers such as torchrun give a process its rank and world size, nothing else; the
p4reduce job a rank belongs to must come from somewhere the operator controls. In order:

1. `descriptor`: the rank's descriptor (a dict, JSON text or a file path; "{rank}" in a
   path is replaced by the rank, so one setting serves every rank);
2. `job` and `descriptor_dir`: the file `job<J>-rank<R>.json` (descriptor_name) that
   `p4reduce-ctl job create --descriptors DIR` wrote;
3. `job` and `controller_config`: the controller's TOML file; the job is read from the
   controller's state file (`switch.state_file`) and the descriptor built the way the
   controller builds it. The switch is not contacted.

Every field can come from an environment variable (`P4REDUCE_DESCRIPTOR`, `P4REDUCE_JOB`,
...; see ENV); fields set explicitly win. Where the Worker's socket lives (`netns`,
`interface`) is chosen here too. No torch here: the torch backend and plain scripts share it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

from p4reduce.job import DescriptorError, JobError, descriptor_name, load_descriptor
from p4reduce.state import locate, locate_leaves, read_state

ENV = {
    "descriptor": "P4REDUCE_DESCRIPTOR",
    "job": "P4REDUCE_JOB",
    "descriptor_dir": "P4REDUCE_DESCRIPTOR_DIR",
    "controller_config": "P4REDUCE_CONTROLLER_CONFIG",
    "netns": "P4REDUCE_NETNS",
    "interface": "P4REDUCE_INTERFACE",
    "transport": "P4REDUCE_TRANSPORT",
    "deadline": "P4REDUCE_DEADLINE",
    "window": "P4REDUCE_WINDOW",
}


class JobLookupError(LookupError):
    """A rank cannot find its job descriptor; the message says what to set."""


@dataclass(frozen=True)
class P4ReduceOptions:
    """Where rank R's job is and how its Worker is opened (all optional; see module doc).

    `netns`: network namespace the Worker's socket is opened in (an `ip netns` name or a
    path such as /proc/PID/ns/net, e.g. a Mininet host); the rest of the process stays
    where it is. `deadline`: seconds an allreduce may take (None: the caller's default,
    e.g. the process group's timeout). `transport`: the Worker's ("auto", "ring", "mmsg",
    "plain"; tests pass a transport object). `window`: the most slots the Worker keeps
    outstanding (None: the descriptor's, which the controller sets by the job's target:
    FAIR_SLOTS on bmv2, which keeps a job's share of a first-in first-out switch beside
    others, every slot on Tofino; a descriptor without one: FAIR_SLOTS); a job alone on
    its switch, or on one that serves its ports round robin (softswitch), may open every
    slot it has: a call of small blocks is bound by the round trip with 16 slots in
    flight, not by the switch. "{rank}"
    in descriptor, descriptor_dir, netns and interface is replaced by the rank.
    """

    descriptor: Any = None
    job: int | None = None
    descriptor_dir: str | os.PathLike[str] | None = None
    controller_config: str | os.PathLike[str] | None = None
    netns: str | None = None
    interface: str | None = None
    transport: Any = None
    deadline: float | None = None
    window: int | None = None

    @classmethod
    def coerce(cls, value: Any) -> "P4ReduceOptions":
        """None, a P4ReduceOptions or a mapping of its fields (unknown keys refused)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise TypeError(
                    f"p4reduce options: unknown key(s) {unknown}; known: {sorted(known)}"
                )
            return cls(**value)
        raise TypeError(
            f"p4reduce options must be a P4ReduceOptions or a dict, not {type(value).__name__}"
        )

    def with_env(self, environ: Mapping[str, str] | None = None) -> "P4ReduceOptions":
        """Fields left None are taken from the environment variables in ENV."""
        env = os.environ if environ is None else environ
        updates: dict[str, Any] = {}
        for name, var in ENV.items():
            if getattr(self, name) is not None or not env.get(var):
                continue
            text = env[var]
            if name == "job":
                try:
                    updates[name] = int(text, 0)
                except ValueError:
                    raise JobLookupError(f"{var}={text!r} is not a job id (an integer)") from None
            elif name == "deadline":
                try:
                    updates[name] = float(text)
                except ValueError:
                    raise JobLookupError(f"{var}={text!r} is not a number of seconds") from None
            elif name == "window":
                updates[name] = _slot_count(var, text)
            else:
                updates[name] = text
        return replace(self, **updates)


def _slot_count(var: str, text: str) -> int:
    """A window read from `var`: a whole number of slots, at least one."""
    try:
        n = int(text, 0)
    except ValueError:
        n = 0
    if n < 1:
        raise JobLookupError(f"{var}={text!r} is not a number of slots (an integer >= 1)")
    return n


def _for_rank(value: Any, rank: int) -> Any:
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value).replace("{rank}", str(rank))
    return value


def find_descriptor(rank: int, options: P4ReduceOptions) -> tuple[dict[str, Any], str]:
    """Rank `rank`'s descriptor (a validated dict) and where it came from (for messages)."""
    desc = _for_rank(options.descriptor, rank)
    if desc is not None:
        where = (
            "the descriptor given"
            if not isinstance(desc, str) or desc.lstrip().startswith("{")
            else f"descriptor file {desc}"
        )
        if isinstance(desc, str) and not desc.lstrip().startswith("{") and not Path(desc).is_file():
            raise JobLookupError(
                f"rank {rank}: {where} does not exist ({ENV['descriptor']} or options.descriptor)"
            )
        return _validated(desc, where), where
    if options.job is None:
        raise JobLookupError(
            f"rank {rank} has no p4reduce job: set {ENV['descriptor']} (the rank's "
            f"descriptor file; '{{rank}}' in the path is replaced by the rank), or "
            f"{ENV['job']} together with {ENV['descriptor_dir']} (the directory "
            f"`p4reduce-ctl job create --descriptors DIR` wrote) or with "
            f"{ENV['controller_config']} (the controller's TOML file); or pass these as "
            f"pg_options=P4ReduceOptions(...)"
        )
    job = options.job
    if options.descriptor_dir is not None:
        path = Path(_for_rank(options.descriptor_dir, rank)) / descriptor_name(job, rank)
        if not path.is_file():
            raise JobLookupError(
                f"rank {rank}: no descriptor {path} for job {job} "
                f"(written by `p4reduce-ctl job create --job {job} "
                f"--descriptors {path.parent}`)"
            )
        where = f"descriptor file {path}"
        return _validated(path, where), where
    if options.controller_config is not None:
        return _from_controller(Path(options.controller_config), job, rank)
    raise JobLookupError(
        f"rank {rank}: job {job} given, but not where its descriptors are: set "
        f"{ENV['descriptor_dir']} (the directory `p4reduce-ctl job create --descriptors "
        f"DIR` wrote) or {ENV['controller_config']} (the controller's TOML file)"
    )


def _validated(desc: Any, where: str) -> dict[str, Any]:
    try:
        return load_descriptor(desc).to_dict()
    except (DescriptorError, json.JSONDecodeError, OSError) as e:
        raise JobLookupError(f"{where}: {e}") from None


def _from_controller(path: Path, job: int, rank: int) -> tuple[dict[str, Any], str]:
    """The descriptor as `p4reduce-ctl job show` would print it, from the state file
    (read through p4reduce.state: the controller is not loaded)."""
    try:
        state, switch = locate(path)
    except (ValueError, OSError) as e:
        raise JobLookupError(f"controller configuration {path}: {e}") from None
    if not state.is_file():
        raise JobLookupError(
            f"controller configuration {path}: no state file ({state}), so job {job} "
            f"cannot be looked up; pass the descriptor instead"
        )
    try:
        jobs = read_state(state).jobs
        found = jobs.get(job)
        if found is None:
            raise JobLookupError(
                f"controller state file {state} has no job {job} (jobs: {sorted(jobs)})"
            )
        desc = (
            found.descriptor(rank, switch)
            if found.job_ranks is None
            else _from_leaf(path, found.job, found.epoch, rank)
        )
    except JobError as e:
        raise JobLookupError(f"controller state file {state}: {e}") from None
    where = f"job {job} in controller state file {state}"
    return _validated(desc, where), where


def _from_leaf(path: Path, job: int, epoch: int, rank: int) -> dict[str, Any]:
    """A fabric's job in the leaf role: the rank's descriptor is its leaf's part (the
    spine's record has the leaves as its ranks; docs/fabric.md)."""
    for state, leaf in locate_leaves(path):
        part = read_state(state).jobs.get(job) if state.is_file() else None
        if part is not None and part.epoch == epoch and rank in (part.ranks_in_job or []):
            return part.descriptor(part.ranks_in_job.index(rank), leaf)  # type: ignore[union-attr]
    raise JobError(f"job {job}: no leaf's state file has rank {rank}")


def open_worker(
    rank: int, options: P4ReduceOptions, world_size: int | None = None, **worker_kwargs: Any
):
    """A Worker for rank `rank`: descriptor found as above (and checked to be rank `rank`
    of `world_size` workers before any socket is opened), socket opened in options.netns
    when given. Returns (worker, where the descriptor came from)."""
    from .worker import Worker

    desc, where = find_descriptor(rank, options)
    if desc["rank"] != rank or (world_size is not None and desc["worker_count"] != world_size):
        size = f" of {world_size}" if world_size is not None else ""
        raise JobLookupError(
            f"rank {rank}: {where} is rank {desc['rank']} of job "
            f"{desc['job']} with {desc['worker_count']} workers, but this "
            f"process is rank {rank}{size}"
        )
    kwargs = dict(worker_kwargs)
    if options.interface is not None:
        kwargs.setdefault("interface", _for_rank(options.interface, rank))
    if options.transport is not None:
        kwargs.setdefault("transport", options.transport)
    if options.deadline is not None:
        kwargs.setdefault("deadline", options.deadline)
    if options.window is not None:
        kwargs.setdefault("window", options.window)
    netns = _for_rank(options.netns, rank)
    if netns is None:
        return Worker(desc, **kwargs), where
    from .netns import in_netns

    ns_path = netns if netns.startswith("/") else f"/var/run/netns/{netns}"
    if not os.path.exists(ns_path):
        raise JobLookupError(
            f"rank {rank}: network namespace {netns} does not exist "
            f"({ENV['netns']} or options.netns)"
        )
    with in_netns(netns):
        return Worker(desc, **kwargs), where
