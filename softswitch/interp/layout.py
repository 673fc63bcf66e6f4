"""Packet header vector layout: every field of every header instance gets a flat index.

Why flat: generated code reads and writes ``F[17]`` (a list index with a constant), the
cheapest field access CPython offers; header validity lives in a parallel list ``V``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import PipelineError, UnsupportedConstruct


@dataclass
class HeaderInfo:
    name: str
    index: int  # position in V
    type_name: str
    metadata: bool
    base: int  # index of the first field in F
    fields: list[tuple[str, int, bool]]  # (name, width, signed)
    offsets: dict[str, int] = field(default_factory=dict)

    @property
    def nbits(self) -> int:
        return sum(w for _, w, _ in self.fields)

    @property
    def nbytes(self) -> int:
        return (self.nbits + 7) // 8


@dataclass
class StackInfo:
    name: str
    index: int  # position of its "next" counter in the per-packet context
    headers: list[str]  # stack[0], stack[1], ...


class Layout:
    """Header instances, field indices, field widths/signedness, stacks and aliases."""

    def __init__(self, j: dict[str, Any]) -> None:
        types: dict[str, list[tuple[str, int, bool]]] = {}
        for ht in j.get("header_types", []):
            flds = []
            for f in ht["fields"]:
                if len(f) > 3:
                    raise UnsupportedConstruct(
                        "field attribute list (saturating fields)", f"header type {ht['name']}"
                    )
                name, width = f[0], f[1]
                if width == "*" or ht.get("length_exp") is not None:
                    raise UnsupportedConstruct("variable-length field", f"header type {ht['name']}")
                if not isinstance(width, int) or width <= 0:
                    raise PipelineError(f"bad width {width!r} for {ht['name']}.{name}")
                signed = bool(f[2]) if len(f) > 2 else False
                flds.append((name, width, signed))
            types[ht["name"]] = flds
        self.headers: dict[str, HeaderInfo] = {}
        self.by_id: dict[int, str] = {}
        self.widths: list[int] = []
        self.signed: list[bool] = []
        self.field_names: list[str] = []
        for h in j.get("headers", []):
            t = h["header_type"]
            if t not in types:
                raise PipelineError(f"header {h['name']} has unknown type {t}")
            info = HeaderInfo(
                h["name"], len(self.headers), t, bool(h.get("metadata")), len(self.widths), types[t]
            )
            for off, (fname, w, s) in enumerate(types[t]):
                info.offsets[fname] = off
                self.widths.append(w)
                self.signed.append(s)
                self.field_names.append(f"{h['name']}.{fname}")
            self.headers[h["name"]] = info
            self.by_id[h["id"]] = h["name"]
        self.stacks: dict[str, StackInfo] = {}
        for s in j.get("header_stacks", []):
            names = [self.by_id[i] for i in s["header_ids"]]
            self.stacks[s["name"]] = StackInfo(s["name"], len(self.stacks), names)
        if j.get("header_unions") or j.get("header_union_stacks"):
            raise UnsupportedConstruct("header unions", "header_unions")
        self.aliases: dict[str, tuple[str, str]] = {}
        for a in j.get("field_aliases", []):
            self.aliases[a[0]] = (a[1][0], a[1][1])

    # -- lookups -------------------------------------------------------------------------
    def header(self, name: str, where: str) -> HeaderInfo:
        try:
            return self.headers[name]
        except KeyError:
            raise PipelineError(f"unknown header {name!r} in {where}") from None

    def field_index(self, hname: str, fname: str, where: str) -> int:
        """Flat index of a field; '$valid$' is handled by callers (it maps to V)."""
        h = self.header(hname, where)
        try:
            return h.base + h.offsets[fname]
        except KeyError:
            raise PipelineError(f"unknown field {hname}.{fname} in {where}") from None

    def find(self, dotted: str) -> int | None:
        """Index of an architecture field like 'standard_metadata.egress_spec', via aliases."""
        if dotted in self.aliases:
            h, f = self.aliases[dotted]
        else:
            h, _, f = dotted.partition(".")
        info = self.headers.get(h)
        if info is None or f not in info.offsets:
            return None
        return info.base + info.offsets[f]

    def zero_phv(self) -> tuple[list[int], list[int]]:
        """Initial F and V: every field 0 (simple_switch resets metadata), metadata valid."""
        F = [0] * len(self.widths)
        V = [1 if h.metadata else 0 for h in self.headers.values()]
        return F, V
