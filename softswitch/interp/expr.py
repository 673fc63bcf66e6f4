"""bmv2 JSON expressions -> Python source text.

bmv2 evaluates data expressions with infinite precision (its ``Data`` is a bignum) and only
truncates when a value is written into a field or register; p4c inserts the explicit
``& mask`` / ``two_comp_mod`` casts that give P4 its fixed-width semantics.  Python ints are
bignums too, so each operator maps 1:1 onto a Python operator and widths are applied only
at assignment (see ``Gen.assign``).  Every compiled expression also carries ``bound``: the
number of bits b such that 0 <= value < 2**b is guaranteed (None when unknown or possibly
negative); it lets assignments skip a redundant mask, which matters for throughput.

A field or register of `wide.LAZY_BYTES` or more may hold a `wide.Wide` instead of an int:
its ``Expr`` reads the int (``_int(F[i])``) and keeps the stored value as ``raw``, which
only a place of the same width stores and only `wide.wide_add` / `wide.wide_mul` compute
on (the masked sum of two such values, a narrow value times a constant word).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import PipelineError, UnsupportedConstruct
from .layout import Layout
from .wide import as_int, const_limbs, lazy_width, wide_add, wide_mul

DATA, BOOL, HEADER, STACK = "data", "bool", "header", "stack"

# Per-packet context list X (see pipeline.py): fixed slots, then one slot per header stack.
X_EXIT, X_PKTLEN, X_INLEN, X_PAYLOAD, X_STACK0 = 0, 1, 2, 3, 4


@dataclass
class Expr:
    src: str
    kind: str
    bound: int | None = None
    const: int | None = None  # value when it is a literal
    header: str | None = None  # header name when kind == HEADER
    stack: str | None = None  # stack name when kind == STACK
    # a value that may be a `wide.Wide` of `lazy` bits: `raw` evaluates to it as stored
    # (int or Wide), `src` to its int. Only a field or register of exactly `lazy` bits
    # may store `raw` (`raw_for`)
    raw: str | None = None
    lazy: int | None = None
    terms: tuple[Expr, Expr] | None = None  # the operands of a binary operator `op`
    op: str | None = None

    def raw_for(self, w: int) -> str:
        """Source of this value for a place that holds `Wide` values of `w` bits."""
        return self.raw if self.raw is not None and self.lazy == w else self.src


# An all-ones mask at least this wide over a value one bit wider is applied only when
# that bit is set (`wrap_carry`): p4reduce's wide block add is a 2 048..131 072-bit sum.
WIDE_WRAP_BITS = 256


def wrap_carry(v: int, w: int, mask: int) -> int:
    """``v & mask`` for 0 <= v < 2^(w+1) and mask = 2^w - 1, without building a second
    w-bit integer when v already fits (the shift reads only v's top digits)."""
    return v & mask if v >> w else v


def lit(v: int) -> str:
    """An int as a Python literal in generated code: hexadecimal, because CPython refuses
    int -> decimal str conversions over 4 300 digits (a wide block's word has 39 457)."""
    return hex(v)


def mask_lit(w: int) -> str:
    """The all-ones mask of ``w`` bits as a literal (`lit`)."""
    return hex((1 << w) - 1)


def parse_hexstr(v: Any, where: str) -> int:
    if isinstance(v, bool):
        raise PipelineError(f"expected hexstr, got bool in {where}")
    if isinstance(v, int):
        return v
    if not isinstance(v, str):
        raise PipelineError(f"expected hexstr, got {v!r} in {where}")
    neg = v.startswith("-")
    body = v[1:] if neg else v
    if body[:2].lower() == "0x":
        body = body[2:]
    try:
        n = int(body, 16)  # bmv2 reads every hexstr as hexadecimal
    except ValueError:
        raise PipelineError(f"bad hexstr {v!r} in {where}") from None
    return -n if neg else n


class ExprCompiler:
    """Compiles type-value JSON objects; ``env`` collects the globals the source refers to."""

    def __init__(
        self,
        layout: Layout,
        env: dict[str, Any],
        registers: dict[str, tuple[str, int, int]],
        errors_where: str = "",
    ) -> None:
        self.L = layout
        self.env = env
        self.registers = registers  # name -> (global var, size, bitwidth)
        self.params: list[int] = []  # runtime_data widths of the current action
        env["_int"] = as_int

    # -- wide values (wide.py) -------------------------------------------------------------
    def lazy_field(self, i: int) -> int | None:
        """The width of field `i` when it holds `Wide` values, else None."""
        w = self.L.widths[i]
        return w if lazy_width(w, self.L.signed[i]) else None

    def read(self, i: int) -> str:
        """Source of field `i`'s int (for code that reads a field outside an Expr)."""
        return f"_int(F[{i}])" if self.lazy_field(i) else f"F[{i}]"

    @staticmethod
    def lazy_register(bw: int) -> bool:
        return lazy_width(bw, False)

    def register_value(self, var: str, idx: str, bw: int) -> Expr:
        """A register cell's value: ``var[idx]`` (a `Wide` or an int when the register is
        wide)."""
        cell = f"{var}[{idx}]"
        if self.lazy_register(bw):
            return Expr(f"_int({cell})", DATA, bw, raw=cell, lazy=bw)
        return Expr(cell, DATA, bw)

    # -- leaves --------------------------------------------------------------------------
    def field(self, ref: list[str], where: str) -> Expr:
        if not (isinstance(ref, list) and len(ref) == 2):
            raise PipelineError(f"bad field reference {ref!r} in {where}")
        h, f = ref
        if f == "$valid$":
            info = self.L.header(h, where)
            return Expr(f"V[{info.index}]", DATA, 1)
        i = self.L.field_index(h, f, where)
        w = self.L.widths[i]
        if self.lazy_field(i):
            return Expr(f"_int(F[{i}])", DATA, w, raw=f"F[{i}]", lazy=w)
        return Expr(f"F[{i}]", DATA, None if self.L.signed[i] else w)

    def const(self, v: int) -> Expr:
        return Expr(lit(v), DATA, v.bit_length() if v >= 0 else None, const=v)

    # -- generic entry point -------------------------------------------------------------
    def compile(self, tv: Any, where: str) -> Expr:
        if tv is None:
            raise PipelineError(f"missing operand in {where}")
        if not isinstance(tv, dict):
            if isinstance(tv, bool):
                return Expr(repr(tv), BOOL)
            if isinstance(tv, int):
                return self.const(tv)
            raise PipelineError(f"bad expression {tv!r} in {where}")
        if "op" in tv and "type" not in tv:
            return self.op(tv, where)
        t = tv.get("type")
        v = tv.get("value")
        if t == "field":
            return self.field(v, where)
        if t == "hexstr":
            return self.const(parse_hexstr(v, where))
        if t == "bool":
            return Expr("True" if v else "False", BOOL)
        if t in ("runtime_data", "local"):
            if not isinstance(v, int) or not 0 <= v < len(self.params):
                raise PipelineError(f"runtime_data index {v!r} out of range in {where}")
            return Expr(f"P[{v}]", DATA, self.params[v])
        if t == "expression":
            if isinstance(v, dict) and "op" in v:
                return self.op(v, where)
            return self.compile(v, where)
        if t == "header":
            self.L.header(v, where)
            return Expr("None", HEADER, header=v)
        if t == "header_stack":
            if v not in self.L.stacks:
                raise PipelineError(f"unknown header stack {v!r} in {where}")
            return Expr("None", STACK, stack=v)
        if t == "register":
            name, idx = v
            if name not in self.registers:
                raise PipelineError(f"unknown register {name!r} in {where}")
            var, _size, bw = self.registers[name]
            i = self.data(idx, where)
            return self.register_value(var, i.src, bw)
        if t == "stack_field":
            # field of the last extracted element (stack.last.f): index through the stack's
            # 'next' counter; like bmv2 this is only meaningful after an extract.
            sname, fname = v
            if sname not in self.L.stacks:
                raise PipelineError(f"unknown header stack {sname!r} in {where}")
            stk = self.L.stacks[sname]
            idxs = tuple(self.L.field_index(hn, fname, where) for hn in stk.headers)
            var = f"_SF_{stk.index}_{fname.replace('.', '_').replace('$', '_')}"
            self.env[var] = idxs
            w = self.L.widths[idxs[0]]
            cell = f"F[{var}[X[{X_STACK0 + stk.index}] - 1]]"
            if self.lazy_field(idxs[0]):
                cell = f"_int({cell})"
            return Expr(
                cell,
                DATA,
                None if self.L.signed[idxs[0]] else w,
            )
        raise UnsupportedConstruct(f'expression operand type "{t}"', where)

    def data(self, tv: Any, where: str) -> Expr:
        e = self.compile(tv, where)
        if e.kind != DATA:
            raise PipelineError(f"expected a data value, got {e.kind} in {where}")
        return e

    def boolean(self, tv: Any, where: str) -> Expr:
        e = self.compile(tv, where)
        if e.kind != BOOL:
            raise PipelineError(f"expected a boolean, got {e.kind} in {where}")
        return e

    # -- operators -----------------------------------------------------------------------
    def op(self, node: dict[str, Any], where: str) -> Expr:
        op = node.get("op")
        left, right = node.get("left"), node.get("right")
        if op in ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"):
            a, b = self.data(left, where), self.data(right, where)
            pyop = {"/": "//"}.get(op, op)
            bound = None
            if a.bound is not None and b.bound is not None:
                if op in ("+",):
                    bound = max(a.bound, b.bound) + 1
                elif op == "*":
                    bound = a.bound + b.bound
                elif op in ("|", "^"):
                    bound = max(a.bound, b.bound)
                elif op in ("/", "%", ">>"):
                    bound = a.bound
                elif op == "<<" and b.const is not None:
                    bound = a.bound + b.const
            if op == "&":
                known = [x.bound for x in (a, b) if x.bound is not None]
                bound = min(known) if known else None
                for x, m in ((a, b), (b, a)):
                    if (r := self._all_ones_mask(x, m)) is not None:
                        return r
            if op in ("/", "%"):
                # bmv2 asserts both operands are non-negative and the divisor positive;
                # floor and truncating division agree there.
                pass
            if op == "<<" and b.const is None:
                src = f"({a.src} << {b.src})"
            else:
                src = f"({a.src} {pyop} {b.src})"
            return Expr(src, DATA, bound, terms=(a, b), op=op)
        if op in ("==", "!=", "<", ">", "<=", ">="):
            a, b = self.compile(left, where), self.compile(right, where)
            if a.kind == HEADER or b.kind == HEADER:
                raise UnsupportedConstruct(f'header comparison "{op}"', where)
            if a.kind != b.kind:
                raise PipelineError(f"comparison of {a.kind} with {b.kind} in {where}")
            if a.kind == BOOL and op not in ("==", "!="):
                raise PipelineError(f"ordering of booleans in {where}")
            return Expr(f"({a.src} {op} {b.src})", BOOL)
        if op in ("and", "or"):
            a, b = self.boolean(left, where), self.boolean(right, where)
            return Expr(f"({a.src} {op} {b.src})", BOOL)
        if op == "not":
            a = self.boolean(right, where)
            return Expr(f"(not {a.src})", BOOL)
        if op == "~":
            a = self.data(right, where)
            return Expr(f"(~{a.src})", DATA, None)
        if op == "d2b":
            a = self.data(right, where)
            return Expr(f"({a.src} != 0)", BOOL)
        if op == "b2d":
            a = self.boolean(right, where)
            return Expr(f"(1 if {a.src} else 0)", DATA, 1)
        if op == "valid":
            h = self.compile(right, where)
            if h.kind != HEADER:
                raise UnsupportedConstruct('"valid" on a non-header operand', where)
            return Expr(f"(V[{self.L.header(h.header, where).index}] != 0)", BOOL)
        if op == "?":
            c = self.boolean(node.get("cond"), where)
            a, b = self.compile(left, where), self.compile(right, where)
            if a.kind != b.kind or a.kind not in (DATA, BOOL):
                raise UnsupportedConstruct(f'"?:" over {a.kind}/{b.kind}', where)
            bound = max(a.bound, b.bound) if a.bound is not None and b.bound is not None else None
            src = f"({a.src} if {c.src} else {b.src})"
            w = a.lazy or b.lazy
            if w is not None and a.kind == DATA and bound is not None and bound <= w:
                # a wide value chosen by a condition stays as stored
                raw = f"({a.raw_for(w)} if {c.src} else {b.raw_for(w)})"
                return Expr(f"_int({raw})", DATA, bound, raw=raw, lazy=w)
            return Expr(src, a.kind, bound)
        if op in ("two_comp_mod", "usat_cast", "sat_cast"):
            a, w = self.data(left, where), self.data(right, where)
            if w.const is None or w.const <= 0:
                raise UnsupportedConstruct(f'"{op}" with a non-constant width', where)
            n = w.const
            if op == "two_comp_mod":
                half, mask = 1 << (n - 1), (1 << n) - 1
                return Expr(f"((({a.src} + {lit(half)}) & {lit(mask)}) - {lit(half)})", DATA, None)
            if op == "usat_cast":
                return Expr(f"min(max({a.src}, 0), {mask_lit(n)})", DATA, n)
            return Expr(
                f"min(max({a.src}, {lit(-(1 << (n - 1)))}), {lit((1 << (n - 1)) - 1)})", DATA, None
            )
        if op in ("last_stack_index", "size_stack"):
            s = self.compile(right, where)
            if s.kind != STACK:
                raise PipelineError(f'"{op}" needs a header stack in {where}')
            slot = X_STACK0 + self.L.stacks[s.stack].index
            return Expr(
                f"(X[{slot}] - 1)" if op == "last_stack_index" else f"X[{slot}]", DATA, None
            )
        raise UnsupportedConstruct(f'expression operator "{op}"', where)

    def _all_ones_mask(self, x: Expr, m: Expr) -> Expr | None:
        """``x & m`` when `m` is an all-ones constant that `x` (at most one bit wider)
        needs no allocation for, else None (a plain ``&``)."""
        if m.const is None or m.const < 0 or (m.const + 1) & m.const:
            return None
        w = m.const.bit_length()
        if x.bound is not None and x.bound <= w:
            # p4c masks after every operation; an all-ones mask over a value that already
            # fits is the identity, so drop it (it is a measurable share of the cost).
            raw, lazy = (x.raw, x.lazy) if x.lazy else self._wide_product(x, w)
            return Expr(x.src, DATA, x.bound, x.const, raw=raw, lazy=lazy)
        if w < WIDE_WRAP_BITS or x.bound != w + 1:
            return None
        # a wide sum's carry out: the mask (an allocation as wide as the block) only when
        # the top bit is set
        if x.op == "+" and x.terms is not None and w in (x.terms[0].lazy, x.terms[1].lazy):
            return self._wide_add(x.terms, w, m.src)
        self.env["_wrap"] = wrap_carry
        raw, lazy = self._wide_product(x, w)
        return Expr(f"_wrap({x.src}, {w}, {m.src})", DATA, w, raw=raw, lazy=lazy)

    def _wide_product(self, x: Expr, w: int) -> tuple[str | None, int | None]:
        """(raw, lazy) of ``x mod 2^w`` when x is a value below 2^32 times a constant and
        w-bit values are `Wide` ones: `wide.wide_mul` on the constant's limbs, which a
        `wide_add` takes without an int; else (None, None)."""
        if x.op != "*" or x.terms is None or not self.lazy_register(w):
            return None, None
        for v, c in (x.terms, x.terms[::-1]):
            if c.const is not None and c.const >= 0 and v.bound is not None and v.bound <= 32:
                limbs = const_limbs(c.const, w)
                var = f"_WL{len(self.env)}"
                self.env[var] = limbs
                self.env["_wmul"] = wide_mul
                return f"_wmul({v.src}, {var}, {int(limbs.max())})", w
        return None, None

    def _wide_add(self, terms: tuple[Expr, Expr], w: int, mask: str) -> Expr:
        """``(a + b) & mask`` of two w-bit values, one of them wide: `wide.wide_add` on the
        values as stored (no int conversion when both are `Wide`)."""
        self.env["_wadd"] = wide_add
        a, b = terms
        raw = f"_wadd({a.raw_for(w)}, {b.raw_for(w)}, {w}, {mask})"
        return Expr(f"_int({raw})", DATA, w, raw=raw, lazy=w)
