"""Random whole jobs through the real P4 program, every rank's every call checked.

Why: the packet suite and the worker tests each fix one situation; the ways a call can go
wrong come from their mixtures -- several calls of one job whose block counts, dtypes or
lengths differ, loss each way, a descheduled rank, a switch queue that drops, sums that
overflow int32. A job here draws all of them from one seed and runs in engine_sim's
virtual time against the in-process softswitch; every call of every rank must end as the
contract says: int32 sums exactly numpy's, or OverflowError where the exact sum does not fit;
float32 sums within the documented bound (docs/protocol.md section 10); a call whose
ranks reduce different lengths FingerprintMismatch on every rank; and no rank taken for
dead, no protocol error, no stall.

    python tests/hostlib/random_jobs.py --jobs 300 --loss 0.2 [--first-seed N] [--restart]

prints each job that breaks the contract with its seed (a job's shape and tensors are a
function of its seed: `--first-seed N --jobs 1` draws it again). With --restart the switch
restarts mid-job (a fresh pipeline, the job installed again, what waited at the switch
lost): a rank may then end in SwitchStateLost, and in nothing else, and every sum it
returned must be right. test_random_jobs.py runs a few in the suite.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

if __name__ == "__main__":  # run as a script: its sibling modules, as pytest finds them
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]

from engine_sim import Call, simulate  # noqa: E402
from hostlib.engine import FingerprintMismatch, SwitchStateLost  # noqa: E402
from hostlib.numerics import error_bound, negotiated_exponent  # noqa: E402
from hostlib.timers import EngineParams  # noqa: E402
from p4net.harness import SwitchSession  # noqa: E402
from silent_patterns import PATTERNS as SILENT_PATTERNS, block_mask  # noqa: E402

PATTERNS = (*SILENT_PATTERNS, "dense")
KINDS = ("int32", "int32", "float32", "lengths_differ")


@dataclass
class Job:
    """One random job: its shape, and per call the kind and every rank's tensor."""

    seed: int
    ranks: int
    block_values: int
    blocks: int
    slots: int
    round_mode: str
    loss: float
    kinds: list[str] = field(default_factory=list)
    tensors: list[list[np.ndarray]] = field(default_factory=list)  # [call][rank]
    pauses: dict[int, tuple[float, float]] = field(default_factory=dict)
    start: list[float] = field(default_factory=list)
    queue_limit: int | None = None
    restart: float | None = None  # when the switch restarts (None: never)

    def describe(self) -> str:
        return (
            f"seed {self.seed}: {self.ranks} ranks, {self.block_values} values per block, "
            f"{self.blocks} blocks, {self.slots} slots, {self.round_mode}, loss "
            f"{self.loss}, calls {self.kinds}, pauses {self.pauses}, queue "
            f"{self.queue_limit}, restart {self.restart}"
        )


def draw_tensors(rng, job: Job, kind: str) -> list[np.ndarray]:
    """Every rank's tensor of one call: int32 values of a random magnitude (up to the
    largest, so that sums may overflow) in the blocks the pattern makes non-zero."""
    k, blocks = job.block_values, job.blocks
    pattern = str(rng.choice(PATTERNS))
    density = float(rng.uniform(0.02, 0.7))
    shared = rng.random(blocks) < density
    big = int(rng.choice([1000, 1 << 20, 1 << 28, (1 << 31) - 1]))
    out = []
    for r in range(job.ranks):
        x = rng.integers(-big, big, (blocks, k), endpoint=True)
        x[rng.random((blocks, k)) < rng.uniform(0, 0.9)] = 0
        x[~block_mask(rng, pattern, r, job.ranks, shared, density)] = 0
        out.append(np.clip(x, -(1 << 31), (1 << 31) - 1).astype(np.int32).reshape(-1))
    if kind == "float32":
        scale = 10.0 ** rng.uniform(-30, 30) / 1000.0
        out = [(x * scale).astype(np.float32) for x in out]
    elif kind == "lengths_differ":
        r = int(rng.integers(0, job.ranks))
        cut = int(rng.integers(1, max(2, k * blocks)))
        longer = np.concatenate([out[r], np.ones(cut, np.int32)])
        out[r] = longer if rng.random() < 0.5 else out[r][:cut]
    return out


def random_job(seed: int, loss: float | None = None, restart: bool = False) -> Job:
    """The job of `seed` (`loss`: this loss each way instead of a drawn one; `restart`:
    the switch restarts at a time drawn from the seed, by a generator of its own, so a
    seed's job is otherwise the same with or without)."""
    rng = np.random.default_rng(seed)
    k = int(rng.choice([64, 64, 256, 1024]))
    job = Job(
        seed=seed,
        ranks=int(rng.integers(2, 9)),
        block_values=k,
        blocks=int(rng.integers(1, 60 if k == 64 else 20)),
        slots=int(rng.integers(1, 9)),
        round_mode=str(rng.choice(["silent", "every_rank"])),
        loss=float(rng.choice([0.0, 0.0, 0.05, 0.2])) if loss is None else loss,
    )
    for _ in range(int(rng.integers(1, 4))):
        kind = str(rng.choice(KINDS))
        job.kinds.append(kind)
        job.tensors.append(draw_tensors(rng, job, kind))
    if rng.random() < 0.3:
        r, at = int(rng.integers(0, job.ranks)), float(rng.uniform(0, 0.05))
        job.pauses[r] = (at, at + float(rng.uniform(0.001, 0.5)))
    job.start = [
        float(rng.uniform(0, 0.02)) if rng.random() < 0.5 else 0.0 for _ in range(job.ranks)
    ]
    job.queue_limit = int(rng.integers(4, 64)) if rng.random() < 0.25 else None
    if restart:
        job.restart = float(np.random.default_rng([seed, 1]).uniform(0, 0.03))
    return job


def _raised(check) -> Exception | None:
    try:
        check()
    except Exception as e:  # the contract says which: judged by the caller
        return e
    return None


def _float_problem(xs: list[np.ndarray], got: np.ndarray, k: int, n: int) -> str | None:
    blocks = -(-xs[0].size // k)

    def rows(x: np.ndarray) -> np.ndarray:
        return np.pad(x.astype(np.float64), (0, blocks * k - x.size)).reshape(blocks, k)

    exact = np.sum([rows(x) for x in xs], axis=0)
    blockmax = np.max([np.abs(rows(x)).max(axis=1) for x in xs], axis=0)
    bound = error_bound(negotiated_exponent(blockmax), n)[:, None]
    bad = np.abs(rows(got) - exact) > bound + 1e-6 * np.abs(exact)
    if not bad.any():
        return None
    i = tuple(np.argwhere(bad)[0])
    return f"float sum {rows(got)[i]} against {exact[i]}, bound {bound[i[0], 0]}"


def judge(kind: str, xs: list[np.ndarray], outcome, k: int, n: int) -> str | None:
    """What breaks the contract in one rank's `outcome` of a call of `kind` whose ranks
    reduced `xs` (their tensors) at `k` values per block over `n` ranks: the sum it
    returned, or the exception it raised (None: the contract holds). The one statement of
    the contract, for every runner of random jobs (this one's engine_sim calls and
    tests/fabric/random_fabric_jobs.py's Workers)."""
    raised = outcome if isinstance(outcome, BaseException) else None
    if kind == "lengths_differ":
        if isinstance(raised, FingerprintMismatch):
            return None
        return f"no FingerprintMismatch ({raised!r})" if raised else "no FingerprintMismatch"
    if kind == "float32":
        return f"raised {raised!r}" if raised else _float_problem(xs, outcome, k, n)
    want = np.sum([x.astype(np.int64) for x in xs], axis=0)
    fits = bool(np.all((want >= -(1 << 31)) & (want < 1 << 31)))
    if fits and raised:
        return f"raised {raised!r} though the sum fits int32"
    if not fits:
        ok = isinstance(raised, OverflowError)
        return None if ok else f"the sum does not fit int32, yet {raised!r}"
    if not np.array_equal(outcome.astype(np.int64), want):
        bad = np.flatnonzero(outcome != want)
        return f"WRONG SUM in {bad.size} values, first {bad[:3]}"
    return None


def judge_calls(job: Job, outcomes: list[list], stopped: frozenset[int] = frozenset()) -> list[str]:
    """What broke the contract in a job's calls (empty: nothing): `outcomes[r][c]`, rank
    r's call c as `judge` takes it; `stopped`, the ranks an allowed error stopped (their
    later calls never ran)."""
    problems = []
    for r, got in enumerate(outcomes):
        if len(got) != len(job.kinds) and r not in stopped:
            problems.append(f"rank {r} finished {len(got)} of {len(job.kinds)} calls")
        for c, outcome in enumerate(got):
            kind = job.kinds[c]
            why = judge(kind, job.tensors[c], outcome, job.block_values, job.ranks)
            if why:
                problems.append(f"rank {r} call {c} ({kind}): {why}")
    return problems


def describe_problems(description: str, problems: list[str]) -> str:
    """A broken job as a test or a script shows it: its description, then every problem on
    a line of its own (a repr of the list, as pytest prints it, cuts off the ranks whose
    own failure explains the others')."""
    return "\n".join([description, *(f"    {p}" for p in problems)])


def outcome(call: Call, got):
    """A simulated call's outcome as a Worker gives it: what it would have raised (the
    engine's mismatch first, as Worker.allreduce checks it), else its sums."""
    eng = call.engine
    return (
        _raised(eng.raise_if_mismatched)
        or _raised(eng.raise_if_overflowed)
        or _raised(eng.raise_if_incomplete)
        or call.error
        or got
    )


def check(
    job: Job, calls: list[list[Call]], sums: list[list], stopped: frozenset[int] = frozenset()
) -> list[str]:
    """What broke the contract in a run's calls: `calls` and `sums` per rank per call, as
    engine_sim.SimResult has them (`judge_calls`)."""
    outcomes = [
        [outcome(calls[r][c], got) for c, got in enumerate(sums[r])] for r in range(job.ranks)
    ]
    return judge_calls(job, outcomes, stopped)


def run(switch: SwitchSession, job: Job, job_id: int = 90) -> list[str]:
    """Run `job` on `switch` (in virtual time) and return what broke the contract. The
    switch starts as fresh as after a reboot (its other jobs gone), so a seed's job runs
    the same whatever ran before it: the drop simulator's packet sequence, per job index,
    would otherwise carry over from the jobs before and lose other packets."""
    switch.lose_state()
    try:
        res = simulate(
            switch,
            [[job.tensors[c][r] for c in range(len(job.kinds))] for r in range(job.ranks)],
            slots=job.slots,
            loss=job.loss,
            seed=job.seed % 1000 + 1,
            job_id=job_id,
            round_mode=job.round_mode,
            block_values=job.block_values,
            pauses=job.pauses,
            start=job.start,
            queue_limit=job.queue_limit,
            params=EngineParams(deadline=300.0),
            limit=2000.0,
            restart=job.restart,
        )
    except Exception as e:  # a protocol error or a stall: the run itself broke
        return [f"the run raised {e!r}"]
    stopped, problems = judge_errors(res.errors, job.restart)
    return problems + check(job, res.calls, res.sums, stopped)


def judge_errors(
    errors: dict[int, tuple[float, BaseException]], restart: float | None
) -> tuple[frozenset[int], list[str]]:
    """The errors that stopped ranks mid-job (rank -> (seconds into the job, exception)),
    judged: a switch that restarted at `restart` (None: never) lost the job's state, so a
    rank may end in SwitchStateLost raised after it, running no further call, and in
    nothing else. (the ranks so stopped, what broke the contract). For every runner of
    random jobs, as `judge` is."""
    stopped = frozenset(
        r
        for r, (t, e) in errors.items()
        if restart is not None and isinstance(e, SwitchStateLost) and t >= restart
    )
    problems = [
        f"rank {r} raised {e!r} at {t:.1f} s" for r, (t, e) in errors.items() if r not in stopped
    ]
    return stopped, problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--loss", type=float, default=None, help="each way (default: drawn)")
    ap.add_argument("--restart", action="store_true", help="the switch restarts in each job")
    args = ap.parse_args()
    broken = 0
    with SwitchSession.inprocess() as switch:
        for seed in range(args.first_seed, args.first_seed + args.jobs):
            job = random_job(seed, args.loss, args.restart)
            problems = run(switch, job)
            if problems:
                broken += 1
                print(describe_problems(job.describe(), problems), flush=True)
    print(f"{broken} of {args.jobs} jobs broke the contract")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
