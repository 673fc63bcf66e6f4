#!/usr/bin/env python3
"""Loss recovery and spurious retransmissions, measured on the whole system.

Two tables from one Mininet network (P4 switch, controller, hostlib worker processes):

1. **Time under loss**: for every --dtypes x --densities, one job of --workers ranks
   reduces --size values, with the P4 drop simulator losing each fraction of --losses on
   ingress *and* egress. Each worker does an untimed warm-up allreduce, then --repeat
   timed ones; a call's time is its slowest worker's. The configurations and loss levels
   are run in turn, --rounds times (a busy machine's slow minutes then hit every level
   alike), and the median over all timed calls of a level is kept. Printed with the
   ratio to the same configuration's lossless median and the goal it is held to, the
   retransmissions as a share of the packets the workers sent, and the switch's count of
   retransmissions that found their round still waiting (`duplicates`, answered with a
   STATUS) or already complete (`served`, answered from its cache).
2. **Retransmissions without loss**: for every --slot-counts x --spurious-densities, the
   share of packets that were retransmissions, over all calls (the warm-up absorbs the
   workers' start-up skew: processes start seconds apart on a busy machine) and over the
   timed calls only, with the switch's duplicates and served (retransmissions that were
   not needed -- unless the kernel dropped a frame: a retransmission then completes its
   round and counts in neither).

    python bench/loss_recovery.py                      # softswitch, 4 workers, 300 k values
    python bench/loss_recovery.py --target simple_switch_grpc --skip-spurious
    python bench/loss_recovery.py --skip-spurious --dtypes int32 --densities 1 --losses 0 0.1

Figures and the exact commands: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from p4net import demo

from p4reduce.target import default_slots  # noqa: E402


def run(net, opts) -> dict:
    """One job: its calls' times (slowest worker each), packets and retransmissions."""
    s = net.run_jobs(opts)
    bad = [o.error for o in s.outcomes if not (o.ok and o.matched)]
    if bad:
        raise SystemExit(f"a run failed ({opts}): {bad}")
    times = [max(o.times[i] for o in s.outcomes) for i in range(opts.repeat)]
    calls = [c for o in s.outcomes for c in o.calls]
    timed = [c for c in calls if c["kind"] == "timed"]
    counters = next(iter(s.switch_counters.values()))
    return {
        "times": times,
        "packets_sent": sum(c["packets_sent"] for c in calls),
        "retransmissions": sum(c["retransmissions"] for c in calls),
        "timed_packets_sent": sum(c["packets_sent"] for c in timed),
        "timed_retransmissions": sum(c["retransmissions"] for c in timed),
        "duplicates": counters.get("duplicates", 0),
        "retransmissions_served": counters.get("retransmissions_served", 0),
    }


def merge(rs: list[dict]) -> dict:
    """Runs of one configuration: median call time, summed counts, shares."""
    out = {"times": [t for r in rs for t in r["times"]]}
    for key in (
        "packets_sent",
        "retransmissions",
        "timed_packets_sent",
        "timed_retransmissions",
        "duplicates",
        "retransmissions_served",
    ):
        out[key] = sum(r[key] for r in rs)
    out["seconds"] = statistics.median(out["times"])
    out["retx_all_pct"] = 100.0 * out["retransmissions"] / max(1, out["packets_sent"])
    out["retx_timed_pct"] = 100.0 * out["timed_retransmissions"] / max(1, out["timed_packets_sent"])
    return out


# The recovery goal: at most this many times the lossless time, per loss level each way.
GOALS = {0.01: 1.5, 0.05: 2.0, 0.1: 3.0}


def loss_table(net, base, args) -> list[dict]:
    """Every (dtype, density, loss) of the arguments, --rounds times in turn, merged."""
    configs = [(d, x) for d in args.dtypes for x in args.densities]
    runs: dict[tuple, list[dict]] = {(d, x, loss): [] for d, x in configs for loss in args.losses}
    for _ in range(args.rounds):
        for dtype, density in configs:
            for loss in args.losses:
                r = run(net, replace(base, dtype=dtype, density=density, loss=loss))
                runs[(dtype, density, loss)].append(r)
                print(
                    f"{dtype} density {density} loss {loss:5.2f}: "
                    f"{[round(t, 3) for t in r['times']]} s",
                    file=sys.stderr,
                    flush=True,
                )
    rows = [
        {"dtype": d, "density": x, "loss": loss, **merge(rs)} for (d, x, loss), rs in runs.items()
    ]
    for r in rows:
        lossless = next(
            (
                o["seconds"]
                for o in rows
                if (o["dtype"], o["density"], o["loss"]) == (r["dtype"], r["density"], 0)
            ),
            None,
        )
        r["ratio"] = r["seconds"] / lossless if lossless else None
    return rows


def print_loss_table(rows: list[dict], args, slots: int) -> None:
    print(
        f"\nloss each way; {slots} slots, median of {args.rounds} x {args.repeat} calls "
        f"(slowest worker each)"
    )
    print(
        f"{'dtype':>8} {'density':>8} {'loss':>6} {'seconds':>9} {'x lossless':>10} "
        f"{'goal':>6} {'retx %':>7} {'switch dup':>10} {'served':>7}"
    )
    for r in rows:
        ratio = f"{r['ratio']:10.2f}" if r["ratio"] is not None else f"{'-':>10}"
        goal = GOALS.get(r["loss"])
        goal_s = f"<= {goal:g}" if goal else ""
        print(
            f"{r['dtype']:>8} {r['density']:8} {r['loss']:6.2f} {r['seconds']:9.3f} {ratio} "
            f"{goal_s:>6} {r['retx_all_pct']:7.2f} {r['duplicates']:>10} "
            f"{r['retransmissions_served']:>7}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--size", type=int, default=300_000)
    ap.add_argument("--dtypes", nargs="+", default=["float32", "int32"])
    ap.add_argument("--target", default="softswitch")
    ap.add_argument(
        "--densities", type=float, nargs="+", default=[0.1, 1.0], help="of the loss runs"
    )
    ap.add_argument(
        "--slots", type=int, default=None, help="slots of the loss runs (default: the target's)"
    )
    ap.add_argument("--losses", type=float, nargs="+", default=[0.0, 0.01, 0.05, 0.1])
    ap.add_argument("--repeat", type=int, default=3, help="timed calls per job")
    ap.add_argument("--rounds", type=int, default=1, help="jobs per loss level, in turn")
    ap.add_argument("--slot-counts", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--spurious-densities", type=float, nargs="+", default=[0.0, 0.1, 1.0])
    ap.add_argument("--spurious-repeat", type=int, default=1)
    ap.add_argument("--skip-loss", action="store_true")
    ap.add_argument("--skip-spurious", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    base = demo.Options(
        workers=args.workers,
        size=args.size,
        dtype=args.dtypes[0],
        target=args.target,
        slots=args.slots,
        deadline=600.0,
        quiet=True,
        repeat=args.repeat,
        warmup=True,
    )
    loss_rows, spurious_rows = [], []
    with demo.STOP.installed(), demo.DemoNetwork(args.target, args.workers) as net:
        if not args.skip_loss:
            loss_rows = loss_table(net, base, args)
        if not args.skip_spurious:
            for slots in args.slot_counts:
                for density in args.spurious_densities:
                    r = merge(
                        [
                            run(
                                net,
                                replace(
                                    base,
                                    slots=slots,
                                    density=density,
                                    loss=0.0,
                                    repeat=args.spurious_repeat,
                                ),
                            )
                        ]
                    )
                    spurious_rows.append({"slots": slots, "density": density, **r})
                    print(
                        f"slots {slots} density {density}: {r['seconds']:.3f} s  retx "
                        f"{r['retx_all_pct']:.2f} %",
                        file=sys.stderr,
                        flush=True,
                    )
        target = net.kind
    print(f"target {target}, {args.workers} workers, {args.size} values")
    if loss_rows:
        print_loss_table(loss_rows, args, args.slots or default_slots(target))
    if spurious_rows:
        print(
            f"\nno loss: retransmissions as % of packets sent (all calls incl. warm-up / "
            f"timed calls only), {args.spurious_repeat} timed call(s)"
        )
        print(
            f"{'slots':>6} {'density':>8} {'seconds':>9} {'retx % all':>10} "
            f"{'retx % timed':>12} {'packets':>9} {'switch dup':>10} {'served':>7}"
        )
        for r in spurious_rows:
            print(
                f"{r['slots']:6} {r['density']:8} {r['seconds']:9.3f} "
                f"{r['retx_all_pct']:10.2f} {r['retx_timed_pct']:12.2f} "
                f"{r['packets_sent']:9} {r['duplicates']:>10} "
                f"{r['retransmissions_served']:>7}"
            )
    if args.json:
        args.json.write_text(
            json.dumps({"target": target, "loss": loss_rows, "spurious": spurious_rows}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
