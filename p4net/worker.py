"""One worker of the demo: runs inside a Mininet host, reduces one tensor, writes results.

Usage: python -m p4net.worker DESCRIPTOR INPUT.npy OUTPUT.npy REPORT.json [--op sum] [--deadline S]
The report says what happened (stats, or the error with its type), so the demo can show
a clear message for a worker that timed out instead of a traceback.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import sys
import time
import traceback

import numpy as np

from p4net.netcounters import delta, host_counters


def usage() -> tuple[float, float, int]:
    """This process's CPU seconds so far (user + system), of them the kernel's
    (getrusage: microseconds, where os.times counts clock ticks of 10 ms, longer than a
    sparse call), and its page faults that found the page in memory (fresh pages of a
    large allocation: the kernel zeroes each one first). Subtract two to get a call's."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return time.process_time(), ru.ru_stime, ru.ru_minflt


# a path prefix: the timed calls run under cProfile (thread CPU time) and their profile is
# written to PREFIX.PID.prof -- what a rank's CPU goes to on a real link (bench only)
PROFILE_ENV = "P4R_WORKER_PROFILE"


def profiler() -> cProfile.Profile | None:
    """A profiler of this rank's timed calls when PROFILE_ENV asks for one."""
    return cProfile.Profile(time.thread_time) if os.environ.get(PROFILE_ENV) else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("descriptor")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("report")
    ap.add_argument("--op", default="sum")
    ap.add_argument("--deadline", type=float, default=60.0)
    ap.add_argument("--repeat", type=int, default=1, help="timed allreduces of the tensor")
    ap.add_argument(
        "--window",
        type=int,
        default=None,
        help="the most slots the rank keeps outstanding (default: the Worker's, a job's "
        "fair share of a switch it shares)",
    )
    ap.add_argument(
        "--call-slots",
        type=int,
        default=None,
        help="the slots each call uses, the same on every rank (default: as many as the "
        "call's blocks want, p4reduce.job.slots_for_call)",
    )
    ap.add_argument(
        "--warmup",
        action="store_true",
        help="first a one-block allreduce of ones, untimed: all ranks then start the "
        "timed ones together, so process start-up skew is not measured, and each rank's "
        "link has carried one full DATA frame (a softswitch port takes a ring for a grown "
        "MTU at its first longer frame: a block of zeros sends none)",
    )
    args = ap.parse_args()
    report: dict = {"ok": False}
    try:
        from hostlib import Worker

        tensor = np.load(args.input)
        start = time.perf_counter()
        calls: list[dict] = []  # per allreduce: what it sent and retransmitted

        def account(kind: str, seconds: float, before: tuple[float, float, int]) -> None:
            """One call's record: `before` its start's usage()."""
            cpu, sys_cpu, faults = (now - then for now, then in zip(usage(), before))
            st = worker.stats
            done = sum(c["retransmissions"] for c in calls)
            calls.append(
                {
                    "kind": kind,
                    "seconds": seconds,
                    "cpu": cpu,  # this process's CPU seconds in the call (user + system)
                    "sys_cpu": sys_cpu,  # of which in the kernel (sockets, poll, faults)
                    "minor_faults": faults,
                    # turns that took frames in: each costs the engine's Python per batch
                    "receive_batches": st.receive_batches
                    - sum(c["receive_batches"] for c in calls),
                    "packets_sent": st.last_packets_sent,
                    "sent_by_type": dict(st.last_sent_by_type),
                    "nonzero_blocks": st.last_nonzero_blocks,
                    "retransmissions": st.retransmissions - done,
                }
            )

        with Worker(
            args.descriptor, deadline=args.deadline, window=args.window, call_slots=args.call_slots
        ) as worker:
            if args.warmup:
                t0, used = time.perf_counter(), usage()
                worker.allreduce(np.ones(worker.cfg.block_values, dtype=tensor.dtype))
                start = time.perf_counter()
                account("warmup", start - t0, used)
                report["warmup_stats"] = worker.stats.as_dict()
            # the link's own counters around the timed allreduces (what bench/ reports)
            counters = host_counters()
            # when each timed call began and ended on the host's monotonic clock, which
            # every namespace shares: a call's time, and the ranks' start skew
            spans = []
            prof = profiler()
            for _ in range(args.repeat):
                began, used = time.monotonic(), usage()
                if prof is not None:
                    prof.enable()
                result = worker.allreduce(tensor, op=args.op)
                if prof is not None:
                    prof.disable()
                spans.append((began, time.monotonic()))
                account("timed", spans[-1][1] - began, used)
            if prof is not None:
                prof.dump_stats(f"{os.environ[PROFILE_ENV]}.{os.getpid()}.prof")
            report["stats"] = worker.stats.as_dict()
            report["block_values"] = worker.cfg.block_values
            report["window"] = worker.params.window
            report["call_slots"] = worker.stats.last_call_slots
            report["counters"] = delta(counters, host_counters())
        report["seconds"] = time.perf_counter() - start
        report["times"] = [end - began for began, end in spans]
        report["spans"] = spans
        report["calls"] = calls
        np.save(args.output, result)
        report["ok"] = True
    except Exception as exc:  # reported to the demo, which shows it per worker
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()
    with open(args.report, "w") as f:
        json.dump(report, f)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
