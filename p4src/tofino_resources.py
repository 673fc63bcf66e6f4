"""The resource summary of a bf-p4c compile: what each MAU stage of the pipe uses.

bf-p4c writes its resource usage as large JSON logs (`<pipe>/logs/resources.json`,
`metrics.json`, `phv.json`; schemas in p4c's backends/tofino/compiler_interfaces). The
committed summary (p4src/build/<target>/resources.json) keeps what a reader of
docs/tofino.md needs and what must not silently grow: per stage, the logical tables,
SRAMs, map RAMs, TCAMs, stateful ALUs (and which registers they run), gateways, VLIW
instructions, input-crossbar bytes and the PHV containers the stage reads or writes; over
the pipe, the stages used and the PHV occupied. `table()` renders it as Markdown.

PHV is allocated for the whole pipe, not per stage: "PHV accessed" per stage counts the
containers that stage's match or actions read or write (from phv.json), "PHV occupied"
(from metrics.json) is the allocation. Stdlib only: compile.py runs before any install.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

# stateful ALUs per MAU stage (Tofino 1 and 2: one per meter row, 4 rows)
STATEFUL_ALUS_PER_STAGE = 4


def _find(work: Path, name: str) -> Path | None:
    found = sorted(work.glob(f"**/logs/{name}")) or sorted(work.glob(f"**/{name}"))
    return found[0] if found else None


def _users(units: list[dict], used_for: str | None = None) -> list[str]:
    out = []
    for unit in units:
        for usage in unit.get("usages", []):
            if used_for is None or usage.get("used_for") == used_for:
                out.append(usage.get("used_by", "?"))
    return out


def _stage(stage: dict) -> dict[str, Any]:
    rams = stage.get("rams", {}).get("srams", [])
    alus = stage.get("meter_alus", {}).get("meters", [])
    xbar = stage.get("xbar_bytes", {}).get("bytes", [])
    tables = sorted(
        {
            u
            for u in _users(rams)
            + _users(stage.get("tcams", {}).get("tcams", []))
            + _users(stage.get("gateways", {}).get("gateways", []))
        }
    )
    return {
        "stage": stage["stage_number"],
        "logical_tables": len(stage.get("logical_tables", {}).get("ids", [])),
        "tables": tables,
        "srams": len(rams),
        "map_rams": len(stage.get("map_rams", {}).get("maprams", [])),
        "tcams": len(stage.get("tcams", {}).get("tcams", [])),
        "stateful_alus": len(alus),
        "stateful_alu_users": sorted(set(_users(alus))),
        "gateways": len(stage.get("gateways", {}).get("gateways", [])),
        "vliw_instructions": len(stage.get("vliw", {}).get("instructions", [])),
        "exact_xbar_bytes": sum(1 for b in xbar if b.get("byte_type") == "exact"),
        "ternary_xbar_bytes": sum(1 for b in xbar if b.get("byte_type") == "ternary"),
    }


def _phv_accessed(phv: dict) -> dict[int, dict[str, int]]:
    """stage -> {"8": containers, "16": ..., "32": ...} read or written by the MAU there."""
    per_stage: dict[int, dict[int, set[int]]] = {}
    for container in phv.get("containers", []):
        width = container.get("bit_width")
        for slc in container.get("slices", []):
            for access in slc.get("reads", []) + slc.get("writes", []):
                loc = access.get("location", {})
                if loc.get("type") == "mau" and "stage" in loc:
                    per_stage.setdefault(loc["stage"], {}).setdefault(width, set()).add(
                        container["phv_number"]
                    )
    return {
        stage: {str(w): len(c) for w, c in sorted(widths.items())}
        for stage, widths in per_stage.items()
    }


# a transition of a parser state in a .bfa: a value/mask pattern or the catch-all `*`
_BFA_TRANSITION = re.compile(r"^      (\*|0x[0-9a-fA-F*]+|0b[01*]+|\d+)\s*:")


def parser_states(bfa: str) -> dict[str, dict[str, Any]]:
    """Per parser of an assembler file (.bfa): its states, how many choose between
    transitions, and those that choose without a `match:` line. p4c before
    p4lang/p4c#5753 dropped the match registers of selects on saved packet data: such a
    state takes its first transition for every packet, and no resource figure shows it
    (the parser is in tofino.bin, not context.json), so the summary records it."""
    parsers: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    in_states, state = False, None

    def close() -> None:
        if current is not None and state is not None and state[1] > 1:
            current["choosing"] += 1
            if not state[2]:
                current["choosing_without_match"].append(state[0])

    for line in bfa.splitlines():
        if line.startswith("parser "):
            close()
            name = line.rstrip(":").split(None, 1)[1]
            current = parsers.setdefault(
                name, {"states": 0, "choosing": 0, "choosing_without_match": []}
            )
            in_states, state = False, None
        elif line == "  states:":
            in_states = True
        elif in_states and line and len(line) - len(line.lstrip()) <= 2:
            close()
            in_states, state = False, None
        elif in_states and line.startswith("    ") and not line.startswith("     "):
            close()
            state = [line.strip().rstrip(":"), 0, False]
            current["states"] += 1
        elif in_states and state is not None:
            if line.startswith("      match:"):
                state[2] = True
            elif _BFA_TRANSITION.match(line):
                state[1] += 1
    close()
    return parsers


def parser_defects(parsers: dict[str, dict[str, Any]]) -> list[str]:
    """What parser_states found wrong, one line per state."""
    return [
        f"parser {name}: state {state} chooses between transitions without a match"
        for name, p in parsers.items()
        for state in p["choosing_without_match"]
    ]


def summarize(work: Path, target: str, stages_available: int) -> dict[str, Any]:
    """The summary of the compile in `work` (bf-p4c's -o directory)."""
    path = _find(work, "resources.json")
    if path is None:
        raise SystemExit(f"no resources.json under {work}: compile with -g (compile.py does)")
    resources = json.loads(path.read_text())
    mau = resources["resources"]["mau"]
    stages = [_stage(s) for s in sorted(mau["mau_stages"], key=lambda s: s["stage_number"])]
    phv_path = _find(work, "phv.json")
    accessed = _phv_accessed(json.loads(phv_path.read_text())) if phv_path else {}
    for s in stages:
        s["phv_accessed"] = accessed.get(s["stage"], {})
    busy = [
        s["stage"]
        for s in stages
        if s["logical_tables"]
        or s["stateful_alus"]
        or s["srams"]
        or s["tcams"]
        or s["gateways"]
        or s["vliw_instructions"]
    ]
    summary: dict[str, Any] = {
        "target": target,
        "compiler_version": resources.get("compiler_version", "unknown"),
        "stages_available": stages_available,
        "stages_in_allocation": mau.get("nStages"),
        "stages_used": (max(busy) + 1) if busy else 0,
        "stateful_alus": {
            "used": sum(s["stateful_alus"] for s in stages),
            "available": STATEFUL_ALUS_PER_STAGE * stages_available,
        },
        "totals": {
            key: sum(s[key] for s in stages)
            for key in (
                "logical_tables",
                "srams",
                "map_rams",
                "tcams",
                "gateways",
                "vliw_instructions",
                "exact_xbar_bytes",
                "ternary_xbar_bytes",
            )
        },
        "per_stage": stages,
    }
    table_summary = _find(work, "table_summary.log")
    if table_summary is not None:
        # the compiler's own count (ingress and egress share the stages), and its
        # critical path through the table dependency graph
        for line in table_summary.read_text().splitlines():
            line = line.strip()
            for key, label in (
                ("stages_in_table_allocation", "Number of stages in table allocation:"),
                ("ingress_stages", "Number of stages for ingress table allocation:"),
                ("egress_stages", "Number of stages for egress table allocation:"),
                (
                    "critical_path_length",
                    "Critical path length through the table dependency graph:",
                ),
            ):
                if line.startswith(label):
                    summary[key] = int(line[len(label) :].split()[0])
    metrics_path = _find(work, "metrics.json")
    if metrics_path is not None:
        metrics = json.loads(metrics_path.read_text())
        phv = metrics.get("phv", {})
        summary["phv_occupied"] = {
            kind: {
                str(t["bit_width"]): {
                    "containers": t.get("containers_occupied"),
                    "bits": t.get("bits_occupied"),
                }
                for t in phv.get(kind, [])
            }
            for kind in ("normal", "tagalong", "mocha", "dark")
            if phv.get(kind)
        }
        mau_metrics = metrics.get("mau", {})
        summary["latency"] = mau_metrics.get("latency")
    bfa = sorted(work.glob("*/*.bfa"))
    if bfa:
        summary["parser"] = parser_states(bfa[0].read_text())
    return summary


def table(summary: dict[str, Any]) -> str:
    """The per-stage summary as a Markdown table (docs/tofino.md)."""
    head = (
        "| stage | tables | SRAM | map RAM | TCAM | stateful ALUs (registers) | "
        "gateways | VLIW | xbar bytes (exact/ternary) | PHV accessed (8/16/32) |"
    )
    lines = [head, "|" + "---|" * 10]
    for s in summary["per_stage"]:
        phv = s.get("phv_accessed", {})
        regs = ", ".join(u.rsplit(".", 1)[-1] for u in s["stateful_alu_users"])
        lines.append(
            f"| {s['stage']} | {s['logical_tables']} | {s['srams']} | {s['map_rams']} | "
            f"{s['tcams']} | {s['stateful_alus']}{f' ({regs})' if regs else ''} | "
            f"{s['gateways']} | {s['vliw_instructions']} | {s['exact_xbar_bytes']}/"
            f"{s['ternary_xbar_bytes']} | {phv.get('8', 0)}/{phv.get('16', 0)}/"
            f"{phv.get('32', 0)} |"
        )
    t = summary["totals"]
    lines.append(
        f"| **total** | {t['logical_tables']} | {t['srams']} | {t['map_rams']} | "
        f"{t['tcams']} | {summary['stateful_alus']['used']} of "
        f"{summary['stateful_alus']['available']} | {t['gateways']} | "
        f"{t['vliw_instructions']} | {t['exact_xbar_bytes']}/"
        f"{t['ternary_xbar_bytes']} | |"
    )
    return "\n".join(lines)


# -- passes per round and the per-worker rate (docs/tofino.md) ---------------------------------

# a DATA frame's headers (Ethernet + IPv4 + UDP + p4reduce header; + 4 bytes per value:
# p4reduce.wire.frame_bytes_with_values) and what a link adds per frame (FCS, preamble,
# inter-frame gap)
FRAME_BYTES_WITHOUT_VALUES = 62
WIRE_GAP_BYTES = 4 + 8 + 12
LINK_BITS_PER_S = 100e9
# the bridge header a recirculated copy carries (p4src/tna/bridge.p4): 80 bits, 80 more
# with the drop simulator's seed, sequence and egress threshold, 8 more with silent rounds'
# expected ranks
BRIDGE_BYTES = {False: 10, True: 20}
SILENT_BRIDGE_BYTES = 1
# SwitchML's 256-byte packet (p4app-switchML dev_root/p4/headers.p4: Ethernet, IPv4, UDP,
# switchml_h 8 B, 64 values, exponents 2 B), one recirculation per round
SWITCHML_FRAME_BYTES = 14 + 20 + 8 + 8 + 256 + 2
SWITCHML_VALUES = 64


def alu_stages(summary: dict[str, Any]) -> dict[str, int]:
    """The MAU stage of each register's stateful ALU, by the register's short name."""
    return {
        user.rsplit(".", 1)[-1]: s["stage"]
        for s in summary["per_stage"]
        for user in s.get("stateful_alu_users", [])
    }


def block_values(summary: dict[str, Any]) -> int:
    """Values per packet the compiled program carries: two per lane-pair register."""
    return 2 * sum(1 for name in alu_stages(summary) if name.startswith("lanes_"))


def lane_pass(summary: dict[str, Any]) -> bool:
    """True when some lane pair sits at or before the bitmap's stage: its step cannot be
    chosen by the bitmap in that pass, so contributions take a lane pass."""
    stages = alu_stages(summary)
    return any(st <= stages["bitmap"] for name, st in stages.items() if name.startswith("lanes_"))


def recirculations_per_round(summary: dict[str, Any], workers: int) -> int:
    """Recirculated passes per dense round of a job: the completing packet's read-out pass,
    and with a lane pass one more per contribution."""
    return 1 + (workers if lane_pass(summary) else 0)


def packets_per_s(frame_bytes: int) -> float:
    """Frames of `frame_bytes` one 100 Gb/s port carries per second."""
    return LINK_BITS_PER_S / ((frame_bytes + WIRE_GAP_BYTES) * 8)


def per_worker_rate(summary: dict[str, Any], workers: int, drop_simulator: bool) -> float:
    """DATA packets per second one worker can send, every job's rounds through one 100 Gb/s
    recirculation port: min(the worker's link, the port's passes / passes per round)."""
    frame = FRAME_BYTES_WITHOUT_VALUES + 4 * block_values(summary)
    link = packets_per_s(frame)
    bridge = BRIDGE_BYTES[drop_simulator] + (
        SILENT_BRIDGE_BYTES if silent_ranks_built(summary) else 0
    )
    recirculation = packets_per_s(frame + bridge)
    return min(link, recirculation / recirculations_per_round(summary, workers))


def _rate(packets: float, values: int) -> str:
    return f"{packets / 1e6:.2f} M ({packets * values / 1e9:.2f} G)"


def rate_table(builds: dict[str, tuple[dict[str, Any], bool]], workers: list[int]) -> str:
    """Markdown: per build (name -> (summary, drop_simulator)) and SwitchML's 256-byte
    mode, the per-worker rate in M DATA/s and G values/s for each worker count."""
    head = "| build | values per packet | recirculations per round | " + " | ".join(
        f"N = {n}" for n in workers
    )
    lines = [head + " |", "|" + "---|" * (3 + len(workers))]
    for name, (summary, simulator) in builds.items():
        k = block_values(summary)
        rates = [per_worker_rate(summary, n, simulator) for n in workers]
        passes = "N + 1" if lane_pass(summary) else "1"
        lines.append(
            f"| {name} | {k} | {passes} | " + " | ".join(_rate(r, k) for r in rates) + " |"
        )
    sml = _rate(packets_per_s(SWITCHML_FRAME_BYTES), SWITCHML_VALUES)
    lines.append(
        f"| SwitchML, Tofino 1, 256 B | {SWITCHML_VALUES} | 1 | "
        + " | ".join(sml for _ in workers)
        + " |"
    )
    return "\n".join(lines)


# -- silent rounds on TNA (docs/tofino.md, "Silent rounds on TNA") --------------------------

# the registers silent rounds add besides the per-rank keys (v1model's expected_ranks.p4:
# `expected`, `round_kind`; rewind.p4: the pending rewind position), one stateful ALU each
SILENT_SLOT_REGISTERS = ("expected", "round_kind", "rewind")
# ranks per job on one switch (MAX_WORKERS of p4src/common/constants.p4: the 32-bit bitmap)
MAX_WORKERS = 32


def silent_dependent_stages(workers: int) -> int:
    """MAU stages the completing packet of a silent round needs between reading the N
    per-rank keys and storing the next round's key: their minimum as a tree of two-input
    minimums, one level per stage (a stage's actions read what the stage before wrote), then
    the expected ranks, each rank's key's block compared with that minimum (one stage)."""
    return math.ceil(math.log2(workers)) + 1


def silent_free_alus(summary: dict[str, Any]) -> int:
    """Stateful ALUs left free in the stages where a per-rank register could run: the slot
    epoch's stage (the first that has the register index) and every later one used."""
    first = alu_stages(summary)["slot_epoch"]
    return sum(
        STATEFUL_ALUS_PER_STAGE - s["stateful_alus"]
        for s in summary["per_stage"]
        if s["stage"] >= first
    )


def silent_stages_needed(summary: dict[str, Any], workers: int) -> int:
    """Stages the program with silent rounds for jobs of `workers` ranks needs, counted from
    the build: its stages, plus the dependent stages of the N-way minimum and the expected
    ranks, plus the stages that N per-rank registers (a register array is accessed once per
    pass, so one array and one stateful ALU per rank) and the three slot registers take
    beyond the stateful ALUs the build leaves free."""
    alus = workers + len(SILENT_SLOT_REGISTERS)
    more = max(0, math.ceil((alus - silent_free_alus(summary)) / STATEFUL_ALUS_PER_STAGE))
    return summary["stages_used"] + silent_dependent_stages(workers) + more


def silent_ranks_built(summary: dict[str, Any]) -> int:
    """Ranks the build's silent path holds: its per-rank key registers (rank_next_r, one
    stateful ALU each: p4src/tna/rank_next.p4); 0 for a build without silent rounds."""
    return sum(1 for name in alu_stages(summary) if name.startswith("rank_next_"))


def silent_rank_limit(summary: dict[str, Any]) -> int:
    """The largest N (at most MAX_WORKERS) of a silent job on the build's chip: the ranks
    its silent path holds, or for a build without one the largest N that fits by
    silent_stages_needed; 0 when no N does."""
    built = silent_ranks_built(summary)
    if built:
        return built
    fitting = [
        n
        for n in range(1, MAX_WORKERS + 1)
        if silent_stages_needed(summary, n) <= summary["stages_available"]
    ]
    return max(fitting, default=0)


def silent_table(builds: dict[str, dict[str, Any]], workers: list[int]) -> str:
    """Markdown: per build, its stages, the free stateful ALUs, and for each N the stages
    silent rounds need by the count (a build without them) or "built" (N within the ranks
    its silent path holds, in the stages it uses); the largest N."""
    head = "| build | stages used of | free stateful ALUs | " + " | ".join(
        f"N = {n}" for n in workers
    )
    lines = [head + " | largest N |", "|" + "---|" * (4 + len(workers))]
    for name, summary in builds.items():
        built = silent_ranks_built(summary)
        needed = [
            ("built" if n <= built else "—") if built else silent_stages_needed(summary, n)
            for n in workers
        ]
        limit = silent_rank_limit(summary)
        lines.append(
            f"| {name} | {summary['stages_used']} of {summary['stages_available']} | "
            f"{silent_free_alus(summary)} | "
            + " | ".join(str(k) for k in needed)
            + f" | {limit if limit else 'none'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    # python p4src/tofino_resources.py p4src/build/tofino/resources.json -> Markdown table
    # python p4src/tofino_resources.py --rates -> the per-worker rate of the committed builds
    # python p4src/tofino_resources.py --silent -> what silent rounds need on each chip
    if sys.argv[1:] == ["--rates"]:
        build = Path(__file__).resolve().parent / "build"
        builds = {
            name: (
                json.loads((build / name / "resources.json").read_text()),
                name.endswith("-test"),
            )
            for name in ("tofino", "tofino2", "tofino-test", "tofino2-test")
        }
        print(rate_table(builds, [2, 4, 8, 16, 32]))
    elif sys.argv[1:] == ["--silent"]:
        build = Path(__file__).resolve().parent / "build"
        print(
            silent_table(
                {
                    name: json.loads((build / name / "resources.json").read_text())
                    for name in ("tofino", "tofino2")
                },
                [2, 4, 8, 16, 32],
            )
        )
    else:
        print(table(json.loads(Path(sys.argv[1]).read_text())))
