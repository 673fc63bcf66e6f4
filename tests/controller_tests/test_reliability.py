"""Reliability, controller side, against a real switch (softswitch; simple_switch_grpc where
installed) over real P4Runtime, with real frames on veth ports:

* a new job's counters start at zero, not at a deleted job's counts;
* `up` on a switch that already runs our pipeline keeps the data plane (a half-done round
  survives it) and reconciles the tables (missing written, stale removed);
* a watching controller re-reads the state file when the switch restarts;
* a second controller with the same election id gets a message about mastership;
* a configuration without `state_file` keeps jobs between CLI calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from controlplane import forwarding, replication, stats
from controlplane.config import HostEntry
from controlplane.connection import MastershipError, SwitchConnection, table_entity
from controlplane.controller import PIPELINE_KEPT, PIPELINE_PUSHED, Controller
from controlplane.reconcile import read_entries
from hostlib import protocol as p
from hostlib.protocol import MsgType

from .conftest import count_writes, host
from .test_controller import run_round, workers


def _cli(cfg, *args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "controlplane.cli", "-c", str(cfg), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _toml(path, switch_process, extra=""):
    path.write_text(
        f'[switch]\ngrpc_addr = "{switch_process.grpc_addr}"\n'
        f"ports = [1, 2, 3, 4]\nelection_id = 10\n{extra}"
    )
    return path


# ---- item 3: per-job counters ---------------------------------------------------------


def test_recreated_job_counters_start_at_zero(controller, switch_process):
    switch_process.drain()
    # every-rank rounds: SKIPs that contribute (in silent rounds they would be queries)
    job = controller.jobs.create(7, workers([1, 2]), slots=4, round_mode="every_rank")
    descriptors = job.descriptors(controller.jobs.switch)
    # three rounds of one slot: the announce round, then two rounds of SKIPs, each taking
    # the block its previous round named (docs/protocol.md section 8)
    end = p.END_OF_STREAM
    chain = ((MsgType.ANNOUNCE, 0, end, 0), (MsgType.SKIP, 1, 0, 1), (MsgType.SKIP, 0, 1, end))
    for kind, version, block, nxt in chain:
        res = run_round(switch_process, descriptors, kind, version=version, block=block, nxt=nxt)
        assert all(r is not None for r in res.values())
    counted = stats.job_stats(controller.conn, job.job_index)
    assert counted["rounds_completed"] == 3 and counted["aggregated"] > 0, counted
    controller.jobs.delete(7)
    again = controller.jobs.create(7, workers([1, 2]), slots=4)
    assert again.job_index == job.job_index  # the index is reused ...
    fresh = stats.job_stats(controller.conn, again.job_index)
    assert fresh == dict.fromkeys(stats.JOB_COUNTERS, 0), fresh  # ... the counts are not
    run_round(switch_process, again.descriptors(controller.jobs.switch), MsgType.ANNOUNCE, nxt=0)
    assert stats.job_stats(controller.conn, again.job_index)["rounds_completed"] == 1


def test_every_per_job_counter_of_the_program_is_zeroed(controller):
    """A counter the P4 program adds per job must be in JOB_COUNTERS, or a new job would
    start with the previous job's count in it."""
    max_jobs = controller.jobs.sizes.max_jobs
    per_job = {
        c.name.rsplit(".", 1)[-1]
        for c in controller.conn.p4.counters.values()
        if c.size == max_jobs
    }
    assert per_job == set(stats.JOB_COUNTERS)


# ---- item 5: `up` again keeps the data plane, reconciles the tables ---------------------


def test_up_again_keeps_a_half_done_round(config, controller, switch_process):
    switch_process.drain()
    job = controller.jobs.create(5, workers([1, 2]), slots=4)
    descriptors = job.descriptors(controller.jobs.switch)
    run_round(switch_process, descriptors, MsgType.ANNOUNCE, nxt=0)
    vals = {0: np.arange(p.BLOCK_VALUES), 1: np.arange(p.BLOCK_VALUES) * 5}
    # rank 0 contributes to the data round of block 0; rank 1 has not yet
    assert (
        run_round(switch_process, descriptors[:1], MsgType.DATA, vals, version=1, block=0)[0]
        is None
    )
    controller.close()  # the controller restarts
    again = Controller(config)
    try:
        assert again.up() == PIPELINE_KEPT
        res = run_round(switch_process, descriptors[1:], MsgType.DATA, vals, version=1, block=0)
        assert res[1] is not None, "the round lost rank 0's contribution: slots were reset"
        assert np.array_equal(res[1].values, vals[0] + vals[1])
        assert stats.job_stats(again.conn, job.job_index)["rounds_completed"] == 2
    finally:
        again.close()


def test_up_reconciles_missing_and_stale_entries(config, controller, switch_process):
    switch_process.drain()
    job = controller.jobs.create(6, workers([1, 2]), slots=4)
    conn = controller.conn
    before = sorted(e.SerializeToString(deterministic=True) for e in read_entries(conn))
    # damage: one admission entry gone, a stale L2 entry and a stale multicast group added
    from controlplane.admission import admission_entry, job_parameters

    conn.delete(table_entity(admission_entry(conn, job_parameters(job), job.workers[1], False)))
    forwarding.add_host(conn, "02:00:00:00:00:77", 3)
    conn.insert(replication.multicast_group(9, [(3, 0)]))
    controller.close()
    again = Controller(config)
    try:
        assert again.up() == PIPELINE_KEPT
        after = sorted(e.SerializeToString(deterministic=True) for e in read_entries(again.conn))
        assert len(after) == len(before)
        assert 9 not in replication.read_groups(again.conn)
        res = run_round(switch_process, job.descriptors(again.jobs.switch), MsgType.ANNOUNCE, nxt=3)
        assert all(r is not None and r.header.next_block == 3 for r in res.values()), res
        assert again.reconcile().changes == 0  # nothing left to do
    finally:
        again.close()


def test_up_on_an_unchanged_switch_sends_no_write(config, switch_process, monkeypatch):
    """A controller restart's `up` on a switch that is already right -- L2 hosts, two jobs,
    one with a drop simulator entry, a half-done round -- sends no WriteRequest at all
    (counted at the switch in process; elsewhere the reconcile report is all zero), so
    nothing a running job uses (admission, result destinations, its multicast group) is
    rewritten, and the half-done round completes."""
    config = replace(
        config,
        switch=replace(config.switch, hosts=[HostEntry(host(port)[0], port) for port in (1, 2)]),
    )
    first = Controller(config)
    try:
        first.up()
        job = first.jobs.create(5, workers([1, 2]), slots=4)
        first.jobs.create(6, workers([3, 4]), slots=8)
        first.jobs.set_loss(6, ingress=0.25, egress=0.5, seed=7)
        descriptors = job.descriptors(first.jobs.switch)
        switch_process.drain()
        run_round(switch_process, descriptors, MsgType.ANNOUNCE, nxt=0)
        vals = {0: np.arange(p.BLOCK_VALUES), 1: np.arange(p.BLOCK_VALUES) * 3}
        run_round(switch_process, descriptors[:1], MsgType.DATA, vals, version=1, block=0)
    finally:
        first.close()
    writes = count_writes(switch_process, monkeypatch)
    again = Controller(config)
    try:
        assert again.up() == PIPELINE_KEPT
        assert again.reconciled.changes == 0 and again.reconciled.kept > 0, again.reconciled
        if writes is not None:
            assert writes == [], f"{len(writes)} WriteRequest(s) to an unchanged switch"
        res = run_round(switch_process, descriptors[1:], MsgType.DATA, vals, version=1, block=0)
        assert res[1] is not None and np.array_equal(res[1].values, vals[0] + vals[1])
    finally:
        again.close()


def test_up_pushes_a_different_pipeline_and_reset_forces_a_push(config, controller):
    controller.close()
    again = Controller(config)
    try:
        assert again.up(reset=True) == PIPELINE_PUSHED
        assert again.up() == PIPELINE_KEPT
    finally:
        again.close()


def test_up_reset_fails_running_jobs_fast_as_its_help_says(config, controller, switch_process):
    """`up --reset` pushes the pipeline: every slot is cleared, so the job is marked lost
    and every packet of it is answered STATE_LOST at once -- a rank that already had a
    result on a slot (FLAG_CONTINUED) as one whose first ANNOUNCE this is -- what makes a
    worker raise SwitchStateLost (docs/protocol.md section 8) instead of stalling; the
    help says so."""
    switch_process.drain()
    job = controller.jobs.create(5, workers([1, 2]), slots=4)
    descriptors = job.descriptors(controller.jobs.switch)
    assert all(
        r is not None for r in run_round(switch_process, descriptors, MsgType.ANNOUNCE).values()
    )
    controller.close()
    again = Controller(config)
    try:
        assert again.up(reset=True) == PIPELINE_PUSHED
        assert [(j.job, j.lost) for j in again.jobs.jobs()] == [(5, True)]
        # a first ANNOUNCE (no CONTINUED) of every rank: it would rebuild the slot
        res = run_round(switch_process, descriptors, MsgType.ANNOUNCE, nxt=1)
        for rank, got in res.items():
            assert got is not None and got.header.flags & p.Flag.STATE_LOST, (rank, got)
        vals = {0: np.arange(p.BLOCK_VALUES), 1: np.arange(p.BLOCK_VALUES)}
        res = run_round(
            switch_process,
            descriptors,
            MsgType.DATA,
            vals,
            version=1,
            block=0,
            flags=p.Flag.CONTINUED,
        )
        for rank, got in res.items():
            assert got is not None and got.header.flags & p.Flag.STATE_LOST, (rank, got)
    finally:
        again.close()


def test_up_reset_help_says_jobs_fail_and_every_slot_is_cleared(capsys):
    from controlplane.cli import main

    assert main(["up", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "EVERY job's slots are cleared: every job is then lost" in text
    assert "its ranks fail fast with SwitchStateLost" in text
    assert "stall" not in text


# ---- item 8: state file, mastership ------------------------------------------------------


def test_read_only_commands_run_beside_a_primary_with_the_same_election_id(
    config, controller, switch_process, tmp_path
):
    """`stats`, `job list` and `job show` next to a running controller (here the same
    configuration, so the same election id 10): they only read, take no part in the
    election, and the running controller stays primary and keeps writing. Before, they
    arbitrated with election id 10 and were refused for mastership."""
    job = controller.jobs.create(3, workers([1, 2]), slots=4)
    run_round(switch_process, job.descriptors(controller.jobs.switch), MsgType.ANNOUNCE)
    cfg = _toml(tmp_path / "sw.toml", switch_process, 'state_file = "jobs.json"\n')
    out = _cli(cfg, "--json", "stats")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["jobs"]["3"]["rounds_completed"] == 1
    for args in (("job", "list"), ("job", "show", "3")):
        out = _cli(cfg, "--json", *args)
        assert out.returncode == 0, out.stderr
    assert controller.conn.is_primary
    with pytest.raises(MastershipError, match="election id 10"):
        Controller(config).connect(retries=0)  # election id 10 is still the primary's
    controller.jobs.delete(3)  # and it still writes
    assert [j.job for j in controller.jobs.jobs()] == []


def test_watcher_restores_a_job_another_controller_created(config, controller, switch_process):
    """`up --watch` (controller) started before job 9 existed; another p4reduce-ctl (a
    higher election id, same state file) created it. After a switch restart the watcher
    must restore job 9 too."""
    switch_process.drain()
    other = Controller(replace(config, switch=replace(config.switch, election_id=20)))
    try:
        assert other.attach()
        job = other.jobs.create(9, workers([3, 4]), slots=8)
    finally:
        other.close()
    switch_process.restart()
    assert controller.ensure() is True
    res = run_round(
        switch_process, job.descriptors(controller.jobs.switch), MsgType.ANNOUNCE, nxt=4
    )
    # restored as lost (its slots were cleared): its ranks learn it from any packet
    assert all(r is not None and r.header.flags & p.Flag.STATE_LOST for r in res.values())
    assert [(j.job, j.lost) for j in controller.jobs.jobs()] == [(9, True)]


def test_same_election_id_is_a_clear_mastership_message(
    config, controller, switch_process, tmp_path
):
    with pytest.raises(MastershipError, match="election id 10"):
        Controller(config).connect(retries=0)
    cfg = _toml(tmp_path / "sw.toml", switch_process, 'state_file = "jobs.json"\n')
    out = _cli(cfg, "job", "create", "--job", "3", "--worker", "0:1:02:00:00:00:00:01:10.0.0.1")
    assert out.returncode == 1, out
    (line,) = out.stderr.strip().splitlines()
    assert "election id 10" in line and "--election-id" in line, line
    out = _cli(cfg, "--json", "up")
    assert out.returncode == 1 and json.loads(out.stderr)["exit_code"] == 1
    # a lower election id can still read; a higher one takes over and can write
    assert _cli(cfg, "--election-id", "5", "stats").returncode == 0
    assert (
        _cli(
            cfg,
            "--election-id",
            "11",
            "job",
            "create",
            "--job",
            "3",
            "--worker",
            "0:1:02:00:00:00:00:01:10.0.0.1",
        ).returncode
        == 0
    )


def test_config_without_state_file_keeps_jobs_between_cli_calls(switch_process, tmp_path):
    cfg = _toml(tmp_path / "nostate.toml", switch_process)
    assert _cli(cfg, "up").returncode == 0
    out = _cli(cfg, "job", "create", "--job", "4", "--worker", "0:1:02:00:00:00:00:01:10.0.0.1")
    assert out.returncode == 0, out.stderr
    listed = _cli(cfg, "--json", "job", "list")
    assert [row["job"] for row in json.loads(listed.stdout)] == [4]
    assert (tmp_path / "nostate.state.json").exists()
    assert _cli(cfg, "job", "delete", "4").returncode == 0


# ---- item 14: the CLI at the switch --------------------------------------------------------


def test_drop_sim_accepts_the_whole_documented_range(switch_process, tmp_path):
    cfg = _toml(tmp_path / "sw.toml", switch_process, 'state_file = "jobs.json"\n')
    assert _cli(cfg, "up").returncode == 0
    assert (
        _cli(
            cfg, "job", "create", "--job", "2", "--worker", "0:1:02:00:00:00:00:01:10.0.0.1"
        ).returncode
        == 0
    )
    out = _cli(cfg, "drop-sim", "--job", "2", "--ingress", "0.999999", "--egress", "0.5")
    assert out.returncode == 0, out.stderr
    conn = SwitchConnection(switch_process.grpc_addr, election_id=3).connect()
    try:
        assert conn.use_pipeline_of_switch()
        (entry,) = [
            conn.p4.describe_entry(e)
            for e in read_entries(conn)
            if conn.p4.describe_entry(e)["table"].endswith("drop_simulator")
        ]
        assert entry["params"]["ingress_threshold"] == 65535
        assert entry["params"]["egress_threshold"] == 32768
    finally:
        conn.close()
    for bad in ("1", "-0.1", "nan", "x"):
        out = _cli(cfg, "--json", "drop-sim", "--job", "2", "--ingress", bad)
        assert out.returncode == 2 and json.loads(out.stderr)["exit_code"] == 2, (bad, out)
    for bad in ("0", "-1", "inf"):
        out = _cli(cfg, "--timeout", bad, "job", "list")
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out
    assert _cli(cfg, "job", "delete", "2").returncode == 0


def test_worker_addresses_are_strict(controller):
    from p4reduce.addresses import WorkerAddress
    from p4reduce.job import JobError

    for mac, ip in (
        (" 0x2:0:0:0:0:1", "10.0.0.1"),
        ("ff:ff:ff:ff:ff:ff", "10.0.0.1"),
        ("01:00:5e:00:00:01", "10.0.0.1"),
        ("00:00:00:00:00:00", "10.0.0.1"),
        ("02:00:00:00:00:01", "0.0.0.0"),
        ("02:00:00:00:00:01", "255.255.255.255"),
        ("02:00:00:00:00:01", "224.0.0.1"),
    ):
        with pytest.raises(JobError):
            controller.jobs.create(1, [WorkerAddress(0, 1, mac, ip, 0x5030)], 1)
    assert controller.jobs.jobs() == []
    assert host(1)  # the valid form is still accepted
    controller.jobs.create(1, workers([1]), 1)


def test_up_watch_process_restores_jobs_created_by_other_cli_calls(switch_process, tmp_path):
    """The literal scenario: `p4reduce-ctl up --watch` runs; another `p4reduce-ctl` (a higher
    election id, so it can write while the watcher is connected) creates a job; the switch
    restarts; the watcher restores that job as well, lost (the restart cleared its slots):
    its ranks' packets are answered STATE_LOST, and `job list` says so."""
    import os
    import signal
    import time

    cfg = _toml(tmp_path / "sw.toml", switch_process, 'state_file = "jobs.json"\n')
    watcher = subprocess.Popen(
        [sys.executable, "-m", "controlplane.cli", "-c", str(cfg), "-v", "up", "--watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "jobs.json").exists():  # `up` done: state file written
            assert watcher.poll() is None and time.monotonic() < deadline, watcher.stderr
            time.sleep(0.1)
        out = _cli(
            cfg,
            "--election-id",
            "11",
            "--json",
            "job",
            "create",
            "--job",
            "12",
            "--worker",
            "0:3:02:00:00:00:00:03:10.0.0.3",
            "--worker",
            "1:4:02:00:00:00:00:04:10.0.0.4",
        )
        assert out.returncode == 0, out.stderr
        descriptors = json.loads(out.stdout)["descriptors"]
        switch_process.restart()
        switch_process.drain()
        deadline = time.monotonic() + 60
        while True:  # the watcher checks every second
            res = run_round(switch_process, descriptors, MsgType.ANNOUNCE, nxt=5)
            if all(r is not None and r.header.flags & p.Flag.STATE_LOST for r in res.values()):
                break
            assert watcher.poll() is None, watcher.communicate()
            assert time.monotonic() < deadline, "job 12 was not restored after the restart"
            time.sleep(0.5)
        listed = _cli(cfg, "--json", "job", "list")
        assert listed.returncode == 0, listed.stderr
        assert [(j["job"], j["state"]) for j in json.loads(listed.stdout)] == [(12, "lost")]
    finally:
        os.kill(watcher.pid, signal.SIGTERM)
        try:
            watcher.wait(timeout=10)
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.wait()


def test_a_state_file_that_does_not_know_the_push_refuses_changes(switch_process, tmp_path):
    """A lost state file starts epochs again at 1, which the slots may still hold: job
    changes are refused until `up`, which pushes (and so clears the slots)."""
    cfg = _toml(tmp_path / "sw.toml", switch_process, 'state_file = "jobs.json"\n')
    assert _cli(cfg, "up").returncode == 0
    create = ("job", "create", "--job", "5", "--worker", "0:1:02:00:00:00:00:01:10.0.0.1")
    assert _cli(cfg, *create).returncode == 0
    (tmp_path / "jobs.json").unlink()  # the state file is lost
    out = _cli(cfg, *create)
    assert out.returncode == 1 and "p4reduce-ctl up" in out.stderr, out
    assert _cli(cfg, "job", "list").returncode == 0  # reading is fine
    up = _cli(cfg, "--json", "up")
    assert up.returncode == 0 and json.loads(up.stdout)["pipeline"] == "pushed"
    assert _cli(cfg, *create).returncode == 0
