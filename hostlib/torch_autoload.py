"""Registers the "p4reduce" torch.distributed backend without importing it.

`pyproject.toml` names `register` in the `torch.backends` entry-point group, which
`import torch` loads (torch's mechanism for out-of-tree extensions; it is skipped when
TORCH_DEVICE_BACKEND_AUTOLOAD=0). So once p4reduce is installed,
`dist.init_process_group("p4reduce")` works with no p4reduce import in the user's code.
Registration is cheap: the backend module (and its Worker) is imported only when a
process group is created. `import hostlib.torch_backend` registers it too.

This runs inside `import torch`: it must never raise (torch would fail to import).
"""

from __future__ import annotations

import warnings
from typing import Any

BACKEND = "p4reduce"


def register() -> None:
    """Register the backend with torch.distributed (idempotent, never raises)."""
    try:
        import torch.distributed as dist

        if not dist.is_available() or BACKEND in dist.Backend.backend_list:
            return
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu", "cuda"])
    except Exception as e:  # noqa: BLE001 -- must not break `import torch`
        warnings.warn(
            f"p4reduce: torch.distributed backend not registered ({e!r}); "
            f"`import hostlib.torch_backend` registers it",
            stacklevel=2,
        )


def _create(dist_options: Any, pg_options: Any) -> Any:
    from .torch_backend import create_process_group

    return create_process_group(dist_options, pg_options)
