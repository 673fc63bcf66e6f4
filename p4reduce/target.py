"""What a switch target is: bmv2 (the v1model program, run by a switch process of one of
two kinds, softswitch or simple_switch_grpc) and Tofino (TNA, `tofino` and `tofino2`);
where each one's compiled program is, and its defaults.

Words: a *target* is the program's architecture and chip (`Target`, `TARGETS`); a *kind*
is the switch process that runs the v1model program here (`KINDS`: softswitch, the
pure-Python switch, or bmv2's simple_switch_grpc; softswitch/runner.py starts either).

The P4Runtime surface does not differ (tests/test_tofino_build.py checks that the TNA
P4Info gives the controller every table, action, match field and counter the v1model one
does). What genuinely differs, and is decided here and nowhere else:

* **the pipeline files** the controller pushes: p4src/build/ for bmv2; for Tofino the
  P4Info in p4src/build/<target>/ and a device config the switch's P4Runtime server builds
  from the compiler's output (docs/tofino.md: Stratum's `bf_pipeline_builder`), named in
  the configuration because it is not committed;
* **port numbering**: bmv2 ports are the numbers the configuration uses. A Tofino data
  plane sees *dev ports* (pipe << 7 | port: front-panel port 1/0 is dev port 128 on many
  boards, 0 on others); `switch.port_map` maps each configured port to its dev port, and
  every entry the controller writes (admission's `ingress_port`, `l2_forward`'s port,
  multicast replicas) carries the dev port (PortMap);
* **reserved dev ports**: the CPU port (`switch.cpu_port`) and the TNA program's harvest
  (recirculation) port are never a worker's or host's port and never flooded;
* **pipes**: a Tofino's registers are per pipe (a dev port's pipe is `pipe_of`), and a
  job's rounds are read out on its recirculation port (`readout_port`), so every rank of a
  job must be in that port's pipe (`check_pipes`: a job across pipes would get lanes from
  another pipe's registers);
* **value encodings**: `packed` (a 2048-bit add per packet) exists only in the v1model
  program; the TNA program adds int32 lanes (two per stateful ALU). A job on a Tofino
  switch is created with `lanes` (the default there); asking for `packed` is refused
  (the rule: p4reduce.job.resolve_encoding, from `encodings` and `default_encoding`);
* **int32 overflow**: the v1model program flags a round whose int32 lane overflowed. A
  Tofino stateful ALU returns one value (the lane's sum), so the TNA program cannot: its
  jobs send int32 as 16-bit halves that cannot overflow in the switch, and the workers
  check the exact sum (`int32_halves`, resolved by p4reduce.job.resolve_halves from
  `flags_int32_overflow`; docs/protocol.md section 10);
* **block sizes**: the values per block (per DATA packet) a job may take, `block_sizes`.
  The v1model program keeps one wide register per size and tells the size by the frame's
  length, so a job chooses its own; the TNA program's lanes are stateful ALUs fixed when it
  is compiled, so it carries one size per chip: 64 on Tofino 2, TOFINO_BLOCK_VALUES on
  Tofino 1, what its 12 stages add in one pass (the rule:
  p4reduce.job.resolve_block_values);
* **default slots**: `default_slots` per kind, and the target's own for a controller that
  cannot tell the kinds apart;
* **default window**: the most slots a rank keeps outstanding in a job created without a
  window (`default_window`; `kind_window` per kind). A switch that serves the frames of
  all its ports first in first out (simple_switch_grpc) keeps each job's share only if
  every rank keeps at most FAIR_SLOTS outstanding (docs/reliability.md, "Jobs share the
  switch"); softswitch serves its ports round robin, and a Tofino pipeline takes every
  port's packets at line rate, so there a rank opens every slot its job has: a call of
  small blocks is bound by the round trip, and 16 packets in flight leave a fast switch
  idle (bench/hostlib_pps.py).

Multicast groups are the same: standard P4Runtime PRE entries (group id, replicas of
(egress port, instance)), which Stratum and the SDE's P4Runtime server map to the Tofino
PRE's multicast groups, nodes and rid; instance is the rank, read in egress as
`egress_rid`. Only the replica's port is translated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import NamedTuple

from .job import FAIR_SLOTS, window_within
from .wire import BLOCK_VALUES


def _build_dir() -> Path:
    """p4src/build/, the compiled program, found as the package `p4src.build`: the same
    lookup serves a checkout, the editable install and an installed wheel (pyproject.toml
    ships the outputs as its package data). A directory on disk, because the pipeline
    files are opened by path (a P4Info path may also come from the configuration)."""
    root = resources.files("p4src.build")
    if not isinstance(root, Path):
        raise ImportError(f"p4src.build ({root}) is not a directory: install p4reduce unpacked")
    return root


BUILD_DIR = _build_dir()
DEFAULT_P4INFO = BUILD_DIR / "p4reduce.p4info.txtpb"
DEFAULT_DEVICE_CONFIG = BUILD_DIR / "p4reduce.json"

# The switch processes that run the v1model program (softswitch/runner.py starts them).
SOFTSWITCH = "softswitch"
SIMPLE_SWITCH_GRPC = "simple_switch_grpc"
KINDS = (SOFTSWITCH, SIMPLE_SWITCH_GRPC)


class _KindDefaults(NamedTuple):
    """What a job whose creator names none gets on a switch process of one kind. Slots:
    bmv2 takes only ~32 frames per port that it has not processed, and a worker has one
    packet in flight per slot, so more slots overrun its ports; softswitch has no such
    limit, and more slots make each slot's chain of rounds shorter, which recovers from
    loss faster (docs/benchmarks.md). Window: the module's docstring. The bmv2 target,
    whose controller cannot tell the two kinds apart, takes simple_switch_grpc's."""

    slots: int
    window: int | None  # None: every slot of the job


_KIND_DEFAULTS = {
    SOFTSWITCH: _KindDefaults(slots=64, window=None),
    SIMPLE_SWITCH_GRPC: _KindDefaults(slots=32, window=FAIR_SLOTS),
}


def _kind_defaults(kind: str) -> _KindDefaults:
    try:
        return _KIND_DEFAULTS[kind]
    except KeyError:
        raise TargetError(f"unknown switch kind {kind!r} (one of {', '.join(KINDS)})") from None


def default_slots(kind: str) -> int:
    """Slots of a job created without a count on a switch process of `kind`."""
    return _kind_defaults(kind).slots


def kind_window(kind: str, slots: int) -> int:
    """The window of a job of `slots` slots created without one on a switch process of
    `kind` (for those who start the process and so know its kind: the demo, the torch
    launcher; the bmv2 target's controller cannot tell the kinds apart and takes
    simple_switch_grpc's)."""
    return window_within(_kind_defaults(kind).window, slots)


# values per block the v1model program takes (a wide register per size; the default first)
V1MODEL_BLOCK_SIZES = (BLOCK_VALUES, 128, 256, 512, 1024, 2048, 4096, 8192, 16000)

PORT_BITS = 9  # PortId_t / v1model's port width: every dev port fits


@dataclass(frozen=True)
class Target:
    name: str
    arch: str
    encodings: tuple[str, ...]  # p4reduce.wire.Encoding names, lower case
    default_encoding: str
    # the program sets FLAG_OVERFLOW on a round whose int32 lane overflowed; where it
    # cannot, a lanes job must send int32 as halves (int32_halves) or a sum could be wrong
    flags_int32_overflow: bool
    # slots of a job created without a count (bmv2: default_slots(SIMPLE_SWITCH_GRPC))
    default_slots: int
    # the most slots a rank keeps outstanding in a job created without a window (None:
    # every slot; bmv2: simple_switch_grpc's FAIR_SLOTS, a first-in first-out switch)
    default_window: int | None
    p4info: Path
    device_config: Path | None  # None: the configuration must name one
    # the dev port the TNA program recirculates results on (HARVEST_PORT of
    # p4src/tna/bridge.p4); None: no recirculation (v1model)
    harvest_port: int | None = None
    # values per block a job may take (FOR_EACH_BLOCK_SIZE of p4src/v1model/values.p4 for the
    # v1model program, the compiled lanes for TNA); the first is a job's default
    block_sizes: tuple[int, ...] = (BLOCK_VALUES,)
    # p4reduce.wire.RoundMode names, lower case, the program runs; the first is a job's
    # default (docs/protocol.md section 6)
    round_modes: tuple[str, ...] = ("every_rank",)
    # silent rounds on a program that does not run them: the largest job (ranks) whose
    # silent rounds the chip could fit (0: none; p4src/tofino_resources.py
    # silent_rank_limit, docs/tofino.md "Silent rounds on TNA"): the ranks the build's
    # silent path holds where it has one (silent_path), else counted from its resources;
    # None where the program runs them or nothing was counted
    silent_rank_limit: int | None = None
    # the build has silent rounds' data path (per-rank keys, minimum, expected ranks) but
    # not their loss recovery (queries, rewinds), so the controller does not run them yet
    silent_path: bool = False

    @property
    def default_block_values(self) -> int:
        return self.block_sizes[0]

    @property
    def default_round_mode(self) -> str:
        return self.round_modes[0]

    @property
    def is_tofino(self) -> bool:
        return self.arch != "v1model"

    @property
    def reserved_ports(self) -> dict[int, str]:
        """Dev ports the data plane uses for itself (not the operator's to assign)."""
        if self.harvest_port is None:
            return {}
        return {
            self.harvest_port: "the TNA program's harvest (recirculation) "
            "port, HARVEST_PORT in p4src/tna/bridge.p4"
        }


def _tofino(
    name: str,
    arch: str,
    harvest_port: int,
    block_values: int,
    silent_rank_limit: int,
    silent_path: bool = False,
) -> Target:
    return Target(
        name=name,
        arch=arch,
        encodings=("lanes",),
        default_encoding="lanes",
        flags_int32_overflow=False,
        default_slots=64,
        default_window=None,  # a pipeline at line rate: nothing queues for a job
        p4info=BUILD_DIR / name / "p4reduce.p4info.txtpb",
        device_config=None,
        harvest_port=harvest_port,
        block_sizes=(block_values,),
        silent_rank_limit=silent_rank_limit,
        silent_path=silent_path,
    )


# values per block the TNA program carries (TNA_BLOCK_VALUES of p4src/tna/values.p4, two
# per lane-pair register: tests/test_tofino_build.py counts them in each compiled build).
# Tofino 1 carries fewer than the protocol's 64: the pairs that fit its 12 stages after the
# bitmap step in the same pass (docs/tofino.md, "One pass on Tofino 1": the arithmetic).
TOFINO_BLOCK_VALUES = 28
TOFINO2_BLOCK_VALUES = BLOCK_VALUES
# the largest silent job on each chip (0: none): Tofino 2's production build holds silent
# rounds' keys for 8 ranks (SILENT_RANKS of p4src/tna/bridge.p4), Tofino 1 has no stage for
# them; from the committed builds (tests/test_tofino_build.py counts their rank_next
# registers)
TOFINO_SILENT_RANK_LIMIT = 0
TOFINO2_SILENT_RANK_LIMIT = 8

TARGETS: dict[str, Target] = {
    "bmv2": Target(
        name="bmv2",
        arch="v1model",
        encodings=("lanes", "packed"),
        default_encoding="packed",
        flags_int32_overflow=True,
        default_slots=_KIND_DEFAULTS[SIMPLE_SWITCH_GRPC].slots,
        default_window=_KIND_DEFAULTS[SIMPLE_SWITCH_GRPC].window,
        p4info=DEFAULT_P4INFO,
        device_config=DEFAULT_DEVICE_CONFIG,
        block_sizes=V1MODEL_BLOCK_SIZES,
        round_modes=("silent", "every_rank"),
    ),
    # HARVEST_PORT of p4src/tna/bridge.p4: pipe 0's recirculation port on each chip
    # (tests/controller_tests/test_target.py reads it there)
    "tofino": _tofino("tofino", "tna", 68, TOFINO_BLOCK_VALUES, TOFINO_SILENT_RANK_LIMIT),
    "tofino2": _tofino(
        "tofino2", "t2na", 6, TOFINO2_BLOCK_VALUES, TOFINO2_SILENT_RANK_LIMIT, silent_path=True
    ),
}


class TargetError(ValueError):
    """A request the target cannot serve; the message says what and what to do."""


# a Tofino 1 or 2 dev port is pipe << 7 | port within the pipe
PIPE_SHIFT = 7


def pipe_of(dev_port: int) -> int:
    """The pipe a dev port belongs to (Tofino 1 and 2): its registers are that pipe's."""
    return dev_port >> PIPE_SHIFT


def readout_port(t: Target) -> int | None:
    """The dev port a job's rounds are read out on (recirculated), or None where nothing
    is recirculated (v1model). The TNA program has one such port per chip today
    (HARVEST_PORT); a program with one per pipe changes this function, and only it."""
    return t.harvest_port


def check_pipes(t: Target, job: int, ranks: list[tuple[int, int, int]]) -> None:
    """TargetError unless every rank's port is in the pipe of the job's read-out port.

    `ranks` is (rank, configured port, dev port). Why: registers are per pipe, so the read-
    out pass of a job whose ranks sit in another pipe would read another pipe's registers
    (lanes from the wrong sums), and nothing on the wire would show it."""
    readout = readout_port(t)
    if readout is None:
        return
    pipe = pipe_of(readout)
    for rank, port, dev in ranks:
        if pipe_of(dev) != pipe:
            raise TargetError(
                f"job {job}: rank {rank}'s port {port} is dev port {dev}, in pipe "
                f"{pipe_of(dev)}; every rank of a {t.name} job must be in pipe {pipe}, the "
                f"pipe of its read-out (recirculation) port {readout} (registers are per "
                f"pipe): use ports of pipe {pipe}"
            )


def target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise TargetError(f"unknown target {name!r} (one of {', '.join(TARGETS)})") from None


@dataclass(frozen=True)
class PortMap:
    """The configuration's port numbers -> the data plane's (dev) port numbers."""

    dev: dict[int, int] = field(default_factory=dict)  # empty: identity (bmv2)

    def __call__(self, port: int) -> int:
        if not self.dev:
            return port
        try:
            return self.dev[port]
        except KeyError:
            raise TargetError(
                f"port {port} has no dev port in switch.port_map (mapped: {sorted(self.dev)})"
            ) from None

    def replicas(self, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """(configured port, instance) -> (dev port, instance): multicast replicas."""
        return [(self(port), instance) for port, instance in pairs]
