#!/usr/bin/env python3
"""What simple_switch_grpc pays per packet kind on the p4reduce program, in one run.

The program's plain forwarding path (what gloo's frames take through the same switch) is
timed beside its aggregation paths, so a change to the program shows up as a ratio that
the machine's load does not move much. One simple_switch_grpc (log off, as every launcher
here starts it) on veth ports 1..4, the committed p4src/build pipeline pushed over
P4Runtime, jobs of 4 ranks installed with the controller's own modules
(p4net.harness.SwitchSession), packed encoding. Cases, each at 64 and 2 048 values per
block (frames of the same size in every case):

* forward:      plain UDP frames between the hosts (l2_forward), 16 per port per batch.
* dense:        every-rank DATA rounds on 16 slots: 4 DATA in, the last one multicast as
                4 RESULT copies.
* silent_dense: the same rounds in a job of silent rounds (every rank has every block).
* silent_one:   silent rounds that only rank 0 has a block for: 1 DATA in, 4 copies out.
* announce:     silent calls with no block at all: an ANNOUNCE round per call, which names
                END_OF_STREAM and so ends the call (header and fingerprint frames
                whatever the block size).

Per case: frames into the switch per second (wall time of the run, this process sending
and receiving), and the switch process's CPU per ingress frame (utime + stime from
/proc/PID/stat, every bmv2 thread), which the other work on the shared cores moves less.
Cases run in passes; each keeps its pass of least switch CPU per frame.

    python bench/packet_cost.py [--values 64,2048] [--rounds 40] [--passes 3]
                                   [--cases forward,dense,...] [--json OUT]
                                   [--build DIR --build DIR2 ...] [--trace]

--build times other builds of the program (each a directory with p4reduce.json and its
P4Info, e.g. an older commit's p4src/build) in the same run, interleaved pass by pass.
--trace counts bmv2's trace lines per packet of each case instead of timing.

Needs root (veth) and simple_switch_grpc on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType
from p4net.harness import SwitchSession, TestJob, host_ip, host_mac
from p4net.switches import VethSwitch
from p4reduce.target import SIMPLE_SWITCH_GRPC
from p4reduce.wire import Endpoints, RoundMode, mtu_needed, packed_bias

from controlplane import forwarding

import primitives  # beside this script: bmv2 trace lines by kind
from round_cost import process_cpu

RANKS = 4
SLOTS = 16  # below bmv2's ~32 frames of backlog per port (docs/benchmarks.md)
CASES = ("forward", "dense", "silent_dense", "silent_one", "announce")
PLAIN_UDP_PORT = 9999  # outside p4reduce's 0x5030..0x503F
DEFAULT_BUILD = Path(__file__).resolve().parents[1] / "p4src" / "build"


@dataclass
class Row:
    build: str  # the pipeline's directory name
    case: str
    values: int
    frame_bytes: int
    frames_in: int  # into the switch, timed
    frames_out: int  # out of it, timed
    seconds: float
    switch_cpu: float  # seconds of the switch process over the timed part
    warmup_frames: int  # sent before the timed part

    @property
    def frames_per_s(self) -> float:
        return self.frames_in / self.seconds

    @property
    def cpu_us_per_frame(self) -> float:
        return 1e6 * self.switch_cpu / self.frames_in


# A batch: the frames to send (port, frame) and how many come back on each port.
Batch = tuple[list[tuple[int, bytes]], dict[int, int]]


class Bench:
    """The switch, its session and the frame loop."""

    def __init__(self, values: list[int], log: Path | None = None) -> None:
        args = ("--log-level", "trace", "--log-file", str(log)) if log else ()
        self.proc = VethSwitch(SIMPLE_SWITCH_GRPC, n_ports=RANKS, extra_args=args).start()
        try:
            mtu = str(mtu_needed(max(values)))
            for pair in self.proc.pairs.values():
                for name in (pair.switch_end, pair.host_end):
                    subprocess.run(["ip", "link", "set", name, "mtu", mtu], check=True)
            self.session = SwitchSession(self.proc)
            self._add_hosts()
        except BaseException:
            self.proc.stop()
            raise
        assert self.proc.runner is not None and self.proc.runner.process is not None
        self.pid = self.proc.runner.process.pid
        self.next_job = 1
        self.build = DEFAULT_BUILD.name

    def load(self, build: Path) -> None:
        """Push the pipeline of another build directory (p4reduce.json and P4Info), with
        the switch's identity and the hosts' L2 entries again."""
        conn = self.session.conn
        conn.push_pipeline(build / "p4reduce.p4info.txtpb", build / "p4reduce.json")
        self.session.configure_identity()
        self._add_hosts()
        self.proc.drain()
        self.build = str(build)

    def _add_hosts(self) -> None:
        """The hosts' L2 entries (the plain forwarding path gloo's frames take)."""
        for port in range(1, RANKS + 1):
            forwarding.add_host(self.session.conn, host_mac(port), port)

    def close(self) -> None:
        self.session.close()
        self.proc.stop()

    def job(self, values: int, mode: RoundMode) -> TestJob:
        """A fresh 4-rank packed job of its own slots (a new index and epoch each time)."""
        n = self.next_job
        self.next_job += 1
        return self.session.add_job(
            job=n,
            n=RANKS,
            slot_base=0,
            slot_count=SLOTS,
            job_index=0,
            epoch=n,
            encoding=p.Encoding.PACKED,
            block_values=values,
            round_mode=mode,
        )

    def play(self, batch: Batch) -> int:
        """Send a batch, wait for every frame it brings back; the frames received."""
        frames, expect = batch
        for port, frame in frames:
            self.proc.send(port, frame)
        left = dict(expect)
        socks = {self.proc.sockets[port]: port for port in left if left[port]}
        got = 0
        while socks:
            ready, _, _ = select.select(list(socks), [], [], 2.0)
            if not ready:
                raise RuntimeError(f"frames missing: {left}")
            for sock in ready:
                port = socks[sock]
                while left[port]:
                    try:
                        _, addr = sock.recvfrom(65535)
                    except BlockingIOError:
                        break
                    if addr[2] == 4:  # PACKET_OUTGOING: our own frame
                        continue
                    left[port] -= 1
                    got += 1
                if not left[port]:
                    del socks[sock]
        return got

    def timed(self, case: str, values: int, warmup: list[Batch], batches: list[Batch]) -> Row:
        for batch in warmup:
            self.play(batch)
        frames_in = sum(len(b[0]) for b in batches)
        cpu0, t0 = process_cpu(self.pid), time.perf_counter()
        frames_out = sum(self.play(b) for b in batches)
        seconds, cpu = time.perf_counter() - t0, process_cpu(self.pid) - cpu0
        size = len(batches[0][0][0][1])
        warm = sum(len(b[0]) for b in warmup)
        return Row(self.build, case, values, size, frames_in, frames_out, seconds, cpu, warm)


def forward_batches(values: int, rounds: int) -> list[Batch]:
    """Plain UDP frames of a DATA frame's size from every port to the next one."""
    batches = []
    payload = np.arange(values, dtype=np.int64)
    for k in range(rounds):
        frames = []
        for port in range(1, RANKS + 1):
            dst = port % RANKS + 1
            ep = Endpoints(
                host_mac(port), host_mac(dst), host_ip(port), host_ip(dst), 0x5031, PLAIN_UDP_PORT
            )
            header = p.Header.make(MsgType.DATA, job=0, slot=k % SLOTS, rank=port, block=k)
            frame = p.build_frame(ep, header, payload)
            frames += [(port, frame)] * SLOTS
        batches.append((frames, {port: SLOTS for port in range(1, RANKS + 1)}))
    return batches


def every_port(n: int) -> dict[int, int]:
    return {port: n for port in range(1, RANKS + 1)}


def data_rounds(job: TestJob, values: int, rounds: int, ranks: list[int]) -> list[Batch]:
    """Rounds 1..rounds of every slot after an announce round in version 0: slot s takes
    blocks s, s + SLOTS, ...; `ranks` send DATA, the rest of a silent job stays silent."""
    rng = np.random.default_rng(values)
    bias = packed_bias(RANKS)
    flags = Flag.PACKED | (Flag.CONTINUED if job.silent else 0)
    batches = []
    for k in range(1, rounds + 1):
        frames = []
        for slot in range(SLOTS):
            block = slot + (k - 1) * SLOTS
            nxt = block + SLOTS if k < rounds else END
            for rank in ranks:
                vals = rng.integers(-1000, 1000, values) + bias
                frame = job.frame(
                    rank,
                    MsgType.DATA,
                    slot=slot,
                    version=k % 2,
                    block=block,
                    next_block=nxt,
                    values=vals,
                    flags=flags,
                )
                frames.append((rank + 1, frame))
        batches.append((frames, every_port(SLOTS)))
    return batches


def announce_round(job: TestJob, first: dict[int, int], version: int, flags: int) -> Batch:
    frames = [
        (
            rank + 1,
            job.frame(
                rank,
                MsgType.ANNOUNCE,
                slot=slot,
                version=version,
                next_block=first[rank] + slot if first[rank] != END else END,
                flags=flags,
            ),
        )
        for slot in range(SLOTS)
        for rank in range(RANKS)
    ]
    return frames, every_port(SLOTS)


def run_case(bench: Bench, case: str, values: int, rounds: int) -> Row:
    if case == "forward":
        warm = forward_batches(values, 1)
        return bench.timed(case, values, warm, forward_batches(values, rounds))
    if case == "announce":
        job = bench.job(values, RoundMode.SILENT)
        calls = [
            announce_round(
                job,
                dict.fromkeys(range(RANKS), END),
                call % 2,
                Flag.PACKED | (Flag.CONTINUED if call else 0),
            )
            for call in range(rounds + 2)
        ]
        row = bench.timed(case, values, calls[:2], calls[2:])
        job.remove()
        return row
    silent = case != "dense"
    job = bench.job(values, RoundMode.SILENT if silent else RoundMode.EVERY_RANK)
    ranks = [0] if case == "silent_one" else list(range(RANKS))
    first = {r: (0 if r in ranks else END) for r in range(RANKS)}
    announce = announce_round(job, first, 0, Flag.PACKED)
    row = bench.timed(case, values, [announce], data_rounds(job, values, rounds, ranks))
    job.remove()
    return row


def measure(
    builds: list[Path], values: list[int], cases: list[str], rounds: int, passes: int
) -> list[Row]:
    """Every (build, case, size) in `passes` passes, each build on a switch of its own and
    the builds taking turns case by case, so a burst of load elsewhere hits them alike.
    A cell keeps its pass of least switch CPU per frame: other work on the cores only
    ever adds to it."""
    benches: list[Bench] = []
    try:
        for build in builds:
            benches.append(Bench(values))
            benches[-1].load(build)
        runs: dict[tuple[str, str, int], list[Row]] = {}
        for _ in range(passes):
            for v in values:
                for case in cases:
                    for bench in benches:
                        row = run_case(bench, case, v, rounds)
                        runs.setdefault((row.build, case, v), []).append(row)
    finally:
        for bench in benches:
            bench.close()
    return [min(got, key=lambda r: r.cpu_us_per_frame) for got in runs.values()]


def trace(build: Path, values: list[int], cases: list[str], rounds: int) -> dict[str, dict]:
    """bmv2's own trace lines per packet of each case (bench/primitives.py's counting):
    {case@values: {copies: {kind: mean lines}}}, packets grouped by their copies (1: a
    consumed or forwarded frame, 1 + N: a frame multicast as N results). Each case runs
    on a switch of its own; the warm-up frames (a call's announce round) are left out."""
    out: dict[str, dict] = {}
    for v in values:
        for case in cases:
            logdir = Path(tempfile.mkdtemp(prefix="p4r-cost-"))
            bench = Bench(values, logdir / "bmv2")
            try:
                bench.load(build)
                row = run_case(bench, case, v, rounds)
            finally:
                bench.close()  # bmv2 flushes its log when it stops
            text = "".join(f.read_text(errors="replace") for f in sorted(logdir.glob("bmv2*")))
            shutil.rmtree(logdir, ignore_errors=True)
            per = primitives.count(text)
            first = sorted({pid for pid, _ in per})[row.warmup_frames :]
            kept = {key: c for key, c in per.items() if key[0] in set(first)}
            out[f"{case}@{v}"] = per_copies(kept)
    return out


def per_copies(per: dict[tuple[int, int], Counter]) -> dict[int, dict[str, float]]:
    by_packet: dict[int, list[Counter]] = defaultdict(list)
    for (pid, _copy), c in per.items():
        by_packet[pid].append(c)
    groups: dict[int, list[Counter]] = defaultdict(list)
    for copies in by_packet.values():
        groups[len(copies)].append(sum(copies, Counter()))
    return {
        n: {"packets": len(rows)}
        | {k: round(float(np.mean([r[k] for r in rows])), 1) for k in primitives.KINDS}
        for n, rows in sorted(groups.items())
    }


def print_rows(rows: list[Row]) -> None:
    for build in dict.fromkeys(r.build for r in rows):
        print(f"pipeline {build}")
        print(f"{'case':<13} {'values':>6} {'bytes':>6} {'frames/s':>9} {'switch µs/frame':>16}")
        mine = [r for r in rows if r.build == build]
        for r in mine:
            print(
                f"{r.case:<13} {r.values:>6} {r.frame_bytes:>6} {r.frames_per_s:>9.0f} "
                f"{r.cpu_us_per_frame:>16.1f}"
            )
        by = {(r.case, r.values): r for r in mine}
        for v in sorted({r.values for r in mine}):
            fwd = by.get(("forward", v))
            if fwd is None:
                continue
            line = ", ".join(
                f"{c} {by[(c, v)].cpu_us_per_frame / fwd.cpu_us_per_frame:.2f}"
                for c in CASES[1:]
                if (c, v) in by
            )
            print(f"CPU per frame ÷ forward at {v} values: {line}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", default="64,2048")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--build",
        type=Path,
        action="append",
        help="a build directory to time (repeatable: interleaved); default p4src/build",
    )
    ap.add_argument("--trace", action="store_true", help="count bmv2's trace lines per packet")
    a = ap.parse_args(argv)
    if shutil.which(SIMPLE_SWITCH_GRPC) is None or os.geteuid() != 0:
        print("needs root and simple_switch_grpc on PATH", file=sys.stderr)
        return 2
    values = [int(v) for v in a.values.split(",")]
    cases = [c for c in a.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error(f"unknown cases {sorted(unknown)} ({', '.join(CASES)})")
    if a.trace:
        counts = trace((a.build or [DEFAULT_BUILD])[0], values, cases, 3)
        for key, groups in counts.items():
            for n, c in groups.items():
                print(f"{key:<20} copies {n}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
        if a.json:
            a.json.write_text(json.dumps(counts, indent=1) + "\n")
        return 0
    rows = measure(a.build or [DEFAULT_BUILD], values, cases, a.rounds, a.passes)
    print_rows(rows)
    if a.json:
        out = [
            dict(asdict(r), frames_per_s=r.frames_per_s, cpu_us_per_frame=r.cpu_us_per_frame)
            for r in rows
        ]
        a.json.write_text(json.dumps({"rows": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
