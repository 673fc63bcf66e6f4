"""The gRPC side: the P4Runtime service (PI pi_server.cpp P4RuntimeServiceImpl) and the
server that hosts it.

What is decided here and not in the Device: who may call (arbitration, election ids),
which device id a request names, and how a P4RTError becomes a gRPC status (code,
message, and PI's google.rpc.Status / p4.v1.Error details).
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
import threading
from concurrent import futures
from typing import Iterator

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from .arbitration import END, Arbitration, Connection
from .config import import_p4info
from .device import Device, SetAction
from .status import Code, P4RTError, no_pipeline

log = logging.getLogger("softswitch.p4runtime")

# What PI (and so simple_switch_grpc) reports in CapabilitiesResponse (pi_server.cpp).
P4RUNTIME_API_VERSION = "1.3.0"
# PI: "ALL-sswitch-p4org" is the error space of every p4.v1.Error it reports.
ERROR_SPACE = "ALL-sswitch-p4org"


def _abort_with(context: grpc.ServicerContext, err: P4RTError, details: bool = True) -> None:
    """End the RPC like PI's to_grpc_status: code, message, and (for statuses produced by
    the DeviceMgr layer) the google.rpc.Status in grpc-status-details-bin."""
    if details:
        context.set_trailing_metadata(
            (("grpc-status-details-bin", err.to_status().SerializeToString()),)
        )
    context.set_code(_GRPC_CODE.get(err.code, grpc.StatusCode.UNKNOWN))
    context.set_details(err.message)


_GRPC_CODE = {c.value[0]: c for c in grpc.StatusCode}


def _u128(msg: p4runtime_pb2.Uint128) -> tuple[int, int]:
    return msg.high, msg.low


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """pi_server.cpp P4RuntimeServiceImpl, for one real device id."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.arbitration = Arbitration()
        self._conn_ids = itertools.count(1)
        # device ids other than ours for which a SetForwardingPipelineConfig created a
        # (pipeline-less) DeviceMgr in PI
        self._other_mgrs: set[int] = set()
        device.packet_in_sink = self._send_packet_in

    def _send_packet_in(self, packet: p4runtime_pb2.PacketIn) -> None:
        primary = self.arbitration.primary(self.device.device_id)
        if primary is None:  # PI: no primary, no packet-in
            self.device.count("packet_in_dropped")
            return
        msg = p4runtime_pb2.StreamMessageResponse()
        msg.packet.CopyFrom(packet)
        if not primary.send(msg, droppable=True):
            self.device.count("packet_in_dropped")

    def _refused_as_not_primary(
        self,
        request: p4runtime_pb2.WriteRequest | p4runtime_pb2.SetForwardingPipelineConfigRequest,
        context: grpc.ServicerContext,
    ) -> bool:
        """PI's check for Write and Set: with no stream open, only requests without
        election id are accepted (handy for grpc_cli); otherwise the request must carry
        the primary's election id.  True when the RPC was ended with PERMISSION_DENIED."""
        n = self.arbitration.count(request.device_id)
        if (n == 0 and request.HasField("election_id")) or (
            n > 0
            and not self.arbitration.is_primary_election_id(
                request.device_id, _u128(request.election_id)
            )
        ):
            _abort_with(context, P4RTError(Code.PERMISSION_DENIED, "Not primary"), details=False)
            return True
        return False

    # Unary RPCs ----------------------------------------------------------------------------

    def Capabilities(
        self,
        request: p4runtime_pb2.CapabilitiesRequest,  # noqa: N802 (gRPC name)
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.CapabilitiesResponse:
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    def Write(
        self,
        request: p4runtime_pb2.WriteRequest,  # noqa: N802
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.WriteResponse:
        if self._refused_as_not_primary(request, context):
            return p4runtime_pb2.WriteResponse()
        if request.device_id != self.device.device_id or not self.device.mgr_created:
            _abort_with(context, no_pipeline(), details=False)
            return p4runtime_pb2.WriteResponse()
        try:
            results = self.device.write(request)
        except P4RTError as err:
            _abort_with(context, err, details=err.code != Code.FAILED_PRECONDITION)
            return p4runtime_pb2.WriteResponse()
        if any(r is not None for r in results):
            status = status_pb2.Status(code=Code.UNKNOWN)
            for r in results:
                if r is None:
                    err_msg = p4runtime_pb2.Error(code=Code.OK)
                else:
                    err_msg = p4runtime_pb2.Error(
                        canonical_code=r.code, message=r.message, space=ERROR_SPACE
                    )
                status.details.add().Pack(err_msg)
            context.set_trailing_metadata(
                (("grpc-status-details-bin", status.SerializeToString()),)
            )
            context.set_code(grpc.StatusCode.UNKNOWN)
            context.set_details(status.message)
        return p4runtime_pb2.WriteResponse()

    def Read(
        self,
        request: p4runtime_pb2.ReadRequest,  # noqa: N802
        context: grpc.ServicerContext,
    ) -> Iterator[p4runtime_pb2.ReadResponse]:
        if request.device_id != self.device.device_id or not self.device.mgr_created:
            _abort_with(context, no_pipeline(), details=False)
            return
        try:
            entities, err = self.device.read(request)
        except P4RTError as e:
            _abort_with(context, e, details=e.code != Code.FAILED_PRECONDITION)
            return
        # PI always writes one ReadResponse, with what it read before any error.
        yield p4runtime_pb2.ReadResponse(entities=entities)
        if err is not None:
            _abort_with(context, err)

    def SetForwardingPipelineConfig(  # noqa: N802
        self,
        request: p4runtime_pb2.SetForwardingPipelineConfigRequest,
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.SetForwardingPipelineConfigResponse:
        if self._refused_as_not_primary(request, context):
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        try:
            if request.device_id == self.device.device_id:
                self.device.set_pipeline(request.action, request.config)
            else:
                self._set_other_device(request)
        except P4RTError as err:
            log.warning(
                "SetForwardingPipelineConfig(%s) failed: %s",
                SetAction.Action.Name(request.action)
                if request.action in SetAction.Action.values()
                else request.action,
                err.message,
            )
            _abort_with(context, err)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _set_other_device(self, request: p4runtime_pb2.SetForwardingPipelineConfigRequest) -> None:
        """PI creates a DeviceMgr for any device id, then bmv2 refuses to be assigned to an
        id other than its --device-id."""
        self._other_mgrs.add(request.device_id)
        action = request.action
        if action == SetAction.UNSPECIFIED:
            raise P4RTError(Code.INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")
        if action != SetAction.COMMIT:
            import_p4info(request.config.p4info)
        if action == SetAction.VERIFY:
            return
        if action == SetAction.COMMIT:
            raise P4RTError(Code.UNKNOWN, "Error in second phase of device update")
        raise P4RTError(
            Code.UNKNOWN,
            f"Error when trying to assign device (this switch is device id "
            f"{self.device.device_id}, not {request.device_id})",
        )

    def GetForwardingPipelineConfig(  # noqa: N802
        self,
        request: p4runtime_pb2.GetForwardingPipelineConfigRequest,
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
        if request.device_id != self.device.device_id:
            if request.device_id in self._other_mgrs:
                return p4runtime_pb2.GetForwardingPipelineConfigResponse()
            _abort_with(context, no_pipeline(), details=False)
            return p4runtime_pb2.GetForwardingPipelineConfigResponse()
        if not self.device.mgr_created:
            _abort_with(context, no_pipeline(), details=False)
            return p4runtime_pb2.GetForwardingPipelineConfigResponse()
        try:
            config = self.device.get_pipeline(request.response_type)
        except P4RTError as err:
            _abort_with(context, err)
            return p4runtime_pb2.GetForwardingPipelineConfigResponse()
        return p4runtime_pb2.GetForwardingPipelineConfigResponse(config=config)

    # StreamChannel -------------------------------------------------------------------------

    def StreamChannel(  # noqa: N802
        self,
        request_iterator: Iterator[p4runtime_pb2.StreamMessageRequest],
        context: grpc.ServicerContext,
    ) -> Iterator[p4runtime_pb2.StreamMessageResponse]:
        conn = Connection(id=next(self._conn_ids))
        context.add_callback(lambda: conn.outbox.put(END))
        reader = threading.Thread(
            target=self._stream_reader,
            args=(conn, request_iterator),
            name=f"p4rt-stream-{conn.id}",
            daemon=True,
        )
        reader.start()
        try:
            while True:
                item = conn.outbox.get()
                if item is END:
                    return
                if isinstance(item, P4RTError):
                    _abort_with(context, item, details=False)
                    return
                yield item
        finally:
            self.arbitration.remove(conn)

    def _stream_reader(
        self, conn: Connection, request_iterator: Iterator[p4runtime_pb2.StreamMessageRequest]
    ) -> None:
        """pi_server.cpp StreamChannel loop; runs beside the response generator."""
        try:
            for req in request_iterator:
                kind = req.WhichOneof("update")
                if kind == "arbitration":
                    device_id = req.arbitration.device_id
                    election_id = _u128(req.arbitration.election_id)
                    if conn.device_id is not None and conn.device_id != device_id:
                        conn.outbox.put(P4RTError(Code.FAILED_PRECONDITION, "Invalid device id"))
                        return
                    try:
                        if conn.device_id is None:
                            self.arbitration.add(conn, device_id, election_id)
                        else:
                            self.arbitration.update(conn, election_id)
                    except P4RTError as err:
                        self.arbitration.remove(conn)
                        conn.outbox.put(err)
                        return
                elif kind == "packet":
                    if conn.device_id is None or conn.device_id != self.device.device_id:
                        continue
                    if self.arbitration.primary(conn.device_id) is not conn:
                        continue  # PI ignores stream messages from backups
                    if not self.device.mgr_created:
                        continue
                    self.device.packet_out(req.packet)
                # digest_ack and others: no digests in softswitch; PI ignores "other"
        except grpc.RpcError:
            pass  # the client went away; the callback ends the response side
        except Exception:
            log.exception("StreamChannel reader failed")
        conn.outbox.put(END)


def _host_of(address: str) -> str:
    if address.startswith("["):
        return address[1 : address.index("]")]
    return address.rsplit(":", 1)[0]


def check_loopback(address: str) -> None:
    """softswitch is a test target: it only listens on loopback addresses."""
    host = _host_of(address)
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(
        f"refusing to listen on {address!r}: softswitch only binds loopback "
        f"addresses (127.0.0.0/8, ::1, localhost)"
    )


class P4RuntimeServer:
    """The gRPC server around one Device."""

    def __init__(
        self, device: Device, address: str = "127.0.0.1:9559", max_workers: int = 64
    ) -> None:
        check_loopback(address)
        self.device = device
        self.servicer = P4RuntimeServicer(device)
        self._requested = address
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="p4rt"),
            options=[
                ("grpc.max_receive_message_length", 256 * 1024 * 1024),  # as PI
                ("grpc.so_reuseport", 0),  # a port already in use is an error, not shared
            ],
        )
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, self._server)
        self.port: int | None = None

    @property
    def address(self) -> str:
        host = _host_of(self._requested)
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self.port}"

    def start(self) -> int:
        """Bind and start; returns the bound TCP port (useful with port 0)."""
        try:
            port = self._server.add_insecure_port(self._requested)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self._requested}: {exc}") from None
        if port == 0:
            raise OSError(f"cannot listen on {self._requested} (address in use?)")
        self.port = port
        self._server.start()
        log.info(
            "P4Runtime server listening on %s (device id %d)", self.address, self.device.device_id
        )
        return port

    def stop(self, grace: float | None = 1.0) -> None:
        self._server.stop(grace).wait()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self._server.wait_for_termination(timeout)
