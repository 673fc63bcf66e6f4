"""Ingress and egress controls -> generated functions over the control nodes, plus tables.

``N<k>(F, V, X) -> next node`` for a pipeline's first node and every node a table or
another function returns; the nodes after it run inside it (``Controls._emit_nodes``).  To
cut Python calls per packet, a node with a single predecessor, or a small one, is inlined
into its predecessors (up to a depth), and p4c's keyless const-default "dummy tables" (its
encoding of a direct action call) become plain calls.  Tables are
``interp.tables.Table`` objects the generated code looks up; their actions and next nodes
are bound after the module exists (``Controls.finish``), together with default actions and
const entries.
"""

from __future__ import annotations

import heapq
from collections.abc import Container
from dataclasses import dataclass
from typing import Any, Callable, Union

from ..errors import PipelineError, UnsupportedConstruct
from .actions import has_exit
from .expr import X_EXIT, lit, mask_lit, parse_hexstr
from .gen import Gen, ident
from .tables import ActionRef, KeySpec, Table

_MAX_INLINE_DEPTH = 25
# A node of several predecessors whose body (with what it inlines) has at most this many
# lines is inlined into each of them too: a p4reduce packet passes some twenty such join
# nodes, each a Python call and a turn of the node loop otherwise
_SMALL_NODE_LINES = 12
# a function runs on into its joins (see _emit_nodes) until it has this many lines
_MAX_FUNCTION_LINES = 2000


@dataclass(frozen=True)
class CondNode:
    src: str  # the condition's Python expression
    true_next: str | None
    false_next: str | None


@dataclass(frozen=True)
class CallNode:
    fn: str  # generated action function
    params: str  # its action data, as Python source
    may_exit: bool
    next: str | None


@dataclass(frozen=True)
class TableNode:
    lines: list[str]  # lookup + action call + return of the next node
    targets: tuple[str | None, ...]  # next nodes, each once, in the JSON's order


Node = Union[CondNode, CallNode, TableNode]
Ref = Callable[[Union[str, None], str], str]


class Controls:
    """The control nodes of every pipeline of one JSON."""

    def __init__(self, g: Gen) -> None:
        self.g = g
        self.node_names: dict[str, str] = {}
        self.nodes: dict[str, Node] = {}
        # per table: its variable, JSON, next-node spec and a factory of fresh instances
        self._table_specs: list[
            tuple[str, dict[str, Any], dict[str, Any], Callable[[], Table]]
        ] = []

    def emit(self) -> dict[str, str | None]:
        """Emit every node; returns pipeline name -> function name of its first node."""
        g = self.g
        firsts: dict[str, str | None] = {}
        counter = 0
        for pl in g.j.get("pipelines", []):
            if pl.get("action_profiles"):
                raise UnsupportedConstruct("action profile / selector", f'pipeline "{pl["name"]}"')
            for kind in ("tables", "conditionals", "action_calls"):
                for obj in pl.get(kind, []):
                    if obj["name"] in self.node_names:  # bmv2 keeps one global map too
                        raise PipelineError(f'duplicate control node name "{obj["name"]}"')
                    self.node_names[obj["name"]] = ident("N", counter)
                    counter += 1
        # Each node becomes a record; functions are emitted afterwards so that a node with a
        # single predecessor can be inlined into it (fewer Python calls per packet).
        for pl in g.j.get("pipelines", []):
            firsts[pl["name"]] = self._ref(pl.get("init_table"), f'pipeline "{pl["name"]}"')
            for c in pl.get("conditionals", []):
                where = f'conditional "{c["name"]}"'
                e = g.X.boolean(c["expression"], where)
                self._ref(c.get("true_next"), where)
                self._ref(c.get("false_next"), where)
                self.nodes[c["name"]] = CondNode(e.src, c.get("true_next"), c.get("false_next"))
            for ac in pl.get("action_calls", []):
                where = f'action call "{ac["name"]}"'
                aid = ac["action_id"]
                if aid not in g.action_fn_names:
                    raise PipelineError(f"{where}: unknown action id {aid}")
                self._ref(ac.get("next_node"), where)
                self.nodes[ac["name"]] = CallNode(
                    g.action_fn_names[aid], "()", has_exit(g, aid), ac.get("next_node")
                )
            for t in pl.get("tables", []):
                self._table(t)
        self._emit_nodes(
            [pl["init_table"] for pl in g.j.get("pipelines", []) if pl.get("init_table")]
        )
        return firsts

    def _ref(self, name: str | None, where: str) -> str:
        if name is None:
            return "None"
        if name not in self.node_names:
            raise PipelineError(f"{where}: unknown control node {name!r}")
        return self.node_names[name]

    # -- emitting nodes ------------------------------------------------------------------
    def _emit_nodes(self, inits: list[str]) -> None:
        """One function per entry node: a pipeline's first node, a table's next node, or a
        node some emitted body returns. What an entry's body would return to the node loop
        it runs itself, up to a size: each such node is a block of the same function, in
        topological order, entered when the variable ``_at`` names it, or with no test
        when every path still running goes there. A node that several bodies would each
        inline or return is then written once per function, not once per path to it (the
        module is smaller and loads faster), and a packet makes fewer Python calls. A
        table's next node is the one its lookup returns: always a function."""
        preds: dict[str, int] = {}
        for info in self.nodes.values():
            for n in set(_successors(info)):
                if n is not None:
                    preds[n] = preds.get(n, 0) + 1
        topo = _topological(self.nodes)
        s = self.g.src
        sizes: dict[str, int] = {}
        leaves: dict[tuple[str, int], set[str]] = {}

        def inlined(name: str) -> bool:
            """Whether a reference to `name` becomes its body: a node of one predecessor,
            or a small one (its code written again at each predecessor saves a call)."""
            return preds.get(name, 0) == 1 or size(name) <= _SMALL_NODE_LINES

        def ref_size(name: str | None) -> int:
            return size(name) if name is not None and inlined(name) else 1

        def size(name: str) -> int:
            """Lines of `name`'s body with what it inlines (memoised: the graph is a DAG)."""
            if name not in sizes:
                info = self.nodes[name]
                if isinstance(info, CondNode):
                    n = 3 + ref_size(info.true_next) + ref_size(info.false_next)
                elif isinstance(info, CallNode):
                    n = 2 + 2 * info.may_exit + ref_size(info.next)
                else:
                    n = 1 + len(info.lines)
                sizes[name] = n
            return sizes[name]

        def ends(name: str, depth: int, stop: Container[str]) -> set[str]:
            """The nodes `name`'s body at `depth` ends in, exactly as `succ` writes it: a
            jump to a node of `stop` (a block of the function), even where that node would
            be inlined, or a ``return`` of a node not inlined (a table's next nodes are its
            lookup's, not its body's)."""
            out: set[str] = set()
            info = self.nodes[name]
            if not isinstance(info, TableNode):
                for t in _successors(info):
                    if t is None:
                        continue
                    if t not in stop and inlined(t) and depth < _MAX_INLINE_DEPTH:
                        out |= ends(t, depth + 1, stop)
                    else:
                        out.add(t)
            return out

        def returned(name: str, depth: int) -> set[str]:
            """The nodes `name`'s body at `depth` would end in a ``return`` of, with no
            block yet (`ends`)."""
            key = (name, depth)
            if key not in leaves:
                leaves[key] = ends(name, depth, ())
            return leaves[key]

        def blocks_of(entry: str) -> dict[str, int]:
            """The nodes the function of `entry` runs as blocks, each with its number, in
            topological order (nearest first while the function has room)."""
            out: dict[str, int] = {}
            heap = [(topo[t], t) for t in returned(entry, 0)]
            heapq.heapify(heap)
            lines = size(entry)
            while heap:
                _, t = heapq.heappop(heap)
                if t in out or lines + size(t) > _MAX_FUNCTION_LINES:
                    continue
                lines += size(t)
                out[t] = len(out) + 1
                for u in returned(t, 0):
                    heapq.heappush(heap, (topo[u], u))
            return out

        def onto(name: str, depth: int) -> set[str]:
            """The blocks `name`'s body at `depth` runs on into (`ends`)."""
            return ends(name, depth, blocks) & blocks.keys()

        def unguarded(entry: str) -> set[str]:
            """The blocks every path that runs on past the blocks before them reaches: no
            test of ``_at`` before them, and no path sets ``_at`` for them."""
            out: set[str] = set()
            live = onto(entry, 0)
            for t in blocks:
                if live == {t}:
                    out.add(t)
                live = (live - {t}) | onto(t, 0)
            return out

        def succ(name: str | None, ind: int, depth: int) -> None:
            if name is not None and name in free:
                s.emit("pass", ind)  # on into the block of `name`
            elif name is not None and name in blocks:
                s.emit(f"_at = {blocks[name]}", ind)
            elif name is None:
                s.emit("return None", ind)
            elif inlined(name) and depth < _MAX_INLINE_DEPTH:
                body(name, ind, depth + 1)
            else:
                s.emit(f"return {self.node_names[name]}", ind)
                refs.append(name)

        def body(name: str, ind: int, depth: int) -> None:
            info = self.nodes[name]
            s.emit(f"# {name}", ind)
            if isinstance(info, CondNode):
                s.emit(f"if {info.src}:", ind)
                succ(info.true_next, ind + 1, depth)
                s.emit("else:", ind)
                succ(info.false_next, ind + 1, depth)
            elif isinstance(info, CallNode):
                s.emit(f"{info.fn}(F, V, X, {info.params})", ind)
                if info.may_exit:  # an exit ends the control: no block after it runs
                    s.emit(f"if X[{X_EXIT}]:", ind)
                    s.emit("return None", ind + 1)
                succ(info.next, ind, depth)
            else:
                for line in info.lines:
                    s.emit(line, ind)

        refs: list[str] = []
        blocks: dict[str, int] = {}
        free: set[str] = set()
        # a table's next nodes are functions its entries return (bound by `finish`)
        tables = (info for info in self.nodes.values() if isinstance(info, TableNode))
        work = inits + sorted((t for i in tables for t in i.targets if t), key=topo.get)
        self.entries: set[str] = set()
        while work:
            name = work.pop(0)
            if name in self.entries:
                continue
            self.entries.add(name)
            refs, blocks = [], blocks_of(name)
            free = unguarded(name)
            s.emit(f"def {self.node_names[name]}(F, V, X):")
            if len(free) < len(blocks):
                # a path on into a block past a test of ``_at`` may not have set it
                s.emit("_at = 0", 1)
            body(name, 1, 0)
            for t, k in blocks.items():
                if t in free:
                    body(t, 1, 0)
                else:
                    s.emit(f"if _at == {k}:", 1)
                    body(t, 2, 0)
            s.emit("")
            work += [r for r in refs if r not in self.entries]

    # -- tables --------------------------------------------------------------------------
    def _table(self, t: dict[str, Any]) -> None:
        g = self.g
        where = f'table "{t["name"]}"'
        if t.get("type", "simple") != "simple":
            raise UnsupportedConstruct(f'table implementation "{t.get("type")}"', where)
        if t.get("with_counters"):
            raise UnsupportedConstruct("direct counters", where)
        if t.get("direct_meters"):
            raise UnsupportedConstruct("direct meters", where)
        kind = t.get("match_type", "exact")
        if kind not in ("exact", "lpm", "ternary", "range"):
            raise UnsupportedConstruct(f'table match type "{kind}"', where)
        keys, key_src = self._keys(t, where)
        kind = _lookup_kind(kind, keys)
        actions: dict[str, ActionRef] = {}
        ids = t.get("action_ids", [])
        names = t.get("actions", [])
        if len(ids) != len(names):
            raise PipelineError(f"{where}: action_ids and actions differ in length")
        for aid, an in zip(ids, names):
            if aid not in g.actions_by_id:
                raise PipelineError(f"{where}: unknown action id {aid}")
            a = g.actions_by_id[aid]
            actions[an] = ActionRef(
                an,
                None,  # type: ignore[arg-type]  # bound in finish()
                [rd["bitwidth"] for rd in a.get("runtime_data", [])],
            )
        nt = t.get("next_tables", {}) or {}
        hitmiss = "__HIT__" in nt or "__MISS__" in nt
        for tgt in list(nt.values()) + [t.get("base_default_next")]:
            self._ref(tgt, where)
        dflt = t.get("default_entry")
        const_default = bool(dflt and (dflt.get("action_const") or dflt.get("action_entry_const")))
        var = ident("T", t["id"])
        spec = {"nt": nt, "hitmiss": hitmiss, "base": t.get("base_default_next")}
        max_size = int(t.get("max_size", 1024))

        def make(name: str = t["name"], kind: str = kind, keys: list[KeySpec] = keys) -> Table:
            # each pipeline a table of its own, its actions bound by `finish`
            refs = {an: ActionRef(an, None, a.widths) for an, a in actions.items()}  # type: ignore[arg-type]
            return Table(name, kind, keys, refs, max_size, _unbound_next, const_default)

        self._table_specs.append((var, t, spec, make))
        if not keys and const_default and dflt:
            # a p4c "dummy table" (direct action call): always misses, const default action
            aid = dflt["action_id"]
            an = _action_name(t, aid)
            if an is None:
                raise PipelineError(f"{where}: default action id {aid} not in the table's actions")
            widths = actions[an].widths
            data = tuple(
                parse_hexstr(x, where) & ((1 << w) - 1)
                for x, w in zip(dflt.get("action_data", []), widths)
            )
            nxt = nt.get("__MISS__") if hitmiss else nt.get(an, t.get("base_default_next"))
            self.nodes[t["name"]] = CallNode(
                g.action_fn_names[aid], repr(data), has_exit(g, aid), nxt
            )
            return
        lines = []
        if not keys:
            lines.append(f"r = {var}.default")
        else:
            if kind == "exact" and len(keys) == 1:
                lines.append(f"r = {var}._exact.get({key_src[0]})")
            elif kind == "exact":
                lines.append(f"r = {var}._exact.get(({', '.join(key_src)},))")
            else:
                lines.append(f"r = {var}.lookup(({', '.join(key_src)},))")
            lines += ["if r is None:", f"    r = {var}.default"]
        lines += ["if r[0] is not None:", "    r[0](F, V, X, r[1])", "return r[2]"]
        # in the JSON's order, not a set's: the order of the generated functions follows
        # from it (a topological order of the nodes), and must not change with the hash seed
        targets = tuple(dict.fromkeys([*nt.values(), t.get("base_default_next")]))
        self.nodes[t["name"]] = TableNode(lines, targets)

    def _keys(self, t: dict[str, Any], where: str) -> tuple[list[KeySpec], list[str]]:
        """The table's key fields and the Python expression of each (masked as bmv2 does)."""
        g = self.g
        keys: list[KeySpec] = []
        key_src: list[str] = []
        for k in t.get("key", []):
            mt = k.get("match_type")
            tgt = k.get("target")
            name = k.get("name") or (".".join(tgt) if isinstance(tgt, list) else str(tgt))
            if mt == "valid":
                h = g.L.header(tgt, where)
                keys.append(KeySpec("exact", 1, name))
                key_src.append(f"V[{h.index}]")
                continue
            if mt not in ("exact", "lpm", "ternary", "range", "optional"):
                raise UnsupportedConstruct(f'key match type "{mt}"', where)
            e = g.X.field(tgt, where)
            if tgt[1] == "$valid$":
                wd = 1
            else:
                wd = g.L.widths[g.L.field_index(tgt[0], tgt[1], where)]
            src = e.src if e.bound is not None else f"({e.src} & {mask_lit(wd)})"
            if k.get("mask") is not None:
                src = f"({src} & {lit(parse_hexstr(k['mask'], where))})"
            keys.append(KeySpec(mt, wd, name))
            key_src.append(src)
        if sum(1 for k in keys if k.match_type == "lpm") > 1:
            raise UnsupportedConstruct("more than one lpm key field", where)
        return keys, key_src

    # -- after the module exists -----------------------------------------------------------
    def new_tables(self, ns: dict[str, Any]) -> dict[str, Table]:
        """Fresh, empty tables for one pipeline, put into its namespace `ns` (before the
        module is executed into it and `finish` binds them); returns them by name."""
        out: dict[str, Table] = {}
        for var, t, _, make in self._table_specs:
            ns[var] = out[t["name"]] = make()
        return out

    def finish(self, ns: dict[str, Any]) -> None:
        """Bind action functions and next nodes now that the generated module exists; set
        default actions and install const entries."""
        by_node = {name: ns[self.node_names[name]] for name in self.entries}
        for var, t, spec, _ in self._table_specs:
            table: Table = ns[var]
            ids = t.get("action_ids", [])
            for aid, an in zip(ids, t.get("actions", [])):
                table.actions[an].fn = ns[self.g.action_fn_names[aid]]
            nt, hitmiss, base = spec["nt"], spec["hitmiss"], spec["base"]

            def next_for(
                an: str, hit: bool, nt: dict = nt, hitmiss: bool = hitmiss, base: str | None = base
            ) -> Any:
                if hitmiss:
                    tgt = nt.get("__HIT__" if hit else "__MISS__")
                elif an and an in nt:
                    tgt = nt[an]
                else:
                    tgt = base
                return by_node[tgt] if tgt is not None else None

            # a p4c dummy table is a CallNode: no lookup of it runs, nor returns a next node
            dummy = isinstance(self.nodes[t["name"]], CallNode)
            table.next_for = _unbound_next if dummy else next_for
            where = f'table "{t["name"]}"'
            dflt = t.get("default_entry")
            if dflt:
                an = _action_name(t, dflt["action_id"])
                if an is None:
                    raise PipelineError(
                        f"{where}: default action id {dflt['action_id']} not in the table's actions"
                    )
                data = [parse_hexstr(x, where) for x in dflt.get("action_data", [])]
                widths = table.actions[an].widths
                data = [d & ((1 << w) - 1) for d, w in zip(data, widths)]
                table.set_default(an, data, force=True)
                table.initial_default = (an, tuple(data))
            else:
                table.reset_default()
            entries = t.get("entries") or []
            for e in entries:
                _add_const_entry(table, t, e, where)
            if entries:
                table.immutable = True


def _unbound_next(action: str, hit: bool) -> Any:
    """A table's next-node function until ``Controls.finish`` binds the real one (and for
    good, for a dummy table, whose node is a direct action call)."""
    return None


def _successors(info: Node) -> list[str | None]:
    if isinstance(info, CondNode):
        return [info.true_next, info.false_next]
    if isinstance(info, CallNode):
        return [info.next]
    return list(info.targets)


def _topological(nodes: dict[str, Node]) -> dict[str, int]:
    """Each node's place in a topological order of the control graph (a DAG: P4 controls
    have no loops), iteratively: a long chain must not exhaust Python's stack."""
    order: list[str] = []
    seen: set[str] = set()
    for root in nodes:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(_successors(nodes[root])))]
        while stack:
            name, it = stack[-1]
            nxt = next((t for t in it if t is not None and t not in seen), None)
            if nxt is None:
                order.append(name)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(_successors(nodes[nxt]))))
    return {name: len(order) - k for k, name in enumerate(order)}


def _lookup_kind(kind: str, keys: list[KeySpec]) -> str:
    """The lookup structure a table needs (exact dict, lpm dicts, or a ternary scan):
    bmv2's table match_type, corrected by the key fields it actually has."""
    if kind == "range":
        kind = "ternary"
    if kind == "lpm" and not any(k.match_type == "lpm" for k in keys):
        kind = "exact"
    if kind == "exact" and any(k.match_type != "exact" for k in keys):
        kind = "ternary"
    if kind == "lpm" and any(k.match_type not in ("exact", "lpm") for k in keys):
        kind = "ternary"
    return kind


def _action_name(t: dict[str, Any], aid: Any) -> str | None:
    """Name of action ``aid`` among the table's actions (None: not one of them)."""
    return next(
        (n for i, n in zip(t.get("action_ids", []), t.get("actions", [])) if i == aid), None
    )


def _add_const_entry(table: Table, t: dict[str, Any], e: dict[str, Any], where: str) -> None:
    """One of the JSON's const entries, with p4c's bmv2 priority as its rank."""
    match: list[Any] = []
    for km, ks in zip(e.get("match_key", []), table.keys):
        mt = km.get("match_type")
        if mt in ("exact", "valid"):
            match.append(int(km["key"]) if mt == "valid" else parse_hexstr(km["key"], where))
        elif mt == "lpm":
            match.append((parse_hexstr(km["key"], where), km["prefix_length"]))
        elif mt in ("ternary", "optional"):
            v = parse_hexstr(km["key"], where)
            m = (
                parse_hexstr(km["mask"], where)
                if km.get("mask") is not None
                else (1 << ks.width) - 1
            )
            if ks.match_type == "optional":
                match.append(None if m == 0 else v)
            else:
                match.append((v, m))
        elif mt == "range":
            match.append((parse_hexstr(km["start"], where), parse_hexstr(km["end"], where)))
        else:
            raise UnsupportedConstruct(f'const entry match type "{mt}"', where)
    ae = e.get("action_entry", {})
    aid = ae.get("action_id")
    an = _action_name(t, aid)
    if an is None:
        raise PipelineError(f"{where}: const entry action id {aid} not in the table")
    data = [parse_hexstr(x, where) for x in ae.get("action_data", [])]
    prio = e.get("priority")
    try:
        table.add(
            match,
            an,
            data,
            prio if table.needs_priority else None,
            const_rank=prio if isinstance(prio, int) else 0,
        )
    except Exception as exc:  # noqa: BLE001 - re-raised as a load error
        raise PipelineError(f"{where}: bad const entry: {exc}") from exc
