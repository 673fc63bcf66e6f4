"""One P4 control <-> one controller module <-> one docs/protocol.md section, checked.

A table or counter belongs to the control instance its P4Info name says
("P4ReduceIngress.admission.slot_out_of_range" -> admission); the objects declared by the
pipeline's own top-level controls ("P4ReduceIngress.drops") belong to controlplane/pipeline.py.
Each controller module that programs or reads a control declares, by name, the tables and
counters of that control (TABLES, JOB_COUNTERS, SWITCH_COUNTERS) and its protocol.md section
(SECTION). These tests hold the three together: a table or counter added to the P4 without
its module and its documentation, a module named unlike its control, or a declaration left
behind by a removed counter fails here. No switch: the committed P4Info is read.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from controlplane import pipeline, stats
from p4reduce.target import DEFAULT_P4INFO
from controlplane.jobs import PoolSizes
from p4reduce.p4rt import P4InfoIndex
from controlplane.surface import control_modules

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


MODULES = control_modules()
P4 = P4InfoIndex.load(DEFAULT_P4INFO)


def control_of(p4_name: str) -> str:
    """The control instance a P4Info object is declared in; the top-level controls
    (P4ReduceIngress, P4ReduceEgress) are the pipeline's."""
    parts = p4_name.split(".")
    return parts[-2] if len(parts) > 2 else "pipeline"


def owns(module_name: str, control: str) -> bool:
    """A module owns the control of its name, and that control's egress half
    (DropSimulator's DropSimulatorEgress, instance drop_simulator_egress)."""
    return control in (module_name, f"{module_name}_egress")


def declared(module: ModuleType, kind: str) -> tuple[str, ...]:
    if kind == "table":
        return module.TABLES
    return module.JOB_COUNTERS + module.SWITCH_COUNTERS


P4_OBJECTS = [("table", t.name) for t in P4.tables.values()] + [
    ("counter", c.name) for c in P4.counters.values()
]


def test_the_modules_are_found():
    assert {
        "admission",
        "drop_simulator",
        "forwarding",
        "identity",
        "pipeline",
        "result",
        "result_destination",
    } <= set(MODULES)


@pytest.mark.parametrize("kind,p4_name", P4_OBJECTS, ids=[n for _, n in P4_OBJECTS])
def test_each_table_and_counter_belongs_to_exactly_one_module_of_its_control(kind, p4_name):
    short = p4_name.rsplit(".", 1)[-1]
    owners = [name for name, m in MODULES.items() if short in declared(m, kind)]
    assert len(owners) == 1, f"{kind} {p4_name} is declared by {owners or 'no module'}"
    control = control_of(p4_name)
    assert owns(owners[0], control), (
        f"{kind} {p4_name} is in control {control} but declared by controlplane/{owners[0]}.py"
    )


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_every_declared_name_is_in_the_p4info_of_the_modules_control(module_name):
    module = MODULES[module_name]
    for kind in ("table", "counter"):
        for short in declared(module, kind):
            matches = [n for k, n in P4_OBJECTS if k == kind and n.rsplit(".", 1)[-1] == short]
            assert len(matches) == 1, (
                f"controlplane/{module_name}.py declares {kind} {short}, the P4Info has {matches}"
            )
            assert owns(module_name, control_of(matches[0]))


def test_per_job_and_switch_wide_counters_are_sized_as_declared():
    """JOB_COUNTERS have one index per job (PoolSizes.max_jobs), switch-wide ones one, and
    drops one per reason; stats reads them that way."""
    max_jobs = PoolSizes.of(P4).max_jobs
    assert max_jobs > 1
    for name in stats.JOB_COUNTERS:
        assert P4.counter(name).size == max_jobs, name
    for name in stats.SWITCH_COUNTERS:
        assert P4.counter(name).size == 1, name
    (drops,) = pipeline.SWITCH_COUNTERS
    assert P4.counter(drops).size == len(pipeline.DROP_REASONS)
    every = [n for m in MODULES.values() for n in m.JOB_COUNTERS + m.SWITCH_COUNTERS]
    assert sorted(every) == sorted(
        stats.JOB_COUNTERS + stats.SWITCH_COUNTERS + pipeline.SWITCH_COUNTERS
    )


def sections(text: str) -> dict[str, str]:
    """heading text -> its body up to the next heading of the same or a higher level."""
    heads = [
        (m.start(), len(m.group(1)), m.group(2).strip())
        for m in re.finditer(r"^(#{2,4}) (.+)$", text, re.MULTILINE)
    ]
    out = {}
    for i, (start, level, title) in enumerate(heads):
        end = next((s for s, lv, _ in heads[i + 1 :] if lv <= level), len(text))
        out[title] = text[start:end]
    return out


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_every_module_has_its_protocol_section_naming_its_tables_and_counters(module_name):
    module = MODULES[module_name]
    body = sections(PROTOCOL_MD.read_text()).get(module.SECTION)
    assert body is not None, (
        f"controlplane/{module_name}.py: no section {module.SECTION!r} in docs/protocol.md"
    )
    for name in module.TABLES + module.JOB_COUNTERS + module.SWITCH_COUNTERS:
        assert f"`{name}`" in body, (
            f"docs/protocol.md {module.SECTION!r} does not "
            f"mention `{name}` (controlplane/{module_name}.py)"
        )
