"""`dist.init_process_group("p4reduce")` in Mininet: 2 and 4 ranks, each rank's p4reduce
socket in its own Mininet host behind the P4 switch (softswitch; simple_switch_grpc too
where installed), started by mininet/torch_ranks.py like torchrun. Each rank
(tests/torch_backend_rank.py) reduces tensors of every supported dtype/op/shape through
the switch, uses collectives that gloo serves, and trains with DDP without a comm hook;
the references are the same calls through a gloo group of the same ranks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip(
    "torch", reason="torch is the optional [torch] extra (make install-torch)"
)

from bmv2_tests import kinds  # noqa: E402
import p4net.torch_ranks  # noqa: E402

HERE = Path(__file__).resolve().parent
M = 2**31 - 1


def _run_ranks(tmp_path: Path, world: int, target: str, *extra: str) -> list[dict]:
    torch_ranks = p4net.torch_ranks
    with torch_ranks.TorchNetwork(world, target, slots=16) as net:
        res = net.run(
            [
                sys.executable,
                "-P",
                str(HERE / "torch_backend_rank.py"),
                str(tmp_path / "rank{rank}.pt"),
                *extra,
            ],
            world,
            timeout=220,
        )
    assert res.ok, res.failures()
    # the allreduces crossed every host's link and were aggregated in the switch
    assert all(r.link["tx_packets"] > 0 and r.link["rx_packets"] > 0 for r in res.ranks)
    assert res.switch_counters["aggregated"] > 0
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(world)]


def _check_rank(out: dict, world: int) -> None:
    assert out["registered_by_import_torch"], (
        "the torch.backends entry point did not register p4reduce: reinstall (make install)"
    )
    assert not out["imported_before_init"]
    assert out["backend"] == "p4reduce"
    for name, c in out["cases"].items():
        res, exact = c["result"], c["exact"]
        assert str(res.dtype) == c["dtype"] and res.shape == c["input"].shape, name
        if res.dtype == torch.int32:
            assert torch.equal(res.to(torch.int64), exact), name
            continue
        # docs/protocol.md section 10: per element N * 2^(E-1) / floor(M/N) with
        # 2^E < 2 * peak, divided by N for AVG; plus rounding to the tensor's dtype
        bound = world * c["peak"] / (M // world) / (world if c["op"] == "AVG" else 1)
        bound = bound + exact.abs() * torch.finfo(res.dtype).eps + 1e-300
        err = (res.double() - exact).abs()
        assert bool((err <= bound).all()), (name, float((err - bound).max()))
        # and it is not trivially right: the inputs differ from the result
        if res.numel():
            assert not torch.equal(res, c["input"]), name
    switch = {n for n, c in out["cases"].items() if c["input"].numel()}
    s = out["stats_cases"]
    assert s["switch"]["allreduces"] == len(switch) and s["gloo_allreduces"] == {}
    tri = world * (world + 1) / 2
    assert out["async_wait"] and out["async_completed"]
    assert torch.equal(out["async_result"], torch.full((5000,), tri))
    assert torch.equal(out["async_future"], out["async_result"])
    half = world * (world - 1) / 2
    assert torch.equal(out["coalesced"][0], torch.full((100,), half))
    assert torch.equal(out["coalesced"][1], torch.full((3, 3), 2 * half))
    assert out["overflow"].startswith("OverflowError") and "block 0" in out["overflow"]
    assert torch.equal(out["after_overflow"], torch.full((10,), float(world)))
    # async + coalesced (one call, two tensors) + overflowed + the one after it
    assert out["stats_switch"]["switch"]["allreduces"] == len(switch) + 4
    assert out["stats_switch"]["switch"]["tensors"] == len(switch) + 5
    g = out["gloo"]
    assert torch.equal(g["max"], torch.tensor([world - 1.0, 0.0]))
    assert torch.equal(g["int64"], torch.full((4,), world * 10**12 + half, dtype=torch.int64))
    assert torch.equal(g["product"], torch.full((3,), 2**world, dtype=torch.int32))
    assert torch.equal(g["broadcast"], torch.arange(6.0))
    assert all(torch.equal(t, torch.full((2,), float(r))) for r, t in enumerate(g["all_gather"]))
    assert g["objects"] == [{"rank": r} for r in range(world)]
    assert out["stats_gloo"]["gloo_allreduces"] == {
        "op MAX (the switch only adds)": 1,
        "dtype int64": 1,
        "op PRODUCT (the switch only adds)": 1,
    }
    assert out["stats_gloo"]["switch"] == out["stats_switch"]["switch"]
    if out["rank"] == world - 1:  # its own tensor: named, with the element
        assert out["nan"].startswith(
            "ValueError: tensor contains NaN or Inf (1 elements, first at flat index 7)"
        ), out["nan"]
    else:  # told by the switch (fingerprint range)
        assert out["nan"].startswith("FingerprintMismatch: ") and "NaN or Inf" in out["nan"], out[
            "nan"
        ]
    assert torch.equal(out["after_nan"], torch.full((300,), half))
    if out["rank"] == 0:
        sub = out["subgroup"]
        why = f"group of ranks [0] is not the job's ranks 0..{world - 1}"
        assert torch.equal(sub["result"], torch.full((3,), 5.0))
        assert sub["stats"]["why_not_switch"] == why
        assert sub["stats"]["gloo_allreduces"] == {why: 1}
    # DDP without a hook: one bucket per step through the switch
    assert out["stats_ddp"]["switch"]["allreduces"] >= out["stats_gloo"]["switch"]["allreduces"] + 4


def _check_ddp(outs: list[dict]) -> None:
    for out in outs[1:]:  # identical on every rank
        for a, b in zip(outs[0]["ddp_switch"], out["ddp_switch"]):
            assert torch.equal(a, b)
    for a, b in zip(outs[0]["ddp_switch"], outs[0]["ddp_gloo"]):
        # float32 gradients quantized per 64-value block (~N^2/2^31 of the block maximum
        # per step); 4 SGD steps stay far inside 1e-5
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (a - b).abs().max()


pytestmark = [pytest.mark.root, pytest.mark.mininet]


@pytest.mark.parametrize("target", kinds.params(kinds.PROCESS_KINDS))
def test_two_ranks_job_from_id(target, tmp_path):
    """2 ranks; each finds its job from P4REDUCE_JOB + P4REDUCE_DESCRIPTOR_DIR."""
    outs = _run_ranks(tmp_path, 2, target)
    for out in outs:
        _check_rank(out, 2)
    _check_ddp(outs)


def test_four_ranks_job_from_pg_options(tmp_path):
    """4 ranks; each finds its job from pg_options (a descriptor path with {rank})."""
    outs = _run_ranks(tmp_path, 4, "softswitch", "--pg-options")
    for out in outs:
        _check_rank(out, 4)
    _check_ddp(outs)


def test_launcher_stops_a_stuck_rank_and_shows_where_it_was():
    """When one rank fails, torch_ranks gives the others a grace period, then stops them
    with SIGABRT: a stuck rank's log shows every thread's Python stack (faulthandler)."""
    program = (
        "import os, sys, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    sys.exit(3)\n"
        "def stuck_in_a_collective():\n"
        "    time.sleep(600)\n"
        "stuck_in_a_collective()\n"
    )
    with p4net.torch_ranks.TorchNetwork(2, "softswitch", slots=16) as net:
        res = net.run([sys.executable, "-c", program], 2, timeout=120, grace=1.0)
    assert res.ranks[1].returncode == 3
    stuck = res.ranks[0]
    assert stuck.returncode == -6, stuck.returncode  # SIGABRT, not SIGKILL
    assert "Fatal Python error: Aborted" in stuck.output, stuck.output
    assert "in stuck_in_a_collective" in stuck.output, stuck.output
