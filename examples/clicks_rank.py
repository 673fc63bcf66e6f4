#!/usr/bin/env python3
"""One rank of the click-model training: plain DDP, the backend chosen by one word.

    python examples/clicks_rank.py --backend p4reduce --out run/p4reduce-rank{rank}.json

Run under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun, or
mininet/torch_ranks.py, which also tells p4reduce ranks where their job and host are).
Nothing here is p4reduce-specific except reading its counters: the training code is the
same for "gloo" and "p4reduce". Writes per-step loss, time, bytes and gradient block
density to --out ("{rank}" is replaced), and a SHA-256 of the final parameters.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from clicks_model import ClickData, Config, build_model  # beside this script


def tcp_bytes_sent(pid: int) -> int:
    """Bytes this process sent over TCP (the kernel's tcpi_bytes_sent, summed over its
    sockets, via `ss`): what gloo and the store put on the wire. -1 if ss is missing."""
    try:
        out = subprocess.run(["ss", "-tinpHO"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return -1
    total = 0
    for line in out.splitlines():
        if f"pid={pid}," in line:
            for word in line.split():
                if word.startswith("bytes_sent:"):
                    total += int(word.split(":", 1)[1])
    return total


def link_counters() -> dict[str, int]:
    """Frames and bytes this host's network interfaces sent (loopback aside), from the
    kernel's counters in /proc/self/net/dev (this process's network namespace, unlike
    /sys/class/net): read around the training steps, they count the steps' traffic only,
    not the process group's set-up or DDP's first broadcast of the parameters. In a
    Mininet host that is the rank's one link; under torchrun, the host's."""
    out = {"tx_packets": 0, "tx_bytes": 0}
    for line in Path("/proc/self/net/dev").read_text().splitlines()[2:]:
        name, _, data = line.partition(":")
        if name.strip() != "lo":
            v = data.split()
            out["tx_bytes"] += int(v[8])
            out["tx_packets"] += int(v[9])
    return out


def switch_counters() -> dict:
    """p4reduce's counters of this rank (empty for other backends)."""
    if dist.get_backend() != "p4reduce":
        return {}
    from hostlib import torch_backend

    s = torch_backend.stats()
    w = s["worker"]
    return {
        **s["switch"],
        "bytes_sent": w["bytes_sent"],
        "packets_sent": w["packets_sent"],
        "rounds": w["rounds"],
        "retransmissions": w["retransmissions"],
        # what the retransmissions were: silence probes, queries of silent slots,
        # resends the switch answered with a STATUS (the round only waited), rewinds
        **{k: w[k] for k in ("probes", "queries", "statuses", "rewind_requests", "rewinds")},
        # each call's ANNOUNCEs and closing packets, first sends (EngineStats)
        "control_packets": w["control_packets"],
        "gloo_allreduces": sum(s["gloo_allreduces"].values()),
    }


def params_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Config]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="p4reduce")
    ap.add_argument("--out", required=True, help='JSON per rank; "{rank}" is replaced')
    ap.add_argument("--save-params", help='torch.save the final parameters here ("{rank}")')
    ap.add_argument(
        "--pg-timeout",
        type=float,
        default=1800.0,
        help="seconds a collective may wait (the process group's timeout)",
    )
    for f in fields(Config):
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    args = ap.parse_args(argv)
    return args, Config(**{f.name: getattr(args, f.name) for f in fields(Config)})


def main(argv: list[str] | None = None) -> int:
    args, cfg = parse_args(argv)
    dist.init_process_group(
        args.backend,  # env:// rendezvous
        timeout=datetime.timedelta(seconds=args.pg_timeout),
    )
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_model(cfg)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=cfg.lr)
    data = ClickData(cfg, rank)
    rec: dict = {
        "rank": rank,
        "world": world,
        "backend": dist.get_backend(),
        "config": cfg.as_dict(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "loss": [],
        "step_seconds": [],
        "switch": [],
    }
    dist.barrier()  # start the clock together
    tcp0, sw0, link0 = tcp_bytes_sent(os.getpid()), switch_counters(), link_counters()
    start = time.perf_counter()
    for step in range(cfg.steps):
        t0 = time.perf_counter()
        ids, clicks = data.batch()
        opt.zero_grad(set_to_none=False)
        loss = F.binary_cross_entropy_with_logits(ddp(ids), clicks)
        loss.backward()  # DDP reduces the gradients here
        opt.step()
        rec["step_seconds"].append(time.perf_counter() - t0)
        rec["loss"].append(loss.item())
        if sw0:
            rec["switch"].append(switch_counters())
        if rank == 0 and (step % 25 == 0 or step == cfg.steps - 1):
            print(
                f"{args.backend} step {step:4d} loss {loss.item():.4f} "
                f"{1000 * rec['step_seconds'][-1]:7.1f} ms",
                flush=True,
            )
    rec["seconds"] = time.perf_counter() - start
    rec["link_tx"] = {k: v - link0[k] for k, v in link_counters().items()}
    rec["tcp_bytes_sent"] = tcp_bytes_sent(os.getpid()) - tcp0 if tcp0 >= 0 else -1
    rec["switch_before"] = sw0
    rec["params_sha256"] = params_digest(model)
    if args.save_params:
        torch.save(
            [p.detach().clone() for p in model.parameters()],
            args.save_params.replace("{rank}", str(rank)),
        )
    dist.destroy_process_group()
    Path(args.out.replace("{rank}", str(rank))).write_text(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
