"""The benchmark harness (bench/): the line-rate model gives sane numbers for known inputs,
and the suite runs end to end on a tiny job -- real Mininet hosts, the switch, p4reduce
workers and gloo ranks -- producing counters that obey the protocol's and the ring's
byte counts, and the tables (and plots, with matplotlib). Nothing here asserts a speed."""

from __future__ import annotations

import itertools
import json
import math
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from hostlib import protocol  # noqa: E402
from p4reduce.job import closing_rounds, round_count, slots_for_call  # noqa: E402
from model import (  # noqa: E402
    Network,
    allreduce_seconds,
    p4reduce_round_trips,  # noqa: E402
    ring_round_trips,
)


def test_model_link_bound_latency_bound_and_switch_bound():
    net = Network(link_gbps=100, rtt_us=5, slots=256)
    rtt = 5e-6
    # 1.25 GB at 100 Gb/s is 0.1 s; the larger direction counts; plus one RTT
    assert allreduce_seconds(1.25e9, 1e3, 1, net) == pytest.approx(0.1 + rtt)
    assert allreduce_seconds(1e3, 1.25e9, 1, net) == pytest.approx(0.1 + rtt)
    # no bytes to speak of: the dependent round trips
    assert allreduce_seconds(100, 100, 10, net) == pytest.approx(11 * rtt)
    # a slow switch: its packet intake
    slow = Network(link_gbps=100, rtt_us=5, slots=256, switch_pps=1000)
    assert allreduce_seconds(100, 100, 1, slow, switch_packets=2000) == pytest.approx(2 + rtt)
    with pytest.raises(ValueError, match="must be >= 0"):
        allreduce_seconds(-1, 0, 0, net)


def test_model_round_trips():
    assert p4reduce_round_trips(0, 256) == 1  # announce round only
    assert p4reduce_round_trips(1000, 256) == 4 + 1
    assert ring_round_trips(8) == 7


def test_model_dense_p4reduce_beats_a_ring_by_its_byte_ratio_at_line_rate():
    """On a big dense tensor both are link-bound: p4reduce sends FRAME/VALUE bytes per value
    byte (derived from the wire format), a ring 2(N-1)/N of them (plus TCP's overhead)."""
    values, workers, net = 64 * 2**20, 8, Network()
    blocks = math.ceil(values / protocol.BLOCK_VALUES)
    p4_bytes = blocks * protocol.FRAME_BYTES_WITH_VALUES
    ring_bytes = 2 * (workers - 1) / workers * 4 * values * 1514 / 1448
    p4 = allreduce_seconds(p4_bytes, p4_bytes, p4reduce_round_trips(blocks, net.slots), net)
    ring = allreduce_seconds(ring_bytes, ring_bytes, ring_round_trips(workers), net)
    assert ring / p4 == pytest.approx(ring_bytes / p4_bytes, rel=0.01)
    assert 1 < ring / p4 < 2


@pytest.mark.root
@pytest.mark.mininet
def test_suite_end_to_end_on_a_tiny_job(tmp_path):
    import report
    import suite

    from p4reduce.wire import link_mtu

    size, workers = 4096, 2  # 64 blocks, one per slot
    p4reduce_cases = [
        suite.Case("softswitch", "p4reduce", workers, size, "dense", 1.0, 1),
        suite.Case("softswitch", "p4reduce", workers, size, "shared", 0.25, 1),
        # wide blocks: 2 of 2 048 values (frames above 1 500 bytes: jumbo links), then
        # 16 of 256 values, a quarter non-zero, and a job of 64 after them
        suite.Case("softswitch", "p4reduce", workers, size, "dense", 1.0, 1, block_values=2048),
        suite.Case("softswitch", "p4reduce", workers, size, "shared", 0.25, 1, block_values=256),
        suite.Case("softswitch", "p4reduce", workers, size, "zipf", 0.0, 1),
    ]
    # every case in both round modes, named explicitly (never the target's default)
    cases = [
        replace(c, round_mode=m) for c in p4reduce_cases for m in (suite.SILENT, suite.EVERY_RANK)
    ]
    if suite.have_torch():
        cases.append(suite.Case("softswitch", "gloo", workers, size, "ring", 1.0, 1))
    # gloo at the MTUs this plan's p4reduce jobs use (the headline's five are checked by
    # test_gloo_runs_at_every_mtu_a_headline_job_uses)
    mtus = tuple(sorted({link_mtu(c.block_values) for c in p4reduce_cases}))
    assert len(mtus) == 2
    data = suite.run_cases(cases, ["softswitch"], passes=2, gloo_mtus=mtus)
    bad = [(r["case"], r["error"]) for r in data["results"] if not r["ok"]]
    assert not bad
    # two passes over the plan: one result per case, its fastest pass's
    assert len(data["results"]) == len(cases) and data["environment"]["passes"] == 2
    for r in data["results"]:
        assert len(r["passes"]) == 2 and r["seconds"] == min(r["passes"]), r["case"]
    for mode in (suite.SILENT, suite.EVERY_RANK):
        mine = [r for r in data["results"] if r["case"]["round_mode"] == mode]
        check_tiny_job(mine, mode, size, workers, mtus)
    data.update(command="pytest", skipped=["nothing"])
    report.write(data, tmp_path)
    tables = (tmp_path / "tables.md").read_text()
    assert (
        f"{protocol.VALUE_BYTES} bytes of values ({protocol.BLOCK_VALUES} int32 lanes) in "
        f"{protocol.FRAME_BYTES_WITH_VALUES} bytes"
    ) in tables
    assert "Density sweep, softswitch, 2 workers, 4 K values" in tables
    assert "every-rank rounds: seconds" in tables  # silent rows, every-rank beside
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "density-softswitch.png").stat().st_size > 10_000


def check_tiny_job(
    results: list[dict], mode: str, size: int, workers: int, gloo_mtus: tuple[int, ...]
) -> None:
    """One round mode's results of the tiny suite run: rounds, frames, links, packets."""
    import report
    import suite

    wide = {r["case"]["block_values"]: r for r in results if r["case"]["block_values"] > 64}
    by = {
        (r["case"]["system"], r["case"]["pattern"]): r
        for r in results
        if r["case"]["block_values"] == protocol.BLOCK_VALUES
    }
    blocks = size // protocol.BLOCK_VALUES
    dense = by[("p4reduce", "dense")]
    # the job's slots are recorded per run: the kind's default, as nothing else was asked
    from p4reduce.target import default_slots

    assert dense["slots"] == default_slots("softswitch")
    # every block once plus one announce per slot, per worker, by the worker's own count (in
    # silent rounds no closing round either: every rank has every block, so each slot's
    # last data round, which every rank joins, ends it)
    every = [[True] * blocks] * workers
    closing = closing_rounds(every, dense["slots"], block_values=protocol.BLOCK_VALUES)
    assert closing == 0
    assert dense["rounds"] == round_count(
        blocks, blocks, dense["slots"], mode, closing, block_values=protocol.BLOCK_VALUES
    )
    # the slots each call used, as the ranks reported them: the rule's
    assert dense["call_slots"] == slots_for_call(
        blocks, dense["slots"], block_values=protocol.BLOCK_VALUES
    )
    assert 0 <= dense["start_skew"] < 5  # the ranks' starts, on the shared monotonic clock
    # the kernel's counters: at least the DATA frames the protocol needs, each way
    assert dense["tx_bytes"] >= blocks * protocol.FRAME_BYTES_WITH_VALUES
    assert dense["rx_bytes"] >= blocks * protocol.FRAME_BYTES_WITH_VALUES
    sparse = by[("p4reduce", "shared")]
    assert sparse["block_density"] == pytest.approx(0.25)
    # the engine's own count per type, and the rank's non-zero blocks, per call
    assert sparse["nonzero_blocks"] == blocks // 4
    assert sparse["sent_by_type"]["DATA"] >= blocks // 4
    if mode == suite.SILENT:  # a rank sends its non-zero blocks + 2 per slot, no more,
        # beside what its timers resent (a loaded core's timer can fire in a lossless job)
        r = report.results_of({"results": [sparse]})[0]
        resent = sparse["retransmissions"] / workers  # per rank per call
        assert r.tx_packets <= report.packet_bound(r) + resent + 2  # + ARP, IPv6 noise
        assert sum(sparse["sent_by_type"].values()) <= report.packet_bound(r) + resent
    else:  # one packet per rank per round
        assert sum(sparse["sent_by_type"].values()) >= sparse["rounds"]
    assert sparse["tx_bytes"] < dense["tx_bytes"] / 2
    assert 0 < by[("p4reduce", "zipf")]["block_density"] < 1
    # each job at its block size: its rounds, its frames, its links' MTU -- the smallest
    # that carries them, lowered again for the 64-value job after the wide ones
    from p4net import topology

    assert wide[2048]["rounds"] == round_count(
        2, 2, wide[2048]["slots"], mode, closing=0, block_values=2048
    )
    assert wide[2048]["tx_bytes"] >= 2 * protocol.frame_bytes_with_values(2048)
    assert wide[2048]["mtu"] == topology.JUMBO_MTU
    assert wide[256]["block_density"] == pytest.approx(0.25)
    # silent rounds: a closing round only on the slots the 4 non-zero blocks are in
    from hostlib import numerics

    ins = suite.make_inputs(suite.Case(**wide[256]["case"]))
    masks = [numerics.to_blocks(x, 256).any(axis=1) for x in ins]
    closing = closing_rounds(masks, wide[256]["slots"], block_values=256)
    assert (sum(masks) > 0).sum() == 4 and closing <= 4
    rounds = partial(round_count, blocks=16, slots=wide[256]["slots"], round_mode=mode)
    assert wide[256]["rounds"] == rounds(4, closing=closing, block_values=256)
    assert wide[256]["control_rounds"] == rounds(0, closing=closing, block_values=256)
    assert wide[256]["mtu"] == topology.DEFAULT_MTU
    assert by[("p4reduce", "zipf")]["mtu"] == topology.DEFAULT_MTU
    if ("gloo", "ring") in by:
        ring = by[("gloo", "ring")]
        # the ring's payload crossed this host's link: 2(N-1)/N of the tensor each way
        assert ring["tx_bytes"] >= 2 * (workers - 1) / workers * 4 * size
        assert ring["rx_bytes"] >= 2 * (workers - 1) / workers * 4 * size
        # gloo ran at every MTU the plan's jobs' links got, and the fastest is the result
        assert set(ring["seconds_by_mtu"]) == {str(m) for m in gloo_mtus}
        assert ring["seconds"] == min(ring["seconds_by_mtu"].values())
        assert ring["seconds_by_mtu"][str(ring["mtu"])] == ring["seconds"]


def _result(target: str, slots: int | None) -> dict:
    """One p4reduce run as results.json holds it (`slots` None: a file written before runs
    recorded their slots)."""
    run = {
        "case": {
            "target": target,
            "system": "p4reduce",
            "workers": 4,
            "size": 65536,
            "pattern": "dense",
            "density": 1.0,
            "repeat": 3,
        },
        "ok": True,
        "rounds": 1088.0,
    }
    return run if slots is None else {**run, "slots": slots}


def test_a_runs_stamp_is_dirty_only_where_code_differs_from_its_commit(tmp_path):
    """One `make bench` run rewrites docs/ and README.md step by step; a later step's stamp
    must still name the clean commit, and say "-dirty" when code (or anything outside
    the outputs, untracked files too) differs from it."""
    import subprocess

    import suite

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "docs").mkdir()
    for name in ("code.py", "README.md", "docs/benchmarks.md"):
        (tmp_path / name).write_text("1\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    clean = suite.measured_commit(tmp_path)
    assert clean and clean != "?" and not clean.endswith("-dirty")
    (tmp_path / "README.md").write_text("2\n")
    (tmp_path / "docs" / "benchmarks.md").write_text("2\n")
    (tmp_path / "docs" / "new.json").write_text("{}")
    assert suite.measured_commit(tmp_path) == clean
    (tmp_path / "code.py").write_text("2\n")
    assert suite.measured_commit(tmp_path) == clean + "-dirty"
    git("checkout", "-q", "code.py")
    (tmp_path / "stray.py").write_text("")
    assert suite.measured_commit(tmp_path) == clean + "-dirty"
    assert suite.measured_commit(tmp_path / "missing") == "?"


def test_report_reads_the_slots_each_run_used_not_todays_default():
    """A report of an older results file takes the slots that file records, never the
    default of today's code (which an older run need not have used)."""
    import report
    from p4reduce.target import default_slots

    other = default_slots("simple_switch_grpc") + 7  # no default of any kind
    runs = [_result("simple_switch_grpc", None), _result("softswitch", 5)]
    (old, new) = report.results_of({"slots": other, "results": runs})
    assert (old.slots, new.slots) == (other, 5)
    (old, _) = report.results_of({"slots": {"simple_switch_grpc": other}, "results": runs})
    assert old.slots == other
    with pytest.raises(ValueError, match="no slots for the runs on simple_switch_grpc"):
        report.results_of({"results": runs})


@pytest.mark.root
@pytest.mark.mininet
def test_sparse_ratio_pairs_dense_and_sparse_runs(tmp_path):
    import sparse_ratio

    out = tmp_path / "ratio.json"
    args = ["--targets", "softswitch", "--pairs", "2", "--size", "8192", "--workers", "2"]
    assert sparse_ratio.main([*args, "--density", "0.25", "--json", str(out)]) == 0
    pairs = json.loads(out.read_text())["targets"]["softswitch"]["pairs"]
    assert len(pairs) == 2
    for p in pairs:
        assert p["dense"] > 0 and p["shared"] > 0
        assert p["ratio"] == pytest.approx(p["dense"] / p["shared"])


def test_sparse_ratio_refuses_a_density_outside_0_1():
    import sparse_ratio

    with pytest.raises(SystemExit) as info:
        sparse_ratio.main(["--density", "1.5"])
    assert info.value.code == 2


def test_softswitch_pps_times_dense_rounds_and_rounds_with_skips():
    """The in-process switch bench runs both kinds of round on the real program (its own
    assertion: every round, the one a SKIP completes included, multicasts N results)."""
    import softswitch_pps

    for encoding in ("packed", "lanes"):
        pps = softswitch_pps.in_process(workers=3, slots=2, rounds=2, encoding=encoding)
        assert set(pps) == {3, 1} and all(v > 0 for v in pps.values()), (encoding, pps)


def test_skip_ratios_from_packet_rates():
    """A round of 1 DATA + 3 SKIPs at the dense rate costs what a dense round costs; at
    half the rate it lasts 2 s against 1 s, and each SKIP (2 - 0.25) / 3 s against 0.25 s."""
    from softswitch_pps import skip_ratios

    assert skip_ratios({4: 4.0, 1: 4.0}, 4) == pytest.approx((1.0, 1.0))
    assert skip_ratios({4: 4.0, 1: 2.0}, 4) == pytest.approx(((1.75 / 3) / 0.25, 2.0))


def test_round_cost_in_process_counts_every_packet_of_every_round():
    """bench/round_cost.py's in-process part on a small job: the switch meter sees every
    packet the four workers send, by type -- each rank's non-zero blocks as DATA, the other
    blocks of the union as SKIPs, one ANNOUNCE per used slot -- plus one per
    retransmission; and the ratio rows are per case other than the first."""
    import numpy as np
    import round_cost

    specs = ["dense", "independent:0.25"]
    cases = [round_cost.parse_case(s, 64 * 200) for s in specs]
    rows = round_cost.in_process(cases, specs, passes=1, window=16)
    assert [r.case for r in rows] == specs
    for spec, c, row in zip(specs, cases, rows):
        blocks = np.stack(
            [np.asarray(x).reshape(-1, 64).any(axis=1) for x in round_cost.make_inputs(c)]
        )
        union, used = (
            int(blocks.any(axis=0).sum()),
            slots_for_call(blocks.shape[1], 64, block_values=64),
        )
        n = {k: v * row.rounds for k, v in row.packets.items()}
        assert row.rounds == union + used, spec
        assert sum(n.values()) == pytest.approx(4 * row.rounds + row.retransmissions), spec
        expected = {
            "DATA": blocks.sum(),
            "SKIP": 4 * union - blocks.sum(),
            "ANNOUNCE": 4 * used,
        }
        for kind, count in expected.items():
            got = n.get(kind, 0.0)
            assert count - 1e-6 <= got <= count + row.retransmissions + 1e-6, (spec, kind)
        assert row.wall > 0 and row.switch_cpu > 0 and row.worker_cpu > 0, spec
    assert set(round_cost.ratios(rows, specs)) == {"independent:0.25"}


def test_suite_passes_keep_the_fastest_and_never_hide_a_failure():
    """--passes: a case's result is its fastest pass, listing every pass's seconds; a
    pass that failed is the result whatever the others measured."""
    from suite import Case, Result, best_pass

    c = Case("softswitch", "p4reduce", 4, 1024, "dense", 1.0, 1)
    runs = [Result(c, ok=True, seconds=s) for s in (3.0, 2.0, 2.5)]
    best = best_pass(runs)
    assert best.seconds == 2.0 and best.passes == [3.0, 2.0, 2.5]
    failed = Result(c, ok=False, error="rank 1: timed out", seconds=0.0)
    assert best_pass([Result(c, ok=True, seconds=1.0), failed]) is failed
    assert best_pass([Result(c, ok=True, seconds=1.0)]).passes == []


def test_round_cost_times_each_kind_of_packet():
    """Both kinds of packet, completing their round or not, are timed on the real program."""
    import round_cost

    times = round_cost.packet_times(rounds=2, slots=2)
    assert set(times) == {"DATA", "DATA completing", "SKIP", "SKIP completing"}
    assert all(t > 0 for t in times.values())


REPO = BENCH.parent
# a QUICK run's results.json (make bench QUICK=1), trimmed to one target's headline cases
QUICK_RESULTS = Path(__file__).resolve().parent / "data" / "bench-results-quick.json"


def _speed(gloo_seconds: float, seconds: float) -> str:
    """gloo's time ÷ a run's, as the README states it (computed here, not by report)."""
    x = gloo_seconds / seconds
    y = x if x >= 1 else 1 / x
    n = f"{y:.2f}" if y < 100 else f"{y:.0f}"  # two decimals below 100×, none above
    return f"{n}× faster" if x >= 1 else f"{n}× slower"


def test_readme_numbers_are_the_results_they_come_from():
    """The README's block states each headline run's time and its ratio to gloo's, gloo's
    MTU and the other MTU's time, the command, commit and date that made them -- every
    figure read from the results file."""
    import report

    data = json.loads(QUICK_RESULTS.read_text())
    text = report.readme_block(data)
    assert f"`{data['command']}`" in text
    assert data["environment"]["commit"] in text and data["environment"]["date"] in text
    runs = {
        (r["case"]["target"], r["case"]["system"], r["case"]["pattern"], r["case"]["density"]): r
        for r in data["results"]
        if r["case"]["workers"] == 4 and r["ok"] and r["case"].get("encoding") != "lanes"
    }
    targets = sorted({t for t, *_ in runs})
    assert targets
    for target in targets:
        gloo = runs[(target, "gloo", "ring", 1.0)]
        others = [m for m in gloo["seconds_by_mtu"] if int(m) != gloo["mtu"]]
        assert others
        mtu = f"{gloo['mtu']:,}".replace(",", " ")
        assert f"{report.secs(gloo['seconds'])} at MTU {mtu}" in text
        for other in others:
            assert f": {report.secs(gloo['seconds_by_mtu'][other])}" in text
        for key in (("dense", 1.0), ("shared", 0.1), ("zipf", 0.0)):
            r = runs[(target, "p4reduce", *key)]
            speed = _speed(gloo["seconds"], r["seconds"])
            assert f"{report.secs(r['seconds'])} ({speed})" in text


def test_readme_numbers_block_is_what_the_committed_results_give():
    """README.md's generated block equals what docs/bench/headline.json produces: no figure
    in it was typed by hand or left behind by a newer run (make bench rewrites both)."""
    import report

    data = json.loads((REPO / "docs" / "bench" / "headline.json").read_text())
    readme = REPO / "README.md"
    assert report.block_of(readme, report.README_BEGIN, report.README_END) == (
        report.readme_block(data)
    ), "README.md's numbers differ from docs/bench/headline.json: run make bench"


def test_readme_states_p4reduce_at_its_best_block_size_and_at_64():
    """The headline run's README block: per target, round mode and case, p4reduce's time at
    64 values per block and at the fastest block size measured (named), each with its
    ratio to gloo's time at gloo's faster MTU -- the best found here, not by report."""
    import report

    data = json.loads((REPO / "docs" / "bench" / "headline.json").read_text())
    text = report.readme_block(data)
    runs = [r for r in data["results"] if r["ok"]]
    gloo = {r["case"]["target"]: r for r in runs if r["case"]["system"] == "gloo"}
    assert gloo
    modes = {r["case"].get("round_mode", "every_rank") for r in runs}
    for (target, g), mode in itertools.product(gloo.items(), modes):
        assert g["mtu"] == int(min(g["seconds_by_mtu"], key=g["seconds_by_mtu"].get))
        for pattern in ("dense", "shared", "independent", "zipf"):
            mine = [
                r
                for r in runs
                if r["case"]["target"] == target
                and r["case"]["system"] == "p4reduce"
                and r["case"]["pattern"] == pattern
                and r["case"].get("round_mode", "every_rank") == mode
            ]
            assert {r["case"]["block_values"] for r in mine} >= {64, 2048}
            at64 = next(r for r in mine if r["case"]["block_values"] == 64)
            best = min(mine, key=lambda r: r["seconds"])
            speed = _speed(g["seconds"], at64["seconds"])
            assert f"{report.secs(at64['seconds'])} ({speed})" in text
            k = f"{best['case']['block_values']:,}".replace(",", " ")
            speed = _speed(g["seconds"], best["seconds"])
            assert f"{report.secs(best['seconds'])} ({speed}) at {k} values" in text


def test_benchmarks_md_block_size_section_is_what_the_headline_run_gives():
    """docs/benchmarks.md's block-size section and its density table are what
    docs/bench/headline.json and docs/bench/block_density.json give."""
    import block_density
    import report

    docs = REPO / "docs" / "benchmarks.md"
    data = json.loads((REPO / "docs" / "bench" / "headline.json").read_text())
    assert report.block_of(docs, report.BLOCKS_BEGIN, report.BLOCKS_END) == (
        report.blocks_markdown(data)
    ), "docs/benchmarks.md's block-size section differs from docs/bench/headline.json"
    density = json.loads((REPO / "docs" / "bench" / "block_density.json").read_text())
    assert report.block_of(docs, block_density.BEGIN, block_density.END) == (
        block_density.markdown(density)
    ), "docs/benchmarks.md's density table differs from docs/bench/block_density.json"
    # ... and the density table's times are the committed headline's, at every size it ran
    assert density["headline_date"] == data["environment"]["date"], "density table is stale"
    assert density["times"] == block_density.headline_times(data)
    assert density["sizes"] == list(block_density.SIZES)
    assert all(str(k) in density["zipf"] for k in block_density.SIZES)


def test_the_block_density_headers_gloo_times_give_each_one_unit():
    """block_density's header names gloo's time per target with its unit, once, as the
    suite's gloo rows do (report.secs_unit): "7.76 ms", never "7.76 ms s"."""
    import block_density

    data = json.loads((REPO / "docs" / "bench" / "block_density.json").read_text())
    for v in data["times"].values():
        v["gloo"] = 0.00776
    head = block_density.markdown(data).splitlines()[0]
    assert "7.76 ms" in head and "ms s" not in head, head


@pytest.mark.parametrize("seconds", [0.115, 0.0101, 0.00999, 0.00776, 0.0004])
def test_a_gloo_rows_other_mtus_give_each_time_one_unit(seconds):
    """gloo's row names its other MTUs' times with their unit, once: seconds at 10 ms and
    up, milliseconds below (report.secs leaves the seconds' unit to its caller)."""
    import report

    r = report.Result(
        report.Case("softswitch", "gloo", 4, 1 << 20, "ring", 1.0, 1),
        ok=True,
        mtu=9000,
        seconds_by_mtu={"1500": seconds, "9000": 0.01},
    )
    name = report.gloo_name(r)
    other = name.split("→ ", 1)[1].split(")")[0]
    assert other.count(" s") + other.count(" ms") == 1, name
    assert other.endswith(" ms") == (seconds < 0.01), name
    assert float(other.split()[0]) == pytest.approx(
        seconds * (1e3 if seconds < 0.01 else 1), abs=6e-3
    )


def test_gloo_runs_at_every_mtu_a_headline_job_uses():
    """gloo's links are p4reduce's: every headline block size's links are at one of
    GLOO_MTUS -- the smallest of them that carries its DATA frames (48 + 4K bytes of IPv4,
    written out here) -- and gloo runs at no MTU that no headline job uses."""
    import suite
    from p4reduce.wire import link_mtu

    used = set()
    for k in suite.HEADLINE_BLOCK_VALUES:
        carrying = [m for m in suite.GLOO_MTUS if m >= 48 + 4 * k]
        assert carrying, f"no gloo MTU carries {k} values per block"
        assert link_mtu(k) == min(carrying), k
        used.add(min(carrying))
    assert used == set(suite.GLOO_MTUS)
    assert {1500, 9000, 48 + 4 * 4096, 48 + 4 * 8192, 48 + 4 * 16000} <= used
    assert max(used) <= 65535  # IPv4's total length and veth's largest MTU
    # a link a job has raised stays up for a smaller job (the demo's links never shrink)
    assert link_mtu(64, 32816) == 32816 and link_mtu(4096, 9000) == 16432


def test_a_sweep_size_without_a_committed_result_is_named_not_filled():
    """The block-size section names each size of the headline sweep the results lack
    (a results file older than the sweep), and shows no row for it; with every size
    measured it names none. Checked on the committed run and on it without its widest
    size's runs."""
    import report
    import suite

    data = json.loads((REPO / "docs" / "bench" / "headline.json").read_text())
    measured = {r["case"]["block_values"] for r in data["results"] if "block_values" in r["case"]}
    widest = max(measured)
    trimmed = {
        **data,
        "results": [r for r in data["results"] if r["case"].get("block_values") != widest],
    }
    for results, have in ((data, measured), (trimmed, measured - {widest})):
        text = report.blocks_markdown(results)
        missing = [k for k in suite.HEADLINE_BLOCK_VALUES if k not in have]
        names = [report.mtu_text(k) for k in missing]
        said = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)
        assert (f"Not in this run: {said} values per block" in text) == bool(missing)
        for k in suite.HEADLINE_BLOCK_VALUES:
            row = f"\n| {report.mtu_text(k)} | "
            assert (row in text) == (k in have), k


def test_block_density_grows_with_the_block_and_the_zipf_rows_stay_64_values():
    """A wider block is non-zero when any of its values is: the Zipf gradient's density
    grows with the block size, and at 64 values (one row per block) it is the fraction of
    rows looked up."""
    import block_density
    import suite

    d = block_density.zipf_density((64, 256, 2048), workers=2, size=64 * 1024)
    own = [d[k][0] for k in ("64", "256", "2048")]
    assert own == sorted(own) and own[0] < own[-1] <= 1
    c = suite.Case("softswitch", "p4reduce", 2, 64 * 1024, "zipf", 0.0, 1, block_values=2048)
    rows = suite.make_inputs(c)[0].reshape(-1, 64)
    assert rows.any(axis=1).mean() == pytest.approx(d["64"][0], abs=0.05)


def test_case_block_size_is_in_its_label_key_and_results():
    """A case's block size: named in its label when not 64, part of its key, recorded in
    the results; a file from before block sizes reads as 64."""
    import report
    import suite

    c = suite.Case("softswitch", "p4reduce", 4, suite.M, "shared", 0.1, 1)
    wide = suite.Case("softswitch", "p4reduce", 4, suite.M, "shared", 0.1, 1, block_values=2048)
    assert c.label() == "softswitch p4reduce 4w 1 M shared 0.1"
    assert wide.label() == "softswitch p4reduce 4w 1 M shared 0.1 K2048"
    assert c.key != wide.key
    old = _result("softswitch", 5)
    (r,) = report.results_of({"results": [old]})
    assert r.case.block_values == protocol.BLOCK_VALUES
    plan = suite.headline_plan(["softswitch"], have_torch=False)
    assert {x.block_values for x in plan} == set(suite.HEADLINE_BLOCK_VALUES)


def test_benchmarks_md_block_is_what_the_committed_results_give():
    """docs/benchmarks.md's generated section equals what docs/bench/results.json produces
    with today's report code (and the committed plots)."""
    import report

    data = json.loads((REPO / "docs" / "bench" / "results.json").read_text())
    images = {p.stem: f"bench/{p.name}" for p in sorted((REPO / "docs" / "bench").glob("*.png"))}
    docs = REPO / "docs" / "benchmarks.md"
    text = report.markdown(data, images).strip("\n")
    assert report.block_of(docs, report.BEGIN, report.END) == text, (
        "docs/benchmarks.md's generated section differs from docs/bench/results.json: "
        "run make bench (or bench/suite.py --from-json docs/bench/results.json --out "
        "docs/bench --docs)"
    )


def test_benchmarks_md_pps_table_is_what_the_committed_run_gives():
    """docs/benchmarks.md's packets/s table equals what bench/softswitch_pps.py makes of
    docs/bench/softswitch_pps.json (make bench rewrites both): no hand-copied figure."""
    import report
    import softswitch_pps

    data = json.loads((REPO / "docs" / "bench" / "softswitch_pps.json").read_text())
    text = softswitch_pps.markdown(data)
    for enc in data["encodings"]:
        for by_enc in data["rows"].values():
            assert f"{by_enc[enc]:,.0f}".replace(",", " ") in text
    docs = REPO / "docs" / "benchmarks.md"
    assert report.block_of(docs, softswitch_pps.BEGIN, softswitch_pps.END) == text, (
        "docs/benchmarks.md's packets/s table differs from docs/bench/softswitch_pps.json: "
        "run bench/softswitch_pps.py --from-json docs/bench/softswitch_pps.json --markdown"
    )


def test_softswitch_pps_markdown_names_every_row_and_what_was_not_measured():
    import softswitch_pps

    data = {
        "command": "x",
        "date": "d",
        "load": [2.0, 1.0],
        "workers": 4,
        "slots": 32,
        "rounds": 7,
        "block_values": 64,
        "encodings": ["packed"],
        "rows": {"a": {"packed": 1234.4}, "b": {"packed": 99.6}},
        "skip_ratios": {"packed": [1.5, 0.5]},
        "missing": ["simple_switch_grpc: not on PATH"],
    }
    text = softswitch_pps.markdown(data)
    assert "| a | 1 234 |" in text and "| b | 100 |" in text
    assert "load average 1.0–2.0" in text and "7 rounds" in text
    assert "1.50× a DATA" in text and "0.50× a dense one" in text
    assert "not measured: simple_switch_grpc" in text


def test_benchmarks_md_memory_table_is_what_the_committed_run_gives():
    """docs/benchmarks.md's worker-memory table equals what bench/memory.py makes of
    docs/bench/memory.json (make bench rewrites both)."""
    import memory
    import report

    data = json.loads((REPO / "docs" / "bench" / "memory.json").read_text())
    text = memory.markdown(data)
    for case in data["cases"]:
        for path in ("in_process", "raw_socket"):
            if path in case and case[path]["ratio"] == case[path]["ratio"]:
                assert f"{case[path]['ratio']:.2f}" in text
    docs = REPO / "docs" / "benchmarks.md"
    assert report.block_of(docs, memory.BEGIN, memory.END) == text, (
        "docs/benchmarks.md's memory table differs from docs/bench/memory.json: "
        "run bench/memory.py --from-json docs/bench/memory.json --markdown"
    )


def committed_run(script, doc: str, name: str) -> tuple[dict, str]:
    """A make-bench script's committed results (docs/bench/<name>.json) and the section it
    makes of them, after checking that `doc` holds exactly that section between the
    script's markers: no figure there that the committed run does not give."""
    import report

    data = json.loads((REPO / "docs" / "bench" / f"{name}.json").read_text())
    text = script.markdown(data)
    assert report.block_of(REPO / "docs" / doc, script.BEGIN, script.END) == text, (
        f"docs/{doc}'s section differs from docs/bench/{name}.json: run "
        f"bench/{script.__name__}.py --from-json docs/bench/{name}.json --markdown"
    )
    return data, text


def test_benchmarks_md_per_packet_counts_are_what_the_committed_run_gives():
    """docs/benchmarks.md's per-packet trace counts equal what bench/primitives.py makes of
    docs/bench/primitives.json (make bench rewrites both), each encoding's mean shown."""
    import primitives

    data, text = committed_run(primitives, "benchmarks.md", "primitives")
    for enc, r in data["encodings"].items():
        assert f"| {enc} | {r['primitive_consumed']:.0f} / " in text
        assert f"{r['register_per_data_packet']:.1f} |" in text


def test_benchmarks_md_round_cost_section_is_what_the_committed_run_gives():
    """docs/benchmarks.md's SKIP-round section equals what bench/round_cost.py makes of
    docs/bench/round_cost.json (make bench rewrites both): each case's rounds and each
    kind of packet's switch time, from the run's rows, and the run's command and date."""
    import statistics

    import round_cost

    data, text = committed_run(round_cost, "benchmarks.md", "round_cost")
    assert f"`{data['command']}` on {data['date']}" in text
    for part in ("in-process", "mininet"):
        for case in {r["case"] for r in data.get(part, {}).get("rows", [])}:
            rows = [r for r in data[part]["rows"] if r["case"] == case]
            wall = statistics.median(r["wall"] for r in rows) * 1e6
            assert f"| {part} | {case} | {rows[0]['rounds']:.0f} | {wall:.0f} |" in text
    for kind, seconds in data.get("packet_times", {}).items():
        assert f"{kind} {seconds * 1e6:.1f} µs" in text


def test_benchmarks_md_wide_blocks_section_is_what_the_committed_run_gives():
    """docs/benchmarks.md's wide-block table equals what bench/wide_blocks.py makes of
    docs/bench/wide_blocks.json (make bench rewrites both): every measured cell's packets/s
    from the run's rows, and the run's command and date."""
    import wide_blocks

    data, text = committed_run(wide_blocks, "benchmarks.md", "wide_blocks")
    assert f"`{data['command']}` on {data['date']}" in text
    for r in data["rows"]:
        assert f"| {r['packets_per_s']:,.0f} |".replace(",", " ") in text


def test_hostlib_md_worker_loop_table_is_what_the_committed_run_gives():
    """docs/hostlib.md's worker-loop table equals what bench/hostlib_pps.py makes of
    docs/bench/hostlib_pps.json (make bench rewrites both): each loop's rate and its share
    of the C loop's, from the run's rates."""
    import hostlib_pps
    import report

    data, text = committed_run(hostlib_pps, "hostlib.md", "hostlib_pps")
    base = data["rates"][hostlib_pps.C_ROW]
    for rate in data["rates"].values():
        assert f"| {report.count_text(rate)} | {rate / base:.2f} |" in text


def test_hostlib_md_slot_window_table_is_what_the_committed_run_gives():
    """docs/hostlib.md's table of calls at each slot count equals what bench/slot_window.py
    makes of docs/bench/slot_window.json (make bench rewrites both), every measured call's
    seconds in it."""
    import slot_window

    data, text = committed_run(slot_window, "hostlib.md", "slot_window")
    rows = text.splitlines()[4:]
    cases = len(slot_window.PATTERNS) * len(data["modes"])
    assert len(rows) == len(data["targets"]) * len(data["block_values"]) * cases
    for seconds in data["seconds"].values():
        assert f" {seconds:.3f} |" in text or f" **{seconds:.3f}** |" in text
    for row in rows:  # the fastest of a row is the one in bold
        cells = [c.strip() for c in row.split("|")[2:-1]]
        bold = [c for c in cells if c.startswith("**")]
        assert len(bold) == 1, row
        assert float(bold[0].strip("*")) == min(float(c.strip("*")) for c in cells if c != "–")


def test_benchmarks_md_click_block_sizes_section_is_the_committed_sweep():
    """docs/benchmarks.md's click example at each block size is what bench/clicks.py makes
    of docs/bench/clicks_blocks.json: never a hand-written figure."""
    import clicks
    import report

    block = report.block_of(REPO / "docs" / "benchmarks.md", clicks.SWEEP_BEGIN, clicks.SWEEP_END)
    sweep = REPO / "docs" / "bench" / "clicks_blocks.json"
    data = json.loads(sweep.read_text())
    assert block == clicks.markdown_sweep(data)
    # ... of every block size the headline measures, each on the links its job needs,
    # gloo at its fastest of those MTUs, from a committed tree
    import suite
    from p4reduce.wire import link_mtu

    assert [r["block_values"] for r in data["runs"]] == list(suite.HEADLINE_BLOCK_VALUES)
    for r in data["runs"]:
        assert r["mtu"]["p4reduce"] == link_mtu(r["block_values"]), r["block_values"]
        by_mtu = r["gloo_median_step_ms_by_mtu"]
        assert str(r["mtu"]["p4reduce"]) in by_mtu
        assert by_mtu[str(r["mtu"]["gloo"])] == min(by_mtu.values())
        assert not r["commit"].endswith("-dirty"), "measured on an uncommitted tree"


def test_click_sweep_table_has_a_row_per_run_from_its_counters():
    """bench/clicks.py's block-size table, made from the committed run of the example
    (docs/bench/clicks.json) as one run of a sweep: a row with its block size, both
    backends' time per step and their ratio, the Worker's packets and density."""
    import clicks
    import report

    run = json.loads((REPO / "docs" / "bench" / "clicks.json").read_text())
    p, g = run["backends"]["p4reduce"], run["backends"]["gloo"]
    text = clicks.markdown_sweep({"command": "c", "date": "d", "load": [1.0, 2.0], "runs": [run]})
    row = text.splitlines()[-1]
    assert row.startswith(f"| {report.mtu_text(run['block_values'])} |")
    assert f"| {report.count_text(p['median_step_ms'])} |" in row
    assert f"| {p['median_step_ms'] / g['median_step_ms']:.2f} |" in row
    assert f"| {report.pct(p['mean_density_own'])} |" in row


def test_memory_markdown_shows_missing_paths_as_dashes():
    import memory

    nan = float("nan")
    data = {
        "command": "c",
        "date": "d",
        "load": [1.0, 3.0],
        "slots": 256,
        "raw_not_run": "needs root",
        "cases": [
            {"size": 1000000, "dtype": "float32", "density": 0.1, "in_process": {"ratio": 2.5}},
            {"size": 20, "dtype": "int32", "density": 1.0, "in_process": {"ratio": nan}},
        ],
    }
    text = memory.markdown(data)
    assert "| 1 000 000 | float32 | 0.1 | 2.50 | – |" in text
    assert "| 20 | int32 | 1 | – | – |" in text
    assert "Raw-socket cases not run: needs root." in text
    assert "load average 1.0–3.0" in text


def test_every_p4reduce_case_runs_in_both_round_modes_named():
    """The suite and the headline measure each p4reduce case in silent and every-rank
    rounds, the mode part of the case's key and label (never the target's default)."""
    import suite

    for plan in (
        suite.headline_plan(["softswitch"], have_torch=False),
        suite.plan(["softswitch"], quick=True, have_torch=False)[0],
    ):
        modes: dict[tuple, set] = {}
        for c in plan:
            if c.system == "p4reduce":
                modes.setdefault(replace(c, round_mode="").key, set()).add(c.round_mode)
        assert modes and all(m == {suite.SILENT, suite.EVERY_RANK} for m in modes.values())
    c = suite.Case("softswitch", "p4reduce", 4, suite.M, "dense", 1.0, 1)
    silent = replace(c, round_mode=suite.SILENT)
    assert silent.key != c.key and silent.label() == c.label() + " silent"


def test_projection_counts_a_silent_calls_closing_rounds():
    """A silent call's rounds are its blocks plus an announce round per slot and a closing
    round per slot with a block: the projection's data rounds are the same as an
    every-rank call's of the same blocks (one announce round per slot), so the two
    project to the same time. The control rounds are the Worker's count where the result
    records it (a sparse call whose blocks are in 10 of its 16 slots), else a closing round
    on every slot."""
    import report
    import suite

    blocks, slots = 16 * 1024, 16
    every = suite.Case("softswitch", "p4reduce", 4, 64 * blocks, "dense", 1.0, 1)
    silent = replace(every, round_mode=suite.SILENT)
    runs = [
        suite.Result(c, ok=True, rounds=blocks + k * slots, slots=slots, tx_bytes=1e6, rx_bytes=1e6)
        for c, k in ((every, 1), (silent, 2))
    ]
    assert [report.control_rounds(r) for r in runs] == [slots, 2 * slots]
    assert report.projected(runs[0]) == pytest.approx(report.projected(runs[1]))
    assert report.packet_bound(replace(runs[1], nonzero_blocks=100.0)) == 100 + 2 * slots
    sparse = [replace(r, rounds=100 + k * slots - (k - 1) * 6) for r, k in zip(runs, (1, 2))]
    sparse[1].control_rounds = slots + 10.0
    assert [report.control_rounds(r) for r in sparse] == [slots, slots + 10]
    assert report.projected(sparse[0]) == pytest.approx(report.projected(sparse[1]))


@pytest.mark.root
@pytest.mark.mininet
def test_loss_recovery_and_fairness_publish_their_sections(tmp_path):
    """Both scripts measure each configuration in both round modes on a tiny job and
    write their JSON; report.publish puts each one's table between its target's markers
    of docs/benchmarks.md (a copy here), and the table is what the JSON gives."""
    import shutil

    import fairness
    import loss_recovery
    import report

    docs = tmp_path / "benchmarks.md"
    shutil.copy(REPO / "docs" / "benchmarks.md", docs)
    tiny = ["--workers", "2", "--size", "4096", "--dtypes", "float32", "--densities", "0.25"]
    loss_args = [*tiny, "--losses", "0", "0.05", "--repeat", "1", "--rounds", "1"]
    loss_args += ["--slot-counts", "4", "--spurious-densities", "0.25"]
    fair_args = ["--workers", "2", "--size", "4096", "--pairs", "2:8", "--repeat", "1"]
    fair_args += ["--seconds", "0.5", "--rounds", "2"]
    for script, args in ((loss_recovery, loss_args), (fairness, fair_args)):
        out = tmp_path / f"{script.__name__}.json"
        assert script.main([*args, "--json", str(out)]) == 0
        data = json.loads(out.read_text())
        rows = data.get("rows") or data["loss"] + data["spurious"]
        assert {r["round_mode"] for r in rows} == {"silent", "every_rank"}, script.__name__
        text = script.markdown(data)
        assert all(f"| {m} |" in text for m in ("silent", "every_rank"))
        report.publish(data, text, None, script.markers(data["target"]), docs=docs)
        assert report.block_of(docs, *script.markers(data["target"])) == text
    loss = json.loads((tmp_path / "loss_recovery.json").read_text())["loss"]
    # each configuration against its own round mode's lossless median
    assert [r["ratio"] for r in loss if r["loss"] == 0] == [1.0, 1.0]


def test_pytorch_md_click_section_is_what_the_committed_run_gives():
    """docs/pytorch.md's generated section is what docs/bench/clicks.json gives
    (make bench-example rewrites both), and it states p4reduce's packets per step against
    the rank's non-zero blocks + control and both backends' time per step."""
    import clicks
    import report

    runs = {"softswitch": REPO / "docs" / "bench" / "clicks.json"}
    other = REPO / "docs" / "bench" / "clicks_simple_switch_grpc.json"
    if other.exists():  # make bench runs it where simple_switch_grpc is installed
        runs["simple_switch_grpc"] = other
    for target, path in runs.items():
        data = json.loads(path.read_text())
        assert data["target"] == target
        text = clicks.markdown(data)
        assert report.block_of(clicks.DOCS, *clicks.markers(target)) == text
        p = data["backends"]["p4reduce"]
        bound = p["nonzero_blocks_per_step_per_rank"] + p["control_packets_per_step_per_rank"]
        assert p["packets_over_bound"] == pytest.approx(p["packets_per_step_per_rank"] / bound)
        assert f"{p['packets_over_bound']:.3f}" in text and data["round_mode"] == "silent"
        if target == "softswitch":  # README's line on the example is this run's
            line = clicks.readme_line(data)
            assert report.block_of(clicks.README, clicks.README_BEGIN, clicks.README_END) == line
            ratio = p["median_step_ms"] / data["backends"]["gloo"]["median_step_ms"]
            assert f"{ratio:.2f} of gloo's time" in line


def test_loss_and_fairness_sections_are_what_their_committed_runs_give():
    """Each target's loss-recovery and fairness section of docs/benchmarks.md is what its
    committed JSON gives (make bench rewrites both); a target not yet run has none."""
    import fairness
    import loss_recovery
    import report

    docs = REPO / "docs" / "benchmarks.md"
    found = 0
    for script, stem in ((loss_recovery, "loss_recovery"), (fairness, "fairness")):
        for target in ("softswitch", "simple_switch_grpc"):
            path = REPO / "docs" / "bench" / f"{stem}_{target}.json"
            if not path.exists():
                continue
            found += 1
            data = json.loads(path.read_text())
            assert report.block_of(docs, *script.markers(target)) == script.markdown(data)
    assert found


def test_goals_table_reads_each_goal_from_its_runs():
    """The headline's goals: gloo ÷ p4reduce at the best block size, dense ÷ sparse at 64
    values against its bound (0.8 / union density for Zipf), each met or not by the
    measured value -- worked out here from made-up runs."""
    import report
    import suite

    def run(system, pattern, density, k, seconds, **kw) -> suite.Result:
        c = suite.Case("softswitch", system, 4, suite.M, pattern, density, 1, block_values=k)
        mode = suite.SILENT if system == "p4reduce" else suite.EVERY_RANK
        return suite.Result(replace(c, round_mode=mode), ok=True, seconds=seconds, **kw)

    runs = [
        run("gloo", "ring", 1.0, 64, 1.0),
        run("p4reduce", "dense", 1.0, 64, 10.0, rounds=16_512, slots=64),
        run("p4reduce", "dense", 1.0, 2048, 0.5, rounds=544, slots=16),
        run("p4reduce", "shared", 0.1, 64, 1.0, rounds=1_766, slots=64),
        run("p4reduce", "independent", 0.1, 64, 2.0, rounds=5_700, slots=64),
        run("p4reduce", "zipf", 0.0, 64, 1.0, union_density=0.125, slots=64),
    ]
    text = "\n".join(report.goals_table(report.Index(runs), "softswitch", 4, suite.M))
    assert "| dense, gloo ÷ p4reduce (best block size) | 2.00 at 2 048 values | 1.00 | yes |" in (
        text
    )
    assert "| 10 % independent, dense ÷ sparse at 64 values | 5.00 | 7.00 | no |" in text
    assert "| 10 % same blocks, dense ÷ sparse at 64 values | 10.00 | 9.00 | yes |" in text
    assert "| Zipf, dense ÷ sparse at 64 values | 10.00 | 6.40 | yes |" in text
    # time per round: independent 2.0 s / 5 700 against dense 10 s / 16 512
    assert f"| {report.ratio((2.0 / 5_700) / (10.0 / 16_512))} | at most 1.00 | yes |" in text


def test_benchmarks_md_call_cpu_table_is_what_the_committed_run_gives():
    """docs/benchmarks.md's table of where a call's CPU goes equals what
    bench/call_breakdown.py makes of docs/bench/call_breakdown.json (make bench rewrites
    both): gloo's row and p4reduce's on each target, every call's wall time and CPU from
    the run's rows."""
    import call_breakdown

    data, text = committed_run(call_breakdown, "benchmarks.md", "call_breakdown")
    assert f"`{data['command']}` on {data['date']}" in text
    for target, rows in data["rows"].items():
        assert any(r["label"].startswith("gloo ring") for r in rows), target
        for r in rows:
            assert f"| {target}, {r['label']} | {1e3 * r['wall']:.1f} |" in text
            assert f"| {1e3 * r['worker_cpu']:.1f} ({1e3 * r['worker_sys']:.1f}) |" in text


def test_call_breakdown_cuts_the_switch_cpu_at_the_calls_windows():
    """bench/call_breakdown.py's in-call switch CPU: each call's window runs from its
    earliest rank's start to its latest rank's end, and the sampled CPU is interpolated
    at the window's edges, per thread (the busiest thread's share apart)."""
    import call_breakdown
    import suite

    spans = [[[1.0, 2.0], [3.0, 3.5]], [[1.2, 2.5], [2.9, 3.4]]]
    assert suite.call_windows(spans) == [(1.0, 2.5), (2.9, 3.5)]
    s = call_breakdown.CpuSampler(pid=0)
    # thread "a" runs 1 s of CPU per second from t=0, thread "b" only from t=2
    s.times = [0.0, 2.0, 4.0]
    s.samples = [{"a": 0}, {"a": int(2e9), "b": 0}, {"a": int(4e9), "b": int(2e9)}]
    total, busiest = s.between(1.0, 3.0)
    assert total == pytest.approx(3.0)  # a: 2 s, b: 1 s (absent before t=2: 0)
    assert busiest == pytest.approx(2.0)


def test_call_cpu_replays_a_ranks_recorded_calls_alone_and_finds_a_divergence(tmp_path):
    """bench/call_cpu.py --replay: rank 0's batches recorded from a real in-process job
    (the P4 program on softswitch, four Workers), saved and loaded again, give a fresh
    Worker the same calls: each replayed call returns the recorded result bit for bit and
    is timed; a recording that lost a batch is a divergence, said, not a wait."""
    import call_cpu

    rec = call_cpu.Recorder()
    call_cpu.call_cpu(64, 8, 4, 4096, 2, 0.3, "silent", "independent", recorder=rec)
    assert len(rec.calls) == 3 and len(rec.results) == 2  # the warm-up call, then two
    assert all(rec.calls[k] for k in (1, 2))
    path = tmp_path / "recording.npz"
    rec.save(str(path))
    again = call_cpu.Recorder.load(str(path))
    assert again.descriptor == rec.descriptor
    assert [len(c) for c in again.calls] == [len(c) for c in rec.calls]
    cpu = call_cpu.replay(again, 2)
    assert [len(c) for c in cpu] == [2, 2] and all(t > 0 for c in cpu for t in c)
    del again.calls[2][-1]  # the last batch of the second call: its last results
    with pytest.raises(RuntimeError, match="replay diverged: call 2"):
        call_cpu.replay(again, 1)


def test_pytorch_md_drift_section_is_the_committed_replay_and_holds_the_examples_tolerances():
    """docs/pytorch.md's "The late drift" table is what bench/clicks_drift.py makes of
    docs/bench/clicks_drift.json, measured against the tolerances the example checks with
    today; and they are the right two: a correct allreduce's training (float32 sums in rank
    order) passes the final tolerance at a step but keeps within the step tolerance and
    ends within the final one, as p4reduce's does, at 64 values per block and at the
    example's block size."""
    import clicks_drift
    import report

    examples = REPO / "examples"
    sys.path.insert(0, str(examples))
    try:
        import clicks_switch
    finally:
        sys.path.remove(str(examples))
    data = json.loads((REPO / "docs" / "bench" / "clicks_drift.json").read_text())
    text = clicks_drift.markdown(data)
    assert report.block_of(clicks_drift.DOCS, clicks_drift.BEGIN, clicks_drift.END) == text
    sizes = {r["block_values"] for r in data["runs"]}
    assert sizes >= {64, clicks_switch.EXAMPLE_BLOCK_VALUES}
    for r in data["runs"]:
        assert r["step_tolerance"] == clicks_switch.STEP_TOLERANCE
        assert r["final_tolerance"] == clicks_switch.FINAL_TOLERANCE
        assert r["final_steps"] == clicks_switch.FINAL_STEPS
        assert r["max_error_over_bound"] <= 1.0
        correct = r["loss_difference"]["float32-exact"]
        assert correct["first_above"] is not None  # one tolerance a step would fail it
        for pair in ("float32-exact", "p4reduce-exact", "p4reduce-float32"):
            d = r["loss_difference"][pair]
            assert d["max"] <= r["step_tolerance"] and d["final"] <= r["final_tolerance"], pair
