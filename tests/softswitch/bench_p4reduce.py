"""In-process packets/s of softswitch on the real p4reduce program (p4src/build/p4reduce.json).

    .venv/bin/python tests/softswitch/bench_p4reduce.py [--json path] [-n packets] [--workers N]

Tables are written directly through the Switch API (no P4Runtime): a switch identity, one job
of N workers admitted, result destinations and the job's multicast group. Each worker sends
DATA packets for successive rounds of one slot, so every packet does the full aggregation
path (64 register read-add-writes); every Nth packet completes a round and is multicast.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hostlib import protocol as p  # noqa: E402
from softswitch.switch import Switch  # noqa: E402

SWITCH_MAC, SWITCH_IP = "02:00:00:00:01:00", "10.0.0.254"
ING, EG = "P4ReduceIngress", "P4ReduceEgress"


def ip_int(ip: str) -> int:
    return int.from_bytes(p.ip_bytes(ip), "big")


def mac_int(mac: str) -> int:
    return int.from_bytes(p.mac_bytes(mac), "big")


def setup(sw: Switch, workers: int, job: int = 7, mcast: int = 100) -> list[tuple[int, p.Endpoints]]:
    sw.table_set_default(f"{ING}.identity.switch_identity", f"{ING}.identity.set_identity",
                         [mac_int(SWITCH_MAC), ip_int(SWITCH_IP)])
    eps = []
    for rank in range(workers):
        port = rank + 1
        mac, ip = f"02:00:00:00:00:{port:02x}", f"10.0.0.{port}"
        sw.table_add(f"{ING}.admission.admission", [port, mac_int(mac), ip_int(ip), job, rank],
                     f"{ING}.admission.admit", [0, 0, 4, workers, mcast, 1])
        sw.table_add(f"{EG}.result_destination.result_destination", [job, rank],
                     f"{EG}.result_destination.set_destination", [mac_int(mac), ip_int(ip), p.UDP_PORT_BASE + 1])
        eps.append((port, p.Endpoints(mac, SWITCH_MAC, ip, SWITCH_IP, p.UDP_PORT_BASE + 1, p.UDP_PORT_BASE)))
    sw.mc_group_set(mcast, [(port, rank) for rank, (port, _) in enumerate(eps)])
    return eps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=str(ROOT / "p4src/build/p4reduce.json"))
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    sw = Switch()
    sw.load_pipeline(Path(args.json).read_bytes())
    eps = setup(sw, args.workers)
    rng = np.random.default_rng(0)
    vals = rng.integers(-1000, 1000, size=p.LANES)
    rounds = args.n // args.workers + 1
    frames = []
    for r in range(rounds):
        for rank, (port, ep) in enumerate(eps):
            h = p.Header.make(p.MsgType.DATA, job=7, slot=0, rank=rank, slot_version=r % 2,
                              block=r, next_block=r + 1, next_exponent=140)
            frames.append((port, p.build_frame(ep, h, vals)))
    frames = frames[:args.n]
    outs = 0
    t = time.perf_counter()
    for port, fr in frames:
        outs += len(sw.process(port, fr))
    dt = time.perf_counter() - t
    st = sw.stats()
    print(f"{len(frames)} packets in {dt:.2f}s: {len(frames) / dt:,.0f} packets/s, "
          f"{outs} frames out; stats {st}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
