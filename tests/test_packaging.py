"""p4reduce as a user installs it: a wheel built from the checkout's files, installed into a
fresh venv outside the checkout, runs the controller, the softswitch and a worker.

Why: the editable install of `make install` sees the whole checkout, so a subpackage or a
compiled output left out of the distribution goes unnoticed there (the wheel once held only
the top-level modules, and `p4reduce-ctl up` failed at import once installed). Here the
wheel is built as a user builds it (pip and setuptools, offline: no build isolation), from
a copy of the checkout's files, and also from its sdist; the fresh venv reaches this venv's
dependencies through a .pth file but not the checkout (no PYTHONPATH, the working directory
elsewhere), and a probe run there says where every module came from.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from p4reduce import DISTRIBUTION
from p4reduce.state import tomllib
from hostlib import netns
from p4reduce.job import descriptor_name
from hostlib.torch_autoload import BACKEND
from softswitch_server.helpers import start_cli, stop_cli

REPO = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
BUILD = REPO / "p4src" / "build"
JOB = 7

# run in the fresh venv: where each named module, the compiled program and the installed
# distribution's entry points come from; with torch there, whether `import torch` loaded
# the backend's entry point
PROBE = """
import importlib, importlib.util, json, sys
from importlib import metadata
from p4reduce import target as build
distribution, backend, *names = sys.argv[1:]
dist = metadata.distribution(distribution)
points = {}
for ep in dist.entry_points:
    ep.load()
    points[ep.group + ":" + ep.name] = sys.modules[ep.module].__file__
torch = None
if importlib.util.find_spec("torch") is not None:
    import torch.distributed
    torch = backend in torch.distributed.Backend.backend_list
print(json.dumps({
    "modules": {m: importlib.import_module(m).__file__ for m in names},
    "build": str(build.BUILD_DIR),
    "dist": str(dist.locate_file("")),
    "entry_points": points,
    "torch_registered": torch,
}))
"""


def _tracked_files() -> list[str]:
    """The files a clean checkout of the working tree has: tracked, or new and not ignored."""
    out = subprocess.run(
        # safe.directory: the checkout may belong to another user than the one testing
        ["git", "-c", f"safe.directory={REPO}", "-C", str(REPO), "ls-files", "-z"]
        + ["--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    return [f for f in out.stdout.decode().split("\0") if f and (REPO / f).is_file()]


def _pip(*args: str) -> None:
    """This venv's pip (offline: every dependency is here already)."""
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True, timeout=300)


def _wheel(source: Path, out: Path) -> Path:
    """The wheel pip builds from `source` (a source tree or an sdist), offline."""
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out), str(source))
    (wheel,) = out.glob("*.whl")
    return wheel


def _contents(wheel: Path) -> dict[str, str]:
    """Every file of a wheel and its digest (RECORD, the list of digests, left out)."""
    with zipfile.ZipFile(wheel) as z:
        return {
            name: hashlib.sha256(z.read(name)).hexdigest()
            for name in z.namelist()
            if not name.endswith(".dist-info/RECORD")
        }


@dataclass
class Dists:
    wheel: Path
    sdist: Path
    wheel_from_sdist: Path


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> Dists:
    """The wheel built from a copy of the checkout's files, its sdist, and the sdist's wheel."""
    root = tmp_path_factory.mktemp("dists")
    src = root / "src"
    for name in _tracked_files():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    (root / "sdist").mkdir()
    # the PEP 517 hook any frontend calls (pip builds no sdists)
    hook = f"from setuptools import build_meta; build_meta.build_sdist({str(root / 'sdist')!r})"
    subprocess.run([sys.executable, "-c", hook], cwd=src, check=True, timeout=300)
    (sdist,) = (root / "sdist").glob("*.tar.gz")
    wheel, from_sdist = _wheel(src, root / "wheel"), _wheel(sdist, root / "from-sdist")
    return Dists(wheel, sdist, from_sdist)


@dataclass
class Venv:
    """A fresh venv holding only the wheel; commands run in `work`, outside the checkout."""

    root: Path
    work: Path

    @property
    def env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)

    def run(self, *argv: str, ns: str | None = None, **kw) -> subprocess.CompletedProcess:
        prefix = ["ip", "netns", "exec", ns] if ns else []
        return subprocess.run(
            [*prefix, *argv],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            **kw,
        )

    def ctl(self, config: Path, *args: str, ns: str | None = None) -> dict:
        out = self.run(self.bin("p4reduce-ctl"), "-c", str(config), "--json", *args, ns=ns)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)


def _deps_pth() -> list[str]:
    """A .pth that shows the fresh venv this venv's dependencies as this venv sees them --
    its site directories and their .pth files (protobuf's `google` namespace is one) --
    but not p4reduce's own editable install, whose finder maps to the checkout. Read after
    the fresh venv's own site-packages, so the installed wheel comes first."""
    lines = []
    for sitedir in filter(os.path.isdir, site.getsitepackages()):
        lines.append(sitedir)
        for pth in sorted(Path(sitedir).glob("*.pth")):
            if DISTRIBUTION not in pth.name:
                lines.append(f"import site; site.addpackage({sitedir!r}, {pth.name!r}, None)")
    return lines


@pytest.fixture(scope="module")
def venv(dists, tmp_path_factory) -> Venv:
    root = tmp_path_factory.mktemp("venv")
    assert not root.is_relative_to(REPO), "the venv must be outside the checkout"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    purelib = Path(
        subprocess.run(
            [
                str(root / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (purelib / "p4reduce-test-deps.pth").write_text("".join(f"{line}\n" for line in _deps_pth()))
    _pip(
        "--python",
        str(root / "bin" / "python"),
        "install",
        "--no-deps",
        "--no-index",
        str(dists.wheel),
    )
    work = tmp_path_factory.mktemp("work")
    return Venv(root, work)


def _wheel_packages(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return sorted(
            n.removesuffix("/__init__.py").replace("/", ".")
            for n in z.namelist()
            if n.endswith("/__init__.py")
        )


def test_wheel_holds_every_module_and_every_compiled_output(dists):
    """Exactly the checkout's modules of the packages the entry points name, of the ground
    floor they stand on (p4reduce) and of p4net (the demo and network package mininet/'s
    scripts and bench/ import), and p4c's outputs as p4src/compile.py's manifests list
    them, and hostlib's compiled kernels (built from hostlib/_kernels.c, whose source
    stays out) -- no test code, no bytecode."""
    entry_modules = [
        *PROJECT["scripts"].values(),
        *(v for group in PROJECT["entry-points"].values() for v in group.values()),
    ]
    top = {target.split(":")[0].split(".")[0] for target in entry_modules}
    assert top == {"controlplane", "hostlib", "softswitch"}
    packages = top | {"p4reduce", "p4net"}
    expected = {f for f in _tracked_files() if f.split("/")[0] in packages and f.endswith(".py")}
    expected.add("p4src/build/__init__.py")
    # the compiled extensions (setup.py), as the editable install built them in place
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    expected |= {str(f.relative_to(REPO)) for f in REPO.glob(f"*/*{suffix}")}
    assert "hostlib/_kernels" + suffix in expected
    for manifest in BUILD.rglob("MANIFEST.json"):
        here = manifest.parent.relative_to(REPO)
        expected |= {f"{here / name}" for name in json.loads(manifest.read_text())["outputs"]}
        expected.add(f"{here / manifest.name}")
    files = {n for n in _contents(dists.wheel) if ".dist-info/" not in n}
    assert sorted(expected - files) == [], "missing from the wheel"
    assert sorted(files - expected) == [], "in the wheel but not expected"
    assert {"p4reduce.p4rt", "softswitch.interp", "softswitch.p4rt", "p4src.build"} <= set(
        _wheel_packages(dists.wheel)
    )


def test_sdist_builds_the_same_wheel(dists):
    assert _contents(dists.wheel_from_sdist) == _contents(dists.wheel)


def test_installed_commands_say_the_one_version(venv):
    for command in ("p4reduce-ctl", "p4reduce-softswitch"):
        out = venv.run(venv.bin(command), "--version")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [command, PROJECT["version"]]


def test_the_installed_code_runs_not_the_checkout(venv, dists):
    """Every package, the entry points' modules and the compiled program come from the
    fresh venv; the torch.backends entry point loads (and registers, where torch is)."""
    packages = _wheel_packages(dists.wheel)
    out = venv.run(venv.bin("python"), "-c", PROBE, DISTRIBUTION, BACKEND, *packages)
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout)
    installed = Path(probe["dist"])
    assert installed.is_relative_to(venv.root)
    for where in [*probe["modules"].values(), *probe["entry_points"].values(), probe["build"]]:
        assert Path(where).is_relative_to(installed), where
    assert sorted(probe["entry_points"]) == [
        "console_scripts:p4reduce-ctl",
        "console_scripts:p4reduce-softswitch",
        "torch.backends:p4reduce",
    ]
    assert (Path(probe["build"]) / "p4reduce.json").is_file()
    assert probe["torch_registered"] in (None, True)


def _config(where: Path, grpc_addr: str, ports: list[int]) -> Path:
    path = where / "switch.toml"
    path.write_text(
        "[switch]\n"
        f'grpc_addr = "{grpc_addr}"\n'
        f'mac = "{netns.SWITCH_MAC}"\n'
        f'ip = "{netns.SWITCH_IP}"\n'
        f"ports = {ports}\n"
        f'state_file = "{path.with_suffix(".state.json")}"\n'
    )
    return path


def _up_with_job(
    venv: Venv, where: Path, topo: netns.Topology, grpc_addr: str, ns: str | None
) -> Path:
    """`p4reduce-ctl up` and `job create` for topo's workers (configuration and descriptors
    in `where`); the descriptors' directory."""
    config = _config(where, grpc_addr, [r + 1 for r in range(topo.worker_count)])
    up = venv.ctl(config, "up", ns=ns)
    assert (up["status"], up["jobs"]) == ("up", 0), up
    workers = [
        f"--worker={r}:{r + 1}:{d['worker']['mac']}:{d['worker']['ip']}"
        for r, d in enumerate(topo.descriptors)
    ]
    descriptors = where / "descriptors"
    created = venv.ctl(
        config,
        "job",
        "create",
        f"--job={JOB}",
        "--slots=8",
        *workers,
        f"--descriptors={descriptors}",
        ns=ns,
    )
    assert [d["rank"] for d in created["descriptors"]] == list(range(topo.worker_count))
    assert [j["job"] for j in venv.ctl(config, "job", "list", ns=ns)] == [JOB]
    return descriptors


def test_installed_controller_programs_the_installed_softswitch(venv, tmp_path):
    """No root: a softswitch without ports, which the controller configures all the same."""
    topo = netns.Topology(2)  # only its addresses: no namespace is made
    proc, addr = start_cli(command=[venv.bin("p4reduce-softswitch")], cwd=venv.work, env=venv.env)
    try:
        descriptors = _up_with_job(venv, tmp_path, topo, addr, ns=None)
    finally:
        stopped = stop_cli(proc)
    assert stopped == 0
    assert sorted(p.name for p in descriptors.iterdir()) == [
        f"job{JOB}-rank{r}.json" for r in range(2)
    ]


@pytest.mark.root
def test_one_allreduce_through_the_installed_switch_controller_and_worker(venv, tmp_path):
    """The softswitch on veth ports in its namespace, the controller beside it, one
    `python -m hostlib` worker (a `Worker`'s allreduce) per rank in its own namespace, all
    run as the probe above runs: the exact int32 sum."""
    rng = np.random.default_rng(23)
    inputs = [rng.integers(-(2**20), 2**20, 64 * 12 + 5).astype(np.int32) for _ in range(2)]
    inputs[0][64 * 3 : 64 * 8] = 0  # blocks zero in one rank only
    with netns.Topology(2) as topo:
        ports = [a for r, s in enumerate(topo.switch_if) for a in ("-i", f"{r + 1}@{s}")]
        proc, addr = start_cli(
            *ports,
            command=["ip", "netns", "exec", topo.switch_ns, venv.bin("p4reduce-softswitch")],
            cwd=venv.work,
            env=venv.env,
        )
        workers: list[subprocess.Popen] = []
        try:
            descriptors = _up_with_job(venv, tmp_path, topo, addr, ns=topo.switch_ns)
            for r, x in enumerate(inputs):
                np.save(tmp_path / f"in{r}.npy", x)
                argv = ["ip", "netns", "exec", topo.worker_ns[r], venv.bin("python"), "-m"]
                argv += ["hostlib", f"--descriptor={descriptors / descriptor_name(JOB, r)}"]
                argv += [
                    f"--input={tmp_path / f'in{r}.npy'}",
                    f"--output={tmp_path / f'out{r}.npy'}",
                ]
                workers.append(
                    subprocess.Popen(
                        argv + ["--deadline=30"],
                        cwd=venv.work,
                        env=venv.env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
            results = [w.communicate(timeout=60) for w in workers]
        finally:
            for w in workers:
                if w.poll() is None:
                    w.kill()
                    w.wait()
            stopped = stop_cli(proc)
    assert stopped == 0
    assert [w.returncode for w in workers] == [0, 0], results
    exact = inputs[0].astype(np.int64) + inputs[1]
    for r in range(2):
        out = np.load(tmp_path / f"out{r}.npy")
        assert out.dtype == np.int32 and np.array_equal(out, exact)
