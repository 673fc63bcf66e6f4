"""p4reduce-ctl on a fabric configuration file: `up` programs every switch, `job create`
places a job across the leaves, `stats` reports each switch; a wrong file names the field."""

from __future__ import annotations

import json

import pytest

import io

from controlplane.cli import build_parser, main, run
from controlplane.config import ConfigError, parse

from .conftest import fabric_config, host_ip, host_mac


def toml_value(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)


def write_toml(path, data: dict) -> None:
    """The configuration dict as TOML arrays of tables (the file an operator writes)."""
    lines = []
    for section, tables in data.items():
        for table in tables:
            lines.append(f"[[{section}]]")
            lines += [f"{key} = {toml_value(value)}" for key, value in table.items()]
    path.write_text("\n".join(lines) + "\n")


def ctl(*args: str, capsys) -> tuple[int, str, str]:
    """p4reduce-ctl's exit code, output and errors (the output written to a buffer: `run`
    takes where it writes)."""
    buffer = io.StringIO()
    try:
        code = run(build_parser().parse_args(list(args)), out=buffer)
    except Exception:  # main's handling: exit code and one error line
        code = main(list(args))
    return code, buffer.getvalue(), capsys.readouterr().err


def test_up_job_and_stats(inprocess_fabric, tmp_path, capsys):
    path = tmp_path / "fabric.toml"
    write_toml(path, fabric_config(inprocess_fabric, tmp_path))
    code, out, err = ctl("-c", str(path), "--json", "up", capsys=capsys)
    assert code == 0, err
    up = json.loads(out)
    assert {n: s["pipeline"] for n, s in up["switches"].items()} == {
        "l1": "pushed",
        "l2": "pushed",
        "s": "pushed",
    }
    code, out, err = ctl("-c", str(path), "up", capsys=capsys)
    assert code == 0 and out.count("pipeline kept, 0 table/group change(s)") == 3, out
    workers = [
        f"{r}:{1 + r // 2}:{host_mac(1 + r % 2, 1 + r // 2)}:{host_ip(1 + r % 2, 1 + r // 2)}"
        for r in range(4)
    ]
    args = [a for w in workers for a in ("--worker", w)]
    code, out, err = ctl(
        "-c", str(path), "--json", "job", "create", "--job", "5", *args, capsys=capsys
    )
    assert code == 0, err
    created = json.loads(out)
    # each rank sends to its leaf (the leaf role), its index there on the wire, in a
    # fabric's default round mode (its target's: silent rounds on softswitch)
    assert [d["switch"]["ip"] for d in created["descriptors"]] == ["10.0.0.240", "10.0.0.241"] * 2
    assert [d["wire_rank"] for d in created["descriptors"]] == [0, 0, 1, 1]
    assert {d["round_mode"] for d in created["descriptors"]} == {"silent"}
    code, out, err = ctl("-c", str(path), "--json", "stats", capsys=capsys)
    assert code == 0, err
    stats = json.loads(out)
    assert sorted(stats["switches"]) == ["l1", "l2", "s"] and "5" in stats["jobs"]
    code, out, err = ctl("-c", str(path), "stats", capsys=capsys)
    assert code == 0, err
    rows = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert {"job", "5", "switch", "l1", "l2", "s"} <= rows, out
    code, out, err = ctl("-c", str(path), "job", "delete", "5", capsys=capsys)
    assert code == 0 and "deleted job 5" in out, err
    # a job of silent rounds at more values per block than a leaf's empty partial can
    # grow to is the spine's alone: every rank sends to the spine
    code, out, err = ctl(
        "-c", str(path), "--json", "job", "create", "--job", "6", "--round-mode", "silent",
        "--block-values", "256", *args, capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    created = json.loads(out)
    (spine,) = [sw["ip"] for sw in fabric_config(inprocess_fabric, tmp_path)["switches"]
                if sw["role"] == "spine"]  # fmt: skip
    assert {d["switch"]["ip"] for d in created["descriptors"]} == {spine}
    assert all(d.get("wire_rank") is None for d in created["descriptors"])
    code, out, err = ctl("-c", str(path), "job", "delete", "6", capsys=capsys)
    assert code == 0 and "deleted job 6" in out, err


def test_a_wrong_fabric_file_names_the_field(inprocess_fabric, tmp_path, capsys):
    data = fabric_config(inprocess_fabric, tmp_path)
    data["links"][1]["b"] = "s:1"
    path = tmp_path / "fabric.toml"
    write_toml(path, data)
    code, _, err = ctl("-c", str(path), "up", capsys=capsys)
    assert code == 1 and "links[1].b: s:1 is already used by links[0].b" in err, err


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["links"].append({"a": "l1:3"}), "links[2].b: missing"),
        (lambda d: d["links"][0].update(a="l1"), 'links[0].a: expected "switch:port"'),
        (lambda d: d["switches"][1].update(role="core"), "switches[1].role: 'core' is not one of"),
        (
            lambda d: d["switches"][2].update(state_file=d["switches"][1]["state_file"]),
            "switches[2].state_file",
        ),
        (
            lambda d: (
                d["switches"][0]["ports"].append(3),
                d["hosts"][0].update(switch="s", port=3),
            ),
            "hosts[0].switch: s is the spine",
        ),
        (lambda d: d.update(switch={}), "switch: unknown key"),
    ],
)
def test_fabric_file_errors(inprocess_fabric, tmp_path, change, message):
    data = fabric_config(inprocess_fabric, tmp_path)
    change(data)
    with pytest.raises(ConfigError) as err:
        parse(data)
    assert message in str(err.value)


def test_fabric_job_errors(inprocess_fabric, tmp_path):
    worker = {"rank": 0, "switch": "l2", "port": 1, "mac": host_mac(1, 1), "ip": host_ip(1, 1)}
    data = fabric_config(inprocess_fabric, tmp_path, [{"job": 1, "slots": 2, "workers": [worker]}])
    with pytest.raises(ConfigError, match=r"jobs\[0\].workers\[0\]: .* is not a host on l2:1"):
        parse(data)
    worker["switch"] = "l1"
    twice = {**worker, "rank": 1, "port": 2, "mac": host_mac(1, 2), "ip": host_ip(1, 2)}
    data["jobs"][0]["workers"] = [worker, twice, {**twice, "rank": 3}]
    with pytest.raises(
        ConfigError, match=r"jobs\[0\].workers: ranks\[2\]: rank 3 is behind|without gaps"
    ):
        parse(data)


def test_a_rank_finds_the_fabric_jobs_where_the_controller_keeps_them(inprocess_fabric, tmp_path):
    """p4reduce.state.locate (what a rank reads its job through) and the controller agree
    on a fabric file's state file (the spine's, beside the file by default) and address."""
    from controlplane.config import load
    from p4reduce.state import locate

    data = fabric_config(inprocess_fabric, tmp_path)
    for sw in data["switches"]:
        del sw["state_file"]
    path = tmp_path / "fabric.toml"
    write_toml(path, data)
    config = load(path)
    state, switch = locate(path)
    assert state == config.switch.state_file == tmp_path / "fabric.s.state.json"
    assert (switch.mac, switch.ip) == (config.switch.mac, config.switch.ip)
    assert sorted(sw.state_file.name for sw in config.switches) == [
        "fabric.l1.state.json",
        "fabric.l2.state.json",
        "fabric.s.state.json",
    ]


def test_a_rank_looks_its_fabric_job_up_through_the_configuration(inprocess_fabric, tmp_path):
    """The torch backend's lookup (hostlib.jobref, `controller_config`): a fabric's job in
    the leaf role gives each rank the descriptor of its leaf's part, one at the spine
    alone (silent rounds of wide blocks) the spine's."""
    from controlplane.config import load
    from controlplane.fabric import FabricController
    from hostlib.jobref import _from_controller
    from p4reduce.addresses import WorkerAddress
    from p4reduce.wire import UDP_PORT_BASE

    path = tmp_path / "fabric.toml"
    write_toml(path, fabric_config(inprocess_fabric, tmp_path))
    ctl = FabricController(load(path))
    try:
        ctl.up(retries=3)
        workers = [
            WorkerAddress(
                r,
                1 + r // 2,
                host_mac(1 + r % 2, 1 + r // 2),
                host_ip(1 + r % 2, 1 + r // 2),
                UDP_PORT_BASE,
            )
            for r in range(4)
        ]
        job = ctl.jobs.create(6, workers, slots=2)
        for rank in range(4):
            desc, where = _from_controller(path, 6, rank)
            assert desc == job.descriptor(rank, ctl.jobs.switch), where
            assert desc["rank"] == rank and desc["wire_rank"] == rank // 2
            assert desc["switch"]["ip"] == ("10.0.0.240", "10.0.0.241")[rank % 2]
        # a job of silent rounds at the spine alone (wide blocks): its record there is
        # every rank's
        job = ctl.jobs.create(7, workers, slots=2, round_mode="silent", block_values=256)
        for rank in range(4):
            desc, where = _from_controller(path, 7, rank)
            assert desc == job.descriptor(rank, ctl.jobs.switch), where
            assert desc["switch"]["ip"] == ctl.jobs.switch.ip and desc.get("wire_rank") is None
    finally:
        ctl.close()
