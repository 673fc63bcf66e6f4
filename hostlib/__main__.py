"""`python -m hostlib`: run one worker's allreduce from the command line.

Why: the end-to-end tests and the benchmark start workers as separate processes inside
network namespaces (`ip netns exec NS python -m hostlib ...`), and an operator can check a
job descriptor against a switch the same way.

Exit codes: 0 done (stats as JSON on stdout, or in --stats); 1 the allreduce failed
(deadline passed, overflow, values the protocol cannot carry); 2 usage error (a bad
argument, a missing or invalid descriptor or input file); 3 network setup failed (no
interface owns the descriptor's worker IP, the interface is missing or its MTU cannot carry
the job's frames, no permission for raw sockets). Every error is one line on stderr:
`python -m hostlib: error: ...`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import NoReturn

import numpy as np

from p4reduce.job import DescriptorError, load_descriptor

from .timers import EngineParams
from .protocol import ProtocolError
from .worker import Worker, WorkerBroken

PROG = "python -m hostlib"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NETWORK = 0, 1, 2, 3


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        _fail(f"{message} (see {PROG} --help)", EXIT_USAGE)
        sys.exit(EXIT_USAGE)


def _positive(kind: type, what: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r}: must be > 0")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=PROG, description=__doc__.splitlines()[0])
    seconds = _positive(float, "a number of seconds")
    count = _positive(int, "an integer")
    ap.add_argument("--descriptor", required=True, help="job descriptor: JSON file or string")
    ap.add_argument("--input", help=".npy tensor to reduce (default: --size ones)")
    ap.add_argument("--size", type=count, default=4096, help="values when no --input")
    ap.add_argument("--output", help="write the last result here (.npy)")
    ap.add_argument("--op", default="sum", choices=["sum", "mean"])
    ap.add_argument("--repeat", type=count, default=1, help="allreduce this many times")
    ap.add_argument("--interface", default=None)
    ap.add_argument("--transport", default="auto", choices=["auto", "ring", "mmsg", "plain"])
    ap.add_argument(
        "--timeout",
        type=seconds,
        default=EngineParams.timeout,
        help="floor of the retransmission timer, seconds (> 0)",
    )
    ap.add_argument(
        "--deadline",
        type=seconds,
        default=30.0,
        help="seconds (> 0) an allreduce may take before it fails",
    )
    ap.add_argument("--stats", help="write Worker.stats as JSON here")
    return ap


def main(argv: list[str] | None = None) -> int:
    try:
        a = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, already reported)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        load_descriptor(a.descriptor)
    except FileNotFoundError:
        return _fail(f"descriptor {a.descriptor}: no such file", EXIT_USAGE)
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"descriptor {a.descriptor}: cannot be read ({exc})", EXIT_USAGE)
    except json.JSONDecodeError as exc:
        return _fail(f"descriptor {a.descriptor}: not valid JSON ({exc})", EXIT_USAGE)
    except DescriptorError as exc:
        return _fail(f"descriptor {a.descriptor}: {exc}", EXIT_USAGE)
    try:
        x = np.load(a.input, allow_pickle=False) if a.input else np.ones(a.size, np.float32)
    except (OSError, ValueError) as exc:
        return _fail(f"input {a.input}: {exc}", EXIT_USAGE)
    try:
        worker = Worker(
            a.descriptor,
            interface=a.interface,
            transport=a.transport,
            timeout=a.timeout,
            deadline=a.deadline,
        )
    except OSError as exc:
        return _fail(f"network setup: {exc}", EXIT_NETWORK)
    try:
        with worker as w:
            out = None
            for _ in range(a.repeat):
                out = w.allreduce(x, op=a.op)
            stats = w.stats.as_dict()
    except TimeoutError as exc:
        return _fail(f"allreduce timed out: {exc}", EXIT_FAILED)
    except (OverflowError, ValueError, TypeError, ProtocolError, WorkerBroken) as exc:
        return _fail(f"allreduce failed: {type(exc).__name__}: {exc}", EXIT_FAILED)
    except OSError as exc:
        return _fail(f"network: {exc}", EXIT_NETWORK)
    try:
        if a.output:
            np.save(a.output, out)
        if a.stats:
            with open(a.stats, "w", encoding="utf-8") as f:
                json.dump(stats, f)
            return EXIT_OK
    except OSError as exc:
        return _fail(f"cannot write the result: {exc}", EXIT_FAILED)
    json.dump(stats, sys.stdout)
    print()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
