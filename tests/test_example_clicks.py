"""The README's example (examples/clicks_switch.py), tiny: a click model with a large
embedding table trained for a few steps by 2 ranks in Mininet, through
`init_process_group("p4reduce")` and through gloo, both through the same hosts and switch
(gloo at MTU 1 500 and 9 000). The parameters must be identical on every rank and close to
gloo's; the gradients must really be block-sparse; gloo's bytes must cross the links."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is the optional [torch] extra (make install-torch)")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.root
@pytest.mark.mininet
def test_tiny_click_model_through_the_switch_matches_gloo(tmp_path):
    sys.path.insert(0, str(EXAMPLES))
    try:
        import clicks_switch
        from clicks_model import Config
    finally:
        sys.path.remove(str(EXAMPLES))
    plot = importlib.util.find_spec("matplotlib") is not None
    opts = clicks_switch.Options(
        workers=2,
        target="softswitch",
        slots=16,
        out=tmp_path,
        plot=plot,
        quiet=True,
        timeout=130,
        pg_timeout=90,
        # the target's default: in this tiny model's embedding (250 rows a field) most of
        # the example's 1 024-value blocks would hold a row of the batch, so 64 keeps the
        # gradient block-sparse, which this test checks
        block_values=None,
    )
    s = clicks_switch.run(opts, Config(steps=6, rows_per_field=250, batch=32))
    p, g = s["backends"]["p4reduce"], s["backends"]["gloo"]
    assert p["params_identical_on_every_rank"] and g["params_identical_on_every_rank"]
    # Adam on gradients that differ by the block quantization (~N^2 / 2^31 of a block's
    # maximum): after 6 steps far below one step's size (lr = 0.005)
    assert s["max_param_difference_rank0"] < 1e-4
    assert s["max_loss_difference"] < 1e-4
    assert p["gloo_allreduces"] == 0  # every gradient through the switch
    assert 0 < p["mean_density_own"] < 0.6  # the embedding's untouched rows
    assert p["switch_packets_per_step_per_worker"] > 0
    # silent rounds (the example's mode, named): a rank sends its non-zero blocks and an
    # announce and a closing packet per slot a call uses, retransmissions aside -- and a
    # resend of its own packet that went unanswered twice goes with a query and a REWIND
    # request (hostlib/silent.py, _resending): at most 3 packets per retransmission
    assert s["round_mode"] == "silent" and p["allreduces_per_step"] >= 1
    assert p["nonzero_blocks_per_step_per_rank"] > 0
    assert p["control_packets_per_step_per_rank"] <= 2 * opts.slots * p["allreduces_per_step"]
    lower = p["nonzero_blocks_per_step_per_rank"] + p["control_packets_per_step_per_rank"]
    retx = p["retransmissions"] / opts.workers / 6
    assert lower - 1e-9 <= p["packets_per_step_per_rank"] <= lower + 3 * retx + 1e-9
    # the rank's link, counted around its steps only (not the process group's set-up nor
    # DDP's first broadcast), carried every frame its Worker sent and little else: the
    # fallback group's few TCP frames, neighbour discovery
    extra = 6 * (p["link_tx_packets_per_step_per_worker"] - p["packets_per_step_per_rank"])
    assert -1e-6 <= extra <= 16 + 4 * 6, (extra, p)
    # gloo's ring crossed the hosts' links (so the switch), not loopback: each rank sends
    # 2(N-1)/N of the dense gradient per step, at every MTU it ran at
    ring = 2 * (opts.workers - 1) / opts.workers * s["dense_gradient_bytes"]
    assert g["link_tx_bytes_per_step_per_worker"] >= ring
    assert set(s["gloo_median_step_ms_by_mtu"]) == {"1500", "9000"}
    assert g["median_step_ms"] == min(s["gloo_median_step_ms_by_mtu"].values())
    assert s["ok"]
    if plot:
        assert (tmp_path / "clicks.png").stat().st_size > 10_000
    assert (tmp_path / "results.json").exists()


@pytest.mark.root
@pytest.mark.mininet
def test_gloo_runs_on_every_link_mtu_the_p4reduce_job_had(tmp_path):
    """A job of 4 096 values per block raises its links above the jumbo MTU (frames of
    16 446 bytes): gloo then runs at that MTU too, asked for none (its own MTUs run beside
    it, as the test above checks), and its fastest run is the one compared -- p4reduce is
    never given links gloo did not have."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import clicks_switch
        from clicks_model import Config
    finally:
        sys.path.remove(str(EXAMPLES))
    from p4reduce.wire import mtu_needed

    from p4reduce.target import default_slots

    opts = clicks_switch.Options(
        workers=2,
        target="softswitch",
        out=tmp_path,
        plot=False,
        quiet=True,
        timeout=130,
        pg_timeout=90,
        block_values=4096,
        gloo_mtus=(),
    )
    s = clicks_switch.run(opts, Config(steps=4, rows_per_field=250, batch=32))
    # no slots given: the job has those its call uses, fewer than the switch's default at
    # this block size; each costs the call an announce and a closing packet
    blocks = -(-s["parameters"] // 4096)
    assert s["slots"] < default_slots("softswitch") and s["slots"] <= blocks
    p = s["backends"]["p4reduce"]
    assert 0 < p["control_packets_per_step_per_rank"] <= 2 * s["slots"] * p["allreduces_per_step"]
    wide = s["mtu"]["p4reduce"]
    assert wide >= mtu_needed(4096) > 9000
    assert set(s["gloo_median_step_ms_by_mtu"]) == {str(wide)}
    g = s["backends"]["gloo"]
    assert g["median_step_ms"] == min(s["gloo_median_step_ms_by_mtu"].values())
    assert s["block_values"] == 4096 and s["backends"]["p4reduce"]["gloo_allreduces"] == 0
