"""softswitch's P4Runtime server, one module per concern (see docs/softswitch_server.md).

* ``status``       P4RTError, and ``target_call``: target exceptions -> statuses, by class
* ``state``        what PI keeps beside the target per pipeline (``Pipeline``)
* ``config``       importing, building and reading back forwarding pipeline configs
* ``device``       ``Device``: active / saved pipelines, Write/Read/Set/Get, packet path
* ``entities``     Write / Read dispatch per entity kind, the unimplemented kinds
* ``tables``       TableEntry writes and reads; ``match`` converts match keys
* ``pre``          multicast groups and clone sessions over bmv2's PRE (``BmPre``)
* ``counters``     CounterEntry writes and reads, RegisterEntry reads
* ``packet_io``    PacketIn / PacketOut <-> frames
* ``arbitration``  StreamChannel connections and primary election
* ``service``      the gRPC service and server

The target is reached only through ``softswitch.interface.SwitchTarget``.
"""
