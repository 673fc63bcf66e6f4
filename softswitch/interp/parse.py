"""The bmv2 parser -> one generated function per parse state.

``S<id>(F, V, X, data, pos) -> (next_state, pos, error)``: the Pipeline calls states until
one returns None (accept; p4c writes ``reject`` as null too); a state one transition alone
leads to runs inside the state before it.  A parser exception returns
the error code with the position reached, so the packet goes on with
``parser_error`` set and every byte not consumed kept as payload, as bmv2's
``Parser::parse`` does.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Union

from ..errors import PipelineError, UnsupportedConstruct
from .expr import DATA, X_STACK0, Expr, lit, mask_lit, parse_hexstr
from .gen import Gen, field_refs, ident, sign_extend
from .layout import HeaderInfo
from .primitives import emit_primitive
from .wide import WIDE_BYTES


# a state reached from one transition only is written into the state before it, up to
# this depth of nesting (Python's own limit on nested blocks is 100)
_MAX_INLINE_DEPTH = 20


class _Goto(NamedTuple):
    """A transition in a state's body: to the state named (None: accept), at an indent."""

    ind: int
    state: str | None


# one line of a state's body: source at an indent, or a transition
Line = Union[tuple[int, str], _Goto]


def emit_parser(g: Gen) -> str | None:
    """Emit the parser's states; returns the name of the initial state's function (None:
    no parser, the whole frame is payload). A state that one transition alone leads to is
    written into the state before it instead of a function of its own: one Python call,
    result tuple and turn of the Pipeline's state loop fewer per such state on a packet's
    path."""
    parsers = g.j.get("parsers", [])
    if not parsers:
        return None
    p = next((x for x in parsers if x["name"] == "parser"), parsers[0])
    if len(parsers) > 1:
        raise UnsupportedConstruct("more than one parser", f'parser "{parsers[1]["name"]}"')
    g.env["_sx"] = sign_extend
    states = {st["name"]: ident("S", st["id"]) for st in p.get("parse_states", [])}
    bodies = {st["name"]: _state_lines(g, st, states) for st in p.get("parse_states", [])}
    init = p.get("init_state")
    if init not in states:
        raise PipelineError(f"parser init_state {init!r} is not a state")
    sites: dict[str, int] = {init: 1}
    for body in bodies.values():
        for line in body:
            if isinstance(line, _Goto) and line.state is not None:
                sites[line.state] = sites.get(line.state, 0) + 1
    ok = g.errors["NoError"]
    s = g.src

    returned: list[str] = []  # states some emitted body returns: functions of their own

    def emit(name: str, ind: int, inside: list[str]) -> None:
        for line in bodies[name]:
            if not isinstance(line, _Goto):
                s.emit(line[1], ind + line[0])
                continue
            k, nxt = line
            if (
                nxt is not None
                and sites.get(nxt) == 1
                and nxt not in inside
                and len(inside) < _MAX_INLINE_DEPTH
            ):
                emit(nxt, ind + k, inside + [nxt])
            else:
                s.emit(f"return {states[nxt] if nxt else 'None'}, pos, {ok}", ind + k)
                if nxt is not None:
                    returned.append(nxt)

    # a function per state the Pipeline can be handed: the initial one and each that a
    # body returns; a state written into its only predecessor needs none (every state's
    # body was made above, so what no packet reaches is still refused where unsupported)
    work, done = [init], set()
    while work:
        name = work.pop()
        if name in done:
            continue
        done.add(name)
        s.emit(f"def {states[name]}(F, V, X, data, pos):")
        s.emit("n = len(data)", 1)
        emit(name, 1, [name])
        s.emit("")
        work += returned
        returned.clear()
    return states[init]


def _state_lines(g: Gen, st: dict[str, Any], states: dict[str, str]) -> list[Line]:
    """A state's body: its operations, then its transitions (every path ends in one, or
    in a parser error's return)."""
    where = f'parser state "{st["name"]}"'
    out: list[Line] = [(0, f"# {st['name']}")]
    for op in st.get("parser_ops", []):
        out += [(0, line) for line in _parser_op(g, op, where)]
    keys = st.get("transition_key", [])

    def target(t: dict[str, Any]) -> str | None:
        ns = t.get("next_state")
        if ns is not None and ns not in states:
            raise PipelineError(f"{where}: unknown next state {ns!r}")
        return ns

    if keys:
        prelude: list[str] = []
        key = _select_key(g, keys, where, prelude)
        out += [(0, line) for line in prelude] + [(0, "k = " + key)]
    for t in st.get("transitions", []):
        ttype = t.get("type")
        if ttype is None:
            ttype = "default" if t.get("value") == "default" else "hexstr"
        if ttype == "default":
            out.append(_Goto(0, target(t)))
            break
        if ttype != "hexstr":
            raise UnsupportedConstruct(f'transition type "{ttype}"', where)
        if not keys:
            raise PipelineError(f"{where}: value transition without a key")
        v = parse_hexstr(t["value"], where)
        if t.get("mask") is not None:
            m = parse_hexstr(t["mask"], where)
            out.append((0, f"if k & {lit(m)} == {lit(v & m)}:"))
        else:
            out.append((0, f"if k == {v}:"))
        out.append(_Goto(1, target(t)))
    else:
        out.append(_Goto(0, None))
    return out


def _select_key(g: Gen, keys: list[dict[str, Any]], where: str, prelude: list[str]) -> str:
    """The select key as one integer: each part byte-padded, the first one most
    significant (bmv2 concatenates the key bytes).  Lookahead parts are read into locals
    first (their lines appended to `prelude`)."""
    parts: list[str] = []
    total = 0
    for k in reversed(keys):
        kt, kv = k.get("type"), k.get("value")
        if kt == "field":
            e = g.X.field(kv, where)
            i = g.L.field_index(kv[0], kv[1], where) if kv[1] != "$valid$" else None
            wd = g.L.widths[i] if i is not None else 1
            nbits = ((wd + 7) // 8) * 8
            src = e.src if e.bound is not None else f"({e.src} & {mask_lit(nbits)})"
        elif kt == "lookahead":
            off, bw = kv
            var = f"_la{len(parts)}"
            prelude += _lookahead(g, off, bw, var, False)
            nbits = ((bw + 7) // 8) * 8
            src = var
        elif kt == "stack_field":
            sname, fname = kv
            if sname not in g.L.stacks:
                raise PipelineError(f"{where}: unknown stack {sname!r}")
            stk = g.L.stacks[sname]
            hs = [g.L.header(hn, where) for hn in stk.headers]
            idxs = tuple(hh.base + hh.offsets[fname] for hh in hs)
            wd = g.L.widths[idxs[0]]
            nbits = ((wd + 7) // 8) * 8
            var = f"_SF{len(g.env)}"
            g.env[var] = idxs
            cell = f"F[{var}[X[{X_STACK0 + stk.index}] - 1]]"
            if g.X.lazy_field(idxs[0]):
                cell = f"_int({cell})"
            src = f"({cell} & {mask_lit(nbits)})"
        else:
            raise UnsupportedConstruct(f'transition key type "{kt}"', where)
        parts.append(f"({src} << {total})" if total else src)
        total += nbits
    return " | ".join(reversed(parts))


def _too_short(g: Gen) -> str:
    return f"    return None, pos, {g.errors['PacketTooShort']}"


def _extract_lines(g: Gen, h: HeaderInfo, where: str) -> list[str]:
    if h.nbits % 8:
        raise UnsupportedConstruct(
            f"extract of header {h.name} whose width ({h.nbits} bits) is not a multiple of 8", where
        )
    nb = h.nbytes
    n = len(h.fields)
    out = [f"if n - pos < {nb}:", _too_short(g)]
    st = g.struct_for(h)
    chunked = None if st is not None else g.chunk_struct_for(h)
    if st is not None:
        trail = "," if n == 1 else ""  # (a tuple of one)
        out.append(f"{field_refs(h.base, n)}{trail} = {st}.unpack_from(data, pos)")
    elif chunked is not None:
        out += _chunked_lines(h, *chunked)
    elif n == 1 and g.X.lazy_field(h.base):
        # a wide field: a view of its bytes (wide.Wide), no int; all-zero bytes are 0
        out.append(
            f"F[{h.base}] = 0 if data.startswith({g.zeros(nb)}, pos) else _wview(data, pos, {nb})"
        )
    else:
        conv = f"int.from_bytes(data[pos:pos + {nb}], 'big')"
        if nb >= WIDE_BYTES:
            # an all-zero wide header (a SKIP's block) is 0 without the byte-by-byte
            # conversion: one compare of its bytes in place (startswith: no slice) instead
            conv = f"0 if data.startswith({g.zeros(nb)}, pos) else {conv}"
        out.append(f"_v = {conv}")
        shift = h.nbits
        for k, (_fn, wd, sg) in enumerate(h.fields):
            shift -= wd
            v = f"(_v >> {shift})" if shift else "_v"
            if shift or wd < h.nbits:
                v = f"({v} & {mask_lit(wd)})"
            if sg:
                v = f"_sx({v}, {wd})"
            out.append(f"F[{h.base + k}] = {v}")
    out += [f"V[{h.index}] = 1", f"pos += {nb}"]
    return out


def _chunked_lines(h: HeaderInfo, st: str, runs: list[list[int]]) -> list[str]:
    """A header's fields from one unpack of its byte-aligned runs (`chunk_struct_for`)."""
    names = [f"_r{j}" for j in range(len(runs))]
    out = [f"{', '.join(names)}{',' if len(names) == 1 else ''} = {st}.unpack_from(data, pos)"]
    for name, run in zip(names, runs):
        shift = sum(h.fields[k][1] for k in run)
        for k in run:
            _fn, wd, sg = h.fields[k]
            shift -= wd
            v = f"({name} >> {shift})" if shift else name
            if len(run) > 1:
                v = f"({v} & {mask_lit(wd)})"
            if sg:
                v = f"_sx({v}, {wd})"
            out.append(f"F[{h.base + k}] = {v}")
    return out


def _lookahead(g: Gen, off: int, bw: int, var: str, err_check: bool) -> list[str]:
    byte_off, bit_off = off // 8, off % 8
    nb = (bw + 7) // 8
    span = (bit_off + bw + 7) // 8
    out = []
    if err_check:
        out += [f"if n - pos < {nb}:", _too_short(g)]
    # bmv2 only checks (bitwidth+7)/8 bytes and reads past the end otherwise (undefined
    # memory); we read zeros there.
    out.append(f"_b = data[pos + {byte_off}:pos + {byte_off + span}]")
    out.append(f"if len(_b) < {span}: _b = _b.ljust({span}, b'\\x00')")
    sh = span * 8 - bit_off - bw
    out.append(f"{var} = (int.from_bytes(_b, 'big') >> {sh}) & {mask_lit(bw)}")
    return out


def _parser_op(g: Gen, op: dict[str, Any], where: str) -> list[str]:
    kind = op.get("op")
    params = op.get("parameters", [])
    if kind == "extract":
        return _extract(g, params, where)
    if kind == "set":
        if len(params) != 2:
            raise PipelineError(f"{where}: set takes 2 parameters")
        d = g.lvalue(params[0], where)
        srcp = params[1]
        if isinstance(srcp, dict) and srcp.get("type") == "lookahead":
            off, bw = srcp["value"]
            return _lookahead(g, off, bw, "_la", True) + [g.assign(d, Expr("_la", DATA, bw))]
        return [g.assign(d, g.X.data(srcp, where))]
    if kind == "verify":
        if len(params) != 2:
            raise PipelineError(f"{where}: verify takes 2 parameters")
        c = g.X.boolean(params[0], where)
        e = g.X.data(params[1], where)
        return [f"if not {c.src}:", f"    return None, pos, {e.src}"]
    if kind in ("advance", "shift"):
        if len(params) != 1:
            raise PipelineError(f"{where}: {kind} takes 1 parameter")
        e = g.X.data(params[0], where)
        if kind == "shift":
            return [f"_a = {e.src}", "if n - pos < _a:", _too_short(g), "pos += _a"]
        return [
            f"_a = {e.src}",
            "if _a % 8:",
            f"    return None, pos, {g.errors['ParserInvalidArgument']}",
            "if n - pos < _a // 8:",
            _too_short(g),
            "pos += _a // 8",
        ]
    if kind == "primitive":
        if len(params) != 1 or not isinstance(params[0], dict):
            raise PipelineError(f"{where}: primitive op takes 1 parameter")
        return emit_primitive(g, params[0], where)
    raise UnsupportedConstruct(f'parser operation "{kind}"', where)


def _extract(g: Gen, params: list[Any], where: str) -> list[str]:
    if len(params) != 1:
        raise PipelineError(f"{where}: extract takes 1 parameter")
    t, v = params[0].get("type"), params[0].get("value")
    if t == "regular":
        return _extract_lines(g, g.L.header(v, where), where)
    if t == "stack":
        if v not in g.L.stacks:
            raise PipelineError(f"{where}: unknown stack {v!r}")
        stk = g.L.stacks[v]
        slot = X_STACK0 + stk.index
        out = [f"_k = X[{slot}]"]
        for k, hn in enumerate(stk.headers):
            out.append(f"{'if' if k == 0 else 'elif'} _k == {k}:")
            out += ["    " + line for line in _extract_lines(g, g.L.header(hn, where), where)]
        out += [
            "else:",
            f"    return None, pos, {g.errors['StackOutOfBounds']}",
            f"X[{slot}] = _k + 1",
        ]
        return out
    raise UnsupportedConstruct(f'extract of type "{t}"', where)
