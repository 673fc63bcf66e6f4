"""p4reduce-ctl: the operator's command line.

Exit codes scripts can use: 0 done, 1 refused (bad request, configuration or state file, or
another controller holds this election id: the message says which field), 2 usage error
(a bad command line: the message names the argument), 3 switch unreachable or P4Runtime
error. Every error is one line on stderr, `p4reduce-ctl: ...`; with `--json` it is one JSON
object there instead, {"error": message, "exit_code": n}. Readable tables by default,
`--json` for scripts.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import NoReturn

from p4reduce import version, wire
from p4reduce.addresses import AddressError, WorkerAddress, unicast_ipv4, unicast_mac
from p4reduce.job import (
    ENCODINGS,
    MAX_JOB_ID,
    MAX_SLOT_COUNT,
    ROUND_MODES,
    JobError,
    descriptor_name,
)
from p4reduce.p4rt import P4InfoError
from p4reduce.target import TARGETS

from . import stats as switch_stats
from .config import ConfigError, load
from .connection import MastershipError, SwitchError
from .controller import Controller
from .fabric import FabricController

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_SWITCH = 0, 1, 2, 3
PROG = "p4reduce-ctl"


def _one_line(message: str) -> str:
    return "; ".join(part.strip(" -") for part in str(message).splitlines() if part.strip())


def report_error(message: str, code: int, as_json: bool, prog: str = PROG) -> int:
    """Print one error line (JSON with --json) on stderr and return the exit code."""
    message = _one_line(message)
    print(
        json.dumps({"error": message, "exit_code": code}) if as_json else f"{prog}: {message}",
        file=sys.stderr,
    )
    return code


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2), in JSON when --json was given."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        report_error(f"{message} (see {self.prog} --help)", EXIT_USAGE, self.json_errors, self.prog)
        sys.exit(EXIT_USAGE)


def _int_in(lo: int, hi: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} {text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{what} {value} is out of range {lo}..{hi}")
        return value

    parse.__name__ = what
    return parse


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds must be > 0")
    return value


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value) or not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: a loss probability must be in [0, 1)")
    return value


def parse_worker(text: str) -> WorkerAddress:
    """RANK:PORT:MAC:IP[:UDP_PORT] -- the MAC contains colons, so split from both ends.

    Strict: decimal rank 0..255, port 0..510 and UDP port in the p4reduce range; the MAC
    and IPv4 must be a single host's (p4reduce/addresses.py)."""
    parts = text.split(":")
    if len(parts) not in (9, 10):
        raise argparse.ArgumentTypeError(
            f"--worker {text!r}: expected RANK:PORT:MAC:IP[:UDP_PORT], "
            "e.g. 0:1:02:00:00:00:00:01:10.0.0.1"
        )
    numbers = [parts[0], parts[1]] + parts[9:]
    if not all(n.isascii() and n.isdigit() for n in numbers):
        raise argparse.ArgumentTypeError(
            f"--worker {text!r}: rank, port and udp port must be decimal integers"
        )
    rank, port = int(parts[0]), int(parts[1])
    udp = int(parts[9]) if len(parts) == 10 else wire.UDP_PORT_BASE
    if rank > 255:
        raise argparse.ArgumentTypeError(f"--worker {text!r}: rank {rank} is not 0..255")
    if port > 510:
        raise argparse.ArgumentTypeError(f"--worker {text!r}: port {port} is not 0..510")
    if udp & wire.UDP_PORT_MASK != wire.UDP_PORT_BASE:
        raise argparse.ArgumentTypeError(
            f"--worker {text!r}: udp port {udp} is not in {wire.UDP_PORT_BASE}.."
            f"{wire.UDP_PORT_BASE + 15}"
        )
    try:
        mac = unicast_mac(":".join(parts[2:8]))
        ip = unicast_ipv4(parts[8])
    except AddressError as exc:
        raise argparse.ArgumentTypeError(f"--worker {text!r}: {exc}") from None
    return WorkerAddress(rank, port, mac, ip, udp)


def _table(rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def _job_row(job) -> dict:
    return {
        "job": job.job,
        "worker_count": len(job.workers),
        "slots": f"{job.slot_base}..{job.slot_base + job.slot_count - 1}",
        "epoch": job.epoch,
        "index": job.job_index,
        "block_values": job.block_values,
        "encoding": job.encoding,
        "round_mode": job.round_mode,
        "window": "" if job.window is None else job.window,
        "loss": "" if not job.loss else f"in {job.loss['ingress']} out {job.loss['egress']}",
        "state": "lost" if job.lost else "live",
    }


_job_id = _int_in(0, MAX_JOB_ID, "job id")
# what `job create` and `job list` show of a job
JOB_COLUMNS = (
    "job",
    "worker_count",
    "slots",
    "epoch",
    "index",
    "block_values",
    "encoding",
    "round_mode",
    "window",
    "state",
)


def build_parser(json_errors: bool = False) -> argparse.ArgumentParser:
    parser_class = type("Parser", (_Parser,), {"json_errors": json_errors})
    ap = parser_class(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    ap.add_argument("--config", "-c", default="p4reduce.toml", help="switch configuration")
    ap.add_argument(
        "--json", action="store_true", help="machine-readable output (and errors as JSON on stderr)"
    )
    ap.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=3.0,
        help="seconds (> 0) to wait for the switch's P4Runtime server",
    )
    ap.add_argument(
        "--election-id",
        type=_int_in(1, 2**63, "election id"),
        help="P4Runtime election id instead of switch.election_id for commands that write "
        "(higher takes over as primary); stats, job list and job show only read and take "
        "no part in the election, so they run beside a primary controller",
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=parser_class)
    up = sub.add_parser(
        "up",
        help="configure the switch (pushes the pipeline only if "
        "the switch does not already run it)",
    )
    up.add_argument(
        "--watch", action="store_true", help="keep running; reconfigure the switch if it restarts"
    )
    up.add_argument(
        "--reset",
        action="store_true",
        help="push the pipeline even if the switch runs it: clears every register, so "
        "EVERY job's slots are cleared: every job is then lost (`job list`), its ranks "
        "fail fast with SwitchStateLost, and it must be deleted and created again",
    )
    job = sub.add_parser("job", help="create, delete, list and show jobs")
    jsub = job.add_subparsers(dest="job_command", required=True, parser_class=parser_class)
    create = jsub.add_parser("create")
    create.add_argument("--job", type=_job_id, required=True)
    create.add_argument(
        "--slots",
        type=_int_in(1, MAX_SLOT_COUNT, "slots"),
        default=None,
        help="rounds the job keeps in flight (default: "
        f"{TARGETS['bmv2'].default_slots} on bmv2, whose ports hold only so many "
        f"unprocessed frames; {TARGETS['tofino'].default_slots} on a Tofino target)",
    )
    create.add_argument(
        "--worker",
        type=parse_worker,
        action="append",
        required=True,
        metavar="RANK:PORT:MAC:IP[:UDP]",
    )
    create.add_argument(
        "--encoding",
        choices=ENCODINGS,
        default=None,
        help="how values travel and are added: packed (the default on "
        "bmv2; one wide add per packet; floats quantized, int32 as "
        "two 16-bit halves) or lanes (int32 lanes added lane by lane, overflow flagged; "
        "the default, and the only encoding, on a Tofino target)",
    )
    create.add_argument(
        "--block-values",
        type=_int_in(1, wire.MAX_BLOCK_VALUES, "block values"),
        default=None,
        help="values per block, i.e. per DATA packet: fewer packets per tensor, but a block "
        "is sent whenever any of its values is non-zero (one of "
        f"{', '.join(map(str, TARGETS['bmv2'].block_sizes))} on bmv2 and softswitch, "
        f"default {TARGETS['bmv2'].default_block_values}; only "
        f"{TARGETS['tofino'].default_block_values} on a Tofino target)",
    )
    create.add_argument(
        "--round-mode",
        choices=ROUND_MODES,
        default=None,
        help="who sends in a round: silent (a rank sends only for its own non-zero blocks, "
        "plus each slot's announce round and, where some rank sat out its last round, its "
        "closing round) "
        "or every_rank (every rank sends one "
        "packet per slot per round); default: the target's first "
        f"({TARGETS['bmv2'].default_round_mode} on bmv2 and softswitch, "
        f"{TARGETS['tofino'].default_round_mode}, the only one, on a Tofino target)",
    )
    create.add_argument(
        "--window",
        type=_int_in(1, MAX_SLOT_COUNT, "window"),
        default=None,
        help="the most slots a rank keeps outstanding, at most --slots (written into the "
        f"descriptors; default: {TARGETS['bmv2'].default_window} on bmv2, which serves "
        "frames first in first out and so keeps each job's share of it only if every "
        "rank's window is that small; every slot on a Tofino target, whose pipeline runs "
        "at line rate)",
    )
    create.add_argument(
        "--int32-halves",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send int32 as two 16-bit halves and let the workers check the exact sum for "
        "overflow (always in a packed job; the default, and the only choice, on a Tofino "
        "target, whose switch cannot flag an overflowed lane); --no-int32-halves: the "
        "switch flags it (lanes jobs on bmv2)",
    )
    create.add_argument(
        "--descriptors", type=Path, help="write one descriptor per rank into this directory"
    )
    delete = jsub.add_parser("delete")
    delete.add_argument("job", type=_job_id)
    jsub.add_parser("list")
    show = jsub.add_parser("show")
    show.add_argument("job", type=_job_id)
    show.add_argument("--rank", type=_int_in(0, 255, "rank"))
    st = sub.add_parser("stats", help="per-job and switch counters")
    st.add_argument("--job", type=_job_id)
    ds = sub.add_parser("drop-sim", help="set the drop simulator of a job")
    ds.add_argument("--job", type=_job_id, required=True)
    ds.add_argument(
        "--ingress",
        type=_probability,
        default=0.0,
        help="loss probability in [0, 1) (at most 65535/65536 is simulated)",
    )
    ds.add_argument(
        "--egress",
        type=_probability,
        default=0.0,
        help="loss probability in [0, 1) of result copies",
    )
    ds.add_argument("--seed", type=_int_in(0, 2**32 - 1, "seed"), default=1)
    ds.add_argument("--random", action="store_true")
    return ap


READ_ONLY = {("job", "list"), ("job", "show"), ("stats", None)}


def run(args: argparse.Namespace, out=sys.stdout) -> int:
    config = load(args.config)
    if args.election_id is not None:
        for sw in config.switches:
            sw.election_id = args.election_id
    ctl: Controller | FabricController
    if config.is_fabric:
        ctl = FabricController(config)
        ctl.set_timeout(args.timeout)
    else:
        ctl = Controller(config)
        ctl.conn.timeout = args.timeout
    try:
        if args.command == "up":
            if isinstance(ctl, FabricController):
                _fabric_up(ctl, args, out)
            else:
                outcome = ctl.up(retries=3, reset=args.reset)
                n = len(ctl.jobs.jobs())
                changed = asdict(ctl.reconciled)
                print(
                    json.dumps(
                        {"status": "up", "jobs": n, "pipeline": outcome, "reconciled": changed}
                    )
                    if args.json
                    else f"switch {config.switch.grpc_addr} up, {n} job(s), pipeline {outcome}, "
                    f"{ctl.reconciled.changes} table/group change(s)",
                    file=out,
                )
            if args.watch:
                signal.signal(signal.SIGTERM, lambda *_: ctl.stop())
                try:
                    ctl.watch()
                except KeyboardInterrupt:
                    pass
            return EXIT_OK
        read_only = (args.command, getattr(args, "job_command", None)) in READ_ONLY
        if not ctl.attach(retries=1, require_primary=not read_only):
            raise SwitchError(
                "attach",
                "FAILED_PRECONDITION",
                f"switch {config.switch.grpc_addr} has no pipeline: run 'p4reduce-ctl up'",
            )
        return _run_attached(args, ctl, out)
    finally:
        ctl.close()


def _fabric_up(ctl: FabricController, args, out) -> None:
    """`up` of a fabric: every switch, one line (or one JSON object) each."""
    outcomes = ctl.up(retries=3, reset=args.reset)
    n = len(ctl.jobs.jobs())
    switches = {
        name: {
            "grpc_addr": ctl.controllers[name].config.switch.grpc_addr,
            "role": ctl.controllers[name].config.switch.role,
            "pipeline": outcome,
            "reconciled": asdict(ctl.controllers[name].reconciled),
        }
        for name, outcome in outcomes.items()
    }
    if args.json:
        print(json.dumps({"status": "up", "jobs": n, "switches": switches}), file=out)
        return
    for name, sw in switches.items():
        print(
            f"{sw['role']} {name} {sw['grpc_addr']} up, pipeline {sw['pipeline']}, "
            f"{ctl.controllers[name].reconciled.changes} table/group change(s)",
            file=out,
        )
    print(f"fabric up: {len(switches)} switch(es), {n} job(s)", file=out)


def _run_attached(args, ctl: Controller | FabricController, out) -> int:
    jobs = ctl.jobs
    if args.command == "job":
        if args.job_command == "create":
            job = jobs.create(
                args.job,
                args.worker,
                args.slots,
                args.encoding,
                args.int32_halves,
                args.block_values,
                args.round_mode,
                args.window,
            )
            descriptors = job.descriptors(jobs.switch)
            if args.descriptors:
                try:
                    args.descriptors.mkdir(parents=True, exist_ok=True)
                    for d in descriptors:
                        (args.descriptors / descriptor_name(job.job, d["rank"])).write_text(
                            json.dumps(d, indent=2) + "\n"
                        )
                except OSError as exc:
                    raise JobError(
                        f"job {job.job} was created, but its descriptors could "
                        f"not be written to {args.descriptors} ({exc}); "
                        f"'p4reduce-ctl job show {job.job}' prints them"
                    ) from None
            if args.json:
                print(json.dumps({"job": job.to_json(), "descriptors": descriptors}), file=out)
            else:
                print(
                    _table([_job_row(job)], [*JOB_COLUMNS]),
                    file=out,
                )
            return EXIT_OK
        if args.job_command == "delete":
            job = jobs.delete(args.job)
            print(
                json.dumps({"deleted": job.job}) if args.json else f"deleted job {job.job}",
                file=out,
            )
            return EXIT_OK
        if args.job_command == "list":
            rows = [_job_row(j) for j in jobs.jobs()]
            columns = [*JOB_COLUMNS, "loss"]
            print(json.dumps(rows) if args.json else _table(rows, columns), file=out)
            return EXIT_OK
        if args.job_command == "show":
            job = jobs.get(args.job)
            ranks = [args.rank] if args.rank is not None else [w.rank for w in job.workers]
            descriptors = [job.descriptor(r, jobs.switch) for r in ranks]
            print(
                json.dumps(descriptors if args.rank is None else descriptors[0], indent=2), file=out
            )
            return EXIT_OK
    if args.command == "stats":
        selected = [jobs.get(args.job)] if args.job is not None else jobs.jobs()
        per_job = {j.job: switch_stats.job_stats(ctl.conn, j.job_index) for j in selected}
        switch = switch_stats.switch_stats(ctl.conn)
        # what each job's counters are counted in: its block size and round mode
        shape = {
            j.job: {"block_values": j.block_values, "round_mode": j.round_mode} for j in selected
        }
        # a fabric: every switch's counters (the jobs' are the root's)
        per_switch = ctl.switch_stats() if isinstance(ctl, FabricController) else {}
        if args.json:
            jobs_json = {str(k): {**shape[k], **v} for k, v in per_job.items()}
            extra = {"switches": per_switch} if per_switch else {}
            print(json.dumps({"jobs": jobs_json, "switch": switch, **extra}), file=out)
        else:
            rows = [{"job": k, **shape[k], **v} for k, v in per_job.items()]
            columns = ["job", "block_values", "round_mode", *switch_stats.JOB_COUNTERS]
            print(_table(rows, columns), file=out)
            if per_switch:
                rows = [{"switch": name, **counters} for name, counters in per_switch.items()]
                print(_table(rows, ["switch", *switch]), file=out)
            else:
                print(_table([switch], list(switch)), file=out)
        return EXIT_OK
    if args.command == "drop-sim":
        jobs.set_loss(args.job, args.ingress, args.egress, args.seed, args.random)
        print(
            json.dumps({"job": args.job, "ingress": args.ingress, "egress": args.egress})
            if args.json
            else f"job {args.job}: ingress loss {args.ingress}, egress loss {args.egress}",
            file=out,
        )
        return EXIT_OK
    raise AssertionError(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # --json changes error output too, and argparse reports errors before it has parsed
    # --json: look for it first (a value "--json" of another option is the only mix-up)
    as_json = "--json" in argv
    try:
        args = build_parser(as_json).parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, already reported)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return run(args)
    except (ConfigError, JobError, P4InfoError, MastershipError) as exc:
        return report_error(str(exc), EXIT_REFUSED, as_json)
    except (SwitchError, TimeoutError, OSError) as exc:
        return report_error(f"switch error: {exc}", EXIT_SWITCH, as_json)
    except KeyboardInterrupt:
        return report_error("interrupted", 130, as_json)
    except Exception as exc:  # grpc errors surface as RpcError subclasses of Exception
        import grpc

        if isinstance(exc, grpc.RpcError):
            return report_error(f"switch unreachable: {exc.details()}", EXIT_SWITCH, as_json)
        raise


if __name__ == "__main__":
    sys.exit(main())
