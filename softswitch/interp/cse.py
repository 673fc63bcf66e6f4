"""Common subexpressions of a straight-line action body, computed once.

p4c's bmv2 backend propagates an action's local temporaries into the expressions that use
them, so one expression is written out again wherever its temporary was read:
p4reduce's `check_and_update_version` repeats the same 20-operator mask over a dozen
times in one assignment. This pass gives every repeated subexpression a local
(``_c0 = ...``) just before the statement where it first appears and reads that local
wherever it appears again while the names it reads keep their values.

Semantics are unchanged because only pure expressions are hoisted (field locals,
constants, action parameters ``P[k]``, arithmetic, comparisons, ``?:``, ``and``/``or``,
a wide field local's int ``_int(f<k>)``; never a register, ``F``/``V``/``X``, or another
call) and hoisting moves an evaluation only
within what the statement evaluates anyway, or evaluates one that cannot raise:

* an expression that can raise (a shift by a variable count, a division or modulo by a
  variable) is hoisted only when its first appearance is evaluated whenever its statement
  runs (not inside one arm of ``?:`` nor after the first operand of ``and``/``or``): it
  then raises exactly when the statement would have;
* an expression that cannot raise may be evaluated once where the original evaluated it
  on one path only; a shift count is "cannot raise" when it is a constant or a narrow
  unsigned field (``small_unsigned``), so the result stays small.

The body is rewritten as text, on the AST's column offsets: the generated literals (a wide
block's mask has 39 457 digits) never go through ``ast.unparse``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable

_SAFE_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)
_SHIFTS = (ast.LShift, ast.RShift)
_DIVS = (ast.FloorDiv, ast.Mod, ast.Div)
_UNARY = (ast.Invert, ast.Not, ast.USub, ast.UAdd)
_CMPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
MAX_CONST_SHIFT = 1 << 20  # a shift by a constant up to this is a bounded allocation


@dataclass
class _Occurrence:
    stmt: int  # index of the top-level statement
    node: ast.expr
    key: tuple
    unconditional: bool


@dataclass
class _Plan:
    temps: dict[tuple, str] = field(default_factory=dict)  # key -> local name
    first: dict[tuple, _Occurrence] = field(default_factory=dict)


def hoist_common(lines: list[str], small_unsigned: Callable[[str], bool]) -> list[str]:
    """`lines` (a straight-line body at indentation 0) with repeated pure subexpressions
    computed once; returned unchanged when there are none."""
    source = "\n".join(lines)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return lines
    stmts = tree.body
    occurrences = _occurrences(stmts, small_unsigned)
    plan = _plan(occurrences)
    if not plan.temps:
        return lines
    return _rewrite(source.split("\n"), stmts, occurrences, plan)


# -- what an expression is -------------------------------------------------------------


def _pure(
    node: ast.AST,
    small_unsigned: Callable[[str], bool],
    rec: Callable[[ast.AST], tuple[bool, bool]] | None = None,
) -> tuple[bool, bool]:
    """(pure, cannot raise) of an expression tree; `rec` gives a child's (a memo of this
    function: `_occurrences` asks of every subtree, which would walk each again)."""
    if rec is None:

        def rec(n: ast.AST) -> tuple[bool, bool]:
            return _pure(n, small_unsigned)

    if isinstance(node, ast.Name):
        return True, True
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, bool), True
    if isinstance(node, ast.Subscript):  # an action parameter P[k]: fixed during the action
        ok = (
            isinstance(node.value, ast.Name)
            and node.value.id == "P"
            and isinstance(node.slice, ast.Constant)
            and type(node.slice.value) is int
        )
        return ok, ok
    if isinstance(node, ast.BinOp):
        lp, ls = rec(node.left)
        rp, rs = rec(node.right)
        if not (lp and rp):
            return False, False
        safe = ls and rs
        if isinstance(node.op, _SAFE_BINOPS):
            return True, safe
        if isinstance(node.op, _SHIFTS):
            return True, safe and _small_count(node.right, small_unsigned)
        if isinstance(node.op, _DIVS):
            r = node.right
            nonzero = isinstance(r, ast.Constant) and type(r.value) is int and r.value != 0
            return True, safe and nonzero
        return False, False
    if isinstance(node, ast.UnaryOp):
        p, s = rec(node.operand)
        return (p, s) if isinstance(node.op, _UNARY) else (False, False)
    if isinstance(node, ast.Compare):
        if not all(isinstance(op, _CMPS) for op in node.ops):
            return False, False
        return _all_pure([node.left, *node.comparators], rec)
    if isinstance(node, ast.IfExp):
        return _all_pure([node.test, node.body, node.orelse], rec)
    if isinstance(node, ast.BoolOp):
        return _all_pure(node.values, rec)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "_int"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Name)
    ):
        return True, True  # a wide field local's int (wide.as_int): its value's, exactly
    return False, False


def _all_pure(
    nodes: list[ast.expr], rec: Callable[[ast.AST], tuple[bool, bool]]
) -> tuple[bool, bool]:
    pure, safe = True, True
    for n in nodes:
        p, s = rec(n)
        pure, safe = pure and p, safe and s
    return pure, safe


def _small_count(node: ast.expr, small_unsigned: Callable[[str], bool]) -> bool:
    """A shift count that is never negative and never builds a huge int."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int and 0 <= node.value <= MAX_CONST_SHIFT
    return isinstance(node, ast.Name) and small_unsigned(node.id)


def _worth(node: ast.expr) -> bool:
    """Whether a local saves work: an operation, not a bare name, constant or P[k]."""
    return isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.BoolOp))


# -- where expressions appear ----------------------------------------------------------


def _evaluated(stmt: ast.stmt) -> list[ast.expr]:
    """The expressions a top-level statement evaluates on its own line, every time it
    runs; statements in an `if` body are left alone."""
    if isinstance(stmt, ast.Assign) and stmt.lineno == stmt.end_lineno:
        return [stmt.value]
    if isinstance(stmt, ast.AugAssign) and stmt.lineno == stmt.end_lineno:
        return [stmt.value]
    if isinstance(stmt, ast.If) and stmt.test.lineno == stmt.test.end_lineno == stmt.lineno:
        return [stmt.test]
    return []


def _stored(stmt: ast.stmt) -> set[str]:
    """Names a statement may assign (anywhere inside it)."""
    out: set[str] = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.NamedExpr):
            out.add(n.target.id)
    return out


def _occurrences(stmts: list[ast.stmt], small_unsigned: Callable[[str], bool]) -> list[_Occurrence]:
    """Every pure, worthwhile subexpression the statements evaluate, keyed by its text and
    the version of each name it reads (a name's version changes when it is assigned)."""
    version: dict[str, int] = {}
    found: list[_Occurrence] = []
    # each subtree's facts once (by node identity, the tree outliving the pass): asked of
    # every subexpression, each would otherwise walk its whole subtree again
    pure_of: dict[int, tuple[bool, bool]] = {}
    text_of: dict[int, str] = {}
    names_of: dict[int, frozenset[str]] = {}

    def pure(n: ast.AST) -> tuple[bool, bool]:
        r = pure_of.get(id(n))
        if r is None:
            r = pure_of[id(n)] = _pure(n, small_unsigned, pure)
        return r

    def names_in(n: ast.AST) -> frozenset[str]:
        r = names_of.get(id(n))
        if r is None:
            if isinstance(n, ast.Name):
                r = frozenset((n.id,))
            else:
                r = frozenset().union(*(names_in(c) for c in ast.iter_child_nodes(n)))
            names_of[id(n)] = r
        return r

    def visit(i: int, node: ast.expr, unconditional: bool) -> None:
        is_pure, safe = pure(node)
        if is_pure and _worth(node):
            names = sorted(names_in(node))
            key = (_text(node, text_of), tuple((n, version.get(n, 0)) for n in names))
            found.append(_Occurrence(i, node, key, unconditional or safe))
        for child, uncond in _children(node):
            visit(i, child, unconditional and uncond)

    for i, stmt in enumerate(stmts):
        for expr in _evaluated(stmt):
            visit(i, expr, True)
        for name in _stored(stmt):
            version[name] = version.get(name, 0) + 1
    return found


def _text(node: ast.AST, memo: dict[int, str]) -> str:
    """A canonical text of an expression tree (ast.dump would print a wide literal in
    decimal, which CPython refuses over 4 300 digits), each subtree's made once (`memo`)."""
    r = memo.get(id(node))
    if r is not None:
        return r
    if isinstance(node, ast.Constant):
        v = node.value
        r = hex(v) if type(v) is int else repr(v)
    elif isinstance(node, ast.Name):
        r = node.id
    else:
        parts = [_text(c, memo) for c in ast.iter_child_nodes(node)]
        r = f"{type(node).__name__}({','.join(parts)})"
    memo[id(node)] = r
    return r


def _children(node: ast.expr) -> list[tuple[ast.expr, bool]]:
    """(child, evaluated whenever `node` is) of an expression."""
    if isinstance(node, ast.IfExp):
        return [(node.test, True), (node.body, False), (node.orelse, False)]
    if isinstance(node, ast.BoolOp):
        return [(v, k == 0) for k, v in enumerate(node.values)]
    if isinstance(node, ast.Compare):
        return [(node.left, True)] + [(c, k == 0) for k, c in enumerate(node.comparators)]
    return [(c, True) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]


def _plan(occurrences: list[_Occurrence]) -> _Plan:
    """A local for each key that appears twice or more and whose first appearance may be
    evaluated before its statement (see the module docstring)."""
    counts: dict[tuple, int] = {}
    plan = _Plan()
    for occ in occurrences:
        counts[occ.key] = counts.get(occ.key, 0) + 1
        plan.first.setdefault(occ.key, occ)
    for key, n in counts.items():
        if n >= 2 and plan.first[key].unconditional:
            plan.temps[key] = f"_c{len(plan.temps)}"
    return plan


# -- the rewrite -----------------------------------------------------------------------


def _span(node: ast.expr) -> tuple[int, int]:
    return node.col_offset, node.end_col_offset or node.col_offset


def _replaced(text: str, node: ast.expr, plan: _Plan, by_node: dict) -> str:
    """`node`'s text (its line is `text`) with each outermost subexpression that has a
    local replaced by that local."""
    start, end = _span(node)
    spans: list[tuple[int, int, str]] = []

    def walk(n: ast.expr) -> None:
        key = by_node.get(id(n))
        if n is not node and key in plan.temps:
            spans.append((*_span(n), plan.temps[key]))
            return
        for child in ast.iter_child_nodes(n):
            if isinstance(child, ast.expr):
                walk(child)

    walk(node)
    out, at = [], start
    for s, e, name in sorted(spans):
        out += [text[at:s], name]
        at = e
    out.append(text[at:end])
    return "".join(out)


def _rewrite(
    lines: list[str], stmts: list[ast.stmt], occurrences: list[_Occurrence], plan: _Plan
) -> list[str]:
    by_node = {id(o.node): o.key for o in occurrences}
    sizes: dict[int, int] = {}
    # the locals each statement defines, inner (smaller) expressions first
    defined: dict[int, list[_Occurrence]] = {}
    for key in plan.temps:
        occ = plan.first[key]
        defined.setdefault(occ.stmt, []).append(occ)
    out: list[str] = []
    for i, stmt in enumerate(stmts):
        first = lines[stmt.lineno - 1]
        for occ in sorted(defined.get(i, []), key=lambda o: _size(o.node, sizes)):
            body = _replaced(first, occ.node, plan, by_node)
            out.append(f"{plan.temps[occ.key]} = {body}")
        new_first = first
        for expr in reversed(_evaluated(stmt)):
            s, e = _span(expr)
            key = by_node.get(id(expr))
            text = plan.temps[key] if key in plan.temps else _replaced(first, expr, plan, by_node)
            new_first = new_first[:s] + text + new_first[e:]
        out.append(new_first)
        out.extend(lines[stmt.lineno : stmt.end_lineno])
    return out


def _size(node: ast.AST, memo: dict[int, int]) -> int:
    """The nodes of a subtree, each subtree's counted once (`memo`): the locals of one
    statement are nested in each other."""
    r = memo.get(id(node))
    if r is None:
        r = memo[id(node)] = 1 + sum(_size(c, memo) for c in ast.iter_child_nodes(node))
    return r
