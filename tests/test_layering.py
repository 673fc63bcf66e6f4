"""The import rule between the repository's top-level packages, checked on the source.

Floors, lowest first; a module may import packages of a lower floor only (never one of its
own floor, never one above):

    1  p4reduce                        the ground floor: wire format, P4Runtime codec, targets,
                                       job model, addresses, state file
    2  hostlib, controlplane, softswitch   each stands on p4reduce alone (and reads the
                                       compiled program, p4src.build, as data)
    3  p4net                           the network around a switch: switches under test and
                                       their controller session, topology, demo, workers
    4  bmv2_tests, mininet             the data-plane suite, and mininet/'s entry scripts
    5  bench, examples
       tests                           may import anything

p4src/ (the P4 sources and their build scripts) imports none of these. Every `import` and
`from ... import` statement of every module is read with ast -- also those inside functions,
which a module-loading probe would miss -- and a forbidden one is reported with its file and
line. A module imported by a bare name that is a file beside the importer (bench's `suite`,
mininet's `demo`) belongs to the importer's own package.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

FLOORS: dict[str, int] = {
    "p4reduce": 1,
    "hostlib": 2,
    "controlplane": 2,
    "softswitch": 2,
    "p4net": 3,
    "bmv2_tests": 4,
    "mininet": 4,
    "bench": 5,
    "examples": 5,
    "tests": 6,
}
# what a package may import besides the floors below it: the compiled program is data
# that every floor above the ground reads (pipeline files, P4Info, manifests)
DATA = "p4src.build"
SOURCES_ONLY = "p4src"  # imports no package of ours
OURS = set(FLOORS) | {SOURCES_ONLY}
# mininet/ holds entry scripts and is no package: an import named `mininet` is Debian's
IMPORTABLE = OURS - {"mininet"}


def _imported(tree: ast.AST, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in `tree`; relative imports stay
    inside the importer's package and are left out."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _package_of(module: str, importer: Path, root: Path) -> str | None:
    """The top-level package of ours that `module` names, or None (stdlib, third party)."""
    top = module.split(".")[0]
    if (importer.parent / f"{top}.py").exists():  # a script's module beside it
        return importer.relative_to(root).parts[0]
    return top if top in IMPORTABLE else None


def _allowed(importer: str, module: str, imported: str) -> bool:
    if imported == importer:
        return True
    if importer == SOURCES_ONLY:
        return False
    if imported == SOURCES_ONLY:
        return module == DATA or module.startswith(DATA + ".")
    return FLOORS[imported] < FLOORS[importer]


def forbidden_imports(root: Path = REPO) -> list[str]:
    """Every import that breaks the floors, as 'file:line: package -> module'."""
    bad = []
    for package in sorted(OURS):
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for line, module in _imported(tree, path):
                imported = _package_of(module, path, root)
                if imported is not None and not _allowed(package, module, imported):
                    bad.append(f"{path.relative_to(root)}:{line}: {package} -> {module}")
    return bad


def test_no_package_imports_one_of_its_floor_or_above():
    assert forbidden_imports() == []


def test_every_top_level_package_has_a_floor():
    """A new top-level package must be given a floor here before the rule covers it."""
    packages = {
        p.name
        for p in REPO.iterdir()
        if p.is_dir()
        and not p.name.startswith(".")
        and not p.name.endswith(".egg-info")
        and p.name not in {"docs", "build", "dist"}
        and any(p.rglob("*.py"))
    }
    assert packages - OURS == set()


def test_the_rule_catches_an_upward_arrow(tmp_path):
    """The checker itself: an upward, a sideways and a data import, in a scratch tree."""
    for package in OURS:
        (tmp_path / package).mkdir()
    (tmp_path / "p4reduce" / "bad.py").write_text("def f():\n    import hostlib.worker\n")
    (tmp_path / "hostlib" / "side.py").write_text("from controlplane.jobs import JobTable\n")
    (tmp_path / "controlplane" / "ok.py").write_text(
        "import p4src.build\nfrom p4reduce import wire\n"
    )
    (tmp_path / "bench" / "suite.py").write_text("")
    (tmp_path / "bench" / "report.py").write_text("import suite\nimport bmv2_tests.harness\n")
    (tmp_path / "mininet" / "demo.py").write_text("import bench.suite\n")
    assert forbidden_imports(tmp_path) == [
        "hostlib/side.py:1: hostlib -> controlplane.jobs.JobTable",
        "mininet/demo.py:1: mininet -> bench.suite",
        "p4reduce/bad.py:2: p4reduce -> hostlib.worker",
    ]
