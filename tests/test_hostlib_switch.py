"""hostlib against the real P4 program: workers in their own network namespaces (Mininet
hosts) and processes, the switch (softswitch; simple_switch_grpc where installed) configured
by the controller. Every result is compared with numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bmv2_tests import kinds
import p4net.demo
import p4net.topology
from p4reduce.job import closing_rounds

REPO = Path(__file__).resolve().parent.parent
BLOCK_VALUES = 64


def _demo():
    return p4net.demo


@pytest.fixture(scope="module", params=kinds.params(kinds.PROCESS_KINDS, needs=("root", "mininet")))
def net(request):
    demo = _demo()
    with demo.DemoNetwork(request.param, 8) as network:
        yield demo, network


def _run(net, workers, inputs, **kw):
    demo, network = net
    opts = demo.Options(
        workers=workers,
        size=len(inputs[0]),
        dtype=str(inputs[0].dtype),
        slots=kw.pop("slots", 8),
        deadline=kw.pop("deadline", 60.0),
        quiet=True,
        **kw,
    )
    summary = network.run_jobs(opts, [inputs])
    bad = [(o.rank, o.error) for o in summary.outcomes if not (o.ok and o.matched)]
    assert not bad, bad
    return summary


def _sparse(rng, n, size, density, dtype, k=BLOCK_VALUES):
    """n tensors whose blocks of k values are non-zero with probability `density`."""
    blocks = -(-size // k)
    out = []
    for _ in range(n):
        mask = np.repeat(rng.random(blocks) < density, k)[:size]
        if dtype == "int32":
            x = rng.integers(-(2**24), 2**24, size)
        else:
            x = rng.standard_normal(size)
        out.append(np.where(mask, x, 0).astype(dtype))
    return out


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_dense_float32_for_n_workers(net, n):
    rng = np.random.default_rng(n)
    _run(net, n, [rng.standard_normal(700).astype("float32") for _ in range(n)])


@pytest.mark.parametrize("density", [0.1, 0.01])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_sparse(net, density, dtype):
    rng = np.random.default_rng(7)
    _run(net, 3, _sparse(rng, 3, 20000, density, dtype))


def test_all_zero_tensor(net):
    summary = _run(net, 2, [np.zeros(5000, "float32"), np.zeros(5000, "float32")])
    # 8 slots: per slot one announce round, in either round mode (in silent rounds no
    # closing round: no rank has a block, so the announce round's RESULT ends the slot);
    # nothing else (retransmissions cover start-up skew)
    for o in summary.outcomes:
        assert o.packets_sent - o.retransmissions == 8, o


HOST_FRAMES = 16


def test_a_silent_rank_sends_its_non_zero_blocks_and_two_packets_per_slot(net):
    """Idle ranks send nothing (docs/protocol.md, "Silent rounds"): what a rank's link
    carried to the switch, counted by the interface and not by the worker, is its own
    non-zero blocks plus one ANNOUNCE per slot and one closing SKIP per slot any rank has
    a block in (p4reduce.job.closing_rounds), plus what its timers
    resent while it waited (a rank that finished its blocks waits for the closing round of
    ranks still sending), plus the host kernel's own frames on a new link (IPv6 neighbour
    discovery and multicast listener reports, HOST_FRAMES at most). A rank whose queries
    went unanswered twice asks for a rewind, and a rewind re-runs part of a slot, which
    this count leaves out: on two loaded cores a timer can get there in a lossless job,
    so such a job (its sums exact all the same) runs again, up to twice."""
    rng = np.random.default_rng(25)
    slots, workers = 8, 4
    xs = _sparse(rng, workers, BLOCK_VALUES * 400, 0.1, "float32")
    for _ in range(3):
        summary = _run(net, workers, xs, slots=slots, round_mode="silent")
        if not any(o.stats["rewind_requests"] or o.stats["rewinds"] for o in summary.outcomes):
            break
    masks = [x.reshape(-1, BLOCK_VALUES).any(axis=1) for x in xs]
    closing = closing_rounds(masks, slots, block_values=BLOCK_VALUES)
    for o, x in zip(summary.outcomes, xs):
        assert o.stats["rewind_requests"] == o.stats["rewinds"] == 0, o
        nonzero = int(np.count_nonzero(np.abs(x.reshape(-1, BLOCK_VALUES)).sum(axis=1)))
        assert o.stats["last_nonzero_blocks"] == nonzero, o
        assert o.packets_sent == nonzero + slots + closing + o.retransmissions, o
        assert o.packets_sent <= o.tx_packets <= o.packets_sent + HOST_FRAMES, o


def test_smaller_than_one_block_and_odd_length(net):
    rng = np.random.default_rng(3)
    _run(net, 2, [rng.integers(-5, 5, 10).astype("int32") for _ in range(2)])
    _run(net, 3, [rng.standard_normal(BLOCK_VALUES * 5 + 17) for _ in range(3)])  # float64


@pytest.mark.parametrize("loss", [0.01, 0.1])
def test_loss_gives_exact_int_and_bounded_float(net, loss):
    """Exact int32 and bounded float32 sums under the drop simulator's loss. A job whose
    packets the switch dropped recovered by retransmitting, and not by resending
    everything. Which packets are dropped depends on the switch's packet sequence, so a
    small job at 1 % may lose none (a few hundred rolls): the two jobs together must."""
    rng = np.random.default_rng(11)
    total_drops = 0
    for dtype in ("int32", "float32"):
        summary = _run(net, 3, _sparse(rng, 3, 6000, 0.5, dtype), loss=loss, seed=5)
        retx = sum(o.retransmissions for o in summary.outcomes)
        sent = sum(o.tx_packets for o in summary.outcomes)
        drops = sum(
            c["simulated_drops_ingress"] + c["simulated_drops_egress"]
            for c in summary.switch_counters.values()
        )
        total_drops += drops
        assert retx < sent, (dtype, retx, sent)
        if drops:
            assert retx > 0, (dtype, drops)
    assert total_drops > 0


@pytest.mark.parametrize("k", [256, 2048])
def test_wide_blocks_through_the_switch_with_loss(net, k):
    """Jobs of K values per block (frames of 62 + 4K bytes: the demo raises the links'
    MTU to carry them) at 5 % loss each way: exact int32 in both encodings and bounded
    float32 sums, per block of K, recovered by retransmission. Each rank's blocks are its
    own, so rounds complete with SKIPs too (their RESULT is 62 + 4K bytes)."""
    demo, network = net
    rng = np.random.default_rng(k)
    for dtype, encoding in (("int32", "lanes"), ("int32", "packed"), ("float32", "packed")):
        xs = _sparse(rng, 3, 12 * k + 5, 0.5, dtype, k)
        summary = _run(
            net, 3, xs, block_values=k, encoding=encoding, loss=0.05, seed=7, deadline=20.0
        )
        assert network.mtu >= demo.protocol.mtu_needed(k)
        blocks = -(-xs[0].size // k) * (2 if encoding == "packed" and dtype == "int32" else 1)
        for o in summary.outcomes:
            assert o.stats["last_blocks"] == blocks, (dtype, encoding, o.stats)


def test_switch_restart_mid_job_fails_every_rank_at_once(net):
    """The switch process is killed and started again while two workers loop over
    allreduces; the controller restores pipeline and job (same epoch, from its state file).
    Rounds whose results died with the switch cannot complete, so every worker must fail
    at once with a clear error that says the switch lost the job's state -- not wait for
    its deadline (60 s here)."""
    from p4reduce.addresses import WorkerAddress
    from hostlib import protocol

    _demo, network = net
    ctl = network.ctl
    hosts = network.hosts[:2]
    job = ctl.jobs.create(
        network.next_job,
        [
            WorkerAddress(r, h.port, h.mac, h.ip, protocol.UDP_PORT_BASE)
            for r, h in enumerate(hosts)
        ],
        8,
    )
    network.next_job += 1
    procs = []
    try:
        for d, h in zip(job.descriptors(ctl.jobs.switch), hosts):
            ones = np.ones(64 * 64, np.float32)
            procs.append(network.spawn_worker(job.job, d, h, ones, 60.0, ["--repeat", "1000000"]))
        redone, took = network.reboot_while_running(p4net.topology.SWITCH_NAME, procs)
        assert redone, "the controller noticed the restart and restored the switch"
        assert took < 20, f"workers failed only {took:.1f}s after the switch came back"
        for r in range(2):
            report = network.report(job.job, r)
            assert not report["ok"]
            assert (
                report["error"].startswith("SwitchStateLost")
                and "lost the state of job" in report["error"]
            ), report["error"]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        ctl.jobs.delete(job.job)


def test_the_switch_runs_at_the_raised_priority(net):
    """The switch process (restarted or not: SwitchRunner.start sets it each time) has
    SWITCH_NICE as its own nice value and as its session's autogroup's, the one the
    scheduler weighs it by against the ranks' sessions (softswitch.runner: why)."""
    import os

    from softswitch.runner import SWITCH_NICE

    _demo, network = net
    pid = network.net.get(p4net.topology.SWITCH_NAME).runner.process.pid
    assert os.getpriority(os.PRIO_PROCESS, pid) == SWITCH_NICE
    group = Path(f"/proc/{pid}/autogroup")
    if group.exists():  # a kernel built with autogroup scheduling
        assert group.read_text().split()[-1] == str(SWITCH_NICE), group.read_text()
