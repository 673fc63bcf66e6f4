"""How a rank finds its job descriptor (hostlib.jobref): from a descriptor, a job id and the
directory p4reduce-ctl wrote, or a job id and the controller's configuration + state file.
No torch, no network: the controller's state file is written through p4reduce.state, the
format the controller's JobTable writes."""

from __future__ import annotations

import json

import pytest

from p4reduce.addresses import Address, WorkerAddress
from p4reduce.job import Job
from p4reduce.state import State, write_state
from hostlib.jobref import ENV, JobLookupError, P4ReduceOptions, find_descriptor, open_worker
from hostlib_helpers import descriptor


def _write(tmp_path, job=7, workers=2):
    d = tmp_path / "descriptors"
    d.mkdir()
    for r in range(workers):
        (d / f"job{job}-rank{r}.json").write_text(json.dumps(descriptor(r, workers, job=job)))
    return d


def test_descriptor_path_with_rank_placeholder(tmp_path):
    d = _write(tmp_path)
    got, where = find_descriptor(1, P4ReduceOptions(descriptor=str(d / "job7-rank{rank}.json")))
    assert got == descriptor(1, 2) and str(d / "job7-rank1.json") in where


def test_descriptor_as_dict_and_json_text():
    assert find_descriptor(0, P4ReduceOptions(descriptor=descriptor(0, 1)))[0] == descriptor(0, 1)
    assert find_descriptor(0, P4ReduceOptions(descriptor=json.dumps(descriptor(0, 1))))[
        0
    ] == descriptor(0, 1)


def test_job_id_and_descriptor_dir(tmp_path):
    d = _write(tmp_path, job=9, workers=3)
    got, where = find_descriptor(2, P4ReduceOptions(job=9, descriptor_dir=d))
    assert got == descriptor(2, 3, job=9) and "job9-rank2.json" in where
    with pytest.raises(
        JobLookupError,
        match=r"no descriptor .*job9-rank3\.json.*"
        r"p4reduce-ctl job create --job 9",
    ):
        find_descriptor(3, P4ReduceOptions(job=9, descriptor_dir=d))


def test_job_id_from_the_controllers_state_file(tmp_path):
    state = tmp_path / "jobs.json"
    workers = [
        WorkerAddress(r, r + 1, f"02:00:00:00:00:{r + 1:02x}", f"10.0.0.{r + 1}", 0x5030)
        for r in range(2)
    ]
    job = Job(5, 0, slot_base=32, slot_count=16, epoch=3, workers=workers, encoding="packed")
    write_state(state, State({5: job}, last_epoch=3))
    cfg = tmp_path / "switch.toml"
    cfg.write_text(
        '[switch]\nmac = "02:00:00:00:01:00"\nip = "10.0.0.254"\n'
        'ports = [1, 2]\nstate_file = "jobs.json"\n'
    )
    got, where = find_descriptor(1, P4ReduceOptions(job=5, controller_config=cfg))
    assert got == job.descriptor(1, Address("02:00:00:00:01:00", "10.0.0.254"))
    assert got["slot_base"] == 32 and "job 5" in where and str(state) in where
    with pytest.raises(JobLookupError, match=r"has no job 6 \(jobs: \[5\]\)"):
        find_descriptor(0, P4ReduceOptions(job=6, controller_config=cfg))
    with pytest.raises(JobLookupError, match="job 5 has no rank 2"):
        find_descriptor(2, P4ReduceOptions(job=5, controller_config=cfg))
    cfg.write_text("[switch]\nports = [1, 2]\n")
    with pytest.raises(JobLookupError, match="no state file"):
        find_descriptor(0, P4ReduceOptions(job=5, controller_config=cfg))


def test_nothing_given_names_every_way():
    with pytest.raises(JobLookupError) as e:
        find_descriptor(3, P4ReduceOptions().with_env({}))
    msg = str(e.value)
    assert msg.startswith("rank 3 has no p4reduce job")
    for var in (
        "P4REDUCE_DESCRIPTOR",
        "P4REDUCE_JOB",
        "P4REDUCE_DESCRIPTOR_DIR",
        "P4REDUCE_CONTROLLER_CONFIG",
        "pg_options",
    ):
        assert var in msg
    with pytest.raises(JobLookupError, match="job 4 given, but not where"):
        find_descriptor(0, P4ReduceOptions(job=4))


def test_bad_descriptors_name_the_file_and_field(tmp_path):
    with pytest.raises(JobLookupError, match=r"descriptor file .*missing\.json does not"):
        find_descriptor(0, P4ReduceOptions(descriptor=str(tmp_path / "missing.json")))
    bad = descriptor(0, 2)
    del bad["slot_count"]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(JobLookupError, match=r"bad\.json: field slot_count missing"):
        find_descriptor(0, P4ReduceOptions(descriptor=str(tmp_path / "bad.json")))


def test_environment_fills_what_options_leave_open(tmp_path):
    d = _write(tmp_path)
    env = {
        ENV["job"]: "7",
        ENV["descriptor_dir"]: str(d),
        ENV["deadline"]: "12.5",
        ENV["netns"]: "/proc/1/ns/net",
        ENV["window"]: "64",
    }
    opts = P4ReduceOptions(netns="h{rank}").with_env(env)
    assert (opts.job, opts.deadline, opts.netns) == (7, 12.5, "h{rank}")  # explicit wins
    assert opts.window == 64
    assert find_descriptor(0, opts)[0] == descriptor(0, 2)
    with pytest.raises(JobLookupError, match=r"P4REDUCE_JOB='seven' is not a job id"):
        P4ReduceOptions().with_env({ENV["job"]: "seven"})
    for bad in ("0", "all"):
        with pytest.raises(JobLookupError, match=rf"P4REDUCE_WINDOW='{bad}' is not a number"):
            P4ReduceOptions().with_env({ENV["window"]: bad})
    with pytest.raises(TypeError, match=r"unknown key\(s\) \['jobid'\]"):
        P4ReduceOptions.coerce({"jobid": 7})
    assert P4ReduceOptions.coerce({"job": 7}).job == 7


def test_wrong_rank_or_size_refused_before_any_socket(tmp_path):
    d = _write(tmp_path)
    with pytest.raises(
        JobLookupError,
        match=r"is rank 0 of job 7 with 2 workers, but this "
        r"process is rank 1 of 2",
    ):
        open_worker(1, P4ReduceOptions(descriptor=str(d / "job7-rank0.json")), 2)
    with pytest.raises(
        JobLookupError,
        match=r"with 2 workers, but this process is rank 0 "
        r"of 3",
    ):
        open_worker(0, P4ReduceOptions(job=7, descriptor_dir=d), 3)
    with pytest.raises(JobLookupError, match="network namespace no-such-ns does not exist"):
        open_worker(0, P4ReduceOptions(job=7, descriptor_dir=d, netns="no-such-ns"), 2)
