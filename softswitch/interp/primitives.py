"""bmv2 primitives -> lines of Python source, one small emitter per primitive.

Why a dispatch table: the set of primitives softswitch runs is the set of keys of
``PRIMITIVES`` (plus ``REFUSED`` for the ones it names and refuses), so what is supported
is visible in one place and each emitter can be read on its own.  An emitter gets the
compile state, the primitive's parameters and a ``where`` for messages, and returns the
statements (unindented) that perform it on ``F``/``V``/``X``/``P``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import PipelineError, UnsupportedConstruct
from .calc import calculation
from .expr import BOOL, DATA, X_EXIT, X_INLEN, X_PKTLEN, Expr, mask_lit
from .gen import DROP_PORT, Gen

REFUSED = {
    "execute_meter": "meters are not implemented",
    "clone_ingress_pkt_to_egress": "clone is not implemented",
    "clone_egress_pkt_to_egress": "clone is not implemented",
    "resubmit": "resubmit is not implemented",
    "recirculate": "recirculate is not implemented",
    "generate_digest": "digests are not implemented",
    "truncate": "truncate is not implemented",
    "push": "header stack push is not implemented",
    "pop": "header stack pop is not implemented",
    "assign_VL": "variable-length fields are not implemented",
    "assign_union": "header unions are not implemented",
    "assign_header_stack": "header stack assignment is not implemented",
    "assign_union_stack": "header unions are not implemented",
}

Emitter = Callable[[Gen, list[Any], str], list[str]]


@dataclass(frozen=True)
class Primitive:
    arity: int | None  # number of parameters, None: not checked (no_op)
    emit: Emitter


def emit_primitive(g: Gen, p: dict[str, Any], where: str) -> list[str]:
    """The statements of one primitive call; refuses what is not in the table."""
    op = p.get("op")
    args = p.get("parameters", [])
    w = f'primitive "{op}" in {where}'
    if op in REFUSED:
        raise UnsupportedConstruct(f'primitive "{op}" ({REFUSED[op]})', where)
    prim = PRIMITIVES.get(op)  # type: ignore[arg-type]
    if prim is None:
        raise UnsupportedConstruct(f'primitive "{op}"', where)
    if prim.arity is not None and len(args) != prim.arity:
        raise PipelineError(f"{w}: expected {prim.arity} parameters, got {len(args)}")
    return prim.emit(g, args, w)


# -- fields ----------------------------------------------------------------------------


def _assign(g: Gen, args: list[Any], w: str) -> list[str]:
    return [g.assign(g.lvalue(args[0], w), g.X.data(args[1], w))]


def _add_to_field(sign: str) -> Emitter:
    def emit(g: Gen, args: list[Any], w: str) -> list[str]:
        d = g.lvalue(args[0], w)
        e = g.X.data(args[1], w)
        return [g.assign(d, Expr(f"({g.X.read(d)} {sign} {e.src})", DATA, None))]

    return emit


def _binary(sym: str) -> Emitter:
    """add, subtract, bit_and/or/xor, shift_left/right: ``dst = a <sym> b``."""

    def emit(g: Gen, args: list[Any], w: str) -> list[str]:
        d = g.lvalue(args[0], w)
        a, b = g.X.data(args[1], w), g.X.data(args[2], w)
        return [g.assign(d, Expr(f"({a.src} {sym} {b.src})", DATA, None))]

    return emit


# -- headers ---------------------------------------------------------------------------


def _assign_header(g: Gen, args: list[Any], w: str) -> list[str]:
    dh, sh = g.header_arg(args[0], w), g.header_arg(args[1], w)
    if dh.type_name != sh.type_name:
        raise PipelineError(f"{w}: header types differ")
    n = len(dh.fields)
    return [
        f"if V[{sh.index}]:",
        f"    V[{dh.index}] = 1",
        f"    F[{dh.base}:{dh.base + n}] = F[{sh.base}:{sh.base + n}]",
        "else:",
        f"    V[{dh.index}] = 0",
    ]


def _add_header(g: Gen, args: list[Any], w: str) -> list[str]:
    """setValid: zero the fields (bmv2 Header::reset) and grow the packet length."""
    h = g.header_arg(args[0], w)
    n = len(h.fields)
    return [
        f"if not V[{h.index}]:",
        f"    F[{h.base}:{h.base + n}] = {[0] * n!r}",
        f"    V[{h.index}] = 1",
        f"    X[{X_PKTLEN}] += {h.nbytes}",
    ]


def _remove_header(g: Gen, args: list[Any], w: str) -> list[str]:
    h = g.header_arg(args[0], w)
    return [f"if V[{h.index}]:", f"    X[{X_PKTLEN}] -= {h.nbytes}", f"    V[{h.index}] = 0"]


# -- dropping --------------------------------------------------------------------------


def _drop_lines(g: Gen, es: int, mg: int | None) -> list[str]:
    out = [g.assign(es, g.X.const(DROP_PORT))]
    if mg is not None:
        out.append(f"F[{mg}] = 0")
    return out


def _mark_to_drop(g: Gen, args: list[Any], w: str) -> list[str]:
    h = g.header_arg(args[0], w)
    if "egress_spec" not in h.offsets:
        raise PipelineError(f"{w}: header {h.name} has no egress_spec")
    es = h.base + h.offsets["egress_spec"]
    mg = h.base + h.offsets["mcast_grp"] if "mcast_grp" in h.offsets else None
    return _drop_lines(g, es, mg)


def _drop(g: Gen, args: list[Any], w: str) -> list[str]:
    es = g.std["egress_spec"]
    assert es is not None  # Gen requires standard_metadata.egress_spec
    return _drop_lines(g, es, g.std["mcast_grp"])


# -- registers and counters ------------------------------------------------------------


def _register_read(g: Gen, args: list[Any], w: str) -> list[str]:
    d = g.lvalue(args[0], w)
    var, size, bw = g.register(args[1], w)
    i = g.X.data(args[2], w)
    return [
        f"_i = {i.src}",
        f"if {g.in_range('_i', i, size)}:",
        "    " + g.assign(d, g.X.register_value(var, "_i", bw)),
    ]


def _register_write(g: Gen, args: list[Any], w: str) -> list[str]:
    var, size, bw = g.register(args[0], w)
    i, v = g.X.data(args[1], w), g.X.data(args[2], w)
    if v.lazy == bw and g.X.lazy_register(bw):
        val = v.raw_for(bw)  # a wide value as stored
    elif v.bound is not None and v.bound <= bw:
        val = v.src
    else:
        val = f"{v.src} & {mask_lit(bw)}"
    return [f"_i = {i.src}", f"if {g.in_range('_i', i, size)}:", f"    {var}[_i] = {val}"]


def _count(g: Gen, args: list[Any], w: str) -> list[str]:
    """bmv2 counts the ingress length in bytes, whatever the packet became since."""
    if not (isinstance(args[0], dict) and args[0].get("type") == "counter_array"):
        raise PipelineError(f"{w}: first parameter must be a counter_array")
    name = args[0]["value"]
    if name not in g.ctr_vars:
        raise PipelineError(f"{w}: unknown counter {name!r}")
    cb, cp, size = g.ctr_vars[name]
    i = g.X.data(args[1], w)
    return [
        f"_i = {i.src}",
        f"if {g.in_range('_i', i, size)}:",
        f"    {cb}[_i] += X[{X_INLEN}]",
        f"    {cp}[_i] += 1",
    ]


# -- hashes and random -----------------------------------------------------------------


def _hash(g: Gen, args: list[Any], w: str) -> list[str]:
    d = g.lvalue(args[0], w)
    base, sz = g.X.data(args[1], w), g.X.data(args[3], w)
    if not (isinstance(args[2], dict) and args[2].get("type") == "calculation"):
        raise PipelineError(f"{w}: third parameter must be a calculation")
    fn = calculation(g, args[2]["value"], w)
    return [
        f"_sz = {sz.src}",
        g.assign(d, Expr(f"(({fn}(F, V, X) % (_sz or 1)) + {base.src})", DATA, None)),
    ]


def _random(g: Gen, args: list[Any], w: str) -> list[str]:
    d = g.lvalue(args[0], w)
    lo, hi = g.X.data(args[1], w), g.X.data(args[2], w)
    return [
        f"_lo = {lo.src}",
        f"_hi = {hi.src}",
        "if _lo <= _hi:",
        "    " + g.assign(d, Expr("_randint(_lo, _hi)", DATA, None)),
    ]


# -- control and debugging -------------------------------------------------------------


def _exit(g: Gen, args: list[Any], w: str) -> list[str]:
    return [f"X[{X_EXIT}] = 1"]


def _no_op(g: Gen, args: list[Any], w: str) -> list[str]:
    return ["pass"]


def _assert(g: Gen, args: list[Any], w: str) -> list[str]:
    """simple_switch aborts the process; the generated code raises AssertFailure, which the
    Switch counts and drops the packet."""
    e = g.X.compile(args[0], w)
    if e.kind not in (DATA, BOOL):
        raise PipelineError(f"{w}: bad operand")
    return [f"if not {e.src}:", f"    raise _AssertFail({w!r})"]


def _log_msg(g: Gen, args: list[Any], w: str) -> list[str]:
    fmt = args[0].get("value") if isinstance(args[0], dict) else None
    vec = args[1].get("value") if isinstance(args[1], dict) else None
    if not isinstance(fmt, str) or not isinstance(vec, list):
        raise PipelineError(f"{w}: expected (string, parameters_vector)")
    vals = [g.X.data(v, w).src for v in vec]
    if not g.trace:
        return ["pass"]
    return [f"_log({fmt!r}, ({', '.join(vals)}{',' if vals else ''}))"]


PRIMITIVES: dict[str, Primitive] = {
    "assign": Primitive(2, _assign),
    "modify_field": Primitive(2, _assign),
    "add_to_field": Primitive(2, _add_to_field("+")),
    "subtract_from_field": Primitive(2, _add_to_field("-")),
    "add": Primitive(3, _binary("+")),
    "subtract": Primitive(3, _binary("-")),
    "bit_xor": Primitive(3, _binary("^")),
    "bit_or": Primitive(3, _binary("|")),
    "bit_and": Primitive(3, _binary("&")),
    "shift_left": Primitive(3, _binary("<<")),
    "shift_right": Primitive(3, _binary(">>")),
    "assign_header": Primitive(2, _assign_header),
    "add_header": Primitive(1, _add_header),
    "remove_header": Primitive(1, _remove_header),
    "mark_to_drop": Primitive(1, _mark_to_drop),
    "drop": Primitive(0, _drop),
    "register_read": Primitive(3, _register_read),
    "register_write": Primitive(3, _register_write),
    "count": Primitive(2, _count),
    "modify_field_with_hash_based_offset": Primitive(4, _hash),
    "modify_field_rng_uniform": Primitive(3, _random),
    "exit": Primitive(0, _exit),
    "no_op": Primitive(None, _no_op),
    "assert": Primitive(1, _assert),
    "assume": Primitive(1, _assert),
    "log_msg": Primitive(2, _log_msg),
}
