"""Running a kernel's outer loop on threads: ranges taken in turn by the calling thread
and a small pool (the kernels release the GIL; ``numba.get_num_threads()`` threads in all).

The parallel CPU kernels are compiled serial, over ranges of their outer loop
(``kernels/cpu.py``): numba's ``prange`` would compile each kernel's loop body four times
over (the parfor function and three wrappers, each optimized and turned into machine code
again), 3-4x the compile time of the serial kernel. A generated kernel's threads claim the
ranges themselves, inside the kernel (``run_claimed``, ``kernels.atomics``); a Python part
(the numpy tier's slabs, the repack kernels) takes them in Python (``run_parts``). Between
launches a helper waits outside the GIL for the next one's ring (``SPIN_SECONDS``), then
sleeps on the job queue.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import queue
import signal
import sys
import threading
import time

import numpy as np

__all__ = [
    "run_parts",
    "run_claimed",
    "num_threads",
    "blas_ran",
    "BLAS_SPIN_SECONDS",
    "SPIN_SECONDS",
    "RANGES_PER_THREAD",
    "block_interrupts",
    "interrupts_held",
]

# A few ranges per thread: a helper that starts late, its core busy with something else,
# leaves more ranges to the others instead of stalling the kernel.
RANGES_PER_THREAD = 4

# The helpers: daemon threads (interpreter exit never waits for them) taking jobs from one
# queue. A job is ``(work, done)``; ``work()`` runs ranges of one call until none are left
# and returns how many it accounted for, which goes to that call's ``done`` queue. A
# SimpleQueue hand-off costs 11-26 us per launch against 39-84 us for a ThreadPoolExecutor's
# submit and Future (benchmarks/bench_threads.py, "launch"; 2 threads, shared machine).
_JOBS: queue.SimpleQueue = queue.SimpleQueue()
_HELPERS: list[int] = []  # thread idents of the helpers started so far
_START = threading.Lock()


def _after_fork_in_child() -> None:
    # only the forking thread lives on in a child: no helpers, and no lock held by one
    global _JOBS, _START, _NEXT_LOCK
    _JOBS, _START, _NEXT_LOCK = queue.SimpleQueue(), threading.Lock(), threading.Lock()
    _HELPERS.clear()
    _CHAIN.clear()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def block_interrupts() -> None:
    """Block SIGINT in the calling thread (an initializer of the library's worker threads).

    The kernel then delivers Ctrl-C to the main thread, where Python handles it: a worker
    in LLVM or numba (compiling) or in a kernel never sees the signal or its EINTR.

    >>> import threading
    >>> seen = []
    >>> def worker():
    ...     block_interrupts()
    ...     seen.append(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    >>> t = threading.Thread(target=worker); t.start(); t.join(); seen
    [True]
    """
    if hasattr(signal, "pthread_sigmask"):  # POSIX
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


@contextlib.contextmanager
def interrupts_held():
    """Ctrl-C held until the block ends, then raised (in the main thread, while Python's
    own handler is installed; elsewhere, or under another handler, nothing changes).

    For numba's first import: a KeyboardInterrupt in the middle left a half-initialized
    module (``yaml`` under numba) and every later evaluation of the session failed.

    >>> with interrupts_held():
    ...     import numpy
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    held: list = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if held:
            raise KeyboardInterrupt


_COUNT: list = []  # numba's reader of the thread count, once numba is loaded


def _imported(name: str) -> bool:
    """Whether module ``name`` is imported, not being imported (by another thread): the
    import system marks a module's spec ``_initializing`` until its code has run."""
    module = sys.modules.get(name)
    return module is not None and not getattr(module.__spec__, "_initializing", False)


def num_threads(load: bool = True) -> int:
    """Threads a parallel kernel runs on: ``numba.get_num_threads()`` (numba's setting,
    ``NUMBA_NUM_THREADS`` or ``numba.set_num_threads``, per calling thread). numba is
    imported on the first call; with ``load=False`` (the numpy tier, which answers before
    numba's start-up) numba's default is read instead while numba is not loaded."""
    if not _COUNT:
        if not load and not (_imported("numba") and _imported("numba.np.ufunc.parallel")):
            # not loaded, or being imported by the compile thread: importing it here would
            # wait on the import lock for the rest of numba's start-up (~0.15-0.4 s of a
            # tier answer that takes ~3 ms)
            value = os.environ.get("NUMBA_NUM_THREADS", "").strip()
            return int(value) if value.isdigit() and int(value) > 0 else _CORES
        with interrupts_held():
            import numba

            numba.get_num_threads()  # starts numba's thread layer, which the reader needs
            # numba's own reader, without the launch check (1.6 of its 2.2 us); the public
            # function where numba lacks it
            from numba.np.ufunc import parallel

        _COUNT.append(getattr(parallel, "_get_num_threads", numba.get_num_threads))
    return _COUNT[0]()


# After a threaded call OpenBLAS's threads spin (sched_yield) for 2**28 TSC cycles, its
# THREAD_TIMEOUT (~0.1 s at 2.5 GHz), before they sleep: until then each holds a core, and
# a helper woken on it competes with the spinner. A launch in that window uses only the
# cores the BLAS threads leave (the calling thread's, when BLAS runs on every core).
BLAS_SPIN_SECONDS = 0.1
# OpenBLAS threads a GEMM from m * n * k >= 65536 * GEMM_MULTITHREAD_THRESHOLD (4)
BLAS_THREADED_MNK = 1 << 18
_SPIN_UNTIL = [0.0]  # perf_counter() until which BLAS threads may be spinning


def _blas_threads() -> int:
    """Threads OpenBLAS runs on: its environment settings, else every core."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return os.cpu_count() or 1


_CORES = os.cpu_count() or 1
_BLAS_SPINNERS = max(0, min(_blas_threads(), _CORES) - 1)  # BLAS threads beside the caller


def blas_ran(m: int, n: int, k: int) -> None:
    """Note a BLAS matrix product of ``m x k`` by ``k x n`` that just ended (engine.routes):
    when OpenBLAS threads it, its threads now spin for ``BLAS_SPIN_SECONDS``."""
    if _BLAS_SPINNERS and m * n * k >= BLAS_THREADED_MNK:
        _SPIN_UNTIL[0] = time.perf_counter() + BLAS_SPIN_SECONDS


def _cpu_getter():
    """``sched_getcpu`` (the calling thread's CPU now, ~0.1 us through ctypes), or None
    where the C library or the process's CPU set does not allow moving the helpers."""
    try:
        import ctypes

        getcpu = ctypes.CDLL(None, use_errno=True).sched_getcpu
        getcpu.restype = ctypes.c_int
        allowed = os.sched_getaffinity(0)
    except (OSError, AttributeError, TypeError):  # not Linux, or no such call
        return None, frozenset()
    if len(allowed) < 2 or getcpu() < 0:
        return None, frozenset()
    return getcpu, frozenset(allowed)


# The helpers are kept off the caller's CPU. Linux wakes a helper on the CPU of the thread
# that woke it, the caller, and moves it only later: for the first ~10 parallel runs of a
# process both shared one core (the tier's softmax over C: the caller's slab 1.8-2.1 ms
# against 0.9 ms for the helper's, both on one CPU by /proc/thread-self/stat; from the
# ~12th run on, 1.0-1.2 ms each on two CPUs). Each job carries the caller's CPU; a helper
# allowed on it narrows its own CPU set to the process's set less that CPU
# (``sched_setaffinity``, 0.4 us, only when the caller's CPU changed), so Linux moves it.
_GETCPU, _ALLOWED = _cpu_getter()


def _helper(h: int) -> None:
    """Helper thread ``h`` (1, 2, ...): its jobs, ``work(h)``, one after another."""
    block_interrupts()
    mask = _ALLOWED  # the CPUs this helper may run on (empty: never narrowed again)
    job = None
    while True:
        if job is None:
            job = _JOBS.get()
        work, done, cpu = job
        if cpu in mask:
            mask = _ALLOWED - {cpu}
            try:
                os.sched_setaffinity(0, mask)
            except OSError:  # the CPU set changed under us (cgroups): leave it to Linux
                mask = frozenset()
        result = work(h)
        if done is not None:  # (a claiming launch's caller waits on its ``sync``)
            done.put(result)
        # not kept while waiting for the next job: the job's closure holds what its parts
        # read (a tier's slabs: the inputs), which would stay alive until then
        del work, done, job
        job = _awake_next(h, result if type(result) is np.ndarray else None)


# A helper stays awake this long after a job, waiting outside the GIL for the next
# launch's ring (``atomics.leave_claims``, ``atomics.await_ring``), then sleeps on the
# queue: waking a sleeping thread cost ~40 us on a small VM, which kept kernels under
# ~150 us of one-core time off threads. GNU OpenMP spins ~0.3 ms by default before
# sleeping, OpenBLAS 0.1 s. The wait gives its CPU away to any other runnable thread
# (sched_yield) after its first ~2-5 us.
SPIN_SECONDS = 1e-3
# The chain of ``sync`` windows launches take in order (``atomics``): [buffer, next
# window]. Its last window is never taken: the launch that starts a new chain rings it.
_CHAIN: list = []
_CHAIN_WINDOWS = 64
_NEXT_LOCK = threading.Lock()  # orders a launch's window and jobs against a helper's look


def _next_window() -> np.ndarray:
    """The ``sync`` the next launch takes, to the chain's end. Hold ``_NEXT_LOCK``."""
    from . import atomics  # numba's: only a compiled kernel's launch gets here

    if not _CHAIN:
        _CHAIN[:] = [np.zeros(_CHAIN_WINDOWS * atomics.WIDTH, np.int64), 0]
    buf, i = _CHAIN
    return buf[i * atomics.WIDTH :]


def _take_sync() -> np.ndarray:
    """A claiming launch's ``sync``: the chain's next window (a new chain's first, the old
    chain's last rung). Past ``WIDTH``'s helpers, an array of its own, the window rung
    for the helpers waiting on it. Hold ``_NEXT_LOCK``."""
    from . import atomics

    sync = _next_window()
    if _CHAIN[1] == _CHAIN_WINDOWS - 1:  # the last window: its waiters look again
        sync[atomics.RING] = 1
        _CHAIN.clear()
        sync = _next_window()
    _CHAIN[1] += 1
    top = len(_HELPERS)
    if atomics.slots(top) > atomics.WIDTH:
        sync[atomics.RING] = 1
        sync = np.zeros(atomics.slots(top), np.int64)  # no next window: SPIN stays 0
    else:
        sync[atomics.SPIN] = int(SPIN_SECONDS * 1e9)
    sync[atomics.TOP] = top
    return sync


def _ring() -> None:
    """Wake the helpers waiting for a launch that is not a claiming one (``run_parts``):
    they come for the GIL, which its caller's parts release."""
    if _CHAIN:
        from . import atomics

        with _NEXT_LOCK:
            _take_sync()[atomics.RING] = 1


def _awake_next(h: int, last: np.ndarray | None):
    """Helper ``h``'s next job, waited for outside the GIL for up to ``SPIN_SECONDS``;
    None when none came (the helper then sleeps on the queue). ``last``: the ``sync`` of
    the claiming launch it just ran, whose part waited already (``leave_claims``). Only
    once a generated kernel has loaded ``kernels.atomics`` (numba's): the numpy tier's
    parts run before numba is loaded."""
    if not _imported(__package__ + ".atomics"):
        return None
    from . import atomics

    if (
        last is not None
        and h <= last[atomics.TOP]
        and last[atomics.RING + h] == atomics.LEFT
        and last[atomics.SPIN] > 0
        and last.size >= 2 * atomics.WIDTH
        and not last[atomics.WIDTH + atomics.RING]
    ):
        return None  # its part waited the whole spin: no launch came
    end = time.perf_counter() + SPIN_SECONDS
    while True:
        with _NEXT_LOCK:
            try:  # (never a blocking get here: a launch needs the lock to put its jobs)
                return _JOBS.get_nowait()
            except queue.Empty:
                sync = _next_window()
        left = end - time.perf_counter()
        if left <= 0 or not atomics.await_ring(sync, int(left * 1e9)):
            return None


def _ensure_helpers(n: int) -> None:
    """At least ``n`` helper threads are running."""
    with _START:
        while len(_HELPERS) < n:
            h = len(_HELPERS) + 1
            t = threading.Thread(target=_helper, args=(h,), name="axesarray-kernel", daemon=True)
            t.start()
            _HELPERS.append(t.ident)


# Ranges per thread of a claiming launch (``run_claimed``): a helper that wakes late takes
# what is left, in ranges small enough to share out.
CLAIMED_RANGES_PER_THREAD = 8


def run_claimed(part, count: int, args: tuple, threads: int | None = None) -> None:
    """Run a generated kernel's ``part(sync, jlo, jhi, *args)`` over ``0..count`` on
    threads (``threads`` in all, the caller included; default ``num_threads()``), each
    claiming ranges itself (``kernels.atomics``). The caller starts on the ranges at once
    and never waits for a helper to start: one that wakes late takes the ranges left, or
    none. The caller's part then waits, outside the GIL, for the ranges the helpers took.

    Against ``run_parts``, whose threads take each range back in Python: no GIL between
    ranges (a thread asking for it while the other held it slept tens of microseconds),
    and no wait for the helpers' start or for their reports through a queue."""
    from . import atomics  # numba's: only a compiled kernel calls this

    if threads is None:
        threads = num_threads()
    if _SPIN_UNTIL[0] and time.perf_counter() < _SPIN_UNTIL[0]:
        threads = max(1, min(threads, _CORES - _BLAS_SPINNERS))
    if threads == 1 or count < 2 or threading.get_ident() in _HELPERS:
        part(atomics.PLAIN, 0, count, *args)
        return
    helpers = threads - 1
    ranges = min(count, CLAIMED_RANGES_PER_THREAD * threads)
    if len(_HELPERS) < helpers:
        _ensure_helpers(helpers)
    failed: list = []
    cpu = _GETCPU() if _GETCPU is not None else None
    with _NEXT_LOCK:
        sync = _take_sync()
        sync[atomics.NR] = ranges
        sync[atomics.COUNT] = count
        job = functools.partial(_helper_claims, part, sync, args, failed)
        for _ in range(helpers):
            _JOBS.put((job, None, cpu))
    try:
        # the part returns once the helpers' ranges are written (``atomics.leave_claims``)
        part(sync, 0, 0, *args)
    except BaseException as e:  # noqa: BLE001 - re-raised below, once no range runs
        # the part failed, or Ctrl-C landed after it: no range starts any more, and the
        # ones under way end before the caller moves on (a notebook cell's output changing
        # after its KeyboardInterrupt, otherwise)
        sync[atomics.NEXT] = ranges
        failed.insert(0, e)
        while (sync[atomics.RING + 1 : atomics.slots(sync[atomics.TOP])] == atomics.CLAIMING).any():
            time.sleep(1e-5)
    if failed:
        raise failed[0]


def _helper_claims(part, sync, args: tuple, failed: list, h: int) -> np.ndarray:
    """Helper ``h``'s share of a claiming launch (``run_claimed``); returns the launch's
    ``sync``, whose next window its part may have waited on (``_awake_next``)."""
    from . import atomics

    if sync[atomics.NEXT] >= sync[atomics.NR] or h > sync[atomics.TOP]:
        # woken after the caller took every range: nothing to do, and holding the GIL for
        # the part's call (~5 us) could keep the caller waiting for it (or a helper
        # started after the launch's ``sync`` was made, which has no slot for it)
        return sync
    try:
        part(sync, 0, h, *args)
    except BaseException as e:  # noqa: BLE001 - re-raised in the caller
        sync[atomics.NEXT] = sync[atomics.NR]  # the others stop too
        failed.append(e)
        sync[atomics.RING + h] = atomics.LEFT  # out of the claim loop: the caller goes on
    return sync


def run_parts(part, count: int, args: tuple, threads: int | None = None) -> None:
    """Run ``part(jlo, jhi, *args)`` over ``0..count`` split into ranges, on threads
    (``threads`` in all, the caller included; default ``num_threads()``).

    >>> seen = []
    >>> run_parts(lambda lo, hi, out: out.extend(range(lo, hi)), 10, (seen,))
    >>> sorted(seen) == list(range(10))
    True
    """
    if threads is None:
        threads = num_threads()
    if _SPIN_UNTIL[0] and time.perf_counter() < _SPIN_UNTIL[0]:
        threads = max(1, min(threads, _CORES - _BLAS_SPINNERS))
    if threads == 1 or count < 2 or threading.get_ident() in _HELPERS:
        # (a part that launches parts itself runs them here: its helper would wait on itself)
        part(0, count, *args)
        return
    ranges = min(count, RANGES_PER_THREAD * threads)
    bounds = [count * r // ranges for r in range(ranges + 1)]
    taken = itertools.count()  # next() is atomic under the GIL
    failed: list = []  # the first exception of a part; then the rest of the ranges are skipped

    def work(_helper: int = 0) -> int:
        """Ranges taken and run (or skipped after a failure): how many."""
        for n, r in enumerate(iter(taken.__next__, None)):  # n: ranges so far
            if r >= ranges:
                return n
            if not failed:
                try:
                    part(bounds[r], bounds[r + 1], *args)
                except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                    failed.append(e)

    helpers = threads - 1
    if len(_HELPERS) < helpers:
        _ensure_helpers(helpers)
    done: queue.SimpleQueue = queue.SimpleQueue()
    cpu = _GETCPU() if _GETCPU is not None else None
    for _ in range(helpers):
        _JOBS.put((work, done, cpu))
    _ring()
    # The calling thread takes ranges too, then waits only for ranges a helper took: a
    # helper that had not started by then finds none left and reports to a queue no one
    # reads any more.
    left = ranges - work()
    while left:
        try:
            left -= done.get()
        except KeyboardInterrupt as e:
            # Ctrl-C while helpers run: they skip the ranges not started and this thread
            # waits for the ranges under way, then raises. Raising at once left helpers
            # writing the arrays after the caller had moved on (a notebook cell's output
            # changing after its KeyboardInterrupt), and inside a kernel at exit.
            failed.insert(0, e)
    if failed:
        raise failed[0]
