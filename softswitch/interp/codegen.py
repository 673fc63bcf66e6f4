"""Compile a bmv2 JSON (v1model / simple_switch) into one generated Python module.

The compiler entry: it runs the generators in order over one shared ``Gen`` and turns the
source into functions.  Everything is decided here, once: field indices are constants in
the source, struct formats are precompiled, masks are folded.  Anything whose exact
simple_switch behaviour we do not implement raises UnsupportedConstruct naming the
construct and where it is.

Module map (each a set of generators over ``gen.Gen``):

* ``gen``         shared compile state, field-writing helpers, run-time helpers
* ``primitives``  the primitive dispatch table (and the refused primitives)
* ``actions``     actions -> ``A<id>``, with the fields-to-locals optimisation
* ``calc``        calculations (hash / checksum inputs) -> ``CALC<n>``
* ``parse``       parse states -> ``S<id>``
* ``deparser``    checksums and deparser -> ``VERIFY`` and ``DEPARSE``
* ``controls``    ingress / egress nodes -> ``N<k>``, tables, const entries

Per-packet state handed to generated functions:
  F  list[int]  every field of every header instance (layout.py gives the indices)
  V  list[int]  validity per header instance (metadata always 1)
  X  list       context: exit flag, packet-length register, ingress length, payload bytes,
                then one 'next index' per header stack (see expr.X_*)
  P  tuple      action data of the running action
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from ..bmv2_json import document
from ..errors import PipelineError, UnsupportedConstruct
from .actions import emit_actions
from .controls import Controls
from .deparser import emit_checksums, emit_deparser
from .gen import CORE_ERRORS, DROP_PORT, AssertFailure, Gen
from .layout import Layout
from .parse import emit_parser
from .primitives import REFUSED as REFUSED_PRIMITIVES
from .tables import Table

__all__ = [
    "AssertFailure",
    "CORE_ERRORS",
    "Compiled",
    "Program",
    "program_of",
    "DROP_PORT",
    "REFUSED_PRIMITIVES",
]


@dataclass
class Compiled:
    """Result of compiling one JSON: generated functions plus runtime objects."""

    layout: Layout
    source: str
    ns: dict[str, Any]
    parser: Callable[..., Any] | None
    ingress: Callable[..., Any] | None
    egress: Callable[..., Any] | None
    deparse: Callable[..., bytes]
    verify: Callable[..., int]
    tables: dict[str, Table]
    registers: dict[str, list[int]]
    register_widths: dict[str, int]
    counters: dict[str, tuple[list[int], list[int]]]
    errors: dict[str, int]
    n_stacks: int
    idx: dict[str, int | None] = field(default_factory=dict)
    widths: dict[str, int] = field(default_factory=dict)
    with_queueing: bool = False

    # indices of the fields the generated program mentions (reads or writes), one by one
    # or in a slice. A field outside it (a timestamp, queueing metadata the program never
    # reads) is unobservable, so the packet walk need not fill it in.
    mentioned: frozenset[int] = frozenset()


_FIELD = re.compile(r"\bF\[(\d+)\]")
_SLICE = re.compile(r"\bF\[(\d+):(\d+)\]")


def _mentioned_fields(source: str) -> frozenset[int]:
    """The field indices `source` mentions, one by one or in a slice."""
    out = {int(k) for k in _FIELD.findall(source)}
    for a, b in _SLICE.findall(source):
        out.update(range(int(a), int(b)))
    return frozenset(out)


class Program:
    """One JSON compiled: the generated module's code and everything about it that no
    packet changes. Each `instantiate` makes a pipeline of it with state of its own
    (registers, counters, tables, caches: `Gen.state`, `Controls.new_tables`) -- so a
    switch that loads the same program again, as every fresh pipeline a test or a
    controller pushes does, pays for the generation once (`program_of`)."""

    def __init__(self, j: dict[str, Any], *, trace: bool = False) -> None:
        g = self.g = Gen(j, trace=trace)
        emit_actions(g)
        update_lines = emit_checksums(g)
        init = emit_parser(g)
        emit_deparser(g, update_lines)
        self.controls = controls = Controls(g)
        firsts = controls.emit()
        self.source = g.src.text()
        try:
            self.code = compile(self.source, "<p4-bmv2-json>", "exec")
        except SyntaxError as exc:  # a bug in this compiler, never user input
            raise PipelineError(f"internal code generation error: {exc}") from exc
        for name in (p["name"] for p in g.j.get("pipelines", [])):
            if name not in ("ingress", "egress"):
                raise UnsupportedConstruct(f'pipeline "{name}"', "pipelines")
        self.init = init
        self.firsts = firsts
        self.mentioned = _mentioned_fields(self.source)
        self.instantiate()  # the first pipeline checks what only a running module can

    def instantiate(self) -> Compiled:
        """A new pipeline of this program: the module executed into a namespace of its
        own, with new state; nothing is shared with another pipeline but immutable parts."""
        g = self.g
        ns = dict(g.env)  # what no packet changes; the state is made anew below
        for var, factory in g.state_factories.items():
            ns[var] = factory()
        tables = self.controls.new_tables(ns)
        exec(self.code, ns)  # noqa: S102 - our own generated source
        self.controls.finish(ns)
        ing, egr = (
            ns[f] if (f := self.firsts.get(name)) not in (None, "None") else None
            for name in ("ingress", "egress")
        )
        q = [
            g.std[f"q_{n}"] for n in ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")
        ]
        widths = {k: g.L.widths[v] for k, v in g.std.items() if v is not None}
        return Compiled(
            layout=g.L,
            source=self.source,
            ns=ns,
            parser=ns[self.init] if self.init else None,
            ingress=ing,
            egress=egr,
            deparse=ns["DEPARSE"],
            verify=ns["VERIFY"],
            tables=tables,
            registers={name: ns[var] for name, (var, _, _) in g.reg_vars.items()},
            register_widths=g.register_widths,
            counters={name: (ns[b], ns[p]) for name, (b, p, _) in g.ctr_vars.items()},
            errors=g.errors,
            n_stacks=len(g.L.stacks),
            idx=dict(g.std),
            widths=widths,
            with_queueing=all(x is not None for x in q),
            mentioned=self.mentioned,
        )


@lru_cache(maxsize=4)
def program_of(bmv2_json: bytes, trace: bool = False) -> Program:
    """The program of a JSON's bytes (the compiler's entry; the document is
    bmv2_json.document's, shared with the P4Info binding), remembered: generating
    p4reduce's takes over a second, and a switch loads the same bytes again for every
    fresh pipeline. Only a JSON that compiled is remembered; one that failed fails again,
    with the same error, on its next load."""
    try:
        j = document(bmv2_json)
    except ValueError as exc:  # UnicodeDecodeError and json.JSONDecodeError are ValueErrors
        raise PipelineError(f"bmv2 JSON does not parse: {exc}") from exc
    return Program(j, trace=trace)
