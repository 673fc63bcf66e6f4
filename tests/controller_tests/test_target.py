"""The switch configuration names its target (bmv2, tofino, tofino2) and the controller
adapts where Tofino genuinely differs: dev port numbering (switch.port_map), reserved ports
(the CPU port, the TNA program's harvest port), the pipeline files, and the value encoding
(no `packed` on Tofino). p4reduce/target.py says why each differs.

No Tofino switch exists here. The switch-free tests check the configuration and the
refusals; the last tests drive a real switch (softswitch, simple_switch_grpc) running the
v1model program with a *tofino* configuration: its P4Runtime surface is the TNA program's
(tests/test_tofino_build.py checks the parity), so the entries, groups and packets show
what the controller writes to a Tofino -- dev ports in admission, forwarding and replicas,
lanes jobs -- over real P4Runtime, and that a result reaches the workers through them.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from p4reduce import target as build
from p4reduce.addresses import Address, WorkerAddress
from controlplane.config import ConfigError, load, parse
from controlplane.connection import SwitchConnection
from controlplane.controller import Controller
from controlplane.jobs import JobManager, check_job_pipes
from controlplane.replication import job_group
from p4reduce.job import JobError
from controlplane.reconcile import read_entries
from controlplane.replication import read_groups
from p4reduce.target import TARGETS, PortMap, TargetError, pipe_of, readout_port
from hostlib import protocol as p
from hostlib.protocol import MsgType

from .conftest import SWITCH_IP, SWITCH_MAC, host
from .test_controller import run_round


def _sw(**switch):
    return {"switch": {"ports": [1, 2, 3], **switch}}


def _job(encoding=None, port=1):
    job = {
        "job": 1,
        "slots": 4,
        "workers": [{"rank": 0, "port": port, "mac": "02:00:00:00:00:01", "ip": "10.0.0.1"}],
    }
    if encoding is not None:
        job["encoding"] = encoding
    return job


# -- configuration ---------------------------------------------------------------------------


def test_default_target_is_bmv2_and_nothing_else_changes():
    cfg = parse(_sw()).switch
    assert cfg.target == "bmv2" and cfg.port_map == {} and cfg.cpu_port is None
    assert cfg.target_info.default_encoding == "packed"
    assert cfg.p4info is None and cfg.device_config is None


def test_tofino_configuration_with_port_map_and_cpu_port(tmp_path):
    f = tmp_path / "sw.toml"
    f.write_text(
        '[switch]\ntarget = "tofino"\nports = [1, 2]\ncpu_port = 192\n'
        'device_config = "pipeline_config.pb.bin"\n'
        "[switch.port_map]\n1 = 0\n2 = 136\n"
        "[[jobs]]\njob = 3\nslots = 8\nworkers = [\n"
        '  { rank = 0, port = 1, mac = "02:00:00:00:00:01", ip = "10.0.0.1" },\n]\n'
    )
    cfg = load(f)
    # port 2 is in pipe 1 (dev port 136): fine for a host, not for a rank (test_pipes)
    assert cfg.switch.target == "tofino" and cfg.switch.port_map == {1: 0, 2: 136}
    assert cfg.switch.cpu_port == 192
    assert cfg.switch.device_config == tmp_path / "pipeline_config.pb.bin"
    assert cfg.jobs[0].encoding is None  # the target's default, lanes, at creation


@pytest.mark.parametrize(
    "data,path,needle",
    [
        (_sw(target="tofino3"), "switch.target", "not one of bmv2, tofino, tofino2"),
        (_sw(port_map={"1": 128}), "switch.port_map", "only for a Tofino target"),
        (_sw(cpu_port=192), "switch.cpu_port", "only for a Tofino target"),
        (
            _sw(target="tofino", port_map={"1": 128, "2": 136}),
            "switch.port_map",
            "port(s) [3] of switch.ports have no dev port",
        ),
        (
            _sw(target="tofino", port_map={"1": 128, "2": 136, "3": 128}),
            "switch.port_map.3",
            "dev port 128 is also port 1's",
        ),
        (
            _sw(target="tofino", port_map={"1": 128, "2": 136, "9": 144}),
            "switch.port_map.9",
            "not in switch.ports",
        ),
        (_sw(target="tofino", port_map={"x": 1}), "switch.port_map.x", "port number"),
        (
            _sw(target="tofino", port_map={"1": 128, "2": 136, "3": 512}),
            "switch.port_map.3",
            "out of range 0..511",
        ),
        (
            _sw(target="tofino", port_map={"1": 128, "2": 136, "3": 68}),
            "switch.port_map.3",
            "harvest (recirculation) port",
        ),
        (_sw(target="tofino2", ports=[6]), "switch.ports", "harvest (recirculation) port"),
        (_sw(target="tofino", cpu_port=2), "switch.ports", "the CPU port (switch.cpu_port)"),
        (_sw(target="tofino", device_config=""), "switch.device_config", "expected a file path"),
        (
            {**_sw(target="tofino"), "jobs": [_job("packed")]},
            "jobs[0].encoding",
            "encoding 'packed' is not available on a tofino switch",
        ),
        ({**_sw(), "jobs": [_job("dense")]}, "jobs[0].encoding", "not one of lanes, packed"),
        (
            {**_sw(target="tofino"), "jobs": [{**_job(), "int32_halves": False}]},
            "jobs[0].int32_halves",
            "the tna program cannot",
        ),
        (
            {**_sw(), "jobs": [{**_job("packed"), "int32_halves": False}]},
            "jobs[0].int32_halves",
            "a packed job always sends int32 as 16-bit halves",
        ),
        ({**_sw(), "jobs": [{**_job(), "int32_halves": "yes"}]}, "jobs[0].int32_halves", "'yes'"),
        (
            {**_sw(target="tofino"), "jobs": [{**_job(), "block_values": 2048}]},
            "jobs[0].block_values",
            "2048 values per block is not available on a tofino switch (the tna program "
            "carries 28): create the job with block_values 28",
        ),
        (
            {**_sw(target="tofino"), "jobs": [{**_job(), "round_mode": "silent"}]},
            "jobs[0].round_mode",
            "round mode 'silent' is not available on a tofino switch (the tna program runs "
            "every_rank; silent rounds read one register per rank",
        ),
        ({**_sw(), "jobs": [{**_job(), "round_mode": "quiet"}]}, "jobs[0].round_mode", "'quiet'"),
        (
            {**_sw(), "jobs": [{**_job(), "block_values": 1000}]},
            "jobs[0].block_values",
            "1000 values per block is not available on a bmv2 switch",
        ),
        (
            {**_sw(target="tofino", port_map={"1": 128, "2": 8, "3": 16}), "jobs": [_job()]},
            "jobs[0].workers",
            "job 1: rank 0's port 1 is dev port 128, in pipe 1; every rank of a tofino job "
            "must be in pipe 0, the pipe of its read-out (recirculation) port 68",
        ),
        (
            {**_sw(target="tofino2", ports=[1, 2, 300]), "jobs": [_job(port=300)]},
            "jobs[0].workers",
            "job 1: rank 0's port 300 is dev port 300, in pipe 2; every rank of a tofino2 "
            "job must be in pipe 0, the pipe of its read-out (recirculation) port 6",
        ),
    ],
)
def test_bad_target_configuration_names_field_and_problem(data, path, needle):
    with pytest.raises(ConfigError) as info:
        parse(data)
    assert info.value.path == path and needle in str(info.value), str(info.value)


def test_harvest_port_is_per_chip():
    """Dev port 6 is Tofino 2's pipe-0 recirculation port, an ordinary port on Tofino 1."""
    assert parse(_sw(target="tofino", ports=[6])).switch.ports == [6]
    assert parse({**_sw(target="tofino2"), "jobs": [_job("lanes")]}).jobs[0].encoding == "lanes"


def test_recirculation_port_is_the_programs():
    """The controller's read-out port per chip is the TNA program's HARVEST_PORT (read from
    p4src/tna/bridge.p4, where the program sets it per chip)."""
    text = (Path(__file__).resolve().parents[2] / "p4src" / "tna" / "bridge.p4").read_text()
    found = re.search(
        r"#if __TARGET_TOFINO__ == 2\s*const bit<9> HARVEST_PORT = (\d+);\s*#else\s*"
        r"const bit<9> HARVEST_PORT = (\d+);",
        text,
    )
    assert found, "HARVEST_PORT per chip not found in p4src/tna/bridge.p4"
    assert readout_port(TARGETS["tofino2"]) == int(found[1])
    assert readout_port(TARGETS["tofino"]) == int(found[2])
    assert readout_port(TARGETS["bmv2"]) is None  # v1model recirculates nothing


def test_a_dev_ports_pipe_is_its_high_bits():
    assert [pipe_of(d) for d in (0, 6, 68, 127, 128, 152, 300, 511)] == [0, 0, 0, 0, 1, 1, 2, 3]


def test_job_create_refuses_a_rank_outside_the_readout_pipe():
    """`job create` on a Tofino: a rank on a dev port of another pipe than the read-out
    port's is refused, naming the job, rank, port, dev port and pipes, before the switch is
    touched (never connected here); the same ranks in pipe 0 pass the check."""
    conn = SwitchConnection("127.0.0.1:1")
    conn.ports = PortMap({1: 8, 2: 136, 3: 16})
    for name, readout in (("tofino", 68), ("tofino2", 6)):
        jobs = JobManager(conn, Address(SWITCH_MAC, SWITCH_IP), None, {1, 2, 3}, TARGETS[name])
        workers = [WorkerAddress(r, port, *host(port), 0x5030) for r, port in enumerate((1, 2))]
        with pytest.raises(JobError) as info:
            jobs.create(5, workers, 4)
        assert str(info.value) == (
            f"job 5: rank 1's port 2 is dev port 136, in pipe 1; every rank of a {name} job "
            f"must be in pipe 0, the pipe of its read-out (recirculation) port {readout} "
            f"(registers are per pipe): use ports of pipe 0"
        )
        check_job_pipes(TARGETS[name], conn.ports, 5, [workers[0]])  # pipe 0: no error
    # bmv2 has no pipes to mind
    check_job_pipes(TARGETS["bmv2"], PortMap(), 5, [WorkerAddress(0, 300, *host(1), 0x5030)])


def test_port_map_translates_and_refuses_unmapped_ports():
    ports = PortMap({1: 128, 2: 136})
    assert ports(1) == 128 and ports.replicas([(1, 0), (2, 1)]) == [(128, 0), (136, 1)]
    with pytest.raises(TargetError, match="port 3 has no dev port"):
        ports(3)
    assert PortMap()(7) == 7  # bmv2: the data plane's own numbers


# -- jobs: the encoding ----------------------------------------------------------------------


def test_int32_halves_is_the_targets_choice_unless_asked():
    """Only bmv2's lanes jobs may leave overflow to the switch; a packed job always sends
    halves, and a Tofino switch cannot flag an overflowed lane."""
    from p4reduce.job import resolve_halves

    bmv2, tofino = TARGETS["bmv2"], TARGETS["tofino"]
    assert resolve_halves(bmv2, 1, "lanes", None) is False
    assert resolve_halves(bmv2, 1, "lanes", True) is True
    assert resolve_halves(bmv2, 1, "packed", None) is True
    assert resolve_halves(tofino, 1, "lanes", None) is True
    with pytest.raises(JobError, match="job 1: int32_halves false .* tna program cannot"):
        resolve_halves(tofino, 1, "lanes", False)
    static = parse({**_sw(target="tofino2"), "jobs": [{**_job(), "int32_halves": True}]})
    assert static.jobs[0].int32_halves is True


def test_a_packed_job_is_refused_on_tofino_before_the_switch_is_touched():
    conn = SwitchConnection("127.0.0.1:1")  # never connected: a refusal must not need it
    for name in ("tofino", "tofino2"):
        jobs = JobManager(conn, Address(SWITCH_MAC, SWITCH_IP), None, {1, 2}, TARGETS[name])
        with pytest.raises(JobError) as info:
            jobs.create(5, [WorkerAddress(0, 1, *host(1), 0x5030)], 4, "packed")
        message = str(info.value)
        assert f"encoding 'packed' is not available on a {name} switch" in message
        assert "create the job with encoding 'lanes'" in message


def test_a_block_size_the_target_lacks_is_refused_before_the_switch_is_touched():
    conn = SwitchConnection("127.0.0.1:1")  # never connected: a refusal must not need it
    worker = [WorkerAddress(0, 1, *host(1), 0x5030)]
    for name in ("tofino", "tofino2", "bmv2"):
        target = TARGETS[name]
        jobs = JobManager(conn, Address(SWITCH_MAC, SWITCH_IP), None, {1, 2}, target)
        wide = 2048 if name != "bmv2" else 2000
        with pytest.raises(JobError) as info:
            jobs.create(5, worker, 4, "lanes", block_values=wide)
        message = str(info.value)
        assert f"{wide} values per block is not available on a {name} switch" in message
        sizes = ", ".join(map(str, target.block_sizes))
        assert f"create the job with block_values {'one of ' * (name == 'bmv2')}{sizes}" in message


def test_a_static_jobs_block_size_reaches_the_job(tmp_path):
    static = parse({**_sw(), "jobs": [{**_job(), "block_values": 2048}]})
    assert static.jobs[0].block_values == 2048
    assert parse({**_sw(), "jobs": [_job()]}).jobs[0].block_values is None  # the default


def test_tofino_controller_needs_a_device_config(tmp_path):
    cfg = parse(_sw(target="tofino", state_file=str(tmp_path / "s.json")), tmp_path)
    ctl = Controller(cfg)
    assert ctl.p4info == build.BUILD_DIR / "tofino" / "p4reduce.p4info.txtpb"
    with pytest.raises(ConfigError, match="switch.device_config: missing"):
        ctl._our_pipeline()


# -- a real switch driven through a tofino configuration -------------------------------------

# configured (operator) ports 11..14 are the switch's ports 1..4
PORT_MAP = {11: 1, 12: 2, 13: 3, 14: 4}


@pytest.fixture
def tofino_controller(switch_process, tmp_path):
    cfg = parse(
        {
            "switch": {
                # Tofino 2: its 64 values per block are a size the v1model stand-in takes
                # (Tofino 1's 28 is not one of V1MODEL_BLOCK_SIZES)
                "target": "tofino2",
                "grpc_addr": switch_process.grpc_addr,
                "mac": SWITCH_MAC,
                "ip": SWITCH_IP,
                "election_id": 10,
                "ports": sorted(PORT_MAP),
                "port_map": {str(k): v for k, v in PORT_MAP.items()},
                "hosts": [{"mac": host(1)[0], "port": 11}],
                # the v1model build stands in for the TNA one: same P4Runtime surface
                "p4info": str(build.DEFAULT_P4INFO),
                "device_config": str(build.DEFAULT_DEVICE_CONFIG),
                "state_file": str(tmp_path / "jobs.json"),
            }
        },
        tmp_path,
    )
    ctl = Controller(cfg)
    ctl.up()
    yield ctl
    ctl.close()


def _workers(ports):
    """Workers on configured ports; their addresses are those of the switch port they sit
    on (host(dev port)), which run_round sends from."""
    return [
        WorkerAddress(rank, port, *host(PORT_MAP[port]), 0x5031) for rank, port in enumerate(ports)
    ]


def test_entries_and_groups_carry_dev_ports(tofino_controller):
    ctl = tofino_controller
    job = ctl.jobs.create(9, _workers([12, 13]), slots=4)
    assert job.encoding == "lanes"  # the tofino default
    assert job.int32_halves  # a TNA switch cannot flag an int32 overflow
    assert all(d["int32_halves"] is True for d in job.descriptors(ctl.jobs.switch))
    entries = [ctl.conn.p4.describe_entry(e) for e in read_entries(ctl.conn)]
    admission = [e for e in entries if e["table"].endswith("admission.admission")]
    assert sorted(e["match"]["ingress_port"] for e in admission) == [2, 3]
    forward = [e for e in entries if e.get("action", "").endswith(".forward")]
    assert [e["params"]["port"] for e in forward] == [1]  # host on port 11
    groups = read_groups(ctl.conn)
    assert sorted(groups[ctl.config.switch.flood_group]) == [(1, 0), (2, 0), (3, 0), (4, 0)]
    assert sorted(groups[job_group(job.job_index)]) == [(2, 0), (3, 1)]
    with pytest.raises(JobError, match="encoding 'packed' is not available on a tofino"):
        ctl.jobs.create(10, _workers([14]), 4, "packed")
    with pytest.raises(JobError, match="int32_halves false needs a switch that flags"):
        ctl.jobs.create(10, _workers([14]), 4, "lanes", False)
    assert 10 not in ctl.jobs.table.jobs


def test_a_tofino_job_has_its_chips_values_per_block_and_no_other(tofino_controller):
    """Tofino 2 carries 64 values per block, Tofino 1 28 (what its 12 stages add in one
    pass: docs/tofino.md); tests/test_tofino_build.py checks both against the builds."""
    assert TARGETS["tofino"].block_sizes == (28,)
    job = tofino_controller.jobs.create(4, _workers([12]))
    assert job.block_values == 64
    with pytest.raises(JobError, match="4096 values per block is not available on a tofino"):
        tofino_controller.jobs.create(5, _workers([13]), block_values=4096)
    assert 5 not in tofino_controller.jobs.table.jobs


def test_a_silent_job_is_refused_on_tofino(tofino_controller):
    """The TNA program runs every-rank rounds only: a silent job is refused before any
    entry is written, naming the mode the target runs."""
    ctl = tofino_controller
    with pytest.raises(JobError) as info:
        ctl.jobs.create(6, _workers([13]), round_mode="silent")
    message = str(info.value)
    assert "round mode 'silent' is not available on a tofino2 switch" in message
    assert "create the job with round mode 'every_rank'" in message
    assert 6 not in ctl.jobs.table.jobs
    assert not [
        e for e in read_entries(ctl.conn) if "admission" in ctl.conn.p4.describe_entry(e)["table"]
    ]
    assert ctl.jobs.create(6, _workers([13]), round_mode="every_rank").round_mode == "every_rank"


def test_a_job_without_a_slot_count_gets_the_targets_default(tofino_controller):
    job = tofino_controller.jobs.create(3, _workers([12]))
    assert job.slot_count == 64


def test_a_tofino_jobs_ranks_keep_every_slot_outstanding(tofino_controller):
    """A Tofino pipeline takes every port's packets at line rate: nothing of a job queues
    there first in first out, so its ranks keep every slot outstanding (the descriptor's
    window), not bmv2's FAIR_SLOTS; a window given is kept, one above the slots refused."""
    ctl = tofino_controller
    job = ctl.jobs.create(3, _workers([12]))
    assert job.window == job.slot_count == 64 > TARGETS["bmv2"].default_window
    assert {d["window"] for d in job.descriptors(ctl.jobs.switch)} == {64}
    assert ctl.jobs.create(4, _workers([13]), slots=32, window=8).window == 8
    with pytest.raises(JobError, match="job 5: window 33 is not a number of slots in 1..32"):
        ctl.jobs.create(5, _workers([14]), slots=32, window=33)
    assert 5 not in ctl.jobs.table.jobs


def test_a_lanes_round_completes_through_dev_ports(tofino_controller, switch_process):
    ctl = tofino_controller
    job = ctl.jobs.create(4, _workers([11, 14]), slots=4)
    descriptors = job.descriptors(ctl.jobs.switch)
    assert all(d["encoding"] == "lanes" for d in descriptors)
    res = run_round(switch_process, descriptors, MsgType.ANNOUNCE, nxt=0)
    assert all(r is not None for r in res.values())
    vals = {0: np.arange(p.BLOCK_VALUES), 1: np.arange(p.BLOCK_VALUES) * -5}
    res = run_round(switch_process, descriptors, MsgType.DATA, vals, version=1, block=0)
    for rank in (0, 1):
        assert res[rank] is not None and res[rank].header.msg_type == MsgType.RESULT
        assert list(res[rank].values) == list(np.arange(p.BLOCK_VALUES) * -4)


def _state_file_job(encoding: str):
    from p4reduce.job import Job

    return Job(
        job=3,
        job_index=0,
        slot_base=0,
        slot_count=4,
        epoch=1,
        workers=[WorkerAddress(0, 1, *host(1), 0x5030)],
        encoding=encoding,
    )


@pytest.mark.parametrize(
    "encoding,needle",
    [
        ("packed", "job 3 with encoding 'packed'.*tofino switch"),
        ("lanes", "job 3 sending int32 as whole lanes.*tofino switch"),
    ],
)
def test_up_refuses_a_state_file_job_a_tofino_cannot_run(tmp_path, encoding, needle):
    """A state file written for a bmv2 switch may hold jobs a Tofino cannot run right: a
    packed job (its values would be added as lanes) or a lanes job sending int32 as whole
    lanes (it relies on the overflow flag the TNA program does not set). Reconciling stops,
    naming the job, before anything is written to the switch."""
    cfg = parse(_sw(target="tofino", state_file=str(tmp_path / "s.json")), tmp_path)
    ctl = Controller(cfg)  # never connected: the refusal must come first
    ctl.jobs.table.jobs = {3: _state_file_job(encoding)}
    with pytest.raises(JobError, match=needle):
        ctl._reconcile_locked()


@pytest.mark.parametrize("name", ["tofino", "tofino2"])
def test_up_refuses_a_state_file_job_across_pipes(tmp_path, name):
    """A state file job whose rank sits in another pipe than the read-out port (here after
    the port map changed) is refused by `up`, naming the state file, job, port and pipe,
    before anything is written to the switch."""
    sw = _sw(target=name, port_map={"1": 200, "2": 8, "3": 16}, state_file=str(tmp_path / "s"))
    ctl = Controller(parse(sw, tmp_path))  # never connected: the refusal must come first
    ctl.jobs.table.jobs = {3: _state_file_job("lanes")}
    ctl.jobs.table.jobs[3].int32_halves = True
    with pytest.raises(JobError) as info:
        ctl._reconcile_locked()
    message = str(info.value)
    assert f"the state file {tmp_path / 's'} has a job a {name} switch cannot run" in message
    assert "job 3: rank 0's port 1 is dev port 200, in pipe 1" in message


def test_a_state_file_job_keeps_or_infers_int32_halves():
    from p4reduce.job import Job

    job = _state_file_job("lanes")
    assert Job.from_json({**job.to_json(), "int32_halves": True}).int32_halves
    legacy = job.to_json()
    del legacy["int32_halves"]
    assert not Job.from_json(legacy).int32_halves  # written before the field: lanes
    assert Job.from_json({**legacy, "encoding": "packed"}).int32_halves
