"""``python -m softswitch``: simple_switch_grpc's flags, a free port, clean exit on signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from p4.v1 import p4runtime_pb2

from p4reduce.p4rt import P4InfoIndex

from .helpers import (
    REPO,
    RawClient,
    Update,
    device_config,
    ethernet,
    exact_entry,
    load_p4info,
    start_cli,
    stop_cli,
)
from .test_ports import DST2, Veths, promisc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_starts_without_pipeline_and_exits_cleanly(sig):
    proc, addr = start_cli(
        "--no-p4", "--device-id", "3", "--thrift-port", "9090", "--", "--cpu-port", "255"
    )
    try:
        client = RawClient(addr, device_id=3)
        try:
            rep = client.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest())
            assert rep.p4runtime_api_version == "1.3.0"
        finally:
            client.close()
    finally:
        rc = stop_cli(proc, sig)
    assert rc == 0
    err = proc.stderr.read()
    assert "--thrift-port ignored" in err


def test_refuses_non_loopback_and_bad_flags():
    for args, msg in (
        (["--grpc-server-addr", "0.0.0.0:9559"], "loopback"),
        (["-i", "1@lo", "--cpu-port", "1"], "used as a data port"),
        (["-i", "one@lo"], "not a number"),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "softswitch", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert r.returncode == 2 and msg in r.stderr, r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "softswitch",
            "--grpc-server-addr",
            "127.0.0.1:0",
            "-i",
            "1@sstnonexist0",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1 and "no such interface" in r.stderr
    with socket.socket() as busy:  # a port in use is an error, not a shared port
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "softswitch",
                "--grpc-server-addr",
                f"127.0.0.1:{busy.getsockname()[1]}",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert r.returncode == 1 and "cannot listen" in r.stderr


@pytest.mark.root
def test_cli_with_veth_ports_end_to_end():
    veths = Veths(2)
    proc = None
    try:
        proc, addr = start_cli(
            *[a for p, s in veths.switch_ends().items() for a in ("-i", f"{p}@{s}")],
            "--cpu-port",
            "255",
        )
        info = load_p4info()
        ids = P4InfoIndex.from_proto(info)
        client = RawClient(addr)
        try:
            client.arbitrate((0, 1))
            client.set_pipeline(info, device_config())
            client.write(Update(type=Update.INSERT, entity=exact_entry(ids, DST2, 2)))
            frame = ethernet(DST2)
            veths.send(1, frame)
            assert veths.recv(2) == frame
        finally:
            client.close()
        assert stop_cli(proc) == 0
        proc = None
        assert not promisc(veths.pairs[1][0])
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        veths.close()
