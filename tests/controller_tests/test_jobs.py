"""The controller's job logic without a switch process: slot and index allocation, epochs
and their wrap-around, the state file (a corrupt one loses nothing), the descriptor, and a
delete that failed half-way and is repeated.

Most of these need no switch at all: JobTable is plain data, and entries are built from
the committed P4Info. The repeated delete needs a switch that holds entries and refuses to
delete what it does not have; it runs against the real program in an in-process softswitch
over real P4Runtime on loopback (no root, no interfaces), with the controller's session
failing one write the way a dropped connection would.
"""

from __future__ import annotations

import json

import pytest

from controlplane import admission
from p4reduce.addresses import Address, WorkerAddress
from controlplane.connection import SwitchConnection, SwitchError
from controlplane.jobs import JobManager, JobTable, PoolSizes
from p4reduce.job import Job, JobError
from p4reduce.wire import MAX_EPOCH
from p4reduce.p4rt import P4InfoIndex
from p4reduce.target import DEFAULT_P4INFO
from controlplane.reconcile import read_entries
from controlplane.replication import read_groups
from p4reduce import wire
from p4reduce.job import load_descriptor

SWITCH = Address("02:00:00:00:01:00", "10.0.0.254")
P4 = P4InfoIndex.load(DEFAULT_P4INFO)
SIZES = PoolSizes.of(P4)


def worker(rank: int, port: int | None = None) -> WorkerAddress:
    port = rank + 1 if port is None else port
    return WorkerAddress(
        rank, port, f"02:00:00:00:00:{port:02x}", f"10.0.0.{port}", wire.UDP_PORT_BASE
    )


def job(
    job_id: int, slot_base: int, slot_count: int, job_index: int = 0, epoch: int = 1, ranks: int = 2
) -> Job:
    return Job(
        job=job_id,
        job_index=job_index,
        slot_base=slot_base,
        slot_count=slot_count,
        epoch=epoch,
        workers=[worker(r) for r in range(ranks)],
        encoding="packed",
    )


def offline_connection() -> SwitchConnection:
    """A session that never connects: the pipeline's P4Info, for building entries."""
    conn = SwitchConnection("127.0.0.1:1")
    conn.objects = P4
    return conn


# ---- sizes and allocation ---------------------------------------------------------------


def test_sizes_come_from_the_p4info():
    """The pool is the slot_epoch register's size, the job count the per-job counters'."""
    assert SIZES.pool_slots == P4.register("slot_epoch").size
    assert SIZES.max_jobs == P4.counter("aggregated").size == P4.counter("slot_out_of_range").size


def test_slots_are_allocated_first_fit_and_freed_ranges_reused():
    table = JobTable()
    pool = 16
    assert table.allocate_slots(4, pool) == 0
    table.jobs[1] = job(1, 0, 4)
    table.jobs[2] = job(2, 4, 8, job_index=1)
    assert table.allocate_slots(4, pool) == 12
    table.jobs[3] = job(3, 12, 4, job_index=2)
    del table.jobs[2]  # frees 4..11
    assert table.allocate_slots(3, pool) == 4  # the first gap that fits
    assert table.allocate_slots(8, pool) == 4
    with pytest.raises(
        JobError,
        match=r"slot pool exhausted: 9 contiguous slots requested, "
        r"8 of 16 free",
    ):
        table.allocate_slots(9, pool)


@pytest.mark.parametrize("count", [0, 17])
def test_a_slot_count_outside_the_pool_is_refused(count):
    with pytest.raises(JobError, match=r"slots=.*1\.\.16 slots \(the switch's pool\)"):
        JobTable().allocate_slots(count, 16)


def test_job_indices_are_the_lowest_free_and_bounded_by_the_switch():
    table = JobTable()
    table.jobs = {j: job(j, j, 1, job_index=j) for j in range(3)}
    del table.jobs[1]
    assert table.allocate_index(3) == 1
    table.jobs[1] = job(1, 1, 1, job_index=1)
    with pytest.raises(JobError, match="at most 3"):
        table.allocate_index(3)


# ---- epochs ------------------------------------------------------------------------------


def test_epochs_wrap_from_the_largest_to_1_never_0(tmp_path):
    """1..2^31-1: 0 is what a never-used slot holds and bit 31 marks a lost slot, so after
    2^31-1 the next epoch is 1. The counter lives in the state file across restarts."""
    path = tmp_path / "jobs.json"
    table = JobTable(path, last_epoch=MAX_EPOCH - 1)
    assert MAX_EPOCH == (1 << 31) - 1
    assert table.next_epoch() == MAX_EPOCH
    table.save()
    again = JobTable.load(path)
    assert again.last_epoch == MAX_EPOCH
    assert [again.next_epoch() for _ in range(3)] == [1, 2, 3]
    assert JobTable(last_epoch=0).next_epoch() == 1


def test_a_job_at_either_end_of_the_epochs_is_admitted_and_described():
    """The epoch fits admission's key and the descriptor at both ends of the range."""
    conn = offline_connection()
    for epoch in (1, MAX_EPOCH):
        j = job(9, 0, 4, epoch=epoch)
        entry = admission.admission_entry(conn, admission.job_parameters(j), j.workers[0])
        assert conn.p4.describe_entry(entry)["match"]["epoch"] == epoch
        assert load_descriptor(j.descriptor(1, SWITCH)).epoch == epoch


# ---- the descriptor ----------------------------------------------------------------------


def test_the_descriptor_is_hostlibs_jobconfig_serialised():
    j = job(7, 32, 16, epoch=41, ranks=3)
    d = j.descriptor(2, SWITCH)
    cfg = load_descriptor(d)
    assert cfg.to_dict() == d == j.job_config(2, SWITCH).to_dict()
    assert (cfg.rank, cfg.worker_count, cfg.slot_base, cfg.slot_count) == (2, 3, 32, 16)
    assert cfg.worker == j.workers[2].address and cfg.switch == SWITCH
    with pytest.raises(JobError, match="no rank 3"):
        j.descriptor(3, SWITCH)


# ---- the state file ----------------------------------------------------------------------


def good_state() -> dict:
    jobs = [job(1, 0, 4, job_index=0, epoch=1), job(2, 4, 4, job_index=1, epoch=2)]
    return {"last_epoch": 2, "pipeline_cookie": 5, "jobs": [j.to_json() for j in jobs]}


def corrupt(kind: str) -> str:
    state = good_state()
    if kind == "not json":
        return '{"last_epoch": 2, "jobs": ['
    if kind == "a list":
        return "[]"
    if kind == "no jobs key":
        del state["jobs"]
    elif kind == "a worker with an unknown key":
        state["jobs"][0]["workers"][0]["colour"] = "red"
    elif kind == "a string for a number":
        state["jobs"][1]["slot_base"] = "4"
    elif kind == "a job twice":
        state["jobs"][1]["job"] = 1
    elif kind == "a job index twice":
        state["jobs"][1]["job_index"] = 0
    elif kind == "overlapping slots":
        state["jobs"][1]["slot_base"] = 2
    elif kind == "epoch 0":
        state["jobs"][0]["epoch"] = 0
    elif kind == "an unknown encoding":
        state["jobs"][0]["encoding"] = "zip"
    return json.dumps(state)


CORRUPTIONS = [
    "not json",
    "a list",
    "no jobs key",
    "a worker with an unknown key",
    "a string for a number",
    "a job twice",
    "a job index twice",
    "overlapping slots",
    "epoch 0",
    "an unknown encoding",
]


def test_a_good_state_file_loads_and_saves_the_same(tmp_path):
    """The baseline of the corruptions below: the same file, intact, is accepted."""
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(good_state()))
    table = JobTable.load(path)
    assert sorted(table.jobs) == [1, 2] and table.pipeline_cookie == 5
    table.save()
    assert json.loads(path.read_text()) == good_state()


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_a_corrupt_state_file_is_refused_clearly_and_left_as_it_was(tmp_path, kind):
    path = tmp_path / "jobs.json"
    path.write_text(corrupt(kind))
    before = path.read_bytes()
    with pytest.raises(
        JobError,
        match=rf"state file {path} is unreadable .*nothing was "
        r"changed: repair it, or move it away",
    ):
        JobTable.load(path)
    with pytest.raises(JobError, match="unreadable"):
        JobManager(offline_connection(), SWITCH, path, {1, 2, 3})
    assert path.read_bytes() == before


def test_a_state_file_corrupted_under_a_running_controller_stops_every_change(tmp_path):
    """The file is re-read under its lock before each change: a file another process broke
    stops create, delete and drop-sim before the switch or the file is touched."""
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(good_state()))
    jobs = JobManager(offline_connection(), SWITCH, path, {1, 2, 3})
    path.write_text(corrupt("a job twice"))
    before = path.read_bytes()
    for change in (
        lambda: jobs.create(3, [worker(0, 3)], 4),
        lambda: jobs.delete(1),
        lambda: jobs.set_loss(1, ingress=0.5),
    ):
        with pytest.raises(JobError, match="job id 1 appears twice"):
            change()
    assert path.read_bytes() == before


# ---- a delete that failed half-way -------------------------------------------------------


class DroppingConnection(SwitchConnection):
    """The controller's session, whose `fail_at`-th delete never reaches the switch (as when
    the connection drops mid-way)."""

    fail_at: int | None = None
    deletes = 0

    def delete(self, *entities) -> None:
        self.deletes += 1
        if self.deletes == self.fail_at:
            raise SwitchError("write", "UNAVAILABLE", "connection dropped (injected)")
        super().delete(*entities)


@pytest.fixture
def switch():
    from softswitch.p4runtime_server import Device, P4RuntimeServer

    server = P4RuntimeServer(Device(device_id=1), "127.0.0.1:0")
    server.start()
    conn = DroppingConnection(server.address).connect(retries=5)
    conn.push_pipeline()
    yield conn
    conn.close()
    server.stop(0)


def entries_of(conn: SwitchConnection, job_id: int) -> dict[str, int]:
    """How many entries of each table name job `job_id` (admission, result_destination,
    drop_simulator all match on `job`)."""
    out: dict[str, int] = {}
    for e in read_entries(conn):
        d = conn.p4.describe_entry(e)
        if d["match"].get("job") == job_id:
            table = d["table"].rsplit(".", 1)[-1]
            out[table] = out.get(table, 0) + 1
    return out


def test_a_delete_that_failed_half_way_can_be_repeated(switch, tmp_path):
    path = tmp_path / "jobs.json"
    jobs = JobManager(switch, SWITCH, path, {1, 2, 3})
    created = jobs.create(5, [worker(0), worker(1)], 4)
    jobs.set_loss(5, ingress=0.25)
    group = admission.job_parameters(created).mcast_grp
    assert entries_of(switch, 5) == {"admission": 2, "result_destination": 2, "drop_simulator": 1}
    assert group in read_groups(switch)

    switch.fail_at = switch.deletes + 2  # admission goes, the rest stays
    with pytest.raises(SwitchError, match="injected"):
        jobs.delete(5)
    assert 5 in JobTable.load(path).jobs, "a failed delete keeps the job to finish it"
    assert entries_of(switch, 5) == {"result_destination": 2, "drop_simulator": 1}

    switch.fail_at = None
    assert jobs.delete(5).job == 5  # the retry skips what is already gone
    assert entries_of(switch, 5) == {}
    assert group not in read_groups(switch)
    assert JobTable.load(path).jobs == {}
    with pytest.raises(JobError, match="no job 5"):
        jobs.delete(5)

    again = jobs.create(5, [worker(0), worker(1)], 4)  # nothing stale stands in its way
    assert entries_of(switch, 5) == {"admission": 2, "result_destination": 2}
    assert again.epoch > created.epoch
