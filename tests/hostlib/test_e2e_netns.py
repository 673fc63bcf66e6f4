"""Transport + engine end to end: N worker processes, each in its own namespace, against
the reflector process in the switch namespace, over veth pairs (root only).

This is the path the real switch will take (the lead's fixture swaps the reflector for
bmv2/softswitch); the descriptors are the ones a controller would hand out.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hostlib import netns

REASON = netns.available()
pytestmark = [pytest.mark.root,
              pytest.mark.skipif(REASON is not None, reason=str(REASON))]
ROOT = Path(__file__).resolve().parents[2]


def run_job(tmp: Path, n: int, inputs: list[np.ndarray], *, mode: str, loss: float,
            repeat: int = 2, slots: int = 16) -> tuple[list[np.ndarray], list[dict], dict]:
    py = sys.executable
    with netns.Topology(n, slot_count=slots) as t:
        descs = []
        for i, d in enumerate(t.descriptors):
            f = tmp / f"d{i}.json"
            f.write_text(json.dumps(d))
            descs.append(str(f))
            np.save(tmp / f"in{i}.npy", inputs[i])
        args = [py, "-m", "hostlib.reflector", "--counters", str(tmp / "ctr.json"),
                "--transport", mode, "--loss-ingress", str(loss), "--loss-egress", str(loss),
                "--duration", "60"]
        for f in descs:
            args += ["--descriptor", f]
        for s in t.switch_if:
            args += ["--interface", s]
        refl = subprocess.Popen(t.exec_argv(t.switch_ns, args), cwd=ROOT,
                                stdout=subprocess.PIPE, text=True)
        workers: list[subprocess.Popen[str]] = []
        try:
            assert refl.stdout is not None and refl.stdout.readline().strip() == \
                "reflector ready"
            for i in range(n):
                workers.append(subprocess.Popen(t.exec_argv(t.worker_ns[i], [
                    py, "-m", "hostlib", "--descriptor", descs[i], "--input",
                    str(tmp / f"in{i}.npy"), "--output", str(tmp / f"out{i}.npy"),
                    "--transport", mode, "--repeat", str(repeat), "--timeout", "0.002",
                    "--deadline", "20", "--stats", str(tmp / f"stats{i}.json")]),
                    cwd=ROOT, stderr=subprocess.PIPE, text=True))
            for w in workers:
                _, err = w.communicate(timeout=40)
                assert w.returncode == 0, err
        finally:
            for w in workers:
                if w.poll() is None:
                    w.kill()
                    w.wait()
            refl.terminate()
            refl.wait(10)
    outs = [np.load(tmp / f"out{i}.npy") for i in range(n)]
    stats = [json.loads((tmp / f"stats{i}.json").read_text()) for i in range(n)]
    return outs, stats, json.loads((tmp / "ctr.json").read_text())


@pytest.mark.parametrize("n,mode,loss", [(1, "ring", 0.0), (2, "mmsg", 0.05),
                                         (3, "auto", 0.05)])
def test_int32_allreduce_over_veth(tmp_path, n, mode, loss):
    rng = np.random.default_rng(n)
    inputs = []
    for _ in range(n):
        x = rng.integers(-10**5, 10**5, size=(97, 211)).astype(np.int32)
        x.reshape(-1)[np.repeat(rng.random(321) < 0.5, 64)[:x.size]] = 0
        inputs.append(x)
    outs, stats, ctr = run_job(tmp_path, n, inputs, mode=mode, loss=loss)
    exact = np.sum([x.astype(np.int64) for x in inputs], axis=0)
    for out, st in zip(outs, stats):
        assert out.dtype == np.int32 and (out == exact).all()
        assert st["transport"] == ("ring" if mode == "auto" else mode)
        assert st["allreduces"] == 2
    assert ctr["malformed"] == 0 and ctr["unadmitted"] == 0
    if loss:
        assert ctr["simulated_drops_ingress"] + ctr["simulated_drops_egress"] > 0
        assert sum(s["retransmissions"] for s in stats) > 0


def test_float32_allreduce_over_veth(tmp_path):
    rng = np.random.default_rng(9)
    inputs = [(rng.standard_normal(20000) * 1e3).astype(np.float32) for _ in range(2)]
    outs, _, _ = run_job(tmp_path, 2, inputs, mode="ring", loss=0.0, repeat=1)
    exact = inputs[0].astype(np.float64) + inputs[1]
    pad = -len(exact) % 64
    blockmax = np.max([np.abs(np.pad(x, (0, pad))).reshape(-1, 64).max(1) for x in inputs], 0)
    bound = np.repeat(blockmax.astype(np.float64) * 4 / (2 ** 31 - 2), 64)[:len(exact)]
    for out in outs:
        assert out.dtype == np.float32
        assert (np.abs(out - exact) <= bound + np.abs(exact) * np.finfo(np.float32).eps).all()
