"""One P4Runtime session with one switch: arbitration, pipeline, writes and reads.

Plain grpcio on the p4runtime package's stubs, so the same code drives softswitch,
simple_switch_grpc and any other P4Runtime server. p4runtime-shell's client exits the
process when a handshake fails, which a long-running controller that reconnects cannot
afford; this one raises instead.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4reduce.p4rt import P4InfoIndex, load_p4info
from p4reduce.p4rt.ready import server_answers
from p4reduce.target import DEFAULT_DEVICE_CONFIG, DEFAULT_P4INFO, PortMap

log = logging.getLogger(__name__)


class SwitchError(RuntimeError):
    """A P4Runtime call failed; `code` is the gRPC status code name, `details` per update."""

    def __init__(self, what: str, code: str, message: str, details: list[str] | None = None):
        self.code = code
        self.details = details or []
        extra = "".join(f"\n  - {d}" for d in self.details)
        super().__init__(f"{what}: {code}: {message}{extra}")


class NotPrimaryError(SwitchError):
    pass


class MastershipError(SwitchError):
    """This controller cannot be primary: another one holds the same or a higher election
    id. The message names the election id and what the operator can do."""

    def __init__(self, message: str):
        super().__init__("mastership", "ALREADY_EXISTS", message)


def new_pipeline_cookie() -> int:
    """A random, non-zero 63-bit P4Runtime cookie naming one push of the pipeline.

    Why per push rather than a fingerprint of the program: the cookie says which push the
    switch's registers date from. The state file records it, so a controller that finds
    the same cookie on the switch knows its recorded epochs are the ones the slots hold
    (docs/protocol.md section 8) and may keep the data plane; a different cookie means
    the slots hold epochs it does not know, and only a new push makes them safe."""
    return secrets.randbits(63) | 1


def same_p4info(a: p4info_pb2.P4Info, b: p4info_pb2.P4Info) -> bool:
    """Whether two P4Infos are the same message, compared as their deterministic
    serialisation. Why not ==: protobuf's == unpacks every Any it meets, and a TNA P4Info's
    externs carry `barefoot.PortMetadata` Anys whose type no installed descriptor knows
    (KeyError)."""
    return a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


def _write_error(err: grpc.RpcError) -> SwitchError:
    """Decode P4Runtime's batch error details (one p4.v1.Error per update)."""
    details: list[str] = []
    codes: list[str] = []
    for key, value in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        for any_detail in status.details:
            p4err = p4runtime_pb2.Error()
            if any_detail.Unpack(p4err) and p4err.canonical_code != code_pb2.OK:
                name = code_pb2.Code.Name(p4err.canonical_code)
                codes.append(name)
                details.append(f"{name}: {p4err.message}")
    code = codes[0] if len(set(codes)) == 1 else err.code().name
    return SwitchError("write", code, err.details() or "", details)


class SwitchConnection:
    """P4Runtime client for one device, as primary (highest election id) or backup."""

    def __init__(
        self, grpc_addr: str, device_id: int = 1, election_id: int = 1, timeout: float = 10.0
    ):
        self.grpc_addr = grpc_addr
        self.device_id = device_id
        self.election_id = election_id
        self.timeout = timeout
        self.is_primary = False
        self.objects: P4InfoIndex | None = None
        # configured port -> the data plane's port (identity but on Tofino; target.py)
        self.ports = PortMap()
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._out: queue.Queue | None = None
        self._arbitration: queue.Queue = queue.Queue()
        self.packets_in: queue.Queue = queue.Queue()
        self._reader: threading.Thread | None = None

    # ---- session -------------------------------------------------------------------
    def connect(
        self, retries: int = 0, backoff: float = 0.2, arbitrate: bool = True
    ) -> "SwitchConnection":
        """Open the channel and, with `arbitrate`, the arbitration stream; retry with
        doubling backoff. A session this object already has is closed first (one election
        id, one stream).

        Without `arbitrate` the connection only reads: P4Runtime's Read and
        GetForwardingPipelineConfig need no stream and no election id, so a reader takes
        no part in the election and cannot disturb the primary, whatever its election id
        (the same as a running controller's included)."""
        self.close()
        delay = backoff
        for attempt in range(retries + 1):
            try:
                self._open(arbitrate)
                return self
            except (SwitchError, grpc.RpcError, TimeoutError) as exc:
                self.close()
                if attempt == retries:
                    raise
                log.info("connect to %s failed (%s); retrying in %.2fs", self.grpc_addr, exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
        return self

    def _open(self, arbitrate: bool = True) -> None:
        # GetForwardingPipelineConfig returns the whole device config (bmv2 JSON, MBs):
        # gRPC's 4 MiB default would refuse it as PI accepts up to 256 MiB on the way in
        self._channel = grpc.insecure_channel(
            self.grpc_addr, options=[("grpc.max_receive_message_length", 256 * 1024 * 1024)]
        )
        if not server_answers(self._channel, self.timeout):
            raise SwitchError(
                "connect",
                "UNAVAILABLE",
                f"no P4Runtime server at {self.grpc_addr} within {self.timeout}s",
            )
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        if not arbitrate:
            return  # a reader: no stream, never primary
        self._out = queue.Queue()
        out = self._out
        # per session: a closed earlier session's reader must not answer this handshake
        arbitration: queue.Queue = queue.Queue()
        self._arbitration = arbitration

        def requests() -> Iterator[p4runtime_pb2.StreamMessageRequest]:
            while True:
                item = out.get()
                if item is None:
                    return
                yield item

        stream = self._stub.StreamChannel(requests())

        def read() -> None:
            try:
                for msg in stream:
                    if msg.HasField("arbitration"):
                        if self._arbitration is arbitration:
                            # the server tells every client when the primary changes
                            # (a higher election id arrived or the primary left)
                            self.is_primary = msg.arbitration.status.code == code_pb2.OK
                        arbitration.put(msg.arbitration)
                    elif msg.HasField("packet"):
                        self.packets_in.put(msg.packet)
            except grpc.RpcError as exc:
                arbitration.put(exc)

        self._reader = threading.Thread(target=read, daemon=True, name="p4rt-stream")
        self._reader.start()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = self.election_id >> 64
        req.arbitration.election_id.low = self.election_id & ((1 << 64) - 1)
        out.put(req)
        try:
            reply = arbitration.get(timeout=self.timeout)
        except queue.Empty:
            raise TimeoutError(f"no arbitration answer from {self.grpc_addr}") from None
        if isinstance(reply, grpc.RpcError):
            if (
                reply.code() == grpc.StatusCode.INVALID_ARGUMENT
                and "election" in (reply.details() or "").lower()
            ):
                raise MastershipError(
                    f"another controller is connected to {self.grpc_addr} (device "
                    f"{self.device_id}) with the same election id {self.election_id} "
                    f"(switch.election_id; the switch said: {reply.details()}). Only one "
                    f"controller may use an election id: stop the other one (a "
                    f"'p4reduce-ctl up --watch'?) or give this one another id "
                    f"(--election-id: higher takes over as primary; stats, job list and "
                    f"job show need none)"
                )
            raise SwitchError("arbitration", reply.code().name, reply.details() or "")
        self.is_primary = reply.status.code == code_pb2.OK

    def close(self) -> None:
        self.is_primary = False
        if self._out is not None:
            self._out.put(None)
            self._out = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self._stub = None

    def __enter__(self) -> "SwitchConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def stub(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        if self._stub is None:
            raise SwitchError("session", "UNAVAILABLE", f"not connected to {self.grpc_addr}")
        return self._stub

    def _election(self, msg) -> None:
        msg.election_id.high = self.election_id >> 64
        msg.election_id.low = self.election_id & ((1 << 64) - 1)

    # ---- pipeline ------------------------------------------------------------------
    def set_pipeline(
        self,
        p4info: p4info_pb2.P4Info,
        device_config: bytes,
        clear_groups: bool = True,
        cookie: int = 0,
    ) -> None:
        """Replace the switch's pipeline (all tables, counters and registers start afresh).

        Multicast groups are deleted first: simple_switch_grpc (bmv2 1.15.5 + PI) forgets
        them in P4Runtime on a new pipeline but keeps them in its replication engine, so a
        group created again afterwards delivers every packet twice.
        """
        if clear_groups:
            self.clear_multicast_groups()
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        self._election(req)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        if cookie:
            req.config.cookie.cookie = cookie
        try:
            self.stub.SetForwardingPipelineConfig(req, timeout=self.timeout * 3)
        except grpc.RpcError as exc:
            raise SwitchError("set pipeline", exc.code().name, exc.details() or "") from None
        self.objects = P4InfoIndex.from_proto(p4info)

    def push_pipeline(
        self,
        p4info_path: str | Path = DEFAULT_P4INFO,
        device_config_path: str | Path = DEFAULT_DEVICE_CONFIG,
        clear_groups: bool = True,
    ) -> None:
        self.set_pipeline(
            load_p4info(p4info_path), Path(device_config_path).read_bytes(), clear_groups
        )

    def clear_multicast_groups(self) -> None:
        query = p4runtime_pb2.Entity()
        query.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
        try:
            groups = self.read(query)
        except SwitchError:
            return  # no pipeline yet: nothing to clear
        if groups:
            self.delete(*groups)

    def get_pipeline(
        self, response_type: int = p4runtime_pb2.GetForwardingPipelineConfigRequest.ALL
    ) -> p4runtime_pb2.ForwardingPipelineConfig | None:
        """The switch's current pipeline config (what `response_type` asks for), or None
        when it has none."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=response_type
        )
        try:
            rep = self.stub.GetForwardingPipelineConfig(req, timeout=self.timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise SwitchError("get pipeline", exc.code().name, exc.details() or "") from None
        return rep.config

    def get_p4info(self) -> p4info_pb2.P4Info | None:
        """The switch's current P4Info, or None when it has no pipeline."""
        config = self.get_pipeline(
            p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE
        )
        if config is None or not config.HasField("p4info") or not config.p4info.tables:
            return None
        return config.p4info

    def pipeline_difference(
        self, p4info: p4info_pb2.P4Info, device_config: bytes, cookie: int | None
    ) -> str | None:
        """None when the switch runs exactly this pipeline, pushed with `cookie`; else why
        not (for the log).

        Same means: the same P4Info and the same device config (simple_switch_grpc and
        softswitch return both; a switch that returns no device config cannot be shown to
        run the same program), and the cookie of the push the caller recorded."""
        config = self.get_pipeline()
        if config is None or not config.p4info.tables:
            return "the switch has no pipeline"
        if not same_p4info(config.p4info, p4info):
            return "the switch runs a different P4Info"
        if not config.p4_device_config:
            return "the switch does not return its device config"
        if config.p4_device_config != device_config:
            return "the switch runs a different device config (program)"
        have = config.cookie.cookie if config.HasField("cookie") else 0
        if cookie is None or have != cookie:
            return (
                f"the pipeline on the switch (cookie {have:#x}) is not the push the "
                f"state file records (cookie {cookie or 0:#x}): its slots may hold "
                f"epochs the state file does not know"
            )
        return None

    def use_pipeline_of_switch(self) -> bool:
        """Adopt the switch's P4Info (after a controller restart); False if it has none."""
        info = self.get_p4info()
        if info is None:
            return False
        self.objects = P4InfoIndex.from_proto(info)
        return True

    @property
    def p4(self) -> P4InfoIndex:
        if self.objects is None:
            raise SwitchError("pipeline", "FAILED_PRECONDITION", "no pipeline pushed or read")
        return self.objects

    # ---- writes and reads ------------------------------------------------------------
    def write(self, updates: Iterable[p4runtime_pb2.Update]) -> None:
        """One WriteRequest; an update of a const table's entry is refused before it is
        sent (the program fixes those: P4InfoIndex.is_const_table)."""
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        self._election(req)
        req.updates.extend(updates)
        if not req.updates:
            return
        self._refuse_const_tables(req.updates)
        try:
            self.stub.Write(req, timeout=self.timeout)
        except grpc.RpcError as exc:
            err = _write_error(exc)
            if err.code == "PERMISSION_DENIED":
                raise NotPrimaryError("write", err.code, str(err), err.details) from None
            raise err from None

    def _refuse_const_tables(self, updates: Iterable[p4runtime_pb2.Update]) -> None:
        if self.objects is None:
            return
        for u in updates:
            table_id = u.entity.table_entry.table_id
            if u.entity.HasField("table_entry") and self.objects.is_const_table(table_id):
                raise SwitchError(
                    "write",
                    "INVALID_ARGUMENT",
                    f"table {self.objects.tables[table_id].name} is const (its entries are "
                    f"the program's): the controller never writes or deletes them",
                )

    def insert(self, *entities: p4runtime_pb2.Entity) -> None:
        self.write(_updates(p4runtime_pb2.Update.INSERT, entities))

    def modify(self, *entities: p4runtime_pb2.Entity) -> None:
        self.write(_updates(p4runtime_pb2.Update.MODIFY, entities))

    def delete(self, *entities: p4runtime_pb2.Entity) -> None:
        self.write(_updates(p4runtime_pb2.Update.DELETE, entities))

    def read(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        try:
            return [e for rep in self.stub.Read(req, timeout=self.timeout) for e in rep.entities]
        except grpc.RpcError as exc:
            raise SwitchError("read", exc.code().name, exc.details() or "") from None

    def capabilities(self) -> str:
        try:
            return self.stub.Capabilities(
                p4runtime_pb2.CapabilitiesRequest(), timeout=self.timeout
            ).p4runtime_api_version
        except grpc.RpcError as exc:
            raise SwitchError("capabilities", exc.code().name, exc.details() or "") from None


def _updates(kind: int, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Update]:
    return [p4runtime_pb2.Update(type=kind, entity=e) for e in entities]


def table_entity(entry: p4runtime_pb2.TableEntry) -> p4runtime_pb2.Entity:
    return p4runtime_pb2.Entity(table_entry=entry)
