"""bmv2 calculations (the inputs of hash() and of checksums) -> one generated function each.

A calculation is used by the hash primitive and by verify/update checksums; each is
emitted once, as ``CALC<n>(F, V, X)``, on first use.  The byte string it builds is what
bmv2's ``BufBuilder`` builds: fields of valid headers bit-packed MSB first, sized
constants, whole headers, and the unparsed payload (nothing may follow the payload).

A 16-bit ones' complement checksum (csum16) of a calculation without payload builds
neither bytes nor the input's integer: it depends on that integer only through its
residue mod 0xFFFF and whether it is zero (hashes.csum16_of_int), and since
2^16 = 1 (mod 0xFFFF), a value shifted left by s bits has the residue of it shifted by
s mod 16. So each input is added in shifted by its bit offset mod 16 -- a sum of small
integers, congruent to the bit string's integer and zero exactly when every input is
zero -- where the string itself would be built by shifts of an ever wider integer.
"""

from __future__ import annotations

from ..errors import PipelineError, UnsupportedConstruct
from . import hashes
from .expr import X_PAYLOAD, mask_lit, parse_hexstr
from .gen import Gen, ident


def calculation(g: Gen, name: str, where: str) -> str:
    """Name of the generated function for calculation ``name`` (emitted on first use)."""
    if name in g.calc_names:
        return g.calc_names[name]
    calcs = {c["name"]: c for c in g.j.get("calculations", [])}
    if name not in calcs:
        raise PipelineError(f"unknown calculation {name!r} in {where}")
    c = calcs[name]
    algo = c.get("algo")
    cw = f'calculation "{name}"'
    if algo not in hashes.ALGORITHMS:
        raise UnsupportedConstruct(f'hash algorithm "{algo}"', cw)
    fname = ident("CALC", len(g.calc_names))
    alg = f"_ALG_{algo}"
    g.env[alg] = hashes.ALGORITHMS[algo]
    s = g.src
    s.emit(f"def {fname}(F, V, X):")
    s.emit(f"# {name} ({algo})", 1)
    s.emit("acc = 0", 1)
    s.emit("nb = 0", 1)
    payload = any(inp.get("type") == "payload" for inp in c.get("input", []))
    residue = algo in hashes.ON_RESIDUE and not payload
    # consecutive fields of one header: one validity test, one shift of acc
    run: list[tuple[str, int]] = []  # (value, width)
    run_header = -1

    def flush_run() -> None:
        nonlocal run
        if run:
            bits = sum(wd for _, wd in run)
            s.emit(f"if V[{run_header}]:", 1)
            s.emit(f"acc = {_append(run, residue)}", 2)
            s.emit(f"nb += {bits}", 2)
        run = []

    after_payload = False
    for inp in c.get("input", []):
        t = inp.get("type")
        if after_payload:
            raise UnsupportedConstruct("calculation input after payload", cw)
        if t == "field":
            h, f = inp["value"]
            info = g.L.header(h, cw)
            if f == "$valid$":
                raise UnsupportedConstruct("$valid$ as calculation input", cw)
            i = g.L.field_index(h, f, cw)
            wd = g.L.widths[i]
            val = f"(F[{i}] & {mask_lit(wd)})" if g.L.signed[i] else g.X.read(i)
            if info.index != run_header:
                flush_run()
                run_header = info.index
            run.append((val, wd))
            continue
        flush_run()
        run_header = -1
        if t == "hexstr":
            bw = inp.get("bitwidth")
            if not isinstance(bw, int) or bw <= 0:
                raise PipelineError(f"{cw}: hexstr input needs a bitwidth")
            v = parse_hexstr(inp["value"], cw) & ((1 << bw) - 1)
            s.emit(f"acc = {_append([(str(v), bw)], residue)}", 1)
            s.emit(f"nb += {bw}", 1)
        elif t == "header":
            info = g.L.header(inp["value"], cw)
            s.emit(f"if V[{info.index}]:", 1)
            s.emit(f"acc = {_append(g.header_fields(info), residue)}", 2)
            s.emit(f"nb += {info.nbits}", 2)
        elif t == "payload":
            after_payload = True
        else:
            raise UnsupportedConstruct(f'calculation input type "{t}"', cw)
    flush_run()
    if residue:
        # the algorithm on a value congruent to the bit string's integer: no bytes built
        g.env[alg + "_int"] = hashes.ON_RESIDUE[algo]
        s.emit(f"return {alg}_int(acc, nb)", 1)
    else:
        s.emit("buf = (acc << (-nb % 8)).to_bytes((nb + 7) // 8, 'big')", 1)
        if payload:
            s.emit(f"buf += X[{X_PAYLOAD}]", 1)
        s.emit(f"return {alg}(buf)", 1)
    s.emit("")
    g.calc_names[name] = fname
    return fname


def _append(run: list[tuple[str, int]], residue: bool) -> str:
    """``acc`` with `run`'s unsigned values (MSB first) appended to its bit string: the
    string's integer, or with `residue` a sum congruent to it mod 0xFFFF that is zero
    exactly when the string is (module docstring)."""
    if not run:  # a header without fields
        return "acc"
    bits = sum(wd for _, wd in run)
    terms, shift = [], bits
    for val, wd in run:
        shift -= wd
        k = shift % 16 if residue else shift
        terms.append(f"({val} << {k})" if k else val)
    if residue:
        head = f"(acc << {bits % 16})" if bits % 16 else "acc"
        return " + ".join([head] + terms)
    return f"(acc << {bits}) | " + " | ".join(terms)
