"""Tiered execution: a new expression is answered by numpy while its kernels compile.

A schedule whose kernels are not compiled (or loaded) in this process yet, and whose numpy
evaluation is cheap (at most ``NUMPY_MAX_BYTES`` of numpy temporaries), runs on the
reference engine; its kernels compile on one background thread
(importing numba there too, so the first result never waits for numba's start-up). Later
calls find the schedule ready and run the kernels. Big expressions wait for their
kernels: numpy's temporaries would cost memory, and take as long as a compile.
``ax.set_options(tiered=False)`` always waits, for results identical run to run (the
tiers may differ in the last ulp: numpy rounds each op, the kernels fuse them, with FMA
contraction).
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..dag.nodes import Node, walk
from ..kernels.threads import worker_pool
from ..options import OPTIONS
from .binder import binder
from .dispatch import kernel_for, variant
from .schedule import KernelStep, Schedule

__all__ = [
    "use_numpy",
    "compile_schedule",
    "describe_tier",
    "background_done",
    "NUMPY_MAX_BYTES",
]


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): assume 8 GiB
        return 8 << 30


# numpy answers while its temporaries stay under 1/16 of the machine's memory and 256 MiB.
# The bound is on memory, not on elements: numpy writes and reads 256 MiB of temporaries in
# about 0.1 s, less than one kernel's compile, so up to there its answer comes much sooner
# than the kernels' (a batch norm of 6.4M float32, 150 MB of temporaries: 25 ms, against
# 1-3 s of compiles). Past it, the temporaries would double the memory of a big evaluation,
# for users whose data is near the machine's memory: waiting for the kernel costs a second
# once and keeps the peak at input + output.
NUMPY_MAX_BYTES = min(_physical_memory() // 16, 256 << 20)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.RLock()


def _background() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            # One thread: compiles are serialized by numba anyway, and the caller keeps a core.
            _pool = worker_pool(1, "axesarray-compile")  # SIGINT stays with the main thread
        return _pool


def in_background(fn, *args) -> Future:
    """Run ``fn`` on the compile thread."""
    return _background().submit(fn, *args)


def background_done() -> Future | None:
    """A future that completes once every compile submitted so far has ended (the pool
    has one thread and runs in order); None when none was ever submitted."""
    with _pool_lock:
        return None if _pool is None else _pool.submit(lambda: None)


def numpy_cost(root: Node) -> int:
    """Bytes of temporaries the reference engine allocates for ``root`` (one array per
    computed node)."""
    return sum(
        math.prod(n.shape) * n.dtype.itemsize for n in walk(root) if n.kind not in ("leaf", "const")
    )


def compile_schedule(plan: Schedule, params, dst) -> None:
    """Compile (or load from the disk cache) every kernel the schedule's next run needs,
    for arguments typed like this run's (``params``, ``dst``); nothing is run or written.
    CPU only (the numpy tier is CPU only)."""
    temps: dict = {t: np.empty(1, dtype) for t, (_, dtype, _) in enumerate(plan.temps)}
    for step in plan.steps:
        if type(step) is KernelStep:
            kernel = kernel_for(step, plan.device, variant(step, plan.device))
            # A kernel that ran already is numba's dispatcher itself (dispatch.run_kernel
            # keeps it once checked): compiled, nothing to warm.
            warm = getattr(kernel, "warm", None)
            if warm is not None:
                warm(binder(step)(params, temps, dst))
    plan.ready = True


def _cheap(plan: Schedule, root: Node) -> bool:
    if plan.numpy_ok is None:
        plan.numpy_ok = plan.device.is_cpu and numpy_cost(root) <= NUMPY_MAX_BYTES
    return plan.numpy_ok


def use_numpy(plan: Schedule, root: Node, dst) -> bool:
    """Whether this run of a not-yet-ready schedule goes to the reference engine (starting
    the background compile if it is not under way). False: the caller runs the kernels,
    after waiting for a background compile already under way."""
    if not OPTIONS["tiered"] or not _cheap(plan, root):
        _wait(plan)
        return False
    future = plan.compiling
    params = root.params
    if future is None:
        with _pool_lock:
            if plan.compiling is None:
                plan.compiling = _background().submit(compile_schedule, plan, params, dst)
        return True
    if not future.done():
        return True
    future.result()  # a compile error surfaces here, at the next call
    return False


def _wait(plan: Schedule) -> None:
    future: Future | None = plan.compiling
    if future is not None:
        future.result()


def describe_tier(plan: Schedule, root: Node) -> str:
    """What the next run uses, for ``explain``."""
    if plan.ready:
        return "kernels"
    if OPTIONS["tiered"] and _cheap(plan, root):
        return "numpy reference (kernels compile in the background)"
    return "kernels (compiled or loaded before the first run)"
