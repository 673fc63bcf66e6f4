"""PyTorch DDP communication hook: gradient buckets are allreduced through a Worker.

    from hostlib.torch_hook import p4reduce_hook, HookState
    ddp.register_comm_hook(HookState(worker), p4reduce_hook)

Why a comm hook: DDP keeps bucketing, overlap with backward and the parameter broadcast;
only the gradient reduction moves onto the switch. Every rank's bucket i has the same
size and order, which is what the protocol needs (all ranks of a job reduce tensors of
the same length in the same order). The hook is synchronous: the returned Future is
already completed (the Worker's loop is the bottleneck, not Python threads).

torch is an optional extra (`pip install .[torch]`); importing this module needs it.
"""

# No `from __future__ import annotations`: DDP compares the hook's annotations with
# dist.GradBucket / torch.futures.Future[torch.Tensor] at registration.
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from .torch_backend import failing_future
from .worker import Worker

_NATIVE = {torch.float32, torch.float64}


@dataclass
class HookState:
    """What the hook needs: the rank's Worker and whether to average (DDP's default hook
    averages: gradients are means over ranks)."""

    worker: Worker
    op: str = "mean"
    buckets: int = 0


def reduce_tensor(worker: Worker, tensor: torch.Tensor, op: str = "mean") -> torch.Tensor:
    """Allreduce `tensor` in place through `worker` and return it (any float dtype; half
    precisions travel as float32, the protocol's quantization is coarser anyway)."""
    if not tensor.is_floating_point():
        raise TypeError(f"gradient buckets are floating point, got {tensor.dtype}")
    host = tensor.detach()
    if host.device.type != "cpu" or host.dtype not in _NATIVE:
        host = host.to("cpu", torch.float32)
    arr = host.contiguous().numpy()
    out = worker.allreduce(arr, op=op)
    tensor.copy_(torch.from_numpy(np.ascontiguousarray(out)).to(tensor.dtype))
    return tensor


def p4reduce_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: reduce bucket.buffer() through the switch; completed Future."""
    if (
        dist.is_available()
        and dist.is_initialized()
        and dist.get_world_size() != state.worker.cfg.worker_count
    ):
        raise RuntimeError(
            f"DDP world size {dist.get_world_size()} differs from the "
            f"p4reduce job's {state.worker.cfg.worker_count} workers"
        )
    try:
        result, error = reduce_tensor(state.worker, bucket.buffer(), state.op), None
    except Exception as e:  # DDP reports it when it waits on the future
        result, error = None, e
    state.buckets += 1
    # not Future.set_exception: DDP's C++ side would take the exception object for the
    # bucket ("Unable to cast ... to Tensor") and the Worker's message would be lost
    return failing_future(result, error)
