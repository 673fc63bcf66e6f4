"""The controller against a real switch: bring-up, job lifecycle, refusals, arbitration,
switch and controller restarts. Packets prove that what was configured works."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from p4reduce.addresses import WorkerAddress
from controlplane.connection import NotPrimaryError, SwitchConnection
from controlplane.controller import Controller
from p4reduce.job import JobError
from p4reduce.target import TARGETS
from controlplane import forwarding
from controlplane.stats import job_stats
from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Endpoints, Header, MsgType

from .conftest import SWITCH_IP, SWITCH_MAC, host


def workers(ports, udp=0x5031):
    return [WorkerAddress(rank, port, *host(port), udp) for rank, port in enumerate(ports)]


def run_round(proc, descriptors, msg_type, values=None, version=0, block=END, nxt=0, flags=0):
    """Every worker of a job sends one packet on slot 0; returns what each one gets back.
    A packed-encoding job's values go out biased by floor((2^31-1)/N) with FLAG_PACKED, and
    come back with N times the bias removed (docs/protocol.md section 10); a silent job's
    packets carry FLAG_SILENT (section 6)."""
    packed = descriptors[0].get("encoding") == "packed"
    if descriptors[0].get("round_mode") == "silent":
        flags |= p.Flag.SILENT  # every packet of a silent job says so
    n = descriptors[0]["worker_count"]
    bias = ((1 << 31) - 1) // n
    port_of = {}
    for d in descriptors:
        w = d["worker"]
        port = int(w["ip"].rsplit(".", 1)[1])  # host(port) puts port in the IP
        port_of[d["rank"]] = port
        ep = Endpoints(
            w["mac"],
            d["switch"]["mac"],
            w["ip"],
            d["switch"]["ip"],
            w["udp_port"],
            d["switch"]["udp_port"],
        )
        h = Header.make(
            msg_type,
            job=d["job"],
            epoch=d["epoch"],
            slot=0,
            rank=d["rank"],
            slot_version=version,
            block=block,
            next_block=nxt,
            flags=(p.Flag.PACKED if packed else 0) | flags,
        )
        fp = p.fingerprint(np.int32, 64)
        mine = None if values is None else np.asarray(values[d["rank"]], np.int64)
        if mine is not None and packed:
            mine = (mine + bias).astype(np.uint32).view(np.int32)
        proc.send(
            port,
            p.build_frame(
                ep, h, mine, fingerprint=(fp, fp) if msg_type == MsgType.ANNOUNCE else None
            ),
        )
    out = {}
    for rank, port in port_of.items():
        raw = proc.recv(port, 3.0)
        got = None if raw is None else p.parse_frame(raw)
        if got is not None and packed and got.values is not None:
            sums = got.values.view(np.uint32).astype(np.int64) - n * bias
            got = got._replace(values=sums)
        out[rank] = got
    return out


def test_a_job_without_a_slot_count_gets_bmv2s_default(controller):
    job = controller.jobs.create(8, workers([3]))
    assert job.slot_count == 32  # bmv2's ports hold ~32 unprocessed frames
    controller.jobs.delete(8)


def test_bring_up_create_use_delete_recreate(controller, switch_process):
    job = controller.jobs.create(7, workers([1, 2]), slots=8)
    descriptors = job.descriptors(controller.jobs.switch)
    assert descriptors[1]["rank"] == 1 and descriptors[1]["slot_count"] == 8
    assert descriptors[0]["switch"] == {
        "mac": SWITCH_MAC,
        "ip": SWITCH_IP,
        "udp_port": p.UDP_PORT_BASE,
    }
    res = run_round(switch_process, descriptors, MsgType.ANNOUNCE, nxt=0)
    assert all(r is not None and r.header.next_block == 0 for r in res.values())
    vals = {0: np.arange(p.BLOCK_VALUES), 1: np.arange(p.BLOCK_VALUES) * 3}
    half = run_round(switch_process, descriptors[:1], MsgType.DATA, vals, version=1, block=0)
    assert half[0] is None  # rank 1 missing: no result yet
    controller.jobs.delete(7)
    assert controller.jobs.jobs() == []
    assert all(
        r is None for r in run_round(switch_process, descriptors, MsgType.ANNOUNCE).values()
    )  # no admission any more
    again = controller.jobs.create(7, workers([1, 2]), slots=8)
    assert again.slot_base == job.slot_base and again.epoch != job.epoch
    descriptors = again.descriptors(controller.jobs.switch)
    res = run_round(switch_process, descriptors, MsgType.ANNOUNCE, nxt=0)
    assert all(r.header.next_block == 0 for r in res.values())
    res = run_round(switch_process, descriptors, MsgType.DATA, vals, version=1, block=0)
    for r in res.values():  # nothing left over from the half round
        assert np.array_equal(r.values, vals[0] + vals[1])


def test_two_jobs_get_disjoint_slots_and_both_work(controller, switch_process):
    a = controller.jobs.create(1, workers([1, 2]), slots=100)
    b = controller.jobs.create(2, workers([3, 4]), slots=50)
    assert a.slot_base + a.slot_count <= b.slot_base
    assert a.job_index != b.job_index
    for job in (a, b):
        res = run_round(
            switch_process, job.descriptors(controller.jobs.switch), MsgType.ANNOUNCE, nxt=job.job
        )
        assert all(r.header.next_block == job.job and r.header.job == job.job for r in res.values())


def test_refusals_are_clear(controller):
    jobs = controller.jobs
    pool_slots = jobs.sizes.pool_slots  # from the P4Info the controller pushed
    assert pool_slots == controller.conn.p4.register("slot_epoch").size > 10
    jobs.create(1, workers([1, 2]), slots=pool_slots - 10)
    cases = [
        (lambda: jobs.create(1, workers([3]), 1), "already exists"),
        (lambda: jobs.create(2, workers([3]), 11), "slot pool exhausted"),
        (lambda: jobs.create(2, workers([3]), pool_slots + 1), "the switch's pool"),
        (
            lambda: jobs.create(
                3, [WorkerAddress(0, 3, *host(3), 0x5030), WorkerAddress(0, 4, *host(4), 0x5030)], 1
            ),
            "duplicate rank",
        ),
        (
            lambda: jobs.create(
                4, [WorkerAddress(0, 3, *host(3), 0x5030), WorkerAddress(1, 3, *host(3), 0x5030)], 1
            ),
            "duplicate port",
        ),
        (lambda: jobs.create(5, workers([3, 9]), 1), "unknown switch port"),
        (
            lambda: jobs.create(6, [WorkerAddress(r, 1, *host(1), 0x5030) for r in range(33)], 1),
            "at most 32",
        ),
        (lambda: jobs.delete(99), "no job 99"),
    ]
    for call, needle in cases:
        with pytest.raises(JobError, match=needle):
            call()
    # a refused request left nothing behind: the pool still has exactly 10 free slots
    assert jobs.create(8, workers([3]), 10).slot_base == pool_slots - 10


def test_delete_finishes_what_a_half_done_delete_left(controller):
    """The switch answers NOT_FOUND for entries and groups a failed delete already removed
    (both targets); the repeated delete takes that as done instead of failing."""
    from controlplane import admission, result_destination

    jobs = controller.jobs
    job = jobs.create(4, workers([1, 2]), 2)
    jobs.set_loss(4, egress=0.5)
    admission.revoke(
        controller.conn, admission.job_parameters(job), job.workers
    )  # half of a delete
    result_destination.remove_destinations(controller.conn, job.job, job.workers[:1])
    assert jobs.delete(4).job == 4
    assert 4 not in {j.job for j in jobs.jobs()}
    again = jobs.create(4, workers([1, 2]), 2)  # nothing stale stands in its way
    assert again.slot_base == job.slot_base and again.epoch > job.epoch


def test_lower_election_id_cannot_write(controller, switch_process):
    backup = SwitchConnection(switch_process.grpc_addr, election_id=5).connect()
    try:
        assert not backup.is_primary
        assert backup.use_pipeline_of_switch()
        with pytest.raises(NotPrimaryError):
            forwarding.add_host(backup, "02:00:00:00:00:09", 1)
    finally:
        backup.close()
    controller.jobs.create(3, workers([1]), 1)  # the primary still can


def test_a_switch_restart_leaves_its_jobs_lost_and_the_switch_serving(controller, switch_process):
    """The restart cleared the job's slots: `ensure` admits it again as lost (admit_lost),
    so even a first ANNOUNCE (no rank had a result yet) is answered STATE_LOST, and the
    state file says so. A job created after the restart, and the lost one created again,
    run as before."""
    job = controller.jobs.create(5, workers([1, 2]), slots=4)
    assert not job.lost
    switch_process.restart()
    assert controller.ensure() is True
    assert controller.ensure() is False  # nothing more to do
    assert [j.lost for j in controller.jobs.jobs()] == [True]
    controller.jobs.table.reload()
    assert controller.jobs.table.jobs[5].lost  # as the state file has it
    res = run_round(
        switch_process, job.descriptors(controller.jobs.switch), MsgType.ANNOUNCE, nxt=2
    )
    assert all(r is not None and r.header.flags & p.Flag.STATE_LOST for r in res.values())
    assert job_stats(controller.jobs.conn, job.job_index)["state_lost"] == 2
    later = controller.jobs.create(6, workers([3, 4]), slots=4)
    res = run_round(
        switch_process, later.descriptors(controller.jobs.switch), MsgType.ANNOUNCE, nxt=2
    )
    assert all(r is not None and r.header.next_block == 2 for r in res.values())
    assert not any(r.header.flags & p.Flag.STATE_LOST for r in res.values())
    with pytest.raises(JobError, match="job 5 already exists and is lost .* delete it"):
        controller.jobs.create(5, workers([1, 2]), slots=4)
    controller.jobs.delete(5)
    again = controller.jobs.create(5, workers([1, 2]), slots=4)
    assert not again.lost and again.epoch != job.epoch
    res = run_round(
        switch_process, again.descriptors(controller.jobs.switch), MsgType.ANNOUNCE, nxt=3
    )
    assert all(r is not None and r.header.next_block == 3 for r in res.values())
    assert not any(r.header.flags & p.Flag.STATE_LOST for r in res.values())


def test_a_silent_job_is_created_and_runs_silent_rounds(controller, switch_process):
    """`round_mode` "silent": the descriptors say so, admission takes FLAG_SILENT, and a
    data round of a block only rank 0 has completes on rank 0's DATA alone, its result
    (packed: the silent rank's bias filled in by the switch) reaching both ranks."""
    if "silent" not in TARGETS["bmv2"].round_modes:
        pytest.skip("this build of the v1model program runs every-rank rounds only")
    job = controller.jobs.create(13, workers([1, 2]), slots=4, round_mode="silent")
    assert job.round_mode == "silent"
    descriptors = job.descriptors(controller.jobs.switch)
    assert all(d["round_mode"] == "silent" for d in descriptors)
    silent = p.Flag.SILENT
    # rank 1's slot is all zero: it announces END_OF_STREAM and waits
    assert run_round(switch_process, descriptors[1:], MsgType.ANNOUNCE, nxt=END)[1] is None
    res = run_round(switch_process, descriptors[:1], MsgType.ANNOUNCE, nxt=0)
    assert res[0].header.next_block == 0 and res[0].header.flags & silent
    vals = {0: np.arange(p.BLOCK_VALUES) - 7}
    res = run_round(switch_process, descriptors[:1], MsgType.DATA, vals, 1, 0, END)
    assert np.array_equal(res[0].values, vals[0]) and res[0].header.next_block == END
    bias = ((1 << 31) - 1) // 2
    got = [p.parse_frame(switch_process.recv(2, 3.0)) for _ in range(2)]  # rank 1's copies
    assert [g.header.block for g in got] == [END, 0]
    assert np.array_equal(got[1].values.view(np.uint32).astype(np.int64) - 2 * bias, vals[0])
    stats = job_stats(controller.jobs.conn, job.job_index)
    assert stats["rounds_completed"] == 2 and stats["rewinds"] == 0
    every = [dict(d, round_mode="every_rank") for d in descriptors]  # no FLAG_SILENT
    every = run_round(switch_process, every, MsgType.SKIP, version=0, block=END, nxt=END)
    assert all(r is None for r in every.values())
    assert job_stats(controller.jobs.conn, job.job_index)["wrong_encoding"] == 2
    controller.jobs.delete(13)


def test_controller_restart_keeps_jobs_and_allocation(config, controller):
    first = controller.jobs.create(11, workers([1]), slots=30)
    controller.close()
    again = Controller(config)
    try:
        assert again.attach()
        assert [j.job for j in again.jobs.jobs()] == [11]
        second = again.jobs.create(12, workers([2]), slots=5)
        assert second.slot_base >= first.slot_base + first.slot_count
        assert second.epoch > first.epoch
    finally:
        again.close()


def test_cli_end_to_end(config, switch_process, tmp_path):
    cfg = tmp_path / "sw.toml"
    cfg.write_text(
        f'[switch]\ngrpc_addr = "{switch_process.grpc_addr}"\nports = [1, 2, 3, 4]\n'
        f'state_file = "state.json"\n'
    )

    def ctl(*args):
        return subprocess.run(
            [sys.executable, "-m", "controlplane.cli", "-c", str(cfg), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert ctl("up").returncode == 0
    out = ctl(
        "--json",
        "job",
        "create",
        "--job",
        "4",
        "--slots",
        "16",
        "--worker",
        "0:1:02:00:00:00:00:01:10.0.0.1",
        "--worker",
        "1:2:02:00:00:00:00:02:10.0.0.2:20529",
        "--descriptors",
        str(tmp_path / "desc"),
    )
    assert out.returncode == 0, out.stderr
    created = json.loads(out.stdout)
    assert created["descriptors"][1]["worker"]["udp_port"] == 20529
    assert json.loads((tmp_path / "desc" / "job4-rank1.json").read_text())["rank"] == 1
    listed = ctl("job", "list")
    assert listed.returncode == 0 and "0..15" in listed.stdout
    assert created["descriptors"][0]["int32_halves"] is True  # a packed job's halves
    refused = ctl("job", "create", "--job", "4", "--worker", "0:3:02:00:00:00:00:03:10.0.0.3")
    assert refused.returncode == 1 and "already exists" in refused.stderr
    halves = ctl(
        "--json",
        *("job", "create", "--job", "5", "--encoding", "lanes", "--int32-halves"),
        *("--worker", "0:3:02:00:00:00:00:03:10.0.0.3"),
    )
    assert halves.returncode == 0, halves.stderr
    assert json.loads(halves.stdout)["descriptors"][0]["int32_halves"] is True
    assert ctl("job", "delete", "5").returncode == 0
    wide = ctl(
        "--json",
        *("job", "create", "--job", "6", "--block-values", "2048"),
        *("--worker", "0:3:02:00:00:00:00:03:10.0.0.3"),
    )
    assert wide.returncode == 0, wide.stderr
    assert json.loads(wide.stdout)["descriptors"][0]["block_values"] == 2048
    # the job's round mode: the target's default, in the descriptor and the job list
    mode = TARGETS["bmv2"].default_round_mode
    assert json.loads(wide.stdout)["descriptors"][0]["round_mode"] == mode
    listed = ctl("job", "list")
    assert "block_values" in listed.stdout and "2048" in listed.stdout.splitlines()[-1]
    assert "round_mode" in listed.stdout and mode in listed.stdout.splitlines()[-1]
    assert (
        json.loads(ctl("--json", "stats", "--job", "6").stdout)["jobs"]["6"]["block_values"] == 2048
    )
    refused = ctl(
        *("job", "create", "--job", "7", "--block-values", "1000"),
        *("--worker", "0:3:02:00:00:00:00:03:10.0.0.3"),
    )
    assert refused.returncode == 1 and "1000 values per block is not available" in refused.stderr
    assert ctl("job", "delete", "6").returncode == 0
    # the window: bmv2's (first in first out) FAIR_SLOTS by default, at most the slots
    assert created["descriptors"][0]["window"] == TARGETS["bmv2"].default_window == 16
    windowed = ctl(
        "--json",
        *("job", "create", "--job", "8", "--slots", "48", "--window", "48"),
        *("--worker", "0:3:02:00:00:00:00:03:10.0.0.3"),
    )
    assert windowed.returncode == 0, windowed.stderr
    assert json.loads(windowed.stdout)["descriptors"][0]["window"] == 48
    assert "window" in ctl("job", "list").stdout.splitlines()[0]
    assert ctl("job", "delete", "8").returncode == 0
    small = ctl(
        "--json",
        *("job", "create", "--job", "9", "--slots", "4"),
        *("--worker", "0:3:02:00:00:00:00:03:10.0.0.3"),
    )
    assert json.loads(small.stdout)["descriptors"][0]["window"] == 4  # never above its slots
    assert ctl("job", "delete", "9").returncode == 0
    refused = ctl(
        *("job", "create", "--job", "10", "--slots", "8", "--window", "9"),
        *("--worker", "0:3:02:00:00:00:00:03:10.0.0.3"),
    )
    assert refused.returncode == 1
    assert "job 10: window 9 is not a number of slots in 1..8" in refused.stderr
    assert ctl("job", "show", "10").returncode == 1  # nothing of it was written
    assert ctl("drop-sim", "--job", "4", "--ingress", "0.1").returncode == 0
    stats = json.loads(ctl("--json", "stats").stdout)
    assert stats["jobs"]["4"]["aggregated"] == 0 and "drops_malformed" in stats["switch"]
    assert ctl("job", "delete", "4").returncode == 0
    assert ctl("job", "show", "4").returncode == 1
    cfg.write_text('[switch]\ngrpc_addr = "127.0.0.1:1"\nports = [1]\n')
    assert ctl("job", "list").returncode == 3
