"""Compile a bmv2 JSON (v1model / simple_switch) into one generated Python module.

Everything is decided here, once: field indices are constants in the source, struct formats
are precompiled, masks are folded.  Anything whose exact simple_switch behaviour we do not
implement raises UnsupportedConstruct naming the construct and where it is.

Per-packet state handed to generated functions:
  F  list[int]  every field of every header instance (layout.py gives the indices)
  V  list[int]  validity per header instance (metadata always 1)
  X  list       context: exit flag, packet-length register, ingress length, payload bytes,
                then one 'next index' per header stack (see expr.X_*)
  P  tuple      action data of the running action
"""
from __future__ import annotations

import random
import re
import struct
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import PipelineError, UnsupportedConstruct
from . import hashes
from .expr import (BOOL, DATA, HEADER, STACK, X_EXIT, X_INLEN, X_PAYLOAD, X_PKTLEN, X_STACK0,
                   Expr, ExprCompiler, parse_hexstr)
from .layout import HeaderInfo, Layout
from .tables import ActionRef, KeySpec, Table

CORE_ERRORS = ["NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
               "ParserTimeout", "ParserInvalidArgument"]
DROP_PORT = 511   # simple_switch's default drop port

REFUSED_PRIMITIVES = {
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


class AssertFailure(Exception):
    """assert()/assume() failed: simple_switch aborts; we drop the packet and count it."""


def _sfix(v: int, w: int) -> int:
    """bmv2 Field::export_bytes for a signed field (keeps values in (max, mask] as is)."""
    mask = (1 << w) - 1
    if v < -(1 << (w - 1)) or v > mask:
        v &= mask
        if v >= 1 << (w - 1):
            v -= 1 << w
    return v


MAX_ARRAY = 1 << 24   # cells per register/counter array: a bad JSON must not eat the memory


def _check_size(size: Any, where: str) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_ARRAY:
        raise PipelineError(f"bad size {size!r} in {where} (1 .. {MAX_ARRAY})")


_FIELD_RE = re.compile(r"\bF\[(\d+)\]")
_FIELD_WRITE_RE = re.compile(r"^\s*F\[(\d+)\] = ")


def _fields_to_locals(lines: list[str]) -> list[str]:
    """Rewrite a straight-line action body to work on local variables.

    ``F[17]`` costs a subscript each time; a local costs a LOAD_FAST.  Every field the body
    mentions is loaded once up front and every field it assigns is stored back at the end,
    which is equivalent because nothing else can observe F while the body runs -- unless the
    body hands F to someone (calculations, slices, helpers), in which case we leave it alone.
    """
    body = "\n".join(lines)
    if "F[" not in body or re.search(r"F\[\d+:|\(F,|CALC", body):
        return lines
    used = sorted({int(m) for m in _FIELD_RE.findall(body)})
    written = sorted({int(m.group(1)) for line in lines if (m := _FIELD_WRITE_RE.match(line))})
    if len(used) > 200:          # keep the prologue bounded
        return lines
    # a field whose first mention is an unconditional (unindented) write that does not read
    # it needs no load
    first_write: set[int] = set()
    seen: set[int] = set()
    for line in lines:
        m = _FIELD_WRITE_RE.match(line)
        if m and not line.startswith(" "):
            k = int(m.group(1))
            rhs = line[m.end():]
            if k not in seen and f"F[{k}]" not in rhs:
                first_write.add(k)
        seen.update(int(x) for x in _FIELD_RE.findall(line))
    loads = [k for k in used if k not in first_write]
    out = [f"{lhs} = {rhs}" for lhs, rhs in _runs(loads, load=True)]
    out += [_FIELD_RE.sub(lambda m: f"f{m.group(1)}", line) for line in lines]
    out += [f"{lhs} = {rhs}" for lhs, rhs in _runs(written, load=False)]
    return out


def _runs(idx: list[int], *, load: bool) -> list[tuple[str, str]]:
    """Group consecutive field indices: one slice unpack/assign instead of n subscripts."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        if j - i >= 2:
            names = ", ".join(f"f{k}" for k in idx[i:j + 1])
            sl = f"F[{idx[i]}:{idx[j] + 1}]"
            out.append((names, sl) if load else (sl, f"({names})"))
        else:
            for k in idx[i:j + 1]:
                out.append((f"f{k}", f"F[{k}]") if load else (f"F[{k}]", f"f{k}"))
        i = j + 1
    return out


@dataclass
class Compiled:
    """Result of compiling one JSON: generated functions plus runtime objects."""
    layout: Layout
    source: str
    ns: dict[str, Any]
    parser: Callable[..., Any] | None
    ingress: Callable[..., Any] | None
    egress: Callable[..., Any] | None
    deparse: Callable[..., bytes]
    verify: Callable[..., int]
    tables: dict[str, Table]
    registers: dict[str, list[int]]
    register_widths: dict[str, int]
    counters: dict[str, tuple[list[int], list[int]]]
    errors: dict[str, int]
    n_stacks: int
    idx: dict[str, int | None] = field(default_factory=dict)
    widths: dict[str, int] = field(default_factory=dict)
    with_queueing: bool = False


class _Src:
    """Tiny indented-source builder."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def emit(self, line: str, ind: int = 0) -> None:
        self.lines.append("    " * ind + line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _ident(prefix: str, i: int) -> str:
    return f"{prefix}{i}"


class Compiler:
    def __init__(self, j: dict[str, Any], *, trace: bool = False) -> None:
        if not isinstance(j, dict):
            raise PipelineError("bmv2 JSON must be an object")
        self.j = j
        self.trace = trace
        meta = j.get("__meta__", {})
        ver = meta.get("version") if isinstance(meta, dict) else None
        if not (isinstance(ver, list) and ver and ver[0] == 2):
            raise PipelineError(f"unsupported bmv2 JSON version {ver!r} (need 2.x)")
        self.L = Layout(j)
        self.env: dict[str, Any] = {
            "_sfix": _sfix, "_AssertFail": AssertFailure, "_randint": random.randint,
            "_log": self._log,
        }
        self.src = _Src()
        self.registers: dict[str, list[int]] = {}
        self.register_widths: dict[str, int] = {}
        self.reg_vars: dict[str, tuple[str, int, int]] = {}
        for k, r in enumerate(j.get("register_arrays", [])):
            size, bw = r["size"], r["bitwidth"]
            _check_size(size, f'register_arrays "{r["name"]}"')
            if not isinstance(bw, int) or isinstance(bw, bool) or bw <= 0:
                raise PipelineError(f'bad bitwidth {bw!r} for register "{r["name"]}"')
            cells = [0] * size
            var = _ident("R", k)
            self.env[var] = cells
            self.registers[r["name"]] = cells
            self.register_widths[r["name"]] = bw
            self.reg_vars[r["name"]] = (var, size, bw)
        self.counters: dict[str, tuple[list[int], list[int]]] = {}
        self.ctr_vars: dict[str, tuple[str, str, int]] = {}
        for k, c in enumerate(j.get("counter_arrays", [])):
            if c.get("is_direct"):
                raise UnsupportedConstruct("direct counter", f"counter_arrays {c['name']}")
            _check_size(c["size"], f'counter_arrays "{c["name"]}"')
            b, p = [0] * c["size"], [0] * c["size"]
            self.env[f"CB{k}"], self.env[f"CP{k}"] = b, p
            self.counters[c["name"]] = (b, p)
            self.ctr_vars[c["name"]] = (f"CB{k}", f"CP{k}", c["size"])
        if j.get("meter_arrays"):
            raise UnsupportedConstruct("meter", f"meter_arrays {j['meter_arrays'][0].get('name')}")
        if j.get("parse_vsets"):
            raise UnsupportedConstruct("parser value set", f"parse_vsets {j['parse_vsets'][0].get('name')}")
        if j.get("extern_instances"):
            raise UnsupportedConstruct("extern instance",
                                       f"extern_instances {j['extern_instances'][0].get('name')}")
        if j.get("learn_lists"):
            raise UnsupportedConstruct("learn list (digest)", "learn_lists")
        self.X = ExprCompiler(self.L, self.env, self.reg_vars)
        self.errors = self._errors()
        self.calc_names: dict[str, str] = {}
        self.actions_by_id: dict[int, dict[str, Any]] = {}
        self.action_fn_names: dict[int, str] = {}
        self.std = self._std_fields()

    # ------------------------------------------------------------------------------------
    def _log(self, fmt: str, values: tuple[int, ...]) -> None:
        out = fmt
        for v in values:
            out = out.replace("{}", str(v), 1)
        print(f"[softswitch log_msg] {out}", file=sys.stderr)

    def _errors(self) -> dict[str, int]:
        errs: dict[str, int] = {}
        for name, val in self.j.get("errors", []):
            errs[name] = val
        nxt = max(errs.values()) + 1 if errs else 0
        for core in CORE_ERRORS:            # bmv2 ErrorCodeMap::add_core
            if core not in errs:
                errs[core] = nxt
                nxt += 1
        return errs

    def _std_fields(self) -> dict[str, int | None]:
        names = ["ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length"]
        out: dict[str, int | None] = {}
        for n in names:
            i = self.L.find(f"standard_metadata.{n}")
            if i is None:
                raise PipelineError(f"simple_switch requires field standard_metadata.{n}")
            out[n] = i
        for n in ["parser_error", "checksum_error"]:
            out[n] = self.L.find(f"standard_metadata.{n}")
        for n in ["mcast_grp", "egress_rid", "ingress_global_timestamp",
                  "egress_global_timestamp", "priority"]:
            out[n] = self.L.find(f"intrinsic_metadata.{n}")
        for n in ["enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth", "qid"]:
            out["q_" + n] = self.L.find(f"queueing_metadata.{n}")
        return out

    # -- assignment ----------------------------------------------------------------------
    def assign(self, dst: int, e: Expr) -> str:
        w = self.L.widths[dst]
        if self.L.signed[dst]:
            return f"F[{dst}] = _sfix({e.src}, {w})"
        if e.bound is not None and e.bound <= w:
            return f"F[{dst}] = {e.src}"
        return f"F[{dst}] = {e.src} & {(1 << w) - 1}"

    def lvalue(self, tv: Any, where: str) -> int:
        if isinstance(tv, dict) and tv.get("type") == "expression" and isinstance(tv.get("value"), dict) \
                and tv["value"].get("type") == "field":
            tv = tv["value"]
        if not (isinstance(tv, dict) and tv.get("type") == "field"):
            t = tv.get("type") if isinstance(tv, dict) else tv
            raise UnsupportedConstruct(f'assignment target of type "{t}"', where)
        h, f = tv["value"]
        if f == "$valid$":
            raise PipelineError(f"assignment to read-only {h}.$valid$ in {where}")
        return self.L.field_index(h, f, where)

    def header_arg(self, tv: Any, where: str) -> HeaderInfo:
        if not (isinstance(tv, dict) and tv.get("type") == "header"):
            raise UnsupportedConstruct(f"header operand {tv!r}", where)
        return self.L.header(tv["value"], where)

    # -- primitives ----------------------------------------------------------------------
    def primitive(self, p: dict[str, Any], where: str, ind: int) -> list[str]:
        op = p.get("op")
        args = p.get("parameters", [])
        w = f'primitive "{op}" in {where}'
        if op in REFUSED_PRIMITIVES:
            raise UnsupportedConstruct(f'primitive "{op}" ({REFUSED_PRIMITIVES[op]})', where)
        X = self.X

        def nargs(n: int) -> None:
            if len(args) != n:
                raise PipelineError(f"{w}: expected {n} parameters, got {len(args)}")
        if op in ("assign", "modify_field"):
            nargs(2)
            return [self.assign(self.lvalue(args[0], w), X.data(args[1], w))]
        if op in ("add_to_field", "subtract_from_field"):
            nargs(2)
            d = self.lvalue(args[0], w)
            e = X.data(args[1], w)
            sign = "+" if op == "add_to_field" else "-"
            return [self.assign(d, Expr(f"(F[{d}] {sign} {e.src})", DATA, None))]
        if op in ("add", "subtract", "bit_xor", "bit_or", "bit_and", "shift_left", "shift_right"):
            nargs(3)
            d = self.lvalue(args[0], w)
            a, b = X.data(args[1], w), X.data(args[2], w)
            sym = {"add": "+", "subtract": "-", "bit_xor": "^", "bit_or": "|", "bit_and": "&",
                   "shift_left": "<<", "shift_right": ">>"}[op]
            return [self.assign(d, Expr(f"({a.src} {sym} {b.src})", DATA, None))]
        if op == "assign_header":
            nargs(2)
            dh, sh = self.header_arg(args[0], w), self.header_arg(args[1], w)
            if dh.type_name != sh.type_name:
                raise PipelineError(f"{w}: header types differ")
            n = len(dh.fields)
            return [f"if V[{sh.index}]:",
                    f"    V[{dh.index}] = 1",
                    f"    F[{dh.base}:{dh.base + n}] = F[{sh.base}:{sh.base + n}]",
                    "else:",
                    f"    V[{dh.index}] = 0"]
        if op == "add_header":
            nargs(1)
            h = self.header_arg(args[0], w)
            n = len(h.fields)
            return [f"if not V[{h.index}]:",
                    f"    F[{h.base}:{h.base + n}] = {[0] * n!r}",
                    f"    V[{h.index}] = 1",
                    f"    X[{X_PKTLEN}] += {h.nbytes}"]
        if op == "remove_header":
            nargs(1)
            h = self.header_arg(args[0], w)
            return [f"if V[{h.index}]:",
                    f"    X[{X_PKTLEN}] -= {h.nbytes}",
                    f"    V[{h.index}] = 0"]
        if op in ("mark_to_drop", "drop"):
            if op == "mark_to_drop":
                nargs(1)
                h = self.header_arg(args[0], w)
                if "egress_spec" not in h.offsets:
                    raise PipelineError(f"{w}: header {h.name} has no egress_spec")
                es = h.base + h.offsets["egress_spec"]
                mg = h.base + h.offsets["mcast_grp"] if "mcast_grp" in h.offsets else None
            else:
                nargs(0)
                es = self.std["egress_spec"]
                mg = self.std["mcast_grp"]
            out = [self.assign(es, X.const(DROP_PORT))]
            if mg is not None:
                out.append(f"F[{mg}] = 0")
            return out
        if op == "register_read":
            nargs(3)
            d = self.lvalue(args[0], w)
            var, size, _bw = self._register(args[1], w)
            i = X.data(args[2], w)
            return [f"_i = {i.src}",
                    f"if {self._in_range('_i', i, size)}:",
                    "    " + self.assign(d, Expr(f"{var}[_i]", DATA, _bw))]
        if op == "register_write":
            nargs(3)
            var, size, bw = self._register(args[0], w)
            i, v = X.data(args[1], w), X.data(args[2], w)
            val = v.src if v.bound is not None and v.bound <= bw else f"{v.src} & {(1 << bw) - 1}"
            return [f"_i = {i.src}",
                    f"if {self._in_range('_i', i, size)}:",
                    f"    {var}[_i] = {val}"]
        if op == "count":
            nargs(2)
            if not (isinstance(args[0], dict) and args[0].get("type") == "counter_array"):
                raise PipelineError(f"{w}: first parameter must be a counter_array")
            name = args[0]["value"]
            if name not in self.ctr_vars:
                raise PipelineError(f"{w}: unknown counter {name!r}")
            cb, cp, size = self.ctr_vars[name]
            i = X.data(args[1], w)
            return [f"_i = {i.src}",
                    f"if {self._in_range('_i', i, size)}:",
                    f"    {cb}[_i] += X[{X_INLEN}]",
                    f"    {cp}[_i] += 1"]
        if op == "modify_field_with_hash_based_offset":
            nargs(4)
            d = self.lvalue(args[0], w)
            base, sz = X.data(args[1], w), X.data(args[3], w)
            if not (isinstance(args[2], dict) and args[2].get("type") == "calculation"):
                raise PipelineError(f"{w}: third parameter must be a calculation")
            fn = self.calculation(args[2]["value"], w)
            return [f"_sz = {sz.src}",
                    self.assign(d, Expr(f"(({fn}(F, V, X) % (_sz or 1)) + {base.src})", DATA, None))]
        if op == "modify_field_rng_uniform":
            nargs(3)
            d = self.lvalue(args[0], w)
            lo, hi = X.data(args[1], w), X.data(args[2], w)
            return [f"_lo = {lo.src}", f"_hi = {hi.src}", "if _lo <= _hi:",
                    "    " + self.assign(d, Expr("_randint(_lo, _hi)", DATA, None))]
        if op == "exit":
            nargs(0)
            return [f"X[{X_EXIT}] = 1"]
        if op == "no_op":
            return ["pass"]
        if op in ("assert", "assume"):
            nargs(1)
            e = X.compile(args[0], w)
            if e.kind not in (DATA, BOOL):
                raise PipelineError(f"{w}: bad operand")
            return [f"if not {e.src}:", f"    raise _AssertFail({w!r})"]
        if op == "log_msg":
            nargs(2)
            fmt = args[0].get("value") if isinstance(args[0], dict) else None
            vec = args[1].get("value") if isinstance(args[1], dict) else None
            if not isinstance(fmt, str) or not isinstance(vec, list):
                raise PipelineError(f"{w}: expected (string, parameters_vector)")
            vals = [X.data(v, w).src for v in vec]
            if not self.trace:
                return ["pass"]
            return [f"_log({fmt!r}, ({', '.join(vals)}{',' if vals else ''}))"]
        raise UnsupportedConstruct(f'primitive "{op}"', where)

    @staticmethod
    def _in_range(var: str, idx: Expr, size: int) -> str:
        """bmv2 skips out-of-range register/counter accesses; elide what the width proves."""
        if idx.bound is not None:
            return "True" if (1 << idx.bound) <= size else f"{var} < {size}"
        return f"0 <= {var} < {size}"

    def _register(self, tv: Any, where: str) -> tuple[str, int, int]:
        if not (isinstance(tv, dict) and tv.get("type") == "register_array"):
            raise PipelineError(f"{where}: expected a register_array parameter")
        name = tv["value"]
        if name not in self.reg_vars:
            raise PipelineError(f"{where}: unknown register array {name!r}")
        return self.reg_vars[name]

    # -- actions -------------------------------------------------------------------------
    def actions(self) -> None:
        for a in self.j.get("actions", []):
            aid = a["id"]
            where = f'action "{a["name"]}"'
            self.actions_by_id[aid] = a
            fname = _ident("A", aid)
            self.action_fn_names[aid] = fname
            self.X.params = [rd["bitwidth"] for rd in a.get("runtime_data", [])]
            prims = a.get("primitives", [])
            blocks = [self.primitive(p, where, 0) if p.get("op") not in ("_jump", "_jump_if_zero")
                      else None for p in prims]
            s = self.src
            body = "\n".join(line for b in blocks if b for line in b)
            # registers/counters/calculations as default arguments: LOAD_FAST, not LOAD_GLOBAL
            names = sorted(set(re.findall(r"\b((?:R|CB|CP|CALC)\d+)\b", body)))
            extra = "".join(f", {n}={n}" for n in names)
            s.emit(f"def {fname}(F, V, X, P{extra}):")
            s.emit(f"# {a['name']}", 1)
            has_jumps = any(b is None for b in blocks)
            if not has_jumps:
                for line in _fields_to_locals([line for b in blocks for line in b]):
                    s.emit(line, 1)
                if not prims:
                    s.emit("pass", 1)
            else:
                # jumps (p4c's lowering of 'if' inside actions): a program-counter loop where
                # blocks fall through and a taken jump restarts the loop at its target.
                s.emit("pc = 0", 1)
                s.emit("while True:", 1)
                for k, (p, b) in enumerate(zip(prims, blocks)):
                    s.emit(f"if pc == {k}:", 2)
                    if b is not None:
                        for line in b:
                            s.emit(line, 3)
                        s.emit(f"pc = {k + 1}", 3)
                    else:
                        args = p.get("parameters", [])
                        if p["op"] == "_jump":
                            tgt = self.X.data(args[0], where)
                            s.emit(f"pc = {tgt.src}", 3)
                            s.emit("continue", 3)
                        else:
                            c, tgt = self.X.data(args[0], where), self.X.data(args[1], where)
                            s.emit(f"if {c.src} == 0:", 3)
                            s.emit(f"pc = {tgt.src}", 4)
                            s.emit("continue", 4)
                            s.emit(f"pc = {k + 1}", 3)
                s.emit("break", 2)
            s.emit("")
            self.X.params = []

    # -- calculations (hash / checksum inputs) -------------------------------------------
    def calculation(self, name: str, where: str) -> str:
        if name in self.calc_names:
            return self.calc_names[name]
        calcs = {c["name"]: c for c in self.j.get("calculations", [])}
        if name not in calcs:
            raise PipelineError(f"unknown calculation {name!r} in {where}")
        c = calcs[name]
        algo = c.get("algo")
        cw = f'calculation "{name}"'
        if algo not in hashes.ALGORITHMS:
            raise UnsupportedConstruct(f'hash algorithm "{algo}"', cw)
        fname = _ident("CALC", len(self.calc_names))
        alg = f"_ALG_{algo}"
        self.env[alg] = hashes.ALGORITHMS[algo]
        s = self.src
        s.emit(f"def {fname}(F, V, X):")
        s.emit(f"# {name} ({algo})", 1)
        s.emit("acc = 0", 1)
        s.emit("nb = 0", 1)
        payload = False
        for inp in c.get("input", []):
            t = inp.get("type")
            if payload:
                raise UnsupportedConstruct("calculation input after payload", cw)
            if t == "field":
                h, f = inp["value"]
                info = self.L.header(h, cw)
                if f == "$valid$":
                    raise UnsupportedConstruct("$valid$ as calculation input", cw)
                i = self.L.field_index(h, f, cw)
                wd = self.L.widths[i]
                val = f"(F[{i}] & {(1 << wd) - 1})" if self.L.signed[i] else f"F[{i}]"
                s.emit(f"if V[{info.index}]:", 1)
                s.emit(f"acc = (acc << {wd}) | {val}", 2)
                s.emit(f"nb += {wd}", 2)
            elif t == "hexstr":
                bw = inp.get("bitwidth")
                if not isinstance(bw, int) or bw <= 0:
                    raise PipelineError(f"{cw}: hexstr input needs a bitwidth")
                v = parse_hexstr(inp["value"], cw) & ((1 << bw) - 1)
                s.emit(f"acc = (acc << {bw}) | {v}", 1)
                s.emit(f"nb += {bw}", 1)
            elif t == "header":
                info = self.L.header(inp["value"], cw)
                s.emit(f"if V[{info.index}]:", 1)
                s.emit(f"acc = (acc << {info.nbits}) | {self._header_int(info)}", 2)
                s.emit(f"nb += {info.nbits}", 2)
            elif t == "payload":
                payload = True
            else:
                raise UnsupportedConstruct(f'calculation input type "{t}"', cw)
        s.emit("buf = (acc << (-nb % 8)).to_bytes((nb + 7) // 8, 'big')", 1)
        if payload:
            s.emit(f"buf += X[{X_PAYLOAD}]", 1)
        s.emit(f"return {alg}(buf)", 1)
        s.emit("")
        self.calc_names[name] = fname
        return fname

    def _header_int(self, h: HeaderInfo) -> str:
        parts = []
        shift = h.nbits
        for k, (_n, wd, sg) in enumerate(h.fields):
            shift -= wd
            v = f"(F[{h.base + k}] & {(1 << wd) - 1})" if sg else f"F[{h.base + k}]"
            parts.append(f"({v} << {shift})" if shift else v)
        return "(" + " | ".join(parts) + ")" if parts else "0"

    # -- checksums -----------------------------------------------------------------------
    def checksums(self) -> None:
        s = self.src
        verify_lines: list[str] = []
        update_lines: list[str] = []
        for c in self.j.get("checksums", []):
            where = f'checksum "{c["name"]}"'
            if c.get("type", "generic") != "generic":
                raise UnsupportedConstruct(f'checksum type "{c.get("type")}"', where)
            h, f = c["target"]
            info = self.L.header(h, where)
            t = self.L.field_index(h, f, where)
            fn = self.calculation(c["calculation"], where)
            cond = self.X.boolean(c["if_cond"], where).src if c.get("if_cond") else "True"
            tw = self.L.widths[t]
            if c.get("verify", True):
                verify_lines += [f"if V[{info.index}] and {cond}:",
                                 f"    if {fn}(F, V, X) != (F[{t}] & {(1 << tw) - 1}):",
                                 "        err = 1"]
            if c.get("update", True):
                update_lines += [f"if {cond}:",
                                 "    " + self.assign(t, Expr(f"{fn}(F, V, X)", DATA, None))]
        s.emit("def VERIFY(F, V, X):")
        s.emit("err = 0", 1)
        for line in verify_lines:
            s.emit(line, 1)
        s.emit("return err", 1)
        s.emit("")
        self.update_lines = update_lines

    # -- parser --------------------------------------------------------------------------
    def _struct_for(self, h: HeaderInfo) -> str | None:
        codes = {8: "B", 16: "H", 32: "I", 64: "Q"}
        if not h.fields or any(wd not in codes for _n, wd, _s in h.fields):
            return None
        fmt = "!" + "".join(codes[wd].lower() if sg else codes[wd] for _n, wd, sg in h.fields)
        var = f"_ST{h.index}"
        self.env[var] = struct.Struct(fmt)
        return var

    def _extract_lines(self, h: HeaderInfo, where: str) -> list[str]:
        if h.nbits % 8:
            raise UnsupportedConstruct(f"extract of header {h.name} whose width ({h.nbits} bits) "
                                       "is not a multiple of 8", where)
        nb = h.nbytes
        n = len(h.fields)
        out = [f"if n - pos < {nb}:",
               f"    return None, pos, {self.errors['PacketTooShort']}"]
        st = self._struct_for(h)
        if st is not None:
            out.append(f"F[{h.base}:{h.base + n}] = {st}.unpack_from(data, pos)")
        else:
            out.append(f"_v = int.from_bytes(data[pos:pos + {nb}], 'big')")
            shift = h.nbits
            for k, (_fn, wd, sg) in enumerate(h.fields):
                shift -= wd
                v = f"(_v >> {shift})" if shift else "_v"
                if shift or wd < h.nbits:
                    v = f"({v} & {(1 << wd) - 1})"
                if sg:
                    v = f"_sx({v}, {wd})"
                out.append(f"F[{h.base + k}] = {v}")
        out += [f"V[{h.index}] = 1", f"pos += {nb}"]
        return out

    def _lookahead(self, off: int, bw: int, var: str, err_check: bool) -> list[str]:
        byte_off, bit_off = off // 8, off % 8
        nb = (bw + 7) // 8
        span = (bit_off + bw + 7) // 8
        out = []
        if err_check:
            out += [f"if n - pos < {nb}:", f"    return None, pos, {self.errors['PacketTooShort']}"]
        # bmv2 only checks (bitwidth+7)/8 bytes and reads past the end otherwise (undefined
        # memory); we read zeros there.
        out.append(f"_b = data[pos + {byte_off}:pos + {byte_off + span}]")
        out.append(f"if len(_b) < {span}: _b = _b.ljust({span}, b'\\x00')")
        sh = span * 8 - bit_off - bw
        out.append(f"{var} = (int.from_bytes(_b, 'big') >> {sh}) & {(1 << bw) - 1}")
        return out

    def parser(self) -> str | None:
        parsers = self.j.get("parsers", [])
        if not parsers:
            return None
        p = next((x for x in parsers if x["name"] == "parser"), parsers[0])
        if len(parsers) > 1:
            raise UnsupportedConstruct("more than one parser", f'parser "{parsers[1]["name"]}"')
        self.env["_sx"] = lambda v, w: v - (1 << w) if v >> (w - 1) else v
        states = {st["name"]: _ident("S", st["id"]) for st in p.get("parse_states", [])}
        ok = self.errors["NoError"]
        s = self.src
        for st in p.get("parse_states", []):
            where = f'parser state "{st["name"]}"'
            s.emit(f"def {states[st['name']]}(F, V, X, data, pos):")
            s.emit(f"# {st['name']}", 1)
            s.emit("n = len(data)", 1)
            for op in st.get("parser_ops", []):
                for line in self._parser_op(op, where):
                    s.emit(line, 1)
            keys = st.get("transition_key", [])
            trans = st.get("transitions", [])

            def target(t: dict[str, Any]) -> str:
                ns = t.get("next_state")
                if ns is None:
                    return "None"
                if ns not in states:
                    raise PipelineError(f"{where}: unknown next state {ns!r}")
                return states[ns]
            if keys:
                parts = []
                total = 0
                for k in reversed(keys):
                    kt, kv = k.get("type"), k.get("value")
                    if kt == "field":
                        e = self.X.field(kv, where)
                        i = self.L.field_index(kv[0], kv[1], where) if kv[1] != "$valid$" else None
                        wd = self.L.widths[i] if i is not None else 1
                        nbits = ((wd + 7) // 8) * 8
                        src = e.src if e.bound is not None else f"({e.src} & {(1 << nbits) - 1})"
                    elif kt == "lookahead":
                        off, bw = kv
                        var = f"_la{len(parts)}"
                        for line in self._lookahead(off, bw, var, False):
                            s.emit(line, 1)
                        nbits = ((bw + 7) // 8) * 8
                        src = var
                    elif kt == "stack_field":
                        sname, fname = kv
                        if sname not in self.L.stacks:
                            raise PipelineError(f"{where}: unknown stack {sname!r}")
                        stk = self.L.stacks[sname]
                        hs = [self.L.header(hn, where) for hn in stk.headers]
                        idxs = tuple(hh.base + hh.offsets[fname] for hh in hs)
                        wd = self.L.widths[idxs[0]]
                        nbits = ((wd + 7) // 8) * 8
                        var = f"_SF{len(self.env)}"
                        self.env[var] = idxs
                        src = f"(F[{var}[X[{X_STACK0 + stk.index}] - 1]] & {(1 << nbits) - 1})"
                    else:
                        raise UnsupportedConstruct(f'transition key type "{kt}"', where)
                    parts.append(f"({src} << {total})" if total else src)
                    total += nbits
                s.emit("k = " + " | ".join(reversed(parts)), 1)
            for t in trans:
                ttype = t.get("type")
                if ttype is None:
                    ttype = "default" if t.get("value") == "default" else "hexstr"
                if ttype == "default":
                    s.emit(f"return {target(t)}, pos, {ok}", 1)
                    break
                if ttype != "hexstr":
                    raise UnsupportedConstruct(f'transition type "{ttype}"', where)
                if not keys:
                    raise PipelineError(f"{where}: value transition without a key")
                v = parse_hexstr(t["value"], where)
                if t.get("mask") is not None:
                    m = parse_hexstr(t["mask"], where)
                    s.emit(f"if k & {m} == {v & m}:", 1)
                else:
                    s.emit(f"if k == {v}:", 1)
                s.emit(f"return {target(t)}, pos, {ok}", 2)
            else:
                s.emit(f"return None, pos, {ok}", 1)
            s.emit("")
        init = p.get("init_state")
        if init not in states:
            raise PipelineError(f"parser init_state {init!r} is not a state")
        return states[init]

    def _parser_op(self, op: dict[str, Any], where: str) -> list[str]:
        kind = op.get("op")
        params = op.get("parameters", [])
        if kind == "extract":
            if len(params) != 1:
                raise PipelineError(f"{where}: extract takes 1 parameter")
            t, v = params[0].get("type"), params[0].get("value")
            if t == "regular":
                return self._extract_lines(self.L.header(v, where), where)
            if t == "stack":
                if v not in self.L.stacks:
                    raise PipelineError(f"{where}: unknown stack {v!r}")
                stk = self.L.stacks[v]
                slot = X_STACK0 + stk.index
                out = [f"_k = X[{slot}]"]
                for k, hn in enumerate(stk.headers):
                    out.append(f"{'if' if k == 0 else 'elif'} _k == {k}:")
                    out += ["    " + line for line in self._extract_lines(self.L.header(hn, where), where)]
                out += ["else:", f"    return None, pos, {self.errors['StackOutOfBounds']}",
                        f"X[{slot}] = _k + 1"]
                return out
            raise UnsupportedConstruct(f'extract of type "{t}"', where)
        if kind == "set":
            if len(params) != 2:
                raise PipelineError(f"{where}: set takes 2 parameters")
            d = self.lvalue(params[0], where)
            srcp = params[1]
            if isinstance(srcp, dict) and srcp.get("type") == "lookahead":
                off, bw = srcp["value"]
                return self._lookahead(off, bw, "_la", True) + [
                    self.assign(d, Expr("_la", DATA, bw))]
            return [self.assign(d, self.X.data(srcp, where))]
        if kind == "verify":
            if len(params) != 2:
                raise PipelineError(f"{where}: verify takes 2 parameters")
            c = self.X.boolean(params[0], where)
            e = self.X.data(params[1], where)
            return [f"if not {c.src}:", f"    return None, pos, {e.src}"]
        if kind in ("advance", "shift"):
            if len(params) != 1:
                raise PipelineError(f"{where}: {kind} takes 1 parameter")
            e = self.X.data(params[0], where)
            if kind == "shift":
                return [f"_a = {e.src}", f"if n - pos < _a:",
                        f"    return None, pos, {self.errors['PacketTooShort']}", "pos += _a"]
            return [f"_a = {e.src}", "if _a % 8:",
                    f"    return None, pos, {self.errors['ParserInvalidArgument']}",
                    "if n - pos < _a // 8:",
                    f"    return None, pos, {self.errors['PacketTooShort']}", "pos += _a // 8"]
        if kind == "primitive":
            if len(params) != 1 or not isinstance(params[0], dict):
                raise PipelineError(f"{where}: primitive op takes 1 parameter")
            return self.primitive(params[0], where, 0)
        raise UnsupportedConstruct(f'parser operation "{kind}"', where)

    # -- deparser ------------------------------------------------------------------------
    def deparser(self) -> None:
        deps = self.j.get("deparsers", [])
        if len(deps) > 1:
            raise UnsupportedConstruct("more than one deparser", f'deparser "{deps[1]["name"]}"')
        order = deps[0].get("order", []) if deps else []
        if deps and deps[0].get("primitives"):
            raise UnsupportedConstruct("deparser method calls", f'deparser "{deps[0]["name"]}"')
        s = self.src
        s.emit("def DEPARSE(F, V, X):")
        for line in self.update_lines:
            s.emit(line, 1)
        s.emit("out = []", 1)
        for hn in order:
            h = self.L.header(hn, "deparser")
            if h.nbits % 8:
                raise UnsupportedConstruct(f"emit of header {h.name} whose width is not a "
                                           "multiple of 8 bits", "deparser")
            s.emit(f"if V[{h.index}]:", 1)
            st = self._struct_for(h)
            n = len(h.fields)
            if st is not None and not any(sg for _n, _w, sg in h.fields):
                s.emit(f"out.append({st}.pack(*F[{h.base}:{h.base + n}]))", 2)
            else:
                s.emit(f"out.append({self._header_int(h)}.to_bytes({h.nbytes}, 'big'))", 2)
        s.emit(f"out.append(X[{X_PAYLOAD}])", 1)
        s.emit("return b''.join(out)", 1)
        s.emit("")

    # -- control flow --------------------------------------------------------------------
    def pipelines(self) -> dict[str, str | None]:
        firsts: dict[str, str | None] = {}
        self.tables: dict[str, Table] = {}
        self._table_specs: list[tuple[Table, dict[str, Any], dict[str, str]]] = []
        node_names: dict[str, str] = {}
        counter = 0
        for pl in self.j.get("pipelines", []):
            if pl.get("action_profiles"):
                raise UnsupportedConstruct("action profile / selector",
                                           f'pipeline "{pl["name"]}"')
            for kind in ("tables", "conditionals", "action_calls"):
                for obj in pl.get(kind, []):
                    if obj["name"] in node_names:   # bmv2 keeps one global map too
                        raise PipelineError(f'duplicate control node name "{obj["name"]}"')
                    node_names[obj["name"]] = _ident("N", counter)
                    counter += 1
        self.node_names = node_names

        def ref(name: str | None, where: str) -> str:
            if name is None:
                return "None"
            if name not in node_names:
                raise PipelineError(f"{where}: unknown control node {name!r}")
            return node_names[name]
        # Each node becomes a record; functions are emitted afterwards so that a node with a
        # single predecessor can be inlined into it (fewer Python calls per packet).
        self.nodes: dict[str, tuple] = {}
        for pl in self.j.get("pipelines", []):
            firsts[pl["name"]] = ref(pl.get("init_table"), f'pipeline "{pl["name"]}"')
            for c in pl.get("conditionals", []):
                where = f'conditional "{c["name"]}"'
                e = self.X.boolean(c["expression"], where)
                ref(c.get("true_next"), where)
                ref(c.get("false_next"), where)
                self.nodes[c["name"]] = ("cond", e.src, c.get("true_next"), c.get("false_next"))
            for ac in pl.get("action_calls", []):
                where = f'action call "{ac["name"]}"'
                aid = ac["action_id"]
                if aid not in self.action_fn_names:
                    raise PipelineError(f"{where}: unknown action id {aid}")
                ref(ac.get("next_node"), where)
                self.nodes[ac["name"]] = ("call", self.action_fn_names[aid], "()",
                                          self._has_exit(aid), ac.get("next_node"))
            for t in pl.get("tables", []):
                self._table(t, ref)
        self._emit_nodes()
        return firsts

    def _has_exit(self, aid: int) -> bool:
        return any(pr.get("op") == "exit" for pr in self.actions_by_id[aid].get("primitives", []))

    def _emit_nodes(self) -> None:
        preds: dict[str, int] = {}

        def succs(info: tuple) -> list[str | None]:
            if info[0] == "cond":
                return [info[2], info[3]]
            if info[0] == "call":
                return [info[4]]
            return list(info[2])
        for info in self.nodes.values():
            for n in set(succs(info)):
                if n is not None:
                    preds[n] = preds.get(n, 0) + 1
        s = self.src
        max_depth = 25

        def succ(name: str | None, ind: int, depth: int) -> None:
            if name is None:
                s.emit("return None", ind)
            elif preds.get(name, 0) == 1 and depth < max_depth:
                body(name, ind, depth + 1)
            else:
                s.emit(f"return {self.node_names[name]}", ind)

        def body(name: str, ind: int, depth: int) -> None:
            info = self.nodes[name]
            s.emit(f"# {name}", ind)
            if info[0] == "cond":
                s.emit(f"if {info[1]}:", ind)
                succ(info[2], ind + 1, depth)
                s.emit("else:", ind)
                succ(info[3], ind + 1, depth)
            elif info[0] == "call":
                s.emit(f"{info[1]}(F, V, X, {info[2]})", ind)
                if info[3]:
                    s.emit(f"if X[{X_EXIT}]:", ind)
                    s.emit("return None", ind + 1)
                succ(info[4], ind, depth)
            else:
                for line in info[1]:
                    s.emit(line, ind)
        for name in self.nodes:
            s.emit(f"def {self.node_names[name]}(F, V, X):")
            body(name, 1, 0)
            s.emit("")

    def _table(self, t: dict[str, Any], ref: Callable[[str | None, str], str]) -> None:
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
        keys: list[KeySpec] = []
        key_src: list[str] = []
        for k in t.get("key", []):
            mt = k.get("match_type")
            tgt = k.get("target")
            name = k.get("name") or (".".join(tgt) if isinstance(tgt, list) else str(tgt))
            if mt == "valid":
                h = self.L.header(tgt, where)
                keys.append(KeySpec("exact", 1, name))
                key_src.append(f"V[{h.index}]")
                continue
            if mt not in ("exact", "lpm", "ternary", "range", "optional"):
                raise UnsupportedConstruct(f'key match type "{mt}"', where)
            e = self.X.field(tgt, where)
            if tgt[1] == "$valid$":
                wd = 1
            else:
                wd = self.L.widths[self.L.field_index(tgt[0], tgt[1], where)]
            src = e.src if e.bound is not None else f"({e.src} & {(1 << wd) - 1})"
            if k.get("mask") is not None:
                src = f"({src} & {parse_hexstr(k['mask'], where)})"
            keys.append(KeySpec(mt, wd, name))
            key_src.append(src)
        if sum(1 for k in keys if k.match_type == "lpm") > 1:
            raise UnsupportedConstruct("more than one lpm key field", where)
        if kind == "range":
            kind = "ternary"
        if kind == "lpm" and not any(k.match_type == "lpm" for k in keys):
            kind = "exact"
        if kind == "exact" and any(k.match_type != "exact" for k in keys):
            kind = "ternary"
        if kind == "lpm" and any(k.match_type not in ("exact", "lpm") for k in keys):
            kind = "ternary"
        actions: dict[str, ActionRef] = {}
        ids = t.get("action_ids", [])
        names = t.get("actions", [])
        if len(ids) != len(names):
            raise PipelineError(f"{where}: action_ids and actions differ in length")
        for aid, an in zip(ids, names):
            if aid not in self.actions_by_id:
                raise PipelineError(f"{where}: unknown action id {aid}")
            a = self.actions_by_id[aid]
            actions[an] = ActionRef(an, None, [rd["bitwidth"] for rd in a.get("runtime_data", [])])  # type: ignore[arg-type]
        nt = t.get("next_tables", {}) or {}
        hitmiss = "__HIT__" in nt or "__MISS__" in nt
        for tgt in list(nt.values()) + [t.get("base_default_next")]:
            ref(tgt, where)
        dflt = t.get("default_entry")
        const_default = bool(dflt and (dflt.get("action_const") or dflt.get("action_entry_const")))
        var = _ident("T", t["id"])
        spec = {"nt": nt, "hitmiss": hitmiss, "base": t.get("base_default_next")}
        table = Table(t["name"], kind, keys, actions, int(t.get("max_size", 1024)),
                      lambda an, hit, spec=spec: None, const_default)
        self.env[var] = table
        self.tables[t["name"]] = table
        self._table_specs.append((table, t, spec))
        if not keys and const_default and dflt:
            # a p4c "dummy table" (direct action call): always misses, const default action
            aid = dflt["action_id"]
            an = next((n for i, n in zip(ids, names) if i == aid), None)
            if an is None:
                raise PipelineError(f"{where}: default action id {aid} not in the table's actions")
            widths = actions[an].widths
            data = tuple(parse_hexstr(x, where) & ((1 << w) - 1)
                         for x, w in zip(dflt.get("action_data", []), widths))
            nxt = nt.get("__MISS__") if hitmiss else nt.get(an, t.get("base_default_next"))
            self.nodes[t["name"]] = ("call", self.action_fn_names[aid], repr(data),
                                     self._has_exit(aid), nxt)
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
        targets = set(nt.values()) | {t.get("base_default_next")}
        self.nodes[t["name"]] = ("table", lines, targets)

    def finish_tables(self, ns: dict[str, Any]) -> None:
        """Bind action functions and next nodes now that the generated module exists."""
        by_node = {name: ns[fn] for name, fn in self.node_names.items()}
        for table, t, spec in self._table_specs:
            ids = t.get("action_ids", [])
            for aid, an in zip(ids, t.get("actions", [])):
                table.actions[an].fn = ns[self.action_fn_names[aid]]
            nt, hitmiss, base = spec["nt"], spec["hitmiss"], spec["base"]

            def next_for(an: str, hit: bool, nt: dict = nt, hitmiss: bool = hitmiss,
                         base: str | None = base) -> Any:
                if hitmiss:
                    tgt = nt.get("__HIT__" if hit else "__MISS__")
                elif an and an in nt:
                    tgt = nt[an]
                else:
                    tgt = base
                return by_node[tgt] if tgt is not None else None
            table.next_for = next_for
            where = f'table "{t["name"]}"'
            dflt = t.get("default_entry")
            if dflt:
                aid = dflt["action_id"]
                an = next((n for i, n in zip(ids, t.get("actions", [])) if i == aid), None)
                if an is None:
                    raise PipelineError(f"{where}: default action id {aid} not in the table's actions")
                data = [parse_hexstr(x, where) for x in dflt.get("action_data", [])]
                widths = table.actions[an].widths
                data = [d & ((1 << w) - 1) for d, w in zip(data, widths)]
                table.set_default(an, data, force=True)
                table.initial_default = (an, tuple(data))
            else:
                table.reset_default()
            entries = t.get("entries") or []
            for e in entries:
                match = []
                for km, ks in zip(e.get("match_key", []), table.keys):
                    mt = km.get("match_type")
                    if mt in ("exact", "valid"):
                        match.append(int(km["key"]) if mt == "valid" else parse_hexstr(km["key"], where))
                    elif mt == "lpm":
                        match.append((parse_hexstr(km["key"], where), km["prefix_length"]))
                    elif mt in ("ternary", "optional"):
                        v = parse_hexstr(km["key"], where)
                        m = parse_hexstr(km["mask"], where) if km.get("mask") is not None \
                            else (1 << ks.width) - 1
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
                an = next((n for i, n in zip(ids, t.get("actions", [])) if i == aid), None)
                if an is None:
                    raise PipelineError(f"{where}: const entry action id {aid} not in the table")
                data = [parse_hexstr(x, where) for x in ae.get("action_data", [])]
                prio = e.get("priority")
                try:
                    table.add(match, an, data, prio if table.needs_priority else None,
                              const_rank=prio if isinstance(prio, int) else 0)
                except Exception as exc:  # noqa: BLE001 - re-raised as a load error
                    raise PipelineError(f"{where}: bad const entry: {exc}") from exc
            if entries:
                table.immutable = True

    # -- top level -----------------------------------------------------------------------
    def compile(self) -> Compiled:
        self.actions()
        self.checksums()
        init = self.parser()
        self.deparser()
        firsts = self.pipelines()
        source = self.src.text()
        ns = self.env
        try:
            code = compile(source, "<p4-bmv2-json>", "exec")
        except SyntaxError as exc:  # a bug in this compiler, never user input
            raise PipelineError(f"internal code generation error: {exc}") from exc
        exec(code, ns)  # noqa: S102 - our own generated source
        self.finish_tables(ns)
        pls = {p["name"]: p for p in self.j.get("pipelines", [])}
        for name in pls:
            if name not in ("ingress", "egress"):
                raise UnsupportedConstruct(f'pipeline "{name}"', "pipelines")
        ing = ns[firsts["ingress"]] if firsts.get("ingress") not in (None, "None") else None
        egr = ns[firsts["egress"]] if firsts.get("egress") not in (None, "None") else None
        q = [self.std[f"q_{n}"] for n in ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")]
        widths = {k: self.L.widths[v] for k, v in self.std.items() if v is not None}
        return Compiled(
            layout=self.L, source=source, ns=ns,
            parser=ns[init] if init else None, ingress=ing, egress=egr,
            deparse=ns["DEPARSE"], verify=ns["VERIFY"], tables=self.tables,
            registers=self.registers, register_widths=self.register_widths,
            counters=self.counters, errors=self.errors, n_stacks=len(self.L.stacks),
            idx=dict(self.std), widths=widths, with_queueing=all(x is not None for x in q))
