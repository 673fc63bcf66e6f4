#!/usr/bin/env python3
"""Packets/s of hostlib's whole protocol loop next to a minimal C sendmmsg/recvmmsg loop.

Not a test: a measurement, run as root (`python bench/hostlib_pps.py`). It builds one veth
pair between two fresh namespaces (worker, switch) and measures, in the same run:

  C       C client (bench/pps_baseline.c, compiled here with the system cc) keeping WINDOW
          318-byte DATA frames in flight  <->  C reflector (answers like an N=1 switch)
  hostlib hostlib.Worker (python -m hostlib) allreducing a dense float32 tensor with
          slot_count = WINDOW: build (quantize, pack headers, template), send, receive,
          parse, accumulate  <->  the same C reflector; once per transport mode
(The whole system, worker and switch, is measured by bench/suite.py, bench/sparse_ratio.py
and bench/softswitch_pps.py against the real P4 program.)

Rate = worker packets sent per second (each is answered by one result). The ratio of the
hostlib rows to the C row is what docs/hostlib.md reports (target >= 0.5). Both ends share
the machine's cores, as they would in the end-to-end tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hostlib import netns
from hostlib import protocol as p

ROOT = Path(__file__).resolve().parents[1]


def compile_baseline(tmp: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("no C compiler (cc) on PATH")
    exe = tmp / "pps_baseline"
    subprocess.run([cc, "-O2", "-o", str(exe), str(ROOT / "bench" / "pps_baseline.c")], check=True)
    return exe


def c_reflector(t: netns.Topology, exe: Path, seconds: float) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(
        t.exec_argv(t.switch_ns, [str(exe), "reflect", t.switch_if[0], str(seconds)])
    )
    time.sleep(0.3)
    return p


def run_c(t: netns.Topology, exe: Path, count: int, window: int) -> float:
    d = t.descriptors[0]
    refl = c_reflector(t, exe, 120)
    try:
        out = subprocess.run(
            t.exec_argv(
                t.worker_ns[0],
                [
                    str(exe),
                    "client",
                    t.worker_if[0],
                    str(count),
                    str(window),
                    d["worker"]["mac"],
                    d["switch"]["mac"],
                    d["worker"]["ip"],
                    d["switch"]["ip"],
                    str(d["worker"]["udp_port"]),
                ],
            ),
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout.split()
    finally:
        refl.terminate()
        refl.wait()
    packets, seconds = int(out[0]), float(out[1])
    if packets < count:
        raise RuntimeError(f"C client got {packets} of {count} answers")
    return packets / seconds


def run_hostlib(
    t: netns.Topology, tmp: Path, mode: str, repeat: int, exe: Path
) -> tuple[float, dict]:
    desc = tmp / "d0.json"
    desc.write_text(json.dumps(t.descriptors[0]))
    refl = c_reflector(t, exe, 300)
    stats = tmp / f"stats-{mode}.json"
    try:
        subprocess.run(
            t.exec_argv(
                t.worker_ns[0],
                [
                    sys.executable,
                    "-m",
                    "hostlib",
                    "--descriptor",
                    str(desc),
                    "--input",
                    str(tmp / "x.npy"),
                    "--transport",
                    mode,
                    "--repeat",
                    str(repeat),
                    "--stats",
                    str(stats),
                    "--timeout",
                    "0.005",
                ],
            ),
            cwd=ROOT,
            check=True,
            timeout=300,
        )
    finally:
        refl.terminate()
        refl.wait()
    s = json.loads(stats.read_text())
    return s["packets_sent"] / s["time"], s


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--window", type=int, default=256, help="slots = frames in flight")
    ap.add_argument("--blocks", type=int, default=50_000, help="dense blocks per allreduce")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--c-count", type=int, default=300_000)
    ap.add_argument("--modes", default="ring,mmsg")
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    reason = netns.available()
    if reason:
        raise SystemExit(f"cannot run: {reason}")
    with tempfile.TemporaryDirectory() as td, netns.Topology(1, slot_count=a.window) as t:
        tmp = Path(td)
        exe = compile_baseline(tmp)
        rng = np.random.default_rng(0)
        np.save(tmp / "x.npy", rng.standard_normal(a.blocks * 64).astype(np.float32))
        rows: dict[str, float] = {}
        extra: dict[str, dict] = {}
        rows["C sendmmsg/recvmmsg <-> C reflector"] = run_c(t, exe, a.c_count, a.window)
        for mode in a.modes.split(","):
            r, s = run_hostlib(t, tmp, mode, a.repeat, exe)
            rows[f"hostlib ({mode}) <-> C reflector"] = r
            extra[mode] = s
    base = rows["C sendmmsg/recvmmsg <-> C reflector"]
    print(
        f"window {a.window} frames, {a.blocks} dense float32 blocks x {a.repeat} "
        f"allreduces, {os.cpu_count()} CPUs, {p.FRAME_BYTES_WITH_VALUES}-byte frames"
    )
    print(f"{'loop':45s} {'packets/s':>12s} {'vs C':>7s}")
    for name, rate in rows.items():
        print(f"{name:45s} {rate:12,.0f} {rate / base:7.2f}")
    for k, s in extra.items():
        print(
            f"  {k}: retransmissions {s['retransmissions']}, packets {s['packets_sent']}, "
            f"time {s['time']:.3f}s, transport {s['transport']}"
        )
    if a.json:
        Path(a.json).write_text(
            json.dumps({"rates": rows, "stats": extra, "window": a.window, "blocks": a.blocks})
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
