#!/usr/bin/env python3
"""Packets/s and values/s of the wide-block candidates on the v1model switches.

A block of VALUES 32-bit values can be held and added several ways (bench/p4/, one small
program per candidate and size doing only the aggregation's hot path: parse, read the
slot's sums, add -- the round's first contributor overwrites --, write back, send the sums
back out of the ingress port):

* wide:    one bit<VALUES x 32> field and register cell per slot: one read-add-write. p4c
           refuses types wider than 2048 bits, so only 64 values compile; the larger sizes
           run p4c's 64-value JSON and P4Info with their widths rewritten (`widen_json`),
           which is what a switch would run if p4c allowed them.
* classes: wide for every size in one program (the parser chooses the values header by
           the block header's size class, a register array per size), widened by name
           when it is built (p4src/compile.py, as the p4reduce program is): what a switch
           serving jobs of different sizes runs.
* chunks:  VALUES / 64 bit<2048> headers, one register array each: that many
           read-add-writes.
* stack:   a header stack of VALUES / 64 bit<2048> chunks parsed in a loop, one register
           array of VALUES / 64 cells per slot.

Targets: softswitch in this process (`Switch.process`, the interpreter alone on one core),
softswitch over veth (`python -m softswitch`) and simple_switch_grpc over veth (where it is
on PATH; root needed for veth). Over veth this process sends a window of blocks from every
rank's port (veth MTU raised to fit the frame) and counts the sums that come back.

    python bench/wide_blocks.py [--values 64,256,1024,2048,4096]
                                [--candidates wide,classes,chunks,stack]
                                [--targets inprocess,softswitch,simple_switch_grpc]
                                [--seconds 0.5] [--repeat 3] [--json out.json] [--markdown]
    python bench/wide_blocks.py --from-json out.json      # the Markdown table of a run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import softswitch_pps  # bench/softswitch_pps.py, beside this script

from controlplane.connection import SwitchConnection, SwitchError
from p4net.switches import VethSwitch
from p4.config.v1 import p4info_pb2

from p4reduce.p4rt import load_p4info
from p4reduce.target import SIMPLE_SWITCH_GRPC, SOFTSWITCH
from softswitch.switch import Switch

P4_DIR = Path(__file__).resolve().parent / "p4"
BUILD = P4_DIR / "build"
CANDIDATES = ("wide", "classes", "chunks", "stack")
SIZES = (64, 256, 1024, 2048, 4096)
INPROCESS = "inprocess"
TARGETS = (INPROCESS, SOFTSWITCH, SIMPLE_SWITCH_GRPC)
P4C_MAX_WIDTH = 2048  # p4c-bm2-ss: "Compiler only supports widths up to 2048"
CHUNK_VALUES = P4C_MAX_WIDTH // 32
ETHERTYPE_BLOCK = 0x88B5
ETH_HEADER = 14
BLOCK_HEADER = 4
SLOTS = 8  # slots in flight (the programs have 32)
RANKS = 4  # contributors per round, one port each
VETH_MTU_HEADROOM = 64
SOL_PACKET, PACKET_IGNORE_OUTGOING = 263, 23  # linux/socket.h, linux/if_packet.h
SO_RCVBUFFORCE = 33  # asm-generic/socket.h (root may exceed net.core.rmem_max)
RECV_BUFFER = 16 << 20
INT_DIGITS_ENV = "PYTHONINTMAXSTRDIGITS"  # CPython's int <-> str digit limit (4300)


@dataclass
class Program:
    """One candidate at one size: the bmv2 JSON a switch loads and the P4Info beside it."""

    candidate: str
    values: int
    bmv2_json: str
    p4info: p4info_pb2.P4Info
    widened: bool  # p4c's 64-value JSON with its widths rewritten (p4c refuses wider)


@dataclass
class Row:
    target: str
    candidate: str
    values: int
    frame_bytes: int
    widened: bool
    packets_per_s: float
    values_per_s: float
    sent: int
    returned: int
    best_packets_per_s: float = 0.0  # the least disturbed pass (packets_per_s: the median)


def program_name(candidate: str, values: int) -> str:
    return f"{candidate}_{values}"


def widen_json(bmv2_json: str, width: int, old: int = P4C_MAX_WIDTH) -> str:
    """p4c's JSON of a program whose only `old`-bit things are the block word, its register
    and its local, with those made `width` bits wide: field widths, register bit widths and
    the all-ones masks p4c puts after an addition."""
    old_mask, new_mask = "0x" + "f" * (old // 4), "0x" + "f" * (width // 4)

    def walk(node: object) -> object:
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            if out.get("bitwidth") == old:
                out["bitwidth"] = width
            return out
        if isinstance(node, list):
            # a header type's field: [name, width, signed]
            if len(node) == 3 and isinstance(node[0], str) and node[1] == old:
                return [node[0], width, node[2]]
            return [walk(v) for v in node]
        if isinstance(node, str) and node.lower() == old_mask:
            return new_mask
        return node

    return json.dumps(walk(json.loads(bmv2_json)))


def load_program(candidate: str, values: int) -> Program:
    """The committed p4c output of bench/p4/<candidate>_<values>.p4, or for a wide block
    beyond p4c's limit the widened 64-value one."""
    if candidate == "wide" and values > CHUNK_VALUES:
        base = BUILD / program_name("wide", CHUNK_VALUES)
        text = (base / f"wide_{CHUNK_VALUES}.json").read_text()
        p4info = load_p4info(base / f"wide_{CHUNK_VALUES}.p4info.txtpb")
        for register in p4info.registers:
            register.type_spec.bitstring.bit.bitwidth = 32 * values
        return Program(candidate, values, widen_json(text, 32 * values), p4info, True)
    if candidate == "classes":  # built widened by p4src/compile.py (its MANIFEST lists what)
        base = BUILD / "classes"
        text = (base / "classes.json").read_text()
        p4info = load_p4info(base / "classes.p4info.txtpb")
        return Program(candidate, values, text, p4info, values > CHUNK_VALUES)
    name = program_name(candidate, values)
    base = BUILD / name
    return Program(
        candidate,
        values,
        (base / f"{name}.json").read_text(),
        load_p4info(base / f"{name}.p4info.txtpb"),
        False,
    )


def block_frame(slot: int, first: bool, values: np.ndarray, src: int = 1) -> bytes:
    """Ethernet (ether type 0x88B5), the block header, the values big-endian. The size
    class (which values header the classes candidate parses) follows from the values'
    count: its index in SIZES, 255 (none) for another count."""
    eth = bytes(5) + b"\x02" + bytes(5) + bytes([src]) + ETHERTYPE_BLOCK.to_bytes(2, "big")
    size_class = SIZES.index(len(values)) if len(values) in SIZES else 255
    header = slot.to_bytes(2, "big") + bytes([1 if first else 0, size_class])
    return eth + header + values.astype(">u4").tobytes()


def block_sums(frame: bytes) -> tuple[int, np.ndarray]:
    """(slot, values) of a frame the switch sent back."""
    body = frame[ETH_HEADER:]
    slot = int.from_bytes(body[:2], "big")
    return slot, np.frombuffer(body[BLOCK_HEADER:], dtype=">u4").astype(np.uint32)


def round_frames(values: int, rounds: int = 1, seed: int = 0) -> tuple[list, np.ndarray]:
    """`rounds` rounds of every slot: (rank, frame) in sending order, and each slot's sum
    after its last round. Values are below 2^32 / RANKS, so no lane's sum carries into its
    neighbour in a wide add (as the packed encoding's bias guarantees)."""
    rng = np.random.default_rng(seed)
    frames = []
    sums = np.zeros((SLOTS, values), dtype=np.uint64)
    for _ in range(rounds):
        sums[:] = 0
        for slot in range(SLOTS):
            for rank in range(RANKS):
                vals = rng.integers(0, 2**32 // RANKS, values, dtype=np.uint64)
                sums[slot] += vals
                frames.append((rank, block_frame(slot, rank == 0, vals, rank + 1)))
    return frames, sums.astype(np.uint32)


# -- softswitch in this process ------------------------------------------------------------


class InProcessBench:
    """softswitch's interpreter alone (`Switch.process`, no sockets, one core)."""

    target = INPROCESS

    def __init__(self) -> None:
        self.switches: dict[tuple[str, int], Switch] = {}

    def measure(self, program: Program, seconds: float) -> Row:
        """Prebuilt frames (one round of every slot, repeated) for about `seconds`."""
        key = (program.candidate, program.values)
        if key not in self.switches:
            sw = Switch()
            sw.load_pipeline(program.bmv2_json)
            self.switches[key] = sw
        sw = self.switches[key]
        frames, sums = round_frames(program.values)
        plan = [(rank + 1, f) for rank, f in frames]
        for port, frame in plan:  # a round, and its sums checked
            out = sw.process(port, frame)
        check_sums(out[0][1], sums)
        start, n = time.perf_counter(), 0
        while n == 0 or time.perf_counter() - start < seconds:
            for port, frame in plan:
                sw.process(port, frame)
            n += len(plan)
        pps = n / (time.perf_counter() - start)
        return _row(INPROCESS, program, len(frames[0][1]), pps, n, n)

    def close(self) -> None:
        self.switches.clear()


def check_sums(frame: bytes, sums: np.ndarray) -> None:
    slot, got = block_sums(frame)
    if not np.array_equal(got, sums[slot]):
        bad = int(np.flatnonzero(got != sums[slot])[0])
        raise AssertionError(f"slot {slot}: value {bad} is {got[bad]}, expected {sums[slot][bad]}")


def _row(target: str, program: Program, frame_bytes: int, pps: float, sent: int, got: int):
    return Row(
        target,
        program.candidate,
        program.values,
        frame_bytes,
        program.widened,
        pps,
        pps * program.values,
        sent,
        got,
    )


# -- a switch process over veth ------------------------------------------------------------


class VethBench:
    """One switch process of `kind` on RANKS veth ports (MTU raised to the largest frame),
    each program pushed over P4Runtime in turn; this process sends windows of one round of
    every slot (SLOTS x RANKS blocks) from the ranks' ports and receives their sums."""

    def __init__(self, kind: str, mtu: int) -> None:
        self.target = kind
        self.switch = VethSwitch(kind, n_ports=RANKS).start()
        try:
            for pair in self.switch.pairs.values():
                for name in (pair.switch_end, pair.host_end):
                    subprocess.run(["ip", "link", "set", name, "mtu", str(mtu)], check=True)
            for sock in self.switch.sockets.values():
                # our own frames are not read back: one recv per block that returns
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                # a window of 16 KB sums would overflow the default receive buffer
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECV_BUFFER)
        except BaseException:
            self.switch.stop()
            raise

    def measure(self, program: Program, seconds: float) -> Row:
        frames, sums = round_frames(program.values)
        frame_bytes = len(frames[0][1])
        conn = SwitchConnection(self.switch.grpc_addr).connect()
        try:
            conn.set_pipeline(program.p4info, program.bmv2_json.encode())
        finally:
            conn.close()
        switch = self.switch
        sent, got = 0, 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for rank, frame in frames:
                switch.send(rank + 1, frame)
            sent += len(frames)
            for rank in range(RANKS):
                for _ in range(SLOTS):
                    if switch.recv(rank + 1, 1.0) is None:
                        break
                    got += 1
        elapsed = time.perf_counter() - start
        switch.drain()
        check_sums(self._serial_round(frames, frame_bytes), sums)
        return _row(self.target, program, frame_bytes, got / elapsed, sent, got)

    def _serial_round(self, frames: list, frame_bytes: int) -> bytes:
        """One round sent a block at a time, each block's sums awaited: the ports' threads
        cannot reorder the contributors, so the last block's sums are the whole round's."""
        out = None
        for rank, frame in frames:
            self.switch.send(rank + 1, frame)
            out = self.switch.recv(rank + 1, 2.0)
            if out is None:
                raise RuntimeError(f"no {frame_bytes}-byte block came back")
        return out

    def close(self) -> None:
        self.switch.stop()


# -- the table -----------------------------------------------------------------------------


def measure(targets, candidates, sizes, seconds: float, repeat: int) -> list[Row]:
    """Every (candidate, size) on every target, `repeat` interleaved passes of `seconds`
    each; a cell keeps its median pass (a burst of load elsewhere lands on one pass)."""
    programs = [load_program(c, v) for v in sizes for c in candidates]
    mtu = max(frame_mtu(v) for v in sizes)
    rows = []
    for target in targets:
        bench = InProcessBench() if target == INPROCESS else VethBench(target, mtu)
        try:
            passes: dict[tuple[str, int], list[Row]] = {}
            for _ in range(repeat):
                for program in programs:
                    key = (program.candidate, program.values)
                    try:
                        passes.setdefault(key, []).append(bench.measure(program, seconds))
                    except (RuntimeError, AssertionError, SwitchError) as exc:
                        print(f"  {target} {key[0]} {key[1]}: {exc}", file=sys.stderr)
            for runs in passes.values():
                runs.sort(key=lambda r: r.packets_per_s)
                row = runs[len(runs) // 2]
                row.best_packets_per_s = runs[-1].packets_per_s
                rows.append(row)
                print_row(row)
        finally:
            bench.close()
    return rows


def frame_mtu(values: int) -> int:
    """The interface MTU a block of `values` needs (the frame less its Ethernet header)."""
    return max(1500, BLOCK_HEADER + 4 * values + VETH_MTU_HEADROOM)


def print_row(row: Row) -> None:
    note = " (widened JSON)" if row.widened else ""
    lost = f", {row.sent - row.returned} of {row.sent} lost" if row.returned < row.sent else ""
    print(
        f"  {row.target:18s} {row.candidate:7s} {row.values:5d} values {row.frame_bytes:6d} B"
        f" {row.packets_per_s:8.0f} packets/s (best {row.best_packets_per_s:6.0f})"
        f" {row.values_per_s / 1e6:7.2f} M values/s"
        f"{note}{lost}",
        flush=True,
    )


def markdown_table(rows: list[Row]) -> str:
    """The rows as docs/benchmarks.md shows them: a line per (size, candidate), per target
    the median pass's packets/s and values/s."""
    targets = [t for t in TARGETS if any(r.target == t for r in rows)]
    cells = {(r.values, r.candidate, r.target): r for r in rows}
    label = {
        INPROCESS: "softswitch in-process",
        SOFTSWITCH: "softswitch over veth",
        SIMPLE_SWITCH_GRPC: "simple_switch_grpc over veth",
    }
    head = "| values | frame bytes | candidate |" + "".join(
        f" {label[t]} packets/s | M values/s |" for t in targets
    )
    lines = [head, "|---:|---:|---|" + "---:|---:|" * len(targets)]
    for values in sorted({r.values for r in rows}):
        for candidate in CANDIDATES:
            mine = [cells.get((values, candidate, t)) for t in targets]
            if not any(mine):
                continue
            some = next(r for r in mine if r)
            name = f"{candidate} (widened)" if some.widened else candidate
            line = f"| {values} | {some.frame_bytes} | {name} |"
            for r in mine:
                line += (
                    f" {r.packets_per_s:,.0f} | {r.values_per_s / 1e6:.1f} |" if r else " – | – |"
                )
            lines.append(line.replace(",", " "))
    return "\n".join(lines)


def p4c_width_limit(p4c: str = "p4c-bm2-ss") -> str:
    """What p4c-bm2-ss says of the wide candidate at 128 values (bit<4096>): its limit on
    a type's width, found again on every run rather than written down."""
    if not shutil.which(p4c):
        return f"{p4c} not on PATH"
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp) / "wide_128.p4"
        include = P4_DIR / "include" / "wide.p4"
        top.write_text(f'#define VALUES 128\n#define WIDTH 4096\n#include "{include}"\n')
        done = subprocess.run(
            [p4c, "--arch", "v1model", "-o", str(Path(tmp) / "out.json"), str(top)],
            capture_output=True,
            text=True,
        )
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    if done.returncode == 0:
        return "bit<4096> compiles"
    return errors[0] if errors else f"exit {done.returncode}"


def _list(kind: type, allowed: tuple):
    def parse(text: str) -> list:
        items = [kind(v) for v in text.split(",") if v]
        bad = [v for v in items if v not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad} not among {', '.join(map(str, allowed))}")
        return items

    return parse


def _sizes(text: str) -> list[int]:
    sizes = [int(v) for v in text.split(",") if v]
    bad = [v for v in sizes if v <= 0 or v % CHUNK_VALUES]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad}: not positive multiples of {CHUNK_VALUES}")
    return sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--values",
        type=_sizes,
        default=list(SIZES),
        help="values per block (multiples of 64; the wide candidate takes any, the others "
        f"the sizes of their programs: {', '.join(map(str, SIZES))})",
    )
    ap.add_argument("--candidates", type=_list(str, CANDIDATES), default=list(CANDIDATES))
    ap.add_argument("--targets", type=_list(str, TARGETS), default=list(TARGETS))
    ap.add_argument("--seconds", type=float, default=0.5, help="per pass")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved passes per cell")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    ap.add_argument(
        "--from-json",
        type=Path,
        help="print the Markdown table of an earlier run's --json and measure nothing",
    )
    args = ap.parse_args()
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        print(markdown_table([Row(**r) for r in saved["rows"]]))
        return 0
    unbuilt = [
        program_name(c, v)
        for c in args.candidates
        for v in args.values
        if (c in ("chunks", "stack") and not (BUILD / program_name(c, v)).is_dir())
        or (c == "classes" and v not in SIZES)
    ]
    if unbuilt:
        ap.error(f"no program for {', '.join(unbuilt)} in {BUILD} (the wide candidate only)")
    targets = [
        t
        for t in args.targets
        if t == INPROCESS or (os.geteuid() == 0 and (t == SOFTSWITCH or shutil.which(t)))
    ]
    skipped = sorted(set(args.targets) - set(targets))
    # softswitch writes a constant into its generated Python as a decimal literal, and
    # CPython refuses int <-> str beyond 4300 digits (a mask wider than 14 284 bits): lifted
    # here and in the switch processes, so that the wide candidate runs at every size
    sys.set_int_max_str_digits(0)
    os.environ[INT_DIGITS_ENV] = "0"
    load_before = os.getloadavg()
    print(
        f"wide-block candidates, {RANKS} ranks x {SLOTS} slots per round, "
        f"load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}"
    )
    limit = p4c_width_limit()
    print(f"p4c-bm2-ss on a 128-value wide block: {limit}")
    reference = None
    if INPROCESS in targets:
        # the whole p4reduce program beside the candidates (its packed encoding, 64
        # values): what a packet costs besides the values' add
        reference = float(softswitch_pps.in_process(RANKS, SLOTS, 40, "packed")[RANKS])
        print(
            f"  inprocess          p4reduce program, packed, 64 values: {reference:8.0f} packets/s"
        )
    rows = measure(targets, args.candidates, args.values, args.seconds, args.repeat)
    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if skipped:
        print(f"not measured (not root, or not on PATH): {', '.join(skipped)}")
    if args.markdown:
        print(markdown_table(rows))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "p4c_width_limit": limit,
                    "p4reduce_packed_inprocess_packets_per_s": reference,
                    "load_before": load_before,
                    "load_after": load_after,
                    "rows": [asdict(r) for r in rows],
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
