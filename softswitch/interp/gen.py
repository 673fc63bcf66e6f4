"""The compile-time state every code generator shares, and the helpers they all need.

Why one object: field indices, the globals of the generated module (``env``), the source
being written, the register/counter variables and the error codes are decided once per
JSON and read by every generator (primitives, actions, parser, checksums and deparser,
controls); handing them around one by one would repeat the same eight arguments
everywhere.  Each generator module is a set of functions over a ``Gen``.

Also here: the helpers the *generated* code calls at run time (``_sfix``, ``_sx``,
``AssertFailure``, ``_log``), since they are part of the same contract.
"""

from __future__ import annotations

import random
import struct
import sys
from typing import Any, Callable

from ..errors import PipelineError, UnsupportedConstruct
from .expr import Expr, ExprCompiler, mask_lit
from .layout import HeaderInfo, Layout
from .wide import Wide, wide_bytes

CORE_ERRORS = [
    "NoError",
    "PacketTooShort",
    "NoMatch",
    "StackOutOfBounds",
    "HeaderTooShort",
    "ParserTimeout",
    "ParserInvalidArgument",
]
DROP_PORT = 511  # simple_switch's default drop port
MAX_ARRAY = 1 << 24  # cells per register/counter array: a bad JSON must not eat the memory


class AssertFailure(Exception):
    """assert()/assume() failed: simple_switch aborts; we drop the packet and count it."""


def sfix(v: int, w: int) -> int:
    """bmv2 Field::export_bytes for a signed field (keeps values in (max, mask] as is)."""
    mask = (1 << w) - 1
    if v < -(1 << (w - 1)) or v > mask:
        v &= mask
        if v >= 1 << (w - 1):
            v -= 1 << w
    return v


def sign_extend(v: int, w: int) -> int:
    """A signed field's value from its ``w`` extracted bits (the parser's ``_sx``)."""
    return v - (1 << w) if v >> (w - 1) else v


def log_msg(fmt: str, values: tuple[int, ...]) -> None:
    """P4 ``log_msg``: printed only when the switch traces (the generator emits no call
    otherwise)."""
    out = fmt
    for v in values:
        out = out.replace("{}", str(v), 1)
    print(f"[softswitch log_msg] {out}", file=sys.stderr)


def check_size(size: Any, where: str) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_ARRAY:
        raise PipelineError(f"bad size {size!r} in {where} (1 .. {MAX_ARRAY})")


def ident(prefix: str, i: int) -> str:
    """Name of a generated function or global (``A3``, ``S0``, ``N12``, ``R1``...)."""
    return f"{prefix}{i}"


class Source:
    """Tiny indented-source builder: the one generated module every generator appends to."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def emit(self, line: str, ind: int = 0) -> None:
        self.lines.append("    " * ind + line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class Gen:
    """One JSON being compiled: layout, globals, source, stateful objects, error codes.

    Construction already refuses what the whole program cannot have (meters, value sets,
    extern instances, digests, direct counters) and allocates register and counter cells,
    so every later generator may assume they exist.
    """

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
            "_sfix": sfix,
            "_AssertFail": AssertFailure,
            "_randint": random.randint,
            "_log": log_msg,
            "_wview": Wide.view,
            "_wbytes": wide_bytes,
        }
        self.src = Source()
        # every object a pipeline changes while it runs (registers, counters, caches), by
        # its variable: each pipeline made from this program gets new ones (`state`)
        self.state_factories: dict[str, Callable[[], Any]] = {}
        self.register_widths: dict[str, int] = {}
        self.reg_vars: dict[str, tuple[str, int, int]] = {}
        self.ctr_vars: dict[str, tuple[str, str, int]] = {}
        self._stateful(j)
        self.X = ExprCompiler(self.L, self.env, self.reg_vars)
        self.errors = self._errors()
        self.calc_names: dict[str, str] = {}
        self.actions_by_id: dict[int, dict[str, Any]] = {}
        self.action_fn_names: dict[int, str] = {}
        self.std = self._std_fields()

    def zeros(self, nbytes: int) -> str:
        """The generated module's name for `nbytes` zero bytes (one object per width)."""
        var = f"_ZEROS{nbytes}"
        self.env.setdefault(var, bytes(nbytes))
        return var

    def state(self, var: str, factory: Callable[[], Any]) -> None:
        """Bind `var` in the generated module to an object the running pipeline changes,
        made by `factory` anew for each pipeline of this program (`Program.instantiate`);
        `env` holds only what no packet changes."""
        self.state_factories[var] = factory

    def _stateful(self, j: dict[str, Any]) -> None:
        for k, r in enumerate(j.get("register_arrays", [])):
            size, bw = r["size"], r["bitwidth"]
            check_size(size, f'register_arrays "{r["name"]}"')
            if not isinstance(bw, int) or isinstance(bw, bool) or bw <= 0:
                raise PipelineError(f'bad bitwidth {bw!r} for register "{r["name"]}"')
            var = ident("R", k)
            self.state(var, lambda size=size: [0] * size)
            self.register_widths[r["name"]] = bw
            self.reg_vars[r["name"]] = (var, size, bw)
        for k, c in enumerate(j.get("counter_arrays", [])):
            if c.get("is_direct"):
                raise UnsupportedConstruct("direct counter", f"counter_arrays {c['name']}")
            check_size(c["size"], f'counter_arrays "{c["name"]}"')
            self.state(f"CB{k}", lambda size=c["size"]: [0] * size)
            self.state(f"CP{k}", lambda size=c["size"]: [0] * size)
            self.ctr_vars[c["name"]] = (f"CB{k}", f"CP{k}", c["size"])
        if j.get("meter_arrays"):
            raise UnsupportedConstruct("meter", f"meter_arrays {j['meter_arrays'][0].get('name')}")
        if j.get("parse_vsets"):
            raise UnsupportedConstruct(
                "parser value set", f"parse_vsets {j['parse_vsets'][0].get('name')}"
            )
        if j.get("extern_instances"):
            raise UnsupportedConstruct(
                "extern instance", f"extern_instances {j['extern_instances'][0].get('name')}"
            )
        if j.get("learn_lists"):
            raise UnsupportedConstruct("learn list (digest)", "learn_lists")

    def _errors(self) -> dict[str, int]:
        errs: dict[str, int] = {}
        for name, val in self.j.get("errors", []):
            errs[name] = val
        nxt = max(errs.values()) + 1 if errs else 0
        for core in CORE_ERRORS:  # bmv2 ErrorCodeMap::add_core
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
        for n in [
            "mcast_grp",
            "egress_rid",
            "ingress_global_timestamp",
            "egress_global_timestamp",
            "priority",
        ]:
            out[n] = self.L.find(f"intrinsic_metadata.{n}")
        for n in ["enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth", "qid"]:
            out["q_" + n] = self.L.find(f"queueing_metadata.{n}")
        return out

    # -- writing fields ------------------------------------------------------------------
    def assign(self, dst: int, e: Expr) -> str:
        """``F[dst] = e`` with the field's width applied the way bmv2 writes a field (a mask
        the value provably fits is left out)."""
        w = self.L.widths[dst]
        if self.L.signed[dst]:
            return f"F[{dst}] = _sfix({e.src}, {w})"
        if e.lazy == w and self.X.lazy_field(dst):
            return f"F[{dst}] = {e.raw_for(w)}"  # a wide value as stored
        if e.bound is not None and e.bound <= w:
            return f"F[{dst}] = {e.src}"
        return f"F[{dst}] = {e.src} & {mask_lit(w)}"

    def lvalue(self, tv: Any, where: str) -> int:
        if (
            isinstance(tv, dict)
            and tv.get("type") == "expression"
            and isinstance(tv.get("value"), dict)
            and tv["value"].get("type") == "field"
        ):
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

    # -- stateful objects ----------------------------------------------------------------
    @staticmethod
    def in_range(var: str, idx: Expr, size: int) -> str:
        """bmv2 skips out-of-range register/counter accesses; elide what the width proves."""
        if idx.bound is not None:
            return "True" if (1 << idx.bound) <= size else f"{var} < {size}"
        return f"0 <= {var} < {size}"

    def register(self, tv: Any, where: str) -> tuple[str, int, int]:
        """(global variable, size, bitwidth) of a register_array parameter."""
        if not (isinstance(tv, dict) and tv.get("type") == "register_array"):
            raise PipelineError(f"{where}: expected a register_array parameter")
        name = tv["value"]
        if name not in self.reg_vars:
            raise PipelineError(f"{where}: unknown register array {name!r}")
        return self.reg_vars[name]

    # -- whole headers -------------------------------------------------------------------
    def struct_for(self, h: HeaderInfo) -> str | None:
        """A precompiled ``struct.Struct`` for a header whose fields are all 8/16/32/64 bits
        (one unpack/pack for the whole header), or None."""
        codes = {8: "B", 16: "H", 32: "I", 64: "Q"}
        if not h.fields or any(wd not in codes for _n, wd, _s in h.fields):
            return None
        fmt = "!" + "".join(codes[wd].lower() if sg else codes[wd] for _n, wd, sg in h.fields)
        var = f"_ST{h.index}"
        self.env[var] = struct.Struct(fmt)
        return var

    def chunk_struct_for(self, h: HeaderInfo) -> tuple[str, list[list[int]]] | None:
        """For a header whose fields fall into byte-aligned runs of 1, 2, 4 or 8 bytes
        (IPv4's 4 + 4, 3 + 13, ...): a precompiled unsigned ``struct.Struct`` with one
        integer per run and the field numbers of each run, or None. A run's fields are
        then cut from a small integer, not from the whole header's."""
        codes = {1: "B", 2: "H", 4: "I", 8: "Q"}
        runs: list[list[int]] = []
        run: list[int] = []
        bits = 0
        for k, (_n, wd, _s) in enumerate(h.fields):
            run.append(k)
            bits += wd
            if bits % 8 == 0:
                if bits // 8 not in codes:
                    return None
                runs.append(run)
                run, bits = [], 0
        if run or not runs:
            return None
        fmt = "!" + "".join(codes[sum(h.fields[k][1] for k in r) // 8] for r in runs)
        var = f"_STC{h.index}"
        self.env[var] = struct.Struct(fmt)
        return var, runs

    def header_fields(self, h: HeaderInfo) -> list[tuple[str, int]]:
        """A whole header's fields as unsigned values, in order: (expression, width); a
        signed field masked to its width."""
        read = self.X.read
        return [
            (f"(F[{h.base + k}] & {mask_lit(wd)})" if sg else read(h.base + k), wd)
            for k, (_n, wd, sg) in enumerate(h.fields)
        ]

    def header_int(self, h: HeaderInfo) -> str:
        """Expression of a whole header as one unsigned integer (fields MSB first)."""
        parts = []
        shift = h.nbits
        for v, wd in self.header_fields(h):
            shift -= wd
            parts.append(f"({v} << {shift})" if shift else v)
        return "(" + " | ".join(parts) + ")" if parts else "0"


def field_refs(base: int, n: int) -> str:
    """``F[base], ..., F[base + n - 1]``: a header's fields, as call arguments or as the
    targets of one unpacked tuple (one subscript per field: cheaper than a slice of F)."""
    return ", ".join(f"F[{base + k}]" for k in range(n))


__all__ = ["AssertFailure", "CORE_ERRORS", "DROP_PORT", "Gen", "Source", "ident"]
