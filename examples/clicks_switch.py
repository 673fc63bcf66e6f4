#!/usr/bin/env python3
"""Train a click-through-rate model through the P4 switch, then through gloo, and compare.

    sudo .venv/bin/python examples/clicks_switch.py          # 4 ranks, 300 steps, softswitch

Starts the Mininet topology (p4net.torch_ranks: the P4 switch, the controller, one host
per rank, every rank's process in its host), runs examples/clicks_rank.py on every rank
with `init_process_group("p4reduce")` and with `init_process_group("gloo")`, same seed,
same data, both through the same host links and P4 switch (gloo's TCP is forwarded as
ordinary IPv4). gloo runs once per --gloo-mtus link MTU, and at the MTU p4reduce's links
had when its job's frames (--block-values) needed more, and its fastest run (median time
per step) is the one compared: its best setting on the links p4reduce had. Reports per backend:
loss, time per step, bytes sent per step per worker, and the gradient block density per
step; checks that the parameters are identical on every rank and that the two trainings
agree: their final losses within --final-tolerance, every step's within --step-tolerance
(TOLERANCES says why two). Writes results.json and clicks.png (loss curves, their
difference, density) into --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from clicks_model import Config  # beside this script
from hostlib.slots import slots_for_tensor
from p4reduce.job import ROUND_MODES
from p4reduce.target import default_slots
from p4reduce.wire import BLOCK_VALUES
from softswitch.runner import resolve_kind

HERE = Path(__file__).resolve().parent

BACKENDS = ("p4reduce", "gloo")
WARMUP = 5  # steps left out of the time medians (DDP's first-iteration work)
FINAL_STEPS = 20  # a run's final loss: the mean of its last steps' losses (final_loss)

# TOLERANCES. The check compares two trainings, not two sums (the sums are checked one by
# one by examples/clicks_replay.py and the tests): two correct allreduces -- exact sums
# rounded to float32, and float32 sums in rank order -- part late in a 300-step run,
# because training amplifies a last-bit difference, by more at a step than their final
# losses differ (docs/pytorch.md, "The late drift": the replay's measured differences,
# which tests/test_bench.py holds these two to). So a step may differ by up to
# STEP_TOLERANCE (a wrong sum moves a step's loss further, at once) and the final losses
# by up to FINAL_TOLERANCE.
STEP_TOLERANCE = 1e-2
FINAL_TOLERANCE = 1e-3
# The p4reduce job's values per block. A block is non-zero when any of its values is, so
# wider blocks carry more of the gradient in fewer packets; both software switches pay per
# packet. The example's step through softswitch is shortest around 1 024 values per block
# (docs/benchmarks.md, "The click example at each block size"), where the job's frames
# need jumbo links (gloo runs on them too), and its training follows the exact sums' as
# closely as at 64 (TOLERANCES).
EXAMPLE_BLOCK_VALUES = 1024


def final_loss(losses) -> float:
    """A run's final loss: the mean of its last FINAL_STEPS steps' (all of a shorter run's),
    what the final tolerance compares; the replay takes its trainings' the same way."""
    x = np.asarray(losses, dtype=np.float64)
    return float(x[-FINAL_STEPS:].mean())


@dataclass
class Options:
    workers: int = 4
    target: str = "softswitch"
    slots: int | None = None  # None: what its call uses (call_slots)
    out: Path = Path("examples/out")
    step_tolerance: float = STEP_TOLERANCE  # max |mean loss(p4reduce) - mean loss(gloo)| a step
    final_tolerance: float = FINAL_TOLERANCE  # max |final loss(p4reduce) - final loss(gloo)|
    plot: bool = True
    quiet: bool = False
    timeout: float = 3600.0  # per run (all ranks of one backend)
    pg_timeout: float = 1800.0  # a collective's wait before it fails (gloo, Worker)
    mtu: int = 1500  # the links' MTU for p4reduce (Ethernet's default: its frames fit)
    # the link MTUs gloo runs at, and p4reduce's when its job's frames raised the links
    # above them (a fair comparison: gloo has every link p4reduce had)
    gloo_mtus: tuple[int, ...] = (1500, 9000)
    # values per block of the p4reduce job (EXAMPLE_BLOCK_VALUES; None: the target's
    # default); the links are raised to carry its frames when `mtu` cannot
    block_values: int | None = EXAMPLE_BLOCK_VALUES
    # the p4reduce job's round mode, named (never the target's default): silent, a rank
    # sends only for its own non-zero blocks plus an announce and a closing packet per slot
    round_mode: str = "silent"
    # the most slots a rank keeps outstanding (None: every slot of the job). The job is
    # alone on its switch, so the window that keeps a job's share of a first-in first-out
    # switch beside others (FAIR_SLOTS) only costs it: at 64 values per block a call with
    # 16 slots in flight waits on the round trip, not on the switch
    window: int | None = None


def call_slots(cfg: Config, block_values: int | None, target: str) -> int:
    """The p4reduce job's slots when none are given: those hostlib.slots.slots_for_tensor
    gives the example's one call per step (DDP reduces the whole model in one bucket), as
    the headline's jobs have (bench/suite.py job_slots; docs/benchmarks.md, "The click
    example at each block size")."""
    from clicks_model import build_model

    values = sum(p.numel() for p in build_model(cfg).parameters())
    kind_default = default_slots(resolve_kind(target))
    return slots_for_tensor(values, block_values or BLOCK_VALUES, kind_default)


def run(opts: Options, cfg: Config) -> dict:
    """Both trainings on one network; returns the summary (also written to results.json)."""
    from p4net import torch_ranks

    opts.out.mkdir(parents=True, exist_ok=True)
    params_dir = opts.out / "params"
    params_dir.mkdir(exist_ok=True)
    cfg_args = [
        a
        for f in fields(Config)
        for a in (f"--{f.name.replace('_', '-')}", str(getattr(cfg, f.name)))
    ]
    launches = {}
    slots = (
        opts.slots if opts.slots is not None else call_slots(cfg, opts.block_values, opts.target)
    )
    window = opts.window if opts.window is not None else slots
    with torch_ranks.TorchNetwork(opts.workers, opts.target, slots) as net:

        def launch(backend: str, name: str, mtu: int) -> None:
            net.set_mtu(mtu)
            if not opts.quiet:
                print(
                    f"== {backend}: {opts.workers} ranks, {cfg.steps} steps, switch {net.kind}, "
                    f"links at MTU {mtu}",
                    flush=True,
                )
            res = net.run(
                [
                    sys.executable,
                    str(HERE / "clicks_rank.py"),
                    "--backend",
                    backend,
                    "--out",
                    str(opts.out / f"{name}-rank{{rank}}.json"),
                    "--save-params",
                    str(params_dir / f"{name}-rank{{rank}}.pt"),
                    "--pg-timeout",
                    str(opts.pg_timeout),
                    *cfg_args,
                ],
                opts.workers,
                timeout=opts.timeout,
                stream_rank0=not opts.quiet,
                block_values=opts.block_values if backend == "p4reduce" else None,
                round_mode=opts.round_mode if backend == "p4reduce" else None,
                env={"P4REDUCE_WINDOW": str(window)} if backend == "p4reduce" else None,
            )
            if not res.ok:
                raise RuntimeError(f"{name} run failed:\n{res.failures()}")
            launches[name] = res

        launch("p4reduce", "p4reduce", opts.mtu)
        p4reduce_mtu = net.mtu  # raised if the job's frames needed it
        # gloo at each of its MTUs and at p4reduce's: it has every link p4reduce had
        gloo_mtus = sorted(set(opts.gloo_mtus) | {p4reduce_mtu})
        for m in gloo_mtus:
            launch("gloo", f"gloo-mtu{m}", m)
    plan = [("p4reduce", "p4reduce")] + [("gloo", f"gloo-mtu{m}") for m in gloo_mtus]
    by_name = {
        name: [
            json.loads((opts.out / f"{name}-rank{r}.json").read_text()) for r in range(opts.workers)
        ]
        for _, name in plan
    }
    gloo_ms = {m: median_step_ms(by_name[f"gloo-mtu{m}"]) for m in gloo_mtus}
    best = min(gloo_ms, key=gloo_ms.__getitem__)
    for suffix in ("json", "pt"):
        for r in range(opts.workers):
            where = params_dir if suffix == "pt" else opts.out
            (where / f"gloo-mtu{best}-rank{r}.{suffix}").replace(where / f"gloo-rank{r}.{suffix}")
    runs = {"p4reduce": by_name["p4reduce"], "gloo": by_name[f"gloo-mtu{best}"]}
    launches["gloo"] = launches[f"gloo-mtu{best}"]
    summary = summarize(runs, launches, opts, cfg, net.slots)
    summary["mtu"] = {"p4reduce": p4reduce_mtu, "gloo": best}
    summary["gloo_median_step_ms_by_mtu"] = {str(m): ms for m, ms in gloo_ms.items()}
    shutil.rmtree(params_dir)
    (opts.out / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    if opts.plot:
        summary["plot"] = plot(summary, opts.out / "clicks.png")
    return summary


def median_step_ms(ranks: list[dict]) -> float:
    """The run's median time per step (each step at its slowest rank, warm-up left out)."""
    step_s = np.max([r["step_seconds"] for r in ranks], axis=0)
    return 1000 * float(np.median(step_s[WARMUP:] if step_s.size > WARMUP else step_s))


def _param_difference(opts: Options) -> float:
    import torch

    a = torch.load(opts.out / "params" / "p4reduce-rank0.pt")
    b = torch.load(opts.out / "params" / "gloo-rank0.pt")
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def _deltas(records: list[dict], key: str, first: dict) -> np.ndarray:
    values = [first.get(key, 0)] + [s[key] for s in records]
    return np.diff(np.asarray(values, dtype=np.float64))


def packet_bound(ranks: list[dict]) -> dict:
    """Per step per rank, means over steps and ranks: the packets the Worker sent, its
    non-zero blocks, and the control packets its silent calls sent (an announce per slot
    a call uses, and a closing packet per such slot whose last round some rank sat out:
    the Worker's count, control_packets)."""
    per_rank = []
    for r in ranks:
        calls = _deltas(r["switch"], "allreduces", r["switch_before"])
        per_rank.append(
            (
                _deltas(r["switch"], "packets_sent", r["switch_before"]).mean(),
                _deltas(r["switch"], "nonzero_blocks", r["switch_before"]).mean(),
                _deltas(r["switch"], "control_packets", r["switch_before"]).mean(),
                calls.mean(),
            )
        )
    sent, nonzero, control, calls = np.mean(per_rank, axis=0)
    return {
        "packets_per_step_per_rank": float(sent),
        "nonzero_blocks_per_step_per_rank": float(nonzero),
        "control_packets_per_step_per_rank": float(control),
        "allreduces_per_step": float(calls),
        "packets_over_bound": float(sent / (nonzero + control)) if nonzero + control else 0.0,
    }


def summarize(runs: dict, launches: dict, opts: Options, cfg: Config, slots: int) -> dict:
    """Both backends' figures per step; `slots`: the p4reduce job's."""
    steps = cfg.steps
    out: dict = {
        "config": cfg.as_dict(),
        "workers": opts.workers,
        "target": opts.target,
        "parameters": runs["gloo"][0]["parameters"],
        "dense_gradient_bytes": 4 * runs["gloo"][0]["parameters"],
        "step_tolerance": opts.step_tolerance,
        "final_tolerance": opts.final_tolerance,
        "block_values": opts.block_values or BLOCK_VALUES,
        "round_mode": opts.round_mode,
        "slots": slots,
        "window": opts.window if opts.window is not None else slots,
        "backends": {},
    }
    for backend, ranks in runs.items():
        loss = np.mean([r["loss"] for r in ranks], axis=0)
        # the slowest rank's time is the step's time
        step_s = np.max([r["step_seconds"] for r in ranks], axis=0)
        b: dict = {
            "loss": loss.tolist(),
            "final_loss": final_loss(loss),
            "step_seconds": step_s.tolist(),
            "median_step_ms": median_step_ms(ranks),
            "mean_step_ms": 1000 * float(step_s.mean()),
            "tcp_bytes_per_step_per_worker": float(
                np.mean([r["tcp_bytes_sent"] for r in ranks]) / steps
            ),
            "params_identical_on_every_rank": len({r["params_sha256"] for r in ranks}) == 1,
            # the rank's own counters around its steps (clicks_rank.link_counters)
            "link_tx_bytes_per_step_per_worker": float(
                np.mean([r["link_tx"]["tx_bytes"] for r in ranks]) / steps
            ),
            "link_tx_packets_per_step_per_worker": float(
                np.mean([r["link_tx"]["tx_packets"] for r in ranks]) / steps
            ),
            # the switch end of the rank's link over the whole run: the process group's
            # set-up and DDP's broadcast of the first parameters too
            "link_run_tx_packets_per_worker": float(
                np.mean([r.link["tx_packets"] for r in launches[backend].ranks])
            ),
        }
        if ranks[0]["switch"]:
            own = np.mean(
                [
                    _deltas(r["switch"], "nonzero_blocks", r["switch_before"])
                    / _deltas(r["switch"], "blocks", r["switch_before"])
                    for r in ranks
                ],
                axis=0,
            )
            r0 = ranks[0]
            rounds = _deltas(r0["switch"], "rounds", r0["switch_before"])
            blocks = _deltas(r0["switch"], "blocks", r0["switch_before"])
            sent = np.mean(
                [_deltas(r["switch"], "bytes_sent", r["switch_before"]) for r in ranks], axis=0
            )
            packets = np.mean(
                [_deltas(r["switch"], "packets_sent", r["switch_before"]) for r in ranks], axis=0
            )
            b.update(packet_bound(ranks))
            b.update(
                {
                    "density_own": own.tolist(),
                    "rounds_per_block": (rounds / blocks).tolist(),
                    "mean_density_own": float(own.mean()),
                    "mean_rounds_per_block": float((rounds / blocks).mean()),
                    "switch_bytes_per_step_per_worker": float(sent.mean()),
                    "switch_packets_per_step_per_worker": float(packets.mean()),
                    "switch_seconds_per_step": float(
                        np.mean(
                            [
                                _deltas(r["switch"], "seconds", r["switch_before"]).mean()
                                for r in ranks
                            ]
                        )
                    ),
                    "retransmissions": int(
                        sum(
                            r["switch"][-1]["retransmissions"]
                            - r["switch_before"].get("retransmissions", 0)
                            for r in ranks
                        )
                    ),
                    "gloo_allreduces": int(sum(r["switch"][-1]["gloo_allreduces"] for r in ranks)),
                }
            )
        out["backends"][backend] = b
    p, g = out["backends"]["p4reduce"], out["backends"]["gloo"]
    diff = np.abs(np.asarray(p["loss"]) - np.asarray(g["loss"]))
    out["max_loss_difference"] = float(diff.max())
    out["final_loss_difference"] = abs(p["final_loss"] - g["final_loss"])
    out["loss_difference"] = diff.tolist()
    out["max_param_difference_rank0"] = _param_difference(opts)
    out["ok"] = bool(
        p["params_identical_on_every_rank"]
        and g["params_identical_on_every_rank"]
        and diff.max() <= opts.step_tolerance
        and out["final_loss_difference"] <= opts.final_tolerance
    )
    return out


def plot(s: dict, path: Path) -> str:
    """The loss curves, their difference and the density over steps, in one PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib missing (make install-examples): no plot"
    p, g = s["backends"]["p4reduce"], s["backends"]["gloo"]
    x = np.arange(len(p["loss"]))
    fig, ax = plt.subplots(
        3, 1, figsize=(9, 10), sharex=True, gridspec_kw={"height_ratios": [3, 1.4, 2]}
    )

    def smooth(y: list[float], k: int = 15) -> tuple[np.ndarray, np.ndarray]:
        """Centred moving average (and the steps it belongs to)."""
        y = np.asarray(y)
        k = max(1, min(k, len(y)))
        return x[(k - 1) // 2 : (k - 1) // 2 + len(y) - k + 1], np.convolve(
            y, np.ones(k) / k, mode="valid"
        )

    for run, name, color, style in (
        (g, "gloo", "tab:blue", "-"),
        (p, "p4reduce (switch)", "tab:red", "--"),
    ):
        ax[0].plot(x, run["loss"], color=color, alpha=0.3, lw=0.7, ls=style)
        ax[0].plot(
            *smooth(run["loss"]),
            color=color,
            lw=2,
            ls=style,
            label=f"{name}: final {run['final_loss']:.4f}, "
            f"{run['median_step_ms']:.0f} ms/step (median)",
        )
    ax[0].set_ylabel("training loss (BCE, mean of ranks)")
    ax[0].legend(loc="upper right", title="thin: per step; thick: 15-step mean")
    ax[0].set_title(
        f"Click model, {s['parameters'] / 1e6:.2f} M parameters, "
        f"{s['workers']} ranks in Mininet ({s['target']}): gloo vs p4reduce"
    )
    diff = np.asarray(s["loss_difference"])
    nz = diff > 0
    ax[1].semilogy(
        x[nz],
        diff[nz],
        ".",
        color="tab:purple",
        ms=4,
        label=f"p4reduce - gloo ({int((~nz).sum())} of {len(diff)} steps identical, not shown)",
    )
    ax[1].axhline(
        s["step_tolerance"],
        color="gray",
        ls="--",
        lw=1,
        label=f"a step's tolerance {s['step_tolerance']:g}",
    )
    ax[1].set_ylim(1e-10, 1)
    ax[1].set_ylabel("|loss difference|")
    ax[1].legend(loc="upper left", fontsize=8, ncols=2)
    ax[2].plot(
        x,
        100 * np.asarray(p["density_own"]),
        color="tab:green",
        lw=1.2,
        label="non-zero gradient blocks of a rank (sent)",
    )
    ax[2].plot(
        x,
        100 * np.asarray(p["rounds_per_block"]),
        color="tab:orange",
        lw=1.2,
        label="switch rounds / blocks (union of ranks + announces)",
    )
    ax[2].set_ylabel(f"% of {s.get('block_values', BLOCK_VALUES)}-value blocks")
    ax[2].set_xlabel("step")
    top = 100 * max(max(p["density_own"]), max(p["rounds_per_block"]))
    ax[2].set_ylim(0, 1.6 * top)
    ax[2].legend(loc="upper right", fontsize=9)
    dense = s["dense_gradient_bytes"] / 1e6
    ax[2].set_title(
        f"bytes sent per step per worker: p4reduce "
        f"{p['switch_bytes_per_step_per_worker'] / 1e6:.2f} MB, gloo "
        f"{g['tcp_bytes_per_step_per_worker'] / 1e6:.2f} MB "
        f"(dense gradient {dense:.2f} MB)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def print_summary(s: dict) -> None:
    p, g = s["backends"]["p4reduce"], s["backends"]["gloo"]
    print(
        f"\nclick model: {s['parameters']} parameters (dense gradient "
        f"{s['dense_gradient_bytes'] / 1e6:.2f} MB), {s['workers']} ranks, "
        f"{s['config']['steps']} steps, switch {s['target']}"
    )
    print(
        f"{'backend':>9} {'final loss':>10} {'ms/step':>8} {'(mean)':>7} "
        f"{'MB/step/worker':>15} {'identical ranks':>15}"
    )
    for name, b in (("gloo", g), ("p4reduce", p)):
        mb = (
            p["switch_bytes_per_step_per_worker"]
            if name == "p4reduce"
            else g["tcp_bytes_per_step_per_worker"]
        ) / 1e6
        print(
            f"{name:>9} {b['final_loss']:10.4f} {b['median_step_ms']:8.1f} "
            f"{b['mean_step_ms']:7.1f} {mb:15.3f} "
            f"{'yes' if b['params_identical_on_every_rank'] else 'NO':>15}"
        )
    print(
        f"p4reduce: {p['switch_packets_per_step_per_worker']:.0f} packets/step/worker, "
        f"own non-zero blocks {100 * p['mean_density_own']:.2f} %, switch rounds/blocks "
        f"{100 * p['mean_rounds_per_block']:.2f} %, {p['switch_seconds_per_step'] * 1000:.1f}"
        f" ms/step in the Worker, {p['retransmissions']} retransmissions, "
        f"{p['gloo_allreduces']} allreduces sent to gloo; TCP (gloo side) "
        f"{p['tcp_bytes_per_step_per_worker']:.0f} B/step"
    )
    by_mtu = ", ".join(f"MTU {m}: {ms:.1f}" for m, ms in s["gloo_median_step_ms_by_mtu"].items())
    print(
        f"both through the switch {s['target']}: p4reduce {p['median_step_ms']:.1f} ms/step "
        f"(MTU {s['mtu']['p4reduce']}), gloo {g['median_step_ms']:.1f} ms/step (its faster "
        f"MTU, {s['mtu']['gloo']}; {by_mtu}); p4reduce ÷ gloo "
        f"{p['median_step_ms'] / g['median_step_ms']:.2f}"
    )
    print(
        f"p4reduce ({s.get('round_mode', '?')} rounds): {p['packets_per_step_per_rank']:.1f} "
        f"packets per step per rank against {p['nonzero_blocks_per_step_per_rank']:.1f} "
        f"non-zero blocks + {p['control_packets_per_step_per_rank']:.1f} control "
        f"({p['packets_over_bound']:.3f} ×); link packets per step per rank: p4reduce "
        f"{p['link_tx_packets_per_step_per_worker']:.1f}, gloo "
        f"{g['link_tx_packets_per_step_per_worker']:.1f}"
    )
    print(
        f"max |loss difference| per step {s['max_loss_difference']:.2e} (tolerance "
        f"{s['step_tolerance']:g}), final losses' difference {s['final_loss_difference']:.2e} "
        f"(tolerance {s['final_tolerance']:g}), max |parameter difference| on rank 0 "
        f"{s['max_param_difference_rank0']:.2e}"
    )
    if "plot" in s:
        print(f"plot: {s['plot']}")
    print("OK" if s["ok"] else "FAILED: ranks differ or the losses are not within tolerance")


def parse_args(argv: list[str] | None = None) -> tuple[Options, Config]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = Options()
    ap.add_argument("--workers", type=int, default=d.workers)
    ap.add_argument("--target", default=d.target, help="softswitch, simple_switch_grpc, auto")
    ap.add_argument(
        "--slots",
        type=int,
        default=d.slots,
        help="the p4reduce job's slots (default: as many as its call uses, slots_for_call)",
    )
    ap.add_argument(
        "--window",
        type=int,
        default=d.window,
        help="the most slots a rank keeps outstanding (default: every slot of the job; "
        "P4REDUCE_WINDOW)",
    )
    ap.add_argument("--out", type=Path, default=d.out)
    ap.add_argument(
        "--step-tolerance",
        type=float,
        default=d.step_tolerance,
        help="the largest loss difference at a step (TOLERANCES)",
    )
    ap.add_argument(
        "--final-tolerance",
        type=float,
        default=d.final_tolerance,
        help=f"the largest difference of the final losses (the last {FINAL_STEPS} steps' mean)",
    )
    ap.add_argument(
        "--gloo-mtus",
        type=lambda v: tuple(int(m) for m in v.split(",")),
        default=d.gloo_mtus,
        help="comma-separated link MTUs gloo runs at (the faster is compared)",
    )
    ap.add_argument(
        "--block-values",
        type=int,
        default=d.block_values,
        help=f"values per block of the p4reduce job (default: {EXAMPLE_BLOCK_VALUES})",
    )
    ap.add_argument(
        "--round-mode",
        choices=ROUND_MODES,
        default=d.round_mode,
        help="the p4reduce job's round mode",
    )
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    for f in fields(Config):
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    a = ap.parse_args(argv)
    opts = Options(
        workers=a.workers,
        target=a.target,
        slots=a.slots,
        out=a.out,
        step_tolerance=a.step_tolerance,
        final_tolerance=a.final_tolerance,
        plot=not a.no_plot,
        quiet=a.quiet,
        gloo_mtus=a.gloo_mtus,
        block_values=a.block_values,
        round_mode=a.round_mode,
        window=a.window,
    )
    return opts, Config(**{f.name: getattr(a, f.name) for f in fields(Config)})


def main(argv: list[str] | None = None) -> int:
    opts, cfg = parse_args(argv)
    try:
        summary = run(opts, cfg)
    except KeyboardInterrupt:
        print("\ninterrupted: everything started was stopped", file=sys.stderr)
        return 130
    print_summary(summary)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
