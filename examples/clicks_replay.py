"""The click example's training in one process, its every sum checked; beside it the same
training with two other sums.

    .venv/bin/python examples/clicks_replay.py    # 4 ranks, 300 steps, 1 024 values per block

Why: examples/clicks_switch.py compares p4reduce with gloo in Mininet, and their losses
drift apart late in the run. This replays the same training (same model, data, Adam,
DDP's pre-division by N and its one gradient bucket) without Mininet: the gradients of
every rank are summed by real Workers through the real P4 program on the in-process
switch (p4net.harness), and every sum is checked against the exact float64 sum and
section 10's bound (docs/protocol.md). Two more trajectories start from the same
parameters on the same data: "exact" (the float64 sum rounded to float32 -- what
p4reduce would return with no quantization) and "float32" (the ranks' float32 gradients
added in rank order, one valid float32 allreduce among many). The loss differences
between the three say how much training amplifies a last-bit difference in the sums.

Every rank of a trajectory holds the same parameters (they get the same sum), so one
model per trajectory computes each rank's gradient on that rank's batch in turn.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from clicks_model import ClickData, Config, build_model  # beside this script
from clicks_switch import (
    EXAMPLE_BLOCK_VALUES,
    FINAL_STEPS,
    FINAL_TOLERANCE,
    STEP_TOLERANCE,
    final_loss,
)
from hostlib import Worker, numerics
from p4net.harness import SwitchSession

TRAJECTORIES = ("p4reduce", "exact", "float32")


@dataclass
class Trajectory:
    """One training: its model, optimizer, each rank's data, and its mean loss per step."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    data: list[ClickData]
    loss: list[float] = field(default_factory=list)


def start(cfg: Config, workers: int) -> Trajectory:
    model = build_model(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    return Trajectory(model, opt, [ClickData(cfg, r) for r in range(workers)])


def bucket_params(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """DDP's bucket order for this model: the parameters reversed, all in one bucket."""
    return list(reversed(list(model.parameters())))


def rank_gradients(t: Trajectory) -> list[np.ndarray]:
    """Each rank's flat gradient on its own batch, divided by N as DDP does; records the
    mean loss over ranks."""
    n, grads, losses = len(t.data), [], []
    for data in t.data:
        ids, clicks = data.batch()
        t.opt.zero_grad(set_to_none=False)
        loss = F.binary_cross_entropy_with_logits(t.model(ids), clicks)
        loss.backward()
        losses.append(loss.item())
        flat = torch.cat([p.grad.reshape(-1) for p in bucket_params(t.model)])
        grads.append(flat.numpy() / np.float32(n))
    t.loss.append(float(np.mean(losses)))
    return grads


def step(t: Trajectory, summed: np.ndarray) -> None:
    """Adam step with the summed gradient (what every rank's DDP hands the optimizer)."""
    offset = 0
    for p in bucket_params(t.model):
        p.grad.copy_(torch.from_numpy(summed[offset : offset + p.numel()]).view_as(p))
        offset += p.numel()
    t.opt.step()


def check_sum(xs: list[np.ndarray], got: np.ndarray, step_no: int, block: int) -> float:
    """Raises if `got` is further from the exact sum than section 10's bound plus float32's
    rounding, or is non-zero where every rank's value is zero; returns the largest
    |error| / bound. The bound is per block of `block` values (the job's): one exponent per
    block, so a wider block bounds a small value's error by a larger block maximum."""
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
    pad = -exact.size % block
    blockmax = np.max([np.abs(np.pad(x, (0, pad))).reshape(-1, block).max(1) for x in xs], axis=0)
    bound = np.repeat(numerics.sum_error_bound(blockmax.astype(np.float64), len(xs)), block)
    bound = bound[: exact.size] + np.abs(exact) * 2.0**-24 * (1 + 2.0**-20)
    err = np.abs(got.astype(np.float64) - exact)
    bad = np.flatnonzero((err > bound) | ((exact == 0) & (got != 0)))
    if bad.size:
        i = int(bad[0])
        raise AssertionError(
            f"step {step_no}: {bad.size} elements of the sum out of bound, first {i}: "
            f"{got[i]!r}, exact {exact[i]!r}, bound {bound[i]!r}"
        )
    return float((err / np.maximum(bound, np.finfo(np.float64).tiny)).max())


class SwitchSum:
    """N Workers on the in-process switch; `__call__` reduces one tensor per rank."""

    def __init__(
        self,
        session: SwitchSession,
        workers: int,
        slots: int,
        window: int | None,
        block_values: int | None = None,
    ):
        job = session.create_job(workers, slots, 7, block_values=block_values)
        self.block_values = job.block_values
        kw = {"window": window} if window else {}
        self.workers = [
            Worker(d, transport=session.transport(job.workers[r].port), deadline=120.0, **kw)
            for r, d in enumerate(session.descriptors(job))
        ]

    def __call__(self, xs: list[np.ndarray]) -> list[np.ndarray]:
        out: list[np.ndarray | None] = [None] * len(xs)
        errors: list[BaseException] = []

        def body(r: int) -> None:
            try:
                out[r] = self.workers[r].allreduce(xs[r])
            except BaseException as e:  # re-raised below
                errors.append(e)

        threads = [threading.Thread(target=body, args=(r,)) for r in range(len(xs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return [o for o in out if o is not None]

    def close(self) -> None:
        for w in self.workers:
            w.close()


def difference(a: list[float], b: list[float]) -> dict:
    """Largest |loss difference| of two trajectories, its step, the first step where it
    passes the example's final tolerance (None: never), the steps identical, and the
    difference of their final losses (examples/clicks_switch.py's final_loss): what the
    example's two tolerances compare."""
    x, y = np.array(a), np.array(b)
    d = np.abs(x - y)
    above = np.flatnonzero(d > FINAL_TOLERANCE)
    return {
        "max": float(d.max()),
        "step": int(d.argmax()),
        "first_above": int(above[0]) if above.size else None,
        "identical_steps": int((d == 0).sum()),
        "final": abs(final_loss(x) - final_loss(y)),
    }


def rank_losses(pattern: str, workers: int) -> list[float]:
    """Mean loss over ranks per step of a clicks_rank.py run (its --out files, "{rank}")."""
    ranks = [
        json.loads(Path(pattern.replace("{rank}", str(r))).read_text()) for r in range(workers)
    ]
    return [float(x) for x in np.mean([r["loss"] for r in ranks], axis=0)]


def param_difference(a: Trajectory, b: Trajectory) -> float:
    with torch.no_grad():
        return max(
            float((p - q).abs().max()) for p, q in zip(a.model.parameters(), b.model.parameters())
        )


def replay(
    cfg: Config,
    workers: int,
    slots: int,
    window: int | None,
    quiet: bool,
    block_values: int | None = None,
) -> dict:
    torch.manual_seed(cfg.seed)
    runs = {name: start(cfg, workers) for name in TRAJECTORIES}
    worst = 0.0
    with SwitchSession.inprocess() as session:
        switch_sum = SwitchSum(session, workers, slots, window, block_values)
        try:
            for s in range(cfg.steps):
                xs = rank_gradients(runs["p4reduce"])
                sums = switch_sum(xs)
                if any(not np.array_equal(o, sums[0]) for o in sums):
                    raise AssertionError(f"step {s}: the ranks' sums differ")
                worst = max(worst, check_sum(xs, sums[0], s, switch_sum.block_values))
                step(runs["p4reduce"], sums[0])
                xs = rank_gradients(runs["exact"])
                exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
                step(runs["exact"], exact.astype(np.float32))
                xs = rank_gradients(runs["float32"])
                step(runs["float32"], np.add.reduce(xs, dtype=np.float32))
                if not quiet and (s % 25 == 0 or s == cfg.steps - 1):
                    losses = " ".join(f"{k} {v.loss[-1]:.6f}" for k, v in runs.items())
                    print(f"step {s:4d} {losses}", flush=True)
        finally:
            switch_sum.close()
    pairs = [("p4reduce", "exact"), ("float32", "exact"), ("p4reduce", "float32")]
    return {
        "workers": workers,
        "steps": cfg.steps,
        "slots": slots,
        "window": window,
        "block_values": switch_sum.block_values,
        "max_error_over_bound": worst,
        # what examples/clicks_switch.py allows two trainings (its TOLERANCES)
        "step_tolerance": STEP_TOLERANCE,
        "final_tolerance": FINAL_TOLERANCE,
        "final_steps": FINAL_STEPS,
        "loss": {k: v.loss for k, v in runs.items()},
        "loss_difference": {f"{a}-{b}": difference(runs[a].loss, runs[b].loss) for a, b in pairs},
        "parameter_difference": {f"{a}-{b}": param_difference(runs[a], runs[b]) for a, b in pairs},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=Config.steps)
    ap.add_argument("--slots", type=int, default=64, help="the job's slots (softswitch's default)")
    ap.add_argument("--window", type=int, default=None, help="default: the Worker's")
    ap.add_argument(
        "--block-values",
        type=int,
        default=EXAMPLE_BLOCK_VALUES,
        help="values per block (the example's)",
    )
    ap.add_argument("--out", type=Path, help="write the summary and losses as JSON")
    ap.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="NAME=FILES",
        help='a clicks_rank.py run to compare every trajectory with: its --out files, "{rank}" '
        "in the path (e.g. gloo=examples/out/gloo-rank{rank}.json); repeatable",
    )
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)  # as the example's ranks (OMP_NUM_THREADS=1)
    res = replay(Config(steps=a.steps), a.workers, a.slots, a.window, a.quiet, a.block_values)
    worst = res["max_error_over_bound"]
    print(f"every sum within section 10's bound (largest error/bound {worst:.3f})")
    for pair, d in res["loss_difference"].items():
        print(
            f"{pair}: max |loss difference| {d['max']:.2e} at step {d['step']} "
            f"({d['identical_steps']} steps identical), final losses' difference "
            f"{d['final']:.2e}, max |parameter difference| "
            f"{res['parameter_difference'][pair]:.3g}"
        )
    for spec in a.compare:
        name, pattern = spec.split("=", 1)
        other = rank_losses(pattern, a.workers)[: a.steps]
        for k, mine in res["loss"].items():
            d = difference(mine[: len(other)], other)
            res["loss_difference"][f"{k}-{name}"] = d
            print(
                f"{k}-{name}: max |loss difference| {d['max']:.2e} at step {d['step']} "
                f"({d['identical_steps']} steps identical)"
            )
    if a.out:
        a.out.write_text(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
