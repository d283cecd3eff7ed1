"""Tiered execution: a new expression is answered by numpy while its kernels compile.

A schedule whose kernels are not compiled (or loaded) in this process yet, and whose numpy
evaluation is cheap (at most ``NUMPY_MAX_BYTES`` of numpy temporaries), is answered by
``tier_eval.tier_assign``: the rewritten DAG evaluated with numpy, each shared node once,
into reused buffers, in cache-sized slabs on threads when it can. After the answer, the
schedule's kernels compile in the background: one thread hands them to the compile process
(``worker``: numba's compiles hold the GIL) and loads the machine code it leaves in the disk
cache. Later calls find the schedule ready and run the kernels. Big expressions wait for
their kernels: numpy's temporaries would cost memory, and take as long as a compile.
``ax.set_options(tiered=False)`` always waits, for results identical run to run. The tier
meets the kernels' accuracy: a float32 chain is computed in float64 from its first
transcendental op on and rounded once, and overflows where the kernels' float32 would
(``tier_eval``); what still differs between the tiers is the last ulp of plain float32
arithmetic (numpy rounds each op, the kernels may contract a multiply and an add into one
FMA) and float32 sums (numpy adds pairwise in float32, the kernels in float64). A process
exits without waiting for compiles under way (``_Compiler``, ``worker``).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import math
import os
import queue
import sys
import threading
from concurrent.futures import CancelledError, Future

import numpy as np

from ..dag.nodes import Node, walk
from ..kernels import scans, tier_math
from ..kernels.cache_key import on_disk
from ..kernels.threads import block_interrupts
from ..options import OPTIONS
from . import worker
from .binder import array_of, binder
from .dispatch import kernel_for, source_for, variant
from .rewrite import rewrite
from .schedule import CallStep, KernelStep, Schedule
from .tier_eval import TIER_REWRITES

__all__ = [
    "use_numpy",
    "compile_schedule",
    "compile_first",
    "wait_compile",
    "describe_tier",
    "background_done",
    "NUMPY_MAX_BYTES",
    "start_compile",
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


class _Compiler:
    """One daemon thread running compiles in order (numba serializes them anyway, and the
    caller keeps a core). Not a ``ThreadPoolExecutor``: the interpreter joins those at exit,
    so a script waited for compiles it would never use (0.8 s after its last result). A
    daemon thread is abandoned at exit; compiles not started are dropped, and a compile cut
    short leaves no half-written file (the kernel cache writes a temporary file and
    renames it, as numba's own cache does)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.closing = False
        # Held while this thread is inside numba and LLVM (a kernel's compile or its load
        # from disk). The interpreter's teardown frees what LLVM is using and kills a
        # daemon thread where it next takes the GIL, unwinding through LLVM's C++ frames:
        # a script ending mid-compile died (SIGSEGV, SIGABRT, LLVM assertions). At exit
        # (``_abandon``) the main thread waits for it: one kernel at most, since the
        # thread checks ``closing`` under it before each kernel. Waiting on the compile
        # process's pipe is outside it, so an exit never waits for that process.
        self.native = threading.Lock()

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        future.pid = os.getpid()  # type: ignore[attr-defined] - see _compiling
        self._jobs.put((future, fn, args))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="axesarray-compile", daemon=True
                )
                self._thread.start()
        return future

    def _run(self) -> None:
        block_interrupts()  # SIGINT stays with the main thread
        while True:
            future, fn, args = self._jobs.get()
            if self.closing:
                future.cancel()  # the interpreter is exiting: a waiter compiles itself
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - surfaces at the caller's result()
                future.set_exception(exc)


_compiler = _Compiler()

_pool_lock = threading.RLock()


@atexit.register
def _abandon() -> None:
    """At exit: drop the compiles not started, let the compile process go, and freeze the
    objects still alive (``gc.freeze``) so the interpreter's final garbage collection skips
    them. numba and llvmlite leave ~200k tracked objects; walking them cost a script
    150-400 ms after its last line (numpy alone: ~40 ms; ``benchmarks/bench_latency.py``,
    "script exit"). Registered at import, this runs after the handlers registered later;
    objects made after it are collected as usual. Python does not promise to finalize
    objects alive at exit, and module teardown still releases every object that is not in
    a reference cycle (a file held by a module is closed and flushed as before)."""
    _compiler.closing = True
    worker.PROCESS.close()  # the compile process exits after the kernel under way
    with _compiler.native:  # the kernel this thread compiles or loads now, if any, ends
        pass
    gc.freeze()


def _before_fork() -> None:
    # The kernel the compile thread compiles or loads ends first: its locks (numba's
    # compiler lock among them) would stay held forever in the child, whose first compile
    # then waited for ever.
    _compiler.native.acquire()


def _after_fork_in_parent() -> None:
    _compiler.native.release()


def _after_fork_in_child() -> None:
    """A forked child has only the thread that forked: the parent's compile thread, its
    queue and locks, and the compile process's pipes are not the child's (a first run
    waited forever on a thread that does not exist there)."""
    global _compiler, _pool_lock
    _compiler = _Compiler()
    _pool_lock = threading.RLock()
    worker.forget_process()
    # a load queued in the parent and not published: again
    _loops_queued.intersection_update({*tier_math.LOOPS, *(op for op, _ in tier_math.ROW_LOOPS)})


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )


def in_background(fn, *args) -> Future:
    """Run ``fn`` on the compile thread, as work inside numba (the interpreter's exit
    waits for it to end; not started once the exit began)."""
    return _compiler.submit(_native, fn, *args)


def _native(fn, *args):
    with _compiler.native:
        return None if _compiler.closing else fn(*args)


def background_done() -> Future | None:
    """A future that completes once every compile submitted so far has ended (the pool
    has one thread and runs in order); None when none was ever submitted."""
    with _pool_lock:
        return None if _compiler._thread is None else _compiler.submit(lambda: None)


def numpy_cost(root: Node) -> int:
    """Bytes of temporaries the reference engine allocates for ``root`` (one array per
    computed node)."""
    return sum(
        math.prod(n.shape) * n.dtype.itemsize for n in walk(root) if n.kind not in ("leaf", "const")
    )


def compile_schedule(
    plan: Schedule, params, dst, background: bool = False, names: list | None = None
) -> None:
    """Compile (or load from the disk cache) every kernel the schedule's next run needs,
    for arguments typed like this run's (``params``, ``dst``); nothing is run or written.
    CPU only (the numpy tier is CPU only). On the compile thread (``background``) it stops
    before a kernel once the interpreter exits; the schedule then stays not ready.
    ``names``: each kernel step's variant, when the caller chose them (numba's thread
    count is the caller thread's)."""
    temps: dict = {t: np.empty(1, dtype) for t, (_, dtype, _) in enumerate(plan.temps)}
    kernel_steps = [step for step in plan.steps if type(step) is KernelStep]
    if names is None:
        names = [None] * len(kernel_steps)
    for step, name in zip(kernel_steps, names, strict=True):
        with _compiler.native if background else contextlib.nullcontext():
            if background and _compiler.closing:
                return
            name = variant(step, plan.device) if name is None else name
            kernel = kernel_for(step, plan.device, name)
            # A kernel that ran already is numba's dispatcher itself
            # (dispatch.run_kernel keeps it once checked): compiled, nothing to warm.
            warm = getattr(kernel, "warm", None)
            if warm is not None:
                warm(binder(step)(params, temps, dst))
    for step in plan.steps:  # the compiled loops of running sums and products
        if type(step) is CallStep and step.scan is not None:
            x = array_of(step.args[0].src, params, temps, dst)
            with _compiler.native if background else contextlib.nullcontext():
                if background and _compiler.closing:
                    return
                scans.load(step.scan, isinstance(x, np.ndarray) and not x.flags.writeable)
    plan.ready = True
    plan.tier_program = None  # the tier's kept evaluation (its slab buffers) is done with


def compile_in_background(plan: Schedule, params, dst) -> None:
    """``compile_schedule``, the compiling done by the compile process (``worker``) when
    it can: this thread then only loads the machine code from the disk cache, and the
    user's thread keeps the GIL meanwhile. Kernels already on disk are not sent: with
    all of them there (a script run again) no compile process is started, whose start-up
    (an interpreter, numpy, numba: ~0.6-0.9 s here) was most of the time the numpy tier
    answered before the kernels ran. The kernels, on disk, are loaded into this process
    once the tier has answered the schedule twice (else the next answer starts another
    background compile, which loads them): a load runs here, and an exit waits for it
    (``_Compiler.native``), so a script that evaluates an expression once and ends
    leaves at once."""
    temps: dict = {t: np.empty(1, dtype) for t, (_, dtype, _) in enumerate(plan.temps)}
    jobs = []
    with _compiler.native:  # the thread count imports numba (LLVM's start-up) the first time
        if _compiler.closing:
            return
        for step in plan.steps:
            if type(step) is KernelStep:
                name = variant(step, plan.device)
                if (plan.device.type, name) not in step.compiled.kernels:
                    source, entry = source_for(step, plan.device, name)
                    if on_disk(source):
                        continue  # (for other argument types it compiles here, in the load)
                    args = binder(step)(params, temps, dst)
                    jobs.append((source, entry, tuple(worker.spec(a) for a in args)))
    on_disk_now = True
    if jobs and not _compiler.closing:
        # False: compiled below, here (an error is raised here)
        on_disk_now = worker.remote_compile(jobs)
    if on_disk_now and plan.answers < 2:
        plan.on_disk = True  # the tier's next answer starts the load (``_compiling``)
        return
    compile_schedule(plan, params, dst, background=True)


def _cheap(plan: Schedule, root: Node) -> bool:
    if plan.numpy_ok is None:  # the DAG the tier evaluates: a contraction is one dot
        plan.numpy_ok = plan.device.is_cpu and (
            numpy_cost(root) <= NUMPY_MAX_BYTES
            or numpy_cost(rewrite(root, TIER_REWRITES)) <= NUMPY_MAX_BYTES
        )
    return plan.numpy_ok


def use_numpy(plan: Schedule, root: Node, dst) -> bool:
    """Whether this run of a not-yet-ready schedule goes to the reference engine (the
    caller then starts the compile with ``start_compile`` once it has its answer). False:
    the caller runs the kernels, after waiting for a background compile under way."""
    if not OPTIONS["tiered"] or not _cheap(plan, root):
        wait_compile(plan)
        return False
    future = _compiling(plan)
    if future is None or not future.done():
        return True
    wait_compile(plan)  # a compile error surfaces here, at the next call
    return False


# Testing: the numpy tier answers every cheap evaluation (no compile starts, no schedule
# becomes ready), so a suite run with it tests the tier alone (``pytest --tiered``).
ANSWER_ALL = False


def start_compile(plan: Schedule, params, dst) -> None:
    """Queue the schedule's compile on the background thread, unless one is under way
    (or done: one that left the kernels on disk without loading them is followed by
    another, ``compile_in_background``). The numpy tier calls it after its answer is
    written: a compile holds the GIL for most of its time (numba's
    typing and lowering are Python), so one started before would slow the answer itself,
    each numpy call waiting up to the interpreter's switch interval to get the GIL back
    (a layer norm's first call 3-5x slower than with no compile under way)."""
    plan.answers += 1
    if _compiling(plan) is None and not ANSWER_ALL:
        with _pool_lock:
            if plan.compiling is None:
                plan.compiling = _compiler.submit(compile_in_background, plan, params, dst)
    # The math library's loops serve the tier's later answers; loaded in this process (an
    # exit waits for a load under way), they are queued from its second answer on: a
    # script that asks the tier once (and ends) does not wait for them.
    _ANSWERS[0] += 1
    if _ANSWERS[0] > 1:
        load_tier_loops()


_ANSWERS = [0]  # answers of the numpy tier in this process (``start_compile``)


_loops_queued: set = set()


def load_tier_loops() -> None:
    """Queue the load of the math library's loops the tier has wanted (``tier_math``), once
    per op, after the schedule's compile: numba is loaded by then (a script ending during
    numba's start-up on this thread waits for it), and later answers of the tier use them.
    One job per compile (``tier_math.load_steps``), so an exit waits for one compile at
    most. Under ``ANSWER_ALL`` too: they are the tier's own, not a hand-over to the
    kernels."""
    if not tier_math.WANTED - _loops_queued:
        return
    with _pool_lock:
        wanted = sorted(tier_math.WANTED - _loops_queued)
        _loops_queued.update(wanted)
    for op in wanted:
        for step in tier_math.load_steps(op):
            in_background(step)


def _compiling(plan: Schedule) -> Future | None:
    """The schedule's compile future, if any and if it can still end: one made in a parent
    process before a fork never does here (forgotten, so the compile starts again), and
    one that left the kernels on disk without loading them (``compile_in_background``)
    is as none: the next compile loads them."""
    future = plan.compiling
    if future is None:
        return None
    if not future.done():
        as_none = future.pid != os.getpid()  # made before a fork
    else:  # left the kernels on disk, and ended well (an error surfaces when waited for)
        as_none = plan.on_disk and not plan.ready and not future.cancelled()
        as_none = as_none and future.exception() is None
    if as_none:
        future = plan.compiling = None
    return future


def wait_compile(plan: Schedule) -> None:
    """Wait for the schedule's compile under way, if any (its error raised here); a
    compile cancelled at exit leaves the compiling to the caller."""
    future = _compiling(plan)
    if future is not None:
        with contextlib.suppress(CancelledError):
            future.result()


def compile_first(plan: Schedule, params, dst) -> None:
    """Before a CPU schedule's first run in the caller's thread: its kernels compiled (or
    loaded) on the compile thread, the caller waiting. SIGINT is blocked there, so Ctrl-C
    raises KeyboardInterrupt in the caller's wait and the compile goes on for the next
    call. In the caller, Ctrl-C landed inside numba's import (a half-imported ``numba``:
    every later evaluation of the session failed) or inside LLVM's Python wrappers.
    The variants are the caller's choice when numba is loaded (its thread count is per
    thread); a compile already under way (the tier's) is awaited instead. Compiled in the
    caller at exit, or when the caller is the compile thread."""
    if plan.ready or not plan.device.is_cpu or _compiler.closing:
        return
    if threading.current_thread() is _compiler._thread:
        return
    with _pool_lock:
        future = _compiling(plan)
        if future is None:
            names = None
            if "numba" in sys.modules:
                names = [variant(s, plan.device) for s in plan.steps if type(s) is KernelStep]
            # as background work: the exit and a fork wait for the kernel under way
            future = plan.compiling = _compiler.submit(
                compile_schedule, plan, params, dst, True, names
            )
    with contextlib.suppress(CancelledError):  # at exit: compiled in the caller
        future.result()


def describe_tier(plan: Schedule, root: Node) -> str:
    """What the next run uses, for ``explain``."""
    if plan.ready:
        return "kernels"
    if OPTIONS["tiered"] and _cheap(plan, root):
        if plan.on_disk and _compiling(plan) is None:
            return "numpy reference (kernels on disk, loaded when it runs again)"
        return "numpy reference (kernels compile in the background)"
    return "kernels (compiled or loaded before the first run)"
