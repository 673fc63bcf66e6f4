"""A worker that runs allreduce after allreduce until told to stop (system tests).

Usage: python -m p4net.loop_worker DESCRIPTOR INPUT.npy EXPECTED.npy PROGRESS STOPFILE REPORT.json
       [--deadline S] [--max-seconds S] [--first FIRST.npy]

Each result is compared with EXPECTED (int32: exact). PROGRESS holds the number of finished
allreduces, rewritten after each one, so a test can act while the job is running (restart
the controller, kill a rank) and then see whether the job keeps going. Errors go into the
report, with the wall-clock time they were raised (`error_at`). With --first, the loop is
preceded by one allreduce of FIRST (ranks that disagree on it: the error it raises goes
into the report as `first_error`).

Every rank stops after the same call: each call carries one more element, the rank's vote
to stop (1 once STOPFILE exists or --max-seconds passed), and a rank stops when the sum is
non-zero -- which every rank sees in the same call. A rank that stopped on its own on
seeing STOPFILE would leave a rank that had just started another call waiting in it, until
its deadline, for a contribution that never comes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("descriptor", "input", "expected", "progress", "stop", "report"):
        ap.add_argument(name)
    ap.add_argument("--deadline", type=float, default=10.0)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--first")
    a = ap.parse_args()
    report: dict = {"ok": False, "iterations": 0, "mismatches": 0, "error": "", "first_error": ""}
    try:
        from hostlib import Worker

        x, expected = np.load(a.input), np.load(a.expected)
        start = time.monotonic()
        with Worker(a.descriptor, deadline=a.deadline) as worker:
            if a.first:
                try:
                    worker.allreduce(np.load(a.first))
                except ValueError as exc:
                    report["first_error"] = f"{type(exc).__name__}: {exc}"
            stop = False
            while not stop:
                vote = os.path.exists(a.stop) or time.monotonic() - start >= a.max_seconds
                result = worker.allreduce(np.append(x, np.array(vote, x.dtype)))
                report["iterations"] += 1
                report["mismatches"] += int(not np.array_equal(result[:-1], expected))
                stop = bool(result[-1])
                with open(a.progress + ".tmp", "w") as f:
                    f.write(str(report["iterations"]))
                os.replace(a.progress + ".tmp", a.progress)
        report["ok"] = True
    except Exception as exc:  # noqa: BLE001 -- reported to the test
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["error_at"] = time.time()  # wall clock: comparable across hosts' processes
    with open(a.report, "w") as f:
        json.dump(report, f)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
