"""The wide-block candidates (bench/p4/, measured by bench/wide_blocks.py) compute the
right sums on softswitch at every size, and their committed p4c outputs belong to their
sources (the manifest check tests/test_p4_build.py applies to the test programs).

Expected sums are numpy's, per value, from the values the test sent; nothing is timed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from softswitch.switch import Switch

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
sys.path.insert(0, str(BENCH))

import wide_blocks as wb  # noqa: E402

PROGRAMS = sorted((BENCH / "p4").glob("*.p4"))
CELLS = [(c, v) for v in wb.SIZES for c in wb.CANDIDATES]


def _compile_module():
    spec = importlib.util.spec_from_file_location("p4src_compile", REPO / "p4src" / "compile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_committed_outputs_match_sources(program: Path) -> None:
    compile_mod = _compile_module()
    out_dir = compile_mod.default_out_dir(program)
    assert out_dir == BENCH / "p4" / "build" / program.stem
    problems = compile_mod.check_manifest(program, out_dir)
    assert not problems, f"{out_dir.relative_to(REPO)} is stale:\n" + "\n".join(problems)


def test_every_build_has_its_program_and_every_cell_a_build() -> None:
    assert PROGRAMS, "no candidate programs found: the glob is wrong"
    built = {d.name for d in (BENCH / "p4" / "build").iterdir() if d.is_dir()}
    assert built == {p.stem for p in PROGRAMS}
    # every cell but the wide ones p4c refuses has a program of its own
    wanted = {wb.program_name(c, v) for c, v in CELLS if c in ("chunks", "stack")}
    assert wanted | {"wide_64", "classes"} == built


@pytest.fixture
def no_int_digit_limit():
    """The wide candidate's masks beyond 14 284 bits need CPython's int <-> str limit
    lifted in softswitch's code generator (bench/wide_blocks.py does the same)."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    yield
    sys.set_int_max_str_digits(before)


def _send(sw: Switch, port: int, frame: bytes) -> bytes:
    out = sw.process(port, frame)
    assert len(out) == 1, out
    assert out[0][0] == port  # back out of the ingress port
    return out[0][1]


@pytest.mark.parametrize("candidate,values", CELLS, ids=[f"{c}-{v}" for c, v in CELLS])
def test_candidate_sums_blocks(candidate: str, values: int, no_int_digit_limit) -> None:
    program = wb.load_program(candidate, values)
    assert program.widened == (candidate in ("wide", "classes") and values > 64)
    sw = Switch()
    sw.load_pipeline(program.bmv2_json)
    rng = np.random.default_rng(values)
    ranks = 3
    # lane i of every rank's first block is i: a chunk or lane out of place shows
    first_round = rng.integers(0, 2**30, (ranks, values), dtype=np.uint64)
    first_round[0] = np.arange(values)
    for slot in (0, 5):
        for round_ in range(2):  # the second round's first contributor overwrites
            blocks = first_round if round_ == 0 else rng.integers(0, 2**30, (ranks, values))
            blocks = np.asarray(blocks, dtype=np.uint64)
            for rank in range(ranks):
                frame = wb.block_frame(slot, rank == 0, blocks[rank], rank + 1)
                out = _send(sw, rank + 1, frame)
                assert len(out) == len(frame)
                got_slot, got = wb.block_sums(out)
                assert got_slot == slot
                expected = blocks[: rank + 1].sum(axis=0)
                np.testing.assert_array_equal(got, expected.astype(np.uint32))
    # the largest values that do not carry: every lane at 2^32 - 1 after the round
    top = np.full(values, 2**32 - 1, dtype=np.uint64)
    _send(sw, 1, wb.block_frame(7, True, top - 1))
    _, got = wb.block_sums(_send(sw, 2, wb.block_frame(7, False, np.ones(values, np.uint64))))
    np.testing.assert_array_equal(got, top.astype(np.uint32))


def test_classes_serves_every_size_at_once(no_int_digit_limit) -> None:
    """One switch, blocks of every size interleaved on the same slots: each size adds
    into its own cells (jobs of different block sizes sharing a switch)."""
    sw = Switch()
    sw.load_pipeline(wb.load_program("classes", 64).bmv2_json)
    rng = np.random.default_rng(1)
    blocks = {n: rng.integers(0, 2**30, (2, n), dtype=np.uint64) for n in wb.SIZES}
    for rank in range(2):
        for n in wb.SIZES:
            out = _send(sw, rank + 1, wb.block_frame(3, rank == 0, blocks[n][rank]))
            _, got = wb.block_sums(out)
            np.testing.assert_array_equal(got, blocks[n][: rank + 1].sum(axis=0))


def test_a_frame_that_is_no_block_is_dropped() -> None:
    sw = Switch()
    sw.load_pipeline(wb.load_program("chunks", 256).bmv2_json)
    assert sw.process(1, bytes(12) + b"\x08\x00" + bytes(64)) == []


def test_widened_json_changes_only_the_wide_things() -> None:
    text = (BENCH / "p4" / "build" / "wide_64" / "wide_64.json").read_text()
    widened = wb.widen_json(text, 8192)
    assert widened.count('"bitwidth": 8192') == 1  # the register
    assert '"0x' + "f" * 2048 + '"' in widened  # the mask after the addition
    assert "2048" not in widened.replace("8192", "")
    # the other fields keep their widths
    assert '["slot", 16, false]' in widened and '["ether_type", 16, false]' in widened
