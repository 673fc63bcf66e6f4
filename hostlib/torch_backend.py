"""p4reduce as a torch.distributed backend: `dist.init_process_group("p4reduce")`.

    import torch.distributed as dist
    dist.init_process_group("p4reduce")          # env:// (MASTER_ADDR, RANK, ...) or a store
    dist.all_reduce(grad)                        # through the switch
    ddp = DistributedDataParallel(model)         # its gradient buckets too, no comm hook

Why a process group and not only the DDP hook: every `all_reduce` of the program -- the
user's, a framework's, DDP's -- reaches the switch by choosing one word, as with "nccl"
or "gloo".

What goes through the switch: `allreduce` and `allreduce_coalesced` with SUM or AVG of
float32, float64, float16/bfloat16 (as float32) and int32 tensors, of any shape and
strides, CPU tensors in place (CUDA tensors are copied to host and back), when the group
is the whole job (every rank, the descriptor's `worker_count`). Everything else is served by
a gloo process group created alongside on the same store: other collectives (broadcast,
all_gather, barrier, reduce_scatter, send/recv, ...), other ops (MAX, PRODUCT, ...),
other dtypes (int64, bool, ...), sparse tensors, and groups that are not the job's ranks.
Each such call is counted per reason in `stats()`, and logged once per reason.

Registration: `import torch` registers the name through the `torch.backends` entry point
(hostlib/torch_autoload.py); `import hostlib.torch_backend` does too.

The rank's job: `pg_options=P4ReduceOptions(...)` (or a dict of its fields) and/or the
P4REDUCE_* environment variables (hostlib/jobref.py). The allreduces of a process run in
submission order on one thread per Worker; `Work.wait()` blocks until the switch answered
and re-raises the Worker's error (TimeoutError, OverflowError, ValueError) if any.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist

from .jobref import JobLookupError, P4ReduceOptions, open_worker
from .torch_autoload import BACKEND, register
from .worker import Worker

__all__ = [
    "BACKEND",
    "P4ReduceOptions",
    "P4ReduceProcessGroup",
    "JobLookupError",
    "register",
    "stats",
    "create_process_group",
]

log = logging.getLogger(__name__)

# dtype of the tensor -> dtype on the wire (the protocol carries int32 exactly and floats
# as block floating point; halves travel as float32, whose quantization is finer anyway)
WIRE_DTYPE = {
    torch.float32: torch.float32,
    torch.float64: torch.float64,
    torch.int32: torch.int32,
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
}
SWITCH_OPS = ("SUM", "AVG")
_GLOO = dist.ProcessGroup.BackendType.GLOO


@dataclass
class SwitchCounters:
    """What went through the switch (cumulative, per Worker)."""

    allreduces: int = 0  # Worker.allreduce calls
    tensors: int = 0  # torch tensors reduced (a coalesced call has several)
    values: int = 0
    blocks: int = 0  # blocks of those tensors (of the job's values per block)
    nonzero_blocks: int = 0  # ... of which this rank sent (non-zero here)
    seconds: float = 0.0  # in the Worker


class _Outcome:
    """What a submitted allreduce produced: its tensors, or the Worker's exception."""

    __slots__ = ("value", "error")

    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None


def _unwrap(parent: torch.futures.Future) -> Any:
    outcome: _Outcome = parent.value()
    if outcome.error is not None:
        raise outcome.error
    return outcome.value


def failing_future(value: Any, error: BaseException | None) -> torch.futures.Future:
    """A completed Future whose error C++ code sees too.

    `torch.futures.Future.set_exception` only makes Python's wait() raise: C++ consumers
    (DDP's reducer, with or without a comm hook) read the exception *object* as the value
    -- DDP then crashes (no hook) or reports "Unable to cast ... to Tensor" (hook). An
    error raised inside a `then` callback is stored as a real error, which DDP reports
    as "Got the following error when running the callback: <type>: <message>"."""
    parent: torch.futures.Future = torch.futures.Future()
    child = parent.then(_unwrap)
    outcome = _Outcome()
    outcome.value, outcome.error = value, error
    parent.set_result(outcome)
    return child


class _Channel:
    """One Worker and the thread that runs its allreduces in submission order.

    Every rank submits the same collectives in the same order, so one FIFO per Worker is
    what the protocol needs; process groups with the same ranks share it."""

    def __init__(self, worker: Worker, where: str):
        self.worker = worker
        self.where = where
        self.counters = SwitchCounters()
        self.users = 0
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run,
            daemon=True,
            name=f"p4reduce-job{worker.cfg.job}-rank{worker.cfg.rank}",
        )
        self._thread.start()

    def submit(self, job: Callable[[], Any]) -> tuple[torch.futures.Future, _Outcome]:
        """Queue `job`; its Future completes (with a C++-visible error if it raised) when
        the thread has run it. The _Outcome keeps the original exception for wait()."""
        parent: torch.futures.Future = torch.futures.Future()
        outcome = _Outcome()
        self._queue.put((parent, outcome, job))
        return parent.then(_unwrap), outcome

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            parent, outcome, job = item
            try:
                outcome.value = job()
            except BaseException as e:  # noqa: BLE001 -- delivered to wait()
                outcome.error = e
            parent.set_result(outcome)

    def close(self) -> None:
        """Run what was submitted, stop the thread, close the Worker."""
        self._queue.put(None)
        self._thread.join()
        self.worker.close()


_lock = threading.Lock()


class _SwitchWork(dist.Work):
    """The Work of an allreduce through the switch: a view of its Future (what DDP and
    `async_op=True` callers use). wait() re-raises the Worker's own exception type."""

    def __init__(self, fut: torch.futures.Future, outcome: _Outcome):
        super().__init__()
        self._fut = fut
        self._outcome = outcome

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:  # noqa: ARG002
        try:
            self._fut.wait()
        except Exception:
            if self._outcome.error is not None:
                raise self._outcome.error from None
            raise
        return True

    def is_completed(self) -> bool:
        return self._fut.done()

    def is_success(self) -> bool:
        return self._fut.done() and self._outcome.error is None

    def exception(self) -> BaseException | None:
        return self._outcome.error if self._fut.done() else None

    def get_future(self) -> torch.futures.Future:
        return self._fut

    def result(self) -> list[torch.Tensor]:
        self.wait()
        return self._fut.value()

    def synchronize(self) -> None:
        pass


def _done_work(tensors: list[torch.Tensor]) -> _SwitchWork:
    outcome = _Outcome()
    outcome.value = tensors
    return _SwitchWork(failing_future(tensors, None), outcome)


def _op_name(opts: Any) -> str:
    op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
    op = getattr(op, "op", op)  # ReduceOp -> RedOpType
    return getattr(op, "name", str(op))


class P4ReduceProcessGroup(dist.ProcessGroup):
    """A process group whose allreduce goes through the switch; gloo serves the rest.

    The gloo group is registered as this group's CPU (and CUDA) backend (for torch code
    that asks for the backend), and the collectives it serves are forwarded to it in
    Python (GLOO_FORWARDED: why torch's own dispatch must not be used)."""

    def __init__(
        self,
        store: dist.Store,
        rank: int,
        size: int,
        timeout: timedelta,
        options: P4ReduceOptions,
        global_ranks: list[int],
    ):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._gloo = dist.ProcessGroupGloo(
            dist.PrefixStore("p4reduce-gloo/", store), rank, size, timeout
        )
        self._gloo._set_sequence_number_for_group()
        self._set_default_backend(_GLOO)
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        for device in devices:
            self._register_backend(torch.device(device), _GLOO, self._gloo)
        self.fallbacks: Counter[str] = Counter()
        self._logged: set[str] = set()
        self._channel: _Channel | None = None
        self.why_not_switch = ""  # set when the whole group goes to gloo
        self._attach(options, timeout, global_ranks)

    # -- which Worker -------------------------------------------------------------------

    def _attach(
        self, options: P4ReduceOptions, timeout: timedelta, global_ranks: list[int]
    ) -> None:
        world = self if not global_ranks else _world_group()
        world_size = self._size if not global_ranks else dist.get_world_size()
        if global_ranks and list(global_ranks) != list(range(world_size)):
            self.why_not_switch = (
                f"group of ranks {list(global_ranks)} is not the job's ranks 0..{world_size - 1}"
            )
            log.info("p4reduce: %s: all its collectives go to gloo", self.why_not_switch)
            return
        if isinstance(world, P4ReduceProcessGroup) and world is not self:
            if world._channel is None:
                self.why_not_switch = world.why_not_switch
                return
            self._channel = world._channel  # same ranks, same job, same FIFO
        else:
            self._channel = _open_channel(self._rank, self._size, options, timeout)
        with _lock:
            self._channel.users += 1

    # -- the switch's collective ----------------------------------------------------------

    def allreduce(
        self, tensors: list[torch.Tensor], opts: dist.AllreduceOptions | None = None
    ) -> dist.Work:
        opts = dist.AllreduceOptions() if opts is None else opts
        reason = self._refusal(tensors, _op_name(opts))
        if reason:
            return self._to_gloo(reason, lambda: self._gloo.allreduce(tensors, opts))
        return self._submit(tensors, _op_name(opts))

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        """One switch allreduce of all the tensors, concatenated (they share a dtype)."""
        if opts is None:
            opts = dist.AllreduceCoalescedOptions()
        reason = self._refusal(tensors, _op_name(opts))
        if reason:
            return self._to_gloo(reason, lambda: self._gloo.allreduce_coalesced(tensors, opts))
        return self._submit(tensors, _op_name(opts))

    def _refusal(self, tensors: list[torch.Tensor], op: str) -> str:
        """Why these tensors cannot go through the switch ("" when they can)."""
        if self._channel is None:
            return self.why_not_switch or "the group was shut down"
        if op not in SWITCH_OPS:
            return f"op {op} (the switch only adds)"
        if any(t.layout != torch.strided for t in tensors):
            return "sparse tensor"
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) > 1:
            return "tensors of different dtypes in one call"
        dtype = next(iter(dtypes), torch.float32)
        if dtype not in WIRE_DTYPE:
            return f"dtype {str(dtype).replace('torch.', '')}"
        devices = {t.device.type for t in tensors} - {"cpu", "cuda"}
        if devices:
            return f"device {sorted(devices)[0]}"
        return ""

    def _to_gloo(self, reason: str, call: Callable[[], dist.Work]) -> dist.Work:
        self.fallbacks[reason] += 1
        if reason not in self._logged:
            self._logged.add(reason)
            log.info("p4reduce: allreduce with %s goes to gloo", reason)
        return call()

    def _submit(self, tensors: list[torch.Tensor], op: str) -> dist.Work:
        if sum(t.numel() for t in tensors) == 0:
            return _done_work(tensors)  # every rank has the same (zero) size
        channel = self._channel
        assert channel is not None
        return _SwitchWork(*channel.submit(lambda: _reduce(channel, tensors, op)))

    # -- lifecycle and names -------------------------------------------------------------

    def shutdown(self) -> None:
        self._release()
        super().shutdown()

    def abort(self) -> None:
        self._release()
        super().abort()

    def _release(self) -> None:
        channel, self._channel = self._channel, None
        if channel is None:
            return
        with _lock:
            channel.users -= 1
            last = channel.users == 0
        if last:
            channel.close()

    def getBackendName(self) -> str:  # noqa: N802 -- torch's name
        return BACKEND

    @property
    def worker(self) -> Worker | None:
        """This rank's Worker (None when the group goes entirely to gloo)."""
        return self._channel.worker if self._channel else None

    def stats(self) -> dict[str, Any]:
        """Switch counters, the Worker's stats and the gloo fallbacks by reason."""
        ch = self._channel
        return {
            "switch": vars(ch.counters).copy() if ch else {},
            "worker": ch.worker.stats.as_dict() if ch else {},
            "descriptor": ch.where if ch else "",
            "gloo_allreduces": dict(self.fallbacks),
            "why_not_switch": self.why_not_switch,
        }

    def __repr__(self) -> str:
        return f"P4ReduceProcessGroup(rank={self._rank}, size={self._size})"


# The collectives gloo serves, forwarded to the gloo object by Python methods of
# P4ReduceProcessGroup (besides the allreduce fallbacks, which call it directly too).
#
# Why not leave them to torch's dispatch: for a Python subclass of ProcessGroup, torch's
# C++ trampoline (PyProcessGroup) looks for a Python override with the GIL held and, when
# there is none, calls the C++ base -- which enqueues on gloo -- still holding the GIL.
# gloo's worker thread holds its queue mutex while it drops a finished work, and freeing
# that work's tensors may need the GIL (their Python objects). Main thread: GIL, waits for
# the mutex; gloo thread: mutex, waits for the GIL -- a deadlock, only when the worker's
# drop of the previous work overlaps the next enqueue: an intermittent hang (a broadcast,
# barrier, all_gather, reduce_scatter never posted by one rank), likelier under load,
# every time at world size 1. The gloo object's own Python bindings release
# the GIL before enqueueing; a Python override is what the trampoline calls, also for C++
# callers such as DDP's reducer.
GLOO_FORWARDED = (
    "broadcast",
    "allgather",
    "_allgather_base",
    "allgather_coalesced",
    "gather",
    "scatter",
    "reduce",
    "reduce_scatter",
    "_reduce_scatter_base",
    "alltoall",
    "alltoall_base",
    "barrier",
    "send",
    "recv",
    "recv_anysource",
)


def _gloo_method(name: str) -> Callable[..., Any]:
    def call(self: P4ReduceProcessGroup, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._gloo, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"gloo's {name}, called on the gloo group itself (see GLOO_FORWARDED)."
    return call


for _name in GLOO_FORWARDED:
    setattr(P4ReduceProcessGroup, _name, _gloo_method(_name))


def _reduce(channel: _Channel, tensors: list[torch.Tensor], op: str) -> list[torch.Tensor]:
    """Runs on the channel's thread: the Worker allreduce of `tensors`, in place."""
    worker, counters = channel.worker, channel.counters
    dtype = tensors[0].dtype
    wire = WIRE_DTYPE[dtype]
    np_op = "mean" if op == "AVG" and wire.is_floating_point else "sum"
    t0, calls = worker.stats.time, worker.stats.allreduces
    first = tensors[0].detach()
    try:
        if len(tensors) == 1 and first.device.type == "cpu" and wire == dtype:
            worker.allreduce_(first.numpy(), np_op)  # any strides, no copy
        else:
            flat = torch.cat([t.detach().reshape(-1).to("cpu", wire) for t in tensors])
            worker.allreduce_(flat.numpy(), np_op)
            offset = 0
            for t in tensors:
                n = t.numel()
                t.detach().copy_(flat[offset : offset + n].view(t.shape))
                offset += n
        if op == "AVG" and not wire.is_floating_point:
            for t in tensors:  # integer mean, truncated toward zero (as NCCL's AVG)
                t.detach().copy_(
                    torch.div(t.detach(), worker.cfg.worker_count, rounding_mode="trunc")
                )
    finally:  # also when the switch flagged an overflow
        s = worker.stats
        if s.allreduces > calls:
            counters.allreduces += 1
            counters.tensors += len(tensors)
            counters.values += sum(t.numel() for t in tensors)
            counters.blocks += s.last_blocks
            counters.nonzero_blocks += s.last_nonzero_blocks
            counters.seconds += s.time - t0
    return tensors


def _world_group() -> dist.ProcessGroup | None:
    return dist.group.WORLD if dist.is_initialized() else None


def _open_channel(rank: int, size: int, options: P4ReduceOptions, timeout: timedelta) -> _Channel:
    options = options.with_env()
    if options.deadline is None:
        options = replace(options, deadline=timeout.total_seconds())
    try:
        worker, where = open_worker(rank, options, world_size=size)
    except JobLookupError:
        raise
    except Exception as e:  # noqa: BLE001 -- say which rank before the cause
        raise RuntimeError(
            f"p4reduce rank {rank}: cannot open its Worker ({type(e).__name__}: {e})"
        ) from e
    cfg = worker.cfg
    log.info(
        "p4reduce rank %d: job %d (%d ranks, %d values per block) from %s, transport %s",
        rank,
        cfg.job,
        cfg.worker_count,
        cfg.block_values,
        where,
        worker.stats.transport,
    )
    return _Channel(worker, where)


def create_process_group(dist_options: Any, pg_options: Any) -> P4ReduceProcessGroup:
    """torch's creator function (extended API): `dist_options` carries the store, rank,
    size, timeout and the group's global ranks; `pg_options` is init_process_group's."""
    return P4ReduceProcessGroup(
        dist_options.store,
        dist_options.group_rank,
        dist_options.group_size,
        dist_options.timeout,
        P4ReduceOptions.coerce(pg_options),
        list(dist_options.global_ranks_in_group),
    )


def stats(group: dist.ProcessGroup | None = None) -> dict[str, Any]:
    """`P4ReduceProcessGroup.stats()` of `group` (default: the world group)."""
    pg = group if group is not None else _world_group()
    if not isinstance(pg, P4ReduceProcessGroup):
        raise TypeError(f"{pg!r} is not a p4reduce process group")
    return pg.stats()


register()
