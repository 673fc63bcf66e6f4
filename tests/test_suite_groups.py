"""make test runs the suite in several pytest-xdist processes with --dist loadgroup
(conftest.py): every Mininet test must run in one process, one after another, since
Mininet's names are global, and a module that puts its tests in an xdist group (such as
tests/softswitch_server/test_differential.py, whose last tests read what the earlier ones
left) must run in one process too. Checked on a small suite of its own, run the way
make test runs the real one, with the repository's conftest.py as its plugin: a version of
pytest or pytest-xdist under which the groups silently do not hold fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SUITE = """
import pytest


@pytest.mark.mininet
@pytest.mark.parametrize("i", range(4))
def test_network(i):
    pass


@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    pass


@pytest.mark.parametrize("i", range(8))
def test_other(i):
    pass
"""


def test_mininet_tests_and_xdist_groups_each_run_in_one_process(tmp_path):
    (tmp_path / "test_small.py").write_text(SUITE)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-n", "2", "--dist", "loadgroup"]
        + ["-v", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    ran = re.findall(
        r"\[(gw\d)\] \[ *\d+%\] (?:PASSED|SKIPPED) \S*::(test_\w+)\[(\d)\]", out.stdout
    )
    assert len(ran) == 16, out.stdout
    for name in ("test_network", "test_grouped"):
        workers = {gw for gw, test, _ in ran if test == name}
        assert len(workers) == 1, f"{name} ran in {workers}:\n{out.stdout}"
    # the Mininet tests run first in their process, in their own order
    (network_gw,) = {gw for gw, test, _ in ran if test == "test_network"}
    first = [(test, i) for gw, test, i in ran if gw == network_gw][:4]
    assert first == [("test_network", str(i)) for i in range(4)], out.stdout
