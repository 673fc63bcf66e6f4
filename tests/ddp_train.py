"""One rank of a tiny DDP training run, twice from the same start: once with gradients
reduced through p4reduce (the DDP communication hook, the Worker's socket inside the rank's
Mininet host), once with gloo's own allreduce. Writes both final parameter sets.

Run by tests/test_ddp_switch.py: python -P ddp_train.py RANK WORLD STORE DESCRIPTOR NETNS OUT
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from hostlib import Worker
from hostlib.netns import in_netns
from hostlib.torch_hook import HookState, p4reduce_hook

STEPS = 5


def model() -> torch.nn.Module:
    torch.manual_seed(0)  # the same start on every rank and in both runs
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def train(ddp: torch.nn.Module, rank: int) -> list[torch.Tensor]:
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    for _ in range(STEPS):
        x, y = torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in ddp.module.parameters()]


def main() -> int:
    rank, world, store, descriptor, netns, out = sys.argv[1:7]
    rank, world = int(rank), int(world)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        with in_netns(netns):
            worker = Worker(descriptor, deadline=60.0)
        with worker:
            ddp = torch.nn.parallel.DistributedDataParallel(model())
            state = HookState(worker)
            ddp.register_comm_hook(state, p4reduce_hook)
            with_switch = train(ddp, rank)
            buckets = state.buckets
        plain = train(torch.nn.parallel.DistributedDataParallel(model()), rank)
        torch.save({"switch": with_switch, "gloo": plain, "buckets": buckets}, out)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
