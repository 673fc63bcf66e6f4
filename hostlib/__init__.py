"""p4reduce hostlib: the worker side of in-network sparse allreduce.

    with hostlib.Worker("job.json") as w:
        grads = w.allreduce(grads)           # or w.allreduce_(grads) in place

See docs/hostlib.md; docs/protocol.md is the protocol specification.
"""
from .config import DescriptorError, JobConfig, load_descriptor
from .worker import Worker, WorkerBroken, WorkerStats

__all__ = ["Worker", "WorkerStats", "WorkerBroken", "JobConfig", "DescriptorError",
           "load_descriptor"]
