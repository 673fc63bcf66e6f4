"""The contract between the P4Runtime server and the interpreter: ``SwitchTarget``.

The server (softswitch.p4rt) drives a target only through this Protocol, the way
``hostlib.worker.Transport`` decouples the worker loop from its sockets; the interpreter
(softswitch.switch.Switch) satisfies it, and tests/softswitch_server checks that it does,
member by member.  A stand-in target must satisfy it too.

Names are the fully qualified names p4c writes in BOTH the bmv2 JSON and the P4Info
(e.g. ``"MyIngress.admission.admission"``); the server maps P4Info ids to names, the
target only knows names.

How a target reports failures (the server maps them by class, softswitch.p4rt.status):

* ``softswitch.errors.UnsupportedConstruct``: something the target cannot do at all
  (UNIMPLEMENTED, naming the construct);
* the other ``softswitch.errors.SoftswitchError`` classes (``NotFound``,
  ``AlreadyExists``, ``InvalidArgument``, ``PipelineError``): the target refuses this
  request, as bmv2 refuses one (PI's "Error when ... target", UNKNOWN);
* any other exception is a bug (INTERNAL, logged with its traceback), never UNIMPLEMENTED.

All calls may come from different threads (ports vs gRPC); the target serialises them
(simple_switch runs one ingress thread, so this does not change semantics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

# One item per key field, in JSON key order:
#   exact int; lpm (value, prefix_len); ternary (value, mask); range (lo, hi);
#   optional int | None (None: wildcard).
Match = list[Any]
# (egress port, replication id), in replication order
Replica = tuple[int, int]


@dataclass
class Entry:
    """One table entry as the target lists it (``table_entries``)."""

    match: list[Any]
    action: str
    params: list[int]
    priority: int | None


@runtime_checkable
class SwitchTarget(Protocol):
    """What the P4Runtime server needs from a target (softswitch.switch.Switch).

    Conventions:

    * **priorities** passed to ``table_add`` follow P4Runtime: larger wins; required
      (1 .. 2**31-1) for tables with a ternary, range or optional key and unset (None) for
      the others.  Among equal priorities the older entry wins, as in bmv2.
    * **multicast** replicas are replicated in the order ``McSimplePre::replicate`` walks
      them: one L1 node per rid in order of first appearance, ports ascending inside a node.
    """

    # -- pipeline ------------------------------------------------------------------------
    def load_pipeline(self, bmv2_json: bytes | str) -> None:
        """Parse and compile; on error (``UnsupportedConstruct`` naming the construct and
        where, or ``PipelineError``) the old pipeline stays.  On success all state (tables,
        registers, counters, multicast groups) is fresh."""

    @property
    def pipeline_loaded(self) -> bool: ...

    # -- data plane ----------------------------------------------------------------------
    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """One packet through parser, verify checksum, ingress, PRE, egress, update
        checksum, deparser: every (egress_port, frame) emitted, in order.  Never raises
        for a bad frame (counted instead)."""

    # -- tables --------------------------------------------------------------------------
    def table_add(
        self, table: str, match: Match, action: str, params: list[int], priority: int | None = None
    ) -> int:
        """Insert; returns the entry handle."""

    def table_modify(
        self, table: str, match: Match, action: str, params: list[int], priority: int | None = None
    ) -> None: ...

    def table_delete(self, table: str, match: Match, priority: int | None = None) -> None: ...

    def table_set_default(self, table: str, action: str, params: list[int]) -> None: ...

    def table_reset_default(self, table: str) -> None:
        """Back to the program's default action."""

    def table_get_default(self, table: str) -> tuple[str, list[int]]:
        """(action name, params); ("", []) when the table has none."""

    def table_entries(self, table: str) -> list[Entry]:
        """Every entry, in handle order (as bmv2 lists them)."""

    # -- packet replication engine -------------------------------------------------------
    def mc_group_set(self, group_id: int, replicas: list[Replica]) -> None: ...

    def mc_group_set_nodes(self, group_id: int, nodes: list[tuple[int, list[int]]]) -> None:
        """bmv2's L1 nodes (rid, ports) as they are, the same rid allowed twice (the
        server keeps bmv2's PRE and pushes it with this)."""

    def mc_group_delete(self, group_id: int) -> None: ...

    def mc_groups(self) -> dict[int, list[Replica]]: ...

    def clone_session_set(self, session_id: int, replicas: list[Replica]) -> None:
        """softswitch: raises ``UnsupportedConstruct`` (clone is not implemented)."""

    # -- stateful objects ----------------------------------------------------------------
    def register_read(self, name: str, index: int) -> int: ...

    def register_write(self, name: str, index: int, value: int) -> None: ...

    def register_size(self, name: str) -> int: ...

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """(bytes, packets)."""

    def counter_write(self, name: str, index: int, bytes_: int, packets: int) -> None: ...

    def counter_size(self, name: str) -> int: ...

    # -- the switch itself ---------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """Frames in/out, parser errors, drops by reason."""


__all__ = ["Entry", "Match", "Replica", "SwitchTarget"]
