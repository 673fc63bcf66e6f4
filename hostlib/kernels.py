"""hostlib's compiled kernels (hostlib/_kernels.c, the extension module hostlib._kernels),
imported in this one place with the error that says how to build them: numerics runs the
per-value passes in them, framing a received batch's header numbers."""

from __future__ import annotations

try:  # built by `make install`
    from . import _kernels as compiled
except ImportError as exc:  # pragma: no cover - an install that skipped the build
    raise ImportError(
        "hostlib's compiled kernels (hostlib._kernels, from hostlib/_kernels.c) are not "
        "built: run `make install`, which installs gcc and python3-dev and builds them"
    ) from exc

__all__ = ["compiled"]
