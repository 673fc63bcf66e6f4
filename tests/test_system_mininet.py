"""System tests: the whole stack in Mininet -- switch (softswitch here, simple_switch_grpc
where installed), controller, and workers in their own hosts -- on small tensors, checking
every worker's result against numpy."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bmv2_tests import kinds
import p4net.demo
import p4net.topology
from p4reduce.job import FAIR_SLOTS, block_count, slots_for_call
from p4reduce.target import SOFTSWITCH, kind_window
from p4reduce.wire import BLOCK_VALUES

REPO = Path(__file__).resolve().parent.parent


def _demo():
    return p4net.demo


@pytest.fixture(params=kinds.params(kinds.PROCESS_KINDS, needs=("root", "mininet")))
def target(request):
    return request.param


def _interfaces(switch: str | None = None) -> set[str]:
    """The demo's switch-side links (its hosts' ends live in their namespaces). The switch
    is named after the process that builds the network (`p4net.topology.SWITCH_NAME`)."""
    prefix = f"{switch or p4net.topology.SWITCH_NAME}-eth"
    return {name for name in os.listdir("/sys/class/net") if name.startswith(prefix)}


@pytest.fixture
def demo(target):
    before = _interfaces()
    module = _demo()
    yield (
        module,
        module.Options(
            workers=3, size=3000, density=0.1, target=target, slots=8, deadline=60.0, quiet=True
        ),
    )
    assert _interfaces() == before, "the demo left interfaces behind"


def _assert_all_matched(summary):
    bad = [(o.job, o.rank, o.error) for o in summary.outcomes if not (o.ok and o.matched)]
    assert not bad, bad


def test_dense_float32(demo):
    """Without a window the ranks keep their job's, the kind's default: every slot on
    softswitch (round robin), FAIR_SLOTS on simple_switch_grpc (first in first out)."""
    module, opts = demo
    summary = module.run(replace(opts, density=1.0, slots=24))
    _assert_all_matched(summary)
    window = kind_window(summary.kind, 24)
    assert window == (24 if summary.kind == SOFTSWITCH else FAIR_SLOTS)
    assert [o.report["window"] for o in summary.outcomes] == [window] * opts.workers


def test_sparse_float32_sends_fewer_packets_than_dense(demo):
    module, opts = demo
    sparse = module.run(opts)
    _assert_all_matched(sparse)
    dense = module.run(replace(opts, density=1.0))
    tx = lambda s: sum(o.tx_bytes for o in s.outcomes)  # noqa: E731
    assert tx(sparse) < tx(dense) / 3


@pytest.mark.parametrize("window, call_slots", [(2, None), (8, 5)])
def test_every_rank_keeps_the_window_and_call_slots_the_demo_names(demo, window, call_slots):
    """The demo's window (benchmarks: all of a lone job's slots) and slots per call
    (bench/slot_window.py's) reach every rank's Worker, and a call with a window below
    the job's slots, or on fewer slots than the rule gives, still sums exactly. Without
    call_slots the call uses slots_for_call's."""
    module, opts = demo
    summary = module.run(replace(opts, window=window, call_slots=call_slots, density=1.0))
    _assert_all_matched(summary)
    assert [o.report["window"] for o in summary.outcomes] == [window] * opts.workers
    k = opts.block_values or BLOCK_VALUES  # the demo's jobs: the v1model default
    blocks = block_count(opts.size, False, k)
    used = call_slots or slots_for_call(blocks, opts.slots, block_values=k)
    assert [o.report["call_slots"] for o in summary.outcomes] == [used] * opts.workers


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
    assert any(
        c["simulated_drops_ingress"] + c["simulated_drops_egress"] > 0
        for c in summary.switch_counters.values()
    )


def test_absent_worker_times_out_clearly_and_a_new_job_succeeds(demo):
    module, opts = demo
    with module.DemoNetwork(opts.target, opts.workers) as net:
        failed = net.run_jobs(replace(opts, absent_ranks=(2,), deadline=3.0))
        errors = [o.error for o in failed.outcomes if o.rank != 2]
        assert all("TimeoutError" in e for e in errors), errors
        retry = net.run_jobs(opts)
        _assert_all_matched(retry)


def test_make_run_cli_reports_a_match(target):
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "mininet" / "demo.py"),
            "--workers",
            "2",
            "--size",
            "2000",
            "--target",
            target,
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
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


def _start_tagged_demo(target: str) -> tuple[subprocess.Popen, bytes]:
    import uuid

    tag = uuid.uuid4().hex
    env = {**os.environ, "P4REDUCE_TEST_TAG": tag}
    demo = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "mininet" / "demo.py"),
            "--workers",
            "3",
            "--size",
            "3000000",
            "--density",
            "1",
            "--target",
            target,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env=env,
    )
    return demo, f"P4REDUCE_TEST_TAG={tag}".encode()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_ctrl_c_while_the_switch_starts_leaves_nothing_behind(target):
    """Ctrl-C the moment the switch process exists, before it serves P4Runtime: the window
    a busy machine stretches to seconds. The interrupt used to land inside the wait for
    P4Runtime (the switch process, not yet recorded, was left running) or inside grpc's
    channel close (the half-closed channel's destructor then blocked the exit forever)."""
    import signal
    import time

    demo, tag = _start_tagged_demo(target)
    switch_cmd = "-m softswitch " if target == "softswitch" else "simple_switch_grpc -i"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and demo.poll() is None:
        if any(switch_cmd in _cmdline(pid) for pid in _tagged(tag) - {demo.pid}):
            break
        time.sleep(0.01)
    assert demo.poll() is None, demo.communicate()[0]
    demo.send_signal(signal.SIGINT)
    out, _ = demo.communicate(timeout=60)
    assert demo.returncode == 130, out
    assert "interrupted" in out
    assert _interfaces(f"s{demo.pid}") == set()
    time.sleep(0.5)
    left = {pid: _cmdline(pid) for pid in _tagged(tag)}
    for pid in left:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert left == {}, "the demo left processes behind"


def test_ctrl_c_while_workers_run_leaves_nothing_behind(target):
    import signal
    import time

    demo, tag = _start_tagged_demo(target)
    switch = f"s{demo.pid}"  # p4net.topology.SWITCH_NAME of the demo process
    deadline = time.monotonic() + 120
    workers: set[int] = set()
    while len(workers) < 3 and time.monotonic() < deadline and demo.poll() is None:
        workers = {pid for pid in _tagged(tag) if "p4net.worker" in _cmdline(pid)}
        time.sleep(0.1)
    assert demo.poll() is None, demo.communicate()[0]
    assert len(workers) == 3  # the tag does reach the workers
    time.sleep(1)  # traffic is flowing
    demo.send_signal(signal.SIGINT)
    out, _ = demo.communicate(timeout=60)
    assert demo.returncode == 130, out
    assert "interrupted" in out
    assert _interfaces(switch) == set()
    time.sleep(0.5)
    assert _tagged(tag) == set()
