"""The controller does not load the worker library: importing every controlplane module
pulls in neither numpy nor hostlib's data path (Worker, engine, numpy codecs).

Why: the controller needs only the wire constants and the job descriptor type
(`hostlib.wire`, `hostlib.config`); loading the Worker and numpy to parse a MAC address
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
    "hostlib.worker",
    "hostlib.engine",
    "hostlib.protocol",
    "hostlib.transport",
    "hostlib.framing",
    "hostlib.numerics",
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
    assert "hostlib.wire" in loaded  # the probe sees what the controller uses
    assert forbidden(loaded) == []


def test_hostlib_package_names_load_on_first_use():
    """`import hostlib` is light; `hostlib.Worker` still works (it loads the worker then)."""
    light = modules_after("import hostlib, hostlib.config\nhostlib.JobConfig")
    assert forbidden(light) == []
    heavy = modules_after("import hostlib\nassert hostlib.Worker.__name__ == 'Worker'")
    assert "hostlib.worker" in heavy and "numpy" in heavy


def test_the_shared_p4runtime_codec_is_light():
    """softswitch and the tests import controlplane.p4rt without the controller: no gRPC
    session, jobs or configuration come with it."""
    loaded = modules_after("import controlplane.p4rt")
    ours = [m for m in loaded if m.startswith(("controlplane", "hostlib"))]
    assert sorted(ours) == [
        "controlplane",
        "controlplane.p4rt",
        "controlplane.p4rt.codec",
        "controlplane.p4rt.p4info",
    ]
    assert not [m for m in loaded if m == "grpc" or m.startswith("grpc.")]
