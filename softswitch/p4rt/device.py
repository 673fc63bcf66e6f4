"""The device behind one device id: its pipelines, Write/Read/Set/Get, and the packet path.

What lives here is what PI's DeviceMgr and bmv2's config swap decide between them:
which pipeline the data plane runs (``active``), which one the control plane addresses
(``saved`` after VERIFY_AND_SAVE, until COMMIT), and the replication engine that outlives
both.  Each entity's rules are in their own module (entities.py dispatches).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from p4reduce.p4rt import CodecError

from ..interface import SwitchTarget
from .config import build_pipeline, forwarding_state_reads, get_config, import_p4info
from .entities import read_one, write_one
from .packet_io import packet_in_message, packet_out_frame
from .pre import BmPre
from .state import Pipeline
from .status import Code, P4RTError, no_pipeline

log = logging.getLogger("softswitch.p4runtime")

SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
Update = p4runtime_pb2.Update


class Device:
    """The device behind one device id: pipelines, P4Runtime entities, and the packet path.

    Control-plane calls are serialised by one lock (PI's AccessArbitration allows some
    concurrency, but the observable result of a batch is the same).  The data plane does not
    take that lock: it uses whichever pipeline is active when a frame arrives, as bmv2 does
    across a config swap.
    """

    def __init__(
        self,
        *,
        device_id: int = 1,
        cpu_port: int | None = None,
        trace: bool = False,
        switch_factory: Callable[[], SwitchTarget] | None = None,
    ) -> None:
        if cpu_port is not None and cpu_port <= 0:
            raise ValueError(
                "cpu port must be a positive port number (0 is not valid, as "
                "for simple_switch_grpc --cpu-port)"
            )
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.trace = trace
        self._switch_factory = switch_factory or self._default_switch_factory
        self._lock = threading.RLock()
        self.active: Pipeline | None = None  # data plane (and control plane if no saved one)
        self.saved: Pipeline | None = None  # VERIFY_AND_SAVE, waiting for COMMIT
        # PI creates its DeviceMgr on the first SetForwardingPipelineConfig, whatever its
        # outcome; before that Read/Write/Get answer FAILED_PRECONDITION, after it Get
        # answers an empty config.
        self.mgr_created = False
        # Set when the first pipeline is committed, never cleared.  bmv2 starts reading its
        # ports only then (SwitchWContexts::start_and_return waits for config_loaded): frames
        # arriving earlier wait in the kernel and are processed by the first pipeline.
        # AfPacketPorts does the same.
        self.first_commit = threading.Event()
        self.pre = BmPre()  # outlives pipelines, as bmv2's PRE does
        self.transmit: Callable[[int, bytes], None] | None = None
        self.packet_in_sink: Callable[[p4runtime_pb2.PacketIn], None] | None = None
        self.counters: dict[str, int] = {
            "rx_frames": 0,
            "no_pipeline_drops": 0,
            "process_errors": 0,
            "tx_frames": 0,
            "tx_unattached": 0,
            "packet_in": 0,
            "packet_in_dropped": 0,
            "packet_out": 0,
            "packet_out_dropped": 0,
        }
        self._counters_lock = threading.Lock()

    def _default_switch_factory(self) -> SwitchTarget:
        from ..switch import Switch  # imported late: the interpreter is heavy

        return Switch(device_id=self.device_id, cpu_port=self.cpu_port, trace=self.trace)

    def count(self, name: str, n: int = 1) -> None:
        """Bump one of ``counters`` (thread safe: ports, gRPC and streams all count)."""
        with self._counters_lock:
            self.counters[name] = self.counters.get(name, 0) + n

    @property
    def control(self) -> Pipeline | None:
        """The pipeline Write/Read/Get address: PI switches its P4Info on VERIFY_AND_SAVE,
        and bmv2 sends runtime calls to the loaded-but-not-swapped config."""
        return self.saved if self.saved is not None else self.active

    def _live_targets(self) -> list[SwitchTarget]:
        """Every target that runs or will run: they share bmv2's PRE."""
        out: dict[int, SwitchTarget] = {}
        for p in (self.active, self.saved):
            if p is not None:
                out[id(p.switch)] = p.switch
        return list(out.values())

    # -- data plane ----------------------------------------------------------------------

    def receive(self, ingress_port: int, frame: bytes) -> None:
        """A frame arrived on a port: run it through the active pipeline and send what comes
        out.  Never raises: ports call this from their receive threads."""
        self.count("rx_frames")
        pl = self.active
        if pl is None:
            self.count("no_pipeline_drops")
            return
        try:
            outs = pl.switch.process(ingress_port, frame)
        except Exception:  # the Switch promises not to raise for a bad frame; be safe anyway
            self.count("process_errors")
            log.exception(
                "Switch.process raised for a %d-byte frame on port %d", len(frame), ingress_port
            )
            return
        transmit, cpu_port, sent, unattached = self.transmit, self.cpu_port, 0, 0
        for port, out in outs:
            if cpu_port is not None and port == cpu_port:
                self._packet_in(out)
            elif transmit is not None:
                sent += 1
                transmit(port, out)
            else:
                unattached += 1
        # counted once per frame in, not per copy out: the lock is taken once
        if sent:
            self.count("tx_frames", sent)
        if unattached:
            self.count("tx_unattached", unattached)

    def _packet_in(self, frame: bytes) -> None:
        """A frame egressed on the CPU port: strip the packet_in header (PI packet_io_mgr)."""
        msg = packet_in_message(self.control, frame)
        sink = self.packet_in_sink
        if msg is None or sink is None:
            self.count("packet_in_dropped")
            return
        self.count("packet_in")
        sink(msg)

    def packet_out(self, packet: p4runtime_pb2.PacketOut) -> None:
        """A PacketOut from the primary: prepend the packet_out header and inject the frame
        at the CPU port.  Errors are dropped silently, as PI does with its default stream
        error reporting (DISABLED)."""
        pl = self.control
        if pl is None:
            self.count("packet_out_dropped")
            return
        try:
            frame = packet_out_frame(pl, packet)
        except CodecError as exc:
            self.count("packet_out_dropped")
            log.warning("PacketOut dropped: %s", exc)
            return
        if self.cpu_port is None:  # bmv2: PI_STATUS_PACKETOUT_SEND_ERROR
            self.count("packet_out_dropped")
            log.warning("PacketOut dropped: no --cpu-port configured")
            return
        self.count("packet_out")
        self.receive(self.cpu_port, frame)

    # -- SetForwardingPipelineConfig / GetForwardingPipelineConfig ------------------------

    def set_pipeline(self, action: int, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        """PI DeviceMgr::pipeline_config_set, with bmv2's load/swap behind it.

        On any error the previous pipeline stays, with its state.
        """
        with self._lock:
            self.mgr_created = True
            if action == SetAction.UNSPECIFIED:
                raise P4RTError(Code.INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")
            if action not in (
                SetAction.VERIFY,
                SetAction.VERIFY_AND_SAVE,
                SetAction.VERIFY_AND_COMMIT,
                SetAction.COMMIT,
                SetAction.RECONCILE_AND_COMMIT,
            ):
                return  # PI: an action value it does not know matches no branch -> OK
            if action == SetAction.COMMIT:
                self._commit_saved()
                return
            info = import_p4info(config.p4info)
            if action == SetAction.VERIFY:
                return  # PI only imports the P4Info for VERIFY
            if self.saved is not None:  # bmv2 load_new_config: ONGOING_SWAP
                raise P4RTError(
                    Code.UNKNOWN,
                    "Error in first phase of device update (a config "
                    "saved with VERIFY_AND_SAVE awaits COMMIT)",
                )
            saved_state = None
            if action == SetAction.RECONCILE_AND_COMMIT and self.control is not None:
                saved_state = self._read_batch(self.control, forwarding_state_reads())
            new = build_pipeline(info, config, self._switch_factory, self.pre)
            if saved_state is not None:
                self._reconcile(new, saved_state)
            if action == SetAction.VERIFY_AND_SAVE:
                self.saved = new
                log.info("device %d: pipeline saved, waiting for COMMIT", self.device_id)
            else:
                self.active = new
                self.first_commit.set()
                log.info(
                    "device %d: pipeline committed (%d tables)", self.device_id, len(info.tables)
                )

    def _commit_saved(self) -> None:
        if self.saved is None:  # bmv2 swap_configs: NO_ONGOING_SWAP
            raise P4RTError(
                Code.UNKNOWN, "Error in second phase of device update (no saved config to commit)"
            )
        self.active, self.saved = self.saved, None
        self.first_commit.set()
        log.info("device %d: committed the saved pipeline", self.device_id)

    def _reconcile(self, new: Pipeline, state: list[p4runtime_pb2.Entity]) -> None:
        """Replay the old pipeline's forwarding state as INSERTs, as PI does."""
        errors = self._write_batch(new, [Update(type=Update.INSERT, entity=e) for e in state])
        failed = [f"{i}: {e.message}" for i, e in enumerate(errors) if e is not None]
        if failed:
            raise P4RTError(
                Code.UNKNOWN, "Error when reconciling config (" + "; ".join(failed[:5]) + ")"
            )

    def get_pipeline(self, response_type: int) -> p4runtime_pb2.ForwardingPipelineConfig:
        """PI DeviceMgr::pipeline_config_get."""
        with self._lock:
            return get_config(self.control, response_type)

    # -- Write / Read ----------------------------------------------------------------------

    def write(self, request: p4runtime_pb2.WriteRequest) -> list[P4RTError | None]:
        """PI DeviceMgr::write_: one result per update, in order (None = OK)."""
        with self._lock:
            pl = self.control
            if pl is None:
                raise no_pipeline()
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RTError(
                    Code.UNIMPLEMENTED,
                    "Support for atomic write modes has not been implemented yet",
                )
            return self._write_batch(pl, request.updates)

    def _write_batch(
        self, pl: Pipeline, updates: Iterable[p4runtime_pb2.Update]
    ) -> list[P4RTError | None]:
        results: list[P4RTError | None] = []
        targets = self._live_targets()
        for upd in updates:
            try:
                write_one(pl, upd.type, upd.entity, self.pre, targets)
                results.append(None)
            except P4RTError as exc:
                log.info(
                    "write update %d failed: %s (%s)",
                    len(results),
                    code_pb2.Code.Name(exc.code),
                    exc.message,
                )
                results.append(exc)
        return results

    def read(
        self, request: p4runtime_pb2.ReadRequest
    ) -> tuple[list[p4runtime_pb2.Entity], P4RTError | None]:
        """PI DeviceMgr::read_: the entities read before the first error, and that error."""
        with self._lock:
            pl = self.control
            if pl is None:
                raise no_pipeline()
            out: list[p4runtime_pb2.Entity] = []
            try:
                self._read_into(pl, request.entities, out)
            except P4RTError as exc:
                return out, exc
            return out, None

    def _read_batch(
        self, pl: Pipeline, entities: Iterable[p4runtime_pb2.Entity]
    ) -> list[p4runtime_pb2.Entity]:
        out: list[p4runtime_pb2.Entity] = []
        self._read_into(pl, entities, out)
        return out

    @staticmethod
    def _read_into(
        pl: Pipeline, entities: Iterable[p4runtime_pb2.Entity], out: list[p4runtime_pb2.Entity]
    ) -> None:
        for ent in entities:
            read_one(pl, ent, out)
