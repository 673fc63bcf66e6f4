"""Switch bring-up and recovery: the controller as an operator runs it.

`Controller.up()` takes a switch from nothing (or from a restart) to serving jobs: connect
as primary, push the pipeline **unless the switch already runs the same one**, then
reconcile the tables and multicast groups with the configuration and the state file
(controlplane/reconcile.py). A controller restart therefore leaves running jobs alone:
pushing the pipeline again would clear every slot, and running jobs would fail
(SwitchStateLost).

"The same one" is strict: the same P4Info and device config, *and* the push the state file
records (its P4Runtime cookie, random per push). Job isolation rests on epochs being new
for the slots (docs/protocol.md section 8), and the registers cannot be read over
P4Runtime on bmv2; so when the state file does not know the push the registers date from
(a new or lost state file, another controller's push), the controller cannot know which
epochs the slots hold, and pushes the pipeline (clearing them) rather than risk a new job
taking over a deleted job's half-done round.
`Controller.ensure()` notices a switch that lost its pipeline (restarted) or a broken
session and does it all again; `watch()` runs that periodically. Every reconcile re-reads
the state file, so jobs created by other `p4reduce-ctl` processes are never forgotten.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from p4.v1 import p4runtime_pb2

from p4reduce.addresses import Address
from p4reduce.p4rt import P4InfoError, P4InfoIndex, load_p4info
from p4reduce.target import PortMap

from .config import Config, ConfigError
from .connection import MastershipError, SwitchConnection, SwitchError, new_pipeline_cookie
from p4reduce.job import Job, JobError, mark_lost

from .jobs import JobManager, check_job_pipes
from .reconcile import ReconcileReport, desired_state, reconcile

log = logging.getLogger(__name__)

PIPELINE_KEPT, PIPELINE_PUSHED = "kept", "pushed"


class Controller:
    """One switch's controller. The pipeline files are, in order: the arguments, the
    configuration's `switch.p4info`/`device_config`, the target's (p4reduce/target.py:
    p4src/build/ for bmv2, p4src/build/<target>/ for Tofino, whose device config the
    configuration must name)."""

    def __init__(
        self, config: Config, p4info: Path | None = None, device_config: Path | None = None
    ):
        self.config = config
        sw = config.switch
        target = sw.target_info
        self.p4info = p4info or sw.p4info or target.p4info
        self.device_config = device_config or sw.device_config or target.device_config
        self.conn = SwitchConnection(sw.grpc_addr, sw.device_id, sw.election_id)
        self.conn.ports = PortMap(dict(sw.port_map))
        self.jobs = JobManager(
            self.conn, Address(sw.mac, sw.ip), sw.state_file, set(sw.ports), target
        )
        self._stop = threading.Event()
        self._pipeline: tuple | None = None
        self._was_backup = False
        # what the last reconcile changed (`up` reports it: zero on a restart that found
        # the switch right)
        self.reconciled = ReconcileReport()

    def _our_pipeline(self):
        """(P4Info, device config bytes) of the program this controller runs."""
        if self._pipeline is None:
            if self.device_config is None:
                raise ConfigError(
                    "switch.device_config",
                    f"missing: a {self.config.switch.target} switch loads the "
                    "device config its P4Runtime server builds from the "
                    "compiler's output (docs/tofino.md); name that file",
                )
            for what, path in (
                ("switch.p4info", self.p4info),
                ("switch.device_config", self.device_config),
            ):
                if not Path(path).is_file():
                    raise ConfigError(what, f"{path} does not exist")
            self._pipeline = (load_p4info(self.p4info), Path(self.device_config).read_bytes())
        return self._pipeline

    def connect(self, retries: int = 5, require_primary: bool = True) -> None:
        """As primary (the controller writes), or without `require_primary` as a reader
        that does not arbitrate at all (SwitchConnection.connect): read-only commands run
        beside a primary controller of any election id and leave it primary."""
        self.conn.connect(retries=retries, arbitrate=require_primary)
        if require_primary and not self.conn.is_primary:
            self.conn.close()
            raise MastershipError(
                f"another controller with an election id higher than "
                f"{self.conn.election_id} (switch.election_id) is primary for "
                f"{self.conn.grpc_addr}: this one could only read. Stop that one, or use "
                f"a higher election id to take over"
            )

    def up(self, retries: int = 5, reset: bool = False) -> str:
        """Bring the switch to the configured state without disturbing running jobs.

        Returns PIPELINE_KEPT when the switch already ran our pipeline (only its tables
        were reconciled) or PIPELINE_PUSHED. `reset` pushes the pipeline regardless,
        which clears every register: every job's slots are cleared, so every job is marked
        lost (its ranks fail fast with SwitchStateLost: docs/protocol.md section 8, lost
        state) and must be deleted and created again."""
        self.connect(retries)
        return self._configure_switch(force_push=reset)

    def attach(self, retries: int = 5, require_primary: bool = True) -> bool:
        """Connect to a switch that is already up (CLI commands). False if it has no
        pipeline, in which case the caller should run up().

        A controller that will write (require_primary) must also find the push its state
        file records: otherwise the slots may hold epochs the state file does not know,
        and a job created now could reuse one (JobError: run `up`, which pushes)."""
        self.connect(retries, require_primary)
        if not self.conn.use_pipeline_of_switch():
            return False
        if require_primary:
            self.jobs.table.reload()
            found = self.conn.get_pipeline(
                p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY
            )
            have = found.cookie.cookie if found is not None and found.HasField("cookie") else 0
            if have != self.jobs.table.pipeline_cookie:
                raise JobError(
                    f"the state file {self.jobs.table.path} does not record the pipeline "
                    f"running on {self.conn.grpc_addr} (cookie {have:#x}, recorded "
                    f"{self.jobs.table.pipeline_cookie or 0:#x}): its slots may hold epochs "
                    f"this state file does not know. Run 'p4reduce-ctl up' (it pushes the "
                    f"pipeline, which clears the switch's slots and jobs)"
                )
        return True

    def _configure_switch(self, force_push: bool = False) -> str:
        info, device_config = self._our_pipeline()
        with self.jobs.table.locked() as table:
            why = (
                "reset requested"
                if force_push
                else self.conn.pipeline_difference(info, device_config, table.pipeline_cookie)
            )
            if why is None:
                log.info(
                    "switch %s already runs this pipeline: reconciling its tables, "
                    "data plane state untouched",
                    self.conn.grpc_addr,
                )
                self.conn.objects = P4InfoIndex.from_proto(info)
                outcome = PIPELINE_KEPT
            else:
                log.info("pushing the pipeline to %s (%s)", self.conn.grpc_addr, why)
                cookie = new_pipeline_cookie()
                self.conn.set_pipeline(info, device_config, cookie=cookie)
                table.pipeline_cookie = cookie
                self._mark_lost(list(table.jobs.values()), "its pipeline was pushed")
                table.save()
                outcome = PIPELINE_PUSHED
            self.reconciled = self._reconcile_locked()
        self._create_static_jobs()
        log.info("switch %s up with %d job(s)", self.conn.grpc_addr, len(self.jobs.jobs()))
        return outcome

    def _mark_lost(self, jobs: list[Job], why: str) -> list[int]:
        """`jobs` (this switch's records) marked lost (p4reduce.job.mark_lost): each is
        admitted with admit_lost once reconciled. The ids newly marked, logged with `why`."""
        newly = mark_lost(jobs)
        if newly:
            log.warning(
                "job(s) %s lost on switch %s (%s): their ranks get STATE_LOST; delete and "
                "create them again",
                ", ".join(map(str, newly)),
                self.conn.grpc_addr,
                why,
            )
        return newly

    def lose(self, incarnations: set[tuple[int, int]]) -> list[int]:
        """Mark this switch's parts of the jobs `incarnations` names ((job, epoch)) lost, as
        if this switch had lost them, and reconcile: each is admitted with admit_lost from
        now on. For a job across several switches (docs/fabric.md): one switch that lost
        it loses it for all. The ids newly marked."""
        with self.jobs.table.locked() as table:
            parts = [j for j in table.jobs.values() if (j.job, j.epoch) in incarnations]
            newly = self._mark_lost(parts, "another switch of the job lost it")
            if newly:
                table.save()
                self.reconciled = self._reconcile_locked()
        return newly

    def reconcile(self) -> ReconcileReport:
        """Make the switch's tables and groups match the configuration and the state file
        (re-read now, under its lock), then create missing static jobs."""
        with self.jobs.table.locked():
            report = self.reconciled = self._reconcile_locked()
        self._create_static_jobs()
        return report

    def _reconcile_locked(self) -> ReconcileReport:
        target = self.config.switch.target_info
        for job in self.jobs.table.jobs.values():
            if job.encoding not in target.encodings:
                # its workers would send packed values the TNA program adds as lanes
                raise JobError(
                    f"the state file {self.jobs.table.path} has job {job.job} "
                    f"with encoding {job.encoding!r}, which a {target.name} switch "
                    f"does not have: delete it there first, or use another "
                    f"state file"
                )
            if not job.int32_halves and not target.flags_int32_overflow:
                # its workers would send int32 lanes whose overflow nobody would see
                raise JobError(
                    f"the state file {self.jobs.table.path} has job {job.job} sending "
                    f"int32 as whole lanes, whose overflow a {target.name} switch cannot "
                    f"flag: delete it there first, or use another state file"
                )
            try:
                check_job_pipes(target, self.conn.ports, job.job, job.workers)
            except JobError as exc:
                # its read-out would read another pipe's registers
                raise JobError(
                    f"the state file {self.jobs.table.path} has a job a {target.name} "
                    f"switch cannot run ({exc}): delete it there first, or use another "
                    f"state file"
                ) from None
        return reconcile(
            self.conn, desired_state(self.conn, self.config.switch, self.jobs.table.jobs.values())
        )

    def _create_static_jobs(self) -> None:
        existing = {j.job for j in self.jobs.jobs()}
        for static in self.config.jobs:
            if static.job not in existing:
                self.jobs.create(
                    static.job,
                    static.workers,
                    static.slots,
                    static.encoding,
                    static.int32_halves,
                    static.block_values,
                    static.round_mode,
                    static.window,
                )

    def _pipeline_ok(self) -> bool:
        """Cheap check for watch(): the switch carries the cookie of the push the state
        file records (re-read now). A new push by anyone else, or a restarted switch with
        no pipeline, fails it."""
        self.jobs.table.reload()
        found = self.conn.get_pipeline(p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        return (
            found is not None
            and found.HasField("cookie")
            and found.cookie.cookie == self.jobs.table.pipeline_cookie
        )

    def ensure(self) -> bool:
        """Re-establish the session and the switch state if either was lost.

        Returns True when something had to be redone.
        """
        try:
            if self._pipeline_ok():
                if not self.conn.is_primary and not self._was_backup:
                    log.warning(
                        "another controller with a higher election id is primary "
                        "for %s: not reconciling while it is",
                        self.conn.grpc_addr,
                    )
                self._was_backup = not self.conn.is_primary
                return False
            log.warning(
                "switch %s has no pipeline or another one (restarted?): reconfiguring",
                self.conn.grpc_addr,
            )
        except SwitchError as exc:
            log.warning("session with %s lost (%s): reconnecting", self.conn.grpc_addr, exc)
        # a restarted switch has forgotten our arbitration too: open a new session
        self.conn.close()
        self.connect(retries=10)
        self._configure_switch()
        return True

    def watch(self, interval: float = 1.0) -> None:
        """Keep the switch configured until stop() (for `p4reduce-ctl up --watch`)."""
        while not self._stop.wait(interval):
            try:
                self.ensure()
            except (SwitchError, JobError, P4InfoError, OSError) as exc:
                log.error("could not restore switch state: %s", exc)

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.stop()
        self.conn.close()
