"""The committed p4c outputs in tests/softswitch/p4 must match their sources."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

P4DIR = Path(__file__).resolve().parent / "p4"


def test_outputs_match_sources() -> None:
    if not (P4DIR / "MANIFEST.json").exists():
        if shutil.which("p4c-bm2-ss") is None:
            pytest.skip("tests/softswitch/p4 never compiled and no p4c-bm2-ss here: "
                        "recompile tests/softswitch/p4 where p4c is installed")
        pytest.fail("recompile tests/softswitch/p4 (python tests/softswitch/p4/build.py)")
    manifest = json.loads((P4DIR / "MANIFEST.json").read_text())
    recorded = manifest["programs"]
    sources = {p.name for p in P4DIR.glob("*.p4")}
    assert sources == set(recorded), "recompile tests/softswitch/p4 (python tests/softswitch/p4/build.py)"
    for name, info in recorded.items():
        src_sha = hashlib.sha256((P4DIR / name).read_bytes()).hexdigest()
        assert src_sha == info["sha256"], f"{name} changed: recompile tests/softswitch/p4"
        out = P4DIR / info["json"]
        assert out.exists(), f"{info['json']} missing: recompile tests/softswitch/p4"
        assert hashlib.sha256(out.read_bytes()).hexdigest() == info["json_sha256"], \
            f"{info['json']} edited by hand: recompile tests/softswitch/p4"
        assert (P4DIR / info["p4info"]).exists(), f"{info['p4info']} missing: recompile tests/softswitch/p4"
    assert manifest["p4c_version"].strip(), "no p4c version recorded: recompile tests/softswitch/p4"
