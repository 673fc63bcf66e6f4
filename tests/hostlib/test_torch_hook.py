"""DDP communication hook over the real P4 program in-process (torch is optional)."""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip(
    "torch", reason="torch is the optional [torch] extra; pip install torch==2.13.0"
)

from hostlib import Worker  # noqa: E402
from hostlib.torch_hook import HookState, p4reduce_hook  # noqa: E402
from p4net.harness import SwitchSession  # noqa: E402


@pytest.fixture(scope="module")
def switch():
    with SwitchSession.inprocess() as sw:
        yield sw


class Bucket:
    """The one method of torch.distributed.GradBucket the hook uses, over a real tensor
    (GradBucket cannot be built outside DDP's reducer)."""

    def __init__(self, t: torch.Tensor):
        self.t = t

    def buffer(self) -> torch.Tensor:
        return self.t


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_hook_averages_bucket_over_two_ranks(dtype, switch):
    job = switch.create_job(2)
    descriptors = switch.descriptors(job)
    grads = [
        torch.randn(1000, generator=torch.Generator().manual_seed(r)).to(dtype) for r in range(2)
    ]
    want = (grads[0].double() + grads[1].double()) / 2
    got: list = [None, None]

    def rank(r):
        with Worker(descriptors[r], transport=switch.transport(r + 1)) as w:
            buf = grads[r].clone()
            fut = p4reduce_hook(HookState(w), Bucket(buf))
            got[r] = (fut.wait(), buf)

    ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    tol = 1e-6 if dtype != torch.bfloat16 else 1e-2
    for value, buf in got:
        assert value.dtype == dtype and value.data_ptr() == buf.data_ptr()  # in place
        assert torch.allclose(value.double(), want, atol=tol, rtol=tol)
    assert switch.stats(job)["rounds_completed"] > 0
    switch.jobs.delete(job.job)


def test_hook_in_real_ddp_single_process(tmp_path, switch):
    """A real DistributedDataParallel (gloo, world size 1) with the hook registered:
    gradients go through the Worker (the switch model counts the rounds) and equal the
    ones without the hook up to the quantization bound."""
    import torch.distributed as dist

    try:
        dist.init_process_group(
            "gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1
        )
    except Exception as e:  # pragma: no cover
        pytest.skip(f"gloo process group unavailable here: {e}")
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(20, 50), torch.nn.ReLU(), torch.nn.Linear(50, 3)
        )
        x, y = torch.randn(32, 20), torch.randn(32, 3)
        ref = [p.grad for p in _grads(model, x, y)]
        job = switch.create_job(1)
        with Worker(switch.descriptors(job)[0], transport=switch.transport(1)) as w:
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            state = HookState(w)
            ddp.register_comm_hook(state, p4reduce_hook)
            got = [p.grad for p in _grads(ddp, x, y)]
        assert state.buckets >= 1 and switch.stats(job)["rounds_completed"] > 0
        switch.jobs.delete(job.job)
        for a, b in zip(ref, got):
            assert torch.allclose(a, b, atol=1e-6)
    finally:
        dist.destroy_process_group()


def _grads(model, x, y):
    model.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    params = model.module.parameters() if hasattr(model, "module") else model.parameters()
    return [p for p in params]


def test_hook_error_reaches_ddp_with_the_workers_message(tmp_path, switch):
    """A Worker error inside the hook (here NaN, refused before sending) surfaces from
    backward() with its type and message, not as DDP failing to read the bucket."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        model = torch.nn.Linear(4, 1)
        job = switch.create_job(1)
        with Worker(switch.descriptors(job)[0], transport=switch.transport(1)) as w:
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            ddp.register_comm_hook(HookState(w), p4reduce_hook)
            x = torch.randn(3, 4)
            x[1, 2] = float("inf")
            with pytest.raises(RuntimeError, match=r"ValueError: tensor contains NaN or Inf"):
                ddp(x).sum().backward()
        switch.jobs.delete(job.job)
    finally:
        dist.destroy_process_group()
