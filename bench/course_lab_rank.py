"""One rank of a course-lab peer, timed: bench/course_lab.py starts it in the rank's namespace.

Runs with the peer's interpreter (scapy 2.5.0, standard library only) in the adapted temp
copy of the peer's lab directory (cwd), so `import worker` is their worker.py and `lib.*`
their lib. It does what their main() does for one vector -- the same socket (or interface),
their GenInts/CreateTestData, their AllReduce, their RunIntTest -- except that the vector is
longer and the AllReduce call is timed:

    course_lab_rank.py --impl j-udp --rank R --values N --sync DIR [--no-log]

Protocol with the parent (files in DIR): after the data is made this rank writes
`ready-R`; the parent writes `start` (an absolute time.time()) once every rank is ready;
every rank sleeps until then, calls AllReduce, and writes `rank-R.json` (start, end, their
test's verdict) and `result-R.csv` (the reduced vector, which the parent checks itself).
Nothing of the peer's code is changed here; `--no-log` replaces the name `Log` in their
worker module with a no-op (the diagnostic of docs/course-baseline.md), not their file.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path


def wait_for(path: Path, timeout: float) -> str:
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:
            raise TimeoutError(f"no {path} within {timeout}s")
        time.sleep(0.005)
    return path.read_text()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", required=True, choices=["j-udp", "y-udp", "y-eth"])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--values", type=int, required=True)
    ap.add_argument("--sync", type=Path, required=True)
    ap.add_argument("--test-id", required=True)
    ap.add_argument("--no-log", action="store_true")
    a = ap.parse_args()

    # their worker.py and lib/: on PYTHONPATH (course_lab.py sets it to their checkout)
    sys.argv = ["worker.py", str(a.rank)]  # what their lib.worker.rank() reads
    import lib.config  # noqa: F401 -- theirs: sets APP_ROOT/APP_LOGS/APP_TEST as network.py does
    import worker as their  # their worker.py (module-level code runs, as with `python worker.py`)

    if a.no_log:
        their.Log = lambda *args: None

    data = their.GenInts(a.values)
    result = their.GenInts(a.values, 0)
    their.CreateTestData(a.test_id, a.rank, data)
    if a.impl == "j-udp":  # as their main()
        conn = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        conn.bind((f"10.0.0.{a.rank + 1}", 0x4200))
    elif a.impl == "y-udp":
        conn = socket.socket(family=socket.AF_INET, type=socket.SOCK_DGRAM)
        conn.bind((their.SRC_IP_ADDR, their.SRC_PORT))
    else:
        conn = "eth0"

    (a.sync / f"ready-{a.rank}").write_text("")
    start_at = float(wait_for(a.sync / "start", 120.0))
    while (left := start_at - time.time()) > 0.002:
        time.sleep(left - 0.002)
    while time.time() < start_at:
        pass
    t0 = time.time()
    their.AllReduce(conn, a.rank, data, result)
    t1 = time.time()
    if isinstance(conn, socket.socket):
        conn.close()

    # their check (reads every rank's data file; writes result-rank-R.txt in the test dir)
    their.RunIntTest(a.test_id, a.rank, result, 4, False)
    verdict_file = Path(os.environ["APP_TEST"]) / f"test-{a.test_id}" / f"result-rank-{a.rank}.txt"
    verdict = verdict_file.read_text() if verdict_file.exists() else "no result file"
    (a.sync / f"result-{a.rank}.csv").write_text(",".join(map(str, result)))
    (a.sync / f"rank-{a.rank}.json").write_text(
        json.dumps(
            {
                "rank": a.rank,
                "start": t0,
                "end": t1,
                "values": a.values,
                "their_test_pass": verdict.rstrip().endswith("PASS"),
                "their_test": verdict[-400:],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
