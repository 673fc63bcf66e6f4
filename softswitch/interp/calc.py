"""bmv2 calculations (the inputs of hash() and of checksums) -> one generated function each.

A calculation is used by the hash primitive and by verify/update checksums; each is
emitted once, as ``CALC<n>(F, V, X)``, on first use.  The byte string it builds is what
bmv2's ``BufBuilder`` builds: fields of valid headers bit-packed MSB first, sized
constants, whole headers, and the unparsed payload (nothing may follow the payload).
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
    payload = False
    # consecutive fields of one header: one validity test, one shift of acc
    run: list[tuple[str, int]] = []  # (value, width)
    run_header = -1

    def flush_run() -> None:
        nonlocal run
        if run:
            bits = sum(wd for _, wd in run)
            terms, shift = [], bits
            for val, wd in run:
                shift -= wd
                terms.append(f"({val} << {shift})" if shift else val)
            s.emit(f"if V[{run_header}]:", 1)
            s.emit(f"acc = (acc << {bits}) | {' | '.join(terms)}", 2)
            s.emit(f"nb += {bits}", 2)
        run = []

    for inp in c.get("input", []):
        t = inp.get("type")
        if payload:
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
            s.emit(f"acc = (acc << {bw}) | {v}", 1)
            s.emit(f"nb += {bw}", 1)
        elif t == "header":
            info = g.L.header(inp["value"], cw)
            s.emit(f"if V[{info.index}]:", 1)
            s.emit(f"acc = (acc << {info.nbits}) | {g.header_int(info)}", 2)
            s.emit(f"nb += {info.nbits}", 2)
        elif t == "payload":
            payload = True
        else:
            raise UnsupportedConstruct(f'calculation input type "{t}"', cw)
    flush_run()
    if algo in hashes.ON_INT and not payload:
        # the algorithm on the bit string as an integer: no bytes built (a checksum of
        # 16-bit words is the integer's residue mod 0xFFFF, hashes.csum16_of_int)
        g.env[alg + "_int"] = hashes.ON_INT[algo]
        s.emit(f"return {alg}_int(acc, nb)", 1)
    else:
        s.emit("buf = (acc << (-nb % 8)).to_bytes((nb + 7) // 8, 'big')", 1)
        if payload:
            s.emit(f"buf += X[{X_PAYLOAD}]", 1)
        s.emit(f"return {alg}(buf)", 1)
    s.emit("")
    g.calc_names[name] = fname
    return fname
