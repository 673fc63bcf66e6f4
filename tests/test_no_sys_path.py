"""No code outside tests/ edits `sys.path`: every component imports installed packages.

Why: a `sys.path` insertion makes a module's imports depend on where it sits in the
checkout -- it works from the source tree and breaks installed, or picks up a folder that
shadows a package (tests/hostlib/ over hostlib). The demo and topology live in the p4net
package, bench/ and examples/ import installed packages (and, as scripts, their own
siblings: a script's directory is sys.path[0] without any insertion), and worker
processes run as `python -m p4net.worker`. This walks every .py file outside tests/ with
`ast` and names each mutation of sys.path with file:line.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# folders that hold no code of the project's own
SKIPPED = {".venv", ".git", "build", "tests", "__pycache__", ".pytest_cache"}
# a file that still edits sys.path, with why; each must name a reason (none today)
ALLOWED: dict[str, str] = {}
MUTATORS = {"insert", "append", "extend", "remove", "pop", "clear", "reverse", "sort"}


def python_files() -> list[Path]:
    return sorted(
        path
        for path in REPO.rglob("*.py")
        if not SKIPPED & set(path.relative_to(REPO).parts[:-1])
        and not path.relative_to(REPO).parts[0].startswith(".")
    )


def _is_sys_path(node: ast.AST) -> bool:
    """`sys.path` (the attribute path of the name sys)."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _targets_sys_path(target: ast.AST) -> bool:
    """An assignment target that is sys.path, or an item or slice of it."""
    if isinstance(target, ast.Subscript):
        target = target.value
    return _is_sys_path(target)


def mutations(tree: ast.AST) -> list[int]:
    """Lines that change sys.path: a call of one of its list methods, an assignment to
    it (or an item or slice), an augmented assignment, a del of an item."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in MUTATORS and _is_sys_path(node.func.value):
                lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(_targets_sys_path(t) for t in targets):
                lines.append(node.lineno)
    return sorted(lines)


def offenders() -> list[str]:
    out = []
    for path in python_files():
        rel = path.relative_to(REPO).as_posix()
        if rel in ALLOWED:
            continue
        tree = ast.parse(path.read_text(), filename=rel)
        out += [f"{rel}:{line}" for line in mutations(tree)]
    return out


def test_no_code_outside_tests_edits_sys_path():
    assert offenders() == []


def test_the_walk_sees_the_components_and_would_name_a_mutation():
    """The check can fail: it reads the packages, scripts and examples, and finds each
    form of mutation in a sample."""
    seen = {p.relative_to(REPO).parts[0] for p in python_files()}
    assert {"p4net", "bench", "examples", "mininet", "hostlib", "softswitch"} <= seen
    sample = (
        "import sys\n"
        "sys.path.insert(0, 'x')\n"
        "sys.path[:0] = ['y']\n"
        "sys.path += ['z']\n"
        "sys.path = []\n"
        "del sys.path[0]\n"
        "print(sys.path)\n"
    )
    assert mutations(ast.parse(sample)) == [2, 3, 4, 5, 6]
    for rel in ALLOWED:
        assert mutations(ast.parse((REPO / rel).read_text())), f"{rel} is allowed for nothing"
