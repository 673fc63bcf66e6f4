#!/usr/bin/env python3
"""Compile a P4 program with p4c-bm2-ss or bf-p4c and record a manifest of what went in.

p4c cannot be installed from any registry here, so its outputs are committed. The manifest
(sha256 of every P4 source the program includes, of every output, and the compiler
version) is what lets the test suite notice a source edited without recompiling:
`check_manifest` fails with "recompile" when the sources and the manifest disagree.

Usage:
    python p4src/compile.py [--p4c p4c-bm2-ss] [PROGRAM.p4 [OUT_DIR]]
        (defaults: p4src/v1model/p4reduce.p4 into p4src/build/; any other program into
        build/<program>/ beside it, e.g. tests/softswitch/p4/arith.p4 into
        tests/softswitch/p4/build/arith/). One program, one output directory, one manifest.
    python p4src/compile.py --target tofino|tofino2 [--p4c p4c]
        p4src/tna/p4reduce.p4 with p4c's Tofino backend (bf-p4c, docs/tofino.md) into
        p4src/build/tofino/ or tofino2/: the P4Info (standard P4Runtime externs, as Stratum
        and the SDE's P4Runtime server take it), bf-rt.json, context.json and
        resources.json (stages, stateful ALUs, SRAM, TCAM, PHV; tofino_resources.py). The
        compiler's full output directory stays in build/tofino/<target>/ (not committed:
        tofino.bin is what a switch loads, rebuilt from the same command).
Stdlib only: runs before any install.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

MANIFEST = "MANIFEST.json"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROGRAM = HERE / "v1model" / "p4reduce.p4"  # the bmv2 / softswitch program
BUILD = HERE / "build"
TNA_PROGRAM = HERE / "tna" / "p4reduce.p4"  # the Tofino program (docs/tofino.md)
# target -> (architecture, MAU stages per pipe): what bf-p4c is asked for, what must fit
TOFINO_TARGETS = {"tofino": ("tna", 12), "tofino2": ("t2na", 20)}
# the committed outputs of a Tofino compile, in p4src/build/<target>/
TOFINO_OUTPUTS = ("p4reduce.p4info.txtpb", "bf-rt.json", "context.json", "resources.json")
TOFINO_SCRATCH = ROOT / "build" / "tofino"  # the compiler's whole output directory
PARSER_DEFECT_WARNING = "Can't match parser state due to previous match"  # bfas
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def p4_sources(program: Path) -> list[Path]:
    """The program and every file it includes with "..." (system <...> includes excluded)."""
    seen: list[Path] = []
    todo = [program.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.append(path)
        for name in _INCLUDE.findall(path.read_text()):
            todo.append((path.parent / name).resolve())
    return sorted(seen)


def outputs_for(program: Path, out_dir: Path) -> tuple[Path, Path]:
    stem = program.stem
    return out_dir / f"{stem}.json", out_dir / f"{stem}.p4info.txtpb"


def default_out_dir(program: Path) -> Path:
    """p4src/build for the p4reduce program, build/<stem>/ beside any other program."""
    if program.resolve() == PROGRAM:
        return BUILD
    return program.parent / "build" / program.stem


def _source_base(program: Path, out_dir: Path) -> Path:
    """What the manifest's source names are relative to: the deepest folder holding the
    output directory and every source (p4src/ for p4src/build)."""
    paths = [str(out_dir.resolve()), *(str(p) for p in p4_sources(program))]
    return Path(os.path.commonpath(paths))


def _rel(path: Path, base: Path) -> str:
    return str(path.resolve().relative_to(base.resolve()))


def _shown(arg: str) -> str:
    """A path argument as it reads from the repository root (no machine-specific paths)."""
    path = Path(arg)
    if path.is_absolute() and path.resolve().is_relative_to(ROOT):
        return str(path.resolve().relative_to(ROOT))
    return arg


# -- wide blocks (v1model) -------------------------------------------------------------------

# p4c-bm2-ss: "Compiler only supports widths up to 2048"; a block of K 32-bit values is one
# 32K-bit word, so the program writes every size at this width and `widen` fixes it after p4c
P4C_MAX_WIDTH = 2048
LANE_BITS = 32
_BLOCK_SIZES = re.compile(r"^\s*#\s*define\s+FOR_EACH_BLOCK_SIZE\(X\)\s+(.*)$", re.MULTILINE)
_P4INFO_REGISTER = re.compile(r"^registers \{\n.*?^\}\n", re.MULTILINE | re.DOTALL)


def block_sizes(program: Path) -> tuple[int, ...]:
    """The block sizes (values per block) the program's FOR_EACH_BLOCK_SIZE lists, or ()
    for a program without one."""
    for path in p4_sources(program):
        m = _BLOCK_SIZES.search(path.read_text())
        if m:
            return tuple(int(k) for k in re.findall(r"X\((\d+)\)", m.group(1)))
    return ()


def _size_of(name: str, sizes: tuple[int, ...]) -> int | None:
    """K when `name` (a P4 name, maybe dotted) ends in _K for a block size K."""
    tail = name.rsplit(".", 1)[-1].removesuffix("_t").rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() and int(tail) in sizes else None


@functools.cache
def lane_ones(lanes: int) -> int:
    """1 in each of `lanes` 32-bit lanes: a lane times it repeats the lane in every lane
    (written as hex digits: a sum of shifted ones is quadratic at 16 000 lanes)."""
    return int("00000001" * lanes, 16)


def _lane_word(value: int, bits: int) -> int | None:
    """The 32-bit lane a `bits`-wide constant repeats in every lane, or None."""
    lane = value & ((1 << LANE_BITS) - 1)
    return lane if lane * lane_ones(bits // LANE_BITS) == value else None


def _relane_node(node: object, bits: int, lanes: int, scalars: set[str]) -> object:
    """An action's primitives with every `bits`-wide lane-pattern constant (the lane masks,
    LANE_ONES, p4c's all-ones masks, zero) repeated to `lanes` lanes instead; the scalars
    (locals) the action uses are added to `scalars`. Widening goes from P4C_MAX_WIDTH bits
    to a block size's lanes, narrowing back."""
    if isinstance(node, dict):
        if node.get("type") == "field" and node["value"][0] == "scalars":
            scalars.add(node["value"][1])
        value = node.get("value")
        if node.get("type") == "hexstr" and len(value) == 2 + bits // 4:
            lane = _lane_word(int(value, 16), bits)
            if lane is not None:
                word = lane * lane_ones(lanes)
                return {**node, "value": "0x" + format(word, f"0{lanes * LANE_BITS // 4}x")}
        return {key: _relane_node(v, bits, lanes, scalars) for key, v in node.items()}
    if isinstance(node, list):
        return [_relane_node(v, bits, lanes, scalars) for v in node]
    return node


def _scalars_type(program: dict) -> str:
    """The header type of p4c's `scalars` header, which holds the program's locals."""
    return next(h["header_type"] for h in program["headers"] if h["name"] == "scalars")


def widen(program: dict, sizes: tuple[int, ...]) -> dict[str, int]:
    """Make each block size's things in p4c's JSON as wide as the size (K values: 32K bits),
    found by name: header types values_K_t, register arrays named *_K, and in actions named
    *_K the locals (scalars) and lane-pattern constants. Only what p4c wrote
    P4C_MAX_WIDTH bits wide changes. Returns {name: new width} of the header types,
    registers and locals widened."""
    widened: dict[str, int] = {}
    for header_type in program["header_types"]:
        k = _size_of(header_type["name"], sizes)
        if k is not None and header_type["name"].endswith("_t"):
            for field in header_type["fields"]:
                if field[1] == P4C_MAX_WIDTH and k * LANE_BITS != P4C_MAX_WIDTH:
                    field[1] = k * LANE_BITS
                    widened[f"{header_type['name']}.{field[0]}"] = field[1]
    for register in program["register_arrays"]:
        k = _size_of(register["name"], sizes)
        if k is not None and register["bitwidth"] == P4C_MAX_WIDTH != k * LANE_BITS:
            register["bitwidth"] = k * LANE_BITS
            widened[register["name"]] = register["bitwidth"]
    scalars_type = _scalars_type(program)
    scalars = next(h for h in program["header_types"] if h["name"] == scalars_type)
    wide_locals = {f[0]: f for f in scalars["fields"] if f[1] == P4C_MAX_WIDTH}
    locals_size: dict[str, int] = {}
    for action in program["actions"]:
        k = _size_of(action["name"], sizes)
        if k is None:
            continue
        used: set[str] = set()
        action["primitives"] = _relane_node(action["primitives"], P4C_MAX_WIDTH, k, used)
        for name in used & set(wide_locals):
            if locals_size.setdefault(name, k) != k:
                raise SystemExit(f"local {name} is used by sizes {locals_size[name]} and {k}")
    for name, k in locals_size.items():
        if k * LANE_BITS != P4C_MAX_WIDTH:
            wide_locals[name][1] = k * LANE_BITS
            widened[f"scalars.{name}"] = k * LANE_BITS
    return widened


def narrow(program: dict, sizes: tuple[int, ...], widened: dict[str, int]) -> None:
    """widen's inverse, in place: every name `widened` lists (as the manifest records it)
    back to P4C_MAX_WIDTH bits and each size's lane-pattern constants back to p4c's width.
    It lets a test check the committed program against p4c's own output, whose digest the
    manifest keeps (p4c_output_digest), without compiling the program again."""
    full = P4C_MAX_WIDTH // LANE_BITS
    scalars_type = _scalars_type(program)
    for header_type in program["header_types"]:
        prefix = "scalars" if header_type["name"] == scalars_type else header_type["name"]
        for field in header_type["fields"]:
            if f"{prefix}.{field[0]}" in widened:
                field[1] = P4C_MAX_WIDTH
    for register in program["register_arrays"]:
        if register["name"] in widened:
            register["bitwidth"] = P4C_MAX_WIDTH
    for action in program["actions"]:
        k = _size_of(action["name"], sizes)
        if k is not None and k != full:
            action["primitives"] = _relane_node(action["primitives"], k * LANE_BITS, full, set())


def p4c_output_digest(program: dict) -> str:
    """sha256 of a bmv2 JSON program in one canonical text (sorted keys, no spaces): what
    the manifest records of p4c's output before widening."""
    text = json.dumps(program, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def widen_p4info(text: str, widened: dict[str, int]) -> str:
    """The P4Info (text format) with the widened registers' bit widths."""

    def one(m: re.Match) -> str:
        block = m.group(0)
        name = re.search(r'name: "([^"]+)"', block).group(1)
        if name not in widened:
            return block
        return block.replace(f"bitwidth: {P4C_MAX_WIDTH}\n", f"bitwidth: {widened[name]}\n")

    return _P4INFO_REGISTER.sub(one, text)


def widen_outputs(program: Path, json_out: Path, p4info_out: Path) -> dict[str, object]:
    """Widen the outputs of a program with block sizes (the v1model p4reduce program and
    the test programs built on it) in place; nothing for other programs. Returns what the
    manifest records of it: the names widened (name -> bits) and the digest of p4c's own
    output."""
    sizes = block_sizes(program)
    if not sizes:
        return {}
    compiled = json.loads(json_out.read_text())
    digest = p4c_output_digest(compiled)
    widened = widen(compiled, sizes)
    # compact: every fresh pipeline sends this file over P4Runtime and the switch parses
    # it, and p4c's indentation nearly triples it (p4reduce's is 11 MB without)
    json_out.write_text(json.dumps(compiled, separators=(",", ":")) + "\n")
    p4info_out.write_text(widen_p4info(p4info_out.read_text(), widened))
    return {"widened": widened, "p4c_output": digest} if widened else {}


def compile_program(program: Path, out_dir: Path, p4c: str = "p4c-bm2-ss") -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    base = _source_base(program, out_dir)
    json_out, p4info_out = outputs_for(program, out_dir)
    # run from the repository root with paths relative to it: p4c writes the source
    # paths into the JSON, which then reads the same on every machine and from any cwd
    cmd = [
        p4c,
        "--arch",
        "v1model",
        "--std",
        "p4-16",
        "-o",
        _shown(str(json_out.resolve())),
        "--p4runtime-files",
        _shown(str(p4info_out.resolve())),
        _shown(str(program.resolve())),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT)
    widening = widen_outputs(program, json_out, p4info_out)
    shown = subprocess.run([p4c, "--version"], check=True, capture_output=True, text=True)
    version = next(
        (
            line.strip()
            for line in (shown.stdout + shown.stderr).splitlines()
            if line.strip().startswith("Version")
        ),
        "unknown",
    )
    manifest = {
        "program": program.name,
        "p4c_version": version,
        "command": ["p4c-bm2-ss", *cmd[1:]],
        "sources": {_rel(p, base): sha256(p) for p in p4_sources(program)},
        "outputs": {p.name: sha256(p) for p in (json_out, p4info_out)},
    }
    # widened: name -> bits, each block size's, after p4c; p4c_output: the digest of
    # p4c's own output (p4c_output_digest), before widening
    manifest |= widening
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def check_manifest(program: Path, out_dir: Path, recompile: str | None = None) -> list[str]:
    """Every disagreement between sources/outputs and the manifest, as readable lines;
    `recompile` is the command the last line tells the reader to run."""
    if recompile is None:
        recompile = f"python p4src/compile.py {_shown(str(program.resolve()))}"
    path = out_dir / MANIFEST
    if not path.exists():
        return [f"{path} is missing: recompile: {recompile}"]
    manifest = json.loads(path.read_text())
    problems = []
    recorded = manifest.get("sources", {})
    base = _source_base(program, out_dir)
    actual = {_rel(p, base): sha256(p) for p in p4_sources(program)}
    for name in sorted(set(recorded) | set(actual)):
        if name not in actual:
            problems.append(f"{name} is in the manifest but no longer included")
        elif name not in recorded:
            problems.append(f"{name} is included but not in the manifest")
        elif recorded[name] != actual[name]:
            problems.append(f"{name} changed since it was compiled")
    for name, digest in manifest.get("outputs", {}).items():
        out = out_dir / name
        if not out.exists():
            problems.append(f"output {name} is missing")
        elif sha256(out) != digest:
            problems.append(f"output {name} was edited by hand")
    if problems:
        problems.append(f"recompile: {recompile}")
    return problems


# -- Tofino (bf-p4c) ------------------------------------------------------------------------


# the test build's directory suffix and the define that builds the drop simulator in
TEST_BUILD_SUFFIX = "-test"
DROP_SIMULATOR_DEFINE = "-DP4REDUCE_DROP_SIMULATOR=1"


def tofino_out_dir(target: str, build: Path = BUILD, drop_simulator: bool = False) -> Path:
    """p4src/build/<target>/ (production) or <target>-test/ (with the drop simulator)."""
    return build / (target + (TEST_BUILD_SUFFIX if drop_simulator else ""))


def _sibling(name: str):
    """A module beside this file, loaded by path: this script runs before any install and
    is also loaded by path from the tests, so neither a package nor sys.path is assumed."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_tofino_manifest(
    target: str, build: Path = BUILD, program: Path | None = None, drop_simulator: bool = False
) -> list[str]:
    """check_manifest for p4src/build/<target>[-test]/, naming `make p4-tofino` as the fix."""
    program = TNA_PROGRAM if program is None else program
    option = " --drop-simulator" if drop_simulator else ""
    return check_manifest(
        program,
        tofino_out_dir(target, build, drop_simulator),
        recompile=f"make p4-tofino (python p4src/compile.py --target "
        f"{target}{option}; needs bf-p4c, docs/tofino.md)",
    )


def _tofino_version(p4c: str, target: str) -> str:
    shown = subprocess.run([p4c, "--target", target, "--version"], capture_output=True, text=True)
    lines = [line.strip() for line in (shown.stdout + shown.stderr).splitlines() if line.strip()]
    return next((line for line in lines if "ersion" in line), lines[0] if lines else "unknown")


def compile_tofino(
    target: str,
    p4c: str = "p4c",
    program: Path = TNA_PROGRAM,
    build: Path = BUILD,
    scratch: Path = TOFINO_SCRATCH,
    drop_simulator: bool = False,
) -> dict:
    """Compile the TNA program for `target` with bf-p4c and commit-ready outputs: the
    production build, or with `drop_simulator` the test build (docs/tofino.md)."""
    tofino_resources = _sibling("tofino_resources")
    if target not in TOFINO_TARGETS:
        raise SystemExit(f"--target {target!r}: one of {', '.join(TOFINO_TARGETS)}")
    arch, stages = TOFINO_TARGETS[target]
    out_dir = tofino_out_dir(target, build, drop_simulator)
    work = scratch / out_dir.name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    p4info, bfrt = work / "p4reduce.p4info.txtpb", work / "bf-rt.json"
    cmd = [
        p4c,
        "--target",
        target,
        "--arch",
        arch,
        "--std",
        "p4-16",
        "-g",
        "-o",
        str(work),
        "--p4runtime-files",
        str(p4info),
        "--p4runtime-force-std-externs",
        "--bf-rt-schema",
        str(bfrt),
        *([DROP_SIMULATOR_DEFINE] if drop_simulator else []),
        str(program),
    ]
    # the compiler's messages pass through as they come (a compile takes minutes); a
    # compiler without p4lang/p4c#5753 drops parser match registers: bfas then warns that
    # states cannot match, or the .bfa has states choosing without a match
    defects = []
    with subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) as proc:
        for line in proc.stderr:
            sys.stderr.write(line)
            if PARSER_DEFECT_WARNING in line:
                defects.append(line.strip())
    if proc.returncode != 0:
        raise SystemExit(
            f"bf-p4c failed for {target} (exit {proc.returncode}); its logs are in {work}"
        )
    for bfa in sorted(work.glob("*/*.bfa")):
        defects += tofino_resources.parser_defects(tofino_resources.parser_states(bfa.read_text()))
    if defects:
        raise SystemExit(
            f"the compiler dropped parser match registers for {target} (p4lang/p4c#5753; "
            f"docs/tofino.md says how to build one that does not):\n  " + "\n  ".join(defects[:10])
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    context = next(work.glob("*/context.json"), None)
    if context is None:
        raise SystemExit(f"no context.json under {work}: the compile did not finish")
    shutil.copyfile(p4info, out_dir / "p4reduce.p4info.txtpb")
    shutil.copyfile(bfrt, out_dir / "bf-rt.json")
    shutil.copyfile(context, out_dir / "context.json")
    summary = tofino_resources.summarize(work, target, stages)
    (out_dir / "resources.json").write_text(json.dumps(summary, indent=2) + "\n")
    outputs = [out_dir / name for name in TOFINO_OUTPUTS]
    manifest = {
        "program": program.name,
        "target": target,
        "arch": arch,
        "drop_simulator": drop_simulator,
        "compiler_version": _tofino_version(p4c, target),
        "command": ["p4c"] + [_shown(arg) for arg in cmd[1:]],
        "sources": {
            _rel(p, _source_base(program, out_dir)): sha256(p) for p in p4_sources(program)
        },
        "outputs": {p.name: sha256(p) for p in outputs},
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--p4c", default=None, help="the compiler (default: p4c-bm2-ss; with --target: p4c)"
    )
    ap.add_argument(
        "--target",
        choices=sorted(TOFINO_TARGETS),
        help="compile the TNA program for this Tofino target instead",
    )
    ap.add_argument(
        "--drop-simulator",
        action="store_true",
        help="with --target: the test build, with the drop simulator (into <target>-test/)",
    )
    ap.add_argument("program", nargs="?", default=str(PROGRAM))
    ap.add_argument("out_dir", nargs="?")
    args = ap.parse_args(argv)
    if args.target:
        manifest = compile_tofino(
            args.target, args.p4c or "p4c", drop_simulator=args.drop_simulator
        )
        out_dir = tofino_out_dir(args.target, drop_simulator=args.drop_simulator)
        summary = json.loads((out_dir / "resources.json").read_text())
        print(
            f"compiled {TNA_PROGRAM.name} for {args.target} with "
            f"{manifest['compiler_version']}: {summary.get('stages_used')} of "
            f"{summary.get('stages_available')} stages -> {out_dir}"
        )
        return 0
    args.p4c = args.p4c or "p4c-bm2-ss"
    program = Path(args.program)
    if not program.is_file():
        ap.error(f"no P4 program at {program}")
    out_dir = Path(args.out_dir) if args.out_dir else default_out_dir(program)
    manifest = compile_program(program, out_dir, args.p4c)
    print(f"compiled {program} with {manifest['p4c_version']} -> {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
