"""The "p4reduce" torch.distributed backend in one process (world size 1) against the real P4
program in-process (p4net.harness): what goes to the switch and what to gloo,
DDP without a hook, errors, and the messages when a rank cannot find its job. The
multi-rank tests through the real P4 switch in Mininet are tests/test_torch_backend_switch.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip(
    "torch", reason="torch is the optional [torch] extra; pip install torch==2.13.0"
)
import torch.distributed as dist  # noqa: E402

from hostlib import torch_backend  # noqa: E402
from hostlib.jobref import ENV, JobLookupError, P4ReduceOptions  # noqa: E402
from hostlib_helpers import allow_silent, descriptor  # noqa: E402
from p4net.harness import SwitchSession, worker_address  # noqa: E402


@pytest.fixture
def no_env(monkeypatch):
    for var in ENV.values():
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def switch():
    with SwitchSession.inprocess() as sw:
        yield sw


class Rounds:
    """The job's aggregation rounds so far, as the switch counts them."""

    def __init__(self, switch, job):
        self.switch, self.job = switch, job

    @property
    def rounds_completed(self) -> int:
        return self.switch.stats(self.job)["rounds_completed"]


@pytest.fixture
def world_of_one(tmp_path, no_env, switch):
    """init_process_group("p4reduce") of one rank whose Worker talks to the P4 program."""
    job = switch.create_job(1)
    opts = P4ReduceOptions(descriptor=switch.descriptors(job)[0], transport=switch.transport(1))
    dist.init_process_group(
        "p4reduce", init_method=f"file://{tmp_path}/store", rank=0, world_size=1, pg_options=opts
    )
    try:
        yield Rounds(switch, job), dist.group.WORLD
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        switch.jobs.delete(job.job)


def test_backend_is_registered_by_name():
    assert "p4reduce" in dist.Backend.backend_list


def test_no_job_names_what_to_set(tmp_path, no_env):
    with pytest.raises(
        JobLookupError,
        match=r"rank 0 has no p4reduce job: set "
        r"P4REDUCE_DESCRIPTOR",
    ):
        dist.init_process_group(
            "p4reduce", init_method=f"file://{tmp_path}/store", rank=0, world_size=1
        )
    assert not dist.is_initialized()


def test_descriptor_of_another_size_is_refused(tmp_path, no_env, monkeypatch):
    path = tmp_path / "d.json"
    path.write_text(__import__("json").dumps(descriptor(0, 2)))
    monkeypatch.setenv(ENV["descriptor"], str(path))
    with pytest.raises(
        JobLookupError,
        match=r"with 2 workers, but this process is rank 0 "
        r"of 1",
    ):
        dist.init_process_group(
            "p4reduce", init_method=f"file://{tmp_path}/store", rank=0, world_size=1
        )


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32]
)
def test_sum_and_avg_go_through_the_switch(world_of_one, dtype):
    switch, pg = world_of_one
    x = (torch.randn(3, 100, generator=torch.Generator().manual_seed(1)) * 100).to(dtype)
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
        rounds = switch.rounds_completed
        t = x.clone()
        dist.all_reduce(t, op=op)
        assert t.dtype == dtype  # N = 1: sum = mean = x
        if dtype == torch.int32:
            assert torch.equal(t, x)
        else:  # block floating point (protocol.md section 10), then the dtype's rounding
            bound = x.double().abs().max() / (2**31 - 1) + x.double().abs() * torch.finfo(dtype).eps
            assert bool(((t.double() - x.double()).abs() <= bound).all())
        assert switch.rounds_completed > rounds  # ... via the P4 program
    s = torch_backend.stats()
    assert s["switch"]["allreduces"] == 2 and s["gloo_allreduces"] == {}
    assert s["worker"]["packets_sent"] > 0


def test_other_ops_dtypes_and_collectives_go_to_gloo(world_of_one):
    switch, pg = world_of_one
    rounds = switch.rounds_completed
    t = torch.tensor([1.0, -2.0])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.all_reduce(torch.ones(3, dtype=torch.int64))
    dist.all_reduce(torch.ones(2, dtype=torch.bool), op=dist.ReduceOp.BOR)
    dist.all_reduce(torch.ones(4).to_sparse())
    b = torch.arange(3.0)
    dist.broadcast(b, 0)
    dist.barrier()
    out = [torch.zeros(2)]
    dist.all_gather(out, torch.ones(2))
    assert torch.equal(t, torch.tensor([1.0, -2.0])) and torch.equal(out[0], torch.ones(2))
    assert switch.rounds_completed == rounds  # nothing reached the switch
    assert torch_backend.stats()["gloo_allreduces"] == {
        "op MAX (the switch only adds)": 1,
        "dtype int64": 1,
        "op BOR (the switch only adds)": 1,
        "sparse tensor": 1,
    }


def test_async_work_and_its_future(world_of_one):
    t = torch.full((10_000,), 3.0)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    assert work.wait() and work.is_completed() and work.is_success()
    assert work.exception() is None and fut.done()
    assert fut.value()[0] is t and torch.equal(t, torch.full((10_000,), 3.0))


def test_errors_reach_wait_and_the_group_stays_usable(world_of_one):
    t = torch.tensor([1.0, float("nan")])
    with pytest.raises(ValueError, match="NaN"):
        dist.all_reduce(t)
    big = torch.full((3,), 2**31 - 1, dtype=torch.int32)
    dist.all_reduce(big)  # N = 1 cannot overflow
    ok = torch.ones(5)
    dist.all_reduce(ok)
    assert torch.equal(ok, torch.ones(5))


def test_whole_world_subgroup_shares_the_worker(world_of_one):
    switch, pg = world_of_one
    sub = dist.new_group([0])
    assert isinstance(sub, torch_backend.P4ReduceProcessGroup)
    assert sub.worker is pg.worker
    t = torch.ones(7)
    dist.all_reduce(t, group=sub)
    assert torch_backend.stats(sub)["switch"]["allreduces"] == 1


def test_ddp_without_hook_reduces_through_the_switch(world_of_one):
    switch, pg = world_of_one
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Embedding(500, 16),
        torch.nn.Flatten(),
        torch.nn.Linear(48, 8),
        torch.nn.ReLU(),
        torch.nn.Linear(8, 1),
    )
    ids, y = torch.randint(0, 500, (32, 3)), torch.randn(32, 1)
    torch.nn.functional.mse_loss(model(ids), y).backward()
    ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    rounds = switch.rounds_completed
    torch.nn.functional.mse_loss(ddp(ids), y).backward()
    assert switch.rounds_completed > rounds
    s = torch_backend.stats()["switch"]
    assert s["allreduces"] >= 1
    assert s["nonzero_blocks"] < s["blocks"]  # the embedding's untouched rows: zero blocks
    for a, p in zip(ref, model.parameters()):
        assert torch.allclose(a, p.grad, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("k", [256, 2048])
def test_the_block_size_is_the_jobs(tmp_path, no_env, switch, k):
    """The backend reduces in blocks of the job's values per block, from its descriptor:
    a tensor of 5 000 values is ceil(5 000 / K) blocks, each one round of the switch."""
    job = switch.create_job(1, slots=4, block_values=k, round_mode="every_rank")
    opts = P4ReduceOptions(descriptor=switch.descriptors(job)[0], transport=switch.transport(1))
    dist.init_process_group(
        "p4reduce", init_method=f"file://{tmp_path}/store", rank=0, world_size=1, pg_options=opts
    )
    try:
        x = torch.randn(5000, generator=torch.Generator().manual_seed(2))
        t = x.clone()
        dist.all_reduce(t)
        assert dist.group.WORLD.worker.cfg.block_values == k
        blocks = -(-5000 // k)
        assert torch_backend.stats()["switch"]["blocks"] == blocks
        assert switch.stats(job)["rounds_completed"] == min(4, blocks) + blocks
        assert bool(((t - x).abs() <= x.abs().max() / 2**30).all())
    finally:
        dist.destroy_process_group()
        switch.jobs.delete(job.job)


def test_destroy_closes_the_worker(tmp_path, no_env, switch):
    job = switch.create_job(1)
    opts = {"descriptor": switch.descriptors(job)[0], "transport": switch.transport(1)}
    dist.init_process_group(
        "p4reduce", init_method=f"file://{tmp_path}/store", rank=0, world_size=1, pg_options=opts
    )
    worker = dist.group.WORLD.worker
    dist.all_reduce(torch.ones(3))
    dist.destroy_process_group()
    switch.jobs.delete(job.job)
    assert worker._closed


def test_the_window_comes_from_the_environment(tmp_path, no_env, switch, monkeypatch):
    """P4REDUCE_WINDOW sets the most slots the rank's Worker keeps outstanding (a launcher
    whose job is alone on its switch opens every slot: examples/clicks_switch.py)."""
    job = switch.create_job(1, slots=4, round_mode="every_rank")
    monkeypatch.setenv(ENV["window"], "2")
    opts = {"descriptor": switch.descriptors(job)[0], "transport": switch.transport(1)}
    dist.init_process_group(
        "p4reduce", init_method=f"file://{tmp_path}/store", rank=0, world_size=1, pg_options=opts
    )
    try:
        assert dist.group.WORLD.worker.params.window == 2
        x = torch.arange(1000, dtype=torch.float32)
        t = x.clone()
        dist.all_reduce(t)
        assert torch.equal(t, x)
    finally:
        dist.destroy_process_group()
        switch.jobs.delete(job.job)


def test_an_error_in_ddp_is_reported_not_a_crash(world_of_one):
    """A Future completed with set_exception() is read by DDP's C++ reducer as a value
    (torch stores the exception object as the result): it would crash. The backend's
    futures carry a real error instead, so backward() raises with the Worker's message."""
    model = torch.nn.Linear(4, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    x = torch.randn(3, 4)
    x[0, 0] = float("nan")
    with pytest.raises(RuntimeError, match=r"ValueError: .*NaN"):
        ddp(x).sum().backward()
    model.zero_grad()  # (the failed step left NaN grads)
    ddp(torch.randn(3, 4)).sum().backward()  # the next step works
    assert torch.isfinite(model.weight.grad).all()


GLOO_LOOP = """
import tempfile
import torch, torch.distributed as dist
from hostlib.jobref import P4ReduceOptions
from p4net.harness import SwitchSession
with SwitchSession.inprocess() as switch:
    job = switch.create_job(1)
    opts = P4ReduceOptions(descriptor=switch.descriptors(job)[0], transport=switch.transport(1))
    dist.init_process_group("p4reduce", init_method=f"file://{{tempfile.mktemp()}}", rank=0,
                            world_size=1, pg_options=opts)
    pg = dist.group.WORLD          # called as torch's C++ callers (DDP) and dist.* do
    for i in range({n}):           # temporaries: their last reference may be gloo's work
        pg.broadcast([torch.full((4,), float(i))], dist.BroadcastOptions()).wait()
        pg.allgather([[torch.zeros(4)]], [torch.full((4,), float(i))]).wait()
        pg._reduce_scatter_base(torch.zeros(4), torch.full((4,), float(i))).wait()
        pg.barrier().wait()
        dist.broadcast(torch.full((4,), float(i)), src=0)
        dist.all_gather([torch.zeros(4)], torch.full((4,), float(i)))
    x = torch.ones(100)
    dist.all_reduce(x)                      # and the switch still answers
    assert torch.equal(x, torch.ones(100)), x
    dist.destroy_process_group()
print("done", {n})
"""


def test_gloo_served_collectives_do_not_deadlock(tmp_path):
    """The gloo hang: torch's dispatch of a collective the Python group does not override
    enqueues on gloo with the GIL held, while gloo's worker, holding its queue mutex, waits
    for the GIL to free the previous work's tensors. At world size 1 it deadlocked within
    the first few calls; the group now forwards these collectives to gloo itself. Run in a
    child process: a deadlocked main thread would not even let pytest's timeout fire."""
    import subprocess
    import sys
    from pathlib import Path

    program = GLOO_LOOP.format(n=500)
    try:
        res = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", program],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[2],
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"gloo-served collectives deadlocked ({e})") from None
    assert res.returncode == 0 and "done 500" in res.stdout, res.stdout + res.stderr


def test_a_silent_job_sends_only_its_blocks(tmp_path, no_env, switch):
    """A job of silent rounds through the backend: the sum is the tensor (N = 1), and the
    rank sends an ANNOUNCE per slot used and one DATA per non-zero block, no closing SKIP:
    a slot without a block ends at its announce round, and the one rank takes part in
    every round of a slot, so its last data round ends it (int32 travels as two
    half-blocks per block in the packed encoding, and these values fill only the low
    halves: wire blocks 7, 35 and 77, in slots 3, 3 and 1 of 4)."""
    if not allow_silent(switch):
        pytest.skip("this build of the v1model program runs every-rank rounds only")
    job = switch.jobs.create(71, [worker_address(0)], 4, None, None, 64, round_mode="silent")
    opts = P4ReduceOptions(descriptor=switch.descriptors(job)[0], transport=switch.transport(1))
    dist.init_process_group(
        "p4reduce", init_method=f"file://{tmp_path}/store", rank=0, world_size=1, pg_options=opts
    )
    try:
        x = torch.zeros(40, 64, dtype=torch.int32)
        x[[3, 17, 38]] = torch.arange(64, dtype=torch.int32) + 1
        t = x.clone()
        dist.all_reduce(t)
        assert torch.equal(t, x)
        w = torch_backend.stats()["worker"]
        assert w["last_sent_by_type"] == {"ANNOUNCE": 4, "DATA": 3}
    finally:
        dist.destroy_process_group()
        switch.jobs.delete(job.job)
