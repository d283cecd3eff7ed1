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
- ``BACK``: set by the caller once it holds the GIL again: a helper returns to Python
  only then (both asking for the GIL at once put one of them to sleep);
- ``BACK + h``: 1 while helper ``h`` (1, 2, ...) is inside the claim loop; the caller's
  part waits for every helper's 0 before it returns (their ranges are written by then).

All accesses are sequentially consistent atomics (LLVM ``atomicrmw``/``load atomic``):
a helper's "inside" store precedes its first claim, so once the caller's own claim finds
no range left, every helper holding a range shows 1.
"""

from __future__ import annotations

import os

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = [
    "NEXT",
    "NR",
    "COUNT",
    "BACK",
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
    "PLAIN",
]

NEXT, NR, COUNT, BACK = 0, 1, 2, 3  # then helper h's "inside" flag at BACK + h (h >= 1)
# A wait spins on an atomic load this many times (~2-5 us), then gives the CPU away
# between loads (``yield_cpu``) for as many rounds again, then sleeps 50 us a round
# (``pause``): a spinning caller must not keep a helper it waits for off a core (more
# threads than cores: a busy machine, the compile thread, pytest-xdist's workers).
_SPINS = 2048
# A helper waits for the caller's ``BACK`` this many rounds at most, then returns anyway:
# the flag only avoids a contended GIL, correctness never waits on it.
_BACK_ROUNDS = 3 * _SPINS
_POSIX = os.name == "posix"


def slots(helpers: int) -> int:
    """Length of a launch's ``sync`` array for ``helpers`` helper threads."""
    return BACK + 1 + helpers


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


@intrinsic
def fetch_add(typingctx, arr, i, v):
    """``arr[i] += v`` as one atomic step; returns the value before."""
    if not _typed(arr, i, v):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element(context, builder, sig.args[0], args[0], args[1])
        value = context.cast(builder, args[2], sig.args[2], types.int64)
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
        ptr = _element(context, builder, sig.args[0], args[0], args[1])
        value = context.cast(builder, args[2], sig.args[2], types.int64)
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
    """A thread's first claim; ``role`` is 0 for the caller, ``h`` for helper ``h``, which
    marks itself inside first."""
    if role > 0:
        store(sync, BACK + role, 1)
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
    helper is inside the claim loop: the ranges they took are written (a helper that has
    not started finds none left). A helper marks itself outside, then waits (a bounded
    spin) until the caller holds the GIL again before returning to Python."""
    if role == 0:
        for h in range(1, sync.size - BACK):
            k = 0
            while load(sync, BACK + h) != 0:
                k += 1
                backoff(k)
    else:
        store(sync, BACK + role, 0)
        for k in range(_BACK_ROUNDS):
            if load(sync, BACK) != 0:
                break
            backoff(k)


# The ``sync`` of a plain call (``NR == 0``: the kernel runs ``jlo..jhi`` once); never
# written (writeable: the same numba type as a launch's own).
PLAIN = np.zeros(slots(0), np.int64)
