#!/usr/bin/env python3
"""What a round costs, dense against rounds that carry SKIPs: time and CPU per round.

A round of the 10 % independent case (each rank non-zero on its own 10 % of the blocks)
carries about 1.2 DATA and 2.8 SKIPs; a dense round 4 DATA. Both take four packets into
the switch and four results out, so a round with SKIPs should cost what a dense one does
or less. Two measurements, each case in interleaved passes (a burst of load elsewhere on
the shared cores hits every case alike) and each pass's ratio to the dense case printed:

* in-process (no root): softswitch's Device in this process (p4net.harness.SwitchSession)
  and N hostlib Workers in threads on the real engine, so everything runs under one GIL
  and a round's wall time is its CPU. Per round: the switch's CPU by message type (the
  thread CPU time of Device.receive; a round's last packet also multicasts the result)
  and the workers' CPU (their threads' CPU time less the switch's work done in them: a
  send runs the switch in the sender's thread).
* end to end (`--mininet`, root): Mininet hosts, `python -m softswitch` as its own
  process, one worker process per rank, the two cores shared as in bench/suite.py. Per
  case the wall time per round of the best call (slowest rank), and the CPU per round of
  the switch process (/proc/PID/stat) and of the workers (getrusage(RUSAGE_CHILDREN)
  around each run: the demo reaps them), both summed over the run and divided by the
  rounds a worker took. Worker CPU includes their start-up (interpreter, numpy).

The inputs are bench/suite.py's (`dense`, `independent:D`, `shared:D`, `zipf`); `dense:F`
is a dense call on the first F of the values, as many rounds as a sparse call whose blocks'
union is that fraction (0.344 for independent:0.1 at 4 workers): a call's start (announce
rounds) and its end (fewer slots left than the window) weigh more per round in a short
call, so this case tells what the SKIPs cost from what the call's length costs.

    python bench/round_cost.py [--size 1048576] [--passes 3] [--window 16]
                               [--cases dense independent:0.1 ...] [--mininet]
                               [--json build/bench/round_cost.json] [--markdown]
    python bench/round_cost.py --from-json docs/bench/round_cost.json   # the docs' table
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from hostlib.worker import Worker
from p4net.harness import SwitchSession, TestJob
from p4reduce.wire import P4R_OFFSET, Flag, MsgType
from suite import Case, make_inputs

TICK = os.sysconf("SC_CLK_TCK")
WORKERS = 4
JOB = 7


@dataclass
class Cost:
    """One call of one case (per worker: rounds; seconds and CPU: per round)."""

    case: str
    rounds: float  # rounds per worker per call
    wall: float  # seconds per round (in-process: the call; Mininet: its best call)
    switch_cpu: float  # seconds per round
    worker_cpu: float  # seconds per round, all workers
    retransmissions: float  # per call, all workers
    # in-process only: per message type, packets per round and switch CPU per packet
    packets: dict[str, float] = field(default_factory=dict)
    per_packet: dict[str, float] = field(default_factory=dict)


def parse_case(spec: str, size: int) -> Case:
    """`dense:F` is a dense call on the first F of the values (whole blocks): as many
    rounds as a sparse call whose union of blocks is that fraction, so that the two differ
    only in their SKIPs, not in their length."""
    pattern, _, dens = spec.partition(":")
    if pattern == "dense":
        values = size if not dens else max(64, round(size * float(dens) / 64) * 64)
        return Case("softswitch", "p4reduce", WORKERS, values, pattern, 1.0, 1)
    if pattern == "zipf" and not dens:
        return Case("softswitch", "p4reduce", WORKERS, size, pattern, 0.0, 1)
    if pattern in ("shared", "independent") and dens:
        return Case("softswitch", "p4reduce", WORKERS, size, pattern, float(dens), 1)
    raise ValueError(f"case {spec!r}: expected dense[:F], zipf, shared:D or independent:D")


# -- in-process ---------------------------------------------------------------------------


class SwitchMeter:
    """Wraps an in-process Device's `receive`: thread CPU time and count per message type
    of the frames it takes in (ANNOUNCE, DATA, SKIP; a retransmission is counted with its
    type). Thread CPU, not wall time: another thread may hold the GIL mid-packet."""

    def __init__(self, device) -> None:
        self.cpu: Counter[str] = Counter()
        self.count: Counter[str] = Counter()
        self._receive = device.receive
        self._lock = threading.Lock()
        device.receive = self.receive

    def receive(self, port: int, frame: bytes) -> None:
        t = time.thread_time()
        self._receive(port, frame)
        dt = time.thread_time() - t
        kind = MsgType(frame[P4R_OFFSET] & 0x0F).name if len(frame) > P4R_OFFSET else "other"
        with self._lock:
            self.cpu[kind] += dt
            self.count[kind] += 1

    def reset(self) -> None:
        self.cpu.clear()
        self.count.clear()


def run_threads(workers: list[Worker], inputs: list[np.ndarray]) -> tuple[float, float]:
    """One allreduce on every worker at once; (wall seconds, CPU seconds of their threads)."""
    cpu = [0.0] * len(workers)
    errors: list[BaseException] = []

    def body(r: int) -> None:
        t = time.thread_time()
        try:
            workers[r].allreduce(inputs[r])
        except BaseException as e:  # re-raised below
            errors.append(e)
        cpu[r] = time.thread_time() - t

    threads = [threading.Thread(target=body, args=(r,)) for r in range(len(workers))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return wall, sum(cpu)


def in_process(cases: list[Case], specs: list[str], passes: int, window: int) -> list[Cost]:
    """Every case `passes` times, interleaved, on one in-process switch and job."""
    inputs = {spec: make_inputs(c) for spec, c in zip(specs, cases)}
    out = []
    with SwitchSession.inprocess(ports=WORKERS) as session:
        meter = SwitchMeter(session.device)
        job = session.create_job(WORKERS, 64, JOB, round_mode="every_rank")
        workers = [
            Worker(d, transport=session.transport(w.port), deadline=120.0, window=window)
            for d, w in zip(session.descriptors(job), job.workers)
        ]
        try:
            run_threads(workers, [np.ones(64, np.float32)] * WORKERS)  # warm-up
            for _ in range(passes):
                for spec in specs:
                    out.append(_in_process_call(spec, workers, meter, inputs[spec]))
                    print_row("in-process", out[-1])
        finally:
            for w in workers:
                w.close()
    return out


def _in_process_call(spec: str, workers: list[Worker], meter: SwitchMeter, inputs) -> Cost:
    meter.reset()
    r0 = [w.stats.rounds for w in workers]
    x0 = sum(w.stats.retransmissions for w in workers)
    wall, cpu = run_threads(workers, inputs)
    rounds = float(np.mean([w.stats.rounds - r for w, r in zip(workers, r0)]))
    switch = sum(meter.cpu.values())
    return Cost(
        case=spec,
        rounds=rounds,
        wall=wall / rounds,
        switch_cpu=switch / rounds,
        worker_cpu=(cpu - switch) / rounds,
        retransmissions=sum(w.stats.retransmissions for w in workers) - x0,
        packets={k: n / rounds for k, n in meter.count.items()},
        per_packet={k: meter.cpu[k] / n for k, n in meter.count.items()},
    )


def packet_times(rounds: int = 60, slots: int = 32) -> dict[str, float]:
    """Median switch time per packet (seconds) by kind, DATA or SKIP, and by whether it
    completes its round (then it also multicasts the result): rounds of N DATA and
    rounds of 1 DATA + N-1 SKIPs alternate on one job (bench/softswitch_pps.py's frames,
    straight into `Switch.process`), each packet timed on its own, so that a burst of
    load moves a few packets, not a median."""
    from softswitch_pps import JOB as PPS_JOB
    from softswitch_pps import frames_for

    times: dict[str, list[float]] = {}
    with SwitchSession.inprocess(ports=WORKERS) as session:
        made = session.create_job(
            WORKERS, slots, PPS_JOB, encoding="packed", round_mode="every_rank"
        )
        job, sw = TestJob(session, made), session.device.active.switch
        ports = [w.port for w in made.workers]
        for rank, port in enumerate(ports):
            for slot in range(slots):
                announce = job.frame(
                    rank, MsgType.ANNOUNCE, slot=slot, next_block=slot, flags=Flag.PACKED
                )
                sw.process(port, announce)
        for r in range(2 * rounds):
            data_ranks = WORKERS if r % 2 == 0 else 1
            (rnd,) = frames_for(job, WORKERS, slots, 1, True, data_ranks, r)
            for rank, frame in rnd:
                t = time.perf_counter()
                sw.process(ports[rank], frame)
                dt = time.perf_counter() - t
                kind = "DATA" if rank < data_ranks else "SKIP"
                last = " completing" if rank == WORKERS - 1 else ""
                times.setdefault(kind + last, []).append(dt)
    return {k: statistics.median(v) for k, v in sorted(times.items())}


# -- end to end on Mininet ----------------------------------------------------------------


def process_cpu(pid: int) -> float:
    """utime + stime of a live process, seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def mininet(cases: list[Case], specs: list[str], passes: int) -> list[Cost]:
    """Every case `passes` times, interleaved, each a job of its own on one network."""
    from p4net import demo, topology

    inputs = {spec: make_inputs(c) for spec, c in zip(specs, cases)}
    out = []
    with demo.DemoNetwork("softswitch", WORKERS) as net:
        switch_pid = net.net.get(topology.SWITCH_NAME).runner.process.pid
        for _ in range(passes):
            for spec, c in zip(specs, cases):
                out.append(_mininet_run(demo, net, switch_pid, spec, c, inputs[spec]))
                print_row("mininet", out[-1])
    return out


def _mininet_run(demo, net, switch_pid: int, spec: str, c: Case, inputs) -> Cost:
    # a short call is timed three times (its best kept): one descheduling weighs more in it
    repeat = 1 if c.pattern == "dense" else 3
    opts = demo.Options(
        workers=WORKERS,
        size=c.size,
        target=net.kind,
        quiet=True,
        repeat=repeat,
        warmup=True,
        deadline=600.0,
        round_mode="every_rank",  # what a SKIP round costs: every rank sends each round
    )
    w0, s0 = children_cpu(), process_cpu(switch_pid)
    summary = net.run_jobs(opts, inputs=[inputs])
    w1, s1 = children_cpu(), process_cpu(switch_pid)
    bad = [o.rank for o in summary.outcomes if not (o.ok and o.matched)]
    if bad:
        raise RuntimeError(f"{spec}: ranks {bad} failed or mismatched")
    outs = summary.outcomes
    calls = [max(t) for t in zip(*[o.times for o in outs])]
    rounds = float(np.mean([o.report["stats"]["rounds"] for o in outs])) / repeat
    run_rounds = float(np.mean([o.stats["rounds"] for o in outs]))  # warm-up included
    return Cost(
        case=spec,
        rounds=rounds,
        wall=min(calls) / rounds,
        switch_cpu=(s1 - s0) / run_rounds,
        worker_cpu=(w1 - w0) / run_rounds,
        retransmissions=sum(o.stats["retransmissions"] for o in outs) / (repeat + 1),
    )


# -- report -------------------------------------------------------------------------------


def print_row(part: str, c: Cost) -> None:
    kinds = " ".join(
        f"{k} {c.packets[k]:.2f}x{c.per_packet[k] * 1e6:.1f}"
        for k in ("DATA", "SKIP", "ANNOUNCE")
        if k in c.packets
    )
    print(
        f"{part:10s} {c.case:16s} {c.rounds:7.0f} {c.wall * 1e6:9.0f} "
        f"{c.switch_cpu * 1e6:8.0f} {c.worker_cpu * 1e6:8.0f} {c.retransmissions:6.0f}"
        + (f"   per round: {kinds} us" if kinds else ""),
        flush=True,
    )


def ratios(rows: list[Cost], specs: list[str]) -> dict[str, dict[str, float]]:
    """Per case other than dense: its wall, switch CPU and worker CPU per round over the
    dense case's, pass by pass (the median) and best against best."""
    by = {s: [r for r in rows if r.case == s] for s in specs}
    dense = by[specs[0]]
    out = {}
    for spec in specs[1:]:
        per_pass = [r.wall / d.wall for r, d in zip(by[spec], dense)]
        cpu = [
            (r.switch_cpu + r.worker_cpu) / (d.switch_cpu + d.worker_cpu)
            for r, d in zip(by[spec], dense)
        ]
        out[spec] = {
            "wall_median": statistics.median(per_pass),
            "wall_min": min(per_pass),
            "wall_max": max(per_pass),
            "cpu_median": statistics.median(cpu),
            "cpu_min": min(cpu),
            "cpu_max": max(cpu),
            "wall_best": min(r.wall for r in by[spec]) / min(d.wall for d in dense),
            "switch_cpu": statistics.median(
                r.switch_cpu / d.switch_cpu for r, d in zip(by[spec], dense)
            ),
            "worker_cpu": statistics.median(
                r.worker_cpu / d.worker_cpu for r, d in zip(by[spec], dense)
            ),
        }
    return out


def print_ratios(part: str, rs: dict[str, dict[str, float]], dense: str) -> None:
    for spec, r in rs.items():
        print(
            f"{part}: {spec} / {dense} per round: wall {r['wall_median']:.2f} (passes "
            f"{r['wall_min']:.2f}-{r['wall_max']:.2f}, best/best {r['wall_best']:.2f}), "
            f"CPU {r['cpu_median']:.2f} (switch {r['switch_cpu']:.2f}, workers "
            f"{r['worker_cpu']:.2f})"
        )


def _ratio(rs: dict[str, dict[str, float]], spec: str, what: str) -> str:
    if spec not in rs:
        return "1.00"
    r = rs[spec]
    return f"{r[what + '_median']:.2f} ({r[what + '_min']:.2f}–{r[what + '_max']:.2f})"


def markdown(result: dict) -> str:
    """The docs' table: per part and case, the median over passes of the wall time and
    the CPU per round, and the median (range) of the per-pass ratios to the dense case's
    wall time and CPU (switch + workers) per round."""
    lines = [
        "| part | case | rounds | µs/round | ÷ dense | switch CPU µs/round | workers' CPU "
        "µs/round | CPU ÷ dense | retransmissions per call |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for part in ("in-process", "mininet"):
        if part not in result:
            continue
        rows = [Cost(**r) for r in result[part]["rows"]]
        specs = list(dict.fromkeys(r.case for r in rows))
        rs = ratios(rows, specs)
        for spec in specs:
            mine = [r for r in rows if r.case == spec]
            lines.append(
                f"| {part} | {spec} | {mine[0].rounds:.0f} | "
                f"{statistics.median(r.wall for r in mine) * 1e6:.0f} | "
                f"{_ratio(rs, spec, 'wall')} | "
                f"{statistics.median(r.switch_cpu for r in mine) * 1e6:.0f} | "
                f"{statistics.median(r.worker_cpu for r in mine) * 1e6:.0f} | "
                f"{_ratio(rs, spec, 'cpu')} | "
                f"{statistics.median(r.retransmissions for r in mine):.0f} |"
            )
    if "packet_times" in result:
        lines.append("")
        lines.append(
            "Switch time per packet (median, in-process, packed; rounds of 4 DATA and of "
            "1 DATA + 3 SKIPs alternating): "
            + ", ".join(f"{k} {v * 1e6:.1f} µs" for k, v in result["packet_times"].items())
            + "."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1 << 20, help="float32 values per rank")
    ap.add_argument("--passes", type=int, default=3, help="passes over the cases (interleaved)")
    ap.add_argument(
        "--cases",
        nargs="+",
        default=["dense", "independent:0.1"],
        help="the first is the reference (dense); others: dense:F, independent:D, shared:D, zipf",
    )
    ap.add_argument("--window", type=int, default=None, help="in-process workers' window")
    ap.add_argument("--mininet", action="store_true", help="also end to end on Mininet (root)")
    ap.add_argument("--no-inprocess", action="store_true", help="Mininet part only")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", action="store_true", help="print the docs' table at the end")
    ap.add_argument("--from-json", type=Path, help="print the table of an earlier run, run nothing")
    args = ap.parse_args(argv)
    if args.from_json:
        print(markdown(json.loads(args.from_json.read_text())))
        return 0
    try:
        cases = [parse_case(s, args.size) for s in args.cases]
    except ValueError as e:
        ap.error(str(e))
    if args.mininet and os.geteuid() != 0:
        ap.error("--mininet needs root")
    from hostlib.timers import EngineParams

    window = args.window or EngineParams().window
    print(
        f"{WORKERS} workers, {args.size} float32, 64 slots, window {window} (in-process), "
        f"{args.passes} passes, load {os.getloadavg()[0]:.1f}"
    )
    print("part       case              rounds  us/round  CPU us/round: switch  workers  retx")
    result: dict = {
        "command": "python bench/round_cost.py " + shlex.join(argv or sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_at_start": os.getloadavg()[0],
        "size": args.size,
        "window": window,
    }
    parts = []
    if not args.no_inprocess:
        per_packet = packet_times()
        result["packet_times"] = per_packet
        print(
            "switch per packet (median, packed, rounds of 4 DATA and of 1 DATA + 3 SKIPs "
            "alternating): " + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in per_packet.items())
        )
        parts.append(("in-process", in_process(cases, args.cases, args.passes, window)))
    if args.mininet:
        parts.append(("mininet", mininet(cases, args.cases, args.passes)))
    for part, rows in parts:
        rs = ratios(rows, args.cases)
        print_ratios(part, rs, args.cases[0])
        result[part] = {"rows": [asdict(r) for r in rows], "ratios": rs}
    result["load_at_end"] = os.getloadavg()[0]
    print(f"load {result['load_at_end']:.1f} at the end")
    if args.markdown:
        print(markdown(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
