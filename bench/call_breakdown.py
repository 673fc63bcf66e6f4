#!/usr/bin/env python3
"""Where one wide-block allreduce's time goes end to end, on Mininet (softswitch, or --target).

Not a test: a measurement (root). bench/suite.py's headline jobs (4 workers, 1 M float32,
`job_slots` slots, the links at the job's MTU), each run with --repeat timed calls; per
case, per timed call:

* wall: the best call's time at the slowest rank (as the suite reports it);
* the switch process's CPU, user and system apart (/proc/PID/stat around the job, divided
  by its timed calls: the warm-up call and the job's set-up are in it): user is the
  interpreter and the P4 program, system the sockets' receive and send (the kernel's
  veth transmit of each copy out includes the receiving rank's side of it); of it, the
  CPU of its ports' thread, which runs every packet and nothing else (what is left is
  the P4Runtime server's: the job's set-up and tear-down, paid per job, not per frame);
  and the time that thread was runnable but waited for a core (schedstat);
* the workers' CPU in the call, all ranks summed (each rank's process_time around its
  calls, p4net.worker's report), and of it the kernel's share (sockets, poll, page
  faults);
* rounds per rank, the turns per rank that took frames in (each costs the engine's
  Python per batch, however few frames it holds), a rank's minor page faults per call
  (fresh pages of large temporaries, each zeroed by the kernel: system CPU) and the
  frames into the switch per call (the ranks' sent packets).

The switch's share of set-up is a few per cent of a dense call but most of a call of few
blocks (a call of no non-zero block is 64 small frames): the packet thread's column
leaves it out; give such calls a larger --repeat (30) so it spreads over them.

The two cores are shared by the switch and four workers: a call cannot be faster than
(switch CPU + worker CPU) / 2, nor than the switch's CPU alone (one thread does every
packet). What is left of the wall time beyond both is waiting: pipeline bubbles (too few
slots in flight), sleeps, or other processes on the cores.

    python bench/call_breakdown.py [--values 2048,4096] [--modes silent,every_rank]
                                   [--repeat 3] [--slots N] [--target simple_switch_grpc]
                                   [--switch-nice 0,-10 --passes 3]

With P4R_WORKER_PROFILE=PREFIX in its environment each rank (p4net.worker) also profiles
its timed calls (cProfile on thread CPU time) into PREFIX.PID.prof: where a rank's CPU
goes on a real link (`python -m pstats`, or pstats.Stats over the four files).

--switch-nice runs every case once per listed nice value of the switch process (set on it
and its session's autogroup between cases, softswitch.runner.prioritize; the switch
starts at SWITCH_NICE), in --passes passes, alternating, and ends with each case's median
per value: what the switch's priority is worth in one run, whatever the load.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from round_cost import process_times
from suite import M, Case, job_slots, make_inputs, reset_mtu


@dataclass
class Breakdown:
    label: str
    wall: float  # best timed call, slowest rank, seconds
    switch_user: float  # per timed call (warm-up's share removed by rounds), seconds
    switch_sys: float
    switch_thread: float  # per timed call: the ports' (packet) thread's CPU, of user + sys
    switch_queued: float  # per timed call: the ports' thread runnable but not running
    worker_cpu: float  # per timed call, all ranks (each rank's process_time in its calls)
    worker_sys: float  # of which in the kernel
    turns: float  # per rank per timed call: turns that took frames in
    faults: float  # per rank per timed call: minor page faults (fresh pages zeroed)
    rounds: float  # per rank per timed call
    switch_frames_in: float  # per timed call

    def line(self) -> str:
        ms = 1e3
        frames = max(self.switch_frames_in, 1)
        per_frame = (self.switch_user + self.switch_sys) / frames
        return (
            f"{self.label:32s} wall {self.wall * ms:6.1f} ms | switch user "
            f"{self.switch_user * ms:6.1f} sys {self.switch_sys * ms:5.1f} queued "
            f"{self.switch_queued * ms:5.1f} ms ({per_frame * 1e6:5.1f}"
            f" us/frame in, packet thread {self.switch_thread / frames * 1e6:5.1f})"
            f" | workers {self.worker_cpu * ms:6.1f} ms (sys "
            f"{self.worker_sys * ms:5.1f}) | rounds {self.rounds:.0f}, turns "
            f"{self.turns:.1f}, faults {self.faults:.0f}, frames in {self.switch_frames_in:.0f}"
        )


def schedstats(pid: int) -> dict[str, tuple[int, int]]:
    """Per thread of the process: (ns on a core, ns runnable on a run queue but not
    running), /proc/PID/task/TID/schedstat."""
    out = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            ran, waited = stat.read_text().split()[:2]
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        out[stat.parent.name] = (int(ran), int(waited))
    return out


def packet_thread(before: dict, after: dict) -> tuple[float, float]:
    """Seconds the switch's busiest thread over the run (the ports' loop, which runs every
    packet) ran, and waited for a core while runnable: time it could have run in, but
    another process had the core."""
    delta = {
        t: (a[0] - before.get(t, (0, 0))[0], a[1] - before.get(t, (0, 0))[1])
        for t, a in after.items()
    }
    ran, waited = max(delta.values())
    return ran / 1e9, waited / 1e9


def run(net, switch_pid: int, c: Case, repeat: int, slots: int | None) -> Breakdown:
    """One job of `repeat` timed calls (after the demo's warm-up call)."""
    from p4net import demo

    reset_mtu(net)
    opts = demo.Options(
        workers=c.workers,
        size=c.size,
        target=net.kind,
        slots=slots or job_slots(c),
        quiet=True,
        repeat=repeat,
        warmup=True,
        deadline=600.0,
        encoding="packed",
        block_values=c.block_values,
        round_mode=c.round_mode,
    )
    inputs = make_inputs(c)
    s0, q0 = process_times(switch_pid), schedstats(switch_pid)
    summary = net.run_jobs(opts, inputs=[inputs])
    s1, q1 = process_times(switch_pid), schedstats(switch_pid)
    outs = summary.outcomes
    if not all(o.ok and o.matched for o in outs):
        raise RuntimeError(f"{c.label()}: {[o.error for o in outs if not o.ok]}")
    timed = [[k for k in o.calls if k["kind"] == "timed"] for o in outs]
    walls = [max(t) for t in zip(*[o.times for o in outs])]
    ran, waited = packet_thread(q0, q1)
    return Breakdown(
        label=c.label().replace(f"{c.target} p4reduce 4w 1 M ", ""),
        wall=min(walls),
        switch_user=(s1[0] - s0[0]) / repeat,
        switch_sys=(s1[1] - s0[1]) / repeat,
        switch_thread=ran / repeat,
        switch_queued=waited / repeat,
        worker_cpu=float(sum(np.mean([k["cpu"] for k in t]) for t in timed)),
        worker_sys=float(sum(np.mean([k["sys_cpu"] for k in t]) for t in timed)),
        turns=float(np.mean([k["receive_batches"] for t in timed for k in t])),
        faults=float(np.mean([k["minor_faults"] for t in timed for k in t])),
        rounds=float(
            np.mean([o.stats["rounds"] - o.report["warmup_stats"]["rounds"] for o in outs])
        )
        / repeat,
        switch_frames_in=float(sum(np.mean([k["packets_sent"] for k in t]) for t in timed)),
    )


def main() -> int:
    from p4net import demo, topology

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", default="2048,4096")
    ap.add_argument("--modes", default="silent,every_rank")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--slots", type=int, default=None, help="job's slots (default: job_slots)")
    ap.add_argument("--density", type=float, default=1.0, help="< 1: same blocks (shared)")
    ap.add_argument(
        "--pattern",
        default=None,
        help="bench/suite.py's pattern of the non-zero blocks (default: dense at --density 1, "
        "else shared); independent: each rank its own, so every-rank rounds carry SKIPs",
    )
    ap.add_argument("--target", default="softswitch", help="softswitch or simple_switch_grpc")
    ap.add_argument(
        "--switch-nice",
        type=lambda v: [int(x) for x in v.split(",")],
        default=None,
        help="comma-separated nice values of the switch, each case run at each",
    )
    ap.add_argument("--passes", type=int, default=1, help="with --switch-nice: passes")
    a = ap.parse_args()
    pattern = a.pattern or ("dense" if a.density >= 1 else "shared")
    cases = [
        Case(
            a.target,
            "p4reduce",
            4,
            M,
            pattern,
            a.density,
            a.repeat,
            block_values=int(k),
            round_mode=mode,
        )
        for k in a.values.split(",")
        for mode in a.modes.split(",")
    ]
    with demo.DemoNetwork(a.target, 4) as net:
        pid = net.net.get(topology.SWITCH_NAME).runner.process.pid
        if a.switch_nice is None:
            for c in cases:
                print(run(net, pid, c, a.repeat, a.slots).line(), flush=True)
            return 0
        by_nice = compare_nice(net, pid, cases, a)
    print("medians over the passes:")
    for (_label, nice), runs in by_nice.items():
        print(f"nice {nice:3d} {median_of(runs).line()}")
    return 0


def compare_nice(net, pid: int, cases: list[Case], a) -> dict:
    """Every case at every nice value of the switch, pass after pass, alternating (a
    burst of load elsewhere hits each value alike); the switch back at SWITCH_NICE after."""
    from softswitch.runner import SWITCH_NICE, prioritize

    out: dict[tuple[str, int], list[Breakdown]] = {}
    try:
        for p in range(a.passes):
            for c in cases:
                for nice in a.switch_nice:
                    if not prioritize(pid, nice):
                        raise SystemExit(f"could not set the switch's nice to {nice} (root?)")
                    b = run(net, pid, c, a.repeat, a.slots)
                    out.setdefault((b.label, nice), []).append(b)
                    print(f"pass {p} nice {nice:3d} {b.line()}", flush=True)
    finally:
        prioritize(pid, SWITCH_NICE)
    return out


def median_of(runs: list[Breakdown]) -> Breakdown:
    """The field-by-field median of a case's runs."""
    fields = [f for f in Breakdown.__dataclass_fields__ if f != "label"]
    return Breakdown(
        runs[0].label, **{f: float(np.median([getattr(r, f) for r in runs])) for f in fields}
    )


if __name__ == "__main__":
    sys.exit(main())
