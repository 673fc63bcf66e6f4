#!/usr/bin/env python3
"""The end-to-end demo: a P4 switch, a controller and N workers in Mininet reduce a tensor.

    python mininet/demo.py --workers 4 --size 1000000 --density 0.1 --dtype float32
    (or python -m p4net.demo ...)

The switch runs simple_switch_grpc where installed, softswitch otherwise (--target forces
either). The controller runs here, in the root namespace, against the switch's gRPC
address; every worker runs in its own host through hostlib. Every worker's result is
checked against numpy on the same inputs. Loss comes from the P4 drop simulator (--loss):
this kernel has no netem. Everything started is stopped, and every interface deleted,
after a normal run, Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from p4reduce.addresses import WorkerAddress
from controlplane.config import parse as parse_config
from controlplane.controller import Controller
from controlplane.fabric import FabricController
from controlplane.jobs import PoolSizes
from p4reduce.p4rt import P4InfoIndex
from controlplane.stats import job_stats
from hostlib import numerics, protocol
from p4net import topology
from p4reduce.job import (
    ENCODINGS,
    JobError,
    descriptor_name,
    resolve_block_values,
    round_count,
)
from p4reduce.target import (
    DEFAULT_P4INFO,
    SIMPLE_SWITCH_GRPC,
    SOFTSWITCH,
    default_slots,
    kind_window,
    target as target_named,
)
from p4reduce.wire import link_mtu
from softswitch.runner import resolve_kind


class StopRequests:
    """Ctrl-C and SIGTERM as a request that the demo honours at safe points.

    Why not Python's default (KeyboardInterrupt raised wherever the main thread is): on a
    busy machine the demo spends seconds inside grpc -- waiting for the switch to serve
    P4Runtime, closing that channel -- and an exception thrown inside grpc's Channel.close
    leaves the channel half closed; its destructor then waits forever at interpreter exit
    (`make run` interrupted while the switch started never exited). A switch process whose
    start was cut short was not recorded either, so nothing stopped it. Here the handler
    only records the signal; `check()` raises KeyboardInterrupt where nothing is left half
    done: between set-up steps, while waiting for the switch to serve P4Runtime, while
    starting workers and in the loop that waits for them. Clean-up then runs with no
    exception thrown into it; further signals only say that it is under way.
    """

    def __init__(self) -> None:
        self.signum: int | None = None

    def requested(self) -> bool:
        return self.signum is not None

    def check(self) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt(signal.Signals(self.signum).name)

    def _handler(self, signum: int, frame) -> None:  # noqa: ARG002 -- signal's signature
        # os.write, not print: the handler may run in the middle of the progress line's print
        if self.signum is None:
            self.signum = signum
            os.write(2, b"\nstopping: workers, jobs, switch, links ...\n")
        else:
            os.write(2, b"\nstill stopping, please wait\n")

    @contextlib.contextmanager
    def installed(self):
        """Handle SIGINT and SIGTERM this way inside the block (main thread only)."""
        self.signum = None
        old = {sig: signal.signal(sig, self._handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


# The demo's one instance; `check()` does nothing unless `installed()` saw a signal, so
# tests and benchmarks that use DemoNetwork without installing it keep Python's default.
STOP = StopRequests()


@dataclass
class Options:
    workers: int = 4
    size: int = 1_000_000
    density: float = 0.1
    overlap: str = "shared"  # shared: the same blocks are non-zero on every worker
    dtype: str = "float32"
    loss: float = 0.0
    target: str = "auto"  # --target: a switch kind, "bmv2" (simple_switch_grpc) or "auto"
    slots: int | None = None  # None: the kind's default (p4reduce.target.default_slots)
    jobs: int = 1
    seed: int = 1
    deadline: float = 120.0
    absent_ranks: tuple[int, ...] = ()  # ranks whose worker is never started (tests)
    quiet: bool = False
    repeat: int = 1  # timed allreduces per worker (benchmarks)
    warmup: bool = False  # an untimed one-block allreduce first
    # the job's value encoding (protocol.md section 10); None: the target's default
    encoding: str | None = None
    job_slots: tuple[int, ...] = ()  # per job: its slots, instead of `slots` (benchmarks)
    job_repeats: tuple[int, ...] = ()  # per job: its timed allreduces, instead of `repeat`
    # the most slots a rank keeps outstanding; None: the job's, the kind's default
    # (p4reduce.target.kind_window: every slot on softswitch, which serves its ports round
    # robin; FAIR_SLOTS, a job's fair share of a first-in first-out switch, on
    # simple_switch_grpc). A job alone on its switch is fastest with all of its slots
    # outstanding (benchmarks: docs/hostlib.md, "Slots per call")
    window: int | None = None
    # the slots every call uses, on every rank; None: as many as the call's blocks want
    # (p4reduce.job.slots_for_call). Benchmarks of calls at other slot counts set it
    call_slots: int | None = None
    # values per block (per DATA packet) of every job; None: the target's default. The
    # links are raised to carry the job's frames (DemoNetwork.carry)
    block_values: int | None = None
    # every job's round mode ("every_rank" or "silent"); None: the target's default
    round_mode: str | None = None
    # the network's shape (p4net.topology): one switch, or a spine and two leaves
    topo: str = topology.STAR


@dataclass
class WorkerOutcome:
    job: int
    rank: int
    host: str
    ok: bool
    matched: bool
    error: str = ""
    seconds: float = 0.0
    tx_packets: int = 0
    tx_bytes: int = 0
    rx_packets: int = 0
    rx_bytes: int = 0
    retransmissions: int = 0
    packets_sent: int = 0  # p4reduce packets, as the worker counted them
    stats: dict = field(default_factory=dict)  # the worker's own stats
    times: list = field(default_factory=list)  # seconds of each timed allreduce
    calls: list = field(default_factory=list)  # per allreduce: kind, seconds, packets, retx
    report: dict = field(default_factory=dict)  # the worker's whole report (bench/ reads it)


@dataclass
class Summary:
    kind: str  # the switch's kind (p4reduce.target)
    seconds: float
    outcomes: list[WorkerOutcome] = field(default_factory=list)
    switch_counters: dict = field(default_factory=dict)
    values: int = 0
    # per switch, per port: its link's traffic during the run, as the switch saw it
    links: dict[str, dict[int, dict[str, int]]] = field(default_factory=dict)
    # per switch of a fabric: its switch counters' change during the run (drops, unrouted)
    fabric_counters: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def all_matched(self) -> bool:
        return bool(self.outcomes) and all(o.ok and o.matched for o in self.outcomes)


def make_inputs(
    opts: Options, rng: np.random.Generator, block_values: int | None = None
) -> list[np.ndarray]:
    """Each rank's tensor: `density` of its blocks of K values non-zero (K: `block_values`,
    else opts.block_values, else the default), the same blocks on every rank or not."""
    k = block_values or opts.block_values or protocol.BLOCK_VALUES
    blocks = math.ceil(opts.size / k)
    chosen = max(1, round(opts.density * blocks)) if opts.density > 0 else 0
    shared = rng.choice(blocks, chosen, replace=False)
    tensors = []
    for _ in range(opts.workers):
        picked = shared if opts.overlap == "shared" else rng.choice(blocks, chosen, replace=False)
        mask = np.zeros(blocks, dtype=bool)
        mask[picked] = True
        full = np.zeros(blocks * k, dtype=np.float64)
        if opts.dtype == "int32":
            vals = rng.integers(-1_000_000, 1_000_000, blocks * k)
        else:
            vals = rng.standard_normal(blocks * k) * 10.0 ** rng.integers(-3, 3, blocks * k)
        full[np.repeat(mask, k)] = vals[np.repeat(mask, k)]
        tensors.append(full[: opts.size].astype(opts.dtype))
    return tensors


def check(
    result: np.ndarray,
    inputs: list[np.ndarray],
    dtype: str,
    block_values: int = protocol.BLOCK_VALUES,
) -> bool:
    """int32: exact. Floats: within docs/protocol.md section 10's bound per element -- the
    absolute one from each block's max over all ranks (blocks of the job's `block_values`;
    it holds at every magnitude; the relative form does not below 2^-129) -- plus rounding
    to the output dtype (half an ulp: relative eps/2 for normal results, half the smallest
    subnormal below)."""
    return not wrong_blocks(result, inputs, dtype, block_values).size


def wrong_blocks(
    result: np.ndarray,
    inputs: list[np.ndarray],
    dtype: str,
    block_values: int = protocol.BLOCK_VALUES,
) -> np.ndarray:
    """The blocks (of `block_values` values) where `result` fails `check`'s rule; all of
    them when it has the wrong dtype or shape. Why: a rank whose sum is wrong is reported
    with the blocks, which say which slot's stream (block mod slots) went wrong."""
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    n, k = len(inputs), block_values
    every = np.arange(-(-len(exact) // k))
    if result.shape != exact.shape:
        return every
    if dtype == "int32":
        if result.dtype != np.int32:
            return every
        bad = result.astype(np.int64) != exact.astype(np.int64)
    else:
        pad = (-len(exact)) % k
        peak = np.max(
            [np.abs(np.pad(x.astype(np.float64), (0, pad))).reshape(-1, k).max(1) for x in inputs],
            axis=0,
        )
        bound = np.repeat(numerics.sum_error_bound(peak, n), k)[: len(exact)]
        info = np.finfo(dtype)
        bound += np.abs(exact) * info.eps + float(info.smallest_subnormal)
        bad = ~(np.abs(result.astype(np.float64) - exact) <= bound)
    return np.unique(np.flatnonzero(bad) // k)


def _counters(intf: str) -> dict[str, int]:
    base = Path(f"/sys/class/net/{intf}/statistics")
    return {
        k: int((base / k).read_text()) for k in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes")
    }


class DemoNetwork:
    """A started network, switch and controller; jobs can be run on it one after another.
    `target`: a switch kind or "auto" (softswitch.runner.resolve_kind); `mtu`: the links'
    MTU to start with (a job whose frames need more raises it: `carry`)."""

    def __init__(
        self,
        target: str,
        n_hosts: int,
        mtu: int = topology.DEFAULT_MTU,
        topo: str = topology.STAR,
    ):
        self.kind = resolve_kind(target)
        self.mtu = mtu
        self.topo = topo
        self.hosts = topology.host_specs(n_hosts, topo)
        self.workdir = Path(tempfile.mkdtemp(prefix="p4reduce-demo-"))
        self.net = None
        self.ctl: Controller | FabricController | None = None
        self.next_job = 1

    def __enter__(self) -> "DemoNetwork":
        try:
            self.net = topology.build_network(
                self.hosts, self.kind, STOP.requested, self.mtu, self.topo
            )
            STOP.check()
            if self.topo == topology.TWO_LEVEL:
                fabric = topology.fabric_config(self.net, self.hosts, self.workdir)
                self.ctl = FabricController(parse_config(fabric))
            else:
                self.ctl = Controller(parse_config(self._star_config()))
            self.ctl.up()
            STOP.check()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _star_config(self) -> dict:
        """The one switch's configuration."""
        switch = self.net.get(topology.SWITCH_NAME)
        return {
            "switch": {
                "grpc_addr": switch.grpc_addr,
                "mac": topology.SWITCH_MAC,
                "ip": topology.SWITCH_IP,
                "ports": [h.port for h in self.hosts],
                # L2 entries: ordinary traffic between the hosts (e.g. gloo's TCP, which the
                # benchmarks run on the same hosts) crosses the switch too
                "hosts": [{"mac": h.mac, "port": h.port} for h in self.hosts],
                "state_file": str(self.workdir / "jobs.json"),
            }
        }

    def switch_links(self) -> dict[str, dict[int, dict[str, int]]]:
        """Every switch's ports' counters now ({switch: {port: counters}}), the switches
        named by role in a two-level network."""
        assert self.net is not None
        out = {}
        for switch in self.net.switches:
            label = _switch_label(switch.name)
            out[label] = {port: _counters(name) for port, name in switch.port_map().items()}
        return out

    def fabric_counters(self) -> dict[str, dict[str, int]]:
        """Each switch's counters now, by role, in a two-level network (none in a star:
        its one switch's are the jobs' table)."""
        if not isinstance(self.ctl, FabricController):
            return {}
        return {_switch_label(name): counters for name, counters in self.ctl.switch_stats().items()}

    def __exit__(self, *exc) -> None:
        if self.ctl is not None:
            self.ctl.close()
        if self.net is not None:
            self.net.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def set_mtu(self, mtu: int) -> None:
        """Every link's MTU (host and switch ends) to `mtu`, and `self.mtu` with it: the one
        way a started network's MTU changes, so what `carry` compares with is the links'.
        A softswitch port hands itself to a ring for the grown MTU at its first longer
        frame (softswitch.handover), so nothing waits here."""
        assert self.net is not None, "the network is not started"
        topology.set_mtu(self.net, mtu)
        self.mtu = mtu

    def carry(self, block_values: int, announce_block: bool = False) -> None:
        """Raise every link's MTU to carry the frames of a job of `block_values` values per
        block (wire.link_mtu: to JUMBO_MTU when that is enough, else to what the job
        needs; `announce_block`: its ANNOUNCEs carry a block, Job.announce_block). A link
        never shrinks: jobs of smaller blocks run on it as they are."""
        mtu = link_mtu(block_values, self.mtu, announce_block)
        if mtu != self.mtu and self.net is not None:
            self.set_mtu(mtu)

    def run_jobs(self, opts: Options, inputs: list[list[np.ndarray]] | None = None) -> Summary:
        """Create opts.jobs jobs of opts.workers hosts each, run them at once, check every
        worker's result, delete the jobs. `inputs` (per job, per rank) replaces the
        generated tensors."""
        assert self.ctl is not None and self.net is not None
        ctl, hosts = self.ctl, self.hosts
        if opts.jobs * opts.workers > len(hosts):
            raise ValueError(
                f"{opts.jobs} x {opts.workers} workers need more than {len(hosts)} hosts"
            )
        rng = np.random.default_rng(opts.seed)
        plan = []
        counted: dict[int, dict[str, int]] = {}
        procs: list = []
        try:
            for j in range(opts.jobs):
                STOP.check()
                job_hosts = hosts[j * opts.workers : (j + 1) * opts.workers]
                slots = _per_job(opts.job_slots, j, opts.slots)
                sized = {} if opts.block_values is None else {"block_values": opts.block_values}
                if opts.round_mode is not None:
                    sized["round_mode"] = opts.round_mode
                slots = default_slots(self.kind) if slots is None else slots
                job = ctl.jobs.create(
                    self.next_job,
                    [
                        WorkerAddress(r, h.port, h.mac, h.ip, protocol.UDP_PORT_BASE)
                        for r, h in enumerate(job_hosts)
                    ],
                    slots,
                    opts.encoding,
                    window=kind_window(self.kind, slots),
                    **sized,
                )
                self.next_job += 1
                self.carry(job.block_values, job.announce_block)
                if opts.loss:
                    ctl.jobs.set_loss(job.job, ingress=opts.loss, egress=opts.loss, seed=opts.seed)
                # the switch's per-job counters are indexed by job_index, which a later
                # job reuses without a reset: report this job's share only
                counted[job.job] = job_stats(ctl.conn, job.job_index)
                mine = inputs[j] if inputs is not None else make_inputs(opts, rng, job.block_values)
                plan.append((job, job_hosts, mine))
            used = [h for _, job_hosts, _ in plan for h in job_hosts]
            repeats = {
                job.job: _per_job(opts.job_repeats, j, opts.repeat)
                for j, (job, *_) in enumerate(plan)
            }
            expected = {
                h.name: expected_rounds(inputs, job.slot_count, job.int32_halves, job.block_values)
                * repeats[job.job]
                for job, job_hosts, inputs in plan
                for h in job_hosts
            }
            before = {h.name: _counters(h.link) for h in used}
            links_before = self.switch_links()
            counters_before = self.fabric_counters()
            start = time.perf_counter()
            for job, job_hosts, inputs in plan:
                for d, h, x in zip(job.descriptors(ctl.jobs.switch), job_hosts, inputs):
                    if d["rank"] in opts.absent_ranks:
                        self._write_rank(job.job, d, x)
                        continue
                    STOP.check()
                    flags = ["--repeat", str(repeats[job.job]), *worker_flags(opts)]
                    proc = self.spawn_worker(job.job, d, h, x, opts.deadline, flags)
                    procs.append((job, d["rank"], h, proc))
            while any(p.poll() is None for *_, p in procs):
                STOP.check()
                if not opts.quiet:
                    _progress(procs, used, before, expected, time.perf_counter() - start)
                time.sleep(0.3)  # a signal is seen within 0.3 s
            STOP.check()
            seconds = time.perf_counter() - start
            if not opts.quiet:
                print(file=sys.stderr)
            summary = Summary(self.kind, seconds, values=opts.size)
            summary.links = _link_deltas(links_before, self.switch_links())
            summary.fabric_counters = {
                sw: {k: v - counters_before[sw][k] for k, v in now.items()}
                for sw, now in self.fabric_counters().items()
            }
            for job, job_hosts, inputs in plan:
                for rank, h in enumerate(job_hosts):
                    summary.outcomes.append(self._outcome(job, rank, h, inputs, before, opts))
                after = job_stats(ctl.conn, job.job_index)
                summary.switch_counters[job.job] = {
                    k: v - counted[job.job].get(k, 0) for k, v in after.items()
                }
            return summary
        finally:
            for *_, p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            for job, *_ in plan:
                ctl.jobs.delete(job.job)

    def _write_rank(self, job: int, descriptor: dict, tensor: np.ndarray) -> Path:
        """A rank's descriptor and input under the work directory; the stem of its files."""
        stem = self.workdir / rank_stem(job, descriptor["rank"])
        Path(f"{stem}.json").write_text(json.dumps(descriptor))
        np.save(f"{stem}.in.npy", tensor)
        return stem

    def spawn_worker(
        self,
        job: int,
        descriptor: dict,
        host: topology.HostSpec,
        tensor: np.ndarray,
        deadline: float,
        flags: list[str] | None = None,
    ):
        """One rank's p4net.worker process on its Mininet host, reducing `tensor` (its
        descriptor and input written first; `flags`: the worker's further options, such
        as --repeat). Its report is `report(job, rank)` once it ended; what it prints goes
        to its log (`<stem>.log`), not to a pipe nobody reads, which a long run would fill."""
        assert self.net is not None
        stem = self._write_rank(job, descriptor, tensor)
        argv = [sys.executable, "-m", "p4net.worker", f"{stem}.json", f"{stem}.in.npy"]
        argv += [f"{stem}.out.npy", f"{stem}.report.json", "--deadline", str(deadline)]
        with open(f"{stem}.log", "wb") as log:
            return self.net.get(host.name).popen(
                argv + list(flags or ()),
                cwd=str(self.workdir),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def reboot_while_running(
        self, switch: str, procs: list, after: float = 3.0, timeout: float = 60.0
    ) -> tuple[bool | list[str], float]:
        """`after` seconds into the worker processes `procs` (spawn_worker, still
        running), switch `switch`'s process reboots and the controller restores it as its
        watch loop would (`ensure`): (what ensure says it redid, the seconds from the
        restore until the last of `procs` ended, each given `timeout`)."""
        assert self.ctl is not None and self.net is not None
        time.sleep(after)
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a worker process ended before the switch rebooted")
        self.net.get(switch).runner.restart()
        redone = self.ctl.ensure()
        restored = time.monotonic()
        for p in procs:
            p.wait(timeout=timeout)
        return redone, time.monotonic() - restored

    def report(self, job: int, rank: int) -> dict:
        """What a rank's p4net.worker process reported when it ended."""
        return json.loads((self.workdir / f"{rank_stem(job, rank)}.report.json").read_text())

    def _outcome(self, job, rank: int, h, inputs, before, opts: Options) -> WorkerOutcome:
        stem = self.workdir / rank_stem(job.job, rank)
        after, b = _counters(h.link), before[h.name]
        out = WorkerOutcome(
            job.job,
            rank,
            h.name,
            False,
            False,
            tx_packets=after["rx_packets"] - b["rx_packets"],
            tx_bytes=after["rx_bytes"] - b["rx_bytes"],
            rx_packets=after["tx_packets"] - b["tx_packets"],
            rx_bytes=after["tx_bytes"] - b["tx_bytes"],
        )
        report_path = Path(f"{stem}.report.json")
        if rank in opts.absent_ranks:
            out.error = "not started (absent rank)"
        elif report_path.exists():
            report = json.loads(report_path.read_text())
            out.ok = report["ok"]
            out.error = report.get("error", "")
            out.seconds = report.get("seconds", 0.0)
            out.retransmissions = report.get("stats", {}).get("retransmissions", 0)
            out.packets_sent = report.get("stats", {}).get("packets_sent", 0)
            out.stats = report.get("stats", {})
            out.times = report.get("times", [])
            out.calls = report.get("calls", [])
            out.report = report
            if out.ok:
                wrong = wrong_blocks(
                    np.load(f"{stem}.out.npy"), inputs, opts.dtype, job.block_values
                )
                out.matched = not wrong.size
                if wrong.size:
                    shown = ", ".join(str(b) for b in wrong[:8])
                    out.error = (
                        f"wrong sum in {wrong.size} block(s) of {job.block_values} values: "
                        f"{shown}{' ...' if wrong.size > 8 else ''}"
                    )
        else:
            out.error = "worker exited without a report"
        return out


def _per_job(values: tuple, j: int, default):
    """Job j's entry of a per-job option, or the option every job shares."""
    return values[j] if j < len(values) else default


def worker_flags(opts: Options) -> list[str]:
    """p4net.worker's options that `opts` sets; what it leaves None stays the worker's
    default."""
    flags = ["--warmup"] if opts.warmup else []
    for name, value in (("--window", opts.window), ("--call-slots", opts.call_slots)):
        if value is not None:
            flags += [name, str(value)]
    return flags


def rank_stem(job: int, rank: int) -> str:
    """The name every file of one rank of a job starts with: its descriptor's name
    (p4reduce.job.descriptor_name, as `p4reduce-ctl job create --descriptors DIR` names
    it) without `.json`; then its input, output, report and log."""
    return Path(descriptor_name(job, rank)).stem


def _switch_label(name: str) -> str:
    """A switch's name in the demo's tables: its role in a two-level network."""
    if name in topology.LEAF_NAMES:
        return f"leaf{topology.LEAF_NAMES.index(name) + 1}"
    return "spine" if name == topology.SWITCH_NAME else name


def _link_deltas(before: dict, after: dict) -> dict[str, dict[int, dict[str, int]]]:
    return {
        sw: {
            port: {k: v - before[sw][port][k] for k, v in counters.items()}
            for port, counters in ports.items()
        }
        for sw, ports in after.items()
    }


def run(opts: Options) -> Summary:
    with DemoNetwork(opts.target, opts.workers * opts.jobs, topo=opts.topo) as demo:
        return demo.run_jobs(opts)


def expected_rounds(
    inputs: list[np.ndarray],
    slots: int,
    int32_halves: bool = False,
    block_values: int = protocol.BLOCK_VALUES,
) -> int:
    """Rounds a job runs (docs/protocol.md section 6): per active slot, the blocks (of
    `block_values`) non-zero in any rank plus the announce round. What the progress line
    counts results against. A job with int32_halves sends int32 as two blocks of 16-bit
    halves per block of values."""
    halves = int32_halves and inputs[0].dtype.kind != "f"
    union = None
    for x in inputs:
        rows = numerics.to_blocks(x, block_values)
        if halves:
            rows = numerics.split_halves(rows)
        nonzero = rows.any(axis=1)
        union = nonzero if union is None else union | nonzero
    return round_count(int(union.sum()), union.size, slots, block_values=block_values)


def _progress(procs, hosts, before, expected: dict[str, int], elapsed: float) -> None:
    done = sum(p.poll() is not None for *_, p in procs)
    parts = []
    for h in hosts[:8]:
        got = _counters(h.link)["tx_packets"] - before[h.name]["tx_packets"]
        parts.append(f"{h.name} {min(100, 100 * got // max(1, expected[h.name])):3d}%")
    print(
        f"\r[{elapsed:6.1f}s] workers done {done}/{len(procs)}  results: " + "  ".join(parts),
        end="",
        file=sys.stderr,
        flush=True,
    )


def print_summary(s: Summary, opts: Options) -> None:
    print(
        f"\np4reduce demo on {s.kind}: {opts.jobs} job(s) x {opts.workers} workers, "
        f"{opts.size} {opts.dtype} values, density {opts.density} ({opts.overlap}), "
        f"loss {opts.loss}, {opts.block_values or protocol.BLOCK_VALUES} values per block, "
        f"{opts.topo} network"
    )
    print(
        f"{'job':>3} {'rank':>4} {'host':>5} {'time s':>7} {'tx pkts':>8} {'tx bytes':>10} "
        f"{'rx pkts':>8} {'rx bytes':>10} {'retx':>5} {'goodput Mval/s':>14}  result"
    )
    for o in s.outcomes:
        goodput = opts.size / o.seconds / 1e6 if o.seconds else 0.0
        verdict = (
            "exact"
            if o.matched and opts.dtype == "int32"
            else "within bound"
            if o.matched
            else (o.error or "MISMATCH")
        )
        print(
            f"{o.job:>3} {o.rank:>4} {o.host:>5} {o.seconds:7.2f} {o.tx_packets:>8} "
            f"{o.tx_bytes:>10} {o.rx_packets:>8} {o.rx_bytes:>10} {o.retransmissions:>5} "
            f"{goodput:14.3f}  {verdict}"
        )
    for job, counters in s.switch_counters.items():
        print(f"switch, job {job}: " + ", ".join(f"{k} {v}" for k, v in counters.items()))
    if len(s.links) > 1:  # a fabric: what each switch's ports carried
        print_links(s)
    print(
        f"total {s.seconds:.2f}s; every worker's result matched: {'yes' if s.all_matched else 'NO'}"
    )


def print_links(s: Summary) -> None:
    """The table per switch: each port's frames and bytes in (rx) and out (tx), as the
    switch's end of the link counted them (a leaf's last port is its uplink)."""
    print(
        f"{'switch':>7} {'port':>4} {'rx pkts':>8} {'rx bytes':>10} {'tx pkts':>8} {'tx bytes':>10}"
    )
    for switch, ports in sorted(s.links.items()):
        for port, c in sorted(ports.items()):
            print(
                f"{switch:>7} {port:>4} {c['rx_packets']:>8} {c['rx_bytes']:>10} "
                f"{c['tx_packets']:>8} {c['tx_bytes']:>10}"
            )
    for switch, counters in sorted(s.fabric_counters.items()):
        print(f"{switch}: " + ", ".join(f"{k} {v}" for k, v in counters.items()))


# The options `make run` sets, each from the make variable of its name in capitals
# (--workers='$(WORKERS)' ...: the Makefile's run recipe; tests/test_demo_args.py checks
# that the two agree).
MAKE_RUN = ("workers", "size", "density", "dtype", "loss", "target", "topo")


def make_variable(option: str) -> str:
    """What an error adds after an option (and its value) that `make run` sets: its make
    variable, " (SIZE)", so that `make run SIZE=0` says which variable was wrong."""
    return f" ({option.upper()})" if option in MAKE_RUN else ""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (`demo.py: error: ...`) and exit code 2, also under make.
    argparse's own (a value that is no int, a choice not offered) name the option through
    its make variable (`make_variable`) as the range checks do."""

    def error(self, message: str):  # type: ignore[override]
        message = re.sub(r"^argument --(\w+)", lambda m: m[0] + make_variable(m[1]), message)
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)

    def bad(self, option: str, value: object, why: str):
        """The one-line error for a value out of range."""
        self.error(f"--{option} {value}{make_variable(option)}: {why}")


TARGETS = ("auto", "softswitch", "simple_switch_grpc", "bmv2")
BMV2 = target_named("bmv2")  # the v1model program both switch kinds run
MAX_HOSTS = 253  # 10.0.0.1 .. 10.0.0.253; .254 is the switch


def parse_args(argv: list[str] | None = None) -> Options:
    """Command line -> Options; every out-of-range value is a one-line error, exit 2."""
    ap = _Parser(prog="demo.py", description=__doc__.splitlines()[0])
    d = Options()
    ap.add_argument("--workers", type=int, default=d.workers)
    ap.add_argument("--size", type=int, default=d.size, help="values per tensor (> 0)")
    ap.add_argument("--density", type=float, default=d.density)
    ap.add_argument("--overlap", choices=["shared", "independent"], default=d.overlap)
    ap.add_argument("--dtype", choices=["float32", "float64", "int32"], default=d.dtype)
    ap.add_argument(
        "--loss",
        type=float,
        default=d.loss,
        help="probability in [0, 1) of losing a packet in the switch, each way (P4 drop simulator)",
    )
    ap.add_argument("--target", default=d.target, help=f"one of {', '.join(TARGETS)}")
    ap.add_argument(
        "--slots",
        type=int,
        default=d.slots,
        help=f"slots per job (default: {default_slots(SOFTSWITCH)} on softswitch, "
        f"{default_slots(SIMPLE_SWITCH_GRPC)} on simple_switch_grpc, whose ports hold only so "
        "many unprocessed frames)",
    )
    ap.add_argument(
        "--encoding",
        choices=ENCODINGS,
        default=d.encoding,
        help="packed: one wide add per packet (the v1model target's default); lanes: "
        "int32 lanes added lane by lane with switch overflow detection",
    )
    ap.add_argument(
        "--block-values",
        type=int,
        default=d.block_values,
        help=f"values per block (per DATA packet) of the jobs: one of "
        f"{', '.join(str(k) for k in BMV2.block_sizes)} (default "
        f"{BMV2.default_block_values}); the links' MTU is raised to carry them",
    )
    ap.add_argument(
        "--topo",
        choices=topology.TOPOLOGIES,
        default=d.topo,
        help="star: one switch; two-level: a spine and two leaves, the workers split "
        "between the leaves, every job aggregated on the spine (docs/fabric.md)",
    )
    ap.add_argument("--jobs", type=int, default=d.jobs)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--deadline", type=float, default=d.deadline)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    if not 1 <= a.workers <= 32:
        ap.bad("workers", a.workers, "must be 1..32")
    if a.block_values is not None:
        try:
            resolve_block_values(BMV2, 1, a.block_values)
        except JobError as exc:
            ap.bad("block-values", a.block_values, str(exc).split(": ", 1)[1])
    k = a.block_values or BMV2.default_block_values
    most = min(protocol.END_OF_STREAM * k, protocol.MAX_ELEMENTS)  # blocks; a fingerprint
    if not 1 <= a.size <= most:
        ap.bad("size", a.size, f"must be 1..{most}")
    if not 0 <= a.density <= 1:  # also refuses NaN
        ap.bad("density", a.density, "must be in [0, 1]")
    if not 0 <= a.loss < 1:
        ap.bad("loss", a.loss, "must be a probability in [0, 1)")
    if a.target not in TARGETS:
        ap.bad("target", repr(a.target), f"unknown, expected one of {', '.join(TARGETS)}")
    try:
        kind = resolve_kind(a.target)
    except (RuntimeError, ValueError) as exc:
        ap.bad("target", repr(a.target), str(exc))
    sizes = PoolSizes.of(P4InfoIndex.load(DEFAULT_P4INFO))  # the program the demo pushes
    if a.slots is not None and not 1 <= a.slots <= sizes.pool_slots:
        ap.bad("slots", a.slots, f"must be 1..{sizes.pool_slots}")
    slots = default_slots(kind) if a.slots is None else a.slots
    # a two-level network's leaves take 10.0.0.252 and .253 (p4net.topology.LEAF_IPS)
    most_hosts = MAX_HOSTS - (len(topology.LEAF_IPS) if a.topo == topology.TWO_LEVEL else 0)
    if not 1 <= a.jobs <= sizes.max_jobs or a.jobs * a.workers > most_hosts:
        ap.bad(
            "jobs", a.jobs, f"must be 1..{sizes.max_jobs}, with jobs x workers at most {most_hosts}"
        )
    if a.jobs * slots > sizes.pool_slots:
        ap.error(f"--jobs {a.jobs} x --slots {slots} exceed the switch's {sizes.pool_slots} slots")
    if not 0 <= a.seed < 2**32:
        ap.bad("seed", a.seed, "must be 0..2^32-1")
    if not 0 < a.deadline < math.inf:
        ap.bad("deadline", a.deadline, "seconds must be > 0")
    return Options(
        a.workers,
        a.size,
        a.density,
        a.overlap,
        a.dtype,
        a.loss,
        a.target,
        a.slots,
        a.jobs,
        a.seed,
        a.deadline,
        (),
        a.quiet,
        encoding=a.encoding,
        block_values=a.block_values,
        topo=a.topo,
    )


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if os.geteuid() != 0:
        print("demo.py: error: Mininet needs root (run as root or with sudo)", file=sys.stderr)
        return 1
    try:
        with STOP.installed():
            summary = run(opts)
    except KeyboardInterrupt:
        print("\ninterrupted: everything started was stopped", file=sys.stderr)
        return 128 + (STOP.signum or signal.SIGINT)
    print_summary(summary, opts)
    return 0 if summary.all_matched else 1


if __name__ == "__main__":
    sys.exit(main())
