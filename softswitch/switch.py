"""The softswitch: a simple_switch work-alike driven by a bmv2 JSON.

``Switch`` owns the lock, the loaded pipeline and the control-plane API; it is the
``softswitch.interface.SwitchTarget`` the P4Runtime server drives (that Protocol is the
contract; the extras here -- ``tables``, ``register_reset``, ``generated_source``,
``last_error`` -- are for tests and debugging).  The heavy lifting is in softswitch/interp
(codegen.py compiles the JSON, pipeline.py walks a packet).
"""

from __future__ import annotations

import logging
import threading
from .errors import InvalidArgument, NotFound, PipelineError, SoftswitchError, UnsupportedConstruct
from .interp.codegen import AssertFailure, program_of
from .interp.pipeline import Pipeline
from .interface import Entry, Match, Replica
from .interp.tables import Table
from .interp.wide import as_int

__all__ = ["Switch", "Entry"]

log = logging.getLogger("softswitch")

MAX_MC_GROUP = 0xFFFF
MAX_PORT = 511


class Switch:
    def __init__(
        self, *, device_id: int = 1, cpu_port: int | None = None, trace: bool = False
    ) -> None:
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.trace = trace
        self._lock = threading.RLock()
        self._p: Pipeline | None = None
        self._stats: dict[str, int] = {
            "frames_in": 0,
            "frames_out": 0,
            "frames_dropped": 0,
            "process_errors": 0,
            "assert_failures": 0,
            "no_pipeline": 0,
        }
        self.last_error: str | None = None

    # -- pipeline ------------------------------------------------------------------------
    def load_pipeline(self, bmv2_json: bytes | str) -> None:
        """Parse + compile; on any error the previous pipeline stays and its state too."""
        try:
            raw = bmv2_json.encode() if isinstance(bmv2_json, str) else bytes(bmv2_json)
            compiled = program_of(raw, self.trace).instantiate()
        except SoftswitchError:
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure means the JSON is bad
            raise PipelineError(f"malformed bmv2 JSON: {type(exc).__name__}: {exc}") from exc
        try:
            p = Pipeline(compiled)
        except Exception as exc:  # noqa: BLE001
            raise PipelineError(f"malformed bmv2 JSON: {type(exc).__name__}: {exc}") from exc
        with self._lock:
            self._p = p

    @property
    def pipeline_loaded(self) -> bool:
        return self._p is not None

    # -- data plane ----------------------------------------------------------------------
    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        with self._lock:
            st = self._stats
            st["frames_in"] += 1
            p = self._p
            if p is None:
                st["no_pipeline"] += 1
                st["frames_dropped"] += 1
                return []
            try:
                out = p.process(ingress_port, bytes(frame))
            except AssertFailure as exc:
                # simple_switch aborts the whole process here; we drop the packet instead.
                st["assert_failures"] += 1
                st["frames_dropped"] += 1
                self.last_error = str(exc)
                log.error("assert/assume failed: %s", exc)
                return []
            except Exception as exc:  # noqa: BLE001 - never let a frame crash the caller
                st["process_errors"] += 1
                st["frames_dropped"] += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("error while processing a frame")
                return []
            if not out:
                st["frames_dropped"] += 1
            st["frames_out"] += len(out)
            return out

    # -- helpers -------------------------------------------------------------------------
    def _pl(self) -> Pipeline:
        if self._p is None:
            raise NotFound("no pipeline loaded")
        return self._p

    def _table(self, name: str) -> Table:
        t = self._pl().c.tables.get(name)
        if t is None:
            raise NotFound(f"no table {name!r}")
        return t

    # -- tables --------------------------------------------------------------------------
    def table_add(
        self, table: str, match: Match, action: str, params: list[int], priority: int | None = None
    ) -> int:
        with self._lock:
            return self._table(table).add(list(match), action, list(params), priority)

    def table_modify(
        self, table: str, match: Match, action: str, params: list[int], priority: int | None = None
    ) -> None:
        with self._lock:
            self._table(table).modify(list(match), action, list(params), priority)

    def table_delete(self, table: str, match: Match, priority: int | None = None) -> None:
        with self._lock:
            self._table(table).delete(list(match), priority)

    def table_set_default(self, table: str, action: str, params: list[int]) -> None:
        with self._lock:
            self._table(table).set_default(action, list(params))

    def table_reset_default(self, table: str) -> None:
        with self._lock:
            t = self._table(table)
            if t.const_default:
                raise InvalidArgument(f"table {table}: the default action is const")
            t.reset_default()

    def table_get_default(self, table: str) -> tuple[str, list[int]]:
        with self._lock:
            t = self._table(table)
            return t.default_name, list(t.default_params)

    def table_entries(self, table: str) -> list[Entry]:
        with self._lock:
            return self._table(table).list_entries()

    def tables(self) -> list[str]:
        """Names of all tables (including p4c's keyless helper tables)."""
        with self._lock:
            return list(self._pl().c.tables)

    # -- multicast -----------------------------------------------------------------------
    @staticmethod
    def _check_replicas(replicas: list[Replica]) -> list[Replica]:
        out = []
        for r in replicas:
            if not (isinstance(r, (tuple, list)) and len(r) == 2):
                raise InvalidArgument(f"replica must be (port, rid), got {r!r}")
            port, rid = r
            if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
                raise InvalidArgument(f"bad replica port {port!r}")
            if isinstance(rid, bool) or not isinstance(rid, int) or not 0 <= rid <= 0xFFFF:
                raise InvalidArgument(f"bad replica rid {rid!r}")
            out.append((port, rid))
        # McSimplePre replicates L1 nodes (one per rid, in creation order) and, inside a node,
        # ports in ascending order; duplicates collapse into the port bitmap.
        by_rid: dict[int, set[int]] = {}
        for port, rid in out:
            by_rid.setdefault(rid, set()).add(port)
        return [(port, rid) for rid, ports in by_rid.items() for port in sorted(ports)]

    def mc_group_set(self, group_id: int, replicas: list[Replica]) -> None:
        if (
            isinstance(group_id, bool)
            or not isinstance(group_id, int)
            or not 1 <= group_id <= MAX_MC_GROUP
        ):
            raise InvalidArgument(f"multicast group id must be in [1, {MAX_MC_GROUP}]")
        reps = self._check_replicas(replicas)
        with self._lock:
            self._pl().mc_groups[group_id] = reps

    def mc_group_set_nodes(self, group_id: int, nodes: list[tuple[int, list[int]]]) -> None:
        """Set a group as bmv2's replication engine holds it: L1 nodes (rid, ports) in
        order, replicated node by node, ports ascending inside a node. Unlike
        mc_group_set, two nodes may share a rid (bmv2 keeps a group's old nodes across a
        pipeline change, and a group re-created then replicates twice)."""
        if (
            isinstance(group_id, bool)
            or not isinstance(group_id, int)
            or not 1 <= group_id <= MAX_MC_GROUP
        ):
            raise InvalidArgument(f"multicast group id must be in [1, {MAX_MC_GROUP}]")
        reps: list[tuple[int, int]] = []
        for rid, ports in nodes:
            reps.extend(self._check_replicas([(port, rid) for port in ports]))
        with self._lock:
            self._pl().mc_groups[group_id] = reps

    def mc_group_delete(self, group_id: int) -> None:
        with self._lock:
            if self._pl().mc_groups.pop(group_id, None) is None:
                raise NotFound(f"no multicast group {group_id}")

    def mc_groups(self) -> dict[int, list[Replica]]:
        with self._lock:
            return {g: list(r) for g, r in self._pl().mc_groups.items()}

    def clone_session_set(self, session_id: int, replicas: list[Replica]) -> None:
        raise UnsupportedConstruct("clone sessions", "the softswitch (clone is not implemented)")

    # -- registers / counters ------------------------------------------------------------
    def _reg(self, name: str) -> list[int]:
        r = self._pl().c.registers.get(name)
        if r is None:
            raise NotFound(f"no register {name!r}")
        return r

    def register_read(self, name: str, index: int) -> int:
        with self._lock:
            r = self._reg(name)
            if not 0 <= index < len(r):
                raise InvalidArgument(f"register {name}: index {index} out of range [0, {len(r)})")
            return as_int(r[index])  # a wide register's cell may hold a Wide

    def register_write(self, name: str, index: int, value: int) -> None:
        with self._lock:
            r = self._reg(name)
            w = self._pl().c.register_widths[name]
            if not 0 <= index < len(r):
                raise InvalidArgument(f"register {name}: index {index} out of range [0, {len(r)})")
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << w):
                raise InvalidArgument(f"register {name}: value {value!r} does not fit in {w} bits")
            r[index] = value

    def register_size(self, name: str) -> int:
        with self._lock:
            return len(self._reg(name))

    def register_reset(self, name: str) -> None:
        """Zero a whole register array (P4Runtime has no bulk write; handy for tests/ctl)."""
        with self._lock:
            r = self._reg(name)
            r[:] = [0] * len(r)

    def _ctr(self, name: str) -> tuple[list[int], list[int]]:
        c = self._pl().c.counters.get(name)
        if c is None:
            raise NotFound(f"no counter {name!r}")
        return c

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        with self._lock:
            b, p = self._ctr(name)
            if not 0 <= index < len(b):
                raise InvalidArgument(f"counter {name}: index {index} out of range")
            return b[index], p[index]

    def counter_write(self, name: str, index: int, bytes_: int, packets: int) -> None:
        with self._lock:
            b, p = self._ctr(name)
            if not 0 <= index < len(b):
                raise InvalidArgument(f"counter {name}: index {index} out of range")
            if bytes_ < 0 or packets < 0:
                raise InvalidArgument("counter values must be non-negative")
            b[index], p[index] = bytes_, packets

    def counter_size(self, name: str) -> int:
        with self._lock:
            return len(self._ctr(name)[0])

    # -- stats ---------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        with self._lock:
            out = dict(self._stats)
            if self._p is not None:
                for k, v in self._p.stats.items():
                    out[k] = v
            return out

    def generated_source(self) -> str:
        """The Python source compiled from the JSON (for debugging and docs)."""
        with self._lock:
            return self._pl().c.source

    def __repr__(self) -> str:  # pragma: no cover
        return f"Switch(device_id={self.device_id}, loaded={self.pipeline_loaded})"
