"""One rank of torch.distributed's gloo allreduce, run inside a Mininet host by bench/suite.py.

The peer users have today: `dist.all_reduce` on the gloo backend (a ring over TCP between the
ranks' own addresses), here over the same host links and the same P4 switch (ordinary L2
forwarding) as p4reduce, on the same input tensor. Like p4net/worker.py: an untimed
small allreduce first (connections up, start-up skew gone), then REPEAT timed allreduces,
each started together after a barrier; the host link's kernel counters are read around the
timed part, and the process's CPU (every thread: gloo's own included; user and system)
around each timed call, as p4net/worker.py reports a p4reduce rank's. Writes the last
result and a JSON report (with the link's MTU, which the suite sets per run: gloo
segments its TCP stream to it).

    python bench/gloo_rank.py RANK WORLD STORE INPUT.npy OUTPUT.npy REPORT.json [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from p4net.netcounters import delta, host_counters, host_link
from p4net.worker import usage


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("rank", type=int)
    ap.add_argument("world", type=int)
    ap.add_argument("store", help="FileStore path shared by the ranks (rendezvous only)")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("report")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    report: dict = {"ok": False}
    try:
        # gloo binds the host's link (its only interface besides lo), so its traffic crosses
        # the switch; the rendezvous is a file, so nothing else does
        link = host_link()
        os.environ["GLOO_SOCKET_IFNAME"] = link
        import datetime

        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo",
            init_method=f"file://{args.store}",
            rank=args.rank,
            world_size=args.world,
            timeout=datetime.timedelta(seconds=args.timeout),
        )
        try:
            x = torch.from_numpy(np.load(args.input))
            dist.all_reduce(torch.zeros(64, dtype=x.dtype))
            dist.barrier()
            before = host_counters(link)
            times, cpu, sys_cpu, spans = [], [], [], []
            for _ in range(args.repeat):
                y = x.clone()
                dist.barrier()
                c0, t0, began = usage(), time.perf_counter(), time.monotonic()
                dist.all_reduce(y)
                times.append(time.perf_counter() - t0)
                spans.append((began, time.monotonic()))  # the host's clock: all namespaces
                c1 = usage()
                cpu.append(c1[0] - c0[0])
                sys_cpu.append(c1[1] - c0[1])
            dist.barrier()
            report["counters"] = delta(before, host_counters(link))
            report["times"] = times
            report["cpu"], report["sys_cpu"] = cpu, sys_cpu
            report["spans"] = spans
            report["interface"] = link
            report["mtu"] = int(Path(f"/sys/class/net/{link}/mtu").read_text())
            report["torch"] = torch.__version__
        finally:
            dist.destroy_process_group()
        np.save(args.output, y.numpy())
        report["ok"] = True
    except Exception as exc:  # reported to the suite, which shows it per rank
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()
    Path(args.report).write_text(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
