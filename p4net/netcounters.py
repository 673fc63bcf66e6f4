"""Interface counters as the kernel keeps them, read from inside a host's network namespace.

/proc/net/dev shows the namespace of the process that reads it (unlike /sys/class/net, which
shows the namespace sysfs was mounted in), so a worker in a Mininet host reads its own
link's counters around the allreduces it times: the bytes the benchmarks report are the
kernel's, for p4reduce and gloo alike, not computed from packet counts.
"""

from __future__ import annotations

from pathlib import Path

FIELDS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets")


def _rows() -> dict[str, list[int]]:
    rows: dict[str, list[int]] = {}
    for line in Path("/proc/self/net/dev").read_text().splitlines()[2:]:
        name, _, data = line.partition(":")
        rows[name.strip()] = [int(v) for v in data.split()]
    return rows


def host_link() -> str:
    """The namespace's only interface other than lo (a Mininet host's link)."""
    others = [n for n in _rows() if n != "lo"]
    if len(others) != 1:
        raise ValueError(
            f"/proc/self/net/dev: expected one interface besides lo, "
            f"found {others}; name the interface"
        )
    return others[0]


def host_counters(ifname: str | None = None) -> dict[str, int]:
    """Counters of `ifname`, default: the namespace's only interface other than lo."""
    rows = _rows()
    if ifname is None:
        ifname = host_link()
    if ifname not in rows:
        raise ValueError(f"/proc/self/net/dev: no interface {ifname!r} (have {sorted(rows)})")
    v = rows[ifname]
    return {"rx_bytes": v[0], "rx_packets": v[1], "tx_bytes": v[8], "tx_packets": v[9]}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in FIELDS}
