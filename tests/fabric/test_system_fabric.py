"""System test of the two-level network: a spine and two leaves in Mininet (softswitch,
and simple_switch_grpc where installed), 4 ranks per leaf, the controller programming all
three switches from one fabric configuration, every worker's result checked against
numpy, and what each switch's ports carried."""

from __future__ import annotations

import os

import numpy as np
import pytest

import p4net.demo
from bmv2_tests import kinds
from hostlib import protocol
from p4net import topology
from p4reduce.addresses import WorkerAddress


@pytest.fixture(params=kinds.params(kinds.PROCESS_KINDS, needs=("root", "mininet")))
def target(request):
    return request.param


def _interfaces() -> set[str]:
    """The switch-side links of this process's switches (spine and leaves)."""
    names = (topology.SWITCH_NAME, *topology.LEAF_NAMES)
    return {n for n in os.listdir("/sys/class/net") if n.split("-eth")[0] in names}


def two_level_run(target: str, **options) -> p4net.demo.Summary:
    """The demo on the two-level network: 8 int32 ranks of 6 000 values, 30 % of the
    blocks non-zero, 8 slots, `options` on top."""
    opts = p4net.demo.Options(
        workers=8,
        size=6000,
        density=0.3,
        dtype="int32",
        target=target,
        slots=8,
        deadline=60.0,
        quiet=True,
        topo=topology.TWO_LEVEL,
        **options,
    )
    return p4net.demo.run(opts)


@pytest.mark.parametrize("round_mode", [None, "every_rank"], ids=["default", "every_rank"])
def test_two_level_int32_exact(target, round_mode):
    """A job in the leaf role, in the fabric's default round mode (its target's: silent
    rounds on bmv2 and softswitch) and in every-rank rounds: every sum exact, and each
    uplink carries one partial up and one result down per round of the spine's, not one
    per rank."""
    before = _interfaces()
    summary = two_level_run(target, round_mode=round_mode)
    bad = [(o.rank, o.error) for o in summary.outcomes if not (o.ok and o.matched)]
    assert not bad, bad
    if round_mode is None:  # silent rounds: a rank sends only its own non-zero blocks
        for o in summary.outcomes:
            nonzero, slots = o.stats["last_nonzero_blocks"], o.stats["last_call_slots"]
            lossless = o.retransmissions == 0 and o.stats["rewinds"] == 0
            assert not lossless or o.packets_sent <= nonzero + 2 * slots, (o.rank, o.stats)
    assert [o.host for o in summary.outcomes] == [f"h{i}" for i in range(1, 9)]
    links = summary.links
    assert sorted(links) == ["leaf1", "leaf2", "spine"]
    per_leaf = topology.leaf_hosts(8)
    uplink = per_leaf + 1
    rounds = summary.switch_counters[1]["rounds_completed"]
    for i, leaf in enumerate(("leaf1", "leaf2")):
        hosts = [c for port, c in links[leaf].items() if port != uplink]
        up = links[leaf][uplink]
        # the leaf role: one contribution up and one result down per round, not one per
        # rank; beyond that only repairs, each one a retransmission of this leaf's ranks
        # finding the round complete there (its partial goes up again, the spine answers
        # it). How many a loaded software switch needs varies, so the bound is what the
        # ranks measured, not a fixed share of the rounds.
        leaf_ranks = summary.outcomes[i * per_leaf : (i + 1) * per_leaf]
        repairs = sum(o.retransmissions for o in leaf_ranks)
        assert rounds <= up["tx_packets"] <= rounds + repairs, (up, rounds, repairs)
        assert rounds <= up["rx_packets"] <= rounds + repairs, (up, rounds, repairs)
        assert sum(c["rx_packets"] for c in hosts) >= 4 * rounds
        # the two ends of the uplink agree: the spine saw what the leaf sent, and back
        assert links["spine"][i + 1]["rx_packets"] == up["tx_packets"]
        assert links["spine"][i + 1]["tx_packets"] == up["rx_packets"]
    assert _interfaces() == before, "the demo left interfaces behind"


def test_a_silent_job_of_wide_blocks_across_two_levels_runs_at_the_spine(target):
    """A job of silent rounds on the two-level network (each rank's own 30 % of the
    blocks non-zero) at more values per block than a leaf's empty partial can grow to:
    the spine aggregates every rank itself, the leaves carry the ranks' frames at layer 2
    both ways, and each rank sends only for its own non-zero blocks plus an announce and
    at most a closing packet per slot; every sum is exact."""
    summary = two_level_run(
        target, overlap="independent", encoding="lanes", round_mode="silent", block_values=256
    )
    bad = [(o.rank, o.error) for o in summary.outcomes if not (o.ok and o.matched)]
    assert not bad, bad
    for o in summary.outcomes:
        nonzero, slots = o.stats["last_nonzero_blocks"], o.stats["last_call_slots"]
        # (another rank's lost result makes every rank re-run a slot from a rewind: its
        # rewind round and its blocks again, with no retransmission of this rank's)
        lossless = o.retransmissions == 0 and o.stats["rewinds"] == 0
        assert not lossless or o.packets_sent <= nonzero + 2 * slots, (o.rank, o.stats)
    per_leaf = topology.leaf_hosts(8)
    uplink = per_leaf + 1
    for leaf in ("leaf1", "leaf2"):
        hosts = [c for port, c in summary.links[leaf].items() if port != uplink]
        up = summary.links[leaf][uplink]
        # at layer 2, both ways: nothing goes up but what the leaf's ranks sent, and
        # what reaches them is what came down, each rank's own copy of each result (a
        # leaf in the leaf role sends each result it takes down to all 4: 4x). Bounds,
        # not equalities: a loaded software switch may drop a frame (the ranks' loss
        # recovery repairs it), and a leaf floods a rank's start-up frames to the others.
        assert up["tx_packets"] <= sum(c["rx_packets"] for c in hosts), (leaf, up, hosts)
        assert sum(c["tx_packets"] for c in hosts) <= 1.5 * up["rx_packets"], (leaf, up, hosts)


def test_a_restarted_leaf_is_restored_alone(target):
    """A leaf's switch process reboots (no pipeline, no entries): the fabric controller's
    ensure() restores that switch alone over its own P4Runtime session, and a new job
    runs exact through it again."""
    opts = p4net.demo.Options(
        workers=8, size=2000, dtype="int32", target=target, slots=4, deadline=60.0, quiet=True
    )
    with p4net.demo.DemoNetwork(target, 8, topo=topology.TWO_LEVEL) as net:
        first = net.run_jobs(opts)
        assert first.all_matched, [(o.rank, o.error) for o in first.outcomes]
        leaf = topology.LEAF_NAMES[1]
        net.net.get(leaf).runner.restart()
        assert net.ctl.ensure() == [leaf]
        again = net.run_jobs(opts)
        assert again.all_matched, [(o.rank, o.error) for o in again.outcomes]


def test_a_spine_rebooted_mid_job_under_loss_fails_every_rank_at_once(target):
    """The spine's switch process reboots while 8 ranks (4 behind each leaf) loop over
    allreduces with 5 % loss on every link; the fabric controller restores it alone.
    Every rank must end soon after in SwitchStateLost -- the job comes back lost on the
    spine and is marked lost on both leaves (FabricController.spread_lost), so each
    rank's next packet, whatever slot it waits on and whatever its leaf holds, is
    answered STATE_LOST -- not at its 60 s deadline, and none in another error."""
    with p4net.demo.DemoNetwork(target, 8, topo=topology.TWO_LEVEL) as net:
        ctl, hosts = net.ctl, net.hosts[:8]
        addresses = [
            WorkerAddress(r, h.port, h.mac, h.ip, protocol.UDP_PORT_BASE)
            for r, h in enumerate(hosts)
        ]
        job = ctl.jobs.create(net.next_job, addresses, 4)
        net.next_job += 1
        ctl.jobs.set_loss(job.job, ingress=0.05, egress=0.05, seed=3)
        x = np.ones(4 * protocol.BLOCK_VALUES, np.int32)
        procs = [
            net.spawn_worker(job.job, d, h, x, 60.0, ["--repeat", "1000000"])
            for d, h in zip(job.descriptors(ctl.jobs.switch), hosts)
        ]
        try:
            redone, took = net.reboot_while_running(topology.SWITCH_NAME, procs)
            assert redone == [topology.SWITCH_NAME]  # the spine alone
            assert took < 20, f"the ranks failed only {took:.1f} s after the spine came back"
            for r in range(8):
                error = net.report(job.job, r)["error"]
                assert error.startswith("SwitchStateLost"), (r, error)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
