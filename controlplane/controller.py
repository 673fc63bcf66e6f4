"""Switch bring-up and recovery: the controller as an operator runs it.

`Controller.up()` takes a switch from nothing (or from a restart) to serving jobs: connect
as primary, push the pipeline, set the switch identity, flooding and static L2 entries, and
install every job the state file knows plus the configuration's static jobs.
`Controller.ensure()` notices a switch that lost its pipeline (restarted) or a broken
session and does it all again; `watch()` runs that periodically.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path

from . import forwarding
from .config import Config
from .connection import SwitchConnection, SwitchError
from .jobs import JobError, JobManager, SwitchAddress
from .p4info import DEFAULT_DEVICE_CONFIG, DEFAULT_P4INFO

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, config: Config, p4info: Path = DEFAULT_P4INFO,
                 device_config: Path = DEFAULT_DEVICE_CONFIG):
        self.config = config
        self.p4info = p4info
        self.device_config = device_config
        sw = config.switch
        self.conn = SwitchConnection(sw.grpc_addr, sw.device_id, sw.election_id)
        self.jobs = JobManager(self.conn, SwitchAddress(sw.mac, sw.ip),
                               sw.state_file, set(sw.ports))
        self._stop = threading.Event()

    def connect(self, retries: int = 5) -> None:
        self.conn.connect(retries=retries)
        if not self.conn.is_primary:
            raise SwitchError("arbitration", "PERMISSION_DENIED",
                              f"another controller with a higher election id than "
                              f"{self.conn.election_id} is primary for {self.conn.grpc_addr}")

    def up(self, retries: int = 5) -> None:
        """Bring the switch to the configured state, whatever it had before."""
        self.connect(retries)
        self._configure_switch()

    def attach(self, retries: int = 5) -> bool:
        """Connect to a switch that is already up (CLI commands). False if it has no
        pipeline, in which case the caller should run up()."""
        self.connect(retries)
        return self.conn.use_pipeline_of_switch()

    def _configure_switch(self) -> None:
        self.conn.push_pipeline(self.p4info, self.device_config)
        sw = self.config.switch
        forwarding.set_identity(self.conn, sw.mac, sw.ip)
        forwarding.set_flooding(self.conn, sw.flood_group, sw.ports)
        for host in sw.hosts:
            forwarding.add_host(self.conn, host.mac, host.port)
        self.jobs.reinstall_all()
        for static in self.config.jobs:
            if static.job not in self.jobs.table.jobs:
                self.jobs.create(static.job, static.workers, static.slots)
        log.info("switch %s up with %d job(s)", sw.grpc_addr, len(self.jobs.jobs()))

    def ensure(self) -> bool:
        """Re-establish the session and the switch state if either was lost.

        Returns True when something had to be redone.
        """
        try:
            if self.conn.get_p4info() is not None:
                return False
            log.warning("switch %s has no pipeline (restarted?): reconfiguring",
                        self.conn.grpc_addr)
        except SwitchError as exc:
            log.warning("session with %s lost (%s): reconnecting", self.conn.grpc_addr, exc)
        # a restarted switch has forgotten our arbitration too: open a new session
        self.conn.close()
        self.connect(retries=10)
        if not self.conn.use_pipeline_of_switch():
            self._configure_switch()
        return True

    def watch(self, interval: float = 1.0) -> None:
        """Keep the switch configured until stop() (for `p4reduce-ctl up --watch`)."""
        while not self._stop.wait(interval):
            try:
                self.ensure()
            except (SwitchError, JobError, OSError) as exc:
                log.error("could not restore switch state: %s", exc)

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.stop()
        self.conn.close()
