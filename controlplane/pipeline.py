"""The P4 program as a whole: where its build is, and what its top-level controls declare.

p4src/v1model/p4reduce.p4's own controls (P4ReduceIngress, P4ReduceEgress) hold only what
no single sub-control owns: the `drops` counter, indexed by the reason a packet was
dropped before admission or by it (docs/protocol.md section 16). The sub-controls each have
a controller module of their own name (admission, drop_simulator, forwarding, identity,
result, result_destination), checked by tests/controller_tests/test_control_modules.py.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def _build_dir() -> Path:
    """p4src/build/, the compiled program, found as the package `p4src.build`: the same
    lookup serves a checkout, the editable install and an installed wheel (pyproject.toml
    ships the outputs as its package data). A directory on disk, because the pipeline
    files are opened by path (a P4Info path may also come from the configuration)."""
    root = resources.files("p4src.build")
    if not isinstance(root, Path):
        raise ImportError(f"p4src.build ({root}) is not a directory: install p4reduce unpacked")
    return root


BUILD_DIR = _build_dir()
DEFAULT_P4INFO = BUILD_DIR / "p4reduce.p4info.txtpb"
DEFAULT_DEVICE_CONFIG = BUILD_DIR / "p4reduce.json"

SECTION = "16. Counters"
TABLES: tuple[str, ...] = ()
JOB_COUNTERS: tuple[str, ...] = ()
SWITCH_COUNTERS = ("drops",)  # one index per reason, DROP_REASONS
# drops' indices: DROP_MALFORMED = 0, DROP_UNADMITTED = 1 in p4src/common/constants.p4
DROP_REASONS = ("malformed", "unadmitted")
