"""The controller does not load the worker library: importing every controlplane module
pulls in neither numpy nor hostlib's data path (Worker, engine, numpy codecs).

Why: the controller needs only the wire constants and the job descriptor type
(`p4reduce.wire`, `p4reduce.job`); loading the Worker and numpy to parse a MAC address
made the operator's CLI slow and tied it to the worker's dependencies. Run in a fresh
interpreter, because this test process has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# what a controller process may never load
FORBIDDEN = (
    "numpy",
    "scapy",
    "torch",
    "hostlib",
    "softswitch",
)


def modules_after(code: str) -> list[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def forbidden(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]


def test_importing_every_controlplane_module_loads_no_worker_code():
    loaded = modules_after(
        "import importlib, pkgutil, controlplane\n"
        "for m in pkgutil.walk_packages(controlplane.__path__, 'controlplane.'):\n"
        "    importlib.import_module(m.name)\n"
    )
    assert "controlplane.cli" in loaded and "controlplane.controller" in loaded
    assert "p4reduce.wire" in loaded  # the probe sees what the controller uses
    assert forbidden(loaded) == []


def test_hostlib_package_names_load_on_first_use():
    """`import hostlib` is light; `hostlib.Worker` still works (it loads the worker then)."""
    light = modules_after("import hostlib")
    assert not [m for m in light if m == "numpy" or m.startswith(("numpy.", "hostlib."))]
    heavy = modules_after("import hostlib\nassert hostlib.Worker.__name__ == 'Worker'")
    assert "hostlib.worker" in heavy and "numpy" in heavy
    # a worker needs the job model, not the compiled program's location
    assert "p4reduce.job" in heavy and "p4reduce.target" not in heavy


def test_the_ground_floor_is_light():
    """Every component loads p4reduce without the others: no numpy, scapy or gRPC
    session, and none of hostlib, controlplane or softswitch comes with it."""
    loaded = modules_after(
        "import importlib, pkgutil, p4reduce\n"
        "for m in pkgutil.walk_packages(p4reduce.__path__, 'p4reduce.'):\n"
        "    importlib.import_module(m.name)\n"
    )
    assert "p4reduce.p4rt.p4info" in loaded and "p4reduce.state" in loaded
    ours = [m for m in loaded if m.startswith(("controlplane", "hostlib", "softswitch"))]
    assert ours == []
    heavy = ("numpy", "scapy", "torch", "grpc")
    assert not [m for m in loaded if m in heavy or m.startswith(tuple(h + "." for h in heavy))]
