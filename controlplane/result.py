"""Reads Result: the per-job counters of what became of each contribution
(docs/protocol.md section 12).

The Result control (p4src/v1model/result.p4) turns the packet that completes a round into
the RESULT and answers the others; the controller programs nothing in it (the multicast
group is replication.py's, the copies' addresses result_destination.py's) and only reads
its counters, all indexed by the job's `job_index`.
"""

from __future__ import annotations

SECTION = "12. Result and replication"  # docs/protocol.md
TABLES: tuple[str, ...] = ()
JOB_COUNTERS = (
    "aggregated",
    "rounds_completed",
    "retransmissions_served",
    "duplicates",
    "overflows",
    "state_lost",
    "stale",
)
SWITCH_COUNTERS: tuple[str, ...] = ()
