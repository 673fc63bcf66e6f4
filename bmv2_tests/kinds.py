"""What each test needs, and the switch kinds the tests run on, as pytest sees them.

* **The kinds.** Every test of this folder (and the controller tests) runs on each kind of
  switch under test (p4net.switches: ``inprocess`` always; ``softswitch`` and
  ``simple_switch_grpc`` on veth pairs where root and the binary are available).

* **The skip rule.** A test says what it needs with a pytest marker declared in
  pyproject.toml -- ``root``, ``bmv2``, ``mininet`` -- or gets the markers of its kind
  through `params`. `unmet` is the one rule that turns a need into a skip reason; the
  repository's conftest.py applies it to every marked test before its fixtures run. So
  ``pytest -m "not root"`` selects exactly what runs without root.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Iterable

from p4net.switches import INPROCESS, KINDS, PROCESS_KINDS
from p4reduce.target import SIMPLE_SWITCH_GRPC, SOFTSWITCH

__all__ = ["KINDS", "PROCESS_KINDS", "NEEDS", "params", "unmet", "unmet_needs"]

# what each kind needs, as marker names (pyproject.toml declares them)
NEEDS: dict[str, tuple[str, ...]] = {
    INPROCESS: (),
    SOFTSWITCH: ("root",),
    SIMPLE_SWITCH_GRPC: ("root", "bmv2"),
}


# ---- what a test needs ---------------------------------------------------------------


def unmet(need: str) -> str | None:
    """Why `need` (a marker name: root, bmv2, mininet) cannot be met here, or None.

    The one place that decides: every skip for a missing privilege or tool says this."""
    if need == "root":
        if os.geteuid() != 0:
            return "needs root (veth interfaces, network namespaces)"
        if shutil.which("ip") is None:
            return "needs iproute2 ('ip'): run make install"
        return None
    if need == "bmv2":
        if shutil.which(SIMPLE_SWITCH_GRPC) is None:
            return (
                "simple_switch_grpc is not on PATH (bmv2 is in no package registry; "
                "CI installs ../shared/toolchain, or build behavioral-model with PI)"
            )
        return None
    if need == "mininet":
        if shutil.which("mnexec") is None:
            return "needs Debian's mininet (mnexec): run make install"
        return unmet("root")
    raise ValueError(f"unknown need {need!r} (root, bmv2, mininet)")


def unmet_needs(marker_names: Iterable[str]) -> str | None:
    """The first unmet need among a test's markers (others are not needs), or None."""
    for name in marker_names:
        if name in ("root", "bmv2", "mininet") and (reason := unmet(name)):
            return f"{name}: {reason}"
    return None


def params(kinds: Iterable[str] = KINDS, needs: tuple[str, ...] = ()) -> list[Any]:
    """Switch kinds as pytest params (fixture or parametrize) carrying their needs as markers,
    plus `needs` common to all (e.g. ("root", "mininet") for a Mininet test)."""
    import pytest

    out = []
    for kind in kinds:
        names = dict.fromkeys(needs + NEEDS[kind])  # ordered, no duplicates
        out.append(
            pytest.param(kind, id=kind, marks=[getattr(pytest.mark, name) for name in names])
        )
    return out
