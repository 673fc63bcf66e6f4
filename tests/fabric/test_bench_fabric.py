"""bench/fabric.py (run by `make bench`): its quick run measures a two-level job in one
process -- lossless and with 5 % loss on every link, exact both times (and a running
job's lossless and lossy calls on the same workers, and the lossy job in each round
mode, interleaved), each uplink
carrying one contribution up and one result down per round -- its model reproduces the
line-rate projection's function, and docs/benchmarks.md's fabric section is what
docs/bench/fabric.json gives."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import model  # noqa: E402
import report  # noqa: E402


def _load_bench():
    """bench/fabric.py by its path (`fabric` is also this test folder's package name)."""
    spec = importlib.util.spec_from_file_location("bench_fabric", REPO / "bench" / "fabric.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fabric = _load_bench()


def test_quick_run_measures_both_jobs_and_each_uplink(tmp_path):
    out = tmp_path / "fabric.json"
    assert fabric.main(["--quick", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    lossless, lossy = data["inprocess"]["runs"]
    assert (lossless["loss"], lossy["loss"]) == (0, fabric.LOSS)
    assert lossless["exact"] and lossy["exact"]
    assert lossy["seconds"] > 0 and lossless["seconds"] > 0
    for run in (lossless, lossy):  # the ranks' turns that took frames in: one or more each
        assert 0 < run["receive_batches"] <= run["packets_received"], run
    running = data["inprocess"]["running"]  # the same workers: lossless, then lossy calls
    assert running["exact"] and len(running["seconds"]) == 1 + fabric.RUNNING_CALLS
    # its first call is lossless: the loss is set after it (its resends are its timers',
    # which a loaded machine may fire)
    assert running["lossless_drops"] == 0
    rounds = lossless["rounds"]
    # a loaded machine may fire a rank's timer in the lossless run too (CI at -n 3 did:
    # 28 partials up for 24 rounds); a resend is all that adds a frame to an uplink
    resent = lossless["retransmissions"]
    for u in lossless["uplinks"]:
        # the leaf role: one partial up, one result down per round, and one more of each
        # at most per resend of its ranks (the partial again, its cached result or STATUS)
        assert rounds <= u["frames_down"] <= u["frames_up"] <= rounds + resent, u
    rank0 = lossless["rank0"]
    assert rank0["packets_sent"] == rounds + rank0["retransmissions"]
    # a fabric's default on softswitch is silent rounds; the same jobs in every-rank rounds
    assert (lossless["round_mode"], lossy["round_mode"]) == ("silent", "silent")
    other = data["inprocess"][fabric.OTHER_RUNS]
    assert [r["round_mode"] for r in other] == ["every_rank", "every_rank"]
    assert [r["loss"] for r in other] == [0, fabric.LOSS] and all(r["exact"] for r in other)
    # the lossy job again in each round mode, interleaved: every call exact
    pairs = data["inprocess"]["loss_pairs"]
    assert sorted(pairs) == sorted(fabric.ROUND_MODES)
    for r in pairs.values():
        assert r["exact"] and len(r["seconds"]) == fabric.LOSS_PAIRS and min(r["seconds"]) > 0
    text = fabric.markdown(data)
    assert f"| l1's uplink | {lossless['uplinks'][0]['frames_up']} |" in text
    assert "| in one process, 6 ranks, every-rank rounds |" in text
    assert f"{fabric.LOSS_PAIRS} times in each round mode, the modes interleaved" in text
    assert "yes |" in text


def test_the_model_is_the_projection_function():
    rows = fabric.model_rows()
    m = fabric.MODEL
    net = model.Network(link_gbps=m["link_gbps"], rtt_us=m["rtt_us"], slots=m["slots"])
    for r in rows:
        assert r["p4reduce_seconds"] == model.allreduce_seconds(
            r["p4reduce_bytes"], r["p4reduce_bytes"], r["p4reduce_rounds"], net
        )
        assert r["ring_seconds"] > r["p4reduce_seconds"]
        assert r["ring_bytes"] > r["p4reduce_bytes"]  # 2(N-1)/N x 4 bytes a value vs ~1.3
    small = rows[0]
    assert small["ring_seconds"] >= (m["ranks"] - 1) * m["rtt_us"] * 1e-6  # latency-bound


def test_benchmarks_md_fabric_section_is_the_json():
    docs = REPO / "docs" / "benchmarks.md"
    data = json.loads((REPO / "docs" / "bench" / "fabric.json").read_text())
    assert report.block_of(docs, fabric.BEGIN, fabric.END) == fabric.markdown(data)


def test_a_mininet_calls_time_runs_from_the_first_ranks_start_to_the_last_ranks_end():
    """Spans of 2 ranks over 2 calls, on the shared monotonic clock: each call's time is
    the job's (first start to last end), not one rank's; a rank without spans (it
    failed) leaves no time to report."""
    spans = [[(10.0, 10.5), (11.0, 11.2)], [(10.1, 10.7), (10.9, 11.1)]]
    assert fabric.call_seconds(spans) == pytest.approx([0.7, 0.3])
    assert fabric.call_seconds([[(1.0, 2.0)], []]) == []
