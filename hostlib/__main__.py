"""`python -m hostlib`: run one worker's allreduce from the command line.

Why: the end-to-end tests and the benchmark start workers as separate processes inside
network namespaces (`ip netns exec NS python -m hostlib ...`), and an operator can check a
job descriptor against a switch the same way.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from .engine import EngineParams
from .worker import Worker


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hostlib", description=__doc__)
    ap.add_argument("--descriptor", required=True, help="job descriptor: JSON file or string")
    ap.add_argument("--input", help=".npy tensor to reduce (default: --size ones)")
    ap.add_argument("--size", type=int, default=4096, help="values when no --input")
    ap.add_argument("--output", help="write the last result here (.npy)")
    ap.add_argument("--op", default="sum", choices=["sum", "mean"])
    ap.add_argument("--repeat", type=int, default=1, help="allreduce this many times")
    ap.add_argument("--interface", default=None)
    ap.add_argument("--transport", default="auto", choices=["auto", "ring", "mmsg", "plain"])
    ap.add_argument("--timeout", type=float, default=EngineParams.timeout,
                    help="floor of the retransmission timer (s)")
    ap.add_argument("--deadline", type=float, default=30.0)
    ap.add_argument("--stats", help="write Worker.stats as JSON here")
    a = ap.parse_args(argv)
    x = np.load(a.input) if a.input else np.ones(a.size, np.float32)
    with Worker(a.descriptor, interface=a.interface, transport=a.transport,
                timeout=a.timeout, deadline=a.deadline) as w:
        out = None
        for _ in range(a.repeat):
            out = w.allreduce(x, op=a.op)
        if a.output:
            np.save(a.output, out)
        stats = w.stats.as_dict()
    if a.stats:
        with open(a.stats, "w", encoding="utf-8") as f:
            json.dump(stats, f)
    else:
        json.dump(stats, sys.stdout)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
