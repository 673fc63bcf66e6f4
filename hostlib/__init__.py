"""p4reduce hostlib: the worker side of in-network sparse allreduce.

    with hostlib.Worker("job.json") as w:
        grads = w.allreduce(grads)           # or w.allreduce_(grads) in place

See docs/hostlib.md; docs/protocol.md is the specification.

The names below are imported on first use (PEP 562): `import hostlib.wire` or
`hostlib.config` (what the controller uses) must not load the Worker, the engine and numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "Worker",
    "WorkerStats",
    "WorkerBroken",
    "RankSilent",
    "FingerprintMismatch",
    "SwitchStateLost",
    "JobConfig",
    "DescriptorError",
    "load_descriptor",
]

_HOME = {
    "Worker": "worker",
    "WorkerStats": "worker",
    "WorkerBroken": "worker",
    "RankSilent": "liveness",
    "FingerprintMismatch": "engine",
    "SwitchStateLost": "engine",
    "JobConfig": "config",
    "DescriptorError": "config",
    "load_descriptor": "config",
}

if TYPE_CHECKING:
    from .config import DescriptorError, JobConfig, load_descriptor
    from .engine import FingerprintMismatch, SwitchStateLost
    from .liveness import RankSilent
    from .worker import Worker, WorkerBroken, WorkerStats


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'hostlib' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
