#!/usr/bin/env python3
"""Loss recovery and spurious retransmissions, measured on the whole system.

Two tables from one Mininet network (P4 switch, controller, hostlib worker processes):

1. **Time under loss**: one job of --workers ranks reduces --size values at --density,
   with the P4 drop simulator losing each fraction of --losses on ingress *and* egress.
   Each worker does an untimed warm-up allreduce, then --repeat timed ones; a call's time
   is its slowest worker's. The loss levels are run in turn, --rounds times (a busy
   machine's slow minutes then hit every level alike), and the median over all timed
   calls of a level is kept. Printed with the ratio to the lossless median, the
   retransmissions as a share of the packets the workers sent, and the switch's count of
   retransmissions that found their round still waiting (`duplicates`, answered with a
   STATUS) or already complete (`served`, answered from its cache).
2. **Retransmissions without loss**: for every --slot-counts x --spurious-densities, the
   share of packets that were retransmissions, over all calls (the warm-up absorbs the
   workers' start-up skew: processes start seconds apart on a busy machine) and over the
   timed calls only, with the switch's duplicates and served (retransmissions that were
   not needed -- unless the kernel dropped a frame: a retransmission then completes its
   round and counts in neither).

    python bench/loss_recovery.py                      # softswitch, 4 workers, 1 M float32
    python bench/loss_recovery.py --skip-spurious --losses 0 0.05

Figures and the exact commands: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from demo_loader import load_demo  # noqa: E402  (the one way to import mininet/demo.py)


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--target", default="softswitch")
    ap.add_argument("--density", type=float, default=0.1, help="density of the loss runs")
    ap.add_argument("--slots", type=int, default=64, help="slots of the loss runs")
    ap.add_argument("--losses", type=float, nargs="+", default=[0.0, 0.01, 0.05, 0.1])
    ap.add_argument("--repeat", type=int, default=3, help="timed calls per job")
    ap.add_argument("--rounds", type=int, default=3, help="jobs per loss level, in turn")
    ap.add_argument("--slot-counts", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--spurious-densities", type=float, nargs="+", default=[0.0, 0.1, 1.0])
    ap.add_argument("--spurious-repeat", type=int, default=1)
    ap.add_argument("--skip-loss", action="store_true")
    ap.add_argument("--skip-spurious", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    demo = load_demo()
    base = demo.Options(
        workers=args.workers,
        size=args.size,
        dtype=args.dtype,
        target=args.target,
        slots=args.slots,
        density=args.density,
        deadline=600.0,
        quiet=True,
        repeat=args.repeat,
        warmup=True,
    )
    loss_rows, spurious_rows = [], []
    with demo.STOP.installed(), demo.DemoNetwork(args.target, args.workers) as net:
        if not args.skip_loss:
            runs: dict[float, list[dict]] = {loss: [] for loss in args.losses}
            for _ in range(args.rounds):
                for loss in args.losses:
                    r = run(net, replace(base, loss=loss))
                    runs[loss].append(r)
                    print(
                        f"loss {loss:5.2f}: {[round(t, 3) for t in r['times']]} s",
                        file=sys.stderr,
                        flush=True,
                    )
            loss_rows = [{"loss": loss, **merge(rs)} for loss, rs in runs.items()]
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
        target = net.target
    print(f"target {target}, {args.workers} workers, {args.size} {args.dtype} values")
    if loss_rows:
        lossless = next((r["seconds"] for r in loss_rows if r["loss"] == 0), None)
        print(
            f"\nloss each way; density {args.density}, {args.slots} slots, median of "
            f"{args.rounds} x {args.repeat} calls (slowest worker each)"
        )
        print(
            f"{'loss':>6} {'seconds':>9} {'x lossless':>10} {'retx %':>7} {'switch dup':>10} "
            f"{'served':>7}"
        )
        for r in loss_rows:
            ratio = f"{r['seconds'] / lossless:10.2f}" if lossless else f"{'-':>10}"
            print(
                f"{r['loss']:6.2f} {r['seconds']:9.3f} {ratio} {r['retx_all_pct']:7.2f} "
                f"{r['duplicates']:>10} {r['retransmissions_served']:>7}"
            )
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
