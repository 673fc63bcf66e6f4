"""Random whole jobs across a two-level fabric, every rank's every call checked.

Why: tests/hostlib/random_jobs.py draws whole jobs on one switch, in engine_sim's virtual
time. A job in the leaf and spine roles (docs/fabric.md) adds what engine_sim does not
model: each leaf's partial sent up, the spine's result sent down and cached at both
levels, STATUS from either level (relayed by the leaf), and loss on every link at once.
Here a job of random shape runs on an in-process fabric (a spine and two leaves, each a
softswitch programmed over its own P4Runtime session by the FabricController), every rank
a hostlib Worker in its own thread, in real time: the round mode (every-rank rounds in
the leaf and spine roles, or silent rounds: in those roles at 64 values per block, at the
spine alone at more; `--silent-leaf-role`: in those roles at any), ranks on each leaf, block
size, slots, encoding, up to three calls of mixed kinds (int32 whose sums may overflow,
float32 of any scale, ranks whose lengths differ), the blocks each rank has, the ranks'
start skew per call, and the loss on every link. Every rank's every call must end as the
contract says (random_jobs.judge, the one statement of it): int32 sums exactly numpy's,
or OverflowError where they do not fit; float32 sums within the documented bound;
FingerprintMismatch on every rank where lengths differ; no other error, no rank left
running.

With `--restart` one switch of the fabric (the spine or a leaf, drawn) restarts while the
job runs, as a reboot does: what waited in it is lost, and it has no pipeline until the
controller's `ensure` (what `p4reduce-ctl up --watch` runs) restores it and its jobs after
a drawn pause. The contract then (docs/reliability.md, docs/fabric.md): a rank may end in
`SwitchStateLost` and run no further call, and every sum any rank returned is right.

    python tests/fabric/random_fabric_jobs.py --jobs 100 [--loss 0.2] [--first-seed N]
                                             [--ranks-per-leaf 12] [--skew 0.3] [--restart]

prints each job that breaks the contract with its seed (`--first-seed N --jobs 1` draws
it again; which frames are lost also depends on the threads' timing, so a failure found
in real time may need a few runs to come back). With `--trace DIR` it also writes, for
each broken job, every frame of the job that a switch took in or sent out, one decoded
line each, to DIR/seed<N>.txt: what the ranks and switches said to each other is what
explains a stall. test_random_fabric_jobs.py runs a few in the suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hostlib"))  # random_jobs

from controlplane.config import parse  # noqa: E402
from hostlib import SwitchStateLost  # noqa: E402
from controlplane.fabric import FabricController  # noqa: E402
from p4net.harness import on_leaves  # noqa: E402
from hostlib import protocol as p  # noqa: E402
from p4reduce.fabric import MAX_WORKERS  # noqa: E402
from random_jobs import KINDS, Job, draw_tensors, judge_calls, judge_errors, describe_problems  # noqa: E402
from softswitch.inprocess import InProcessFabric, two_level_ranks  # noqa: E402

# a rank thread still running this long after the job's last call should have ended is
# left running, and named
JOIN_SECONDS = 120.0
# each Worker's first timer and its deadline without progress
TIMEOUT, DEADLINE = 0.05, 60.0


@dataclass(frozen=True)
class Restart:
    """A switch of the fabric that reboots `at` seconds into the job and is restored by
    the controller's `ensure` `down` seconds later."""

    switch: str
    at: float
    down: float


@dataclass
class FabricJob:
    """One random job across the fabric: `job` as random_jobs draws one (its ranks, block
    size, blocks, slots, loss, calls and tensors), where its ranks sit, its encoding and
    each rank's pause before each call."""

    job: Job
    per_leaf: tuple[int, ...]
    encoding: str
    skews: list[list[float]] = field(default_factory=list)  # [rank][call] seconds
    restart: Restart | None = None

    def describe(self) -> str:
        j = self.job
        return (
            f"seed {j.seed}: {j.round_mode}, ranks per leaf {self.per_leaf}, "
            f"{j.block_values} values per block, {j.blocks} blocks, {j.slots} slots, "
            f"{self.encoding}, loss {j.loss}, "
            f"calls {j.kinds}, skews {[max(s) for s in self.skews]}, restart {self.restart}"
        )


def random_fabric_job(
    seed: int,
    loss: float | None = None,
    ranks_per_leaf: int = 5,
    skew: float = 0.0,
    restart: bool = False,
    silent_leaf_role: bool = False,
) -> FabricJob:
    """The job of `seed`: 1..`ranks_per_leaf` ranks on each of two leaves, loss `loss`
    on every link each way (None: drawn), each rank's start of each call put off by up
    to 0.3 s with probability `skew`, and with `restart` a switch's reboot drawn by a
    generator of its own (so every other draw of the seed is the same either way). With
    `silent_leaf_role`, a job of silent rounds in the leaf and spine roles larger than
    one switch's bitmap: more than MAX_WORKERS ranks, at 64 to 1 024 values per block."""
    rng = np.random.default_rng(seed)
    per_leaf = (int(rng.integers(1, ranks_per_leaf + 1)), int(rng.integers(1, ranks_per_leaf + 1)))
    k = int(rng.choice([64, 64, 256, 1024]))
    round_mode = random_round_mode(seed)
    if silent_leaf_role:
        from fabric.conftest import HOSTS  # the test folder's package

        per_leaf = (HOSTS, int(rng.integers(MAX_WORKERS + 1 - HOSTS, HOSTS + 1)))
        k, round_mode = int(rng.choice([64, 128])), "silent"  # drawn: the next draws stay
        # ... and above SKIP_GROWS_TO_VALUES one job in two, by a generator of its own: its
        # ranks' ANNOUNCEs carry a block (wire.announce_carries_block)
        k = int(np.random.default_rng([seed, 3]).choice([k, k, 256, 1024]))
    job = Job(
        seed=seed,
        ranks=sum(per_leaf),
        block_values=k,
        blocks=int(rng.integers(1, 40 if k == 64 else 12)),
        slots=int(rng.integers(1, 9)),
        round_mode=round_mode,
        loss=float(rng.choice([0.0, 0.05, 0.1])) if loss is None else loss,
    )
    for _ in range(int(rng.integers(1, 4))):
        kind = str(rng.choice(KINDS))
        job.kinds.append(kind)
        job.tensors.append(draw_tensors(rng, job, kind))
    encoding = str(rng.choice(["packed", "lanes"]))
    skews = [
        [float(rng.uniform(0, 0.3)) if rng.random() < skew else 0.0 for _ in job.kinds]
        for _ in range(job.ranks)
    ]
    return FabricJob(job, per_leaf, encoding, skews, random_restart(seed) if restart else None)


def random_round_mode(seed: int) -> str:
    """Every-rank rounds, or silent rounds (in the leaf role or at the spine alone)
    (docs/fabric.md), one job in two: drawn by a generator of its own, so every other
    draw of a seed is the one it had before silent jobs ran on a fabric."""
    return "silent" if np.random.default_rng([seed, 2]).random() < 0.5 else "every_rank"


def random_restart(seed: int) -> Restart:
    """Which switch reboots, when (a random job's calls take about 0.05 to 1 s) and for
    how long it stays unconfigured."""
    from fabric.conftest import LEAVES  # the test folder's package

    rng = np.random.default_rng([seed, 1])
    switch = str(rng.choice(["s", *LEAVES]))  # softswitch.inprocess.two_level's spine: s
    return Restart(switch, float(rng.uniform(0.0, 0.5)), float(rng.uniform(0.0, 0.2)))


def fabric_ranks(per_leaf: tuple[int, ...]):
    """The job's ranks: `per_leaf[i]` on leaf i's first ports, numbered leaf by leaf."""
    most = max(per_leaf)
    pool = two_level_ranks(len(per_leaf), most)
    chosen = [w for i, n in enumerate(per_leaf) for w in pool[i * most : i * most + n]]
    return [dataclasses.replace(w, rank=r) for r, w in enumerate(chosen)]


class Reboot(threading.Thread):
    """`plan`'s switch rebooted while the job runs, then restored by the controller's
    `ensure` as its watch loop would: `at`, when the reboot happened (monotonic; None:
    not yet), and `error`, what kept the controller from restoring it."""

    def __init__(self, fab: InProcessFabric, ctl: FabricController, plan: Restart):
        super().__init__(daemon=True)
        self.fab, self.ctl, self.plan = fab, ctl, plan
        self.at: float | None = None
        self.error: str | None = None

    def run(self) -> None:
        time.sleep(self.plan.at)
        self.fab.switch(self.plan.switch).restart()
        self.at = time.monotonic()
        time.sleep(self.plan.down)
        last = "ensure did not redo it"
        for _ in range(RESTORE_TRIES):
            try:
                if self.plan.switch in self.ctl.ensure():
                    return
            except Exception as e:  # the session is still coming back: try again
                last = f"{e!r}"
            time.sleep(0.05)
        self.error = f"switch {self.plan.switch} not restored ({last})"


# how often the reboot's `ensure` is tried before the job is judged broken by it
RESTORE_TRIES = 40


def run(
    fab: InProcessFabric,
    ctl: FabricController,
    fj: FabricJob,
    job_id: int,
    tally: Counter | None = None,
) -> list[str]:
    """Run `fj` on the fabric (created, lossy as drawn, a switch rebooted if drawn, then
    deleted) and return what broke the contract; `tally` counts the ranks the reboot
    ended in SwitchStateLost ("lost") and the jobs it reached ("reached")."""
    job = fj.job
    workers = fabric_ranks(fj.per_leaf)
    made = ctl.jobs.create(
        job_id,
        workers,
        slots=job.slots,
        encoding=fj.encoding,
        block_values=job.block_values,
        round_mode=job.round_mode,
    )
    descriptors = made.descriptors(ctl.jobs.switch)
    outcomes: list[list] = [[] for _ in workers]
    ended: dict[int, tuple[float, BaseException]] = {}  # rank -> (seconds in, what)
    start = time.monotonic()

    def body(r: int, w) -> None:
        for c, tensors in enumerate(job.tensors):
            time.sleep(fj.skews[r][c])
            try:
                outcomes[r].append(w.allreduce(tensors[r]))
            except SwitchStateLost as e:  # the Worker is broken: the rank ends here
                ended[r] = (time.monotonic() - start, e)
                return
            except Exception as e:  # judged with the call's kind
                outcomes[r].append(e)

    reboot = Reboot(fab, ctl, fj.restart) if fj.restart else None
    try:
        if job.loss:
            ctl.jobs.set_loss(job_id, job.loss, job.loss, seed=job.seed % 1000 + 1)
        if reboot is not None:
            reboot.start()
        try:
            _, broke, running = on_leaves(
                fab, descriptors, workers, body, TIMEOUT, DEADLINE, JOIN_SECONDS
            )
        finally:
            if reboot is not None:
                reboot.join()  # the switch restored before the job is deleted
    finally:
        ctl.jobs.delete(job_id)
    problems = [f"rank {r}: the Worker raised {e!r}" for r, e in broke.items()]
    problems += [f"rank {r} still running" for r in running]
    if reboot is not None and reboot.error:
        problems.append(reboot.error)
    rebooted = None if reboot is None or reboot.at is None else reboot.at - start
    stopped, raised = judge_errors(ended, rebooted)
    if tally is not None:
        tally.update(lost=len(stopped), reached=int(bool(stopped)))
    return problems + raised + judge_calls(job, outcomes, frozenset(broke) | stopped)


class FrameTrace:
    """Every frame the fabric's switches take in and send out (InProcessFabric.set_tap),
    from the latest `clear`, to write a broken job's frames (`--trace`)."""

    def __init__(self, fab: InProcessFabric):
        self.frames: list[tuple[float, str, str, int, bytes]] = []
        self.start = time.monotonic()
        fab.set_tap(self._seen)

    def _seen(self, name: str, direction: str, port: int, frame: bytes) -> None:
        self.frames.append((time.monotonic(), name, direction, port, bytes(frame)))

    def clear(self) -> None:
        self.frames.clear()
        self.start = time.monotonic()

    def write(self, path: Path, job_id: int, block_values: int) -> None:
        """Job `job_id`'s frames, one line each: seconds since `clear`, switch, in or out,
        port, and the p4reduce header (rank: the sender's, or the receiver's on the way
        to it; a leaf's index among the spine's) with what the frame carries (read with
        the job's `block_values`: a fingerprint range and a block is the range)."""
        with path.open("w") as f:
            for t, name, direction, port, frame in self.frames:
                try:
                    fr = p.parse_frame(frame, block_values)
                except p.ProtocolError:
                    continue  # not a p4reduce frame
                if fr.header.job == job_id:
                    where = f"{t - self.start:9.4f} {name:>3} {direction:>3} {port:>3}"
                    print(where, p.frame_text(fr), file=f)


def fabric_controller(fab: InProcessFabric, state_dir: Path) -> FabricController:
    """The fabric's controller, every switch pushed, its state files in `state_dir`."""
    from fabric.conftest import fabric_config  # the test folder's package

    ctl = FabricController(parse(fabric_config(fab, state_dir)))
    ctl.up(retries=3)
    return ctl


def main() -> int:
    # run as a script: this test folder as the package pytest sees, put on the path only
    # now that hostlib is imported (tests/hostlib would be taken for it)
    sys.path.append(str(Path(__file__).resolve().parents[1]))
    from fabric.conftest import LEAVES, new_fabric

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--loss", type=float, default=None, help="on every link each way")
    ap.add_argument("--ranks-per-leaf", type=int, default=5)
    ap.add_argument("--skew", type=float, default=0.0, help="share of calls a rank starts late")
    ap.add_argument("--restart", action="store_true", help="a switch reboots in each job")
    ap.add_argument(
        "--silent-leaf-role",
        action="store_true",
        help="silent jobs of more than 32 ranks (the leaf role of silent rounds)",
    )
    ap.add_argument(
        "--trace",
        type=Path,
        metavar="DIR",
        help="write each broken job's frames to DIR/seed<N>.txt",
    )
    args = ap.parse_args()
    broken, tally = 0, Counter()
    with new_fabric(LEAVES) as fab, tempfile.TemporaryDirectory() as state:
        ctl = fabric_controller(fab, Path(state))
        trace = FrameTrace(fab) if args.trace else None
        try:
            for i, seed in enumerate(range(args.first_seed, args.first_seed + args.jobs)):
                if trace is not None:
                    trace.clear()
                fj = random_fabric_job(
                    seed,
                    args.loss,
                    args.ranks_per_leaf,
                    args.skew,
                    args.restart,
                    args.silent_leaf_role,
                )
                job_id = 20 + i % 100
                problems = run(fab, ctl, fj, job_id, tally)
                if problems:
                    broken += 1
                    print(describe_problems(fj.describe(), problems), flush=True)
                    if trace is not None:
                        args.trace.mkdir(parents=True, exist_ok=True)
                        trace.write(args.trace / f"seed{seed}.txt", job_id, fj.job.block_values)
                        print(f"    its frames: {args.trace / f'seed{seed}.txt'}", flush=True)
        finally:
            ctl.close()
    print(f"{broken} of {args.jobs} jobs broke the contract")
    if args.restart:
        print(
            f"the reboot ended {tally['lost']} ranks in SwitchStateLost, in {tally['reached']} jobs"
        )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
