"""The P4 program as a whole: what its top-level controls declare (where its build is:
p4reduce.target).

p4src/v1model/p4reduce.p4's own controls (P4ReduceIngress, P4ReduceEgress) hold only what
no single sub-control owns: the `drops` counter, indexed by the reason a packet was
dropped before admission or by it (docs/protocol.md section 16). The sub-controls each have
a controller module of their own name (admission, drop_simulator, forwarding, identity,
result, result_destination), checked by tests/controller_tests/test_control_modules.py.
"""

from __future__ import annotations

SECTION = "16. Counters"
TABLES: tuple[str, ...] = ()
JOB_COUNTERS: tuple[str, ...] = ()
SWITCH_COUNTERS = ("drops",)  # one index per reason, DROP_REASONS
# drops' indices: DROP_MALFORMED = 0, DROP_UNADMITTED = 1 in p4src/common/constants.p4
DROP_REASONS = ("malformed", "unadmitted")
