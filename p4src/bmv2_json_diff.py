#!/usr/bin/env python3
"""Compare two compiled bmv2 JSON programs as pipelines, not as text.

A refactoring of the P4 sources (shared controls, typedefs, renamed locals) must leave the
v1model program's behaviour as it was. p4c-bm2-ss writes source file names, lines and
fragments into the JSON, and numbers its temporaries and generated tables by source line,
so a byte comparison fails on any edit. This compares what bmv2 runs: header types,
parsers, deparsers, registers, counters, actions (primitives), tables (keys, actions,
sizes, defaults, const entries) and conditionals, with source information dropped and the
generated names (`tbl_*`, `node_*`, `cond_*`, `scalars.tmp*`, `<file><line>` ...) replaced
by their order of appearance.

Usage: python p4src/bmv2_json_diff.py OLD.json NEW.json   (exit 0: the same pipeline)
Stdlib only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SOURCE_KEYS = {"source_info", "source_fragment", "filename", "line", "column", "__meta__"}
# names p4c makes up (numbered by line or order): replaced by their order of appearance
GENERATED = re.compile(
    r"^(?!0x)(tbl_\w+|node_\d+|cond\w*|act(_\d+)?|\w+_\d+_\w*|tmp(_\d+)?|key_\d+|\$\w+|"
    r"\w*(tmp|key|hasReturned|retval)\w*|"
    r"\w*[a-z]\d+)$"  # an action p4c names after its file and line: p4reduce55
)


def _strip(node):
    """The node without source information."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in SOURCE_KEYS}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _rename(node, names: dict[str, str], keys_are_names: bool = False):
    """Every generated name replaced by `~N`, N its order of first appearance (a table's
    `next_tables` is keyed by action names)."""
    if isinstance(node, dict):
        return {
            (_rename(k, names) if keys_are_names else k): _rename(v, names, k == "next_tables")
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rename(v, names) for v in node]
    if isinstance(node, str) and GENERATED.match(node):
        return names.setdefault(node, f"~{len(names)}")
    return node


def normalized(program: dict) -> dict:
    """The parts of a bmv2 program that decide what it does, without source info or the
    numbering of generated names. Object ids stay: they follow declaration order."""
    return _rename(_strip(program), {})


def differences(old: dict, new: dict, path: str = "") -> list[str]:
    """Human-readable paths where two normalized programs differ."""
    if type(old) is not type(new):
        return [f"{path}: {old!r} -> {new!r}"]
    if isinstance(old, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            if key not in old:
                out.append(f"{path}.{key}: added")
            elif key not in new:
                out.append(f"{path}.{key}: removed")
            else:
                out += differences(old[key], new[key], f"{path}.{key}")
        return out
    if isinstance(old, list):
        if len(old) != len(new):
            return [f"{path}: {len(old)} -> {len(new)} items"]
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out += differences(a, b, f"{path}[{i}]")
        return out
    return [] if old == new else [f"{path}: {old!r} -> {new!r}"]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    old, new = (normalized(json.loads(Path(p).read_text())) for p in argv)
    found = differences(old, new)
    for line in found[:50]:
        print(line)
    if found:
        print(f"{len(found)} differences")
        return 1
    print("the same pipeline (source information and generated names aside)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
