#!/usr/bin/env python3
"""softswitch against an earlier commit of itself, on the same packets, in one run.

Not a test: a measurement (root, for the veth part). A detached worktree of --baseline is
made in a temporary directory; every measurement then runs in a child process with that
tree or this one first on PYTHONPATH, alternating tree by tree in --passes passes, so a
burst of load on the shared cores hits both alike. Per tree:

* in-process: one real call's frames per case (bench/packet_profile.py's capture, made
  once with this tree), replayed into a fresh switch: thread CPU per packet (the best
  pass) and a hash of every frame that came out, which must be the same for both trees;
* over veth: the softswitch process's user + system CPU per frame in
  (bench/softswitch_pps.py veth_cpu; the median pass), dense rounds and rounds of
  1 DATA + N-1 SKIPs, packed, at each --veth-values.

    sudo .venv/bin/python bench/softswitch_ab.py --baseline 917c5b9 \\
        [--cases dense:1:64,independent:0.1:64:silent,dense:1:4096,independent:0.1:4096:silent]
        [--veth-values 64,4096] [--passes 3]

A case is PATTERN:DENSITY:VALUES_PER_BLOCK[:ROUND_MODE] (bench/suite.py's patterns).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def case_of(spec: str):
    """bench/suite.py's Case of a PATTERN:DENSITY:VALUES[:ROUND_MODE] spec."""
    from suite import M, Case  # beside this script

    pattern, density, values, *mode = spec.split(":")
    return Case(
        "softswitch",
        "p4reduce",
        4,
        M,
        pattern,
        float(density),
        1,
        block_values=int(values),
        round_mode=mode[0] if mode else "every_rank",
    )


def child_replay(spec: str, frames_path: str) -> dict:
    """(in a child) CPU per packet and the outputs' hash of one replay."""
    import packet_profile

    frames = pickle.loads(Path(frames_path).read_bytes())
    cpu, digest = packet_profile.replay(case_of(spec), frames)
    return {"us": 1e6 * cpu / len(frames), "digest": digest}


def child_veth(values: int, rounds: int) -> dict:
    """(in a child) the switch process's CPU per frame over veth."""
    import softswitch_pps

    return softswitch_pps.veth_cpu(values, 4, 16, rounds)


def run_child(tree: Path, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(args: argparse.Namespace, trees: dict[str, Path]) -> dict:
    import packet_profile

    tmp = Path(tempfile.mkdtemp(prefix="softswitch-ab-"))
    frames: dict[str, str] = {}
    for spec in args.cases:
        path = tmp / f"{spec.replace(':', '_')}.pkl"
        path.write_bytes(pickle.dumps(packet_profile.capture(case_of(spec))))
        frames[spec] = str(path)
    replays: dict[str, dict[str, list[dict]]] = {s: {t: [] for t in trees} for s in args.cases}
    veth: dict[int, dict[str, list[dict]]] = {k: {t: [] for t in trees} for k in args.veth_values}
    for _ in range(args.passes):
        for name, tree in trees.items():
            for spec in args.cases:
                replays[spec][name].append(run_child(tree, "replay", spec, frames[spec]))
            for k in args.veth_values:
                veth[k][name].append(run_child(tree, "veth", str(k), str(args.rounds)))
    for path in frames.values():
        Path(path).unlink()
    tmp.rmdir()
    return {"replays": replays, "veth": veth}


def report(data: dict) -> list[str]:
    lines = ["in-process, CPU per packet (best pass), us:"]
    for spec, by_tree in data["replays"].items():
        base = min(r["us"] for r in by_tree["baseline"])
        new = min(r["us"] for r in by_tree["this tree"])
        same = {r["digest"] for runs in by_tree.values() for r in runs}
        lines.append(
            f"  {spec:28s} baseline {base:6.1f}  this tree {new:6.1f}  ratio {new / base:.2f}"
            f"  outputs {'identical' if len(same) == 1 else 'DIFFER: ' + ' '.join(sorted(same))}"
        )
    lines.append("over veth, softswitch process CPU per frame in (median pass), us:")
    for k, by_tree in data["veth"].items():
        for kind in ("dense", "skips"):
            base, new = (
                statistics.median(sum(r[kind]) for r in by_tree[t])
                for t in ("baseline", "this tree")
            )
            lines.append(
                f"  {k:5d} values, {kind:6s}  baseline {base:6.1f}  this tree {new:6.1f}  "
                f"ratio {new / base:.2f}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        what, *rest = argv[1:]
        out = child_replay(*rest) if what == "replay" else child_veth(int(rest[0]), int(rest[1]))
        print(json.dumps(out))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="git commit to compare with")
    ap.add_argument(
        "--cases",
        type=lambda v: v.split(","),
        default=[
            "dense:1:64",
            "independent:0.1:64:silent",
            "dense:1:4096",
            "independent:0.1:4096:silent",
        ],
    )
    ap.add_argument(
        "--veth-values", type=lambda v: [int(x) for x in v.split(",")], default=[64, 4096]
    )
    ap.add_argument("--rounds", type=int, default=160, help="rounds per veth measurement")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the raw measurements here")
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="softswitch-baseline-"))
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), args.baseline],
        check=True,
        capture_output=True,
    )
    try:
        data = measure(args, {"baseline": base, "this tree": REPO})
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False
        )
    data["baseline"] = args.baseline
    if args.json:
        args.json.write_text(json.dumps(data, indent=1))
    print("\n".join(report(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
