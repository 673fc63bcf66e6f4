"""bmv2 actions -> one generated function each, ``A<id>(F, V, X, P)``.

The body is the action's primitives in order.  Two shapes:

* straight-line actions (the common case, p4reduce's 64-lane ``add_data`` among them) run
  on local variables: each field is loaded once and written back once (``F[17]`` costs a
  subscript per use, a local a LOAD_FAST); registers, counters and calculations are bound
  as default arguments for the same reason;
* actions with p4c's ``_jump`` / ``_jump_if_zero`` (an ``if`` inside an action) become a
  program-counter loop over their primitives.
"""

from __future__ import annotations

import re
from typing import Callable

from .cse import hoist_common
from .gen import Gen, ident
from .primitives import emit_primitive

_FIELD_RE = re.compile(r"\bF\[(\d+)\]")
_FIELD_WRITE_RE = re.compile(r"^\s*F\[(\d+)\] = ")
_LOCAL_RE = re.compile(r"f(\d+)")
_JUMPS = ("_jump", "_jump_if_zero")


def emit_actions(g: Gen) -> None:
    """Emit every action of the JSON; fills ``g.actions_by_id`` and ``g.action_fn_names``."""
    for a in g.j.get("actions", []):
        aid = a["id"]
        where = f'action "{a["name"]}"'
        g.actions_by_id[aid] = a
        fname = ident("A", aid)
        g.action_fn_names[aid] = fname
        g.X.params = [rd["bitwidth"] for rd in a.get("runtime_data", [])]
        prims = a.get("primitives", [])
        blocks = [emit_primitive(g, p, where) if p.get("op") not in _JUMPS else None for p in prims]
        s = g.src
        body = "\n".join(line for b in blocks if b for line in b)
        # registers/counters/calculations as default arguments: LOAD_FAST, not LOAD_GLOBAL
        names = sorted(set(re.findall(r"\b((?:R|CB|CP|CALC)\d+)\b", body)))
        extra = "".join(f", {n}={n}" for n in names)
        s.emit(f"def {fname}(F, V, X, P{extra}):")
        s.emit(f"# {a['name']}", 1)
        if not any(b is None for b in blocks):
            lines = [line for b in blocks if b is not None for line in b]
            for line in hoist_common(fields_to_locals(lines), small_unsigned_local(g)):
                s.emit(line, 1)
            if not prims:
                s.emit("pass", 1)
        else:
            _emit_jump_loop(g, prims, blocks, where)
        s.emit("")
        g.X.params = []


def _emit_jump_loop(g: Gen, prims: list[dict], blocks: list[list[str] | None], where: str) -> None:
    """p4c's lowering of 'if' inside actions: blocks fall through, a taken jump restarts
    the loop at its target."""
    s = g.src
    s.emit("pc = 0", 1)
    s.emit("while True:", 1)
    for k, (p, b) in enumerate(zip(prims, blocks)):
        s.emit(f"if pc == {k}:", 2)
        if b is not None:
            for line in b:
                s.emit(line, 3)
            s.emit(f"pc = {k + 1}", 3)
            continue
        args = p.get("parameters", [])
        if p["op"] == "_jump":
            tgt = g.X.data(args[0], where)
            s.emit(f"pc = {tgt.src}", 3)
            s.emit("continue", 3)
        else:
            c, tgt = g.X.data(args[0], where), g.X.data(args[1], where)
            s.emit(f"if {c.src} == 0:", 3)
            s.emit(f"pc = {tgt.src}", 4)
            s.emit("continue", 4)
            s.emit(f"pc = {k + 1}", 3)
    s.emit("break", 2)


def small_unsigned_local(g: Gen) -> Callable[[str], bool]:
    """Whether a name of a straight-line body is a field local (``f<index>``, see
    `fields_to_locals`) of an unsigned field of at most 16 bits: its value is never
    negative and below 2^16, so a shift by it cannot raise nor build a huge int."""
    widths, signed = g.L.widths, g.L.signed

    def small(name: str) -> bool:
        m = _LOCAL_RE.fullmatch(name)
        if m is None:
            return False
        k = int(m.group(1))
        return k < len(widths) and not signed[k] and widths[k] <= 16

    return small


def has_exit(g: Gen, aid: int) -> bool:
    """Whether action ``aid`` may set the exit flag (callers then test it after the call)."""
    return any(pr.get("op") == "exit" for pr in g.actions_by_id[aid].get("primitives", []))


def fields_to_locals(lines: list[str]) -> list[str]:
    """Rewrite a straight-line action body to work on local variables.

    Every field the body mentions is loaded once up front and every field it assigns is
    stored back at the end, which is equivalent because nothing else can observe F while
    the body runs -- unless the body hands F to someone (calculations, slices, helpers), in
    which case we leave it alone.
    """
    body = "\n".join(lines)
    if "F[" not in body or re.search(r"F\[\d+:|\(F,|CALC", body):
        return lines
    used = sorted({int(m) for m in _FIELD_RE.findall(body)})
    written = sorted({int(m.group(1)) for line in lines if (m := _FIELD_WRITE_RE.match(line))})
    if len(used) > 200:  # keep the prologue bounded
        return lines
    # a field whose first mention is an unconditional (unindented) write that does not read
    # it needs no load
    first_write: set[int] = set()
    seen: set[int] = set()
    for line in lines:
        m = _FIELD_WRITE_RE.match(line)
        if m and not line.startswith(" "):
            k = int(m.group(1))
            rhs = line[m.end() :]
            if k not in seen and f"F[{k}]" not in rhs:
                first_write.add(k)
        seen.update(int(x) for x in _FIELD_RE.findall(line))
    loads = [k for k in used if k not in first_write]
    # one subscript per field: on CPython 3.11 a slice load or store of a run of fields
    # (a list or tuple built, then unpacked) costs more than the subscripts it replaces
    out = [f"f{k} = F[{k}]" for k in loads]
    out += [_FIELD_RE.sub(lambda m: f"f{m.group(1)}", line) for line in lines]
    out += [f"F[{k}] = f{k}" for k in written]
    return out
