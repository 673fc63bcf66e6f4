#!/usr/bin/env python3
"""Compile a P4 program with p4c-bm2-ss and record a manifest of what went in.

p4c cannot be installed from any registry here, so its outputs are committed. The manifest
(sha256 of every P4 source the program includes, of every output, and the p4c version) is
what lets the test suite notice a source edited without recompiling: `check_manifest`
fails with "recompile" when the sources and the manifest disagree.

Usage: python p4src/compile.py [--p4c p4c-bm2-ss] [PROGRAM.p4 [OUT_DIR]]
(defaults: p4src/v1model/p4reduce.p4 into p4src/build/; any other program into
build/<program>/ beside it, e.g. tests/softswitch/p4/arith.p4 into
tests/softswitch/p4/build/arith/). One program, one output directory, one manifest.
Stdlib only: runs before any install.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

MANIFEST = "MANIFEST.json"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROGRAM = HERE / "v1model" / "p4reduce.p4"     # the bmv2 / softswitch program
BUILD = HERE / "build"
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


def compile_program(program: Path, out_dir: Path, p4c: str = "p4c-bm2-ss") -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    base = _source_base(program, out_dir)
    json_out, p4info_out = outputs_for(program, out_dir)
    # run from the repository root with paths relative to it: p4c writes the source
    # paths into the JSON, which then reads the same on every machine and from any cwd
    cmd = [p4c, "--arch", "v1model", "--std", "p4-16", "-o", _shown(str(json_out.resolve())),
           "--p4runtime-files", _shown(str(p4info_out.resolve())),
           _shown(str(program.resolve()))]
    subprocess.run(cmd, check=True, cwd=ROOT)
    shown = subprocess.run([p4c, "--version"], check=True, capture_output=True, text=True)
    version = next((line.strip() for line in (shown.stdout + shown.stderr).splitlines()
                    if line.strip().startswith("Version")), "unknown")
    manifest = {
        "program": program.name,
        "p4c_version": version,
        "command": ["p4c-bm2-ss", *cmd[1:]],
        "sources": {_rel(p, base): sha256(p) for p in p4_sources(program)},
        "outputs": {p.name: sha256(p) for p in (json_out, p4info_out)},
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def check_manifest(program: Path, out_dir: Path) -> list[str]:
    """Every disagreement between sources/outputs and the manifest, as readable lines."""
    path = out_dir / MANIFEST
    if not path.exists():
        return [f"{path} is missing: recompile: python p4src/compile.py "
                f"{_shown(str(program.resolve()))}"]
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
        problems.append(f"recompile: python p4src/compile.py "
                        f"{_shown(str(program.resolve()))}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p4c", default="p4c-bm2-ss")
    ap.add_argument("program", nargs="?", default=str(PROGRAM))
    ap.add_argument("out_dir", nargs="?")
    args = ap.parse_args(argv)
    program = Path(args.program)
    if not program.is_file():
        ap.error(f"no P4 program at {program}")
    out_dir = Path(args.out_dir) if args.out_dir else default_out_dir(program)
    manifest = compile_program(program, out_dir, args.p4c)
    print(f"compiled {program} with {manifest['p4c_version']} -> {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
