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
from .gen import Gen


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
                f"    if {fn}(F, V, X) != (F[{t}] & {mask_lit(tw)}):",
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
            s.emit(f"out.append({st}.pack(*F[{h.base}:{h.base + n}]))", 2)
        else:
            s.emit(f"out.append({g.header_int(h)}.to_bytes({h.nbytes}, 'big'))", 2)
    s.emit(f"out.append(X[{X_PAYLOAD}])", 1)
    s.emit("return b''.join(out)", 1)
    s.emit("")
