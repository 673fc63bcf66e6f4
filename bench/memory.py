#!/usr/bin/env python3
"""Peak memory of one worker's allreduce, as a multiple of the tensor's bytes.

Not a test: a measurement (`python bench/memory.py`). Every case runs in a fresh child
process, so one case's peak cannot hide another's:

  in-process  the real P4 program on an in-process softswitch (p4net.harness)
              and one Worker of a one-rank job in the same process (no root).
  raw socket  (root) the Worker on its AF_PACKET socket (PACKET_MMAP rings) in a
              namespace, against the C reflector of bench/hostlib_pps.py (answers like a
              one-rank switch) over a veth.

In both, after the set-up and a small warm-up call the child notes its resident set,
builds the tensor (no temporaries: numpy writes it in place), resets the kernel's peak
(/proc/self/clear_refs) and runs the calls. Figure = (VmHWM - resident set before the
tensor) / tensor bytes: the input itself counts 1.0 and the output another 1.0.

A one-rank job: a worker's memory does not depend on how many ranks the job has (the
switch sums; every rank holds its own input and result). Also prints each in-process
case's best call time (in-process: the softswitch's speed, not the worker's).

    python bench/memory.py                          # 1 M and 20 M, float32 and int32,
                                                    # dense and 10 % of blocks non-zero
    python bench/memory.py --sizes 1000000 --paths in-process

Figures and the command: docs/benchmarks.md ("Worker memory").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

WARM_UP = 4096  # values of the call before the measurement (first-call set-up)
SLOTS = 256


def make_tensor(size: int, dtype: str, density: float, seed: int = 1) -> np.ndarray:
    """The tensor, written in place (no temporary of its size): normal floats or int32 in
    +-1000; with density < 1 only that fraction of its 64-value blocks (the last one
    always) is non-zero."""
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        x = rng.integers(-1000, 1000, size, dtype=np.int32)
    else:
        x = np.empty(size, dtype)
        rng.standard_normal(size, dtype=np.dtype(dtype).type, out=x)
    full = size // 64
    if density < 1 and full:
        drop = rng.random(full) >= density
        x[: full * 64].reshape(full, 64)[drop] = 0
    return x


def _status(key: str) -> int:
    """A /proc/self/status figure (kB) in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def measure(w, size: int, dtype: str, density: float, repeat: int) -> dict:
    """Warm-up call, resident set, the tensor, peak reset, the calls, the peak."""
    w.allreduce(np.ones(WARM_UP, dtype))
    base = _status("VmRSS")
    x = make_tensor(size, dtype, density)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    times, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        y = w.allreduce(x)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)  # this process's CPU: steadier under load
        del y
    peak = _status("VmHWM")
    return {"base": base, "peak": peak, "bytes": x.nbytes, "seconds": min(times), "cpu": min(cpu)}


def child(descriptor: str, size: int, dtype: str, density: float, repeat: int) -> dict:
    """One case, in its own process: over the raw socket with `descriptor` (a path), or
    with "-" against the in-process switch."""
    from hostlib import Worker

    if descriptor != "-":
        with Worker(descriptor, timeout=0.005) as w:
            return measure(w, size, dtype, density, repeat)
    from p4net.harness import SwitchSession

    with SwitchSession.inprocess() as sw:
        job = sw.create_job(1, SLOTS, 7, encoding="packed")
        desc = sw.descriptors(job)[0]
        with Worker(desc, transport=sw.transport(job.workers[0].port), timeout=0.05) as w:
            return measure(w, size, dtype, density, repeat)


def run_child(argv: list[str]) -> dict:
    """A child's figures, with the ratio: (peak - resident set before the tensor) / bytes."""
    out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["ratio"] = (r["peak"] - r["base"]) / r["bytes"]
    return r


def child_argv(descriptor: str, case: tuple[int, str, float], repeat: int) -> list[str]:
    size, dtype, density = case
    return [sys.executable, __file__, "--child", descriptor, str(size), dtype, str(density)] + [
        str(repeat)
    ]


def raw_socket(cases: list[tuple[int, str, float]], repeat: int) -> dict:
    """Each case in a child in the worker's namespace, against the C reflector."""
    from hostlib import netns

    from hostlib_pps import c_reflector, compile_baseline  # beside this script

    out = {}
    with tempfile.TemporaryDirectory() as td, netns.Topology(1, slot_count=SLOTS) as t:
        tmp = Path(td)
        exe = compile_baseline(tmp)
        desc = tmp / "d0.json"
        # packed, as in-process (and v1model's default): int32 travels as halves
        desc.write_text(json.dumps(t.descriptors[0] | {"encoding": "packed"}))
        for case in cases:
            refl = c_reflector(t, exe, 600)
            try:
                out[case] = run_child(
                    t.exec_argv(t.worker_ns[0], child_argv(str(desc), case, repeat))
                )
            finally:
                refl.terminate()
                refl.wait()
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        desc, size, dtype, density, repeat = sys.argv[2:7]
        print(json.dumps(child(desc, int(size), dtype, float(density), int(repeat))))
        return 0
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 20_000_000])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "int32"])
    ap.add_argument("--densities", type=float, nargs="+", default=[1.0, 0.1])
    ap.add_argument("--repeat", type=int, default=1, help="calls per in-process case")
    ap.add_argument(
        "--paths",
        nargs="+",
        choices=["in-process", "raw"],
        default=["in-process", "raw"],
        help="raw: over the raw socket (root; skipped, saying why, without it)",
    )
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    cases = [(s, d, r) for s in a.sizes for d in a.dtypes for r in a.densities]
    nan = {"ratio": float("nan"), "seconds": float("nan")}
    rows = {
        c: run_child(child_argv("-", c, a.repeat)) if "in-process" in a.paths else nan
        for c in cases
    }
    raw: dict = {}
    why = "not asked for (--paths)"
    if "raw" in a.paths:
        from hostlib import netns

        why = netns.available()
        if not why:
            raw = raw_socket(cases, a.repeat)
    print(f"peak memory of one worker's allreduce / tensor bytes (packed job, {SLOTS} slots)")
    head = ("values", "dtype", "density", "in-process", "call s", "raw socket", "call s")
    print("{:>11s} {:>8s} {:>7s} {:>10s} {:>7s} {:>10s} {:>7s}".format(*head))
    for (size, dtype, density), r in rows.items():
        rr = raw.get((size, dtype, density), nan)
        print(
            f"{size:11,d} {dtype:>8s} {density:7.2f} {r['ratio']:10.2f} {r['seconds']:7.2f} "
            f"{rr['ratio']:10.2f} {rr['seconds']:7.2f}"
        )
    if not raw:
        print(f"raw-socket cases not run: {why}")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(
            json.dumps(
                [
                    {"size": s, "dtype": d, "density": r}
                    | ({"in_process": rows[s, d, r]} if "in-process" in a.paths else {})
                    | ({"raw_socket": raw[s, d, r]} if raw else {})
                    for s, d, r in cases
                ]
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
