"""p4reduce's network: a switch with the real P4 program, and what runs around it.

- `switches`: the switch under test, any kind (in-process softswitch, softswitch or
  simple_switch_grpc on veth pairs), one frame interface.
- `harness`: a switch under test with a controller session; jobs configured through the
  controller's JobManager, driven frame by frame or by workers (tests, benchmarks).
- `topology`: a Mininet network of one P4 switch and N hosts (needs Debian's mininet).
- `demo`: the end-to-end demo (`make run`); `torch_ranks`: torchrun for that network.
- `worker`, `loop_worker`: the worker processes run inside the hosts
  (`python -m p4net.worker`, `python -m p4net.loop_worker`); `netcounters`: their link's
  kernel counters.

Named p4net, not mininet: a package `mininet` would hide Debian's. The `mininet/` folder
holds the entry scripts (`mininet/demo.py`, `mininet/torch_ranks.py`).
"""
