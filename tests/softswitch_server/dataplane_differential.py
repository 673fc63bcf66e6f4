"""One frame sequence, two switches: softswitch against simple_switch_grpc, frame for frame.

Why: softswitch must behave exactly like simple_switch for what it supports. The packet
suite (bmv2_tests) checks each target against what the protocol says of one situation at
a time; this compares the targets with each other on whole sequences no test wrote: a
real job's traffic -- captured from real Workers on an in-process switch, at any block
size (the wide ones take softswitch's numpy-limb path, bmv2 its big integers), in either
round mode and encoding -- with faults mixed in: frames lost, duplicated, retransmitted
late, swapped, delivered on another rank's port, cut short, a header field forged (its
checksums right), a bit flipped in a header or a value, a run of all-ones words in a
block, junk.
Every target gets the same job (the same index, slots and epoch) on a fresh pipeline and
the same frames in the same order; what each sends out of every port, and the job's and
the switch's counters, must be the same bytes and numbers on both.

Order: a frame is sent only once the one before it has left ingress -- after each frame
an ARP request for the switch's address goes in on the same port, and its reply (same
port, first in first out) says that the frame before it was processed -- so bmv2's
per-port receive threads cannot reorder frames between ports. The drop simulator may be
on, in its hash mode: the same frames lose the same packets and copies on every target
(its random() mode is each target's own, and stays off).

The leaf role (docs/fabric.md): a job's leaf part, its ranks' frames the same as a plain
job's (but a silent job's ANNOUNCEs above 128 values per block, which carry a block: the
capture's ranks get the leaf role's descriptor fields), and on its uplink a mirror spine
that answers each partial with its round's RESULT as if this leaf's were the job's only
non-zero partial (`mirror`). Its answers go in right after the frame that made the
partial -- once an ARP reply has come back out of every port, each copy of that frame is
out (ingress took it before those requests, and each port's egress is first in first
out) -- so both targets get the same answers as long as they send the same partials.

    python tests/softswitch_server/dataplane_differential.py --scenarios 20 [--first-seed N]
           [--against inprocess|softswitch] [--leaf]

prints each scenario whose outputs differ, with its seed (`--first-seed N --scenarios 1`
draws it again) and the first differing frame of each port; test_dataplane_differential.py
runs a few in the suite. Needs root and simple_switch_grpc on PATH.
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__":  # run as a script: the repository's packages, as pytest finds them
    sys.path[:0] = [str(Path(__file__).parents[2])]

from hostlib import protocol as p  # noqa: E402
from hostlib.framing import frame_width  # noqa: E402
from hostlib.worker import Worker  # noqa: E402
from p4net.harness import (  # noqa: E402
    LEAF_RANK,
    SPINE,
    SWITCH_IP,
    SWITCH_MAC,
    SwitchSession,
    TestJob,
    host_ip,
    host_mac,
    record_ingress,
)
from p4net.switches import start_switch  # noqa: E402
from p4reduce.target import SIMPLE_SWITCH_GRPC, V1MODEL_BLOCK_SIZES  # noqa: E402
from p4reduce.job import Uplink  # noqa: E402
from p4reduce.wire import (  # noqa: E402
    P4R_OFFSET,
    Encoding,
    announce_carries_block,
    Flag,
    MsgType,
    RoundMode,
)
from scapy.layers.l2 import ARP, Ether  # noqa: E402

PORTS = 5  # ranks on 1..4 at most; port 5 belongs to no rank (a stray's way in)
UPLINK_PORT = 5  # a leaf's way to its spine (the leaf role)
JOB, JOB_INDEX, EPOCH = 41, 2, 7
FAULTS = (
    "lose",
    "duplicate",
    "late_retransmit",
    "swap",
    "misport",
    "truncate",
    "forge",
    "forge",
    "header_bit",
    "value_bit",
    "value_carry",
    "value_carry",
    "junk",
)
ETH_ARP = b"\x08\x06"  # an ARP frame's EtherType

Frames = list[tuple[int, bytes]]


@dataclass(frozen=True)
class Scenario:
    """One job and its calls, drawn from `seed`: what the frames are made of."""

    seed: int
    ranks: int
    slots: int
    block_values: int
    round_mode: str
    encoding: str
    blocks: int
    dtype: str
    pattern: str
    calls: int
    fault_rate: float
    leaf: bool = False  # the job in the leaf role, its spine the mirror (see `run`)
    # the drop simulator's loss each way, in its hash mode: the same frames lose the same
    # packets and copies on every target (p4src/v1model/drop_simulator.p4)
    loss: float = 0.0
    loss_seed: int = 1

    @classmethod
    def draw(cls, seed: int, leaf: bool | None = None) -> "Scenario":
        """The scenario of `seed`; `leaf` True puts it in the leaf role wherever that
        fits (False: never; None: drawn)."""
        rng = np.random.default_rng(seed)
        # every size the program has (each its own header and register; softswitch's
        # numpy limbs from 2 048 values on: softswitch.interp.wide.LAZY_BYTES)
        block_values = int(rng.choice(V1MODEL_BLOCK_SIZES))
        ranks, slots = int(rng.integers(2, 5)), int(rng.integers(1, 5))
        round_mode = str(rng.choice(["silent", "every_rank"]))
        encoding = str(rng.choice(["packed", "lanes"]))
        blocks = int(rng.integers(1, 41 if block_values <= 256 else 9))
        dtype = str(rng.choice(["int32", "float32", "int32_extremes"]))
        pattern = str(rng.choice(["dense", "dense", "shared", "independent", "zeros"]))
        calls = int(rng.integers(1, 4))
        # (a forged flag or epoch can end the job's state for good -- STATE_LOST from
        # then on, on both targets alike --, so most draws have few faults)
        fault_rate = float(rng.choice([0.0, 0.02, 0.05, 0.1, 0.2]))
        drawn_leaf = bool(rng.random() < 0.3)
        return cls(
            seed=seed,
            ranks=ranks,
            slots=slots,
            block_values=block_values,
            round_mode=round_mode,
            encoding=encoding,
            blocks=blocks,
            dtype=dtype,
            pattern=pattern,
            calls=calls,
            fault_rate=fault_rate,
            leaf=drawn_leaf if leaf is None else leaf,
            loss=float(rng.choice([0.0, 0.0, 0.05, 0.2])),
            loss_seed=int(rng.integers(1, 2**16)),
        )

    def tensors(self) -> list[list[np.ndarray]]:
        """Per call, every rank's tensor: `pattern`'s non-zero blocks, the last block cut
        short now and then (a tensor need not fill its blocks)."""
        rng = np.random.default_rng(self.seed + 1)
        k, out = self.block_values, []
        for _ in range(self.calls):
            n = self.blocks * k - int(rng.integers(0, k // 2)) * int(rng.random() < 0.3)
            shared = rng.random(self.blocks) < 0.5
            call = []
            for _ in range(self.ranks):
                mask = {
                    "dense": np.ones(self.blocks, bool),
                    "shared": shared,
                    "independent": rng.random(self.blocks) < 0.4,
                    "zeros": np.zeros(self.blocks, bool),
                }[self.pattern]
                if self.dtype == "int32":
                    x = rng.integers(-(2**20), 2**20, self.blocks * k).astype(np.int32)
                elif self.dtype == "int32_extremes":  # sums that overflow, lanes that carry
                    top = 2**31 - 1
                    x = rng.choice(
                        [-top - 1, top, -1, 0, 1, top // 2, -(top // 2)], self.blocks * k
                    )
                    x = x.astype(np.int32)
                else:
                    x = rng.standard_normal(self.blocks * k) * 10.0 ** rng.integers(-3, 4)
                    x = x.astype(np.float32)
                x[np.repeat(~mask, k)] = 0
                call.append(x[:n])
            out.append(call)
        return out

    def add_job(self, session: SwitchSession, as_leaf: bool | None = None) -> TestJob:
        """This scenario's job on `session`'s switch: the same index, slots and epoch on
        every target, so that the same frames mean the same there; in the leaf role
        (`as_leaf`, default `leaf`) the leaf's part of a job of twice its ranks, whose
        spine is on port UPLINK_PORT (its ranks are 0..n-1 on the wire, as a plain job's)."""
        leaf = self.leaf if as_leaf is None else as_leaf
        return session.add_job(
            JOB,
            self.ranks,
            slot_count=self.slots,
            job_index=JOB_INDEX,
            epoch=EPOCH,
            encoding=Encoding[self.encoding.upper()],
            block_values=self.block_values,
            round_mode=RoundMode[self.round_mode.upper()],
            uplink=Uplink(UPLINK_PORT, SPINE.mac, SPINE.ip, LEAF_RANK) if leaf else None,
            ranks_in_job=list(range(self.ranks)) if leaf else None,
            job_ranks=2 * self.ranks if leaf else None,
        )

    def set_loss(self, session: SwitchSession) -> None:
        """The drop simulator's `loss` on this job, in its hash mode (never its random
        number generator, each target's own), from a fresh count of its packets."""
        if self.loss:
            session.set_loss(
                JOB, ingress=self.loss, egress=self.loss, seed=self.loss_seed, use_random=False
            )


def announce_block(sc: Scenario) -> bool:
    """Whether the scenario's ranks send ANNOUNCEs with a block after the range: a silent
    leaf's above SKIP_GROWS_TO_VALUES values per block (wire.announce_carries_block)."""
    return announce_carries_block(sc.block_values, sc.leaf and sc.round_mode == "silent")


def capture(sc: Scenario) -> Frames:
    """Every frame the ranks' real Workers sent in `sc`'s calls on an in-process switch,
    with the port it came in on, in the order the switch took them."""
    errors: list[BaseException] = []
    with SwitchSession.inprocess(ports=PORTS) as session, record_ingress(session) as frames:
        job = sc.add_job(session, as_leaf=False)  # a leaf's ranks send what a job's do
        tensors = sc.tensors()
        padded = announce_block(sc)  # ... but their ANNOUNCEs, which carry a block
        width = frame_width(sc.block_values, padded)

        def rank(r: int, desc: dict) -> None:
            transport = session.transport(job.by_rank[r].port, width)
            try:
                with Worker(desc, transport=transport, deadline=30.0) as w:
                    for call in tensors:
                        try:
                            w.allreduce(call[r])
                        except OverflowError:
                            pass  # an exact sum beyond int32: the call's end, as specified
            except BaseException as exc:  # reported below
                errors.append(exc)

        descs = job.job.descriptors(session.address)
        if padded:  # the leaf role's fields: ranks that pad their ANNOUNCEs as a leaf's do
            descs = [
                d | {"wire_rank": r, "leaf_ranks": list(range(sc.ranks))}
                for r, d in enumerate(descs)
            ]
        threads = [threading.Thread(target=rank, args=(r, d)) for r, d in enumerate(descs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise RuntimeError(f"scenario {sc.seed}: the capture's call failed: {errors[0]!r}")
    return frames


def with_faults(frames: Frames, sc: Scenario) -> Frames:
    """`frames` with `sc.fault_rate` of them meeting one of FAULTS (drawn from the seed):
    a swap puts the frame before the one sent last, a late retransmission sends it again
    with RETRANSMIT set 1-7 frames later, every other fault is what `_faulted` gives."""
    rng = np.random.default_rng(sc.seed + 2)
    out: Frames = []
    pending: list[tuple[int, int, bytes]] = []  # (before which frame, port, frame)
    for i, (port, frame) in enumerate(frames):
        out += [(q, f) for at, q, f in pending if at == i]
        pending = [x for x in pending if x[0] != i]
        if rng.random() >= sc.fault_rate:
            out.append((port, frame))
            continue
        fault = FAULTS[int(rng.integers(len(FAULTS)))]
        if fault == "swap" and out:
            out.insert(len(out) - 1, (port, frame))
        elif fault == "late_retransmit" and _has_header(frame):
            out.append((port, frame))
            later = _forged(frame, "flags", rng, value=_header(frame).flags | Flag.RETRANSMIT)
            pending.append((i + int(rng.integers(1, 8)), port, later))
        else:
            out += _faulted(fault, port, frame, rng)
    return out + [(q, f) for _at, q, f in pending]


def _faulted(fault: str, port: int, frame: bytes, rng: np.random.Generator) -> Frames:
    """What goes in instead of `frame` (from `port`) that meets `fault`; the frame as it
    was where the fault does not apply to it."""
    values_at = P4R_OFFSET + p.HEADER_BYTES
    if fault == "lose":
        return []
    if fault == "duplicate":
        return [(port, frame), (port, frame)]
    if fault == "misport":
        return [(int(rng.integers(1, PORTS + 1)), frame)]
    if fault == "truncate":
        return [(port, frame[: int(rng.integers(14, len(frame)))])]
    if fault == "forge" and _has_header(frame):
        return [(port, _forged(frame, FORGED[int(rng.integers(len(FORGED)))], rng))]
    if fault == "header_bit":
        return [(port, _flip(frame, int(rng.integers(14, values_at)), rng))]
    if fault == "value_bit" and len(frame) > values_at:
        return [(port, _flip(frame, int(rng.integers(values_at, len(frame))), rng))]
    if fault == "value_carry" and len(frame) >= values_at + 8:
        # a run of all-ones words: a sum with it carries from word to word (the packed
        # encoding's lanes never do; a wide add must, modulo its width)
        at = values_at + 4 * int(rng.integers(0, (len(frame) - values_at) // 4 - 1))
        return [(port, frame[:at] + b"\xff" * 8 + frame[at + 8 :])]
    if fault == "junk":
        junk = rng.integers(0, 256, int(rng.integers(14, 200)), np.uint8).tobytes()
        return [(port, frame), (port, junk)]
    return [(port, frame)]


def _has_header(frame: bytes) -> bool:
    return len(frame) >= P4R_OFFSET + p.HEADER_BYTES


# header fields a forged frame changes (checksums stay right: the switch reads it whole)
FORGED = (
    "msg_type",
    "slot_version",
    "flags",
    "job",
    "slot",
    "rank",
    "epoch",
    "block",
    "next_block",
    "next_exponent",
)


def _header(frame: bytes) -> p.Header:
    return p.decode_header(frame, P4R_OFFSET)


def _forged(frame: bytes, name: str, rng: np.random.Generator, value: int | None = None) -> bytes:
    """`frame` with header field `name` set to `value`, else to a value near its own, at
    a limit of the field or anywhere in it."""
    if not _has_header(frame):
        return frame
    h = _header(frame)
    if value is None:
        bits = next(f.bits for f in p.FIELDS if f.name == name)
        own, top = int(getattr(h, name)), (1 << bits) - 1
        value = int(
            rng.choice(
                [own ^ 1, own + 1, own - 1, 0, top, p.END_OF_STREAM, int(rng.integers(0, top + 1))]
            )
        )
        value = min(max(value, 0), top)
    head = p.encode_header(h._replace(**{name: value}))
    return frame[:P4R_OFFSET] + head + frame[P4R_OFFSET + p.HEADER_BYTES :]


def _flip(frame: bytes, at: int, rng: np.random.Generator) -> bytes:
    b = bytearray(frame)
    b[min(at, len(b) - 1)] ^= 1 << int(rng.integers(8))
    return bytes(b)


@functools.cache
def arp_request(port: int) -> bytes:
    """The host on `port` asks who has the switch's address (the switch answers on it)."""
    ask = ARP(op=1, hwsrc=host_mac(port), psrc=host_ip(port), pdst=SWITCH_IP)
    return bytes(Ether(src=host_mac(port), dst="ff:ff:ff:ff:ff:ff") / ask)


def _is_marker_reply(frame: bytes) -> bool:
    """The switch's ARP reply (an answer to `arp_request`); only an ARP frame is parsed."""
    if frame[12:14] != ETH_ARP:
        return False
    eth = Ether(frame)
    return ARP in eth and eth[ARP].op == 2 and eth[ARP].hwsrc == SWITCH_MAC


@dataclass
class Outcome:
    """What one target did with the frames: per port the frames it sent, in order, and
    the job's and the switch's counters."""

    kind: str
    out: dict[int, list[bytes]]
    job_stats: dict[str, int]
    switch_stats: dict[str, int]


def run(kind: str, sc: Scenario, frames: Frames) -> Outcome:
    """`frames` through a fresh switch of `kind` with `sc`'s job, one at a time; in the
    leaf role every frame the leaf sends up gets its spine's answer (`mirror`) at once."""
    proc = start_switch(kind, PORTS)
    try:
        with SwitchSession(proc) as session:
            job = sc.add_job(session)
            sc.set_loss(session)
            out: dict[int, list[bytes]] = {port: [] for port in range(1, PORTS + 1)}
            answered = 0  # frames up the uplink the mirror spine has answered
            queue = list(frames)
            i = 0
            while i < len(queue):
                port, frame = queue[i]
                proc.send(port, frame)
                proc.send(port, arp_request(port))
                where = f"{kind}: frame {i} of scenario {sc.seed}"
                _until_marker(proc, port, out, where)
                if sc.leaf:  # every copy out of the frame before the spine answers
                    for q in out:
                        proc.send(q, arp_request(q))
                        _until_marker(proc, q, out, where)
                for q in out:
                    while (got := proc.recv(q, 0.0)) is not None:
                        out[q].append(got)
                if sc.leaf:
                    up = out[UPLINK_PORT]
                    answers = [a for f in up[answered:] if (a := mirror(f, job)) is not None]
                    queue[i + 1 : i + 1] = [(UPLINK_PORT, a) for a in answers]
                    answered = len(up)
                i += 1
            for q in out:
                out[q] += proc.recv_all(q, 0.3)
            markers = sum(_is_marker_reply(f) for frames_out in out.values() for f in frames_out)
            assert markers == 0, f"{kind}: {markers} stray marker replies"
            return Outcome(kind, out, job.stats(), session.switch_stats())
    finally:
        proc.stop()


def mirror(partial: bytes, job: TestJob) -> bytes | None:
    """The spine's answer to a leaf's partial, as if the leaf's were the job's only
    non-zero one: its round's RESULT with the partial's own next block, fingerprint range
    or values (a SKIP's: zeros), unicast and CACHED where the partial was a retransmission.
    None for what a spine answers otherwise (a STATUS, a REWIND) or a frame that is no
    partial. Both targets get the same answers as long as they send the same partials."""
    try:
        f = p.parse_frame(partial, job.job.block_values)
    except p.ProtocolError:
        return None
    h = f.header
    if h.msg_type not in (MsgType.ANNOUNCE, MsgType.DATA, MsgType.SKIP):
        return None
    flags = h.flags & ~Flag.RETRANSMIT
    if h.flags & Flag.RETRANSMIT:
        flags |= Flag.CACHED
    fields = {n: getattr(h, n) for n in ("slot", "slot_version", "block", "next_block")}
    fields |= {"next_exponent": h.next_exponent, "rank": h.rank, "epoch": h.epoch}
    zeros = np.zeros(job.job.block_values, np.int64)
    if h.msg_type == MsgType.ANNOUNCE:  # the range, and a block where the job's carry one
        block = zeros if job.job.announce_block else None
        return job.spine_frame(int(flags), fingerprint=f.fingerprint, values=block, **fields)
    values = f.values if f.values is not None else zeros
    return job.spine_frame(int(flags), values=values, **fields)


def _until_marker(proc: Any, port: int, out: dict[int, list[bytes]], where: str) -> None:
    """Receive on `port` (keeping every other frame) up to the marker's ARP reply."""
    while True:
        got = proc.recv(port, 5.0)
        if got is None:
            raise TimeoutError(f"{where}: no ARP reply on port {port}")
        if _is_marker_reply(got):
            return
        out[port].append(got)


def differences(a: Outcome, b: Outcome) -> list[str]:
    """What differs between two targets' outcomes, in words (empty: the same)."""
    diffs = []
    for port in a.out:
        fa, fb = a.out[port], b.out[port]
        if fa == fb:
            continue
        k = next((i for i, (x, y) in enumerate(zip(fa, fb)) if x != y), min(len(fa), len(fb)))
        diffs.append(
            f"port {port}: {a.kind} sent {len(fa)} frames, {b.kind} {len(fb)}; first "
            f"difference at frame {k}: {a.kind} {_describe(fa, k)}, {b.kind} {_describe(fb, k)}"
        )
    for name, x, y in (
        ("job", a.job_stats, b.job_stats),
        ("switch", a.switch_stats, b.switch_stats),
    ):
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key):
                diffs.append(f"{name} counter {key}: {a.kind} {x.get(key)}, {b.kind} {y.get(key)}")
    return diffs


def _describe(frames: list[bytes], k: int) -> str:
    if k >= len(frames):
        return "none"
    frame = frames[k]
    try:
        return f"{p.frame_text(p.parse_frame(frame))} ({len(frame)} bytes)"
    except p.ProtocolError:
        return f"{len(frame)} bytes {frame[:48].hex()}"


def compare(
    seed: int, against: str, leaf: bool | None = None
) -> tuple[Frames, dict[str, int], list[str]]:
    """Scenario `seed` (Scenario.draw's `leaf`) on simple_switch_grpc and on `against`:
    its frames, the job's counters on simple_switch_grpc, and the differences."""
    sc = Scenario.draw(seed, leaf)
    frames = with_faults(capture(sc), sc)
    reference = run(SIMPLE_SWITCH_GRPC, sc, frames)
    return frames, reference.job_stats, differences(reference, run(against, sc, frames))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--against", default="inprocess", choices=["inprocess", "softswitch"])
    ap.add_argument("--leaf", action="store_true", help="every job in the leaf role where it fits")
    a = ap.parse_args(argv)
    broken = 0
    for seed in range(a.first_seed, a.first_seed + a.scenarios):
        leaf = True if a.leaf else None
        sc = Scenario.draw(seed, leaf)
        t0 = time.monotonic()
        frames, stats, diffs = compare(seed, a.against, leaf)
        print(
            f"seed {seed}: {sc}: {len(frames)} frames in, {stats['rounds_completed']} rounds "
            f"completed, {stats['state_lost']} answered STATE_LOST, "
            f"{stats['simulated_drops_ingress'] + stats['simulated_drops_egress']} lost: "
            f"{'differs' if diffs else 'same'} ({time.monotonic() - t0:.1f} s)",
            flush=True,
        )
        for d in diffs[:12]:
            print("   ", d)
        broken += bool(diffs)
    print(f"{broken} of {a.scenarios} scenarios differ")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
