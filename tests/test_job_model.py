"""The job model's rules (p4reduce.job) and the state file (p4reduce.state), each written
once and asked by the controller, the worker library, the demo and the benchmarks."""

from __future__ import annotations

from functools import partial

import json

import pytest

from p4reduce import wire
from p4reduce.addresses import Address, WorkerAddress
from p4reduce.job import (
    FAIR_SLOTS,
    MAX_JOB_ID,
    Job,
    JobError,
    announce_rounds,
    call_slot_count,
    block_count,
    closing_rounds,
    check_job_id,
    descriptor_name,
    encoding_named,
    load_descriptor,
    mark_lost,
    resolve_encoding,
    resolve_halves,
    resolve_slots,
    resolve_window,
    round_count,
    sends_halves,
)
from p4reduce.state import State, locate, read_state, write_state
from p4reduce.target import SIMPLE_SWITCH_GRPC, SOFTSWITCH, TARGETS, default_slots, kind_window

BMV2, TOFINO = TARGETS["bmv2"], TARGETS["tofino"]


def _job(job: int = 5, slot_base: int = 0, encoding: str = "lanes", **kw) -> Job:
    workers = [
        WorkerAddress(r, r + 1, f"02:00:00:00:00:{r + 1:02x}", f"10.0.0.{r + 1}", 0x5030)
        for r in range(2)
    ]
    return Job(job, job % 7, slot_base, 4, 3, workers, encoding, **kw)


def test_a_new_jobs_encoding_is_the_targets_unless_asked():
    assert resolve_encoding(BMV2, 1, None) == BMV2.default_encoding == "packed"
    assert resolve_encoding(TOFINO, 1, None) == TOFINO.default_encoding == "lanes"
    assert resolve_encoding(BMV2, 1, "lanes") == "lanes"
    with pytest.raises(JobError, match="job 1: encoding 'packed' is not available on a tofino"):
        resolve_encoding(TOFINO, 1, "packed")
    with pytest.raises(JobError, match="'dense' is not one of lanes, packed"):
        resolve_encoding(BMV2, 1, "dense")
    assert encoding_named("packed") is wire.Encoding.PACKED


def test_packed_implies_halves_everywhere_it_is_asked():
    """The controller's resolution, a recorded job and the worker's payload agree."""
    assert resolve_halves(BMV2, 1, "packed", None) is True
    with pytest.raises(JobError, match="packed job always sends int32 as 16-bit halves"):
        resolve_halves(BMV2, 1, "packed", False)
    assert _job(encoding="packed").int32_halves is True
    assert _job(encoding="lanes").int32_halves is False
    assert sends_halves(wire.Encoding.PACKED, False) and not sends_halves("lanes", False)


def test_slots_default_per_kind_and_target():
    assert resolve_slots(BMV2, None) == BMV2.default_slots == default_slots(SIMPLE_SWITCH_GRPC)
    assert resolve_slots(TOFINO, 9) == 9
    assert default_slots(SOFTSWITCH) > default_slots(SIMPLE_SWITCH_GRPC)


def test_blocks_and_rounds():
    k = wire.BLOCK_VALUES
    assert [block_count(n, False) for n in (0, 1, k, k + 1)] == [1, 1, 1, 2]
    assert block_count(3 * k, True) == 6
    rounds, announce = (
        partial(round_count, block_values=k),
        partial(announce_rounds, block_values=k),
    )
    closing, used = (
        partial(closing_rounds, block_values=k),
        partial(call_slot_count, block_values=k),
    )
    assert announce(blocks=3, slots=8) == 3 and announce(100, 8) == 8
    assert rounds(nonzero_blocks=10, blocks=100, slots=8) == 18
    # a call uses the slots its blocks want (slots_for_call), not every slot of its job
    assert announce(blocks=63, slots=64) == 16 and announce(0, 64) == 0
    assert rounds(6, 63, 64, "silent") == 6 + 2 * 16
    # ... fewer when its blocks are wide: 8 from 4 096 values per block
    assert announce_rounds(63, 64, block_values=4096) == 8
    assert round_count(6, 63, 64, "silent", block_values=16000) == 6 + 2 * 8
    # silent rounds close only the slots some rank has a block in, and of those only the
    # ones whose last such block some rank lacks: blocks 1, 17 (rank 0) and 40 (both) of
    # 63 are in slots 1, 1 and 8 of the call's 16; a slot with none ends at its announce
    ranks = [[b in (1, 17, 40) for b in range(63)], [b == 40 for b in range(63)]]
    assert closing(ranks, 64) == 1 and closing([[False] * 63] * 2, 64) == 0
    assert closing(ranks, 64, named=63) == 2 and closing(ranks, 2) == 1
    assert closing(ranks[:1], 64) == 0  # one rank: every last round is every rank's
    # of 8 slots (wide blocks) 40 is in slot 0, 1 and 17 in slot 1, as with 16: one
    assert closing_rounds(ranks, 64, block_values=4096) == 1
    assert rounds(3, 63, 64, "silent", closing=2) == 3 + 16 + 2
    assert rounds(3, 63, 64, "every_rank", closing=2) == 3 + 16
    # a count a measurement names is bounded like the rule's; no block, no slot
    assert used(63, 64, named=24) == 24 and used(63, 32, named=64) == 32
    assert used(40, 64, named=64) == 40 and used(0, 64, named=8) == 0


def test_job_ids_and_descriptor_names():
    assert check_job_id(MAX_JOB_ID) == MAX_JOB_ID
    for bad in (-1, MAX_JOB_ID + 1, True, "3"):
        with pytest.raises(JobError, match="job id"):
            check_job_id(bad)
    assert descriptor_name(7, 2) == "job7-rank2.json"


def test_a_job_writes_the_descriptor_its_worker_reads():
    job = _job(encoding="packed")
    d = job.descriptor(1, Address("02:00:00:00:01:00", "10.0.0.254"))
    cfg = load_descriptor(json.dumps(d))
    assert (cfg.job, cfg.rank, cfg.worker_count, cfg.encoding) == (5, 1, 2, wire.Encoding.PACKED)
    assert cfg.int32_halves is True and cfg.to_dict() == d


def test_state_file_round_trip_and_refusals(tmp_path):
    path = tmp_path / "state.json"
    assert read_state(path) == State()
    jobs = {5: _job(5), 6: _job(6, slot_base=4, encoding="packed")}
    write_state(path, State(jobs, last_epoch=3, pipeline_cookie=12))
    back = read_state(path)
    assert back == State(jobs, 3, 12)
    data = json.loads(path.read_text())
    data["jobs"][1]["slot_base"] = 2  # overlaps job 5's slots 0..3
    path.write_text(json.dumps(data))
    with pytest.raises(JobError, match="jobs 5 and 6 have overlapping slots"):
        read_state(path)
    data["jobs"][1].update(slot_base=4, encoding="dense")
    path.write_text(json.dumps(data))
    with pytest.raises(JobError, match="job 6: encoding 'dense' is not one of"):
        read_state(path)
    del data["jobs"][1]["encoding"]  # written before encodings: a lanes job
    path.write_text(json.dumps(data))
    assert read_state(path).jobs[6].encoding == "lanes"


def test_a_lost_job_is_recorded_as_lost_and_a_record_without_the_field_is_live(tmp_path):
    """mark_lost (the controller's, when it pushes the pipeline) marks every job once and
    names those it newly marked; the state file keeps the mark, and a live job's record is
    as it was before the field existed."""
    path = tmp_path / "state.json"
    jobs = {5: _job(5), 6: _job(6, slot_base=4)}
    assert "lost" not in jobs[5].to_json()
    assert mark_lost([jobs[5]]) == [5]
    assert mark_lost(list(jobs.values())) == [6]  # 5 was lost already
    assert mark_lost(list(jobs.values())) == []
    write_state(path, State(jobs, last_epoch=3))
    back = read_state(path)
    assert back.jobs[5].lost and back.jobs[6].lost and back == State(jobs, 3)
    assert not _job(7).lost and not Job.from_json(_job(7).to_json()).lost


def test_locate_reads_the_state_file_and_switch_address(tmp_path):
    cfg = tmp_path / "switch.toml"
    cfg.write_text('[switch]\nports = [1]\nip = "10.1.0.254"\n')
    state, switch = locate(cfg)
    assert state == tmp_path / "switch.state.json"
    assert switch == Address("02:00:00:00:01:00", "10.1.0.254")
    cfg.write_text('[switch]\nstate_file = "s/jobs.json"\nmac = "ff:ff:ff:ff:ff:ff"\n')
    with pytest.raises(ValueError, match="broadcast"):
        locate(cfg)


def test_block_values_resolve_per_target():
    """A job's values per block: the target's default when unnamed, any of the v1model
    program's sizes on bmv2, only the compiled size on Tofino, with an error naming both."""
    from p4reduce.job import JobError, resolve_block_values
    from p4reduce.target import target

    bmv2, tofino = target("bmv2"), target("tofino2")
    assert resolve_block_values(bmv2, 1, None) == bmv2.block_sizes[0]
    for k in bmv2.block_sizes:
        assert resolve_block_values(bmv2, 1, k) == k
    with pytest.raises(JobError, match=r"job 3: 100 values per block .* bmv2"):
        resolve_block_values(bmv2, 3, 100)
    assert resolve_block_values(tofino, 1, None) == tofino.default_block_values
    with pytest.raises(JobError, match=r"2048 values per block is not available on a tofino2"):
        resolve_block_values(tofino, 1, 2048)


def test_block_count_at_any_block_size():
    from p4reduce.job import block_count

    assert [block_count(n, False, 256) for n in (0, 1, 256, 257)] == [1, 1, 1, 2]
    assert block_count(1000, True, 1000) == 2


def test_job_keeps_its_block_values_in_state_and_descriptor():
    from p4reduce.addresses import Address, WorkerAddress
    from p4reduce.job import Job, load_descriptor

    w = WorkerAddress(rank=0, port=1, mac="02:00:00:00:00:01", ip="10.0.0.1", udp_port=0x5030)
    job = Job(1, 0, 0, 4, 1, [w], "packed", block_values=1024)
    back = Job.from_json(job.to_json())
    assert back.block_values == 1024
    sw = Address(mac="02:00:00:00:01:00", ip="10.0.0.254", udp_port=0x5030)
    assert load_descriptor(back.descriptor(0, sw)).block_values == 1024
    old = job.to_json()
    del old["block_values"]
    assert Job.from_json(old).block_values == 64


def test_round_mode_resolves_per_target():
    """A job's round mode: the target's first when unnamed; a mode the target's program does
    not run, or a name that is no mode, is an error naming the job, the target and the
    modes it runs."""
    from p4reduce.job import resolve_round_mode

    for t in TARGETS.values():
        assert resolve_round_mode(t, 1, None) == t.round_modes[0]
        for m in t.round_modes:
            assert resolve_round_mode(t, 1, m) == m
    assert TOFINO.round_modes == ("every_rank",)
    with pytest.raises(JobError, match=r"job 4: round mode 'silent' is not available on a tofino"):
        resolve_round_mode(TOFINO, 4, "silent")
    with pytest.raises(JobError, match=r"round mode 'loud' is not one of every_rank, silent"):
        resolve_round_mode(BMV2, 4, "loud")


def test_tofino2_refuses_a_silent_job_naming_the_ranks_its_build_holds_and_what_it_lacks():
    """Tofino 2's production build holds silent rounds' keys for 8 ranks but not their loss
    recovery:
    a silent job is refused there, naming both; Tofino 1's refusal says no job fits."""
    from p4reduce.job import resolve_round_mode

    tofino2 = TARGETS["tofino2"]
    assert tofino2.round_modes == ("every_rank",) and tofino2.silent_path
    with pytest.raises(JobError) as refused:
        resolve_round_mode(tofino2, 4, "silent")
    said = str(refused.value)
    assert "job 4: round mode 'silent' is not available on a tofino2 switch" in said
    assert "for jobs of at most 8 ranks" in said and "queries and rewinds" in said
    with pytest.raises(JobError, match="fits no job on tofino"):
        resolve_round_mode(TOFINO, 4, "silent")


def test_job_keeps_its_round_mode_in_state_and_descriptor():
    """The mode travels from the controller's state file to the worker's descriptor; records
    written before it existed are every-rank jobs; a descriptor naming no mode is refused
    by name."""
    job = _job(round_mode="silent")
    back = Job.from_json(job.to_json())
    assert back.round_mode == "silent"
    sw = Address(mac="02:00:00:00:01:00", ip="10.0.0.254", udp_port=0x5030)
    d = back.descriptor(0, sw)
    assert d["round_mode"] == "silent"
    assert load_descriptor(d).round_mode == wire.RoundMode.SILENT
    old = job.to_json()
    del old["round_mode"]
    assert Job.from_json(old).round_mode == "every_rank"
    del d["round_mode"]
    assert load_descriptor(d).round_mode == wire.RoundMode.EVERY_RANK
    with pytest.raises(ValueError, match=r"field round_mode='quiet' not one of"):
        load_descriptor({**d, "round_mode": "quiet"})


def test_the_window_resolves_per_target_and_kind():
    """bmv2 serves frames first in first out: its ranks keep FAIR_SLOTS outstanding (fewer
    in a smaller job); softswitch (round robin) and Tofino (line rate): every slot. A window
    given must be a number of the job's slots."""
    assert BMV2.default_window == FAIR_SLOTS and TOFINO.default_window is None
    assert resolve_window(BMV2, 1, 64, None) == FAIR_SLOTS
    assert resolve_window(BMV2, 1, 4, None) == 4
    assert resolve_window(TOFINO, 1, 64, None) == 64
    assert resolve_window(BMV2, 1, 64, 64) == 64
    for bad in (0, 65, True, 2.0):
        with pytest.raises(JobError, match=rf"job 1: window {bad!r} is not .* in 1\.\.64"):
            resolve_window(BMV2, 1, 64, bad)
    assert kind_window(SOFTSWITCH, 64) == 64
    assert kind_window(SIMPLE_SWITCH_GRPC, 64) == FAIR_SLOTS
    assert kind_window(SIMPLE_SWITCH_GRPC, 8) == 8
    with pytest.raises(ValueError, match="unknown switch kind 'tofino'"):
        kind_window("tofino", 8)


def test_job_keeps_its_window_in_state_and_descriptor():
    """The window travels from the state file to the descriptor and the Worker's config;
    records and descriptors written before it existed name none (the Worker's FAIR_SLOTS);
    a descriptor's window outside 1..slot_count is refused by name."""
    job = _job(window=3)
    back = Job.from_json(job.to_json())
    assert back.window == 3
    sw = Address(mac="02:00:00:00:01:00", ip="10.0.0.254", udp_port=0x5030)
    d = back.descriptor(0, sw)
    assert d["window"] == 3 and load_descriptor(d).window == 3
    old = job.to_json()
    del old["window"]
    unrecorded = Job.from_json(old)
    assert unrecorded.window is None and "window" not in unrecorded.descriptor(0, sw)
    del d["window"]
    assert load_descriptor(d).window is None
    for bad in (0, 5, True, "3"):  # the job has 4 slots
        with pytest.raises(ValueError, match=rf"field window={bad!r} not an integer in 1\.\.4"):
            load_descriptor({**d, "window": bad})
