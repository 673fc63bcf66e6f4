"""One rank of tests/test_torch_backend_switch.py: `dist.init_process_group("p4reduce")`
with nothing but the rendezvous and P4REDUCE_* variables of mininet/torch_ranks.py, then
collectives through the switch, collectives served by gloo, and DDP without a comm hook.
Every reference is computed on the same tensors through a gloo group of the same ranks.
Writes what it saw to OUT (a torch.save file); the test does the comparisons.

    python -P torch_backend_rank.py OUT [--pg-options] [--ddp-steps N]    ("{rank}" in OUT)
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import os
import signal
import sys
import warnings

import torch
import torch.distributed as dist

# (name, dtype, op, shape, layout): what the switch must serve
CASES = [
    ("f32-sum", torch.float32, "SUM", (1000,), "contiguous"),
    ("f32-avg-matrix", torch.float32, "AVG", (33, 70), "contiguous"),
    ("f64-sum-3d", torch.float64, "SUM", (4, 5, 6), "contiguous"),
    ("f16-sum", torch.float16, "SUM", (300,), "contiguous"),
    ("bf16-avg", torch.bfloat16, "AVG", (257,), "contiguous"),
    ("i32-sum", torch.int32, "SUM", (10, 100), "contiguous"),
    ("i32-avg", torch.int32, "AVG", (129,), "contiguous"),
    ("f32-strided", torch.float32, "SUM", (40, 64), "strided"),
    ("f64-scalar", torch.float64, "SUM", (), "contiguous"),
    ("f32-empty", torch.float32, "SUM", (0,), "contiguous"),
    ("f32-block-sparse", torch.float32, "AVG", (64 * 100,), "block-sparse"),
]


def make(rank: int, index: int, dtype: torch.dtype, shape: tuple, layout: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * index + rank)
    if dtype == torch.int32:
        t = torch.randint(-1_000_000, 1_000_000, shape, generator=g, dtype=torch.int32)
    else:
        scale = 10.0 ** torch.randint(-3, 3, shape, generator=g).double()
        t = (
            torch.randn(shape, generator=g, dtype=torch.float64)
            * (scale if dtype == torch.float64 else 1.0)
        ).to(dtype)
    if layout == "strided":
        return t.t()[::2]  # non-contiguous view, any strides
    if layout == "block-sparse":
        keep = torch.rand(t.numel() // 64, generator=g) < 0.1
        t = (t.view(-1, 64) * keep[:, None]).view(shape)
    return t


def exact_reduce(t: torch.Tensor, op: str, ref: dist.ProcessGroup, world: int) -> torch.Tensor:
    """The exact result, computed through gloo in float64 (int64 for int32)."""
    wide = t.to(torch.int64 if t.dtype == torch.int32 else torch.float64).clone()
    dist.all_reduce(wide, group=ref)
    if op == "AVG":
        wide = (
            torch.div(wide, world, rounding_mode="trunc")
            if t.dtype == torch.int32
            else wide / world
        )
    return wide


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Embedding(300, 8),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 1),
    )


def train(ddp: torch.nn.Module, rank: int, steps: int) -> list[torch.Tensor]:
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        ids = torch.randint(0, 300, (16, 4), generator=gen)
        y = torch.randn(16, 1, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(ids), y).backward()
        opt.step()
    return [p.detach().clone() for p in ddp.module.parameters()]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument(
        "--pg-options",
        action="store_true",
        help="find the job through pg_options (a descriptor path) instead "
        "of the P4REDUCE_JOB/P4REDUCE_DESCRIPTOR_DIR variables",
    )
    ap.add_argument("--ddp-steps", type=int, default=4)
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # a stall shows where every thread is: on SIGUSR1, and by itself before the 120 s
    # collective timeouts below fire (the launcher prints a failed rank's output)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    faulthandler.dump_traceback_later(100, exit=False)
    out: dict = {"rank": rank, "world": world}
    # the name alone must work: registered by the torch.backends entry point on import torch
    out["imported_before_init"] = "hostlib.torch_backend" in sys.modules
    out["registered_by_import_torch"] = "p4reduce" in dist.Backend.backend_list
    if not out["registered_by_import_torch"]:  # the test reports it; go on regardless
        import hostlib.torch_backend  # noqa: F401
    pg_options = None
    if args.pg_options:
        from hostlib.torch_backend import P4ReduceOptions

        job, where = os.environ.pop("P4REDUCE_JOB"), os.environ.pop("P4REDUCE_DESCRIPTOR_DIR")
        pg_options = P4ReduceOptions(
            descriptor=f"{where}/job{job}-rank{{rank}}.json", netns=os.environ.pop("P4REDUCE_NETNS")
        )
    # a stall fails in 2 minutes (gloo's wait and the Worker's deadline), not in 30
    dist.init_process_group(
        "p4reduce", pg_options=pg_options, timeout=datetime.timedelta(seconds=120)
    )
    from hostlib import torch_backend

    out["backend"] = dist.get_backend()
    ref = dist.new_group(backend="gloo")  # references, same ranks
    stats = torch_backend.stats

    # 1. what the switch serves
    cases = {}
    for i, (name, dtype, op, shape, layout) in enumerate(CASES):
        t = make(rank, i, dtype, shape, layout)
        exact = exact_reduce(t, op, ref, world)
        peak = torch.zeros(())
        if t.numel():
            peak = t.abs().max().double()
        dist.all_reduce(peak, op=dist.ReduceOp.MAX, group=ref)
        before = t.clone()
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        cases[name] = {
            "result": t.clone(),
            "exact": exact,
            "peak": float(peak),
            "input": before,
            "dtype": str(dtype),
            "op": op,
        }
    out["cases"] = cases
    out["stats_cases"] = stats()

    # async work: not necessarily done before wait(); its future carries the tensors
    a = torch.full((5000,), float(rank + 1))
    work = dist.all_reduce(a, async_op=True)
    out["async_wait"] = work.wait()
    out["async_completed"] = work.is_completed()
    out["async_future"] = work.get_future().value()[0].clone()
    out["async_result"] = a.clone()

    # coalesced: one switch allreduce of both tensors
    c1, c2 = torch.full((100,), float(rank)), torch.full((3, 3), 2.0 * rank)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        dist.all_reduce_coalesced([c1, c2])
    out["coalesced"] = [c1, c2]

    # int32 overflow: an error on every rank, and the job stays usable
    big = torch.full((70,), 2**31 - 1000, dtype=torch.int32)
    try:
        dist.all_reduce(big)
        out["overflow"] = "no error"
    except OverflowError as e:
        out["overflow"] = f"OverflowError: {e}"
    after = torch.ones(10)
    dist.all_reduce(after)
    out["after_overflow"] = after
    out["stats_switch"] = stats()

    # 2. what gloo serves, each with its reason
    m = torch.tensor([float(rank), -float(rank)])
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    i64 = torch.full((4,), 10**12 + rank, dtype=torch.int64)
    dist.all_reduce(i64)
    p = torch.full((3,), 2, dtype=torch.int32)
    dist.all_reduce(p, op=dist.ReduceOp.PRODUCT)
    b = torch.arange(6.0) if rank == 0 else torch.zeros(6)
    dist.broadcast(b, src=0)
    gathered = [torch.zeros(2) for _ in range(world)]
    dist.all_gather(gathered, torch.full((2,), float(rank)))
    dist.barrier()
    rs = torch.zeros(2)
    dist.reduce_scatter_tensor(rs, torch.arange(2.0 * world))
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    # a group that is not the job's ranks: everything through gloo, with the reason
    sub = dist.new_group([0])
    if rank == 0:
        one = torch.full((3,), 5.0)
        dist.all_reduce(one, group=sub)
        out["subgroup"] = {"result": one, "stats": torch_backend.stats(sub)}
    out["gloo"] = {
        "max": m,
        "int64": i64,
        "product": p,
        "broadcast": b,
        "all_gather": gathered,
        "reduce_scatter": rs,
        "objects": objs,
    }
    out["stats_gloo"] = stats()

    # NaN on the last rank: every rank's call raises ValueError at once (none waits for the
    # deadline, none returns a sum), and the next call is right everywhere
    bad = torch.full((300,), 1.0)
    if rank == world - 1:
        bad[7] = float("nan")
    try:
        dist.all_reduce(bad)
        out["nan"] = "no error"
    except ValueError as e:
        out["nan"] = f"{type(e).__name__}: {e}"
    after_nan = torch.full((300,), float(rank))
    dist.all_reduce(after_nan)
    out["after_nan"] = after_nan

    # 3. DDP with no comm hook: its buckets go through the switch
    with_switch = train(torch.nn.parallel.DistributedDataParallel(model()), rank, args.ddp_steps)
    out["stats_ddp"] = stats()
    out["ddp_switch"] = with_switch
    out["ddp_gloo"] = train(
        torch.nn.parallel.DistributedDataParallel(model(), process_group=ref), rank, args.ddp_steps
    )
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()
    torch.save(out, args.out.replace("{rank}", str(rank)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
