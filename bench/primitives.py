#!/usr/bin/env python3
"""What the P4 program costs per packet on simple_switch_grpc, counted from bmv2's own trace.

bmv2 pays per primitive, per table lookup and per condition it evaluates, so these counts
are the per-packet cost the program asks of a default build (docs/benchmarks.md, *Per
packet*). The script starts simple_switch_grpc with `--log-level trace` on its own veth
ports, installs a job of N ranks with the controller's modules (lanes or packed encoding),
plays rounds of real frames (one announce round, then dense DATA rounds), and counts the
trace lines of each packet by kind:

    python bench/primitives.py [--workers 4] [--rounds 8] [--json OUT]

A DATA packet that does not complete its round is consumed in ingress; the one that
completes it is multicast, and every copy runs egress. Needs root and simple_switch_grpc.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType
from p4reduce.wire import packed_bias
from p4net.harness import SwitchSession
from p4net.switches import VethSwitch

# bmv2 trace lines: "[time] [bmv2] [T] [thread n] [pkt.copy] [cxt 0] <what>"
LINE = re.compile(r"\[(\d+)\.(\d+)\] \[cxt \d+\] (.*)$")
KINDS = {
    "primitive": re.compile(r"(^|\) )Primitive "),
    "table": re.compile(r"^Applying table "),
    "condition": re.compile(r"(^|\) )Condition \""),
    "register": re.compile(r"^(Read|Wrote) register "),
}


def count(log_text: str) -> dict[tuple[int, int], Counter]:
    """{(packet id, copy id): Counter(kind -> lines)} from a bmv2 trace."""
    per: dict[tuple[int, int], Counter] = defaultdict(Counter)
    for line in log_text.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        key, what = (int(m.group(1)), int(m.group(2))), m.group(3)
        for kind, rx in KINDS.items():
            if rx.search(what):
                per[key][kind] += 1
        if what.startswith("Egress port is") or "Pipeline 'egress': start" in what:
            per[key]["egress"] += 1
    return per


def measure(encoding: p.Encoding, workers: int, rounds: int) -> dict:
    logdir = Path(tempfile.mkdtemp(prefix="p4r-prim-"))
    logfile = logdir / "bmv2"
    proc = VethSwitch(
        "simple_switch_grpc",
        n_ports=workers,
        extra_args=("--log-level", "trace", "--log-file", str(logfile)),
    )
    proc.start()
    try:
        sw = SwitchSession(proc)
        job = sw.add_job(job=1, n=workers, slot_count=1, encoding=encoding)
        packed = encoding == p.Encoding.PACKED
        flags = Flag.PACKED if packed else 0
        bias = packed_bias(workers) if packed else 0
        proc.drain()
        for r in range(workers):
            job.send(r, MsgType.ANNOUNCE, next_block=0, flags=flags)
        job.results()
        time.sleep(1.0)  # the announce round is logged
        mark = _size(logfile)  # only DATA rounds after this
        rng = np.random.default_rng(1)
        for k in range(rounds):
            nxt = k + 1 if k + 1 < rounds else END
            vals = {r: rng.integers(-1000, 1000, p.BLOCK_VALUES) + bias for r in range(workers)}
            job.round((k + 1) % 2, k, vals, {r: (nxt, 0) for r in range(workers)}, flags=flags)
        time.sleep(1.0)  # let bmv2 flush its log
        sw.close()
    finally:
        proc.stop()
    text = "".join(f.read_text(errors="replace") for f in sorted(logdir.glob("bmv2*")))
    shutil.rmtree(logdir, ignore_errors=True)
    per = count(text[mark:] if mark < len(text) else text)
    return summarise(per, workers, rounds)


def _size(path: Path) -> int:
    candidates = sorted(path.parent.glob(path.name + "*"))
    return sum(c.stat().st_size for c in candidates) if candidates else 0


def summarise(per: dict[tuple[int, int], Counter], workers: int, rounds: int) -> dict:
    """Group packets: ingress-only DATA (consumed), the completing DATA (its ingress) and the
    result copies (egress). Packets are told apart by what happened to them: a consumed
    packet has no egress; the completing one's copies share its packet id."""
    by_packet: dict[int, list[Counter]] = defaultdict(list)
    for (pid, _copy), c in sorted(per.items()):
        by_packet[pid].append(c)
    consumed, completing = [], []
    for copies in by_packet.values():
        total = sum(copies, Counter())
        (completing if len(copies) > 1 else consumed).append(total)

    def mean(rows: list[Counter], kind: str) -> float:
        return float(np.mean([r[kind] for r in rows])) if rows else 0.0

    out = {"packets": len(by_packet), "consumed": len(consumed), "completing": len(completing)}
    for kind in KINDS:
        out[f"{kind}_consumed"] = mean(consumed, kind)
        out[f"{kind}_completing_with_copies"] = mean(completing, kind)
    # per DATA packet of a dense round: (N-1) consumed + 1 completing (with N copies)
    n = workers
    for kind in KINDS:
        out[f"{kind}_per_data_packet"] = (
            (n - 1) * out[f"{kind}_consumed"] + out[f"{kind}_completing_with_copies"]
        ) / n
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if shutil.which("simple_switch_grpc") is None:
        print("simple_switch_grpc is not on PATH (../shared/toolchain/install)", file=sys.stderr)
        return 2
    res = {e.name.lower(): measure(e, a.workers, a.rounds) for e in p.Encoding}
    print(
        f"bmv2 trace counts per packet, {a.workers} ranks, dense rounds "
        f"(consumed = a DATA that does not complete its round; completing = the one "
        f"that does, with its {a.workers} result copies through egress)"
    )
    print("| encoding | kind | consumed DATA | completing DATA + copies | mean per DATA |")
    print("|---|---|---:|---:|---:|")
    for enc, r in res.items():
        for kind in KINDS:
            print(
                f"| {enc} | {kind}s | {r[kind + '_consumed']:.0f} | "
                f"{r[kind + '_completing_with_copies']:.0f} | "
                f"{r[kind + '_per_data_packet']:.1f} |"
            )
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
