"""`make run` / mininet/demo.py argument errors: one line naming the argument (and the
make variable), exit code 2, before anything is started. hypothesis explores the ranges."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import p4net.demo

REPO = Path(__file__).resolve().parent.parent


def _refused(capsys, argv: list[str]) -> str:
    demo = p4net.demo
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        demo.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("demo.py: error: "), err
    return err[0]


quick = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@quick
@given(st.integers(max_value=0))
def test_size_must_be_positive(capsys, size):
    assert "SIZE" in _refused(capsys, [f"--size={size}"])


@quick
@given(st.floats(allow_nan=True).filter(lambda x: not 0 <= x < 1))
@example(1.0)
@example(math.nan)
def test_loss_must_be_a_probability(capsys, loss):
    assert "LOSS" in _refused(capsys, [f"--loss={loss!r}"])


@quick
@given(st.text(min_size=1, max_size=12).filter(lambda t: t not in p4net.demo.TARGETS))
def test_target_must_be_known(capsys, target):
    assert "TARGET" in _refused(capsys, [f"--target={target}"])


@quick
@given(st.integers().filter(lambda w: not 1 <= w <= 32))
@example(0)
@example(33)
def test_workers_must_be_1_to_32(capsys, workers):
    assert "WORKERS" in _refused(capsys, [f"--workers={workers}"])


@quick
@given(st.floats(allow_nan=True).filter(lambda x: not 0 <= x <= 1))
@example(2.0)
@example(math.nan)
def test_density_must_be_a_fraction(capsys, density):
    assert "DENSITY" in _refused(capsys, [f"--density={density!r}"])


@pytest.mark.parametrize("option", p4net.demo.MAKE_RUN)
def test_every_option_make_run_sets_names_its_variable_when_refused(capsys, option):
    """One rule for all of them: also argparse's own errors (no number, no such choice)."""
    err = _refused(capsys, [f"--{option}=x!"])
    assert f"--{option}" in err and f"({option.upper()})" in err


def test_make_run_passes_each_option_from_the_variable_of_its_name():
    """MAKE_RUN (what the errors name) and the Makefile's run recipe agree."""
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile[makefile.index("\nrun:") :].split("\n\n")[0]
    pairs = re.findall(r"--([a-z]+)='\$\((\w+)\)'", recipe)
    assert all(var == option.upper() for option, var in pairs), pairs
    assert sorted(option for option, _ in pairs) == sorted(p4net.demo.MAKE_RUN)


@quick
@given(st.integers(1, 10**6), st.floats(0, 1, exclude_max=True), st.integers(1, 32))
def test_valid_values_are_accepted(size, loss, workers):
    opts = p4net.demo.parse_args(
        [
            "--size",
            str(size),
            "--loss",
            repr(loss),
            "--workers",
            str(workers),
            "--target",
            "softswitch",
        ]
    )
    assert (opts.size, opts.loss, opts.workers) == (size, loss, workers)


@pytest.mark.parametrize(
    "var,needle",
    [
        ("SIZE=0", "SIZE"),
        ("SIZE=-4", "SIZE"),
        ("LOSS=1", "LOSS"),
        ("LOSS=-1e+16", "LOSS"),
        ("TARGET=tofino", "TARGET"),
        ("WORKERS=0", "WORKERS"),
        ("WORKERS=33", "WORKERS"),
        ("WORKERS=two", "WORKERS"),
        ("DENSITY=2", "DENSITY"),
        ("DTYPE=float16", "DTYPE"),
    ],
)
def test_make_run_argument_errors_are_one_line(var, needle):
    if shutil.which("make") is None or not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("needs make and the project's venv (make install)")
    out = subprocess.run(
        ["make", "-s", "run", var], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert out.returncode != 0
    lines = [line for line in out.stderr.splitlines() if not line.startswith("make")]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in out.stderr, out.stderr


def test_jobs_without_slots_get_the_kinds_default(capsys):
    """No --slots: each job gets the switch kind's default (p4reduce.target.default_slots,
    the one rule), which the pool-size check then uses."""
    from controlplane.jobs import PoolSizes
    from p4reduce.p4rt import P4InfoIndex
    from p4reduce.target import DEFAULT_P4INFO
    from p4reduce.target import default_slots

    demo = p4net.demo
    assert demo.parse_args(["--target", "softswitch"]).slots is None
    default = default_slots("softswitch")
    pool = PoolSizes.of(P4InfoIndex.load(DEFAULT_P4INFO)).pool_slots
    jobs = pool // default + 1  # one job more than the pool holds at the default
    err = _refused(capsys, ["--target", "softswitch", "--jobs", str(jobs), "--workers", "1"])
    assert f"--jobs {jobs} x --slots {default}" in err


@quick
@given(st.integers().filter(lambda k: k not in p4net.demo.BMV2.block_sizes))
@example(0)
@example(100)
@example(16384)
def test_block_values_must_be_a_size_the_switch_carries(capsys, k):
    err = _refused(capsys, [f"--block-values={k}"])
    assert "--block-values" in err and "64, 128, 256, 512, 1024, 2048, 4096, 8192" in err


def test_block_values_reach_the_options_and_bound_the_size(capsys):
    demo = p4net.demo
    assert demo.parse_args([]).block_values is None  # `make run`: the target's default
    assert demo.parse_args(["--block-values", "2048"]).block_values == 2048
    assert "must be 1..1073741823" in _refused(
        capsys, ["--block-values", "2048", "--size", str(2**30)]
    )
