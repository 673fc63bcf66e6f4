"""Configuration validation: every error names the field and the problem."""

from __future__ import annotations

import pytest

from controlplane.config import ConfigError, load, parse


def _base(**switch):
    return {"switch": {"ports": [1, 2, 3], **switch}}


def _job(workers, job=1, slots=4):
    return {"job": job, "slots": slots, "workers": workers}


def _w(rank, port, mac=None, ip=None, **kw):
    return {
        "rank": rank,
        "port": port,
        "mac": mac or f"02:00:00:00:00:0{port}",
        "ip": ip or f"10.0.0.{port}",
        **kw,
    }


@pytest.mark.parametrize(
    "data,path,needle",
    [
        ({"switch": {"ports": [1], "colour": "red"}}, "switch.colour", "unknown key"),
        ({"switch": {}}, "switch.ports", "missing"),
        ({"switch": {"ports": [1, 1]}}, "switch.ports[1]", "duplicate port 1"),
        ({"switch": {"ports": [1], "mac": "zz:00:00:00:00:00"}}, "switch.mac", "bad MAC"),
        ({"switch": {"ports": [1], "ip": "10.0.0"}}, "switch.ip", "bad IPv4"),
        ({"switch": {"ports": [1], "grpc_addr": "nowhere"}}, "switch.grpc_addr", "host:port"),
        ({**_base(), "jobs": [_job([_w(0, 1), _w(2, 2)])]}, "jobs[0].workers", "without gaps"),
        ({**_base(), "jobs": [_job([_w(0, 1), _w(0, 2)])]}, "jobs[0].workers", "duplicate rank"),
        ({**_base(), "jobs": [_job([_w(0, 1), _w(1, 1)])]}, "jobs[0].workers", "duplicate port"),
        ({**_base(), "jobs": [_job([_w(0, 9)])]}, "jobs[0].workers[0].port", "not in switch.ports"),
        ({**_base(), "jobs": [_job([_w(0, 1, mac="02:00")])]}, "jobs[0].workers[0].mac", "bad MAC"),
        (
            {**_base(), "jobs": [_job([_w(0, 1, udp_port=80)])]},
            "jobs[0].workers[0].udp_port",
            "out of range",
        ),
        ({**_base(), "jobs": [_job([_w(0, 1)]), _job([_w(0, 2)])]}, "jobs[1].job", "duplicate job"),
        ({**_base(), "jobs": [_job([_w(0, 1)], slots=0)]}, "jobs[0].slots", "out of range"),
        (
            {**_base(), "jobs": [{**_job([_w(0, 1)], slots=4), "window": 5}]},
            "jobs[0].window",
            "window 5 is not a number of slots in 1..4",
        ),
        ({**_base(), "jobs": [{**_job([_w(0, 1)]), "speed": 1}]}, "jobs[0].speed", "unknown key"),
    ],
)
def test_bad_configuration_names_field_and_problem(data, path, needle):
    with pytest.raises(ConfigError) as info:
        parse(data)
    assert info.value.path == path and needle in str(info.value)


def test_good_configuration_round_trip(tmp_path):
    f = tmp_path / "sw.toml"
    f.write_text(
        '[switch]\nports = [1, 2]\nstate_file = "state.json"\n'
        '[[switch.hosts]]\nmac = "02:00:00:00:00:01"\nport = 1\n'
        "[[jobs]]\njob = 3\nslots = 8\nwindow = 2\nworkers = [\n"
        '  { rank = 0, port = 1, mac = "02:00:00:00:00:01", ip = "10.0.0.1" },\n'
        '  { rank = 1, port = 2, mac = "02:00:00:00:00:02", ip = "10.0.0.2", '
        "udp_port = 20529 },\n]\n"
    )
    cfg = load(f)
    assert cfg.switch.ports == [1, 2] and cfg.switch.state_file == tmp_path / "state.json"
    assert [w.udp_port for w in cfg.jobs[0].workers] == [0x5030, 20529]
    assert cfg.jobs[0].window == 2


def test_not_toml_is_reported_with_the_file(tmp_path):
    f = tmp_path / "broken.toml"
    f.write_text("[switch\nports = 1")
    with pytest.raises(ConfigError, match="broken.toml: not valid TOML"):
        load(f)
