"""Property-based tests (hypothesis) of what operators type: configuration files, worker
addresses, `p4reduce-ctl` command lines and loss probabilities. Whatever the input, the
answer is a value that is valid or one clear error -- never a traceback, never a silently
reinterpreted address. No switch is needed: every case here is refused (or accepted)
before the controller connects."""

from __future__ import annotations

import argparse
import ipaddress
import json

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from controlplane import cli
from p4reduce.addresses import AddressError, unicast_ipv4, unicast_mac
from controlplane.config import ConfigError, load, parse
from controlplane.drop_simulator import MAX_THRESHOLD, SCALE, threshold

# ---- addresses ---------------------------------------------------------------------------

octet = st.integers(0, 255)
macs = st.lists(octet, min_size=6, max_size=6).map(bytes)
ipv4s = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
# unicast, locally administered (never all-zero); 1.0.0.0 .. 223.255.255.255 minus 127/8
host_macs = macs.map(lambda b: bytes([b[0] & 0xFE | 0x02]) + b[1:])
host_ips = (
    st.integers(1 << 24, (224 << 24) - 1)
    .filter(lambda i: i >> 24 != 127)
    .map(ipaddress.IPv4Address)
)


def _mac_text(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def _host_mac(b: bytes) -> bool:
    return not b[0] & 1 and b != bytes(6)


def _host_ip(ip: ipaddress.IPv4Address) -> bool:
    first = int(ip) >> 24
    return first not in (0, 127) and first < 224


@given(macs, st.booleans())
def test_a_canonical_mac_is_accepted_iff_it_names_one_host(b, upper):
    text = _mac_text(b).upper() if upper else _mac_text(b)
    if _host_mac(b):
        assert unicast_mac(text) == _mac_text(b)
    else:
        with pytest.raises(AddressError):
            unicast_mac(text)


@given(st.text(max_size=40))
@example(" 0x2:0:0:0:0:1")
@example("2:0:0:0:0:1")
@example("02:00:00:00:00:01 ")
@example("02-00-00-00-00-01")
def test_any_other_mac_spelling_is_refused(text):
    try:
        out = unicast_mac(text)
    except AddressError as exc:
        assert repr(text) in str(exc)
        return
    # accepted: it was the canonical spelling of one host's address
    assert out == text.lower() and _host_mac(bytes(int(x, 16) for x in text.split(":")))
    assert len(text) == 17


@given(ipv4s)
def test_a_dotted_quad_is_accepted_iff_it_is_a_host_address(ip):
    if _host_ip(ip):
        assert unicast_ipv4(str(ip)) == str(ip)
    else:
        with pytest.raises(AddressError):
            unicast_ipv4(str(ip))


@given(st.text(max_size=20))
@example("010.0.0.1")
@example(" 10.0.0.1")
@example("10.0.0.256")
@example("0.0.0.0")
@example("255.255.255.255")
def test_any_other_ipv4_spelling_is_refused(text):
    try:
        out = unicast_ipv4(text)
    except AddressError:
        return
    assert out == text == str(ipaddress.IPv4Address(text)) and _host_ip(ipaddress.IPv4Address(text))


# ---- --worker RANK:PORT:MAC:IP[:UDP] ---------------------------------------------------------


@given(
    st.integers(0, 255), st.integers(0, 510), host_macs, host_ips, st.integers(0, 15), st.booleans()
)
def test_worker_argument_round_trip(rank, port, mac, ip, udp_off, with_udp):
    text = f"{rank}:{port}:{_mac_text(mac)}:{ip}" + (f":{20528 + udp_off}" if with_udp else "")
    w = cli.parse_worker(text)
    assert (w.rank, w.port, w.mac, w.ip) == (rank, port, _mac_text(mac), str(ip))
    assert w.udp_port == (20528 + udp_off if with_udp else 20528)


@given(st.text(alphabet=st.sampled_from("0123456789abcdefABCDEF:. x-+ff"), max_size=45))
def test_worker_argument_is_valid_or_refused_with_a_message(text):
    try:
        w = cli.parse_worker(text)
    except argparse.ArgumentTypeError as exc:
        assert "--worker" in str(exc)
        return
    assert unicast_mac(w.mac) == w.mac and unicast_ipv4(w.ip) == w.ip
    assert 0 <= w.rank <= 255 and 0 <= w.port <= 510 and w.udp_port & 0xFFF0 == 0x5030


# ---- loss probability -> 16-bit threshold ------------------------------------------------------


@given(st.floats(0.0, 1.0, exclude_max=True))
@example(0.999999)
@example(1 - 2**-53)
def test_every_probability_in_the_documented_range_has_a_threshold(p):
    t = threshold(p, "ingress")
    assert 0 <= t <= MAX_THRESHOLD
    assert abs(t / SCALE - p) <= 1 / SCALE


@given(st.floats(0.0, 1.0, exclude_max=True), st.floats(0.0, 1.0, exclude_max=True))
def test_threshold_is_monotonic(p, q):
    assume(p <= q)
    assert threshold(p, "x") <= threshold(q, "x")


# ---- configuration --------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**65), 2**65)
    | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
worker_tables = st.fixed_dictionaries(
    {
        "rank": json_values | st.integers(0, 3),
        "port": json_values | st.integers(1, 3),
        "mac": json_values
        | st.sampled_from(
            ["02:00:00:00:00:01", "ff:ff:ff:ff:ff:ff", " 0x2:0:0:0:0:1", "02:00:00:00:00:02"]
        ),
        "ip": json_values
        | st.sampled_from(["10.0.0.1", "0.0.0.0", "255.255.255.255", "10.0.0.2", "224.0.0.1"]),
    },
    optional={"udp_port": json_values | st.integers(20528, 20543)},
)
configs = st.fixed_dictionaries(
    {
        "switch": st.fixed_dictionaries(
            {"ports": json_values | st.lists(st.integers(0, 600), max_size=4)},
            optional={
                "mac": json_values,
                "ip": json_values,
                "grpc_addr": json_values,
                "election_id": json_values,
                "device_id": json_values,
                "hosts": json_values
                | st.lists(
                    st.fixed_dictionaries(
                        {"mac": json_values, "port": json_values | st.integers(1, 3)}
                    ),
                    max_size=2,
                ),
                "state_file": json_values,
                "flood_group": json_values,
            },
        )
    },
    optional={
        "jobs": json_values
        | st.lists(
            st.fixed_dictionaries(
                {
                    "job": json_values | st.integers(0, 3),
                    "slots": json_values | st.integers(1, 9),
                    "workers": json_values | st.lists(worker_tables, max_size=3),
                }
            ),
            max_size=2,
        )
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(configs, json_values))
def test_any_configuration_is_valid_or_one_clear_error(tmp_path_factory, data):
    base = tmp_path_factory.mktemp("cfg")
    try:
        cfg = parse(data, base)
    except ConfigError as exc:
        assert exc.path is not None and "\n" not in str(exc)
        return
    # accepted: every address in it names one host, every job refers to known ports
    unicast_mac(cfg.switch.mac)
    unicast_ipv4(cfg.switch.ip)
    for job in cfg.jobs:
        for w in job.workers:
            assert unicast_mac(w.mac) == w.mac and unicast_ipv4(w.ip) == w.ip
            assert w.port in cfg.switch.ports


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_configuration_file_is_valid_or_one_clear_error(tmp_path, raw):
    path = tmp_path / "switch.toml"
    path.write_bytes(raw)
    try:
        cfg = load(path)
    except ConfigError as exc:
        assert "\n" not in str(exc).strip() or "TOML" in str(exc)
        return
    assert cfg.switch.state_file == tmp_path / "switch.state.json"


def test_configuration_without_state_file_gets_one_beside_it(tmp_path):
    path = tmp_path / "edge.toml"
    path.write_text("[switch]\nports = [1]\n")
    assert load(path).switch.state_file == tmp_path / "edge.state.json"


# ---- p4reduce-ctl command lines -------------------------------------------------------------

words = st.sampled_from(
    [
        "up",
        "job",
        "create",
        "delete",
        "list",
        "show",
        "stats",
        "drop-sim",
        "--job",
        "--slots",
        "--worker",
        "--ingress",
        "--egress",
        "--seed",
        "--timeout",
        "--election-id",
        "--rank",
        "--watch",
        "--reset",
        "-1",
        "0",
        "0.999999",
        "1",
        "1.5",
        "nan",
        "65536",
        "0:1:02:00:00:00:00:01:10.0.0.1",
        "0:1:ff:ff:ff:ff:ff:ff:10.0.0.1",
        "0:1: 0x2:0:0:0:0:1:10.0.0.1",
        "x",
    ]
)


argvs = st.lists(words | st.text(max_size=8), max_size=8)


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(argvs, st.booleans())
def test_any_command_line_parses_or_is_one_usage_error(capsys, argv, as_json):
    assume("--help" not in argv and "-h" not in argv)
    capsys.readouterr()  # the fixture is shared by every example
    try:
        args = cli.build_parser(as_json).parse_args(argv)
    except SystemExit as exc:
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.code == cli.EXIT_USAGE and len(err) == 1, (argv, err)
        if as_json:
            assert json.loads(err[0])["exit_code"] == cli.EXIT_USAGE
        return
    # parsed: every value is in its documented range
    assert args.timeout > 0
    if args.command == "drop-sim":
        assert 0 <= args.ingress < 1 and 0 <= args.egress < 1 and 0 <= args.seed < 2**32
    for w in getattr(args, "worker", None) or []:
        assert unicast_mac(w.mac) == w.mac and unicast_ipv4(w.ip) == w.ip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(argvs, st.booleans())
def test_any_command_line_exits_with_a_code_and_one_error_line(
    tmp_path_factory, capsys, argv, as_json
):
    """Through main(), against a switch that is not there: a command line fails before the
    switch (exit 1 or 2) or when it reaches for it (exit 3), with one line; never a
    traceback. (`up` is left out only because it retries for seconds; see below.)"""
    cfg = tmp_path_factory.mktemp("ctl") / "switch.toml"
    cfg.write_text('[switch]\ngrpc_addr = "127.0.0.1:1"\nports = [1, 2]\n')
    argv = ["-c", str(cfg), "--timeout", "0.05", *(["--json"] if as_json else []), *argv]
    assume(not {"--help", "-h", "--watch", "up"} & set(argv))
    capsys.readouterr()
    code = cli.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code in (cli.EXIT_REFUSED, cli.EXIT_USAGE, cli.EXIT_SWITCH), (argv, code, err)
    assert len(err) == 1, err
    if as_json:
        assert json.loads(err[0])["exit_code"] == code
    else:
        assert err[0].startswith("p4reduce-ctl")


def test_documented_usage_errors(tmp_path, capsys):
    cfg = tmp_path / "switch.toml"
    cfg.write_text('[switch]\ngrpc_addr = "127.0.0.1:1"\nports = [1, 2]\n')
    base = ["-c", str(cfg)]
    for argv in (
        ["--timeout", "0", "stats"],
        ["--timeout", "-3", "stats"],
        ["drop-sim", "--job", "1", "--ingress", "1"],
        ["job", "create", "--job", "1", "--worker", "0:1: 0x2:0:0:0:0:1:10.0.0.1"],
        ["job", "create", "--job", "1", "--worker", "0:1:02:00:00:00:00:01:0.0.0.0"],
        ["job", "create", "--job", "1", "--worker", "0:1:02:00:00:00:00:01:255.255.255.255"],
    ):
        assert cli.main(base + argv) == cli.EXIT_USAGE, argv
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    for argv in (["stats"], ["up"]):
        assert cli.main(base + ["--json", "--timeout", "0.05", *argv]) == cli.EXIT_SWITCH
        assert json.loads(capsys.readouterr().err)["exit_code"] == cli.EXIT_SWITCH
