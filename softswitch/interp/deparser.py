"""Checksums and the deparser -> ``VERIFY(F, V, X)`` and ``DEPARSE(F, V, X)``.

They belong together because bmv2 runs the *update* checksums as the first step of
deparsing, while the *verify* checksums run between parser and ingress: one pass over the
JSON's ``checksums`` yields both.  ``VERIFY`` returns 1 on a mismatch (the packet is not
dropped; ``checksum_error`` is set); ``DEPARSE`` returns the frame: valid headers in
deparser order, then the unparsed payload.
"""

from __future__ import annotations

from ..errors import UnsupportedConstruct
from .calc import calculation
from .expr import DATA, X_PAYLOAD, Expr, mask_lit
from .gen import Gen, field_refs
from .layout import HeaderInfo
from .wide import WIDE_BYTES


def emit_checksums(g: Gen) -> list[str]:
    """Emit ``VERIFY``; return the update-checksum statements for ``emit_deparser``."""
    s = g.src
    verify_lines: list[str] = []
    update_lines: list[str] = []
    for c in g.j.get("checksums", []):
        where = f'checksum "{c["name"]}"'
        if c.get("type", "generic") != "generic":
            raise UnsupportedConstruct(f'checksum type "{c.get("type")}"', where)
        h, f = c["target"]
        info = g.L.header(h, where)
        t = g.L.field_index(h, f, where)
        fn = calculation(g, c["calculation"], where)
        cond = g.X.boolean(c["if_cond"], where).src if c.get("if_cond") else "True"
        tw = g.L.widths[t]
        if c.get("verify", True):
            verify_lines += [
                f"if V[{info.index}] and {cond}:",
                f"    if {fn}(F, V, X) != ({g.X.read(t)} & {mask_lit(tw)}):",
                "        err = 1",
            ]
        if c.get("update", True):
            update_lines += [
                f"if {cond}:",
                "    " + g.assign(t, Expr(f"{fn}(F, V, X)", DATA, None)),
            ]
    s.emit("def VERIFY(F, V, X):")
    s.emit("err = 0", 1)
    for line in verify_lines:
        s.emit(line, 1)
    s.emit("return err", 1)
    s.emit("")
    return update_lines


def _run_int(h: HeaderInfo, run: list[int]) -> str:
    """One byte-aligned run of a header's fields as one unsigned integer (MSB first)."""
    parts = []
    shift = sum(h.fields[k][1] for k in run)
    for k in run:
        _n, wd, sg = h.fields[k]
        shift -= wd
        v = f"(F[{h.base + k}] & {mask_lit(wd)})" if sg else f"F[{h.base + k}]"
        parts.append(f"({v} << {shift})" if shift else v)
    return parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"


def emit_wide_field(g: Gen, h: HeaderInfo) -> None:
    """Emit a wide one-field header through a cache of its last (int, bytes). Why: the
    copies of a multicast share their ingress PHV's int objects, so every copy after the
    first deparses the same int again -- a 2 048-value block's 8 KiB `to_bytes` costs
    about as much as the rest of a packet's egress. The cache holds the int it was made
    from, so an `is` match means the same value (a held object's id cannot be reused)."""
    var = f"_WIDE{h.index}"
    g.state(var, lambda: [None, b""])
    s = g.src
    s.emit(f"v = F[{h.base}]", 2)
    s.emit(f"if v is not {var}[0]:", 2)
    s.emit(f"{var}[0], {var}[1] = v, _wbytes(v, {h.nbytes})", 3)
    s.emit(f"out.append({var}[1])", 2)


def emit_deparser(g: Gen, update_lines: list[str]) -> None:
    deps = g.j.get("deparsers", [])
    if len(deps) > 1:
        raise UnsupportedConstruct("more than one deparser", f'deparser "{deps[1]["name"]}"')
    order = deps[0].get("order", []) if deps else []
    if deps and deps[0].get("primitives"):
        raise UnsupportedConstruct("deparser method calls", f'deparser "{deps[0]["name"]}"')
    s = g.src
    s.emit("def DEPARSE(F, V, X):")
    for line in update_lines:
        s.emit(line, 1)
    s.emit("out = []", 1)
    for hn in order:
        h = g.L.header(hn, "deparser")
        if h.nbits % 8:
            raise UnsupportedConstruct(
                f"emit of header {h.name} whose width is not a multiple of 8 bits", "deparser"
            )
        s.emit(f"if V[{h.index}]:", 1)
        st = g.struct_for(h)
        n = len(h.fields)
        if st is not None and not any(sg for _n, _w, sg in h.fields):
            s.emit(f"out.append({st}.pack({field_refs(h.base, n)}))", 2)
        elif n == 1 and h.nbytes >= WIDE_BYTES and not h.fields[0][2]:
            emit_wide_field(g, h)
        elif (chunked := g.chunk_struct_for(h)) is not None:
            cst, runs = chunked
            s.emit(f"out.append({cst}.pack({', '.join(_run_int(h, r) for r in runs)}))", 2)
        else:
            s.emit(f"out.append({g.header_int(h)}.to_bytes({h.nbytes}, 'big'))", 2)
    s.emit(f"out.append(X[{X_PAYLOAD}])", 1)
    s.emit("return b''.join(out)", 1)
    s.emit("")
