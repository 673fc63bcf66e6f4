"""The line-rate projection: a MODEL of one allreduce's time, not a measurement.

bench/suite.py feeds it the bytes and rounds per worker it measured in Mininet and asks what
they would cost on a Tofino-class switch at line rate; it also fits the same function to the
software runs (the switch's packet rate is then the limit) to see how well its shape holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Network:
    """Stated parameters of the projection (defaults: a 100 GbE rack, kernel-bypass hosts)."""

    link_gbps: float = 100.0  # each worker's link, full duplex
    rtt_us: float = 5.0  # worker -> switch -> worker, including both host stacks
    slots: int = 256  # p4reduce slots in flight per job (>= bandwidth-delay product)
    switch_pps: float | None = None  # packets/s the switch takes in; None: line rate

    def describe(self) -> str:
        sw = (
            "the switch at line rate on every port"
            if self.switch_pps is None
            else f"the switch taking in {self.switch_pps:,.0f} packets/s"
        )
        return (
            f"{self.link_gbps:g} Gb/s per worker link, RTT {self.rtt_us:g} µs, "
            f"{self.slots} slots in flight, {sw}"
        )


def allreduce_seconds(
    bytes_sent: float,
    bytes_received: float,
    round_trips: float,
    net: Network,
    switch_packets: float = 0.0,
) -> float:
    """Seconds one allreduce takes in the model (one worker's view; all workers alike).

        T = max( max(bytes_sent, bytes_received) * 8 / link,      # the worker's link
                 round_trips * RTT,                               # dependent exchanges
                 switch_packets / switch_pps )                    # the switch, if slow
            + RTT                                                 # first frame out, last in

    Assumptions:
    * bytes are per worker per allreduce as measured on the wire (headers, ACKs, SKIPs and
      retransmissions included); links are full duplex, so the larger direction counts.
    * round_trips are the exchanges that must happen one after another. p4reduce: rounds
      per slot (a slot's next round needs the previous result; slots run in parallel);
      ring allreduce: N - 1 (2(N-1) steps, each one hop of half a round trip).
    * no loss, no queueing beyond the window, hosts keep the link busy (kernel bypass);
      computing the sums costs nothing (the switch adds at line rate, a ring's reduce is
      hidden behind its transfers).
    * switch_pps=None: the switch forwards and aggregates at line rate on every port
      (Tofino-class), so it is never the bottleneck; with a number, the switch's total
      packet intake (switch_packets, all workers) can be.
    """
    if min(bytes_sent, bytes_received, round_trips, switch_packets) < 0:
        raise ValueError("allreduce_seconds: bytes, round trips and packets must be >= 0")
    link = max(bytes_sent, bytes_received) * 8 / (net.link_gbps * 1e9)
    latency = round_trips * net.rtt_us * 1e-6
    switch = switch_packets / net.switch_pps if net.switch_pps else 0.0
    return max(link, latency, switch) + net.rtt_us * 1e-6


def p4reduce_round_trips(data_rounds: float, slots: int) -> float:
    """Rounds per slot when `data_rounds` (the rounds that aggregate a block, i.e. the job's
    rounds less its announce rounds) are spread over `slots` slots, plus the announce round."""
    return math.ceil(data_rounds / slots) + 1


def ring_round_trips(workers: int) -> float:
    """A ring allreduce's 2(N-1) dependent steps, each half a round trip."""
    return workers - 1
