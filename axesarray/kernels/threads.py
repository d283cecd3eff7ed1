"""Running a kernel's outer loop on threads: ranges taken in turn by the calling thread
and a small pool (the kernels release the GIL; ``numba.get_num_threads()`` threads in all).

The parallel CPU kernels are compiled serial, over a range ``jlo..jhi`` of their outer loop
(``kernels/cpu.py``): numba's ``prange`` would compile each kernel's loop body four times
over (the parfor function and three wrappers, each optimized and turned into machine code
again), 3-4x the compile time of the serial kernel.
"""

from __future__ import annotations

import itertools
import signal
from concurrent.futures import ThreadPoolExecutor

import numba

__all__ = ["run_parts", "RANGES_PER_THREAD", "block_interrupts", "worker_pool"]

# A few ranges per thread: a helper that starts late, its core busy with something else,
# leaves more ranges to the others instead of stalling the kernel.
RANGES_PER_THREAD = 4

_POOL: list = []  # [(workers, ThreadPoolExecutor)], made on first parallel use


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


def worker_pool(workers: int, name: str) -> ThreadPoolExecutor:
    """A thread pool whose threads block SIGINT (``block_interrupts``).

    >>> worker_pool(1, "axesarray-doc").submit(lambda: 2).result()
    2
    """
    return ThreadPoolExecutor(workers, thread_name_prefix=name, initializer=block_interrupts)


def _pool(workers: int) -> ThreadPoolExecutor:
    if not _POOL or _POOL[0][0] != workers:
        if _POOL:
            _POOL.pop()[1].shutdown(wait=False)
        _POOL.append((workers, worker_pool(workers, "axesarray-kernel")))
    return _POOL[0][1]


def run_parts(part, count: int, args: tuple) -> None:
    """Run ``part(jlo, jhi, *args)`` over ``0..count`` split into ranges, on threads.

    >>> seen = []
    >>> run_parts(lambda lo, hi, out: out.extend(range(lo, hi)), 10, (seen,))
    >>> sorted(seen) == list(range(10))
    True
    """
    threads = numba.get_num_threads()
    if threads == 1 or count < 2:
        part(0, count, *args)
        return
    ranges = min(count, RANGES_PER_THREAD * threads)
    bounds = [count * r // ranges for r in range(ranges + 1)]
    taken = itertools.count()  # next() is atomic under the GIL

    def work() -> None:
        for r in iter(taken.__next__, None):
            if r >= ranges:
                return
            part(bounds[r], bounds[r + 1], *args)

    helpers = [_pool(threads - 1).submit(work) for _ in range(threads - 1)]
    work()  # the calling thread takes ranges too
    for h in helpers:
        h.result()
