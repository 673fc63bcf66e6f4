#!/usr/bin/env python3
"""p4reduce against a public course-lab allreduce on the same simple_switch_grpc, in one run.

    python bench/course_lab.py --peer /tmp/peers/ans-ss24 [--impl j-udp] [--no-log]
                               [--json OUT]

docs/course-baseline.md says what the three public student solutions of the SwitchML-style
course lab are (j-udp, y-udp, y-eth), at which commits, and how they were run by hand; this
script runs one of them that same way and then p4reduce's dense allreduce on the same bmv2:

1. The peer: their lab directory is copied from --peer (a checkout of their repository;
   their code is never copied into this repository) to a temp dir, where ONLY the
   adaptations of docs/course-baseline.md are applied (each must match its line exactly,
   else the checkout is refused); their P4 is compiled with p4c-bm2-ss; 4 network
   namespaces with veths (names unique to this process, deleted afterwards) are set up as
   their network.py / p4app would; simple_switch_grpc runs their JSON on its own Thrift and
   gRPC ports; their RunControlPlane() entries go in with simple_switch_CLI; their
   worker.py runs through bench/course_lab_rank.py, which calls their AllReduce with all
   ranks starting at one absolute time. Wall time = last rank's end - first rank's start.
   Every rank's result is checked by their RunIntTest and again here (exact integer sum of
   their data files). --no-log adds j-udp with its per-chunk Log() made a no-op.
   j-udp drops a packet whose UDP checksum is 0 (sent as 0xFFFF; see the doc) and has no
   retransmission: a run whose switch ports see no packet for --stall-s seconds is
   stopped, the switch's registers are reset and the run is redone with new data (counted).
2. p4reduce: mininet/demo.py's DemoNetwork on simple_switch_grpc, 4 workers, --size float32
   values, dense, first with the `packed` encoding (one bit<2048> add per packet), then with
   `lanes` (64 per-lane register sequences); per repetition the slowest worker's time.

values/s = values reduced / wall seconds, summed over the repetitions. Needs root,
p4c-bm2-ss, simple_switch_grpc, simple_switch_CLI, Debian's mininet, and a Python with
scapy 2.5.0 for the peer (--peer-python; `make bench-peers` makes build/peer-venv).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

RANKS = 4
MAX_VALUES = 65535  # their GenInts samples without replacement from range(0, 65535)


@dataclass(frozen=True)
class Adaptation:
    """One change of docs/course-baseline.md's list: `old` must occur exactly once."""

    path: str  # inside the lab directory
    old: str
    new: str
    why: str


@dataclass(frozen=True)
class Impl:
    name: str
    repo: str  # owner/name as docs/course-baseline.md names it
    commit: str  # the commit the doc's runs used
    lab: str  # lab directory inside the repository
    marker: str  # a name in their p4/main.p4 that tells this solution from the others
    chunk: int  # int32 values per packet
    default_values: int
    adaptations: tuple[Adaptation, ...]


_Y_WORKERS = Adaptation(
    "config.py", "NUM_WORKERS = 2", "NUM_WORKERS = 4", "(2) the lab's worker-count knob, 2 -> 4"
)
IMPLS = {
    "j-udp": Impl(
        "j-udp",
        "Janonard/ans-ss24",
        "ff75f504ec76af838058ffb3831b6d92df5a103a",
        "lab5/sml-udp",
        "accumulated_chunk",
        64,
        1023 * 64,
        (
            Adaptation(
                "p4/main.p4",
                "const worker_id_t n_workers = 8;",
                "const worker_id_t n_workers = 4;",
                "(3) n_workers, a compile-time constant, 8 -> 4",
            ),
        ),
    ),
    "y-udp": Impl(
        "y-udp",
        "yssamtu/advanced_computer_networks",
        "1aad5073233ac7a926bd3c1ed9f0cc8f6454dbc9",
        "lab5/sml-udp",
        "tbl_sml_udp",
        32,
        2047 * 32,
        (_Y_WORKERS,),
    ),
    # y-eth: a scapy srp() per 32 values (a sniffer started per chunk), so a shorter
    # default vector
    "y-eth": Impl(
        "y-eth",
        "yssamtu/advanced_computer_networks",
        "1aad5073233ac7a926bd3c1ed9f0cc8f6454dbc9",
        "lab5/sml-eth",
        "sml_eth_type",
        32,
        512 * 32,
        (
            Adaptation(
                "worker.py",
                "SwitchML(pkt_rcv.res[0][1].payload)",
                "SwitchML(bytes(pkt_rcv.res[0][1].payload))",
                "(1) as committed it raises IndexError on the first reply",
            ),
            _Y_WORKERS,
        ),
    ),
}
SCAPY_VERSION = "2.5.0"  # adaptation (4)
# bmv2's CLI is a Python script that needs thrift, which Debian's python has (python3-thrift);
# `python3` on PATH may be another interpreter
CLI_PYTHON = "/usr/bin/python3"


class UsageError(Exception):
    """Bad arguments or an unusable peer checkout: one line, exit code 2."""


# -- arguments ---------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see --help)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line -> arguments; UsageError (one line) for anything out of range."""
    ap = _Parser(prog="course_lab.py", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--peer", type=Path, required=True, help="a checkout of the peer's repository (its root)"
    )
    ap.add_argument(
        "--impl",
        choices=sorted(IMPLS),
        default="j-udp",
        help="which solution (default j-udp, the fastest)",
    )
    ap.add_argument(
        "--no-log",
        action="store_true",
        help="j-udp only: also run it with its per-chunk Log() made a no-op",
    )
    ap.add_argument(
        "--values",
        type=int,
        default=0,
        help="int32 values per peer run (default: j-udp 65472, y-udp 65504, "
        "y-eth 16384; at most 65535, a multiple of the chunk)",
    )
    ap.add_argument("--runs", type=int, default=3, help="peer runs per variant")
    ap.add_argument("--size", type=int, default=1_000_000, help="p4reduce float32 values")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="p4reduce timed allreduces per encoding (after an untimed warm-up)",
    )
    ap.add_argument(
        "--peer-python",
        type=Path,
        default=None,
        help=f"a Python with scapy {SCAPY_VERSION} (default build/peer-venv's, else this one)",
    )
    ap.add_argument(
        "--stall-s",
        type=float,
        default=20.0,
        help="a peer run whose switch ports see no packet this long is redone",
    )
    ap.add_argument("--peer-only", action="store_true", help="skip the p4reduce runs")
    ap.add_argument("--json", type=Path, help="also write the table and the runs here")
    a = ap.parse_args(argv)
    impl = IMPLS[a.impl]
    if a.no_log and a.impl != "j-udp":
        raise UsageError(f"--no-log: only j-udp logs per chunk, not {a.impl}")
    if a.values == 0:
        a.values = impl.default_values
    if not 0 < a.values <= MAX_VALUES or a.values % impl.chunk:
        raise UsageError(
            f"--values {a.values}: {a.impl} needs a multiple of {impl.chunk} "
            f"in 1..{MAX_VALUES} (their GenInts draws distinct values below "
            f"65535; their AllReduce sends whole chunks)"
        )
    for name in ("runs", "size", "repeat"):
        if getattr(a, name) < 1:
            raise UsageError(f"--{name} {getattr(a, name)}: must be >= 1")
    if not a.stall_s > 0:
        raise UsageError(f"--stall-s {a.stall_s}: must be > 0")
    a.lab = check_peer(a.peer, impl)
    if a.peer_python is None:
        venv = REPO / "build" / "peer-venv" / "bin" / "python"
        a.peer_python = venv if venv.exists() else Path(sys.executable)
    a.peer_python = a.peer_python.absolute()  # the ranks run elsewhere; not resolve(): a venv
    return a


def check_peer(peer: Path, impl: Impl) -> Path:
    """The lab directory of `impl` in the checkout, or UsageError saying what is missing."""
    if not peer.is_dir():
        raise UsageError(f"--peer {peer}: no such directory")
    lab = peer / impl.lab
    for rel in ("worker.py", "p4/main.p4", "lib/worker.py"):
        if not (lab / rel).is_file():
            raise UsageError(
                f"--peer {peer}: no {impl.lab}/{rel} (is it a checkout of {impl.repo}?)"
            )
    if impl.marker not in (lab / "p4/main.p4").read_text(errors="replace"):
        raise UsageError(
            f"--peer {peer}: {impl.lab}/p4/main.p4 has no {impl.marker!r}: "
            f"not {impl.name} (a checkout of {impl.repo}?)"
        )
    return lab


def peer_commit(peer: Path) -> str:
    r = subprocess.run(
        ["git", "-C", str(peer), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return r.stdout.strip() if r.returncode == 0 else "unknown (not a git checkout)"


def check_tools(peer_python: Path, need_demo: bool) -> str:
    """Everything the run needs, before anything is started; returns scapy's version."""
    if os.geteuid() != 0:
        raise UsageError("needs root (network namespaces, veths, Mininet)")
    for tool in ("p4c-bm2-ss", "simple_switch_grpc", "simple_switch_CLI", "ip", "ethtool"):
        if shutil.which(tool) is None:
            raise UsageError(f"{tool} is not on PATH")
    r = subprocess.run([CLI_PYTHON, "-c", "import sswitch_CLI"], capture_output=True, text=True)
    if r.returncode != 0:
        raise UsageError(
            f"simple_switch_CLI cannot run under {CLI_PYTHON}: "
            f"{(r.stderr.strip().splitlines() or ['?'])[-1]} "
            f"(apt-get install python3-thrift)"
        )
    r = subprocess.run(
        [str(peer_python), "-c", "import scapy; print(scapy.__version__)"],
        capture_output=True,
        text=True,
    )
    version = r.stdout.strip()
    if r.returncode != 0 or version != SCAPY_VERSION:
        raise UsageError(
            f"--peer-python {peer_python}: scapy {version or 'missing'}, the "
            f"runs use scapy {SCAPY_VERSION} (adaptation 4; `make bench-peers` "
            f"makes build/peer-venv)"
        )
    if need_demo:
        from p4net import demo

        if "encoding" not in {f.name for f in fields(demo.Options)}:
            raise UsageError("mininet/demo.py has no encoding option (merge main)")
    return version


# -- the peer's copy ---------------------------------------------------------------------


def adapt(lab: Path, impl: Impl, dest: Path) -> list[str]:
    """Copy their lab directory to dest and apply impl's adaptations there (never in the
    checkout). Returns what was applied; UsageError if a line is not exactly as expected."""
    shutil.copytree(lab, dest, ignore=shutil.ignore_patterns("logs", "__pycache__", "*.pyc"))
    done = []
    for ad in impl.adaptations:
        path = dest / ad.path
        text = path.read_text()
        if text.count(ad.old) != 1:
            raise UsageError(
                f"{impl.lab}/{ad.path}: expected {ad.old!r} exactly once "
                f"(found {text.count(ad.old)}): not the commit "
                f"docs/course-baseline.md ran ({impl.commit[:12]})"
            )
        path.write_text(text.replace(ad.old, ad.new))
        done.append(f"{ad.path}: {ad.old!r} -> {ad.new!r} {ad.why}")
    return done


def compile_p4(lab: Path) -> Path:
    """As p4app does: p4c-bm2-ss --std p4-16."""
    out = lab / "build" / "main.json"
    out.parent.mkdir(exist_ok=True)
    r = subprocess.run(
        ["p4c-bm2-ss", "--std", "p4-16", "-o", str(out), "p4/main.p4"],
        cwd=lab,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise RuntimeError(f"p4c-bm2-ss failed on {lab}/p4/main.p4:\n{r.stderr[-2000:]}")
    return out


# -- namespaces, veths, switch -----------------------------------------------------------


def run(*cmd: str, input: str | None = None) -> str:
    r = subprocess.run(list(cmd), capture_output=True, text=True, input=input)
    if r.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


@dataclass
class Host:
    rank: int
    ns: str
    switch_if: str  # the veth end in the root namespace, switch port rank+1
    mac: str
    ip: str  # with prefix length
    port: int


def host_addresses(impl: str, rank: int) -> tuple[str, str]:
    """MAC and address/prefix as each solution's network.py (via Mininet/p4app) sets them."""
    if impl == "j-udp":
        return f"08:00:00:00:00:{rank + 1:02d}", f"10.0.0.{rank + 1}/8"
    mac = f"08:00:00:00:0{rank + 1}:11"
    return (mac, f"10.0.0.{rank + 1}/8") if impl == "y-eth" else (mac, f"10.0.{rank + 1}.1/24")


class Network:
    """RANKS namespaces, each with a veth renamed eth0 (like p4app's P4Host: rx/tx/sg
    offloads off, IPv6 off); names carry this process's id so parallel runs do not clash."""

    def __init__(self, impl: str):
        tag = f"cl{os.getpid()}"
        self.hosts = []
        for r in range(RANKS):
            mac, ip = host_addresses(impl, r)
            self.hosts.append(Host(r, f"{tag}w{r}", f"{tag}s{r}", mac, ip, r + 1))
        self.tag = tag

    def __enter__(self) -> "Network":
        try:
            for h in self.hosts:
                tmp = f"{self.tag}h{h.rank}"
                run("ip", "netns", "add", h.ns)
                run("ip", "link", "add", h.switch_if, "type", "veth", "peer", "name", tmp)
                Path(f"/proc/sys/net/ipv6/conf/{h.switch_if}/disable_ipv6").write_text("1")
                run("ip", "link", "set", tmp, "netns", h.ns)
                for key in ("all", "default", "lo"):
                    run(
                        "ip",
                        "netns",
                        "exec",
                        h.ns,
                        "sysctl",
                        "-q",
                        "-w",
                        f"net.ipv6.conf.{key}.disable_ipv6=1",
                    )
                run("ip", "-n", h.ns, "link", "set", tmp, "name", "eth0")
                run("ip", "-n", h.ns, "link", "set", "eth0", "address", h.mac)
                run("ip", "-n", h.ns, "addr", "add", h.ip, "dev", "eth0")
                run("ip", "-n", h.ns, "link", "set", "lo", "up")
                run("ip", "-n", h.ns, "link", "set", "eth0", "up")
                run(
                    "ip",
                    "netns",
                    "exec",
                    h.ns,
                    "ethtool",
                    "--offload",
                    "eth0",
                    "rx",
                    "off",
                    "tx",
                    "off",
                    "sg",
                    "off",
                )
                run("ip", "link", "set", h.switch_if, "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for h in self.hosts:
            subprocess.run(["ip", "netns", "del", h.ns], capture_output=True)
            subprocess.run(["ip", "link", "del", h.switch_if], capture_output=True)

    def rx_packets(self) -> int:
        """Packets the switch's ports received (a stalled run leaves this unchanged)."""
        return sum(
            int(Path(f"/sys/class/net/{h.switch_if}/statistics/rx_packets").read_text())
            for h in self.hosts
        )

    def switch_mac(self, h: Host) -> str:
        return Path(f"/sys/class/net/{h.switch_if}/address").read_text().strip()


def start_switch(json_path: Path, net: Network):
    """simple_switch_grpc with their JSON, as p4app starts it (no logging), on its own
    Thrift and gRPC ports; stopped by its process group id (SwitchRunner.stop)."""
    from p4reduce.target import SIMPLE_SWITCH_GRPC
    from softswitch.runner import SwitchRunner

    class JsonSwitch(SwitchRunner):
        def command(self) -> list[str]:
            return [json_path.as_posix() if a == "--no-p4" else a for a in super().command()]

    # bmv2's own default log level (trace), as their launch scripts leave it: p4reduce's
    # launcher turns it off (softswitch/runner.py), theirs does not
    sw = JsonSwitch(
        SIMPLE_SWITCH_GRPC,
        {h.port: h.switch_if for h in net.hosts},
        device_id=77,
        extra_args=("--log-level", "trace"),
    )
    try:
        sw.start()
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", sw.thrift_port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no Thrift on port {sw.thrift_port}:\n{sw.log()}") from None
                time.sleep(0.2)
    except BaseException:
        sw.stop()
        raise
    return sw


def cli(thrift_port: int, commands: list[str]) -> str:
    out = run(
        CLI_PYTHON,
        shutil.which("simple_switch_CLI") or "simple_switch_CLI",
        "--thrift-port",
        str(thrift_port),
        input="\n".join(commands) + "\n",
    )
    bad = [line for line in out.splitlines() if re.search(r"Error|Invalid|exception", line)]
    if bad:
        raise RuntimeError(f"simple_switch_CLI: {bad[0]}\ncommands:\n" + "\n".join(commands))
    return out


def multicast_group(thrift_port: int, mgid: int, ports: list[int]) -> None:
    """As p4app's addMulticastGroup: one node per port, replication id = its index."""
    out = cli(
        thrift_port,
        [f"mc_mgrp_create {mgid}"] + [f"mc_node_create {i} {p}" for i, p in enumerate(ports)],
    )
    handles = re.findall(r"handle (\d+)", out.split("mc_node_create", 1)[-1])
    if len(handles) != len(ports):
        raise RuntimeError(f"mc_node_create: expected {len(ports)} handles in:\n{out}")
    cli(thrift_port, [f"mc_node_associate {mgid} {h}" for h in handles])


def control_plane(impl: str, thrift_port: int, net: Network) -> None:
    """Their RunControlPlane() entries, through simple_switch_CLI instead of P4Runtime."""
    ports = [h.port for h in net.hosts]
    multicast_group(thrift_port, 1, ports)
    cmds = []
    if impl == "y-udp":
        for h in net.hosts:
            sw_mac = net.switch_mac(h)
            cmds.append(
                f"table_add TheIngress.arp.tbl_arp TheIngress.arp.arp_reply {h.port} => {sw_mac}"
            )
            cmds.append(
                f"table_add TheEgress.tbl_sml_udp TheEgress.sml_udp_send {h.port} => "
                f"10.0.{h.port}.0 10.0.{h.port}.1 {sw_mac} {h.mac}"
            )
    elif impl == "j-udp":
        for h in net.hosts:
            cmds.append(
                f"table_add TheIngress.decide_eth_forward "
                f"TheIngress.forward_eth_packet {h.mac} => {h.port}"
            )
        cmds.append(
            "table_add TheIngress.decide_eth_forward "
            "TheIngress.broadcast_eth_packet ff:ff:ff:ff:ff:ff =>"
        )
        multicast_group(thrift_port, 2, ports)
        for h in net.hosts:
            cmds.append(
                f"table_add TheEgress.allreduce_broadcast "
                f"TheEgress.write_allreduce_broadcast_headers {h.port - 1} => "
                f"{h.mac} {h.ip.split('/')[0]}"
            )
    if cmds:
        cli(thrift_port, cmds)


# -- peer runs ---------------------------------------------------------------------------


@dataclass
class PeerRun:
    values: int
    wall: float
    skew: float  # last rank's start - first rank's start
    stalls_before: int  # runs redone before this one succeeded


@dataclass
class Row:
    name: str
    values: int = 0
    wall: float = 0.0
    runs: list = field(default_factory=list)
    stalls: int = 0

    @property
    def rate(self) -> float:
        return self.values / self.wall if self.wall else 0.0


class Stalled(Exception):
    pass


def peer_run(a, lab: Path, net: Network, test_id: str, no_log: bool) -> PeerRun:
    """One vector through their AllReduce on every rank; checked; Stalled if no packet
    reaches the switch for a.stall_s seconds."""
    sync = Path(tempfile.mkdtemp(prefix="sync-", dir=lab))
    procs: list[subprocess.Popen] = []
    try:
        for h in net.hosts:
            cmd = [
                "ip",
                "netns",
                "exec",
                h.ns,
                str(a.peer_python),
                str(BENCH / "course_lab_rank.py"),
                "--impl",
                a.impl,
                "--rank",
                str(h.rank),
                "--values",
                str(a.values),
                "--sync",
                str(sync),
                "--test-id",
                test_id,
            ]
            with open(sync / f"log-{h.rank}.txt", "w") as log:
                procs.append(
                    subprocess.Popen(
                        cmd + (["--no-log"] if no_log else []),
                        cwd=lab,
                        # their worker.py and lib/ (course_lab_rank.py imports them)
                        env={**os.environ, "PYTHONPATH": str(lab)},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        deadline = time.monotonic() + 120
        while not all((sync / f"ready-{h.rank}").exists() for h in net.hosts):
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError("a peer rank did not get ready:\n" + rank_logs(sync))
            time.sleep(0.02)
        (sync / "start").write_text(repr(time.time() + 0.5))
        last_rx, last_change = net.rx_packets(), time.monotonic()
        while any(p.poll() is None for p in procs):
            time.sleep(0.25)
            rx = net.rx_packets()
            if rx != last_rx:
                last_rx, last_change = rx, time.monotonic()
            elif time.monotonic() - last_change > a.stall_s:
                raise Stalled(f"no packet for {a.stall_s}s")
        if any(p.returncode for p in procs):
            raise RuntimeError("a peer rank failed:\n" + rank_logs(sync))
        reports = [json.loads((sync / f"rank-{h.rank}.json").read_text()) for h in net.hosts]
        check_peer_results(lab, test_id, sync, reports)
        starts, ends = [r["start"] for r in reports], [r["end"] for r in reports]
        return PeerRun(a.values, max(ends) - min(starts), max(starts) - min(starts), 0)
    finally:
        for p in procs:  # ours, by PID ("ip netns exec" execs the rank)
            if p.poll() is None:
                p.kill()
                p.wait()


def rank_logs(sync: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(sync.glob("log-*.txt"))
    )


def check_peer_results(lab: Path, test_id: str, sync: Path, reports: list[dict]) -> None:
    """Their RunIntTest's verdict, and our own: every rank's vector is the exact sum of the
    ranks' data files (their CreateTestData)."""
    failed = [r["rank"] for r in reports if not r["their_test_pass"]]
    if failed:
        raise RuntimeError(
            f"their RunIntTest failed on ranks {failed}: {reports[failed[0]]['their_test']}"
        )
    test_dir = lab / "logs" / "test" / f"test-{test_id}"

    def ints(path: Path) -> np.ndarray:
        return np.array(path.read_text().strip().split(","), dtype=np.int64)

    expected = sum(ints(test_dir / f"data-rank-{r}.csv") for r in range(RANKS))
    for r in range(RANKS):
        got = ints(sync / f"result-{r}.csv")
        if not np.array_equal(got, expected):
            bad = int(np.flatnonzero(got != expected)[0])
            raise RuntimeError(f"rank {r}: result[{bad}] = {got[bad]}, the sum is {expected[bad]}")


def reset_registers(thrift_port: int, json_path: Path) -> None:
    names = [r["name"] for r in json.loads(json_path.read_text())["register_arrays"]]
    cli(thrift_port, [f"register_reset {n}" for n in names])


def run_peer(a, log) -> tuple[list[Row], dict]:
    impl = IMPLS[a.impl]
    work = Path(tempfile.mkdtemp(prefix=f"course-lab-{a.impl}-"))
    try:
        lab = work / Path(impl.lab).name
        commit = peer_commit(a.peer)
        if commit != impl.commit:
            log(f"warning: --peer is at {commit}, docs/course-baseline.md ran {impl.commit}")
        applied = adapt(a.lab, impl, lab)
        for line in applied:
            log(f"adapted {line}")
        json_path = compile_p4(lab)
        variants = [(f"{a.impl} (shipped)", False)] + (
            [(f"{a.impl} (no log)", True)] if a.no_log else []
        )
        rows = []
        with Network(a.impl) as net:
            sw = start_switch(json_path, net)
            try:
                control_plane(a.impl, sw.thrift_port, net)
                for name, no_log in variants:
                    row = Row(name)
                    for i in range(a.runs):
                        stalls = 0
                        while True:
                            test_id = f"bench-{'nolog' if no_log else 'shipped'}-{i}-{stalls}"
                            try:
                                pr = peer_run(a, lab, net, test_id, no_log)
                                break
                            except Stalled as exc:
                                stalls += 1
                                log(
                                    f"{name} run {i + 1}: stalled ({exc}; j-udp's zero-"
                                    f"checksum drop, docs/course-baseline.md); registers "
                                    f"reset, redone with new data"
                                )
                                if stalls >= 3:
                                    raise RuntimeError(f"{name}: 3 stalls in a row") from exc
                                reset_registers(sw.thrift_port, json_path)
                        pr.stalls_before = stalls
                        row.runs.append(asdict(pr))
                        row.values += pr.values
                        row.wall += pr.wall
                        row.stalls += stalls
                        log(
                            f"{name} run {i + 1}/{a.runs}: {pr.values} values, "
                            f"{pr.wall:.2f} s, {pr.values / pr.wall:,.0f} values/s "
                            f"(start skew {pr.skew * 1e3:.1f} ms), all {RANKS} ranks exact"
                        )
                    rows.append(row)
            finally:
                sw.stop()
        meta = {
            "impl": a.impl,
            "repo": impl.repo,
            "path": impl.lab,
            "doc_commit": impl.commit,
            "checkout_commit": commit,
            "adaptations": applied,
        }
        return rows, meta
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- p4reduce ----------------------------------------------------------------------------


def run_p4reduce(a, log) -> list[Row]:
    """p4reduce as it is now (bmv2 started with its logging off, then packed and lanes
    jobs), and as it was before the packed encoding: lanes on a bmv2 at its default log
    level (P4REDUCE_BMV2_LOG_LEVEL=trace)."""
    from p4net import demo
    from softswitch.runner import BMV2_LOG_LEVEL_ENV

    rows = []
    plan = [("off", ("packed", "lanes")), ("trace", ("lanes",))]
    saved = os.environ.get(BMV2_LOG_LEVEL_ENV)
    try:
        for level, encodings in plan:
            os.environ[BMV2_LOG_LEVEL_ENV] = level  # read when the switch starts
            with demo.DemoNetwork("simple_switch_grpc", RANKS) as net:
                for encoding in encodings:
                    rows.append(_p4reduce_row(a, log, demo, net, encoding, level))
    finally:
        if saved is None:
            os.environ.pop(BMV2_LOG_LEVEL_ENV, None)
        else:
            os.environ[BMV2_LOG_LEVEL_ENV] = saved
    return rows


def _p4reduce_row(a, log, demo, net, encoding: str, level: str) -> Row:
    opts = demo.Options(
        workers=RANKS,
        size=a.size,
        density=1.0,
        dtype="float32",
        target="simple_switch_grpc",
        deadline=1800.0,
        quiet=True,
        repeat=a.repeat,
        warmup=True,
        encoding=encoding,
    )
    s = net.run_jobs(opts)
    bad = [
        f"rank {o.rank}: {o.error or 'result outside the bound'}"
        for o in s.outcomes
        if not (o.ok and o.matched)
    ]
    name = f"p4reduce {encoding}" + ("" if level == "off" else ", bmv2 trace (before)")
    if bad:
        raise RuntimeError(f"{name}: " + "; ".join(bad))
    row = Row(name)
    for i in range(a.repeat):
        t = max(o.times[i] for o in s.outcomes)  # the job: its slowest worker
        row.runs.append({"values": a.size, "wall": t})
        row.values += a.size
        row.wall += t
        log(
            f"{row.name} repetition {i + 1}/{a.repeat}: {a.size} values, {t:.2f} s, "
            f"{a.size / t:,.0f} values/s, all {RANKS} workers within the bound"
        )
    return row


# -- report ------------------------------------------------------------------------------


def ratios(rows: list[Row], impl: str) -> dict[str, float]:
    by = {r.name: r.rate for r in rows}
    out = {}
    packed = by.get("p4reduce packed")
    for label, other in (
        (f"p4reduce packed / {impl} (shipped)", f"{impl} (shipped)"),
        (f"p4reduce packed / {impl} (no log)", f"{impl} (no log)"),
        ("p4reduce packed / p4reduce lanes", "p4reduce lanes"),
        ("p4reduce packed / before (lanes, bmv2 trace)", "p4reduce lanes, bmv2 trace (before)"),
    ):
        if packed and by.get(other):
            out[label] = packed / by[other]
    return out


def table(rows: list[Row], rat: dict[str, float]) -> str:
    lines = [f"{'impl':<36} {'values':>10} {'wall s':>8} {'values/s':>10}"]
    for r in rows:
        n = len(r.runs)
        what = f"{r.values:,}" if n == 1 else f"{n} x {r.values // n:,}"
        stalled = f"  ({r.stalls} stalled run(s) redone)" if r.stalls else ""
        lines.append(f"{r.name:<36} {what:>10} {r.wall:8.2f} {r.rate:10,.0f}{stalled}")
    lines += [f"{k}: {v:.2f}" for k, v in rat.items()]
    return "\n".join(lines)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _interrupt(signum: int, frame) -> None:  # noqa: ARG001 -- signal's signature
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    try:
        a = parse_args(argv)
        scapy = check_tools(a.peer_python, not a.peer_only)
    except UsageError as exc:
        print(f"course_lab.py: error: {exc}", file=sys.stderr)
        return 2

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    command = shlex.join(
        ["python", "bench/course_lab.py"] + list(argv if argv is not None else sys.argv[1:])
    )
    # Ctrl-C and SIGTERM end the run through the `finally`s: switch, ranks, namespaces
    signal.signal(signal.SIGTERM, _interrupt)
    load_before = loadavg()
    try:
        peer_rows, meta = run_peer(a, log)
        log(f"peer done; load average {loadavg()}")
        p4_rows = [] if a.peer_only else run_p4reduce(a, log)
    except UsageError as exc:
        print(f"course_lab.py: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: everything started was stopped", file=sys.stderr)
        return 130
    except RuntimeError as exc:  # a step failed; everything started was stopped
        print(f"course_lab.py: failed: {exc}", file=sys.stderr)
        return 1
    rows = peer_rows + p4_rows
    rat = ratios(rows, a.impl)
    bmv2 = run("simple_switch_grpc", "--version").strip()
    print(
        f"\n{command}\n{RANKS} ranks, simple_switch_grpc {bmv2} (same binary for all rows), "
        f"peer {meta['repo']} @ {meta['checkout_commit'][:12]} {meta['path']}, scapy {scapy}; "
        f"load average {load_before} before, {loadavg()} after"
    )
    print(table(rows, rat))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(
            json.dumps(
                {
                    "command": command,
                    "bmv2": bmv2,
                    "scapy": scapy,
                    "host": platform.node(),
                    "load_before": load_before,
                    "load_after": loadavg(),
                    "peer": meta,
                    "rows": [{**asdict(r), "values_per_s": r.rate} for r in rows],
                    "ratios": rat,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
