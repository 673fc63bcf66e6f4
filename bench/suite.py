#!/usr/bin/env python3
"""`make bench`: p4reduce against gloo on the same Mininet hosts, density sweep, scaling,
a line-rate projection; tables (markdown) and plots (PNG).

Every run is the whole system: Mininet hosts, the P4 program on the switch (softswitch, and
simple_switch_grpc where installed), the controller, one process per rank. p4reduce ranks
are the demo's workers (p4net.worker through p4net.demo's DemoNetwork);
gloo ranks (bench/gloo_rank.py) run `torch.distributed.all_reduce` in the same hosts, over
the same links and switch (plain L2 forwarding), on the same tensors, with the links at
each of GLOO_MTUS (every MTU a headline job's links are set to: 1 500, 9 000 and the 16 432,
32 816 and 64 048 that 4 096-, 8 192- and 16 000-value frames need; p4net.topology sets
both ends of every link); the fastest is reported, with its MTU. p4reduce's links are at
the smallest of those MTUs that carries its job's frames (p4reduce.wire.link_mtu: 1 500 up
to 256 values per block, 9 000 up to 2 048, then exactly what the frames need).
Every rank does an untimed small allreduce, then REPEAT timed ones; a repeat takes as long
as its slowest rank and the best repeat is kept. Bytes and packets per worker are the host
link's kernel counters around the timed allreduces, divided by REPEAT.

    python bench/suite.py [--quick] [--targets softswitch,simple_switch_grpc] [--out DIR]
                          [--passes N]   # every case N times, pass after pass; its fastest
                          [--docs]   # also rewrite the generated parts of docs/benchmarks.md
                          [--headline]   # instead: the README's cases at each block size
                                         # (headline.json; --docs: README.md's "Numbers"
                                         # and docs/benchmarks.md's block-size section)

Needs root and Debian's mininet; gloo rows need torch (make install-torch), plots need
matplotlib (make install-bench). Without them those parts are skipped, saying so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from hostlib import protocol
from hostlib.numerics import to_blocks
from hostlib.slots import slots_for_tensor
from p4reduce.job import round_count
from p4reduce.target import default_slots
from p4reduce.wire import link_mtu

# p4net.demo (the runs) is imported where a run starts: it loads Debian's mininet, which
# bench/report.py, reading results, does not need

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

K = 1024
M = 1024 * 1024
DENSITIES = [1.0, 0.5, 0.2, 0.1, 0.05, 0.01, 0.001]
# values per block of the headline runs (--headline): the default and the wider sizes the
# v1model targets take (p4reduce.target.V1MODEL_BLOCK_SIZES), up to the widest, whose
# frames need links above the jumbo MTU (gloo is measured at that MTU too)
HEADLINE_BLOCK_VALUES = (64, 256, 1024, 2048, 4096, 8192, 16000)
HEADLINE_PATTERNS = (("dense", 1.0), ("shared", 0.1), ("independent", 0.1), ("zipf", 0.0))
# the link MTUs gloo is measured at: every MTU a headline job's links are set to (from
# Ethernet's, p4net.topology.DEFAULT_MTU; reset_mtu), so gloo has every link setting
# p4reduce has
GLOO_MTUS = tuple(sorted({link_mtu(k) for k in HEADLINE_BLOCK_VALUES}))
# the round modes every p4reduce case is measured in (both run on the v1model targets)
EVERY_RANK, SILENT = "every_rank", "silent"
ROUND_MODES = (SILENT, EVERY_RANK)
PATTERN_LABEL = {
    "dense": "dense",
    "shared": "same blocks on every worker",
    "independent": "independent per worker",
    "zipf": "embedding rows, Zipf",
    "ring": "gloo ring allreduce",
}


@dataclass(frozen=True)
class Case:
    """One measured run: a system, a job size and a sparsity pattern."""

    target: str
    system: str  # "p4reduce" or "gloo"
    workers: int
    size: int  # float32 values per worker
    pattern: str  # dense, shared, independent, zipf (p4reduce); ring (gloo)
    density: float  # nominal fraction of non-zero blocks (zipf: see the result)
    repeat: int
    encoding: str = "packed"  # p4reduce: the job's value encoding (protocol.md section 10)
    # p4reduce: the job's values per block (= per DATA frame); gloo: the block size its
    # inputs' sparsity is drawn at (a ring case is dense: always the default)
    block_values: int = protocol.BLOCK_VALUES
    # p4reduce: the job's round mode, always given (never the target's default, which may
    # change): every_rank, or silent (a rank sends only for its own non-zero blocks)
    round_mode: str = EVERY_RANK

    @property
    def key(self) -> tuple:
        return (
            self.target,
            self.system,
            self.workers,
            self.size,
            self.pattern,
            self.density,
            self.encoding,
            self.block_values,
            self.round_mode,
        )

    def label(self) -> str:
        d = "" if self.pattern in ("dense", "ring", "zipf") else f" {self.density:g}"
        e = " lanes" if self.system == "p4reduce" and self.encoding == "lanes" else ""
        k = "" if self.block_values == protocol.BLOCK_VALUES else f" K{self.block_values}"
        m = " silent" if self.round_mode == SILENT else ""
        return (
            f"{self.target} {self.system} {self.workers}w {human_size(self.size)} "
            f"{self.pattern}{d}{e}{k}{m}"
        )


@dataclass
class Result:
    case: Case
    ok: bool
    error: str = ""
    seconds: float = 0.0  # best repeat, slowest rank
    times: list = field(default_factory=list)  # per repeat, slowest rank
    tx_bytes: float = 0.0  # per worker per allreduce (mean over workers)
    rx_bytes: float = 0.0
    tx_packets: float = 0.0
    rx_packets: float = 0.0
    rounds: float = 0.0  # p4reduce: rounds per worker per allreduce
    # p4reduce: of them, the rounds that carried no block (announce and closing rounds),
    # as a rank's control packets (EngineStats.control_packets); 0: not recorded
    control_rounds: float = 0.0
    # p4reduce: the slots each call used (WorkerStats.last_call_slots); 0: not recorded
    call_slots: int = 0
    retransmissions: float = 0.0  # p4reduce: all workers, per allreduce
    block_density: float = 0.0  # mean over workers: non-zero blocks / blocks
    union_density: float = 0.0  # blocks non-zero in any worker / blocks
    wall: float = 0.0  # seconds the whole run took (start-up included)
    # p4reduce: largest gap between the ranks' starts of one timed call (the host's
    # monotonic clock, shared by the namespaces): what the slowest rank's time includes
    # of waiting for the last rank to begin
    start_skew: float = 0.0
    # p4reduce: the job's slots in this run (results.json records what was used, so a
    # report never reads today's default into an older run; 0: gloo, or a file written
    # before runs recorded it, whose run-wide "slots" bench/report.py reads instead)
    slots: int = 0
    # gloo: the links' MTU of the reported (faster) run, and every MTU's best seconds
    # (0 / empty: a file written before gloo ran at two MTUs, all its links at 1 500);
    # p4reduce: the links' MTU its run had (the smallest that carries its job's frames:
    # 1 500 up to 256 values per block, 9 000 above; 0: a file from before block sizes)
    mtu: int = 0
    seconds_by_mtu: dict = field(default_factory=dict)
    # with --passes: each pass's best seconds, in pass order (the result is the fastest
    # pass's; empty: one pass)
    passes: list = field(default_factory=list)
    # p4reduce, per rank per timed call (mean over ranks): the packets the engine sent by
    # message type (EngineStats.sent_counts: ANNOUNCE, DATA, SKIP, REWIND) and the rank's
    # non-zero blocks (the bound on a silent call's packets is these + 2 x slots)
    sent_by_type: dict = field(default_factory=dict)
    nonzero_blocks: float = 0.0
    # both systems, per timed call: the ranks' CPU seconds (user + system, every thread of
    # a rank's process), all ranks summed (each rank's mean over its calls), and of it the
    # kernel's; the switch's own CPU is bench/call_breakdown.py's
    cpu: float = 0.0
    sys_cpu: float = 0.0


def human_size(n: int) -> str:
    return f"{n // M} M" if n % M == 0 else f"{n // K} K" if n % K == 0 else str(n)


# -- the plan ----------------------------------------------------------------------------


def plan(targets: list[str], quick: bool, have_torch: bool) -> tuple[list[Case], list[str]]:
    """The runs, per target, and what is left out and why (said in the docs)."""
    cases: dict[tuple, Case] = {}
    skipped: list[str] = []

    def add(c: Case) -> None:
        if c.system == "gloo" and not have_torch:
            return
        for mode in ROUND_MODES if c.system == "p4reduce" else (EVERY_RANK,):
            m = replace(c, round_mode=mode)
            cases.setdefault(m.key, m)

    for target in targets:
        bmv2 = target != "softswitch"
        if quick:
            compare_sizes, compare_workers = [64 * K], [4, 8] if not bmv2 else [4]
            sweep_size, sweep_workers = 64 * K, [4]
            densities = [1.0, 0.1, 0.01]
            scaling = [2, 4, 8] if not bmv2 else []
            scaling_size = 64 * K
        else:
            compare_sizes = [64 * K, M] + ([16 * M] if not bmv2 else [])
            compare_workers = [4, 8]
            sweep_size, sweep_workers = M, [4, 8] if not bmv2 else [4]
            densities = DENSITIES
            scaling, scaling_size = [2, 4, 8, 16], M
        for w in compare_workers:
            for size in compare_sizes:
                rep = repeats(size, target)
                add(Case(target, "gloo", w, size, "ring", 1.0, rep))
                if size < 16 * M or w == 4:
                    add(Case(target, "p4reduce", w, size, "dense", 1.0, rep))
                if w == 4 and size <= M:  # the per-lane path, side by side
                    add(Case(target, "p4reduce", w, size, "dense", 1.0, rep, "lanes"))
                for d in [0.1] if size < 16 * M else [0.1, 0.01]:
                    add(Case(target, "p4reduce", w, size, "shared", d, repeats(size, target, d)))
        for w in sweep_workers:
            rep = repeats(sweep_size, target)
            add(Case(target, "gloo", w, sweep_size, "ring", 1.0, rep))
            for d in densities:
                for pattern in ["dense"] if d == 1.0 else ["shared", "independent"]:
                    n = repeats(sweep_size, target, d)
                    add(Case(target, "p4reduce", w, sweep_size, pattern, d, n))
            add(Case(target, "p4reduce", w, sweep_size, "zipf", 0.0, rep))
        for w in scaling:
            rep = repeats(scaling_size, target)
            add(Case(target, "gloo", w, scaling_size, "ring", 1.0, rep))
            for pattern in ["shared"] + (["independent"] if not bmv2 else []):
                n = repeats(scaling_size, target, 0.1)
                add(Case(target, "p4reduce", w, scaling_size, pattern, 0.1, n))
        big = 16 * M // protocol.BLOCK_VALUES  # DATA packets per worker, 16 M dense
        if not quick and bmv2:
            skipped.append(
                f"{target}: 16 M values ({big:,} DATA packets per worker per "
                f"dense allreduce: minutes each at bmv2's packet rate, see "
                f"bench/softswitch_pps.py), the density sweep at 8 workers and "
                f"the scaling runs with independent sparsity (at 16 workers "
                f"{1 - 0.9**16:.0%} of the blocks are in the union)"
            )
        if not quick and not bmv2:
            skipped.append(
                f"{target}: 16 M values dense at 8 workers ({8 * big:,} DATA "
                f"packets into the switch per allreduce, minutes)"
            )
    if not have_torch:
        skipped.append("gloo: torch is not installed (make install-torch)")
    return list(cases.values()), skipped


def headline_plan(targets: list[str], have_torch: bool) -> list[Case]:
    """The README's cases (--headline): 4 workers, 1 M float32, per target gloo's ring and
    p4reduce dense, 10 % shared, 10 % independent and the Zipf embedding gradient at each
    of HEADLINE_BLOCK_VALUES in each of ROUND_MODES, all on one network per target (one
    run: their ratios are comparable)."""
    cases = []
    for target in targets:
        if have_torch:
            cases.append(Case(target, "gloo", 4, M, "ring", 1.0, repeats(M, target)))
        for k in HEADLINE_BLOCK_VALUES:
            for pattern, d in HEADLINE_PATTERNS:
                n = repeats(M, target, d if pattern != "zipf" else 0.25, k)
                for mode in ROUND_MODES:
                    c = Case(target, "p4reduce", 4, M, pattern, d, n, block_values=k)
                    cases.append(replace(c, round_mode=mode))
    return cases


def repeats(
    size: int, target: str, density: float = 1.0, block_values: int = protocol.BLOCK_VALUES
) -> int:
    """Timed calls of a case (its best is kept). A call that sends few blocks (at most a
    tenth of a dense 1 M call's at 64 values per block: sparse, or of wide blocks) lasts
    well under a second, where one descheduling of the 4-6 processes sharing two cores
    costs 5-10 % or more: such calls are repeated more, as timeit does, so that their best
    is as trustworthy as a long call's."""
    if size >= 16 * M:
        return 1
    if target != "softswitch":
        n = 1 if size >= M else 2
    else:
        n = 2 if size >= M else 3
    few = M / 10 / protocol.BLOCK_VALUES
    return max(n, 5) if density * size / block_values <= few else n


def estimate(c: Case) -> float:
    """Seconds a run should take on this 2-core machine (for the progress bar's ETA)."""
    blocks = math.ceil(c.size / c.block_values)
    bmv2 = c.target != "softswitch"
    if c.system == "gloo":
        frames = 2 * (c.workers - 1) / c.workers * c.size * 4 / 1448 * c.workers * 1.5
        return len(GLOO_MTUS) * (1 + 1.3 * c.workers + (c.repeat + 1) * frames / 15000)
    d = {
        "dense": 1.0,
        "shared": c.density,
        "zipf": 0.25,
        "independent": 1 - (1 - c.density) ** c.workers,
    }[c.pattern]
    rounds = round_count(
        d * blocks, blocks, default_slots(c.target), c.round_mode, block_values=c.block_values
    )
    packets = rounds * c.workers
    per_packet = 1 + c.block_values / 512  # a wide frame costs the switch more per packet
    return 0.5 + 0.1 * c.workers + c.repeat * packets * per_packet / (1500 if bmv2 else 8000)


# -- inputs ------------------------------------------------------------------------------


def call_windows(spans: list[list[list[float]]]) -> list[tuple[float, float]]:
    """Each timed call's window across a job's ranks: from its start at the earliest rank
    to its end at the latest (each rank's (began, ended) per call, on the host's monotonic
    clock, which every namespace shares)."""
    a = np.asarray(spans, dtype=np.float64)  # rank x call x (began, ended)
    return list(zip(a[:, :, 0].min(axis=0).tolist(), a[:, :, 1].max(axis=0).tolist()))


def make_inputs(c: Case, seed: int = 1) -> list[np.ndarray]:
    """The tensors of one run, one per rank (the same for gloo and p4reduce). Sparsity is
    drawn in blocks of the case's size (10 % of the job's blocks non-zero, at the block
    size used), except the Zipf gradient's: its rows are the model's, 64 values whatever
    the block size."""
    from p4net import demo

    rng = np.random.default_rng(seed)
    if c.pattern == "zipf":
        return zipf_inputs(c.workers, c.size, rng)
    density = 1.0 if c.pattern in ("dense", "ring") else c.density
    overlap = "independent" if c.pattern == "independent" else "shared"
    opts = demo.Options(workers=c.workers, size=c.size, density=density, overlap=overlap)
    return demo.make_inputs(opts, rng, c.block_values)


def zipf_inputs(
    workers: int,
    size: int,
    rng: np.random.Generator,
    exponent: float = 1.1,
    lookups_per_row: float = 0.125,
) -> list[np.ndarray]:
    """The gradient of an embedding table under a skewed access pattern.

    The table has ceil(size / 64) rows of 64 dimensions (protocol.BLOCK_VALUES: one row is
    one block of the default size, whatever the job's). Each worker's batch looks up
    lookups_per_row x rows rows drawn from a Zipf law (probability of the i-th most popular
    row ~ 1 / i^exponent, the popularity order the same on every worker: it is the data's);
    only looked-up rows get a gradient, so popular rows are non-zero on every worker and
    the tail on few.
    """
    row_values = protocol.BLOCK_VALUES
    rows = math.ceil(size / row_values)
    by_popularity = rng.permutation(rows)
    p = 1.0 / np.arange(1, rows + 1) ** exponent
    p /= p.sum()
    lookups = max(1, int(lookups_per_row * rows))
    out = []
    for _ in range(workers):
        hit, counts = np.unique(by_popularity[rng.choice(rows, lookups, p=p)], return_counts=True)
        grad = np.zeros((rows, row_values), dtype=np.float32)
        grad[hit] = (
            rng.standard_normal((hit.size, row_values)) * 1e-2 * np.sqrt(counts)[:, None]
        ).astype(np.float32)
        out.append(grad.reshape(-1)[:size].copy())
    return out


def block_densities(
    inputs: list[np.ndarray], block_values: int = protocol.BLOCK_VALUES
) -> tuple[float, float]:
    """(mean over ranks of the non-zero fraction of blocks of `block_values` values, the
    fraction non-zero in any rank): blocks cut as the workers cut them (numerics.to_blocks)."""
    nz = [to_blocks(x.reshape(-1), block_values).any(axis=1) for x in inputs]
    return float(np.mean([m.mean() for m in nz])), float(np.logical_or.reduce(nz).mean())


# -- running -----------------------------------------------------------------------------


def lone_job(c: Case, slots: int, every_slot: bool = False):
    """The demo's options for p4reduce case `c` as a job alone on its switch, of `slots`
    slots. Its ranks keep every slot outstanding (the window): the Worker's default
    window, a job's fair share of a shared switch, would leave the switch idle between
    rounds (docs/hostlib.md, "Slots per call"). Its calls use as many of the slots as
    their blocks want (p4reduce.job.slots_for_call), or all of them with `every_slot`
    (bench/slot_window.py measures the rule that way)."""
    from p4net import demo

    return demo.Options(
        workers=c.workers,
        size=c.size,
        dtype="float32",
        target=c.target,
        slots=slots,
        window=slots,
        call_slots=slots if every_slot else None,
        deadline=1800.0,
        quiet=True,
        repeat=c.repeat,
        warmup=True,
        encoding=c.encoding,
        block_values=c.block_values,
        round_mode=c.round_mode,
    )


def run_p4reduce(
    net, c: Case, inputs: list[np.ndarray], slots: int | None = None, every_slot: bool = False
) -> Result:
    """One p4reduce case on `net` as a lone job (`lone_job`); `slots` None: the switch
    kind's default. The links start at Ethernet's MTU and the demo raises them as far as
    the job's frames need (a wide job run before, or gloo's jumbo run, must not leave this
    one on other links than its own)."""
    slots = default_slots(c.target) if slots is None else slots
    reset_mtu(net)
    opts = lone_job(c, slots, every_slot)
    t0 = time.perf_counter()
    s = net.run_jobs(opts, inputs=[inputs])
    r = Result(c, ok=s.all_matched, wall=time.perf_counter() - t0, slots=slots, mtu=net.mtu)
    bad = [
        f"rank {o.rank}: {o.error or 'result outside the quantization bound'}"
        for o in s.outcomes
        if not (o.ok and o.matched)
    ]
    if bad:
        r.error = "; ".join(bad)
        return r
    fill_times(r, [o.times for o in s.outcomes])
    spans = np.array([o.report["spans"] for o in s.outcomes])  # (rank, repeat, begin/end)
    r.start_skew = float(np.ptp(spans[:, :, 0], axis=0).max())
    fill_counters(r, [o.report["counters"] for o in s.outcomes])
    fill_sent(r, [o.calls for o in s.outcomes])
    timed = [[k for k in o.calls if k["kind"] == "timed"] for o in s.outcomes]
    fill_cpu(r, [[k["cpu"] for k in t] for t in timed], [[k["sys_cpu"] for k in t] for t in timed])
    warm = [o.report.get("warmup_stats", {}) for o in s.outcomes]
    r.rounds = float(
        np.mean(
            [(o.stats["rounds"] - w.get("rounds", 0)) / c.repeat for o, w in zip(s.outcomes, warm)]
        )
    )
    r.control_rounds = float(
        np.mean(
            [
                (o.stats.get("control_packets", 0) - w.get("control_packets", 0)) / c.repeat
                for o, w in zip(s.outcomes, warm)
            ]
        )
    )
    r.call_slots = max(int(o.report.get("call_slots", 0)) for o in s.outcomes)
    r.retransmissions = (
        sum(
            (o.stats["retransmissions"] - w.get("retransmissions", 0))
            for o, w in zip(s.outcomes, warm)
        )
        / c.repeat
    )
    return r


def fill_sent(r: Result, per_rank: list[list[dict]]) -> None:
    """Packets per rank per timed call by message type, and the rank's non-zero blocks,
    as each rank's Worker counted them (means over ranks and calls)."""
    timed = [c for calls in per_rank for c in calls if c["kind"] == "timed"]
    types = sorted({t for c in timed for t in c.get("sent_by_type", {})})
    r.sent_by_type = {
        t: float(np.mean([c.get("sent_by_type", {}).get(t, 0) for c in timed])) for t in types
    }
    r.nonzero_blocks = float(np.mean([c.get("nonzero_blocks", 0) for c in timed]))


def rank_sum(per_rank: list[list[float]]) -> float:
    """A per-call count of the whole job: each rank's mean over its calls, summed over
    the ranks (what the ranks spent, or sent, per call together)."""
    return float(sum(np.mean(c) for c in per_rank))


def fill_cpu(r: Result, cpu: list[list[float]], sys_cpu: list[list[float]]) -> None:
    """The ranks' CPU per timed call, summed over ranks, from each rank's own count
    around its calls."""
    r.cpu, r.sys_cpu = rank_sum(cpu), rank_sum(sys_cpu)


def reset_mtu(net) -> None:
    """Every link back at Ethernet's MTU (p4net.topology's default)."""
    from p4net import topology

    if net.mtu != topology.DEFAULT_MTU:
        net.set_mtu(topology.DEFAULT_MTU)


def run_gloo(
    net, c: Case, inputs: list[np.ndarray], workdir: Path, mtus: tuple[int, ...] = GLOO_MTUS
) -> Result:
    """gloo at each of `mtus` (GLOO_MTUS unless a plan says otherwise) on the same links
    (set by p4net.topology, restored to the default afterwards): its best setting is the
    one to compare with. The fastest run is the result; a failure at any MTU fails the
    case (a comparison must not silently lose gloo's better setting)."""
    from p4net import topology

    runs: dict[int, Result] = {}
    try:
        for mtu in mtus:
            net.set_mtu(mtu)
            runs[mtu] = run = run_gloo_once(net, c, inputs, workdir)
            if run.ok and run.mtu != mtu:
                run.ok, run.error = False, f"the ranks saw MTU {run.mtu}, not the {mtu} set"
            run.mtu = mtu
    finally:
        net.set_mtu(topology.DEFAULT_MTU)
    failed = [r for r in runs.values() if not r.ok]
    best = failed[0] if failed else min(runs.values(), key=lambda r: r.seconds)
    if failed:
        best.error = f"MTU {best.mtu}: {best.error}"
    best.seconds_by_mtu = {str(m): r.seconds for m, r in runs.items() if r.ok}
    best.wall = sum(r.wall for r in runs.values())
    return best


def run_gloo_once(
    net, c: Case, inputs: list[np.ndarray], workdir: Path, reports: list | None = None
) -> Result:
    """One gloo case at the links' current MTU; `reports`, when given, gets the ranks'
    reports (bench/gloo_rank.py's: their calls' spans, for bench/call_breakdown.py)."""
    run_dir = Path(tempfile.mkdtemp(prefix="gloo-", dir=workdir))
    procs = []
    t0 = time.perf_counter()
    try:
        for rank, h in enumerate(net.hosts[: c.workers]):
            np.save(run_dir / f"in{rank}.npy", inputs[rank])
            log = open(run_dir / f"log{rank}.txt", "w")
            procs.append(
                net.net.get(h.name).popen(
                    [
                        sys.executable,
                        str(BENCH / "gloo_rank.py"),
                        str(rank),
                        str(c.workers),
                        str(run_dir / "store"),
                        str(run_dir / f"in{rank}.npy"),
                        str(run_dir / f"out{rank}.npy"),
                        str(run_dir / f"report{rank}.json"),
                        "--repeat",
                        str(c.repeat),
                    ],
                    cwd=str(REPO),
                    stdout=log,
                    stderr=log,
                )
            )
            log.close()
        deadline = time.monotonic() + 1800
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    r = Result(c, ok=False, wall=time.perf_counter() - t0)
    reports = [] if reports is None else reports
    for rank in range(c.workers):
        path = run_dir / f"report{rank}.json"
        rep = (
            json.loads(path.read_text())
            if path.exists()
            else {
                "ok": False,
                "error": "exited without a report: "
                + (run_dir / f"log{rank}.txt").read_text()[-500:],
            }
        )
        if not rep["ok"]:
            r.error = f"gloo rank {rank}: {rep['error']}"
            return r
        reports.append(rep)
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    scale = max(1.0, float(np.abs(exact).max()))
    for rank in range(c.workers):
        out = np.load(run_dir / f"out{rank}.npy")
        if not np.allclose(out, exact, rtol=1e-5, atol=1e-6 * scale):
            r.error = f"gloo rank {rank}: result differs from the exact sum"
            return r
    fill_times(r, [rep["times"] for rep in reports])
    fill_counters(r, [rep["counters"] for rep in reports])
    fill_cpu(r, [rep["cpu"] for rep in reports], [rep["sys_cpu"] for rep in reports])
    r.mtu = reports[0].get("mtu", 0)
    if any(rep.get("mtu") != r.mtu for rep in reports):
        r.error = f"gloo ranks saw different link MTUs: {[rep.get('mtu') for rep in reports]}"
        return r
    r.ok = True
    shutil.rmtree(run_dir, ignore_errors=True)
    return r


def fill_times(r: Result, per_rank: list[list[float]]) -> None:
    r.times = [max(t[i] for t in per_rank) for i in range(r.case.repeat)]
    r.seconds = min(r.times)


def fill_counters(r: Result, per_rank: list[dict]) -> None:
    n = r.case.repeat
    for k in ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets"):
        setattr(r, k, float(np.mean([c[k] for c in per_rank])) / n)


class Progress:
    """One status line: a bar over the estimated seconds of the whole plan, the run in
    progress and the time left (estimates corrected by how fast the runs so far were)."""

    def __init__(self, cases: list[Case], stream=sys.stderr):
        self.est = {c.key: estimate(c) for c in cases}
        self.total = sum(self.est[c.key] for c in cases)  # a case may come once per pass
        self.done_est = 0.0
        self.done_real = 0.0
        self.n, self.i = len(cases), 0
        self.current: Case | None = None
        self.current_start = 0.0
        self.start = time.monotonic()
        self.stream = stream
        self.tty = stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "Progress":
        if self.tty:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.tty:
            print(file=self.stream)

    def begin(self, c: Case) -> None:
        self.current, self.current_start = c, time.monotonic()
        if not self.tty:
            print(self.line(), file=self.stream, flush=True)

    def end(self, c: Case) -> None:
        self.i += 1
        self.done_est += self.est[c.key]
        self.done_real += time.monotonic() - self.current_start
        self.current = None

    def line(self) -> str:
        now = time.monotonic()
        speed = self.done_real / self.done_est if self.done_est > 30 else 1.0
        in_run = 0.0
        if self.current is not None:
            in_run = min((now - self.current_start) / speed, self.est[self.current.key])
        frac = min(1.0, (self.done_est + in_run) / self.total)
        left = (self.total - self.done_est - in_run) * speed
        bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
        what = self.current.label() if self.current else ""
        return (
            f"[{bar}] {100 * frac:3.0f}% run {self.i + 1}/{self.n} "
            f"{_mmss(now - self.start)} elapsed, ~{_mmss(left)} left  {what}"
        )

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            print("\r" + self.line()[:160].ljust(160), end="", file=self.stream, flush=True)


def _mmss(s: float) -> str:
    return f"{int(s // 60)}:{int(s % 60):02d}"


def wire_format() -> dict[str, int]:
    """The frame sizes the run was measured with (the report describes these, not whatever
    hostlib/protocol.py says when the tables are redrawn)."""
    p = protocol
    return {
        "protocol": p.PROTOCOL_VERSION,
        "lanes": p.BLOCK_VALUES,
        "value_bytes": p.VALUE_BYTES,
        "data_frame": p.FRAME_BYTES_WITH_VALUES,
        "skip_frame": p.FRAME_BYTES_HEADER_ONLY,
        "announce_frame": getattr(p, "FRAME_BYTES_WITH_FINGERPRINT", p.FRAME_BYTES_HEADER_ONLY),
    }


# What a `make bench` run writes (its tables, results, plots and README's numbers): an
# earlier step of the same run has changed them when a later one starts, so they do not
# make the measured code "dirty"
BENCH_OUTPUTS = ("docs", "README.md", "build")


def measured_commit(repo: Path = REPO) -> str:
    """The commit a run measures (`git describe --always`), "-dirty" when a file outside
    BENCH_OUTPUTS differs from it. Why not `git describe --dirty`: from its second step
    on, one `make bench` run finds the outputs of the steps before it in the tree, and
    every later stamp would say "-dirty" of code that no one changed."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else ""

    try:
        head = git("describe", "--always")
        outputs = [f":(exclude){path}" for path in BENCH_OUTPUTS]
        changed = git("status", "--porcelain", "--", ".", *outputs)
    except OSError:
        return "?"
    return (head + ("-dirty" if changed else "")) if head else "?"


def environment(targets: list[str]) -> dict:
    def version(cmd: list[str]) -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"

    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    env = {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "load_at_start": os.getloadavg()[0],
        "python": platform.python_version(),
        "numpy": np.__version__,
        "commit": measured_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "targets": targets,
        "wire": wire_format(),
    }
    try:
        import torch

        env["torch"] = torch.__version__
    except ImportError:
        env["torch"] = None
    if any(t != "softswitch" for t in targets):
        env["bmv2"] = version(["simple_switch_grpc", "--version"])
    return env


def run_all(args) -> dict:
    from p4reduce.target import SIMPLE_SWITCH_GRPC, SOFTSWITCH

    targets = args.targets or [SOFTSWITCH] + (
        [SIMPLE_SWITCH_GRPC] if shutil.which("simple_switch_grpc") else []
    )
    if args.headline:
        cases, skipped = headline_plan(targets, have_torch()), []
    else:
        cases, skipped = plan(targets, args.quick, have_torch())
    if args.only:
        cases = [c for c in cases if any(re.search(s, c.label()) for s in args.only)]
    if not args.targets and not shutil.which("simple_switch_grpc"):
        skipped.append("simple_switch_grpc: not on PATH, only softswitch measured")
    data = run_cases(cases, targets, args.passes, call_slots=args.headline)
    data.update(quick=args.quick, command=args.command, skipped=skipped, headline=args.headline)
    return data


def have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def job_slots(c: Case) -> int:
    """A headline case's job: as many slots as hostlib.slots.slots_for_tensor gives its call
    (the tensor's blocks at the case's size, out of the switch kind's default), so every
    slot the job has is one its calls use (docs/hostlib.md, "Slots per call")."""
    return slots_for_tensor(c.size, c.block_values, default_slots(c.target))


def run_cases(
    cases: list[Case],
    targets: list[str],
    passes: int = 1,
    call_slots: bool = False,
    gloo_mtus: tuple[int, ...] = GLOO_MTUS,
) -> dict:
    """Run the cases, one network per target (as many hosts as its largest job); the
    results with the machine and software they were measured on. With `passes` > 1 every
    case of a target runs once per pass, the passes one after another, and each case keeps
    its fastest pass (`Result.passes` lists them all): a ratio between two cases is then
    taken from runs minutes apart at most, not from whatever the load on the shared cores
    did between a case early in the plan and one late in it. `call_slots`: each p4reduce
    job gets job_slots(case) slots instead of the switch kind's default. `gloo_mtus`: the
    MTUs gloo runs at (a plan whose p4reduce jobs use fewer links' MTUs may name those)."""
    from p4net import demo

    env = environment(targets)
    env["passes"] = passes
    total = passes * sum(estimate(c) for c in cases)
    print(
        f"{len(cases)} runs on {', '.join(targets)}; estimated {_mmss(total)} (min:s) on "
        f"an idle 2-core machine, longer under load",
        file=sys.stderr,
    )
    results: list[Result] = []
    start = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="p4reduce-bench-"))
    try:
        with Progress(cases * passes) as progress:
            for target in targets:
                mine = [c for c in cases if c.target == target]
                if not mine:
                    continue
                runs: dict[tuple, list[Result]] = {c.key: [] for c in mine}
                with demo.DemoNetwork(target, max(c.workers for c in mine)) as net:
                    for _ in range(passes):
                        for c in mine:
                            progress.begin(c)
                            runs[c.key].append(run_case(net, c, workdir, call_slots, gloo_mtus))
                            progress.end(c)
                results.extend(best_pass(runs[c.key]) for c in mine)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    env["seconds"] = round(time.monotonic() - start)
    env["load_at_end"] = os.getloadavg()[0]
    return {
        "environment": env,
        "quick": False,
        "command": "",
        "skipped": [],
        "slots": {t: default_slots(t) for t in targets},
        "results": [dict(asdict(r), case=asdict(r.case)) for r in results],
    }


def run_case(
    net,
    c: Case,
    workdir: Path,
    call_slots: bool = False,
    gloo_mtus: tuple[int, ...] = GLOO_MTUS,
) -> Result:
    inputs = make_inputs(c)
    if c.system == "gloo":
        r = run_gloo(net, c, inputs, workdir, gloo_mtus)
    else:
        r = run_p4reduce(net, c, inputs, job_slots(c) if call_slots else None)
    r.block_density, r.union_density = block_densities(inputs, c.block_values)
    if not r.ok:
        print(f"\n{c.label()}: FAILED: {r.error}", file=sys.stderr)
    return r


def best_pass(runs: list[Result]) -> Result:
    """A case's result over its passes: the first failure if any pass failed (a failure is
    never hidden by a faster pass), else the fastest pass, listing every pass's seconds."""
    failed = [r for r in runs if not r.ok]
    best = failed[0] if failed else min(runs, key=lambda r: r.seconds)
    if len(runs) > 1:
        best.passes = [r.seconds for r in runs]
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="64 K values, few points: minutes")
    ap.add_argument(
        "--targets",
        type=lambda s: s.split(","),
        default=None,
        help="comma-separated; default softswitch and, where installed, simple_switch_grpc",
    )
    ap.add_argument(
        "--only",
        nargs="+",
        help="run only cases whose label matches one of these regular expressions "
        "(re.search: a plain string is a substring; end one with $ to exclude longer labels)",
    )
    ap.add_argument(
        "--headline",
        action="store_true",
        help="the README's cases instead of the suite: 4 workers, 1 M values, gloo and "
        "p4reduce at each of HEADLINE_BLOCK_VALUES values per block; written to "
        "headline.json, --docs rewrites README.md's numbers and docs/benchmarks.md's "
        "block-size section",
    )
    ap.add_argument(
        "--passes",
        type=int,
        default=1,
        help="run every case this many times, pass after pass, keeping each case's fastest",
    )
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench")
    ap.add_argument(
        "--docs",
        action="store_true",
        help="rewrite the generated parts of docs/benchmarks.md (images in --out) and README.md",
    )
    ap.add_argument(
        "--from-json",
        type=Path,
        help="no runs: tables and plots from a results.json written before",
    )
    ap.add_argument(
        "--command", default=None, help="the command to state in the docs (make passes its own)"
    )
    args = ap.parse_args(argv)
    if args.passes < 1:
        ap.error(f"--passes must be at least 1, not {args.passes}")
    given = list(argv if argv is not None else sys.argv[1:])
    if "--command" in given:  # the script's own command line, without it
        i = given.index("--command")
        del given[i : i + 2]
    script = shlex.join(["python", os.path.relpath(Path(__file__).resolve(), REPO)] + given)
    if args.command is None:
        args.command = script
    args.out.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        data = json.loads(args.from_json.read_text())
    else:
        if os.geteuid() != 0 or shutil.which("mnexec") is None:
            raise SystemExit("bench/suite.py needs root and Debian's mininet (make install)")
        data = run_all(args)
        data["script"] = script
        name = "headline.json" if args.headline else "results.json"
        (args.out / name).write_text(json.dumps(data, indent=1))
    import report

    docs = REPO / "docs" / "benchmarks.md" if args.docs else None
    if data.get("headline"):
        report.write_headline(data, args.out, docs, REPO / "README.md" if args.docs else None)
    else:
        report.write(data, args.out, docs=docs)
    failed = [r for r in data["results"] if not r["ok"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
