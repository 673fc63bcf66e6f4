"""The controller's state file: its jobs and epoch counter, as JSON, and where it is.

Why on the ground floor: the controller writes it (controlplane/jobs.py's JobTable adds the
locking and the allocation of slots, job indices and epochs), and a rank that knows only
its job id reads its job from it (hostlib/jobref.py) without loading the controller. Both
use the format and the consistency checks written here.

    {"last_epoch": 3, "pipeline_cookie": 12, "jobs": [<Job.to_json()>, ...]}

The file is written atomically (a temporary file renamed over it), so a reader sees the
old or the new table, never half of one.
"""

from __future__ import annotations

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import wire
from .addresses import Address, AddressError, unicast_ipv4, unicast_mac
from .job import MAX_JOB_ID, Job, JobError, encoding_named

# the switch's own addresses when the configuration names none (controlplane/config.py)
DEFAULT_SWITCH_MAC = "02:00:00:00:01:00"
DEFAULT_SWITCH_IP = "10.0.0.254"


@dataclass
class State:
    """What the state file holds: the jobs by id, the last epoch handed out, and the
    P4Runtime cookie of the pipeline push the epochs date from (None: none recorded)."""

    jobs: dict[int, Job] = field(default_factory=dict)
    last_epoch: int = 0
    pipeline_cookie: int | None = None


def read_state(path: Path) -> State:
    """The state file's content (an empty State when there is no file); JobError naming
    the file when it cannot be read or its jobs cannot all be true."""
    if not path.exists():
        return State()
    try:
        data = json.loads(path.read_text())
        last_epoch = int(data["last_epoch"])
        cookie = data.get("pipeline_cookie")
        jobs = [Job.from_json(j) for j in data["jobs"]]
        check_jobs(jobs, last_epoch)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # nothing is written while the file is unreadable: every change reloads it first,
        # so this error stops it before the switch or the file is touched
        raise JobError(
            f"state file {path} is unreadable ({type(exc).__name__}: "
            f"{exc}); nothing was changed: repair it, or move it away "
            "to start with no jobs"
        ) from None
    return State({j.job: j for j in jobs}, last_epoch, None if cookie is None else int(cookie))


def write_state(path: Path, state: State) -> None:
    """Write the state file atomically; JobError saying what to do when it cannot be."""
    data = {
        "last_epoch": state.last_epoch,
        "pipeline_cookie": state.pipeline_cookie,
        "jobs": [j.to_json() for j in sorted(state.jobs.values(), key=lambda j: j.job)],
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".jobs-")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise JobError(
            f"cannot write state file {path} ({exc.strerror or exc}); "
            "set switch.state_file to a writable path"
        ) from None


def check_jobs(jobs: list[Job], last_epoch: int) -> None:
    """ValueError for a state file's jobs that cannot all be true: loading them would
    silently drop one (a duplicate id) or let two share slots or counters."""
    if not 0 <= last_epoch <= wire.MAX_EPOCH:
        raise ValueError(f"last_epoch {last_epoch} is not 0..{wire.MAX_EPOCH}")
    seen: dict[str, set[int]] = {"job id": set(), "job index": set()}
    for j in jobs:
        for what, value in (("job id", j.job), ("job index", j.job_index)):
            if value in seen[what]:
                raise ValueError(f"{what} {value} appears twice")
            seen[what].add(value)
        _check_job(j)
    spans = sorted((j.slot_base, j.slot_base + j.slot_count, j.job) for j in jobs)
    for (_, hi, a), (lo, _, b) in zip(spans, spans[1:]):
        if lo < hi:
            raise ValueError(f"jobs {a} and {b} have overlapping slots")


def _check_job(j: Job) -> None:
    """ValueError for one recorded job whose numbers, encoding or ranks cannot be."""
    numbers = {
        "job": j.job,
        "job_index": j.job_index,
        "slot_base": j.slot_base,
        "slot_count": j.slot_count,
        "epoch": j.epoch,
    }
    for name, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"job {j.job}: {name} {value!r} is not an integer")
    if not (
        0 <= j.job <= MAX_JOB_ID
        and j.job_index >= 0
        and j.slot_base >= 0
        and j.slot_count >= 1
        and 1 <= j.epoch <= wire.MAX_EPOCH
    ):
        raise ValueError(f"job {j.job}: a number is out of range {numbers}")
    try:
        encoding_named(j.encoding)
    except JobError as exc:
        raise ValueError(f"job {j.job}: {exc}") from None
    if not j.workers:
        raise ValueError(f"job {j.job}: no workers")


def default_state_file(config_path: Path, switch: str | None = None) -> Path:
    """Where a configuration file without `switch.state_file` keeps its jobs; in a fabric
    file, where switch `switch` keeps its state (`<stem>.<switch>.state.json`)."""
    middle = f".{switch}" if switch is not None else ""
    return config_path.resolve().with_name(f"{config_path.stem}{middle}.state.json")


def _spine(switches: object) -> dict:
    """The [[switches]] table of a fabric file's spine (ValueError when there is none)."""
    spines = [
        sw
        for sw in (switches if isinstance(switches, list) else [])
        if isinstance(sw, dict) and sw.get("role") == "spine" and isinstance(sw.get("name"), str)
    ]
    if len(spines) != 1:
        raise ValueError('a fabric file names one spine ([[switches]] with role = "spine")')
    return spines[0]


def locate(config_path: Path) -> tuple[Path, Address]:
    """The state file a controller configuration file names (or its default) and the
    switch's address there: what a rank needs to read its job and build its descriptor.
    Reads only `switch.state_file`, `switch.mac` and `switch.ip` (the controller checks
    the whole file when it loads it); ValueError saying which of them is wrong. In a fabric
    file the same fields of its spine's [[switches]] table, where its jobs aggregate."""
    try:
        data = tomllib.loads(config_path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML: {exc}") from None
    sw = data.get("switch")
    name = None
    if "switches" in data:  # a fabric: its jobs are the spine's (docs/fabric.md)
        sw = _spine(data["switches"])
        name = sw.get("name")
    if not isinstance(sw, dict):
        raise ValueError("no [switch] table")
    state_file = sw.get("state_file")
    if state_file is None:
        path = default_state_file(config_path, name)
    elif isinstance(state_file, str) and state_file.strip():
        path = (config_path.parent / state_file).resolve()
    else:
        raise ValueError(f"switch.state_file: expected a file path, got {state_file!r}")
    try:
        mac = unicast_mac(sw.get("mac", DEFAULT_SWITCH_MAC))
        ip = unicast_ipv4(sw.get("ip", DEFAULT_SWITCH_IP))
    except AddressError as exc:
        raise ValueError(f"switch address: {exc}") from None
    return path, Address(mac, ip)
