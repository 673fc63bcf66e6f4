"""Reads Rewind: the per-job count of REWIND requests the switch took (silent rounds,
docs/protocol.md section 13).

The Rewind control (p4src/v1model/rewind.p4) keeps each pool slot's pending rewind
position; the data plane writes and clears it in band, so the controller programs nothing
in it and only reads its counter, indexed by the job's `job_index`.
"""

from __future__ import annotations

SECTION = "Silent rounds: queries and rewinds"  # docs/protocol.md, in section 13
TABLES: tuple[str, ...] = ()
JOB_COUNTERS = ("rewinds",)
SWITCH_COUNTERS: tuple[str, ...] = ()
