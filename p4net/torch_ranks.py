#!/usr/bin/env python3
"""torchrun for the Mininet topology: N ranks of a torch.distributed program, each in its
own Mininet host behind the P4 switch.

    python mininet/torch_ranks.py --workers 4 -- python examples/clicks_rank.py --backend p4reduce
    (or python -m p4net.torch_ranks ...)

Starts the switch (softswitch, or simple_switch_grpc with --target), the controller and N
hosts (links at --mtu, raised to carry the job's frames when its --block-values need more);
creates a job of N ranks and writes its descriptors as
`p4reduce-ctl job create --descriptors DIR` does; starts the program N times, rank r in
host h(r+1)'s network namespace, with the variables torchrun sets (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT: env:// rendezvous at rank 0's host address;
OMP_NUM_THREADS=1 unless set), GLOO_SOCKET_IFNAME (the host's link: gloo binds it, as
hostname resolution inside a host names no address the others reach), P4REDUCE_JOB and
P4REDUCE_DESCRIPTOR_DIR (how a rank finds its job), P4REDUCE_NETNS (its Mininet host) and
PYTHONFAULTHANDLER=1: when one rank fails, the others get a grace period and are then
stopped with SIGABRT, so a stuck rank's log shows every thread's Python stack. Every
socket a rank opens -- the store's, gloo's, the p4reduce Worker's -- is in its host, so
whichever backend a program chooses, its traffic crosses the host's link and the P4 switch
(which forwards ordinary IPv4 between the hosts: docs/protocol.md section 15). The job is
deleted and everything started is stopped afterwards, also after an error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from p4reduce.addresses import WorkerAddress
from controlplane.stats import job_stats
from hostlib import protocol
from p4net import demo, topology
from p4reduce.job import ROUND_MODES, descriptor_name
from p4reduce.target import default_slots, kind_window


@dataclass
class RankResult:
    rank: int
    host: str
    returncode: int | None
    output: str
    link: dict = field(default_factory=dict)  # the host link's counters during the run


@dataclass
class LaunchResult:
    kind: str  # the switch's kind (p4reduce.target)
    job: int
    seconds: float
    ranks: list[RankResult]
    switch_counters: dict

    @property
    def ok(self) -> bool:
        return all(r.returncode == 0 for r in self.ranks)

    def failures(self) -> str:
        return "\n".join(
            f"--- rank {r.rank} exit {r.returncode} ---\n{r.output[-4000:]}"
            for r in self.ranks
            if r.returncode != 0
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _link_counters(host: topology.HostSpec) -> dict[str, int]:
    """Counters of the host's link at the switch end, named from the host's side
    (the switch end receives what the host sends)."""
    c = demo._counters(f"{topology.SWITCH_NAME}-eth{host.port}")
    return {
        "tx_packets": c["rx_packets"],
        "tx_bytes": c["rx_bytes"],
        "rx_packets": c["tx_packets"],
        "rx_bytes": c["tx_bytes"],
    }


class TorchNetwork:
    """A started network with `hosts` hosts; `run()` runs one program per job."""

    def __init__(
        self,
        hosts: int,
        target: str = "softswitch",
        slots: int | None = None,
        mtu: int = topology.DEFAULT_MTU,
        block_values: int | None = None,
        round_mode: str | None = None,
    ):
        self.demo = demo.DemoNetwork(target, hosts, mtu)
        self.slots = default_slots(self.kind) if slots is None else slots
        self.block_values = block_values  # of each run's job; None: the target's default
        self.round_mode = round_mode  # of each run's job; None: the target's default

    @property
    def kind(self) -> str:
        return self.demo.kind

    @property
    def mtu(self) -> int:
        """The links' MTU now (raised by a run whose job's frames needed more)."""
        return self.demo.mtu

    def __enter__(self) -> "TorchNetwork":
        self.demo.__enter__()
        return self

    def set_mtu(self, mtu: int) -> None:
        """Every link at `mtu` from the next run on (DemoNetwork.set_mtu)."""
        self.demo.set_mtu(mtu)

    def __exit__(self, *exc) -> None:
        self.demo.__exit__(*exc)

    def run(
        self,
        argv: list[str],
        workers: int,
        *,
        env: dict[str, str] | None = None,
        timeout: float = 600.0,
        grace: float = 15.0,
        stream_rank0: bool = False,
        block_values: int | None = None,
        round_mode: str | None = None,
    ) -> LaunchResult:
        """Run `argv` as ranks 0..workers-1 of a new job of `block_values` values per block
        (None: the network's); wait for all of them (at most `timeout` s). When a rank
        fails, the others get `grace` s to finish, then are killed: they would otherwise
        wait in a collective for the failed one. The links' MTU is raised first if the
        job's frames need it (DemoNetwork.carry)."""
        d = self.demo
        assert d.ctl is not None and d.net is not None
        if not 1 <= workers <= len(d.hosts):
            raise ValueError(f"{workers} ranks need 1..{len(d.hosts)} hosts")
        hosts = d.hosts[:workers]
        k = self.block_values if block_values is None else block_values
        mode = self.round_mode if round_mode is None else round_mode
        job = d.ctl.jobs.create(
            d.next_job,
            [
                WorkerAddress(r, h.port, h.mac, h.ip, protocol.UDP_PORT_BASE)
                for r, h in enumerate(hosts)
            ],
            self.slots,
            window=kind_window(self.kind, self.slots),
            **({} if k is None else {"block_values": k}),
            **({} if mode is None else {"round_mode": mode}),
        )
        d.next_job += 1
        d.carry(job.block_values)
        descriptors = d.workdir / f"job{job.job}-descriptors"
        descriptors.mkdir()
        for desc in job.descriptors(d.ctl.jobs.switch):
            (descriptors / descriptor_name(job.job, desc["rank"])).write_text(
                json.dumps(desc, indent=2) + "\n"
            )
        common = {
            **os.environ,
            **(env or {}),
            "WORLD_SIZE": str(workers),
            "LOCAL_WORLD_SIZE": str(workers),
            # the store listens in rank 0's host; the others reach it through the switch
            "MASTER_ADDR": hosts[0].ip,
            "MASTER_PORT": str(free_port()),
            "P4REDUCE_JOB": str(job.job),
            "P4REDUCE_DESCRIPTOR_DIR": str(descriptors),
            "PYTHONUNBUFFERED": "1",
            # a rank stopped below (SIGABRT) prints every thread's Python stack
            "PYTHONFAULTHANDLER": "1",
            # as torchrun: N ranks on one machine, one intra-op thread each
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        }
        procs: list[subprocess.Popen] = []
        logs = []
        readers = []
        before = {h.name: _link_counters(h) for h in hosts}
        start = time.perf_counter()
        try:
            for rank, h in enumerate(hosts):
                node = d.net.get(h.name)
                rank_env = {
                    **common,
                    "RANK": str(rank),
                    "LOCAL_RANK": str(rank),
                    "GLOO_SOCKET_IFNAME": node.defaultIntf().name,
                    "P4REDUCE_NETNS": f"/proc/{node.pid}/ns/net",
                }
                log_path = d.workdir / f"{demo.rank_stem(job.job, rank)}.log"
                logs.append(log_path)
                if stream_rank0 and rank == 0:
                    p = _in_host(node, argv, rank_env, subprocess.PIPE, text=True)
                    readers.append(threading.Thread(target=_tee, args=(p, log_path), daemon=True))
                    readers[-1].start()
                else:
                    with open(log_path, "w") as f:
                        p = _in_host(node, argv, rank_env, f)
                procs.append(p)
            _wait_all(procs, timeout, grace)
            seconds = time.perf_counter() - start
        finally:
            _stop(procs)
            for t in readers:
                t.join(timeout=5)
            counters = job_stats(d.ctl.conn, job.job_index)
            d.ctl.jobs.delete(job.job)
        results = []
        for rank, (h, p) in enumerate(zip(hosts, procs)):
            after = _link_counters(h)
            results.append(
                RankResult(
                    rank,
                    h.name,
                    p.returncode,
                    logs[rank].read_text(errors="replace"),
                    {k: after[k] - before[h.name][k] for k in after},
                )
            )
        return LaunchResult(self.kind, job.job, seconds, results, counters)


def _in_host(node, argv: list[str], env: dict[str, str], stdout, **kw) -> subprocess.Popen:
    """`argv` in the Mininet host's network namespace (mnexec attaches, then execs the
    program: the Popen's pid is the rank's, which _stop signals)."""
    return node.popen(argv, env=env, stdout=stdout, stderr=subprocess.STDOUT, **kw)


def _stop(procs: list[subprocess.Popen]) -> None:
    """Stop the ranks still running: SIGABRT first, so that a stuck one says where it is
    (Python's faulthandler prints every thread's stack into its log), then SIGKILL."""
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        p.send_signal(signal.SIGABRT)
    for p in alive:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _wait_all(procs: list[subprocess.Popen], timeout: float, grace: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return
        if any(c not in (None, 0) for c in codes):
            deadline = min(deadline, time.monotonic() + grace)
            grace = float("inf")  # set the grace period once
        time.sleep(0.2)


def _tee(p: subprocess.Popen, path: Path) -> None:
    assert p.stdout is not None
    with open(path, "w") as f:
        for line in p.stdout:
            f.write(line)
            sys.stdout.write(f"[rank 0] {line}")
            sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--target", default="softswitch", help="softswitch, simple_switch_grpc or auto")
    ap.add_argument("--slots", type=int, default=None, help="default: the target's")
    ap.add_argument(
        "--mtu", type=int, default=topology.DEFAULT_MTU, help="the host links' MTU, both ends"
    )
    ap.add_argument(
        "--block-values",
        type=int,
        default=None,
        help="values per block of the job (default: the target's); the links' MTU is raised "
        "to carry its frames",
    )
    ap.add_argument(
        "--round-mode",
        choices=ROUND_MODES,
        default=None,
        help="the job's round mode (default: the target's)",
    )
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- program and arguments (run once per rank)"
    )
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the program after --")
    with TorchNetwork(
        args.workers, args.target, args.slots, args.mtu, args.block_values, args.round_mode
    ) as net:
        res = net.run(command, args.workers, timeout=args.timeout, stream_rank0=True)
    for r in res.ranks:
        print(
            f"rank {r.rank} ({r.host}): exit {r.returncode}, link tx {r.link['tx_bytes']} "
            f"bytes / {r.link['tx_packets']} packets, rx {r.link['rx_bytes']} bytes"
        )
    print(
        f"switch, job {res.job}: " + ", ".join(f"{k} {v}" for k, v in res.switch_counters.items())
    )
    if not res.ok:
        print(res.failures(), file=sys.stderr)
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
