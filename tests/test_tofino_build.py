"""The committed Tofino outputs (p4src/build/tofino/, tofino2/: the production builds;
tofino-test/, tofino2-test/: the test builds, with the drop simulator) belong to the
committed TNA sources, and the controller drives the TNA program unchanged (P4Info parity:
the test builds exactly, the production builds but for the drop simulator's table).

Both checks skip, saying why, where the Tofino outputs have not been committed yet (they
need bf-p4c, docs/tofino.md); where they are present, a disagreement fails. The parity
machinery itself (controlplane/surface.py) is tested on the bmv2 P4Info, so it is known to
find what it is meant to find before it is trusted with the TNA one.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from p4.config.v1 import p4info_pb2

from p4reduce import target as targets
from p4reduce.p4rt import P4InfoIndex, load_p4info
from controlplane.surface import differences, surface

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "p4src" / "build"
TARGETS = ("tofino", "tofino2")
# every committed build: (directory under p4src/build, target, with the drop simulator)
BUILDS = [(t, t, False) for t in TARGETS] + [(f"{t}-test", t, True) for t in TARGETS]
BUILD_IDS = [b[0] for b in BUILDS]
# what the production build leaves out of the P4Info the controller relies on
PRODUCTION_ONLY_DIFFERENCE = "tables.drop_simulator: no table named 'drop_simulator'"
# the builds with the leaf role (p4src/tna/uplink.p4; P4REDUCE_LEAF_ROLE in bridge.p4: every
# build with the winner check, docs/tofino.md "The leaf role on TNA"), and what a build
# without it leaves out
LEAF_ROLE_BUILDS = ("tofino", "tofino2", "tofino2-test")
NO_LEAF_ROLE_DIFFERENCE = "tables.uplink: no table named 'uplink'"
# no TNA build runs a silent job (docs/tofino.md), so none has the spine's table of one
NO_SILENT_SPINE_DIFFERENCE = "tables.silent_spine: no table named 'silent_spine'"
# the builds with silent rounds' data path (p4src/tna/rank_next.p4; P4REDUCE_SILENT_ROUNDS in
# bridge.p4: Tofino 2's production build), the ranks it holds, and the registers it adds
SILENT_BUILDS = ("tofino2",)
SILENT_RANKS = 8
SILENT_REGISTERS = {f"rank_next_{r}" for r in range(SILENT_RANKS)} | {"expected"}


def _compile_module():
    spec = importlib.util.spec_from_file_location("p4src_compile", REPO / "p4src" / "compile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _need_outputs(target: str, build: Path = BUILD) -> Path:
    out = build / target
    if not (out / "MANIFEST.json").exists():
        pytest.skip(
            f"p4src/build/{target}/ has not been compiled yet (needs bf-p4c, "
            f"docs/tofino.md): run `make p4-tofino` where the compiler is built"
        )
    return out


# -- staleness -------------------------------------------------------------------------------


@pytest.mark.parametrize("build,target,drop_simulator", BUILDS, ids=BUILD_IDS)
def test_tofino_outputs_match_sources(build, target, drop_simulator):
    _need_outputs(build)
    problems = _compile_module().check_tofino_manifest(target, drop_simulator=drop_simulator)
    assert not problems, f"p4src/build/{build} is stale -- recompile:\n" + "\n".join(problems)


def test_tofino_manifest_names_every_committed_output():
    compile_mod = _compile_module()
    for build, target, drop_simulator in BUILDS:
        out = BUILD / build
        if (out / "MANIFEST.json").exists():
            manifest = json.loads((out / "MANIFEST.json").read_text())
            assert sorted(manifest["outputs"]) == sorted(compile_mod.TOFINO_OUTPUTS)
            assert manifest["target"] == target and manifest["compiler_version"] != "unknown"
            assert manifest["drop_simulator"] is drop_simulator
            assert (compile_mod.DROP_SIMULATOR_DEFINE in manifest["command"]) is drop_simulator
            on_disk = sorted(p.name for p in out.iterdir() if p.name != "MANIFEST.json")
            assert on_disk == sorted(compile_mod.TOFINO_OUTPUTS), f"{out}: stray files"


def _fake_tofino_build(tmp_path: Path) -> Path:
    """A copy of p4src/ with a Tofino output directory and manifest written the way
    compile_tofino writes them (no compiler: only the manifest logic is under test)."""
    compile_mod = _compile_module()
    src = tmp_path / "p4src"
    shutil.copytree(REPO / "p4src", src, ignore=shutil.ignore_patterns("__pycache__"))
    out = src / "build" / "tofino"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in compile_mod.TOFINO_OUTPUTS:
        (out / name).write_text(f"{name}\n")
    program = src / "tna" / "p4reduce.p4"
    manifest = {
        "sources": {
            compile_mod._rel(p, src): compile_mod.sha256(p) for p in compile_mod.p4_sources(program)
        },
        "outputs": {n: compile_mod.sha256(out / n) for n in compile_mod.TOFINO_OUTPUTS},
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest))
    return src


def test_tofino_manifest_detects_an_edited_shared_body_and_says_recompile(tmp_path):
    compile_mod = _compile_module()
    src = _fake_tofino_build(tmp_path)
    program = src / "tna" / "p4reduce.p4"
    assert compile_mod.check_tofino_manifest("tofino", src / "build", program) == []
    body = src / "common" / "bodies" / "contributor_bitmap.p4"
    body.write_text(body.read_text() + "\n/* edit */\n")
    (src / "build" / "tofino" / "context.json").write_text("{}\n")
    problems = compile_mod.check_tofino_manifest("tofino", src / "build", program)
    assert any("common/bodies/contributor_bitmap.p4 changed" in p for p in problems)
    assert any("output context.json was edited by hand" in p for p in problems)
    assert "make p4-tofino" in problems[-1] and "recompile" in problems[-1]


def test_tofino_manifest_detects_a_new_tna_include(tmp_path):
    compile_mod = _compile_module()
    src = _fake_tofino_build(tmp_path)
    program = src / "tna" / "p4reduce.p4"
    (src / "tna" / "extra.p4").write_text("/* new */\n")
    program.write_text(
        program.read_text().replace(
            '#include "bridge.p4"', '#include "bridge.p4"\n#include "extra.p4"'
        )
    )
    problems = compile_mod.check_tofino_manifest("tofino", src / "build", program)
    assert any("tna/extra.p4 is included but not in the manifest" in p for p in problems)
    assert any("tna/p4reduce.p4 changed" in p for p in problems)


# -- P4Info parity ---------------------------------------------------------------------------

BMV2 = P4InfoIndex.load(targets.DEFAULT_P4INFO)


def test_the_surface_covers_what_the_controller_programs_and_reads():
    s = surface(BMV2)
    assert set(s["tables"]) == {
        "admission",
        "drop_simulator",
        "l2_forward",
        "switch_identity",
        "result_destination",
        "uplink",
        "silent_spine",
    }
    admit = s["tables"]["admission"]["actions"]["P4ReduceIngress.admission.admit"]
    assert admit["params"]["encoding"] == 1 and admit["params"]["bias"] == 32
    assert "wrong_encoding" in s["counters"] and "drops" in s["counters"]
    assert s["registers"]["slot_epoch"]["size"] > 0
    assert all(m["fits"] for m in s["multicast"].values())
    assert differences(s, surface(BMV2)) == []


def _mutated(edit) -> P4InfoIndex:
    info = p4info_pb2.P4Info()
    info.CopyFrom(load_p4info(targets.DEFAULT_P4INFO))
    edit(info)
    return P4InfoIndex.from_proto(info)


def _action(info, short):
    return next(a for a in info.actions if a.preamble.name.endswith("." + short))


def _table(info, short):
    return next(t for t in info.tables if t.preamble.name.endswith("." + short))


@pytest.mark.parametrize(
    "edit,needle",
    [
        (
            lambda i: _action(i, "admit").params[5].__setattr__("bitwidth", 2),
            "admit.params.encoding: reference has 1, other has 2",
        ),
        (
            lambda i: _action(i, "admit").params.pop(),
            "params.round_mode: in reference, not in other",
        ),
        (
            lambda i: _table(i, "admission").match_fields[0].__setattr__("bitwidth", 16),
            "tables.admission.match[0].bits: reference has 9, other has 16",
        ),
        (
            lambda i: (
                _table(i, "admission")
                .match_fields[1]
                .__setattr__("match_type", p4info_pb2.MatchField.TERNARY)
            ),
            "tables.admission.match[1].kind: reference has 'exact', other has 'ternary'",
        ),
        (
            lambda i: _table(i, "l2_forward").match_fields[0].__setattr__("name", "dst"),
            "tables.l2_forward.match[0].name",
        ),
        (
            lambda i: _table(i, "result_destination").__setattr__("size", 16),
            "tables.result_destination.size: other holds 16 entries",
        ),
        (
            lambda i: i.counters.remove(
                next(c for c in i.counters if c.preamble.name.endswith("wrong_encoding"))
            ),
            "counters.wrong_encoding: no counter named 'wrong_encoding'",
        ),
        (
            lambda i: next(
                c for c in i.counters if c.preamble.name.endswith(".aggregated")
            ).__setattr__("size", 32),
            "counters.aggregated.size: reference has 64, other has 32",
        ),
        (
            lambda i: next(
                c for c in i.counters if c.preamble.name.endswith(".drops")
            ).spec.__setattr__("unit", p4info_pb2.CounterSpec.BYTES),
            "counters.drops.unit: reference has 'PACKETS', other has 'BYTES'",
        ),
        (
            lambda i: next(
                r for r in i.registers if r.preamble.name.endswith(".slot_epoch")
            ).__setattr__("size", 512),
            "registers.slot_epoch.size",
        ),
        (
            lambda i: _action(i, "flood").params[0].__setattr__("bitwidth", 3),
            "multicast.flood.group: group 15 does not fit 3 bits",
        ),
        (
            lambda i: _action(i, "set_identity").preamble.__setattr__(
                "name", "P4ReduceIngress.identity.set_id"
            ),
            "P4ReduceIngress.identity.set_identity: in reference, not in other",
        ),
    ],
)
def test_parity_reports_each_kind_of_difference(edit, needle):
    problems = differences(surface(BMV2), surface(_mutated(edit)))
    assert any(needle in p for p in problems), problems


def test_a_pipe_prefix_does_not_count_as_a_difference():
    """A TNA P4Info may name objects "pipe.P4ReduceIngress..."; the controller finds them by
    suffix, so the prefix is not a difference."""

    def prefix(info):
        for t in info.tables:
            t.preamble.name = "pipe." + t.preamble.name
        for a in info.actions:
            a.preamble.name = "pipe." + a.preamble.name

    assert differences(surface(BMV2), surface(_mutated(prefix))) == []


@pytest.mark.parametrize("build,target,drop_simulator", BUILDS, ids=BUILD_IDS)
def test_tna_p4info_gives_the_controller_what_the_bmv2_one_does(build, target, drop_simulator):
    """The test build: everything. The production build: everything but the drop
    simulator's table (its per-job counters stay, never counted), and nothing else. A
    build without the leaf role lacks the uplink table too, and nothing else. No build
    has the table of a silent job's spine."""
    out = _need_outputs(build)
    tna = P4InfoIndex.load(out / "p4reduce.p4info.txtpb")
    problems = differences(surface(BMV2), surface(tna), names=("bmv2", build))
    allowed = [NO_SILENT_SPINE_DIFFERENCE]
    if not drop_simulator:
        allowed.append(PRODUCTION_ONLY_DIFFERENCE)
    if build not in LEAF_ROLE_BUILDS:
        allowed.append(NO_LEAF_ROLE_DIFFERENCE)
    for difference in allowed:
        missing = [p for p in problems if p.startswith(difference)]
        assert missing, f"p4src/build/{build} was expected to lack: {difference}"
        problems = [p for p in problems if p not in missing]
    assert not problems, (
        f"the controller cannot drive p4src/build/{build} unchanged "
        f"(p4src/tna/ and p4src/v1model/ disagree):\n" + "\n".join(problems)
    )


def _by_short_name(index: dict, short: str):
    return next(o for o in index.values() if o.name.rsplit(".", 1)[-1] == short)


@pytest.mark.parametrize("build", LEAF_ROLE_BUILDS)
def test_the_leaf_role_has_v1models_uplink_table_with_its_ids(build):
    """The leaf role's table and actions are v1model's: the actions by name, id and
    parameters, the table by name, key and size, so controlplane/uplink.py writes the same
    entry to either program. (Table ids are each backend's own -- bf-p4c's differ from
    p4c-bm2-ss's for every table, admission's too -- and the controller resolves tables by
    name; action ids agree.)"""
    tna = P4InfoIndex.load(_need_outputs(build) / "p4reduce.p4info.txtpb")
    table, bmv2_table = _by_short_name(tna.tables, "uplink"), _by_short_name(BMV2.tables, "uplink")
    assert table.name == bmv2_table.name and table.match_fields == bmv2_table.match_fields
    assert table.size == bmv2_table.size and not table.is_const
    assert sorted(table.action_scopes) == sorted(bmv2_table.action_scopes)
    for short in ("set_uplink", "no_uplink"):
        action, bmv2_action = (
            _by_short_name(tna.actions, short),
            _by_short_name(BMV2.actions, short),
        )
        assert (action.id, action.name) == (bmv2_action.id, bmv2_action.name), short
        assert action.params == bmv2_action.params, short


def _leaf_and_alone(build: str):
    """A connection that only knows the build's P4Info (never dialled), a leaf's job and
    a one-switch job."""
    from controlplane.connection import SwitchConnection
    from p4reduce.addresses import WorkerAddress
    from p4reduce.job import Job, Uplink

    conn = SwitchConnection("127.0.0.1:1")
    conn.objects = P4InfoIndex.load(_need_outputs(build) / "p4reduce.p4info.txtpb")
    worker = WorkerAddress(0, 1, "02:00:00:00:00:01", "10.0.0.1", 40000)
    alone = Job(
        job=7, job_index=0, slot_base=0, slot_count=4, epoch=1, workers=[worker], encoding="lanes"
    )
    leaf = dataclasses.replace(
        alone, uplink=Uplink(port=9, mac="02:00:00:00:00:09", ip="10.0.9.1", rank=2)
    )
    return conn, leaf, alone


@pytest.mark.parametrize("build", [b for b in BUILD_IDS if b not in LEAF_ROLE_BUILDS])
def test_a_leaf_job_is_refused_on_a_build_without_the_leaf_role(build):
    """A build without the leaf role has no uplink table; the controller refuses a leaf's
    job there, naming the architecture, instead of admitting it as a one-switch job."""
    from controlplane import uplink
    from p4reduce.job import JobError

    conn, leaf, alone = _leaf_and_alone(build)
    with pytest.raises(JobError, match="runs a tofino \\(tna\\) build without the leaf role"):
        uplink.job_entries(conn, leaf)
    assert uplink.job_entries(conn, alone) == []


@pytest.mark.parametrize("build", LEAF_ROLE_BUILDS)
def test_a_leaf_job_is_programmed_on_a_build_with_the_leaf_role(build):
    """A build with the role takes a leaf's job: its uplink entry (the spine's addresses,
    the leaf's rank) and the admission entry for the spine's RESULTs."""
    from controlplane import uplink

    conn, leaf, alone = _leaf_and_alone(build)
    entries = uplink.job_entries(conn, leaf)
    tables = [conn.p4.tables[e.table_id].name for e in entries]
    assert [_short(t) for t in tables] == ["uplink", "admission"]
    assert uplink.job_entries(conn, alone) == []


@pytest.mark.parametrize("build,target,drop_simulator", BUILDS, ids=BUILD_IDS)
def test_every_build_with_the_winner_check_has_the_leaf_role_and_fits(
    build, target, drop_simulator
):
    """The leaf role reads whether a round holds the spine's result from the winner check,
    so it is built exactly where that is (both production builds, Tofino 2's test build) --
    and each such build fits its chip's stages with it (Tofino 1: 12 of 12)."""
    tna = P4InfoIndex.load(_need_outputs(build) / "p4reduce.p4info.txtpb")
    has_role = tna.has_table("uplink")
    assert has_role is ("round_winner" in _registers(build)), build
    assert has_role is (build in LEAF_ROLE_BUILDS)
    summary = json.loads((_need_outputs(build) / "resources.json").read_text())
    assert (
        summary["stages_used"] <= summary["stages_available"] == (12 if target == "tofino" else 20)
    )


def _registers(build: str) -> set[str]:
    tna = P4InfoIndex.load(_need_outputs(build) / "p4reduce.p4info.txtpb")
    return {r.name.rsplit(".", 1)[-1] for r in tna.registers.values()}


@pytest.mark.parametrize("build,target,drop_simulator", BUILDS, ids=BUILD_IDS)
def test_which_build_has_the_winner_check_and_the_drop_simulator(build, target, drop_simulator):
    """Production builds of both chips check the round's winner and have no drop simulator
    (no sequence register); the test builds have the simulator, and on Tofino 1 no winner
    check (docs/tofino.md, "Tofino 1's test build")."""
    registers = _registers(build)
    assert ("ingress_sequence" in registers) is drop_simulator
    assert ("round_winner" in registers) is (target == "tofino2" or not drop_simulator)


def _alu_stages(build: str) -> dict[str, int]:
    """The MAU stage of each register's stateful ALU (short name), from resources.json."""
    summary = json.loads((_need_outputs(build) / "resources.json").read_text())
    return {
        user.rsplit(".", 1)[-1]: stage["stage"]
        for stage in summary["per_stage"]
        for user in stage.get("stateful_alu_users", [])
    }


# the one build that adds its lanes in a lane pass: Tofino 1 with the drop simulator, whose
# verdict before the slot epoch leaves too few stages after the bitmap (docs/tofino.md)
LANE_PASS_BUILD = "tofino-test"


@pytest.mark.parametrize("build,target,drop_simulator", BUILDS, ids=BUILD_IDS)
def test_a_contribution_adds_its_values_in_the_pass_that_records_it(build, target, drop_simulator):
    """The invariant of docs/tofino.md ("Drops and the invariant"): the bitmap step records
    a rank's contribution, and every step that adds what the packet carries -- the next
    key, the fingerprint range, each lane pair -- sits in a later stage of the same pass.
    Both production builds (what a switch runs) and Tofino 2's test build hold it; Tofino
    1's test build adds its lanes in a lane pass, which this test records, so that a build
    that changes either way is noticed."""
    stages = _alu_stages(build)
    bitmap = stages["bitmap"]
    assert stages["slot_epoch"] < bitmap
    for name in ("next_key", "fingerprint_range"):
        assert stages[name] > bitmap, f"{build}: {name} in stage {stages[name]}, bitmap {bitmap}"
    lanes = {name: stage for name, stage in stages.items() if name.startswith("lanes_")}
    before = sorted(name for name, stage in lanes.items() if stage <= bitmap)
    if build == LANE_PASS_BUILD:
        assert before, f"{build}: every lane pair after the bitmap -- update docs/tofino.md"
    else:
        assert not before, f"{build}: lane pairs at or before the bitmap (stage {bitmap}): {before}"


@pytest.mark.parametrize("build,target,drop_simulator", BUILDS, ids=BUILD_IDS)
def test_a_one_pass_build_recirculates_once_per_round(build, target, drop_simulator):
    """The pass count the rate table uses: one recirculated pass per round (the completing
    packet's read-out) for every build but the lane-pass one, whose every contribution
    recirculates too."""
    res = _resources_module()
    summary = json.loads((_need_outputs(build) / "resources.json").read_text())
    for workers in (2, 32):
        expected = 1 + (workers if build == LANE_PASS_BUILD else 0)
        assert res.recirculations_per_round(summary, workers) == expected


@pytest.mark.parametrize("build,target,drop_simulator", BUILDS, ids=BUILD_IDS)
def test_each_build_carries_its_targets_block_size(build, target, drop_simulator):
    """The controller writes a Tofino job's block size from p4reduce/target.py
    (Target.block_sizes) and its workers cut blocks of that many values: it must be what
    the program carries, two values per lane-pair table and register."""
    from p4reduce.target import TARGETS as CONTROLLER_TARGETS

    tna = P4InfoIndex.load(_need_outputs(build) / "p4reduce.p4info.txtpb")
    pairs = [t for t in tna.tables.values() if t.name.rsplit(".", 1)[-1].startswith("pair_")]
    lanes = [r for r in _registers(build) if r.startswith("lanes_")]
    assert len(lanes) == len(pairs)
    assert CONTROLLER_TARGETS[target].block_sizes == (2 * len(pairs),)


def test_surface_is_json():
    """The surface is plain data (a report can be written next to the outputs)."""
    assert json.loads(json.dumps(surface(BMV2))) == copy.deepcopy(surface(BMV2))


# -- the compiler's parser -------------------------------------------------------------------

# the shape of a .bfa parser (abridged from the TNA program's own): the first state chooses
# the harvest pass by ingress port
_BFA = """\
parser ingress:
  start: $init_match
  states:
    $init_match:
      *:
        load: { half : 0..1 }
        next: $entry_point.start
    $entry_point.start:
      match: [ half ]
      0b*******001000100:
        shift: 16
        next: parse_harvest
      0x****:
        shift: 30
        next: parse_ethernet
    parse_harvest:
      *:
        next: end
deparser ingress:
  dictionary: {}
"""


def _resources_module():
    spec = importlib.util.spec_from_file_location(
        "p4src_tofino_resources", REPO / "p4src" / "tofino_resources.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_parser_state_that_chooses_without_a_match_is_found():
    """p4c before p4lang/p4c#5753 emitted selects with no `match:` and a bare `*` per
    transition: every packet took the first one. compile.py refuses an assembler file with
    such a state; the same file with its match line passes."""
    res = _resources_module()
    good = res.parser_states(_BFA)
    assert good == {"ingress": {"states": 3, "choosing": 1, "choosing_without_match": []}}
    assert res.parser_defects(good) == []
    broken = _BFA.replace("      match: [ half ]\n", "").replace("0b*******001000100:", "*:")
    assert res.parser_defects(res.parser_states(broken)) == [
        "parser ingress: state $entry_point.start chooses between transitions without a match"
    ]


@pytest.mark.parametrize("build", BUILD_IDS)
def test_the_committed_parsers_match_on_every_select(build):
    """The committed outputs were compiled by a compiler whose parsers keep their match
    registers: both parsers choose somewhere (harvest port, EtherType, protocol, message
    type), and never without a match."""
    out = _need_outputs(build)
    parser = json.loads((out / "resources.json").read_text()).get("parser")
    assert parser, "resources.json has no parser summary: recompile (make p4-tofino)"
    assert set(parser) == {"ingress", "egress"}
    for name, p in parser.items():
        assert p["choosing"] > 0, (name, p)
        assert p["choosing_without_match"] == [], (name, p)


# -- what else the controller relies on ------------------------------------------------------


def _declared_tables() -> set[str]:
    from controlplane.surface import control_modules

    return {name for module in control_modules().values() for name in module.TABLES}


@pytest.mark.parametrize("target", BUILD_IDS)
def test_every_tna_table_the_controller_does_not_program_is_const(target):
    """The controller writes only the tables its modules declare; every other table of the
    TNA program must be const (its entries are the program's), or the switch would run it
    with whatever a reconcile left there."""
    out = _need_outputs(target)
    tna = P4InfoIndex.load(out / "p4reduce.p4info.txtpb")
    declared = _declared_tables()
    unprogrammed = [
        t.name
        for t in tna.tables.values()
        if not t.is_const and not any(t.name.endswith(f".{d}") or t.name == d for d in declared)
    ]
    assert not unprogrammed, f"{target}: tables no module programs and not const: {unprogrammed}"


def _harvest_ports() -> dict[str, int]:
    """HARVEST_PORT of p4src/tna/bridge.p4 per target, read from the source."""
    import re

    text = (REPO / "p4src" / "tna" / "bridge.p4").read_text()
    found = re.search(
        r"#if __TARGET_TOFINO__ == 2\s+const bit<9> HARVEST_PORT = (\d+);\s+#else\s+"
        r"const bit<9> HARVEST_PORT = (\d+);",
        text,
    )
    assert found, "p4src/tna/bridge.p4 no longer defines HARVEST_PORT per chip"
    return {"tofino2": int(found.group(1)), "tofino": int(found.group(2))}


@pytest.mark.parametrize("target", TARGETS)
def test_the_controller_reserves_the_programs_harvest_port_in_pipe_0(target):
    """The harvest port is the program's recirculation port: the controller keeps it out of
    the operator's ports, and it is in pipe 0, where the jobs' registers are
    (docs/tofino.md, "Pipes")."""
    from p4reduce.target import TARGETS as CONTROLLER_TARGETS

    port = _harvest_ports()[target]
    assert port in CONTROLLER_TARGETS[target].reserved_ports
    assert port >> 7 == 0, f"{target}: HARVEST_PORT {port} is not in pipe 0"


# -- passes per round and the per-worker rate (docs/tofino.md) -----------------------------


def test_the_rate_arithmetic_uses_the_wire_format():
    """The frame the rate table counts is the one a worker sends (p4reduce.wire)."""
    from p4reduce import wire

    res = _resources_module()
    for k in (60, 64):
        assert res.FRAME_BYTES_WITHOUT_VALUES + 4 * k == wire.frame_bytes_with_values(k)


def test_a_lane_before_the_bitmap_means_a_lane_pass_per_contribution():
    """The pass count is read from where the compiler put the ALUs: a lane pair at or
    before the bitmap's stage cannot be chosen by it in the same pass."""
    res = _resources_module()

    def summary(lane_stage: int) -> dict:
        users = {3: ["x.bitmap"], lane_stage: ["x.lanes_0", "x.lanes_1"]}
        return {"per_stage": [{"stage": s, "stateful_alu_users": u} for s, u in users.items()]}

    assert res.lane_pass(summary(0)) and res.recirculations_per_round(summary(0), 8) == 9
    assert not res.lane_pass(summary(4)) and res.recirculations_per_round(summary(4), 8) == 1
    assert res.block_values(summary(4)) == 4


def test_the_documented_rate_table_is_the_committed_builds():
    """docs/tofino.md's per-worker rate table is what `python p4src/tofino_resources.py
    --rates` computes from the committed resources.json of the four builds."""
    res = _resources_module()
    builds = {}
    for build, _target, simulator in BUILDS:
        builds[build] = (
            json.loads((_need_outputs(build) / "resources.json").read_text()),
            simulator,
        )
    table = res.rate_table(
        dict(sorted(builds.items(), key=lambda b: BUILD_IDS.index(b[0]))), [2, 4, 8, 16, 32]
    )
    assert table in (REPO / "docs" / "tofino.md").read_text(), (
        "docs/tofino.md does not hold the rate table of the committed builds:\n" + table
    )


# -- silent rounds on TNA (docs/tofino.md, "Silent rounds on TNA") ---------------------------


def test_the_silent_count_adds_the_minimum_tree_and_the_registers_beyond_the_free_alus():
    """silent_stages_needed on a made-up build: 8 of 12 stages used, the slot epoch in
    stage 2, 5 stateful ALUs free from there on."""
    res = _resources_module()
    users = {1: ["x.a"], 2: ["x.slot_epoch", "x.bitmap"], 3: ["x.b", "x.c", "x.d", "x.e"]}
    summary = {
        "stages_used": 8,
        "stages_available": 12,
        "per_stage": [
            {
                "stage": s,
                "stateful_alus": len(users.get(s, [])),
                "stateful_alu_users": users.get(s, []),
            }
            for s in range(8)
        ],
    }
    # stages 2..7: (4-2) + (4-4) + 4 * 4 = 18 free
    assert res.silent_free_alus(summary) == 18
    assert res.silent_dependent_stages(1) == 1 and res.silent_dependent_stages(8) == 4
    # N = 8: 8 + 3 registers fit the 18 free ALUs; 8 + log2(8) + 1 = 12 stages
    assert res.silent_stages_needed(summary, 8) == 12
    # N = 16: 19 ALUs, one stage more for them; 8 + 5 + 1 = 14
    assert res.silent_stages_needed(summary, 16) == 14
    assert res.silent_rank_limit(summary) == 8
    summary["stages_used"] = 12
    assert res.silent_rank_limit(summary) == 0


@pytest.mark.parametrize("target", TARGETS)
def test_the_controller_refuses_silent_rounds_naming_the_builds_limit(target):
    """The limit the controller's refusal names is the one the committed production
    build's resources give."""
    from p4reduce.job import JobError, resolve_round_mode

    res = _resources_module()
    summary = json.loads((_need_outputs(target) / "resources.json").read_text())
    limit = res.silent_rank_limit(summary)
    assert targets.TARGETS[target].silent_rank_limit == limit
    with pytest.raises(JobError) as refused:
        resolve_round_mode(targets.TARGETS[target], 5, "silent")
    said = f"at most {limit} rank" if limit else "fits no job"
    assert said in str(refused.value) and "Silent rounds on TNA" in str(refused.value)


@pytest.mark.parametrize("build,target,drop_simulator", BUILDS, ids=BUILD_IDS)
def test_the_silent_path_is_in_tofino2s_builds_and_in_no_other(build, target, drop_simulator):
    """docs/tofino.md, "Silent rounds on TNA": Tofino 2's production build runs one
    rank_next register per rank and the expected ranks, each its own stateful ALU, and fits
    its 20 stages; the other builds have none of them. The limit the controller names is the
    ranks the production build holds."""
    res = _resources_module()
    summary = json.loads((_need_outputs(build) / "resources.json").read_text())
    names = set(_alu_stages(build))
    tables = {_short(t["name"]) for t in _context(build)["tables"]}
    silent_tables = {f"rank_next_step_{r}" for r in range(SILENT_RANKS)} | {"expected_step"}
    if build in SILENT_BUILDS:
        assert SILENT_REGISTERS <= names, sorted(SILENT_REGISTERS - names)
        assert silent_tables <= tables, sorted(silent_tables - tables)
        assert res.silent_ranks_built(summary) == SILENT_RANKS
        assert summary["stages_used"] <= summary["stages_available"]
        assert targets.TARGETS[target].silent_rank_limit == SILENT_RANKS
    else:
        assert not {n for n in names if n.startswith("rank_next_") or n == "expected"}
        assert not tables & silent_tables
        assert res.silent_ranks_built(summary) == 0


@pytest.mark.parametrize("build", SILENT_BUILDS)
def test_the_silent_winner_reads_every_ranks_key_in_the_pass_that_records_it(build):
    """A silent round's completing packet takes the minimum of every rank's key and
    compares each with it: every rank_next step sits in a stage before the next key's step
    (which stores the winner) and the expected ranks' step, all in the one pass whose bitmap
    step records the packet -- so a packet lost after the MAU leaves every register as if
    the pass ran, and one lost before it, none."""
    stages = _alu_stages(build)
    keys = [stages[f"rank_next_{r}"] for r in range(SILENT_RANKS)]
    assert max(keys) < stages["next_key"], (keys, stages["next_key"])
    assert max(keys) < stages["expected"], (keys, stages["expected"])
    assert stages["round_winner"] < min(keys)


def test_the_documented_silent_table_is_the_committed_builds():
    """docs/tofino.md's silent-rounds table is what `python p4src/tofino_resources.py
    --silent` computes from the committed production builds."""
    res = _resources_module()
    builds = {t: json.loads((_need_outputs(t) / "resources.json").read_text()) for t in TARGETS}
    table = res.silent_table(builds, [2, 4, 8, 16, 32])
    assert table in (REPO / "docs" / "tofino.md").read_text(), (
        "docs/tofino.md does not hold the silent-rounds table of the committed builds:\n" + table
    )


@pytest.mark.parametrize("build,target,drop_simulator", BUILDS, ids=BUILD_IDS)
def test_the_leaf_role_adds_no_register(build, target, drop_simulator):
    """docs/tofino.md, "The leaf role on TNA": the role reads whether a round holds the
    spine's result from round_winner and the bitmap, so a build with it has the stateful
    ALUs of one without: the lane pairs, the five protocol registers (four without the
    winner check) and, in a test build, the drop simulator's sequence."""
    names = set(_alu_stages(build))
    protocol = {"slot_epoch", "bitmap", "next_key", "fingerprint_range", "round_winner"}
    if build == LANE_PASS_BUILD:
        protocol.discard("round_winner")
    expected = protocol | ({"ingress_sequence"} if drop_simulator else set())
    if build in SILENT_BUILDS:
        expected |= SILENT_REGISTERS
    assert {n for n in names if not n.startswith("lanes_")} == expected, build


# -- the leaf role's relay and lost state, read from the compiled program --------------------
# (docs/tofino.md, "The leaf role on TNA"; context.json holds every table's const entries and
# every action's primitives as bf-p4c placed them)


def _context(build: str) -> dict:
    return json.loads((_need_outputs(build) / "context.json").read_text())


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _entries(context: dict, table: str) -> list[tuple[dict[str, int], str, dict[str, int]]]:
    """A const table's entries: (key field -> value (0 where the mask ignores it), the
    action's short name, its parameters)."""
    found = next(
        t for t in context["tables"] if _short(t["name"]) == table and t["table_type"] == "match"
    )
    actions = {a["handle"]: _short(a["name"]) for a in found["actions"]}
    rows = []
    for entry in found["static_entries"]:
        key = {
            f["field_name"]: int(f["value"], 16) if int(f.get("mask", "0x1"), 16) else None
            for f in entry["match_key_fields_values"]
        }
        params = {
            p["parameter_name"]: int(p["value"], 16) for p in entry["action_parameters_values"]
        }
        rows.append((key, actions[entry["action_handle"]], params))
    return rows


def _writes(context: dict, action: str) -> list[dict[tuple[str, str], str]]:
    """Each placement of an action (one per table it runs from): destination field ->
    (operation, its sources)."""
    placed = []
    for table in context["tables"]:
        for a in table.get("actions", []):
            if _short(a["name"]) != action or not a.get("primitives"):
                continue
            placed.append(
                {
                    p["dst"]["name"]: (
                        p.get("operation"),
                        tuple(p[s]["name"] for s in ("src1", "src2") if s in p),
                    )
                    for p in a["primitives"]
                    if "dst" in p
                }
            )
    return placed


def _first_match(rows, key: dict[str, int]) -> tuple[str, dict[str, int]]:
    """The action a packet with these key values gets (const entries match in order)."""
    for fields, action, params in rows:
        if all(v is None or key.get(f) == v for f, v in fields.items()):
            return action, params
    raise AssertionError(f"no entry matches {key}")


@pytest.mark.parametrize("build", BUILD_IDS)
def test_a_leafs_state_lost_marks_the_spines_slot_and_reaches_every_leaf(build):
    """Every build can be a spine: a contribution flagged STATE_LOST (a restarted leaf's)
    takes the slot-epoch step that marks the slot lost whatever it held, and its answer is
    multicast to the job's group (every leaf), flagged STATE_LOST; any other packet on a
    lost slot is answered to its sender alone."""
    from p4reduce.wire import Flag

    context = _context(build)
    epoch = _entries(context, "slot_epoch_step")
    for lost in (0, 1):
        for continued in (0, 1):
            key = {"downlink": 0, "incarnation_lost": 0, "state_lost": lost}
            action, _ = _first_match(epoch, {**key, "continued": continued})
            assert (action == "take_lost_epoch") is bool(lost), (build, key, action)
    (marking,) = _writes(context, "take_lost_epoch")
    assert any("slot_epoch" in dst for dst in marking), marking

    reply = _entries(context, "lost_reply")
    key = {"has_uplink": 0, "announce": 0, "continued": 1}
    assert _first_match(reply, {**key, "state_lost": 1})[0] == "lost_to_job"
    assert _first_match(reply, {**key, "state_lost": 0})[0] == "lost_to_sender"
    (to_job,) = _writes(context, "lost_to_job")
    assert to_job["ig_intr_md_for_tm.mcast_grp_a"] == ("set", ("meta.mcast_grp",))
    # with silent rounds built, a reply keeps FLAG_SILENT (bit 6) and writes bits 5..0
    width = 6 if build in SILENT_BUILDS else 7
    assert to_job["hdr.p4r.flags"] == ("set", (f"{width}w{Flag.STATE_LOST:#x}",))
    (to_sender,) = _writes(context, "lost_to_sender")
    assert "ig_intr_md_for_tm.mcast_grp_a" not in to_sender
    assert to_sender["ig_intr_md_for_tm.ucast_egress_port"][1] == ("ig_intr_md.ingress_port",)


@pytest.mark.parametrize("build", BUILD_IDS)
def test_an_incarnation_admitted_lost_marks_every_slot_it_reaches_lost(build):
    """The controller admits a job whose state the switch lost with admit_lost (the same
    parameters as admit): it alone sets incarnation_lost, and any contribution of such a
    job, whatever its flags, takes the slot-epoch step that marks the slot lost, so it is
    answered STATE_LOST (bmv2_tests/test_incarnations.py runs the same on v1model)."""
    context = _context(build)
    (lost,) = _writes(context, "admit_lost")
    assert lost["meta.incarnation_lost"] == ("set", ("1w1",))
    (admit,) = _writes(context, "admit")
    assert "meta.incarnation_lost" not in admit
    assert {k: v for k, v in lost.items() if k != "meta.incarnation_lost"} == admit
    epoch = _entries(context, "slot_epoch_step")
    for flagged in (0, 1):
        for continued in (0, 1):
            key = {"downlink": 0, "incarnation_lost": 1, "state_lost": flagged}
            action, _ = _first_match(epoch, {**key, "continued": continued})
            assert action == "take_lost_epoch", (build, key, continued, action)


@pytest.mark.parametrize("build", LEAF_ROLE_BUILDS)
def test_a_tna_leafs_status_goes_to_every_rank_a_switchs_own_to_the_sender(build):
    """v1model's leaf sends its STATUS (a duplicate of a round incomplete there) to every
    one of its ranks (bmv2_tests/test_leaf_role.py); on TNA the const table status_reply
    picks that for a job with an uplink and the reply to the sender for any other."""
    context = _context(build)
    reply = _entries(context, "status_reply")
    assert _first_match(reply, {"has_uplink": 1})[0] == "status_to_ranks"
    assert _first_match(reply, {"has_uplink": 0})[0] == "status_to_sender"
    (to_ranks,) = _writes(context, "status_to_ranks")
    assert to_ranks["ig_intr_md_for_tm.mcast_grp_a"] == ("set", ("meta.mcast_grp",))
    assert "ig_intr_md_for_tm.ucast_egress_port" not in to_ranks
    assert to_ranks["hdr.round_status.contributors"] == ("set", ("meta.bitmap_before",))
    (to_sender,) = _writes(context, "status_to_sender")
    assert "ig_intr_md_for_tm.mcast_grp_a" not in to_sender


@pytest.mark.parametrize("build", LEAF_ROLE_BUILDS)
def test_a_tna_leaf_sends_a_state_probe_up_whatever_the_round_holds(build):
    """A rank's state probe (FLAG_PROBE, a bit of a worker's flags) into a complete round
    is marked to go up from its cached RESULT's first pass (up_if_cached), as a
    retransmission into a round that waits for the spine is: the gateway bf-p4c placed
    before the action that sets up_if_cached reads the flag beside the winner check's
    bit, for a job with an uplink."""
    from p4reduce.wire import Flag

    context = _context(build)
    setting = {
        t["name"]
        for t in context["tables"]
        for a in t.get("actions", [])
        for prim in a.get("primitives", [])
        if prim.get("dst", {}).get("name") == "meta.up_if_cached"
        and prim.get("src1", {}).get("name") == "1w1"
    }
    bit = int(Flag.PROBE).bit_length() - 1
    conditions = [
        t["condition"]
        for t in context["tables"]
        if t.get("table_type") == "condition" and t.get("attached_to") in setting
    ]
    assert conditions, (build, setting)
    for condition in conditions:
        assert f"hdr.p4r.flags[{bit}:{bit}] == 1" in condition, (build, condition)
        assert "meta.joining_bit != 0" in condition and "meta.has_uplink == 1" in condition


@pytest.mark.parametrize("build", LEAF_ROLE_BUILDS)
def test_the_spines_state_lost_marks_the_tna_leafs_slot_lost(build):
    """A leaf's slot-epoch step for what comes down from the spine: its STATE_LOST marks
    the slot lost as it passes (v1model's leaf marks the slot and the job), so a rank that
    missed its copy meets the lost slot on its next packet there; its RESULT or STATUS
    leaves the epoch alone."""
    epoch = _entries(_context(build), "slot_epoch_step")
    for lost in (0, 1):
        for continued in (0, 1):
            for restored_lost in (0, 1):  # a lost incarnation's downlink: the same
                key = {"downlink": 1, "incarnation_lost": restored_lost, "state_lost": lost}
                action, _ = _first_match(epoch, {**key, "continued": continued})
                assert action == ("take_lost_epoch" if lost else "same_verdict"), (build, key)


@pytest.mark.parametrize("build", LEAF_ROLE_BUILDS)
def test_a_tna_leaf_relays_the_spines_status_and_sends_its_lost_state_up(build):
    """What v1model's leaf does on each level (bmv2_tests/test_leaf_role.py): the spine's
    STATUS goes to every rank of the leaf flagged RELAYED; a packet on a slot the leaf lost
    goes up by the uplink as the leaf's contribution flagged STATE_LOST (its rank in the
    spine's job, FLAG_CONTINUED as it came), ANNOUNCE or DATA by what it carries."""
    from p4reduce.wire import Flag, MsgType

    context = _context(build)
    relays = [
        w
        for w in _writes(context, "down_at_once")
        if w.get("hdr.p4r.flags") == ("or", ("hdr.p4r.flags", f"7w{Flag.RELAYED:#x}"))
    ]
    assert len(relays) == 1, _writes(context, "down_at_once")
    assert relays[0]["ig_intr_md_for_tm.mcast_grp_a"] == ("set", ("meta.mcast_grp",))
    assert relays[0]["meta.to_worker"] == ("set", ("1w1",))

    reply = _entries(context, "lost_reply")
    for announce, msg_type in ((1, MsgType.ANNOUNCE), (0, MsgType.DATA)):
        for continued in (0, 1):
            key = {"has_uplink": 1, "announce": announce, "continued": continued, "state_lost": 0}
            action, params = _first_match(reply, key)
            assert action == "lost_up", key
            assert params["msg_type"] == msg_type
            assert params["flags"] == Flag.STATE_LOST | (Flag.CONTINUED if continued else 0)
    (up,) = _writes(context, "lost_up")
    assert up["hdr.p4r.rank"] == ("set", ("meta.uplink_rank",))
    assert up["hdr.ethernet.dst_addr"] == ("set", ("meta.uplink_mac",))
    # the first pass holds the uplink's port and IPv4 xored with the packet's (FromUplink)
    assert up["ig_intr_md_for_tm.ucast_egress_port"] == (
        "xor",
        ("meta.uplink_port", "ig_intr_md.ingress_port"),
    )
    assert up["hdr.ipv4.dst_addr"] == ("xor", ("meta.uplink_ip", "hdr.ipv4.src_addr"))
    assert "meta.to_worker" not in up
