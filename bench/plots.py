"""The benchmark's pictures (matplotlib, the optional `bench` extra): density, speedup,
scaling and the line-rate projection, from the results bench/report.py indexes."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from report import (
    PATTERN_LABEL,
    PROJECTION,
    Index,
    human_size,  # noqa: E402
    projected,
    scaling_rows,
    sweep_density,
)

COLOR = {
    "shared": "tab:blue",
    "independent": "tab:orange",
    "zipf": "tab:green",
    "ring": "tab:red",
    "dense": "tab:purple",
}
STYLE = {4: "-", 8: "--", 2: ":", 16: "-."}
MARK = {4: "o", 8: "s", 2: "^", 16: "D"}


def _percent(ax) -> None:
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:g} %"))


def _bytes(v: float) -> str:
    return f"{v / 1e6:g} MB" if v >= 1e6 else f"{v / 1e3:g} kB" if v >= 1e3 else f"{v:g} B"


def _plain_y(ax, fmt=lambda v: f"{v:g}") -> None:
    """Plain numbers on a log y axis (not 4×10^-1); minor ticks labelled only when the axis
    spans less than two decades (else they crowd)."""
    lo, hi = ax.get_ylim()
    few = hi / lo < 100

    def minor(v: float, _) -> str:
        lead = round(v / 10 ** math.floor(math.log10(v))) if v > 0 else 0
        return fmt(v) if few and lead in (2, 3, 5) else ""

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def _series_style(pattern: str, workers: int, first_workers: int) -> dict:
    """Lines per worker count; the Zipf pattern is one point, a star (edged for the second
    worker count)."""
    if pattern == "zipf":
        return dict(
            marker="*",
            markersize=14,
            ls="none",
            markeredgecolor="black" if workers != first_workers else None,
        )
    return dict(ls=STYLE.get(workers, "-"), marker=MARK.get(workers, "o"))


def _save_legend_below(fig, handles, labels, ncol: int, path: Path) -> Path:
    """A shared legend under the axes, one column per worker count, sized to its rows."""
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    rows = math.ceil(len(labels) / ncol)
    fig.tight_layout(rect=(0, (0.1 + 0.19 * rows) / fig.get_figheight(), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def density(ix: Index, target: str, out: Path) -> Path | None:
    groups = [g for g in ix.sweep_groups() if g[0] == target]
    if not groups:
        return None
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(12, 4.8))
    for _, w, size in groups:
        for p in ("shared", "independent"):
            rs = ix.sweep(target, w, size, p)
            x = [r.case.density for r in rs]
            ax_t.plot(
                x,
                [r.seconds for r in rs],
                STYLE.get(w, "-"),
                marker=MARK.get(w, "o"),
                color=COLOR[p],
                label=f"p4reduce, {PATTERN_LABEL[p]}, {w} workers",
            )
            ax_b.plot(
                x,
                [r.tx_bytes + r.rx_bytes for r in rs],
                STYLE.get(w, "-"),
                marker=MARK.get(w, "o"),
                color=COLOR[p],
                label=f"p4reduce, {PATTERN_LABEL[p]}, {w} workers",
            )
        for z in ix.sweep(target, w, size, "zipf"):
            for ax, y in ((ax_t, z.seconds), (ax_b, z.tx_bytes + z.rx_bytes)):
                ax.plot(
                    [z.block_density],
                    [y],
                    marker="*",
                    markersize=14,
                    ls="none",
                    color=COLOR["zipf"],
                    markeredgecolor="black" if w != groups[0][1] else None,
                    label=f"p4reduce, {PATTERN_LABEL['zipf']}, {w} workers",
                )
        g = ix.get(target, "gloo", w, size, "ring")
        if g:
            ax_t.axhline(
                g.seconds,
                color=COLOR["ring"],
                ls=STYLE.get(w, "-"),
                label=f"gloo ring (dense), {w} workers, MTU {g.mtu or 1500}",
            )
            ax_b.axhline(
                g.tx_bytes + g.rx_bytes,
                color=COLOR["ring"],
                ls=STYLE.get(w, "-"),
                label=f"gloo ring (dense), {w} workers, MTU {g.mtu or 1500}",
            )
    size = groups[0][2]
    for ax, what, fmt in (
        (ax_t, "seconds per allreduce (slowest rank, best repeat)", lambda v: f"{v:g}"),
        (ax_b, "bytes sent + received per worker per allreduce", _bytes),
    ):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("density: non-zero blocks per worker")
        ax.set_ylabel(what)
        _percent(ax)
        _plain_y(ax, fmt)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"{target}: {human_size(size)} float32 values, p4reduce vs gloo")
    ax_t.set_title("time vs density")
    ax_b.set_title("bytes on the wire vs density (interface counters)")
    handles, labels = ax_t.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    return _save_legend_below(
        fig, list(uniq.values()), list(uniq.keys()), len(groups), out / f"density-{target}.png"
    )


def speedup(ix: Index, target: str, out: Path) -> Path | None:
    groups = [g for g in ix.sweep_groups() if g[0] == target]
    if not groups:
        return None
    fig, (ax_d, ax_g) = plt.subplots(1, 2, figsize=(12, 6))
    xs = sorted(
        {
            sweep_density(r)
            for _, w, s in groups
            for p in ("shared", "independent", "zipf")
            for r in ix.sweep(target, w, s, p)
        }
    )
    ax_d.plot(
        xs,
        [1 / x for x in xs],
        color="gray",
        lw=3,
        alpha=0.4,
        label="1 / density (the limit: only non-zero blocks cost)",
    )
    for _, w, size in groups:
        dense = ix.get(target, "p4reduce", w, size, "dense")
        gloo = ix.get(target, "gloo", w, size, "ring")
        if dense and gloo:
            ax_g.plot(
                xs,
                [gloo.seconds / dense.seconds / x for x in xs],
                color="gray",
                lw=3,
                alpha=0.4,
                ls=STYLE.get(w, "-"),
                label=f"(gloo ÷ p4reduce dense) / density, {w} workers: the limit",
            )
        for p in ("shared", "independent", "zipf"):
            rs = ix.sweep(target, w, size, p)
            kw = _series_style(p, w, groups[0][1])
            x = [sweep_density(r) for r in rs]
            lab = f"{PATTERN_LABEL[p]}, {w} workers"
            if dense:
                ax_d.plot(
                    x, [dense.seconds / r.seconds for r in rs], color=COLOR[p], label=lab, **kw
                )
            if gloo:
                ax_g.plot(
                    x, [gloo.seconds / r.seconds for r in rs], color=COLOR[p], label=lab, **kw
                )
    fig.suptitle(f"{target}: speedup of sparse p4reduce, {human_size(groups[0][2])} float32 values")
    for ax, title in (
        (ax_d, "over p4reduce dense (time)"),
        (ax_g, "over gloo's ring (time; below 1: gloo is faster)"),
    ):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("density: non-zero blocks per worker")
        ax.set_ylabel("× faster")
        ax.axhline(1, color="black", lw=0.8)
        _percent(ax)
        _plain_y(ax)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(title)
    uniq: dict = {}
    for ax in (ax_d, ax_g):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            uniq.setdefault(lab, h)
    return _save_legend_below(
        fig, list(uniq.values()), list(uniq.keys()), 2, out / f"speedup-{target}.png"
    )


def scaling(ix: Index, target: str, out: Path) -> Path | None:
    series = scaling_rows(ix, target)
    if not series:
        return None
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(12, 4.5))
    size = next(iter(series.values()))[0].case.size
    for (system, pattern), rs in series.items():
        w = [r.case.workers for r in rs]
        lab = (
            "gloo ring (dense)" if system == "gloo" else f"p4reduce 10 %, {PATTERN_LABEL[pattern]}"
        )
        ax_t.plot(w, [r.seconds for r in rs], marker="o", color=COLOR[pattern], label=lab)
        ax_b.plot(
            w, [r.tx_bytes + r.rx_bytes for r in rs], marker="o", color=COLOR[pattern], label=lab
        )
    ws = sorted({r.case.workers for rs in series.values() for r in rs})
    ax_b.plot(
        ws,
        [2 * 2 * (n - 1) / n * 4 * size for n in ws],
        color=COLOR["ring"],
        ls=":",
        label="ring payload both ways, 2 × 2(N−1)/N × tensor",
    )
    for ax, what, fmt in (
        (ax_t, "seconds per allreduce", lambda v: f"{v:g}"),
        (ax_b, "bytes sent + received per worker", _bytes),
    ):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_y(ax, fmt)
        ax.set_xticks(ws, [str(n) for n in ws])
        ax.set_xlabel("workers")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{target}: scaling at 10 % density, {human_size(size)} float32 values")
    ax_t.set_title("time vs workers")
    ax_b.set_title("bytes per worker vs workers")
    return _save(fig, out / f"scaling-{target}.png")


def projection(ix: Index, out: Path) -> Path | None:
    targets = ix.targets()
    groups = [g for g in ix.sweep_groups() if targets and g[0] == targets[0]]
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(9, 6.5))
    for target, w, size in groups:
        dense = ix.get(target, "p4reduce", w, size, "dense")
        gloo = ix.get(target, "gloo", w, size, "ring")
        if gloo:
            ax.axhline(
                projected(gloo) * 1e6,
                color=COLOR["ring"],
                ls=STYLE.get(w, "-"),
                label=f"ring allreduce, {w} workers",
            )
        if dense:
            ax.axhline(
                projected(dense) * 1e6,
                color=COLOR["dense"],
                ls=STYLE.get(w, "-"),
                label=f"p4reduce dense, {w} workers",
            )
        for p in ("shared", "independent", "zipf"):
            rs = ix.sweep(target, w, size, p)
            kw = _series_style(p, w, groups[0][1])
            ax.plot(
                [sweep_density(r) for r in rs],
                [projected(r) * 1e6 for r in rs],
                color=COLOR[p],
                label=f"p4reduce, {PATTERN_LABEL[p]}, {w} workers",
                **kw,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    _percent(ax)
    ax.set_xlabel("density: non-zero blocks per worker")
    ax.set_ylabel("µs per allreduce (model)")
    _plain_y(ax)
    ax.set_title(
        f"MODEL, not measured: {human_size(groups[0][2])} values at "
        f"{PROJECTION.link_gbps:g} Gb/s, RTT {PROJECTION.rtt_us:g} µs, "
        f"{PROJECTION.slots} slots",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    return _save_legend_below(fig, handles, labels, len(groups), out / "projection.png")


def draw(ix: Index, out: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for target in ix.targets():
        for name, fn in (("density", density), ("speedup", speedup), ("scaling", scaling)):
            path = fn(ix, target, out)
            if path is not None:
                files[f"{name}-{target}"] = path
    path = projection(ix, out)
    if path is not None:
        files["projection"] = path
    return files
