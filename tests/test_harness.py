"""The jobs on a switch under test are the controller's (p4net.harness).

Why: a packet-level test is only as good as the entries it runs against. A job the harness
adds with an index, slots and epoch the test chooses must hold exactly the entries
`JobManager.create` writes for a job with those values -- the same multicast group (the
controller's group base), the same admission and result-destination entries -- and
removing it must be the controller's delete, leaving nothing behind. Real P4Runtime
reads on softswitch's in-process target compare the two.
"""

from __future__ import annotations

from controlplane.admission import job_parameters
from controlplane.reconcile import read_entries
from controlplane.replication import read_groups
from hostlib.protocol import Encoding, RoundMode
from p4net.harness import SwitchSession


def _entries(session: SwitchSession) -> tuple[list[bytes], dict[int, list[tuple[int, int]]]]:
    """Every table entry the controller may write, and every multicast group, as read."""
    tables = sorted(e.SerializeToString(deterministic=True) for e in read_entries(session.conn))
    groups = {g: sorted(replicas) for g, replicas in read_groups(session.conn).items()}
    return tables, groups


def test_a_job_the_harness_adds_holds_the_entries_the_controller_creates():
    with SwitchSession.inprocess(ports=4) as created:
        job = created.create_job(3, slots=4, job=9, ports=[2, 3, 4], encoding="lanes")
        want = _entries(created)
        groups = {job_parameters(job).mcast_grp: sorted((w.port, w.rank) for w in job.workers)}
        assert want[1] == groups and want[0], "the controller wrote the job's entries"
    with SwitchSession.inprocess(ports=4) as added:
        assert _entries(added) == ([], {})
        test_job = added.add_job(
            9,
            3,
            slot_base=job.slot_base,
            slot_count=job.slot_count,
            job_index=job.job_index,
            epoch=job.epoch,
            ports=[2, 3, 4],
            encoding=Encoding.LANES,
            round_mode=RoundMode[job.round_mode.upper()],
        )
        assert _entries(added) == want
        test_job.remove()
        assert _entries(added) == ([], {})
