"""A job across a two-level fabric in one process: three in-process softswitches joined by
links, each programmed over its own P4Runtime session by the fabric controller, hostlib
workers on the leaves' ports, exact int32 sums checked against numpy. The job runs in the
leaf and spine roles: each leaf aggregates its ranks and sends one contribution up."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from controlplane.config import parse
from controlplane.fabric import FabricController, common_slot_base
from controlplane.jobs import JobTable
from controlplane.stats import job_stats
from p4net.harness import allreduce_on_leaves
from p4reduce.addresses import WorkerAddress
from p4reduce.job import Job, JobError
from p4reduce.wire import UDP_PORT_BASE
from softswitch.inprocess import two_level_ranks

from .conftest import HOSTS, LEAVES, UPLINK, fabric_config, host_ip, host_mac, new_fabric


def ranks(per_leaf: int, leaves: int = len(LEAVES)) -> list[WorkerAddress]:
    """`per_leaf` ranks on each leaf's first ports, l1's first."""
    return two_level_ranks(leaves, per_leaf)


def allreduce(fab, ctl, job, workers, tensors) -> list[np.ndarray]:
    """Every rank's allreduce, each a hostlib Worker on its leaf's port."""
    descriptors = job.descriptors(ctl.jobs.switch)
    return allreduce_on_leaves(fab, descriptors, workers, tensors, 0.05, 30, 60)[1]


def test_job_across_the_fabric(inprocess_fabric, tmp_path):
    fab = inprocess_fabric
    config = parse(fabric_config(fab, tmp_path))
    ctl = FabricController(config)
    try:
        assert ctl.up(retries=3) == {"l1": "pushed", "l2": "pushed", "s": "pushed"}
        workers = ranks(4)
        job = ctl.jobs.create(9, workers, slots=4)
        # on the spine, the job's ranks are the leaves, each on the port towards it
        assert [w.port for w in job.workers] == [1, 2]
        # each rank sends to its leaf, with its index there as its rank on the wire
        descriptors = job.descriptors(ctl.jobs.switch)
        assert [d["rank"] for d in descriptors] == list(range(8))
        assert [d["wire_rank"] for d in descriptors] == [0, 1, 2, 3] * 2
        assert {d["switch"]["ip"] for d in descriptors[:4]} == {"10.0.0.240"}
        assert {d["worker_count"] for d in descriptors} == {8}
        # the job's epoch is new on every switch it crosses, and each records it
        epochs = {n: c.jobs.table.last_epoch for n, c in ctl.controllers.items()}
        assert epochs == {"l1": job.epoch, "l2": job.epoch, "s": job.epoch}
        rng = np.random.default_rng(5)
        tensors = [rng.integers(-1000, 1000, 700).astype(np.int32) for _ in workers]
        tensors[3][:128] = 0  # a block some ranks skip
        results = allreduce(fab, ctl, job, workers, tensors)
        exact = np.sum(tensors, axis=0, dtype=np.int64)
        for r, got in enumerate(results):
            assert isinstance(got, np.ndarray), f"rank {r}: {got!r}"
            assert np.array_equal(got, exact), f"rank {r}"
        # every switch forwarded what it got: nothing unrouted on any of them
        assert all(s["unrouted"] == 0 for s in ctl.switch_stats().values())

        # a leaf restarts: ensure() restores it alone, and a new job (a worker's session
        # holds its slots' versions, so a new session is a new job) runs through it again
        fab.switch("l2").restart()
        assert ctl.ensure() == ["l2"]
        ctl.jobs.delete(job.job)
        job = ctl.jobs.create(10, workers, slots=4)
        again = allreduce(fab, ctl, job, workers, tensors)
        assert all(np.array_equal(got, exact) for got in again), again
    finally:
        ctl.close()


def sparse_tensors(workers, blocks: int, seed: int, values: int = 64) -> list[np.ndarray]:
    """int32 tensors of `blocks` blocks of `values` values, each rank's own 1 in 5
    non-zero."""
    rng = np.random.default_rng(seed)
    tensors = []
    for _ in workers:
        t = rng.integers(-1000, 1000, (blocks, values)).astype(np.int32)
        t[rng.random(blocks) >= 0.2] = 0
        tensors.append(t.reshape(-1))
    return tensors


def nonzero_blocks(tensor: np.ndarray, values: int = 64) -> np.ndarray:
    """Which of `tensor`'s blocks of `values` values are non-zero."""
    return tensor.reshape(-1, values).any(axis=1)


def assert_silent_packets(tensors, stats, values: int = 64) -> None:
    """Each rank of a silent call sent at most its own non-zero blocks plus an announce
    and a closing packet per slot -- where it resent nothing and no rewind made it re-run
    a slot (a loaded machine may delay a round; another rank's lost result makes every
    rank re-run a slot from a rewind) -- and counted its non-zero blocks right."""
    for r, st in enumerate(stats):
        nonzero = int(np.count_nonzero(nonzero_blocks(tensors[r], values)))
        assert st.last_nonzero_blocks == nonzero, f"rank {r}"
        lossless = st.retransmissions == 0 and st.rewinds == 0
        assert not lossless or st.last_packets_sent <= nonzero + 2 * st.last_call_slots


def test_a_small_silent_job_runs_in_the_leaf_role(inprocess_fabric, tmp_path):
    """A job of silent rounds at 64 values per block runs in the leaf role however few
    its ranks (each rank sends to its leaf, its index there on the wire, and only for its
    own non-zero blocks plus an announce and at most a closing packet per slot); each
    uplink carries one frame each way per round, not each rank's. The sums are exact."""
    fab = inprocess_fabric
    ctl = FabricController(parse(fabric_config(fab, tmp_path)))
    try:
        ctl.up(retries=3)
        workers = ranks(4)
        job = ctl.jobs.create(18, workers, slots=4, encoding="lanes", round_mode="silent")
        assert [w.port for w in job.workers] == [1, 2]  # the spine's ranks: the leaves
        descriptors = job.descriptors(ctl.jobs.switch)
        assert [d["wire_rank"] for d in descriptors] == [0, 1, 2, 3] * 2
        assert {d["round_mode"] for d in descriptors} == {"silent"}
        tensors = sparse_tensors(workers, 40, seed=12)
        exact = np.sum(tensors, axis=0, dtype=np.int64)
        before = fab.link_counts()
        _, results, stats = allreduce_on_leaves(fab, descriptors, workers, tensors, 0.05, 30, 60)
        for r, got in enumerate(results):
            assert isinstance(got, np.ndarray), f"rank {r}: {got!r}"
            assert np.array_equal(got, exact), f"rank {r}"
        # the job's rounds: each block of the union, an announce and at most a closing
        # round per slot
        union = int(np.count_nonzero(np.any([nonzero_blocks(t) for t in tensors], axis=0)))
        rounds = union + 2 * stats[0].last_call_slots
        assert_silent_packets(tensors, stats)
        if all(st.retransmissions == 0 for st in stats):  # one frame each way per round
            after = fab.link_counts()
            ends = [(leaf, UPLINK) for leaf in LEAVES] + [("s", 1), ("s", 2)]
            for end in ends:
                sent = after[end].frames - (before[end].frames if end in before else 0)
                assert 0 < sent <= rounds, (end, sent, rounds)
    finally:
        ctl.close()


def test_a_silent_job_of_wide_blocks_runs_at_the_spine_alone(inprocess_fabric, tmp_path):
    """A job of silent rounds at more values per block than a leaf's empty partial can
    grow to (SKIP_GROWS_TO_VALUES) is the spine's alone: its ranks send to the spine,
    through their leaves at layer 2, and each sends only for its own non-zero blocks
    (plus an announce and at most a closing packet per slot). The leaves hold nothing of
    it; the sums are exact, also with 5 % of every uplink's frames lost each way and a
    drop simulator losing 5 % at the spine."""
    fab = inprocess_fabric
    ctl = FabricController(parse(fabric_config(fab, tmp_path)))
    try:
        ctl.up(retries=3)
        workers = ranks(4)
        job = ctl.jobs.create(
            14, workers, slots=4, round_mode="silent", encoding="lanes", block_values=256
        )
        # the spine's ranks are the job's, each on the spine's port towards its leaf
        assert [w.port for w in job.workers] == [1] * 4 + [2] * 4
        assert [c.jobs.jobs() for n, c in ctl.controllers.items() if n != "s"] == [[], []]
        descriptors = job.descriptors(ctl.jobs.switch)
        assert {d["switch"]["ip"] for d in descriptors} == {ctl.jobs.switch.ip}
        assert all("wire_rank" not in d or d["wire_rank"] is None for d in descriptors)
        assert {d["round_mode"] for d in descriptors} == {"silent"}
        tensors = sparse_tensors(workers, 12, seed=8, values=256)
        exact = np.sum(tensors, axis=0, dtype=np.int64)
        _, results, stats = allreduce_on_leaves(fab, descriptors, workers, tensors, 0.05, 30, 60)
        for r, got in enumerate(results):
            assert isinstance(got, np.ndarray), f"rank {r}: {got!r}"
            assert np.array_equal(got, exact), f"rank {r}"
        assert_silent_packets(tensors, stats, 256)
        assert all(s["unrouted"] == 0 for s in ctl.switch_stats().values())

        ctl.jobs.delete(job.job)
        silent_call_under_loss(fab, ctl, 15, workers, tensors, seed=5, block_values=256)
    finally:
        ctl.close()


def silent_call_under_loss(
    fab, ctl, job_id, workers, tensors, seed: int, block_values: int | None = None
) -> None:
    """A silent lanes job's call of int32 `tensors`, 5 % of every frame lost on every link
    each way and by every switch's drop simulator: exact on every rank."""
    job = ctl.jobs.create(
        job_id, workers, slots=4, round_mode="silent", encoding="lanes", block_values=block_values
    )
    ctl.jobs.set_loss(job.job, ingress=0.05, seed=seed)
    fab.set_loss(0.05, seed=seed + 1)
    exact = np.sum(tensors, axis=0, dtype=np.int64)
    descriptors = job.descriptors(ctl.jobs.switch)
    _, results, _ = allreduce_on_leaves(fab, descriptors, workers, tensors, 0.05, 30, 90)
    bad = [r for r, got in enumerate(results) if not np.array_equal(got, exact)]
    assert not bad, [results[r] for r in bad[:2]]
    assert sum(c.lost for c in fab.link_counts().values()) > 0


def test_fabric_refusals(inprocess_fabric, tmp_path):
    ctl = FabricController(parse(fabric_config(inprocess_fabric, tmp_path)))
    try:
        ctl.up(retries=3)
        # a fabric's default is its target's, silent rounds on softswitch, as on one switch
        job = ctl.jobs.create(1, ranks(2))
        assert job.round_mode == "silent" and [w.port for w in job.workers] == [1, 2]
        ctl.jobs.delete(job.job)
        wrong_port = ranks(2)
        wrong_port[1] = WorkerAddress(1, 3, wrong_port[1].mac, wrong_port[1].ip, UDP_PORT_BASE)
        with pytest.raises(JobError, match="is on l1:2, not port 3"):
            ctl.jobs.create(1, wrong_port)
        assert ctl.jobs.jobs() == []
    finally:
        ctl.close()


def test_static_job_of_the_fabric_configuration(inprocess_fabric, tmp_path):
    workers = [
        {
            "rank": r,
            "switch": LEAVES[r % 2],
            "port": 1 + r // 2,
            "mac": host_mac(1 + r % 2, 1 + r // 2),
            "ip": host_ip(1 + r % 2, 1 + r // 2),
        }
        for r in range(4)
    ]
    data = fabric_config(inprocess_fabric, tmp_path, [{"job": 3, "slots": 2, "workers": workers}])
    ctl = FabricController(parse(data))
    try:
        ctl.up(retries=3)
        (job,) = ctl.jobs.jobs()
        assert job.job == 3 and [w.port for w in job.workers] == [1, 2]  # the leaves
        assert [d["switch"]["ip"] for d in job.descriptors(ctl.jobs.switch)] == [
            "10.0.0.240",
            "10.0.0.241",
        ] * 2
    finally:
        ctl.close()


def job_on(slots: tuple[int, int], job: int = 1) -> Job:
    return Job(job, job, slots[0], slots[1] - slots[0], 1, [], "lanes")


def test_slots_are_free_on_every_switch_a_job_crosses():
    spine = JobTable(jobs={1: job_on((0, 4))})
    leaf = JobTable(jobs={2: job_on((6, 10), 2)})
    assert common_slot_base([spine], 4, 16) == 4
    assert common_slot_base([spine, leaf], 4, 16) == 10
    assert common_slot_base([spine, leaf], 2, 16) == 4
    with pytest.raises(JobError, match="slot pool exhausted"):
        common_slot_base([spine, leaf], 7, 16)


def test_a_job_larger_than_one_bitmap(inprocess_fabric, tmp_path):
    """34 ranks (17 per leaf), packed: more than one switch's bitmap holds; the packed
    bias is the whole job's on both levels, so the sums are exact."""
    fab = inprocess_fabric
    ctl = FabricController(parse(fabric_config(fab, tmp_path)))
    try:
        ctl.up(retries=3)
        workers = ranks(HOSTS)
        job = ctl.jobs.create(4, workers, slots=4, encoding="packed")
        assert job.worker_count == 2 * HOSTS > 32
        rng = np.random.default_rng(11)
        tensors = [rng.integers(-3000, 3000, 300).astype(np.int32) for _ in workers]
        exact = np.sum(tensors, axis=0, dtype=np.int64)
        results = allreduce(fab, ctl, job, workers, tensors)
        bad = [r for r, got in enumerate(results) if not np.array_equal(got, exact)]
        assert not bad, [results[r] for r in bad[:2]]
    finally:
        ctl.close()


def test_a_silent_job_larger_than_one_bitmap_runs_in_the_leaf_role(inprocess_fabric, tmp_path):
    """34 ranks in silent rounds, packed: each leaf aggregates its ranks, which send only
    for their own non-zero blocks (plus an announce and at most a closing packet per
    slot), and sends the spine a partial every round, an empty one when none of its ranks
    took part; the spine's rounds wait for both leaves. The sums are exact, also with 5 %
    of every uplink's frames lost each way and a drop simulator losing 5 % on every
    switch."""
    fab = inprocess_fabric
    ctl = FabricController(parse(fabric_config(fab, tmp_path)))
    try:
        ctl.up(retries=3)
        workers = ranks(HOSTS)
        job = ctl.jobs.create(16, workers, slots=4, round_mode="silent", encoding="packed")
        assert [w.port for w in job.workers] == [1, 2]  # the spine's ranks: the leaves
        descriptors = job.descriptors(ctl.jobs.switch)
        assert {d["round_mode"] for d in descriptors} == {"silent"}
        assert [d["wire_rank"] for d in descriptors] == list(range(HOSTS)) * 2
        tensors = [t.astype(np.float32) for t in sparse_tensors(workers, 24, seed=9)]
        exact = np.sum(tensors, axis=0, dtype=np.float64)
        _, results, stats = allreduce_on_leaves(fab, descriptors, workers, tensors, 0.05, 30, 90)
        for r, got in enumerate(results):
            assert isinstance(got, np.ndarray), f"rank {r}: {got!r}"
            assert np.allclose(got, exact, rtol=1e-5, atol=1e-2), f"rank {r}"
        assert_silent_packets(tensors, stats)
        ctl.jobs.delete(job.job)
        silent_call_under_loss(fab, ctl, 17, workers, sparse_tensors(workers, 24, seed=10), 7)
    finally:
        ctl.close()


def test_a_silent_job_larger_than_one_bitmap_of_wide_blocks_runs_in_the_leaf_role(
    inprocess_fabric, tmp_path
):
    """34 ranks in silent rounds at 256 values per block: more than the spine alone could
    hold, so in the leaf role, the ranks' ANNOUNCEs carrying a block after the fingerprint
    range (wire.announce_carries_block) from which each leaf makes its empty partials
    after an announce or rewind round. The sums are exact, lossless and with 5 % of every
    frame lost on every link and by every switch's drop simulator (rewind rounds)."""
    fab = inprocess_fabric
    ctl = FabricController(parse(fabric_config(fab, tmp_path)))
    try:
        ctl.up(retries=3)
        workers = ranks(HOSTS)
        job = ctl.jobs.create(
            18, workers, slots=4, round_mode="silent", encoding="lanes", block_values=256
        )
        assert [w.port for w in job.workers] == [1, 2]  # the spine's ranks: the leaves
        assert job.announce_block
        descriptors = job.descriptors(ctl.jobs.switch)
        assert [d["wire_rank"] for d in descriptors] == list(range(HOSTS)) * 2
        tensors = sparse_tensors(workers, 16, seed=11, values=256)
        exact = np.sum(tensors, axis=0, dtype=np.int64)
        _, results, stats = allreduce_on_leaves(fab, descriptors, workers, tensors, 0.05, 30, 90)
        bad = [r for r, got in enumerate(results) if not np.array_equal(got, exact)]
        assert not bad, [results[r] for r in bad[:2]]
        assert_silent_packets(tensors, stats, 256)
        ctl.jobs.delete(job.job)
        silent_call_under_loss(
            fab, ctl, 19, workers, sparse_tensors(workers, 16, seed=12, values=256), 13, 256
        )
    finally:
        ctl.close()


def test_four_leaves(tmp_path):
    """8 ranks on each of 4 leaves: every leaf's frames reach the spine through its own
    uplink and the results come back down each."""
    leaves = ("l1", "l2", "l3", "l4")
    with new_fabric(leaves) as fab:
        ctl = FabricController(parse(fabric_config(fab, tmp_path, leaves=leaves)))
        try:
            ctl.up(retries=3)
            workers = ranks(8, len(leaves))
            job = ctl.jobs.create(2, workers, slots=4)
            assert sorted({w.port for w in job.workers}) == [1, 2, 3, 4]
            rng = np.random.default_rng(3)
            tensors = [rng.integers(-500, 500, 200).astype(np.int32) for _ in workers]
            exact = np.sum(tensors, axis=0, dtype=np.int64)
            results = allreduce(fab, ctl, job, workers, tensors)
            assert all(np.array_equal(got, exact) for got in results), results[:2]
        finally:
            ctl.close()


def test_watch_restores_a_restarted_leaf(inprocess_fabric, tmp_path):
    """`up --watch`'s loop: a leaf that restarts (no pipeline, no entries) is configured
    again while the others are left alone, the job that ran through it is lost on every
    switch (the leaf lost it: FabricController.spread_lost), and a new job runs through
    it afterwards."""
    fab = inprocess_fabric
    ctl = FabricController(parse(fabric_config(fab, tmp_path)))
    watcher = threading.Thread(target=ctl.watch, kwargs={"interval": 0.1})
    try:
        ctl.up(retries=3)
        ctl.jobs.create(5, ranks(2), slots=2)
        kept = {n: c.jobs.table.pipeline_cookie for n, c in ctl.controllers.items()}
        watcher.start()
        fab.switch("l1").restart()
        leaf = ctl.controllers["l1"]
        deadline = time.monotonic() + 20
        while leaf.jobs.table.pipeline_cookie == kept["l1"] and time.monotonic() < deadline:
            time.sleep(0.1)
        ctl.stop()
        watcher.join(10)
        now = {n: c.jobs.table.pipeline_cookie for n, c in ctl.controllers.items()}
        assert now["l1"] != kept["l1"], "the restarted leaf was not pushed a pipeline again"
        assert now["l2"] == kept["l2"] and now["s"] == kept["s"]
        parts = {n: [(j.job, j.lost) for j in c.jobs.jobs()] for n, c in ctl.controllers.items()}
        assert parts == {n: [(5, True)] for n in ("s", "l1", "l2")}, parts
        workers = ranks(2)
        job = ctl.jobs.create(6, workers, slots=2)
        tensors = [np.full(100, r + 1, np.int32) for r in range(len(workers))]
        results = allreduce(fab, ctl, job, workers, tensors)
        assert all(np.array_equal(got, np.full(100, 10)) for got in results), results
    finally:
        ctl.stop()
        if watcher.is_alive():
            watcher.join(10)
        ctl.close()


def test_loss_on_every_link_and_what_each_uplink_carries(inprocess_fabric, tmp_path):
    """Every uplink loses 5 % of its frames each way: the workers' retransmissions repair
    every loss (exact sums). What each uplink carried is counted per end: one contribution
    up and one result down per round (and the repairs), not one per rank."""
    fab = inprocess_fabric
    ctl = FabricController(parse(fabric_config(fab, tmp_path)))
    try:
        ctl.up(retries=3)
        workers = ranks(4)
        job = ctl.jobs.create(8, workers, slots=4)
        rng = np.random.default_rng(21)
        tensors = [rng.integers(-1000, 1000, 64 * 40).astype(np.int32) for _ in workers]
        exact = np.sum(tensors, axis=0, dtype=np.int64)
        fab.set_loss(0.05, seed=3)
        results = allreduce(fab, ctl, job, workers, tensors)
        assert all(np.array_equal(got, exact) for got in results), results[:2]
        counts = fab.link_counts()
        assert all(counts[end].lost > 0 for end in counts), counts
        rounds = job_stats(ctl.conn, job.job_index)["rounds_completed"]
        for i, leaf in enumerate(LEAVES):
            up, down = counts[(leaf, HOSTS + 1)], counts[("s", i + 1)]
            assert rounds <= up.frames < 2 * rounds, (up, rounds)
            assert rounds * 0.9 <= down.frames < 2 * rounds, (down, rounds)
    finally:
        ctl.close()


def test_64_ranks_on_four_leaves_with_loss_on_every_link(tmp_path):
    """The leaf role at scale: 64 ranks, 16 on each of 4 leaves, exact int32 sums; then
    5 % loss on every link at once -- each rank's link both ways (the leaves' drop
    simulators) and each uplink both ways (the fabric's links) -- repaired by the ranks'
    retransmissions, the sums still exact."""
    leaves = ("l1", "l2", "l3", "l4")
    with new_fabric(leaves) as fab:
        ctl = FabricController(parse(fabric_config(fab, tmp_path, leaves=leaves)))
        try:
            ctl.up(retries=3)
            workers = ranks(16, len(leaves))
            rng = np.random.default_rng(64)
            tensors = [rng.integers(-1000, 1000, 64 * 6).astype(np.int32) for _ in workers]
            tensors[5][64:128] = 0  # a block one rank skips
            exact = np.sum(tensors, axis=0, dtype=np.int64)
            job = ctl.jobs.create(12, workers, slots=4)
            assert job.worker_count == 64 and len(job.workers) == 4  # the spine's: leaves
            results = allreduce(fab, ctl, job, workers, tensors)
            assert all(np.array_equal(got, exact) for got in results), results[:2]
            ctl.jobs.delete(job.job)

            job = ctl.jobs.create(13, workers, slots=4)
            for leaf in leaves:
                ctl.controllers[leaf].jobs.set_loss(job.job, ingress=0.05, egress=0.05, seed=7)
            fab.set_loss(0.05, seed=9)
            results = allreduce(fab, ctl, job, workers, tensors)
            bad = [r for r, got in enumerate(results) if not np.array_equal(got, exact)]
            assert not bad, [results[r] for r in bad[:2]]
            counts = fab.link_counts()
            # each direction lost frames (per link, ~50 frames at 5 % may lose none by chance)
            up = sum(c.lost for (switch, _), c in counts.items() if switch != "s")
            down = sum(c.lost for (switch, _), c in counts.items() if switch == "s")
            assert up > 0 and down > 0, counts
        finally:
            ctl.close()
