"""In Mininet: a controller restart (`p4reduce-ctl up` again, same configuration) while a
job is running leaves the job running -- same switch, real workers in their own hosts, the
real CLI. Workers loop allreduce (int32, exact) and check every result; `up` reports that
it changed nothing on the switch. And a worker process killed mid-job is named by every
surviving rank.

Before: `up` pushed the pipeline again, which resets every register; the running rounds
lost their contributions and the job stalled until its deadline. Later, on a busy machine,
the test failed at its very end: one worker stopped on seeing the stop file while the
other had just begun another call, which then waited out its deadline (p4net/loop_worker.py
now stops every rank after the same call).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bmv2_tests import kinds
import p4net.demo
import p4net.topology

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(params=kinds.params(kinds.PROCESS_KINDS, needs=("root", "mininet")))
def target(request):
    return request.param


def _progress(path: Path) -> int:
    try:
        return int(path.read_text() or 0)
    except (OSError, ValueError):
        return 0


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def _wait_for_allreduces(procs, progress: list[Path], least: list[int], timeout, what) -> None:
    """Until rank r has finished least[r] allreduces (its progress file), or a worker ended."""
    _wait(
        lambda: (
            all(_progress(p) >= n for p, n in zip(progress, least))
            or any(proc.poll() is not None for proc in procs)
        ),
        timeout,
        what,
    )


def _reports(tmp_path: Path, workers: int) -> list[dict]:
    out = []
    for r in range(workers):
        path = tmp_path / f"rank{r}.report.json"
        out.append(json.loads(path.read_text()) if path.exists() else {"ok": False})
    return out


def _start_loop_workers(net, job, inputs, tmp_path: Path, deadline: float, procs: list, first=None):
    """One loop_worker process per rank of `job`, in its Mininet host (appended to
    `procs` as they start, for the caller's clean-up), then wait until each finished
    three allreduces; returns their progress files. The inputs' sum is what every result
    must equal (files rank<r>.* and expected.npy in tmp_path, the stop file
    tmp_path/stop); first[r], if given, is what rank r reduces before the loop."""
    np.save(tmp_path / "expected.npy", np.sum(inputs, axis=0, dtype=np.int32))
    for d, h, x in zip(job.descriptors(net.ctl.jobs.switch), net.hosts, inputs):
        stem = tmp_path / f"rank{d['rank']}"
        Path(f"{stem}.json").write_text(json.dumps(d))
        np.save(f"{stem}.in.npy", x)
        extra = []
        if first is not None:
            np.save(f"{stem}.first.npy", first[d["rank"]])
            extra = ["--first", f"{stem}.first.npy"]
        procs.append(
            net.net.get(h.name).popen(
                [
                    sys.executable,
                    "-m",
                    "p4net.loop_worker",
                    f"{stem}.json",
                    f"{stem}.in.npy",
                    str(tmp_path / "expected.npy"),
                    f"{stem}.progress",
                    str(tmp_path / "stop"),
                    f"{stem}.report.json",
                    "--deadline",
                    str(deadline),
                    *extra,
                ],
                cwd=str(REPO),
            )
        )
    progress = [tmp_path / f"rank{r}.progress" for r in range(len(procs))]
    _wait_for_allreduces(procs, progress, [3] * len(procs), 120, "three allreduces")
    assert all(proc.poll() is None for proc in procs), _reports(tmp_path, len(procs))
    return progress


def _clean_up(net, job, procs: list, tmp_path: Path) -> None:
    """After a test, also a failed one: every loop worker told to stop and killed if it
    has not, and the job deleted (where this controller is still primary)."""
    (tmp_path / "stop").touch()
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if net.ctl.conn.is_primary:
        net.ctl.jobs.delete(job.job)


def _create_job(net, slots: int):
    from p4reduce.addresses import WorkerAddress
    from hostlib import protocol

    return net.ctl.jobs.create(
        1,
        [
            WorkerAddress(r, h.port, h.mac, h.ip, protocol.UDP_PORT_BASE)
            for r, h in enumerate(net.hosts)
        ],
        slots,
    )


def test_controller_restart_does_not_disturb_a_running_job(target, tmp_path):
    demo = p4net.demo
    from controlplane.stats import job_stats

    rng = np.random.default_rng(9)
    workers, deadline = 2, 10.0
    with demo.DemoNetwork(target, workers) as net:
        ctl, hosts = net.ctl, net.hosts
        job = _create_job(net, 16)
        inputs = [rng.integers(-1000, 1000, 64 * 48).astype(np.int32) for _ in hosts]
        stop = tmp_path / "stop"
        procs = []
        try:
            progress = _start_loop_workers(net, job, inputs, tmp_path, deadline, procs)
            before = job_stats(ctl.conn, job.job_index)["rounds_completed"]

            # the controller restarts: its process ends, a new `p4reduce-ctl up` starts
            # with the same configuration (the demo's, L2 hosts included)
            ctl.close()
            cfg = tmp_path / "switch.toml"
            cfg.write_text(
                f'[switch]\ngrpc_addr = "{net.ctl.conn.grpc_addr}"\n'
                f'mac = "{p4net.topology.SWITCH_MAC}"\nip = "{p4net.topology.SWITCH_IP}"\n'
                f"ports = {[h.port for h in hosts]}\n"
                f'state_file = "{net.workdir / "jobs.json"}"\n'
                + "".join(f'[[switch.hosts]]\nmac = "{h.mac}"\nport = {h.port}\n' for h in hosts)
            )
            out = subprocess.run(
                [sys.executable, "-m", "controlplane.cli", "-c", str(cfg), "--json", "up"],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=REPO,
            )
            assert out.returncode == 0, out.stderr
            up = json.loads(out.stdout)
            assert up["pipeline"] == "kept"
            # the switch was right: `up` wrote no entry and no group (kept = entries read)
            changed = {k: v for k, v in up["reconciled"].items() if k != "kept" and v}
            assert changed == {}, up["reconciled"]
            at_up = [_progress(p) for p in progress]
            assert all(p.poll() is None for p in procs), (
                f"the job ended while `up` ran: {_reports(tmp_path, workers)}"
            )

            ctl.connect()
            ctl.conn.use_pipeline_of_switch()
            # registers and counters survived: the pipeline was not pushed again
            assert job_stats(ctl.conn, job.job_index)["rounds_completed"] >= before
            # and the job goes on: three more allreduces each, well within one deadline
            _wait_for_allreduces(
                procs,
                progress,
                [n + 3 for n in at_up],
                3 * deadline,
                "three more allreduces after the controller restart",
            )
            stop.touch()
            for proc in procs:
                proc.wait(timeout=3 * deadline)
            reports = _reports(tmp_path, workers)
            assert all(r["ok"] and r["mismatches"] == 0 for r in reports), reports
            assert all(r["iterations"] >= n + 3 for r, n in zip(reports, at_up)), reports
        finally:
            _clean_up(net, job, procs, tmp_path)


def test_a_killed_rank_is_named_by_every_survivor(target, tmp_path):
    """4 ranks, 32 slots, looping allreduce; rank 2's process is SIGKILLed mid-job. Every
    survivor fails with RankSilent naming rank 2 -- not "no answer from the switch" --
    well before its deadline (protocol.md section 13: about 10 s after a death mid-call,
    half the deadline if it died between calls)."""
    demo = p4net.demo
    rng = np.random.default_rng(11)
    workers, dead, deadline = 4, 2, 20.0
    with demo.DemoNetwork(target, workers) as net:
        job = _create_job(net, 32)
        inputs = [rng.integers(-1000, 1000, 64 * 256).astype(np.int32) for _ in net.hosts]
        procs = []
        try:
            _start_loop_workers(net, job, inputs, tmp_path, deadline, procs)
            killed_at = time.time()
            procs[dead].send_signal(signal.SIGKILL)
            for proc in procs:
                proc.wait(timeout=2 * deadline)
            reports = _reports(tmp_path, workers)
            for r, rep in enumerate(reports):
                if r == dead:
                    continue
                assert rep["mismatches"] == 0, rep
                assert rep["error"].startswith("RankSilent: ") and (
                    f"rank(s) [{dead}] sent nothing" in rep["error"]
                ), f"rank {r}: {rep}"
                assert rep["error_at"] - killed_at < deadline, (r, rep["error_at"] - killed_at)
        finally:
            _clean_up(net, job, procs, tmp_path)


def test_calls_after_a_mismatch_are_exact(target, tmp_path):
    """2 workers, 32 slots, packed (the default): rank 0 reduces 100 int32 values and
    rank 1 1000 (twice the blocks of its length: 16-bit halves); both raise
    FingerprintMismatch, then every later call of 1000 values is exact on both. Before,
    the ranks ended that call apart on 16 slots: the next calls returned 488 of 1000
    elements wrong with no error, then timed out."""
    demo = p4net.demo
    rng = np.random.default_rng(12)
    workers, deadline = 2, 10.0
    with demo.DemoNetwork(target, workers) as net:
        job = _create_job(net, 32)
        inputs = [rng.integers(-1000, 1000, 1000).astype(np.int32) for _ in net.hosts]
        first = [np.ones(100, np.int32), np.ones(1000, np.int32)]
        procs = []
        try:
            _start_loop_workers(net, job, inputs, tmp_path, deadline, procs, first)
            (tmp_path / "stop").touch()
            for proc in procs:
                proc.wait(timeout=3 * deadline)
            reports = _reports(tmp_path, workers)
            for rep in reports:
                assert rep["first_error"].startswith("FingerprintMismatch: "), rep
                assert "length 100 vs 1000 elements" in rep["first_error"], rep
                assert rep["ok"] and rep["iterations"] >= 3 and rep["mismatches"] == 0, rep
        finally:
            _clean_up(net, job, procs, tmp_path)
