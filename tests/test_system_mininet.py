"""System tests: the whole stack in Mininet -- switch (softswitch here, simple_switch_grpc
where installed), controller, and workers in their own hosts -- on small tensors, checking
every worker's result against numpy."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from demo_loader import load_demo

REPO = Path(__file__).resolve().parent.parent
TARGETS = ["softswitch", "simple_switch_grpc"]


def _demo():
    return load_demo()


def _skip(target: str) -> str | None:
    if os.geteuid() != 0:
        return "Mininet needs root"
    if shutil.which("mnexec") is None:
        return "Debian's mininet (mnexec) is not installed: run make install"
    if target == "simple_switch_grpc" and shutil.which("simple_switch_grpc") is None:
        return "simple_switch_grpc is not on PATH (bmv2 is not in any package registry)"
    return None


@pytest.fixture(params=TARGETS)
def target(request):
    reason = _skip(request.param)
    if reason:
        pytest.skip(f"{request.param}: {reason}")
    return request.param


def _interfaces(switch: str | None = None) -> set[str]:
    """The demo's switch-side links (its hosts' ends live in their namespaces). The switch
    is named after the process that builds the network (`p4net.SWITCH_NAME`)."""
    prefix = f"{switch or _demo().p4net.SWITCH_NAME}-eth"
    return {name for name in os.listdir("/sys/class/net") if name.startswith(prefix)}


@pytest.fixture
def demo(target):
    before = _interfaces()
    module = _demo()
    yield module, module.Options(workers=3, size=3000, density=0.1, target=target,
                                 slots=8, deadline=60.0, quiet=True)
    assert _interfaces() == before, "the demo left interfaces behind"


def _assert_all_matched(summary):
    bad = [(o.job, o.rank, o.error) for o in summary.outcomes if not (o.ok and o.matched)]
    assert not bad, bad


def test_dense_float32(demo):
    module, opts = demo
    _assert_all_matched(module.run(replace(opts, density=1.0)))


def test_sparse_float32_sends_fewer_packets_than_dense(demo):
    module, opts = demo
    sparse = module.run(opts)
    _assert_all_matched(sparse)
    dense = module.run(replace(opts, density=1.0))
    tx = lambda s: sum(o.tx_bytes for o in s.outcomes)   # noqa: E731
    assert tx(sparse) < tx(dense) / 3


def test_int32_exact(demo):
    module, opts = demo
    _assert_all_matched(module.run(replace(opts, dtype="int32", density=0.5)))


def test_two_jobs_at_once_share_the_switch(demo):
    module, opts = demo
    summary = module.run(replace(opts, jobs=2, workers=2))
    _assert_all_matched(summary)
    assert {o.job for o in summary.outcomes} == {1, 2}


def test_five_percent_loss_still_exact(demo):
    module, opts = demo
    summary = module.run(replace(opts, dtype="int32", loss=0.05, density=0.5))
    _assert_all_matched(summary)
    assert sum(o.retransmissions for o in summary.outcomes) > 0
    assert any(c["simulated_drops_ingress"] + c["simulated_drops_egress"] > 0
               for c in summary.switch_counters.values())


def test_absent_worker_times_out_clearly_and_a_new_job_succeeds(demo):
    module, opts = demo
    with module.DemoNetwork(opts.target, opts.workers) as net:
        failed = net.run_jobs(replace(opts, absent_ranks=(2,), deadline=3.0))
        errors = [o.error for o in failed.outcomes if o.rank != 2]
        assert all("TimeoutError" in e for e in errors), errors
        retry = net.run_jobs(opts)
        _assert_all_matched(retry)


def test_make_run_cli_reports_a_match(target):
    out = subprocess.run([sys.executable, str(REPO / "mininet" / "demo.py"), "--workers", "2",
                          "--size", "2000", "--target", target, "--quiet"],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "every worker's result matched: yes" in out.stdout


def _tagged(tag: bytes) -> set[int]:
    """PIDs of live processes whose environment carries `tag`: everything a demo started
    (switch, Mininet host shells, workers) inherits it, and nothing else has it."""
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if tag in f.read():
                    pids.add(int(entry))
        except OSError:
            continue
    return pids


def test_ctrl_c_leaves_nothing_behind(target):
    import signal
    import time
    import uuid
    tag = f"P4REDUCE_TEST_TAG={uuid.uuid4().hex}"
    env = {**os.environ, "P4REDUCE_TEST_TAG": tag.split("=")[1]}
    demo = subprocess.Popen([sys.executable, str(REPO / "mininet" / "demo.py"), "--workers", "3",
                             "--size", "3000000", "--density", "1", "--target", target],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                            env=env)
    switch = f"s{demo.pid}"                         # p4net.SWITCH_NAME of the demo process
    before_ifaces: set[str] = set()
    deadline = time.monotonic() + 60
    while not _interfaces(switch) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)                                   # workers are running by now
    assert demo.poll() is None, demo.communicate()[0]
    assert len(_tagged(tag.encode()) - {demo.pid}) >= 3   # the tag does reach the children
    demo.send_signal(signal.SIGINT)
    out, _ = demo.communicate(timeout=60)
    assert demo.returncode == 130, out
    assert "interrupted" in out
    assert _interfaces(switch) == before_ifaces
    time.sleep(0.5)
    assert _tagged(tag.encode()) == set()
