"""`python -m hostlib` on bad input and failures: one line on stderr, a defined exit code
(0 ok, 1 allreduce failed, 2 usage or input, 3 network setup), never a traceback. Run as
real processes; the network cases inside a throw-away namespace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hostlib import netns

REPO = Path(__file__).resolve().parents[2]


def _run(args, ns: str | None = None, timeout: float = 60):
    argv = [sys.executable, "-m", "hostlib", *args]
    if ns is not None:
        argv = ["ip", "netns", "exec", ns, *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def _one_error_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m hostlib: error: "), out.stderr
    assert "Traceback" not in out.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--descriptor", "/nonexistent/job.json"], "no such file"),
        (["--descriptor", "{not json"], "not valid JSON"),
        (["--descriptor", '{"protocol": 2}'], "missing"),
        (["--descriptor", "{}", "--timeout", "0"], "--timeout"),
        (["--descriptor", "{}", "--timeout", "-1"], "--timeout"),
        (["--descriptor", "{}", "--deadline", "nan"], "--deadline"),
        (["--descriptor", "{}", "--size", "0"], "--size"),
        (["--descriptor", "{}", "--repeat", "-2"], "--repeat"),
        (["--size", "3"], "--descriptor"),
    ],
)
def test_usage_and_descriptor_errors(args, needle):
    out = _run(args)
    assert out.returncode == 2, out
    assert needle in _one_error_line(out)


@pytest.fixture
def topology():
    """Namespaces and veths: the tests using it are marked root."""
    with netns.Topology(1, slot_count=4) as topo:
        yield topo


@pytest.mark.root
def test_no_interface_owns_the_worker_ip(topology, tmp_path):
    d = dict(
        topology.descriptors[0], worker={**topology.descriptors[0]["worker"], "ip": "192.0.2.77"}
    )
    path = tmp_path / "d.json"
    path.write_text(json.dumps(d))
    out = _run(["--descriptor", str(path)], ns=topology.worker_ns[0])
    assert out.returncode == 3, out
    assert "192.0.2.77" in _one_error_line(out)


@pytest.mark.root
def test_deadline_is_a_one_line_timeout(topology, tmp_path):
    """No switch answers in this namespace: the allreduce fails at its deadline."""
    path = tmp_path / "d.json"
    path.write_text(json.dumps(topology.descriptors[0]))
    out = _run(
        ["--descriptor", str(path), "--deadline", "0.5", "--size", "64"], ns=topology.worker_ns[0]
    )
    assert out.returncode == 1, out
    assert "timed out" in _one_error_line(out)
