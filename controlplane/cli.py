"""p4reduce-ctl: the operator's command line.

Exit codes scripts can use: 0 done, 1 refused (bad request or configuration: the message
says which field), 2 usage error, 3 switch unreachable or P4Runtime error.
Readable tables by default, `--json` for scripts.
"""
from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path

from . import stats as switch_stats
from .admission import WorkerAddress
from .config import ConfigError, load
from .connection import SwitchError
from .controller import Controller
from .jobs import JobError
from .p4info import P4InfoError

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_SWITCH = 0, 1, 2, 3


def parse_worker(text: str) -> WorkerAddress:
    """RANK:PORT:MAC:IP[:UDP_PORT] -- the MAC contains colons, so split from both ends."""
    parts = text.split(":")
    if len(parts) not in (9, 10):
        raise argparse.ArgumentTypeError(
            f"--worker {text!r}: expected RANK:PORT:MAC:IP[:UDP_PORT]")
    try:
        rank, port = int(parts[0]), int(parts[1])
        udp = int(parts[9]) if len(parts) == 10 else 0x5030
    except ValueError:
        raise argparse.ArgumentTypeError(f"--worker {text!r}: rank, port and udp port "
                                         "must be integers") from None
    return WorkerAddress(rank, port, ":".join(parts[2:8]).lower(), parts[8], udp)


def _table(rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def _job_row(job) -> dict:
    return {"job": job.job, "workers": len(job.workers),
            "slots": f"{job.slot_base}..{job.slot_base + job.slot_count - 1}",
            "epoch": job.epoch, "index": job.job_index,
            "loss": "" if not job.loss else f"in {job.loss['ingress']} out {job.loss['egress']}"}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="p4reduce-ctl", description=__doc__.splitlines()[0])
    ap.add_argument("--config", "-c", default="p4reduce.toml", help="switch configuration")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--timeout", type=float, default=3.0,
                    help="seconds to wait for the switch's P4Runtime server")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="push the pipeline and configure the switch")
    up.add_argument("--watch", action="store_true",
                    help="keep running; reconfigure the switch if it restarts")
    job = sub.add_parser("job", help="create, delete, list and show jobs")
    jsub = job.add_subparsers(dest="job_command", required=True)
    create = jsub.add_parser("create")
    create.add_argument("--job", type=int, required=True)
    create.add_argument("--slots", type=int, default=64)
    create.add_argument("--worker", type=parse_worker, action="append", required=True,
                        metavar="RANK:PORT:MAC:IP[:UDP]")
    create.add_argument("--descriptors", type=Path,
                        help="write one descriptor per rank into this directory")
    delete = jsub.add_parser("delete")
    delete.add_argument("job", type=int)
    jsub.add_parser("list")
    show = jsub.add_parser("show")
    show.add_argument("job", type=int)
    show.add_argument("--rank", type=int)
    st = sub.add_parser("stats", help="per-job and switch counters")
    st.add_argument("--job", type=int)
    ds = sub.add_parser("drop-sim", help="set the drop simulator of a job")
    ds.add_argument("--job", type=int, required=True)
    ds.add_argument("--ingress", type=float, default=0.0)
    ds.add_argument("--egress", type=float, default=0.0)
    ds.add_argument("--seed", type=int, default=1)
    ds.add_argument("--random", action="store_true")
    return ap


def run(args: argparse.Namespace, out=sys.stdout) -> int:
    config = load(args.config)
    ctl = Controller(config)
    ctl.conn.timeout = args.timeout
    try:
        if args.command == "up":
            ctl.up(retries=3)
            print(json.dumps({"status": "up", "jobs": len(ctl.jobs.jobs())}) if args.json
                  else f"switch {config.switch.grpc_addr} up, {len(ctl.jobs.jobs())} job(s)",
                  file=out)
            if args.watch:
                signal.signal(signal.SIGTERM, lambda *_: ctl.stop())
                try:
                    ctl.watch()
                except KeyboardInterrupt:
                    pass
            return EXIT_OK
        if not ctl.attach(retries=1):
            print(f"switch {config.switch.grpc_addr} has no pipeline: run 'p4reduce-ctl up'",
                  file=sys.stderr)
            return EXIT_SWITCH
        return _run_attached(args, ctl, out)
    finally:
        ctl.close()


def _run_attached(args, ctl: Controller, out) -> int:
    jobs = ctl.jobs
    if args.command == "job":
        if args.job_command == "create":
            job = jobs.create(args.job, args.worker, args.slots)
            descriptors = job.descriptors(jobs.switch)
            if args.descriptors:
                args.descriptors.mkdir(parents=True, exist_ok=True)
                for d in descriptors:
                    (args.descriptors / f"job{job.job}-rank{d['rank']}.json").write_text(
                        json.dumps(d, indent=2) + "\n")
            if args.json:
                print(json.dumps({"job": job.to_json(), "descriptors": descriptors}), file=out)
            else:
                print(_table([_job_row(job)], ["job", "workers", "slots", "epoch", "index"]),
                      file=out)
            return EXIT_OK
        if args.job_command == "delete":
            job = jobs.delete(args.job)
            print(json.dumps({"deleted": job.job}) if args.json else f"deleted job {job.job}",
                  file=out)
            return EXIT_OK
        if args.job_command == "list":
            rows = [_job_row(j) for j in jobs.jobs()]
            print(json.dumps(rows) if args.json else
                  _table(rows, ["job", "workers", "slots", "epoch", "index", "loss"]), file=out)
            return EXIT_OK
        if args.job_command == "show":
            job = jobs.get(args.job)
            ranks = [args.rank] if args.rank is not None else [w.rank for w in job.workers]
            descriptors = [job.descriptor(r, jobs.switch) for r in ranks]
            print(json.dumps(descriptors if args.rank is None else descriptors[0], indent=2),
                  file=out)
            return EXIT_OK
    if args.command == "stats":
        selected = [jobs.get(args.job)] if args.job is not None else jobs.jobs()
        per_job = {j.job: switch_stats.job_stats(ctl.conn, j.job_index) for j in selected}
        switch = switch_stats.switch_stats(ctl.conn)
        if args.json:
            print(json.dumps({"jobs": {str(k): v for k, v in per_job.items()},
                              "switch": switch}), file=out)
        else:
            rows = [{"job": k, **v} for k, v in per_job.items()]
            print(_table(rows, ["job", *switch_stats.JOB_COUNTERS]), file=out)
            print(_table([switch], list(switch)), file=out)
        return EXIT_OK
    if args.command == "drop-sim":
        jobs.set_loss(args.job, args.ingress, args.egress, args.seed, args.random)
        print(json.dumps({"job": args.job, "ingress": args.ingress, "egress": args.egress})
              if args.json else f"job {args.job}: ingress loss {args.ingress}, "
                                f"egress loss {args.egress}", file=out)
        return EXIT_OK
    raise AssertionError(args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except (ConfigError, JobError, P4InfoError) as exc:
        print(f"p4reduce-ctl: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except (SwitchError, TimeoutError, OSError) as exc:
        print(f"p4reduce-ctl: switch error: {exc}", file=sys.stderr)
        return EXIT_SWITCH
    except Exception as exc:  # grpc errors surface as RpcError subclasses of Exception
        import grpc
        if isinstance(exc, grpc.RpcError):
            print(f"p4reduce-ctl: switch unreachable: {exc.details()}", file=sys.stderr)
            return EXIT_SWITCH
        raise


if __name__ == "__main__":
    sys.exit(main())
