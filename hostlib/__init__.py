"""p4reduce hostlib: the worker side of in-network sparse allreduce.

    with hostlib.Worker("job.json") as w:
        grads = w.allreduce(grads)           # or w.allreduce_(grads) in place

See docs/hostlib.md; docs/protocol.md is the specification.

The names below are imported on first use (PEP 562): `import hostlib` must not load the
Worker, the engine and numpy. The job descriptor (JobConfig, load_descriptor) is
`p4reduce.job`'s: the ground floor that hostlib and the controller share.
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
    "IncompleteSum",
]

_HOME = {
    "Worker": "worker",
    "WorkerStats": "worker",
    "WorkerBroken": "worker",
    "RankSilent": "liveness",
    "FingerprintMismatch": "engine",
    "SwitchStateLost": "engine",
    "IncompleteSum": "silent",
}

if TYPE_CHECKING:
    from .engine import FingerprintMismatch, SwitchStateLost
    from .liveness import RankSilent
    from .silent import IncompleteSum
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
