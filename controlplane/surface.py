"""The controller's P4Info surface: every P4 object the controller relies on, by the name it
uses, with the shape it assumes -- so two pipelines can be checked to be drivable by the
same controller (the v1model program for bmv2/softswitch and the TNA program for Tofino).

Why this exists: the controller resolves names ("admission", "admit", "slot_epoch") in
whatever P4Info the switch runs and encodes values to the widths it finds there; a TNA
P4Info whose `admit` lost a parameter, whose `ingress_port` is 16 bits wide or whose
per-job counters are smaller would still load, and fail (or worse, be programmed wrongly)
only on a Tofino switch, which these machines do not have. `surface()` describes what the
controller uses, derived from the controller's own declarations, never from a copied list:

* tables: every table a control module declares (its `TABLES`; the leaf role's `uplink`
  too, which both programs have), with its match fields
  (name, match kind, bit width), its actions (name, parameters and their widths, scope),
  whether it is const, and its size (the other pipeline's may be larger, not smaller);
* counters: every counter a control module declares (`JOB_COUNTERS`, `SWITCH_COUNTERS`),
  with unit and size (the per-job ones are indexed by job index, `drops` by reason);
* registers: the ones the controller reads the pool size from (`PoolSizes`);
* multicast: the parameters that carry multicast group ids (a job's group, the flood
  group) and whether the largest group id the controller writes fits them; replicas are
  (port, instance = rank), standard P4Runtime PRE entries on both targets.

`differences(reference, other)` lists every disagreement as a readable line naming the
object; an empty list means the controller drives both pipelines unchanged.

Object names are compared without the pipeline instance prefix a TNA P4Info may carry
("pipe.P4ReduceIngress.admission.admission"): the controller finds objects by a suffix of
their name, so the prefix does not change what it reaches.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any

from p4.config.v1.p4info_pb2 import CounterSpec

from p4reduce.p4rt import P4InfoError, P4InfoIndex
from p4reduce.p4rt.p4info import ActionScope, MatchType

# the TNA Pipeline instance name of p4src/tna/p4reduce.p4 (`... ) pipe;`)
PIPE_PREFIXES = ("pipe.",)
# PoolSizes reads the pool size from this register (controlplane/jobs.py)
POOL_REGISTERS = ("slot_epoch",)
# (table, action, parameter) that carry a multicast group id the controller writes
MULTICAST_PARAMS = (
    ("admission", "admit", "mcast_grp"),
    ("admission", "admit_lost", "mcast_grp"),
    ("l2_forward", "flood", "group"),
)


def control_modules() -> dict[str, ModuleType]:
    """Every controlplane module that programs or reads a P4 control (has SECTION)."""
    import controlplane

    found = {}
    for info in pkgutil.iter_modules(controlplane.__path__):
        module = importlib.import_module(f"controlplane.{info.name}")
        if hasattr(module, "SECTION"):
            found[info.name] = module
    return found


def _plain(name: str) -> str:
    for prefix in PIPE_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _kind(match_type: int) -> str:
    return MatchType.Name(match_type).lower()


def _scope(scope: int) -> str:
    return ActionScope.Name(scope).lower()


def _table(p4: P4InfoIndex, name: str) -> dict[str, Any]:
    t = p4.table(name)
    actions = {}
    for action_id, scope in t.action_scopes.items():
        a = p4.actions[action_id]
        actions[_plain(a.name)] = {
            "scope": _scope(scope),
            "params": {p.name: p.bitwidth for p in a.params},
        }
    return {
        "name": _plain(t.name),
        "match": [
            {"name": mf.name, "kind": _kind(mf.match_type), "bits": mf.bitwidth}
            for mf in t.match_fields
        ],
        "actions": actions,
        "const": t.is_const,
        # a keyless table holds only its default action: its size means nothing
        "size": t.size if t.match_fields else None,
    }


def surface(p4: P4InfoIndex, modules: dict[str, ModuleType] | None = None) -> dict[str, Any]:
    """What the controller relies on in pipeline `p4`, as plain data (JSON-able).

    An object the controller uses but `p4` lacks (or names ambiguously) is recorded as
    {"missing": reason}, so differences() reports it instead of stopping at the first."""
    from .replication import JOB_GROUP_BASE

    modules = control_modules() if modules is None else modules
    out: dict[str, Any] = {"tables": {}, "counters": {}, "registers": {}, "multicast": {}}

    def record(section: str, key: str, build) -> None:
        try:
            out[section][key] = build()
        except P4InfoError as exc:
            out[section][key] = {"missing": str(exc)}

    for module in modules.values():
        for name in module.TABLES:
            record("tables", name, lambda name=name: _table(p4, name))
        for name in module.JOB_COUNTERS + module.SWITCH_COUNTERS:
            record(
                "counters",
                name,
                lambda name=name: (
                    lambda c: {
                        "name": _plain(c.name),
                        "unit": CounterSpec.Unit.Name(c.unit),
                        "size": c.size,
                    }
                )(p4.counter(name)),
            )
    for name in POOL_REGISTERS:
        record(
            "registers",
            name,
            lambda name=name: (
                lambda r: {"name": _plain(r.name), "bits": r.bitwidth, "size": r.size}
            )(p4.register(name)),
        )

    try:
        from .jobs import PoolSizes

        max_jobs = PoolSizes.of(p4).max_jobs
    except P4InfoError:
        max_jobs = None
    for table, action, param in MULTICAST_PARAMS:

        def build(table=table, action=action, param=param):
            t = p4.table(table)
            a = p4.action(action)
            if a.id not in t.action_scopes:
                raise P4InfoError(f"action {action} is not an action of table {table}")
            bits = a.param_named(param).bitwidth
            # flood groups are 1..15 (config.py); job groups JOB_GROUP_BASE + job index
            largest = (
                (JOB_GROUP_BASE + max_jobs - 1)
                if (max_jobs and param == "mcast_grp")
                else JOB_GROUP_BASE - 1
            )
            return {"bits": bits, "largest_group": largest, "fits": largest < 1 << bits}

        record("multicast", f"{action}.{param}", build)
    return out


def differences(
    reference: dict[str, Any],
    other: dict[str, Any],
    names: tuple[str, str] = ("reference", "other"),
) -> list[str]:
    """Every way `other` differs from `reference` (both from surface()), one line each."""
    problems: list[str] = []
    ref_name, other_name = names

    def walk(path: str, a: Any, b: Any) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            if "missing" in b and "missing" not in a:
                problems.append(f"{path}: {b['missing']} ({other_name})")
                return
            if "missing" in a and "missing" not in b:
                problems.append(f"{path}: {a['missing']} ({ref_name})")
                return
            for key in sorted(set(a) | set(b), key=str):
                if key not in b:
                    problems.append(f"{path}.{key}: in {ref_name}, not in {other_name}")
                elif key not in a:
                    problems.append(f"{path}.{key}: in {other_name}, not in {ref_name}")
                else:
                    walk(f"{path}.{key}", a[key], b[key])
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(f"{path}[{i}]", x, y)
        elif path.startswith("tables.") and path.endswith(".size") and None not in (a, b):
            if b < a:  # a larger table serves the controller as well
                problems.append(f"{path}: {other_name} holds {b} entries, {ref_name} {a}")
        elif a != b:
            problems.append(f"{path}: {ref_name} has {a!r}, {other_name} has {b!r}")

    for section in ("tables", "counters", "registers", "multicast"):
        walk(section, reference.get(section, {}), other.get(section, {}))
    for key, m in other.get("multicast", {}).items():
        if isinstance(m, dict) and m.get("fits") is False:
            problems.append(
                f"multicast.{key}: group {m['largest_group']} does not fit "
                f"{m['bits']} bits ({other_name})"
            )
    return problems
