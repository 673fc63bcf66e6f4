"""bench/course_lab.py without a peer checkout or a switch: its arguments are refused with
one line naming what is wrong, and its adaptations touch a temp copy only, line for line,
refusing a tree whose line is not as at the commit docs/course-baseline.md ran. The timed
run itself is a benchmark (bench/), not a test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import course_lab  # noqa: E402
from course_lab import IMPLS, UsageError, adapt, parse_args  # noqa: E402


def fake_lab(root: Path, impl: str) -> Path:
    """A tree with the files the script looks at: the lines the adaptations expect and the
    marker that tells the solutions apart -- not the peer's code."""
    spec = IMPLS[impl]
    lab = root / spec.lab
    (lab / "p4").mkdir(parents=True)
    (lab / "lib").mkdir()
    (lab / "lib" / "worker.py").write_text("# lib\n")
    lines = {ad.path: ad.old for ad in spec.adaptations}
    (lab / "p4" / "main.p4").write_text(f"// {spec.marker}\n{lines.get('p4/main.p4', '')}\n")
    (lab / "worker.py").write_text(f"x = 1\n{lines.get('worker.py', '')}\n")
    if "config.py" in lines:
        (lab / "config.py").write_text(f"{lines['config.py']}  # knob\n")
    return lab


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--peer", "/nonexistent/peer"], "--peer /nonexistent/peer: no such directory"),
        (["--peer", "{tmp}", "--impl", "y-eth", "--no-log"], "--no-log: only j-udp"),
        (["--peer", "{tmp}", "--values", "100"], "--values 100: j-udp needs a multiple of 64"),
        (["--peer", "{tmp}", "--values", "65536"], "--values 65536"),
        (["--peer", "{tmp}", "--impl", "y-udp", "--values", "48"], "multiple of 32"),
        (["--peer", "{tmp}", "--runs", "0"], "--runs 0: must be >= 1"),
        (["--peer", "{tmp}", "--impl", "j-udp"], "no lab5/sml-udp/worker.py"),
        (["--peer", "{tmp}", "--impl", "x-udp"], "argument --impl: invalid choice: 'x-udp'"),
        (["--impl", "j-udp"], "the following arguments are required: --peer"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert course_lab.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith("course_lab.py: error:") and "\n" not in err


def test_checkout_of_the_other_solution_is_refused(tmp_path):
    fake_lab(tmp_path, "y-udp")  # the same lab5/sml-udp path as j-udp
    with pytest.raises(UsageError, match="has no 'accumulated_chunk': not j-udp"):
        parse_args(["--peer", str(tmp_path), "--impl", "j-udp"])
    assert parse_args(["--peer", str(tmp_path), "--impl", "y-udp"]).values == 2047 * 32


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_adaptations_change_only_their_lines_in_the_copy(tmp_path, impl):
    lab = fake_lab(tmp_path / "peer", impl)
    before = {p: p.read_bytes() for p in lab.rglob("*") if p.is_file()}
    applied = adapt(lab, IMPLS[impl], tmp_path / "copy")
    assert {p: p.read_bytes() for p in lab.rglob("*") if p.is_file()} == before  # untouched
    assert len(applied) == len(IMPLS[impl].adaptations)
    for p, old in before.items():
        new = (tmp_path / "copy" / p.relative_to(lab)).read_text()
        changes = [ad for ad in IMPLS[impl].adaptations if lab / ad.path == p]
        expected = old.decode()
        for ad in changes:
            expected = expected.replace(ad.old, ad.new)
        assert new == expected


def test_a_line_not_as_at_the_doc_commit_is_refused(tmp_path):
    lab = fake_lab(tmp_path / "peer", "j-udp")
    main_p4 = lab / "p4" / "main.p4"
    main_p4.write_text(main_p4.read_text().replace("= 8;", "= 16;"))
    with pytest.raises(
        UsageError,
        match=r"p4/main.p4: expected 'const worker_id_t "
        r"n_workers = 8;' exactly once \(found 0\)",
    ):
        adapt(lab, IMPLS["j-udp"], tmp_path / "copy")
