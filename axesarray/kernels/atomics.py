"""Ranges of a parallel kernel's outer loop claimed by the threads themselves, outside the GIL.

A launch (``threads.run_claimed``) hands the helpers a job and the calling thread starts on
the ranges at once. Each thread takes the next range from a shared counter with an atomic
add (``claim``) inside the kernel, so a helper that wakes late (~40 us on a small VM)
joins for the ranges left instead of the caller waiting for it, and no thread needs the
GIL between ranges (taking it back while another thread held it cost a sleep of tens of
microseconds per range). The counters live in one int64 array per launch (``sync``):

- ``NEXT``: the next range to claim (``fetch_add``; a value past ``NR`` means none left);
- ``NR``: how many ranges (0: a plain call, the kernel runs ``jlo..jhi`` once);
- ``COUNT``: the outer loop's trip count, split evenly into the ranges;
- ``TOP``: how many helper slots follow;
- ``SPIN``: how long (ns) a helper leaving the launch waits for the next one's ring (0:
  not at all, an array outside the chain);
- ``RING``: set by the caller's part once it runs outside the GIL;
- ``RING + h``: helper thread ``h``'s (1, 2, ...) state: ``CLAIMING`` inside the claim
  loop, ``LEFT`` once out of it. The caller's part waits for every ``CLAIMING`` to end
  (the ranges are written by then).

Launches take their ``sync`` in order from a chain of windows of ``WIDTH`` slots in one
buffer (``threads._take_sync``): a launch's array reaches past its own window into the
next launch's. A helper leaving its ranges stays in the part, outside the GIL, and waits
up to ``SPIN`` for the next window's ring (``leave_claims``), so that it takes the GIL
only once the next caller has let it go: it never asks for the GIL while its caller
holds it (the one asking sleeps, and waking it cost ~40 us on a small VM), and a helper
kept awake joins the next launch within microseconds. A helper that is not in a launch
waits the same way from Python (``await_ring``).

All accesses are sequentially consistent atomics (LLVM ``atomicrmw``/``load atomic``):
a helper's ``CLAIMING`` store precedes its first claim, so once the caller's own claim
finds no range left, every helper holding a range shows it.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "NEXT",
    "NR",
    "COUNT",
    "TOP",
    "SPIN",
    "RING",
    "CLAIMING",
    "LEFT",
    "WIDTH",
    "slots",
    "fetch_add",
    "load",
    "store",
    "enter_claims",
    "claim",
    "claimed_bounds",
    "leave_claims",
    "yield_cpu",
    "pause",
    "backoff",
    "monotonic_ns",
    "wait_ring",
    "await_ring",
    "PLAIN",
]

NEXT, NR, COUNT, TOP, SPIN, RING = range(6)  # then helper h's state at RING + h (h >= 1)
CLAIMING, LEFT = 1, 2  # a helper's states (0: not in the launch)
WIDTH = 64  # slots of a chained window: helpers up to WIDTH - RING - 1
# A wait spins on an atomic load this many times (~2-5 us), then gives the CPU away
# between loads (``yield_cpu``) for as many rounds again, then sleeps 50 us a round
# (``pause``): a spinning caller must not keep a helper it waits for off a core (more
# threads than cores: a busy machine, the compile thread, pytest-xdist's workers).
_SPINS = 2048
_POSIX = os.name == "posix"


def slots(helpers: int) -> int:
    """Length of a launch's ``sync`` array for ``helpers`` helper threads."""
    return RING + 1 + helpers


def _typed(arr, *ints) -> bool:
    """Whether an intrinsic's operands are a 1-D int64 array and integers."""
    return (
        isinstance(arr, types.Array)
        and arr.dtype == types.int64
        and arr.ndim == 1
        and all(isinstance(i, types.Integer) for i in ints)
    )


def _element(context, builder, aryty, ary, index):
    a = context.make_array(aryty)(context, builder, ary)
    return builder.gep(a.data, [index])


def _element_and_value(context, builder, sig, args):
    """``(arr, i, v)``'s element pointer and ``v`` as an int64, for a writing intrinsic."""
    ptr = _element(context, builder, sig.args[0], args[0], args[1])
    return ptr, context.cast(builder, args[2], sig.args[2], types.int64)


@intrinsic
def fetch_add(typingctx, arr, i, v):
    """``arr[i] += v`` as one atomic step; returns the value before."""
    if not _typed(arr, i, v):
        return None

    def codegen(context, builder, sig, args):
        ptr, value = _element_and_value(context, builder, sig, args)
        return builder.atomic_rmw("add", ptr, value, "seq_cst")

    return types.int64(arr, i, v), codegen


@intrinsic
def load(typingctx, arr, i):
    """``arr[i]`` read atomically (never hoisted out of a loop)."""
    if not _typed(arr, i):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element(context, builder, sig.args[0], args[0], args[1])
        return builder.load_atomic(ptr, "seq_cst", 8)

    return types.int64(arr, i), codegen


@intrinsic
def store(typingctx, arr, i, v):
    """``arr[i] = v`` written atomically."""
    if not _typed(arr, i, v):
        return None

    def codegen(context, builder, sig, args):
        ptr, value = _element_and_value(context, builder, sig, args)
        builder.store_atomic(value, ptr, "seq_cst", 8)
        return context.get_dummy_value()

    return types.none(arr, i, v), codegen


@intrinsic
def yield_cpu(typingctx):
    """``sched_yield()``: the thread gives its CPU to another runnable one, if any."""

    def codegen(context, builder, sig, args):
        _libc_call(builder, "sched_yield")
        return context.get_dummy_value()

    return types.none(), codegen


def _libc_call(builder, name: str, args: tuple = ()) -> None:
    """A call of the C library's ``name(int32...) -> int32`` (POSIX; elsewhere nothing),
    declared as an external symbol: resolved when the machine code is loaded, so a kernel
    from the disk cache finds it in this process."""
    if not _POSIX:
        return
    i32 = ir.IntType(32)
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(i32, [i32] * len(args)), name)
    builder.call(fn, [ir.Constant(i32, a) for a in args])


@intrinsic
def pause(typingctx):
    """``usleep(50)``: the thread sleeps ~50 us (a wait that has spun long enough)."""

    def codegen(context, builder, sig, args):
        _libc_call(builder, "usleep", (50,))
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def monotonic_ns(typingctx):
    """``clock_gettime(CLOCK_MONOTONIC)`` in nanoseconds (POSIX; elsewhere 0): a clock
    read outside the GIL (the vDSO's, tens of nanoseconds)."""

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        if not _POSIX:
            return ir.Constant(i64, 0)
        i32 = ir.IntType(32)
        spec = ir.LiteralStructType([i64, i64])  # struct timespec on 64-bit Linux and macOS
        fn = builder.module.globals.get("clock_gettime")
        if fn is None:
            fnty = ir.FunctionType(i32, [i32, spec.as_pointer()])
            fn = ir.Function(builder.module, fnty, "clock_gettime")
        ts = cgutils.alloca_once(builder, spec)
        builder.call(fn, [ir.Constant(i32, _CLOCK_MONOTONIC), ts])
        sec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nsec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(sec, ir.Constant(i64, 1_000_000_000)), nsec)

    return types.int64(), codegen


_CLOCK_MONOTONIC = 6 if sys.platform == "darwin" else 1  # CLOCK_MONOTONIC


@njit(inline="always")
def backoff(k):
    """Round ``k`` of a wait: spin, then yield the CPU, then sleep."""
    if k > 2 * _SPINS:
        pause()
    elif k > _SPINS:
        yield_cpu()


@njit(inline="always")
def claim(sync):
    """The next range to run (``>= sync[NR]``: none left)."""
    return fetch_add(sync, NEXT, 1)


@njit(inline="always")
def enter_claims(sync, role):
    """A thread's first claim; ``role`` is 0 for the caller, which rings (it runs outside
    the GIL now), ``h`` for helper ``h``, which marks itself ``CLAIMING`` first."""
    if role > 0:
        store(sync, RING + role, CLAIMING)
    else:
        store(sync, RING, 1)
    return claim(sync)


@njit(inline="always")
def claimed_bounds(sync, r, jlo, jhi):
    """Range ``r``'s part of the outer loop (a plain call: ``jlo..jhi``)."""
    nr = sync[NR]
    if nr == 0:
        return jlo, jhi
    count = sync[COUNT]
    return count * r // nr, count * (r + 1) // nr


@njit(inline="always")
def leave_claims(sync, role):
    """Out of ranges. The caller (``role`` 0) waits, still outside the GIL, until no
    helper is ``CLAIMING``: the ranges they took are written (one that starts later finds
    none left). A helper marks itself ``LEFT``, then waits for the next launch's ring (the
    next window, where the array reaches it) up to ``sync[SPIN]`` ns before it returns."""
    if role == 0:
        for h in range(1, sync[TOP] + 1):
            k = 0
            while load(sync, RING + h) == CLAIMING:
                k += 1
                backoff(k)
    else:
        store(sync, RING + role, LEFT)
        if sync[SPIN] > 0 and sync.size >= 2 * WIDTH:
            wait_ring(sync, WIDTH, sync[SPIN])


@njit(inline="always")
def wait_ring(sync, at, limit_ns):
    """Whether ``sync[at + RING]`` was set within ``limit_ns`` ns: spinning ~2-5 us, then
    giving the CPU away between reads (a thread of another process, or one of this
    process that needs the core, runs first). Without POSIX's clock: one read."""
    if not _POSIX:
        return load(sync, at + RING) != 0
    k = 0
    start = monotonic_ns()
    while load(sync, at + RING) == 0:
        k += 1
        if k > _SPINS:
            yield_cpu()
            if monotonic_ns() - start > limit_ns:
                return False
    return True


@njit(nogil=True, cache=True)
def await_ring(sync, limit_ns):
    """``wait_ring`` of a helper outside any launch, from Python (outside the GIL)."""
    return wait_ring(sync, 0, limit_ns)


# The ``sync`` of a plain call (``NR == 0``: the kernel runs ``jlo..jhi`` once); never
# written (writeable: the same numba type as a launch's own).
PLAIN = np.zeros(slots(0), np.int64)
