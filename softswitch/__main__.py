"""``python -m softswitch`` / ``p4reduce-softswitch``: a drop-in for simple_switch_grpc.

Takes simple_switch_grpc's command line where it makes sense, so scripts (and Mininet
hosts) can start either binary with the same arguments, e.g.::

    p4reduce-softswitch --no-p4 -i 1@veth1 -i 2@veth3 --device-id 1 \\
        -- --grpc-server-addr 127.0.0.1:9559 --cpu-port 255

Like simple_switch_grpc the target-specific options may come after ``--``.  The switch
always starts without a pipeline and waits for the controller's
SetForwardingPipelineConfig.  SIGTERM / SIGINT stop it cleanly (exit status 0).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Sequence

from p4reduce import version
from softswitch.p4runtime_server import Device, P4RuntimeServer
from softswitch.ports import AfPacketPorts, parse_interface_spec

log = logging.getLogger("softswitch")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="p4reduce-softswitch",
        description="Pure-Python P4 (v1model, bmv2 JSON) switch with a P4Runtime server "
        "that behaves like simple_switch_grpc.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    p.add_argument(
        "config",
        nargs="?",
        metavar="JSON",
        help="accepted for compatibility and ignored: softswitch always starts "
        "without a pipeline (as with --no-p4) and waits for the controller",
    )
    p.add_argument(
        "-i",
        "--interface",
        action="append",
        default=[],
        metavar="PORT@IFNAME",
        help="attach a Linux interface as switch port PORT (repeatable)",
    )
    p.add_argument("--device-id", type=int, default=1, help="P4Runtime device id (default 1)")
    p.add_argument(
        "--grpc-server-addr",
        default="127.0.0.1:9559",
        help="gRPC listen address, loopback only (default 127.0.0.1:9559; "
        "port 0 picks a free port, printed at start)",
    )
    p.add_argument(
        "--cpu-port",
        type=int,
        default=None,
        help="port number of the CPU port for PacketIn / PacketOut",
    )
    p.add_argument(
        "--drop-port",
        type=int,
        default=None,
        help="accepted; the interpreter uses simple_switch's default 511",
    )
    p.add_argument(
        "--no-p4",
        action="store_true",
        help="accepted; softswitch always starts without a P4 program",
    )
    p.add_argument(
        "--log-console", action="store_true", help="log to the console (control plane at INFO)"
    )
    p.add_argument(
        "--trace",
        action="store_true",
        help="per-packet trace of the pipeline (implies --log-console)",
    )
    p.add_argument(
        "-L",
        "--log-level",
        default=None,
        choices=["trace", "debug", "info", "warn", "error", "off"],
        help="log level, as simple_switch",
    )
    p.add_argument(
        "--thrift-port",
        type=int,
        default=None,
        help="accepted and ignored: softswitch has no Thrift runtime",
    )
    return p


def _normalise_argv(argv: Sequence[str]) -> list[str]:
    """simple_switch_grpc puts target options after a lone ``--``; accept both forms."""
    return [a for a in argv if a != "--"]


def _setup_logging(args: argparse.Namespace) -> None:
    level = logging.WARNING
    if args.log_console or args.trace:
        level = logging.INFO
    if args.log_level:
        level = {
            "trace": logging.DEBUG,
            "debug": logging.DEBUG,
            "info": logging.INFO,
            "warn": logging.WARNING,
            "error": logging.ERROR,
            "off": logging.CRITICAL + 10,
        }[args.log_level]
    if args.trace:
        level = min(level, logging.DEBUG)
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_normalise_argv(sys.argv[1:] if argv is None else argv))
    _setup_logging(args)
    try:
        interfaces = dict(parse_interface_spec(s) for s in args.interface)
        if len(interfaces) != len(args.interface):
            raise ValueError("a port number is given twice in -i")
        if args.cpu_port is not None and args.cpu_port in interfaces:
            # simple_switch_grpc: "Cpu port {} is used as a data port", exit 1
            raise ValueError(f"cpu port {args.cpu_port} is used as a data port")
        if args.cpu_port is not None and args.cpu_port <= 0:
            raise ValueError("--cpu-port: 0 is not a valid value")
    except ValueError as exc:
        parser.error(str(exc))
    if args.config:
        print(
            f"note: {args.config} ignored: softswitch starts without a pipeline and waits "
            f"for SetForwardingPipelineConfig",
            file=sys.stderr,
        )
    if args.thrift_port is not None:
        print(
            "note: --thrift-port ignored: softswitch has no Thrift runtime (use P4Runtime)",
            file=sys.stderr,
        )
    if args.drop_port is not None and args.drop_port != 511:
        print(
            f"note: --drop-port {args.drop_port} ignored: the interpreter drops on port "
            f"511 as simple_switch does by default",
            file=sys.stderr,
        )

    device = Device(device_id=args.device_id, cpu_port=args.cpu_port, trace=args.trace)
    ports = AfPacketPorts(interfaces)
    try:
        server = P4RuntimeServer(device, args.grpc_server_addr)
    except ValueError as exc:
        parser.error(str(exc))
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        ports.attach(device)
        ports.start()
        server.start()
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        ports.stop()
        return 1
    # The same line PI prints, so scripts waiting for it work with both binaries.
    print(f"Server listening on {server.address}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop(grace=1.0)
        ports.stop()
        log.info("stopped; device counters: %s", device.counters)
        # what each port read and how (rx_longer_than_ring, rx_ring_refits, rx_errors...)
        log.info("port counters: %s", {port: dict(c) for port, c in sorted(ports.stats.items())})
    return 0


if __name__ == "__main__":
    sys.exit(main())
