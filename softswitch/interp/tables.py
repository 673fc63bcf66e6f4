"""Match-action tables: entry storage, validation and lookup with bmv2's ordering rules.

* exact tables: one dict keyed by the (masked) key tuple.
* lpm tables: one dict per prefix length, probed longest first (bmv2 uses a trie; same result).
* ternary / range tables (incl. optional and lpm fields inside them): a list scanned for the
  best entry.  bmv2 picks the numerically lowest bmv2-priority and, on ties, the entry with
  the lowest handle (its entry list is ordered by handle).  Control-plane priorities follow
  P4Runtime (larger wins), so their rank is ``-priority``; const entries from the JSON keep
  p4c's bmv2 priority (smaller wins) as rank.  Both never coexist: const tables are immutable.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import AlreadyExists, InvalidArgument, NotFound
from ..interface import Entry  # what table_entries() returns

ActionFn = Callable[..., None]


class ResourceExhausted(InvalidArgument):
    """Table full (bmv2 refuses entries beyond max_size)."""


@dataclass
class KeySpec:
    match_type: str  # exact | lpm | ternary | range | optional
    width: int
    name: str


@dataclass
class ActionRef:
    name: str
    fn: ActionFn
    widths: list[int]


class _Stored:
    __slots__ = ("handle", "match", "norm", "action", "params", "priority", "rank", "result")

    def __init__(
        self,
        handle: int,
        match: list[Any],
        norm: tuple,
        action: str,
        params: tuple[int, ...],
        priority: int | None,
        rank: int,
        result: tuple,
    ) -> None:
        self.handle, self.match, self.norm = handle, match, norm
        self.action, self.params, self.priority, self.rank = action, params, priority, rank
        self.result = result


class Table:
    """Runtime state of one table.  ``lookup(key)`` returns (action_fn, params, next_node)."""

    def __init__(
        self,
        name: str,
        kind: str,
        keys: list[KeySpec],
        actions: dict[str, ActionRef],
        max_size: int,
        next_for: Callable[[str, bool], Any],
        const_default: bool,
    ) -> None:
        self.name = name
        self.kind = kind  # exact | lpm | ternary (ternary also for range)
        self.keys = keys
        self.actions = actions
        self.max_size = max_size
        self.next_for = next_for  # (action name, hit) -> next node callable
        self.const_default = const_default
        self.immutable = False  # true once the JSON gave const entries
        self.needs_priority = any(k.match_type in ("ternary", "range", "optional") for k in keys)
        self.entries: dict[tuple, _Stored] = {}
        self._free: list[int] = []
        self._next_handle = 0
        self.default: tuple = (None, (), None)
        self.default_name = ""
        self.default_params: tuple[int, ...] = ()
        self.initial_default: tuple[str, tuple[int, ...]] = ("", ())
        self._exact: dict[Any, tuple] = {}
        self._lpm: list[tuple[int, int, dict]] = []
        self._lpm_index = next((i for i, k in enumerate(keys) if k.match_type == "lpm"), -1)
        self._list: list[_Stored] = []
        self._scan: list[tuple] = []  # (rank, handle, conds, result), best first

    # -- validation ----------------------------------------------------------------------
    def _norm(self, match: list[Any]) -> tuple:
        if len(match) != len(self.keys):
            raise InvalidArgument(
                f"table {self.name}: expected {len(self.keys)} match fields, got {len(match)}"
            )
        out = []
        for k, m in zip(self.keys, match):
            full = (1 << k.width) - 1

            def chk(v: Any, what: str, k: Any = k, full: int = full) -> int:
                if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > full:
                    raise InvalidArgument(
                        f"table {self.name} key {k.name}: {what} {v!r} does "
                        f"not fit in {k.width} bits"
                    )
                return v

            if k.match_type == "exact":
                out.append(("e", chk(m, "value")))
            elif k.match_type == "lpm":
                if not (isinstance(m, (tuple, list)) and len(m) == 2):
                    raise InvalidArgument(
                        f"table {self.name} key {k.name}: lpm needs (value, prefix_len)"
                    )
                v, plen = chk(m[0], "value"), m[1]
                if isinstance(plen, bool) or not isinstance(plen, int) or not 0 <= plen <= k.width:
                    raise InvalidArgument(
                        f"table {self.name} key {k.name}: bad prefix length {plen!r}"
                    )
                mask = full ^ ((1 << (k.width - plen)) - 1)
                out.append(("l", v & mask, plen, mask))
            elif k.match_type == "ternary" and not isinstance(m, (tuple, list)):
                # p4c writes P4 'optional' keys as ternary in the bmv2 JSON; the server passes
                # them per softswitch.interface as None (wildcard) or a value (exact).
                out.append(("t", 0, 0) if m is None else ("t", chk(m, "value"), full))
            elif k.match_type == "ternary":
                if not (isinstance(m, (tuple, list)) and len(m) == 2):
                    raise InvalidArgument(
                        f"table {self.name} key {k.name}: ternary needs (value, mask)"
                    )
                v, mask = chk(m[0], "value"), chk(m[1], "mask")
                out.append(("t", v & mask, mask))
            elif k.match_type == "range":
                if not (isinstance(m, (tuple, list)) and len(m) == 2):
                    raise InvalidArgument(f"table {self.name} key {k.name}: range needs (lo, hi)")
                lo, hi = chk(m[0], "low"), chk(m[1], "high")
                if lo > hi:
                    raise InvalidArgument(f"table {self.name} key {k.name}: low {lo} > high {hi}")
                out.append(("r", lo, hi))
            elif k.match_type == "optional":
                if m is None:
                    out.append(("t", 0, 0))
                else:
                    out.append(("t", chk(m, "value"), full))
            else:  # pragma: no cover - refused at load
                raise InvalidArgument(f"match type {k.match_type}")
        return tuple(out)

    def _check_action(self, action: str, params: list[int]) -> tuple[ActionRef, tuple[int, ...]]:
        ref = self.actions.get(action)
        if ref is None:
            raise InvalidArgument(f"action {action!r} is not an action of table {self.name}")
        if len(params) != len(ref.widths):
            raise InvalidArgument(
                f"action {action}: expected {len(ref.widths)} parameters, got {len(params)}"
            )
        for i, (p, w) in enumerate(zip(params, ref.widths)):
            if isinstance(p, bool) or not isinstance(p, int) or p < 0 or p >= (1 << w):
                raise InvalidArgument(
                    f"action {action}: parameter {i} = {p!r} does not fit in {w} bits"
                )
        return ref, tuple(params)

    def _prio(self, priority: int | None) -> tuple[int | None, int]:
        if self.needs_priority:
            if (
                priority is None
                or isinstance(priority, bool)
                or not isinstance(priority, int)
                or priority <= 0
                or priority >= (1 << 31)
            ):
                raise InvalidArgument(f"table {self.name} needs a priority in [1, 2**31)")
            return priority, -priority
        if priority not in (None, 0):
            raise InvalidArgument(
                f"table {self.name} has no ternary/range/optional key: priority must be unset"
            )
        return None, 0

    def _dupkey(self, norm: tuple, priority: int | None) -> tuple:
        return (norm, priority) if self.needs_priority else (norm,)

    # -- control plane -------------------------------------------------------------------
    def add(
        self,
        match: list[Any],
        action: str,
        params: list[int],
        priority: int | None,
        *,
        const_rank: int | None = None,
    ) -> int:
        if self.immutable and const_rank is None:
            raise InvalidArgument(f"table {self.name} has const entries and is immutable")
        norm = self._norm(match)
        if const_rank is None:
            prio, rank = self._prio(priority)
        else:
            prio, rank = priority, const_rank
        ref, p = self._check_action(action, params)
        dk = self._dupkey(norm, prio)
        if dk in self.entries:
            raise AlreadyExists(f"table {self.name}: entry already exists")
        if len(self.entries) >= self.max_size:
            raise ResourceExhausted(f"table {self.name} is full ({self.max_size} entries)")
        if self._free:
            handle = min(self._free)
            self._free.remove(handle)
        else:
            handle = self._next_handle
            self._next_handle += 1
        st = _Stored(
            handle,
            list(match),
            norm,
            action,
            p,
            prio,
            rank,
            (ref.fn, p, self.next_for(action, True)),
        )
        self.entries[dk] = st
        self._index_add(st)
        return handle

    def _find(self, match: list[Any], priority: int | None) -> tuple:
        norm = self._norm(match)
        prio = priority if self.needs_priority else None
        dk = self._dupkey(norm, prio)
        if dk not in self.entries:
            raise NotFound(f"table {self.name}: no such entry")
        return dk

    def modify(
        self, match: list[Any], action: str, params: list[int], priority: int | None
    ) -> None:
        if self.immutable:
            raise InvalidArgument(f"table {self.name} has const entries and is immutable")
        dk = self._find(match, priority)
        ref, p = self._check_action(action, params)
        st = self.entries[dk]
        st.action, st.params = action, p
        self._index_remove(st)
        st.result = (ref.fn, p, self.next_for(action, True))
        self._index_add(st)

    def delete(self, match: list[Any], priority: int | None) -> None:
        if self.immutable:
            raise InvalidArgument(f"table {self.name} has const entries and is immutable")
        dk = self._find(match, priority)
        st = self.entries.pop(dk)
        self._free.append(st.handle)
        self._index_remove(st)

    def set_default(self, action: str, params: list[int], *, force: bool = False) -> None:
        if self.const_default and not force:
            raise InvalidArgument(f"table {self.name}: the default action is const")
        ref, p = self._check_action(action, params)
        self.default_name, self.default_params = action, p
        self.default = (ref.fn, p, self.next_for(action, False))

    def reset_default(self) -> None:
        name, params = self.initial_default
        if name:
            self.set_default(name, list(params), force=True)
        else:
            self.default_name, self.default_params = "", ()
            self.default = (None, (), self.next_for("", False))

    def list_entries(self) -> list[Entry]:
        return [
            Entry(list(s.match), s.action, list(s.params), s.priority)
            for s in sorted(self.entries.values(), key=lambda s: s.handle)
        ]

    # -- data plane ----------------------------------------------------------------------
    # Lookup structures are updated per entry (a control plane may install many thousands).
    def _exact_key(self, st: _Stored) -> Any:
        return st.norm[0][1] if len(self.keys) == 1 else tuple(n[1] for n in st.norm)

    def _scan_item(self, st: _Stored) -> tuple:
        conds = []
        for n in st.norm:
            if n[0] == "e":
                conds.append((0, n[1], -1))
            elif n[0] == "l":
                conds.append((0, n[1], n[3]))
            elif n[0] == "t":
                conds.append((0, n[1], n[2]))
            else:
                conds.append((1, n[1], n[2]))
        return (st.rank, st.handle, tuple(conds), st.result)

    def _index_add(self, st: _Stored) -> None:
        if self.kind == "exact":
            self._exact[self._exact_key(st)] = st.result
        elif self.kind == "lpm":
            li = self._lpm_index
            plen = st.norm[li][2]
            key = tuple(n[1] for n in st.norm)
            for entry in self._lpm:
                if entry[0] == plen:
                    entry[2][key] = st.result
                    return
            w = self.keys[li].width
            full = (1 << w) - 1
            self._lpm.append((plen, full ^ ((1 << (w - plen)) - 1), {key: st.result}))
            self._lpm.sort(key=lambda e: -e[0])
        else:
            bisect.insort(self._scan, self._scan_item(st), key=lambda e: (e[0], e[1]))

    def _index_remove(self, st: _Stored) -> None:
        if self.kind == "exact":
            self._exact.pop(self._exact_key(st), None)
        elif self.kind == "lpm":
            li = self._lpm_index
            plen = st.norm[li][2]
            key = tuple(n[1] for n in st.norm)
            for entry in self._lpm:
                if entry[0] == plen:
                    entry[2].pop(key, None)
                    if not entry[2]:
                        self._lpm.remove(entry)
                    return
        else:
            i = bisect.bisect_left(self._scan, (st.rank, st.handle), key=lambda e: (e[0], e[1]))
            if i < len(self._scan) and self._scan[i][1] == st.handle:
                del self._scan[i]

    def lookup(self, key: Any) -> tuple | None:
        """key: scalar (single-field exact tables) or tuple of unsigned key values."""
        if self.kind == "exact":
            return self._exact.get(key)
        if self.kind == "lpm":
            li = self._lpm_index
            kl = list(key)
            v = kl[li]
            for _plen, mask, d in self._lpm:
                kl[li] = v & mask
                r = d.get(tuple(kl))
                if r is not None:
                    return r
            return None
        for _rank, _handle, conds, result in self._scan:
            for (is_range, a, b), k in zip(conds, key):
                if is_range:
                    if k < a or k > b:
                        break
                elif k & b != a:
                    break
            else:
                return result
        return None
