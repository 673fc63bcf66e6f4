"""The committed p4c outputs belong to the committed P4 sources, and agree with the codec.

Every P4 program is built by p4src/compile.py with one manifest schema: the p4reduce
program into p4src/build/, each test program tests/<suite>/p4/<name>.p4 into
tests/<suite>/p4/build/<name>/ (`make p4` rebuilds them all)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path


import pytest

from hostlib import protocol

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "p4src" / "v1model" / "p4reduce.p4"
BUILD = REPO / "p4src" / "build"
TEST_PROGRAMS = sorted(REPO.glob("tests/*/p4/*.p4"))


def _compile_module():
    spec = importlib.util.spec_from_file_location("p4src_compile", REPO / "p4src" / "compile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_outputs_match_sources():
    problems = _compile_module().check_manifest(PROGRAM, BUILD)
    assert not problems, "p4src/build is stale -- recompile p4src:\n" + "\n".join(problems)


@pytest.mark.parametrize("program", TEST_PROGRAMS, ids=lambda p: str(p.relative_to(REPO)))
def test_test_program_outputs_match_sources(program):
    compile_mod = _compile_module()
    out_dir = compile_mod.default_out_dir(program)
    assert out_dir == program.parent / "build" / program.stem
    problems = compile_mod.check_manifest(program, out_dir)
    assert not problems, f"{out_dir.relative_to(REPO)} is stale:\n" + "\n".join(problems)


def test_every_test_build_has_its_program():
    """No output directory outlives its program (a renamed or deleted test program)."""
    assert TEST_PROGRAMS, "no test programs found: the glob is wrong"
    built = {d for d in REPO.glob("tests/*/p4/build/*") if d.is_dir()}
    assert built == {p.parent / "build" / p.stem for p in TEST_PROGRAMS}


def test_manifest_detects_an_edited_test_program(tmp_path):
    import shutil

    compile_mod = _compile_module()
    program = REPO / "tests" / "softswitch" / "p4" / "arith.p4"
    shutil.copy(program, tmp_path / program.name)
    shutil.copytree(program.parent / "build" / "arith", tmp_path / "build" / "arith")
    copy = tmp_path / program.name
    assert compile_mod.check_manifest(copy, tmp_path / "build" / "arith") == []
    copy.write_text(copy.read_text() + "\n/* edit */\n")
    problems = compile_mod.check_manifest(copy, tmp_path / "build" / "arith")
    assert problems[0] == "arith.p4 changed since it was compiled"
    assert "python p4src/compile.py" in problems[-1]


def test_manifest_detects_an_edited_source(tmp_path):
    compile_mod = _compile_module()
    import shutil

    src = tmp_path / "p4src"
    shutil.copytree(REPO / "p4src", src, ignore=shutil.ignore_patterns("__pycache__"))
    program = src / "v1model" / PROGRAM.name
    assert compile_mod.check_manifest(program, src / "build") == []
    body = src / "common" / "bodies" / "value_aggregation.p4"
    body.write_text(body.read_text() + "\n/* edit */\n")
    problems = compile_mod.check_manifest(program, src / "build")
    assert any("common/bodies/value_aggregation.p4 changed" in p for p in problems)
    assert any("recompile" in p for p in problems)


def test_p4_header_is_the_codec_field_table():
    program = json.loads((BUILD / "p4reduce.json").read_text())
    types = {t["name"]: t for t in program["header_types"]}
    p4_fields = [(name, bits) for name, bits, *_ in types["p4reduce_t"]["fields"]]
    assert p4_fields == [(f.name, f.bits) for f in protocol.FIELDS]
    # a job of the default size carries its block as one word of BLOCK_VALUES lanes
    block = types[f"values_{protocol.BLOCK_VALUES}_t"]["fields"]
    assert [bits for _, bits, *_ in block] == [8 * protocol.VALUE_BYTES]
    for p4_type, fields in (
        ("fingerprint_t", protocol.FINGERPRINT_FIELDS),
        ("round_status_t", protocol.STATUS_FIELDS),
    ):
        assert [(n, b) for n, b, *_ in types[p4_type]["fields"]] == [
            (f.name, f.bits) for f in fields
        ], p4_type


def test_p4_constants_match_the_codec():
    text = (REPO / "p4src" / "common" / "constants.p4").read_text()
    consts = {
        m[0]: int(m[1], 0)
        for m in re.findall(r"const (?:bit<\d+>|\w+_t)\s+(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+);", text)
    }
    assert consts["P4REDUCE_UDP_BASE"] == protocol.UDP_PORT_BASE
    assert consts["P4REDUCE_UDP_MASK"] == protocol.UDP_PORT_MASK
    assert consts["END_OF_STREAM"] == protocol.END_OF_STREAM
    assert consts["PROTOCOL_VERSION"] == protocol.PROTOCOL_VERSION
    for msg in protocol.MsgType:
        assert consts[f"MSG_{msg.name}"] == msg.value, msg
    for flag in protocol.Flag:
        assert consts[f"FLAG_{flag.name}"] == flag.value, flag
    assert f"#define LANES {protocol.BLOCK_VALUES}" in text
    assert f"#define P4R_HEADER_BYTES {protocol.HEADER_BYTES}" in text
    assert consts["EPOCH_LOST"] == protocol.MAX_EPOCH + 1


def test_every_flag_the_p4_sources_name_is_the_codecs():
    """Flags that share a bit (ENDED, COVERED, REPAIRED, RELAYED: aliases, which iterating
    Flag skips) are named wherever an architecture's source defines them (the repair mark
    and the leaf's relay are v1model's or per architecture): each such constant is the
    codec's."""
    found = {}
    for path in sorted((REPO / "p4src").rglob("*.p4")):
        if "build" in path.parts:
            continue
        for name, value in re.findall(r"const flags_t\s+FLAG_(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+);",
                                      path.read_text()):  # fmt: skip
            found.setdefault(name, set()).add((int(value, 0), path.relative_to(REPO)))
    assert {"REPAIRED", "ENDED", "COVERED", "RELAYED"} <= set(found), sorted(found)
    for name, defined in found.items():
        want = protocol.Flag.__members__[name].value
        assert {v for v, _ in defined} == {want}, (name, defined, want)


def _tna_include() -> Path | None:
    """Where tna.p4 lives: $TOFINO_P4INCLUDE, or the p4c source tree docs/tofino.md builds."""
    import os

    for candidate in (
        os.environ.get("TOFINO_P4INCLUDE"),
        "/opt/tofino/p4c/backends/tofino/bf-p4c/p4include",
    ):
        if candidate and (Path(candidate) / "tna.p4").exists():
            return Path(candidate)
    return None


@pytest.mark.parametrize("drop_simulator", [1], ids=["test-build"])
@pytest.mark.parametrize("target", [1, 2])
def test_tna_program_type_checks_with_the_p4c_frontend(target, drop_simulator):
    """Where the TNA sources changed since bf-p4c last compiled them (docs/tofino.md), p4c's
    own frontend and midend (p4test) check the TNA program against tna.p4/t2na.p4: every
    shared body, name and type must fit TNA's externs (RegisterAction, Counter, Hash,
    Random), so an edit made without the Tofino compiler gets its type errors at once. The
    test build of each chip is checked: it has every control the production build has, and
    the drop simulator besides. When the committed build's manifest matches the sources,
    bf-p4c compiled exactly these sources, a stricter check than p4test's: nothing is left
    to check (tests/test_tofino_build.py checks the manifests)."""
    import shutil
    import subprocess

    chip = "tofino" if target == 1 else f"tofino{target}"
    if not _compile_module().check_tofino_manifest(chip, drop_simulator=bool(drop_simulator)):
        pytest.skip(f"bf-p4c compiled exactly these sources ({chip}'s test build manifest)")
    include = _tna_include()
    if include is None or shutil.which("p4test") is None:
        pytest.skip(
            "needs p4test (../shared/toolchain) and tna.p4 from p4c's Tofino backend "
            "sources (set TOFINO_P4INCLUDE; docs/tofino.md)"
        )
    out = subprocess.run(
        [
            "p4test",
            "--std",
            "p4-16",
            f"-D__TARGET_TOFINO__={target}",
            f"-DP4REDUCE_DROP_SIMULATOR={drop_simulator}",
            "-I",
            str(include),
            str(REPO / "p4src" / "tna" / "p4reduce.p4"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in (out.stdout + out.stderr).splitlines() if "error" in line]
    assert out.returncode == 0 and not errors, "\n".join(errors[:20])


def test_the_pipeline_comparison_ignores_source_lines_and_finds_a_changed_constant():
    """p4src/bmv2_json_diff.py (how a refactoring of the P4 sources is checked to leave the
    v1model program as it was): source lines and p4c's line-numbered names are not a
    difference; a changed constant is."""
    import copy

    diff = _compile_module()._sibling("bmv2_json_diff")
    program = json.loads((REPO / "p4src" / "build" / "p4reduce.json").read_text())
    moved = json.loads(
        json.dumps(program).replace('"line": 1', '"line": 7').replace("p4reduce5", "p4reduce9")
    )
    assert diff.differences(diff.normalized(program), diff.normalized(moved)) == []
    changed = copy.deepcopy(program)
    state = next(s for s in changed["parsers"][0]["parse_states"] if s["name"] == "parse_udp")
    state["transitions"][0]["value"] = "0x5040"
    found = diff.differences(diff.normalized(program), diff.normalized(changed))
    assert found == [".parsers[0].parse_states[3].transitions[0].value: '0x5030' -> '0x5040'"]


# -- the widened program (p4src/compile.py `widen`) ----------------------------------------


def _widths(program: dict) -> dict[str, int]:
    """Every header type field's and register array's width, by name."""
    out = {}
    for h in program["header_types"]:
        for name, bits, *_ in h["fields"]:
            out[f"{h['name']}.{name}"] = bits
    for r in program["register_arrays"]:
        out[r["name"]] = r["bitwidth"]
    return out


def _scalars_by_action(program: dict) -> dict[str, set[str]]:
    """scalars field -> the actions that use it."""
    used: dict[str, set[str]] = {}

    def walk(node, action: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "field" and node["value"][0] == "scalars":
                used.setdefault(node["value"][1], set()).add(action)
            for v in node.values():
                walk(v, action)
        elif isinstance(node, list):
            for v in node:
                walk(v, action)

    for action in program["actions"]:
        walk(action["primitives"], action["name"])
    return used


def test_the_committed_program_is_widened_by_block_size():
    """In the committed JSON every block size's header type and register, and every local
    of its actions that p4c made P4C_MAX_WIDTH bits, is 32K bits for size K; nothing else is
    wider than p4c allows; the manifest lists exactly what was widened; the P4Info's
    register widths agree."""
    compile_mod = _compile_module()
    sizes = compile_mod.block_sizes(PROGRAM)
    program = json.loads((BUILD / "p4reduce.json").read_text())
    widths = _widths(program)
    size_of = {f"values_{k}_t.word": k for k in sizes}
    size_of |= {n: k for n in widths for k in sizes if n.endswith(f".sums_{k}")}
    scalars_type = next(h["header_type"] for h in program["headers"] if h["name"] == "scalars")
    for local, actions in _scalars_by_action(program).items():
        ks = {compile_mod._size_of(a, sizes) for a in actions}
        name = f"{scalars_type}.{local}"
        if widths[name] > 32 and None not in ks:
            assert len(ks) == 1, f"{local} is used by sizes {ks}"
            size_of[name] = ks.pop()
    # a header type and a register per size (the actions hold the register cell in a
    # header, held_K, so a size may have no wide local)
    assert len(size_of) >= 2 * len(sizes)
    for name, bits in widths.items():
        if name in size_of:
            assert bits == 32 * size_of[name], name
        else:
            assert bits <= compile_mod.P4C_MAX_WIDTH, f"{name} is {bits} bits: not a block"
    manifest = json.loads((BUILD / "MANIFEST.json").read_text())
    listed = {
        n.replace("scalars.", f"{scalars_type}.", 1): b for n, b in manifest["widened"].items()
    }
    assert listed == {n: 32 * k for n, k in size_of.items() if 32 * k != 2048}
    from p4reduce.p4rt import P4InfoIndex

    info = P4InfoIndex.load(BUILD / "p4reduce.p4info.txtpb")
    for register in info.registers.values():
        assert register.bitwidth == widths[register.name], register.name


def test_widening_changes_only_the_block_sizes():
    """The committed program narrowed back (compile.py `narrow`, widening's inverse) is
    p4c's own output -- the digest compile.py recorded in the manifest when it ran p4c --
    and widening that gives the committed program again. The only differences are the
    widths of each size's names (32K bits) and, in each size's actions, its lane-pattern
    constants repeated to K lanes."""
    compile_mod = _compile_module()
    sizes = compile_mod.block_sizes(PROGRAM)
    manifest = json.loads((BUILD / "MANIFEST.json").read_text())
    committed = (BUILD / "p4reduce.json").read_text()
    before, after = json.loads(committed), json.loads(committed)
    compile_mod.narrow(before, sizes, manifest["widened"])
    assert compile_mod.p4c_output_digest(before) == manifest["p4c_output"], (
        "the committed program narrowed is not the p4c output compile.py recorded"
    )
    differences: list[tuple[str, object, object]] = []
    _diff(before, after, "", differences)
    assert differences, "nothing was widened"
    for path, old, new in differences:
        action = re.search(r"actions\[(\d+)\]", path)
        if isinstance(old, int):  # a width: of a name with a block size
            assert old == compile_mod.P4C_MAX_WIDTH and new % 32 == 0, path
            k = new // 32
            assert k in sizes and k * 32 != old, path
        else:  # a constant in an action of size K: the same lane, K times
            assert action is not None, path
            k = compile_mod._size_of(before["actions"][int(action.group(1))]["name"], sizes)
            lane = compile_mod._lane_word(int(old, 16), compile_mod.P4C_MAX_WIDTH)
            assert k is not None and lane is not None, path
            assert int(new, 16) == int(format(lane, "08x") * k, 16), path
            assert len(new) == 2 + 8 * k, path
    compile_mod.widen(before, sizes)
    assert before == after, "compile.py's widening of p4c's output is not what is committed"


def _diff(a, b, path: str, out: list) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append((path, a, b))
