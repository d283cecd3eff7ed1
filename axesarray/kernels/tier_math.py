"""The math library's float32 functions as loops over arrays, for the numpy tier.

numpy has no float32 ``exp`` within the library's bounds (2.5 ulp; ``log`` 3.6), so the tier
computed each float32 transcendental in float64 with numpy (1.0 ns an element against 0.4
for numpy's float32 ``exp`` and 0.37 for this module's loop). Once these loops are loaded,
the tier computes ``exp``, ``expm1``, ``log``, ``log1p``, ``tanh`` and ``sigmoid`` of
float32 with the kernels' own functions (``mathlib``: exp within 1.01 ulp, sigmoid 2.48,
the others 0.5), so the tier's values are the kernels' op by op.

The tier never waits for them: ``LOOPS`` is empty until ``load`` ran (on the compile thread,
after numba's start-up; compiled once per machine into numba's disk cache, as ``mathlib``
is), and ``WANTED`` collects the ops the tier met meanwhile. This module imports numba only
inside ``load``.

The max, min and sum of each row of a float32 or float64 array (``ROW_OPS``) are loops
too, loaded the same way: numpy's reduction along a row pays ~100 ns a row (its max over
rows of 128 float32 runs at 0.8 ns an element, the loop at 0.18). They fold as the kernels
do: a float32 sum in a float64 accumulator (numpy's adds pairwise in float32).

A loop is called only with the argument types it was compiled for (a read-only input
too, compiled at load; an unaligned one is copied first): a new type would compile on
the calling thread, which the tier never waits for.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = [
    "LOOPS",
    "ROW_LOOPS",
    "WANTED",
    "LOOP_OPS",
    "ROW_OPS",
    "load",
    "load_steps",
    "run_loop",
    "run_rows",
    "trailing",
]

LOOP_OPS = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid")
ROW_OPS = ("max", "min", "sum")
# op -> (loop(x, out), loop(x) in place) over 1-D contiguous float32 arrays, filled by
# ``load`` (keys are only ever added, so a reader that found one may use it)
LOOPS: dict = {}
# (op, dtype) -> loop(x, out): the max, min or sum of each row of a 2-D C-ordered float array
# ``x`` into the 1-D ``out``, filled by ``load`` (keys only ever added)
ROW_LOOPS: dict = {}
# ops the tier computed without a loop (``tier_eval``): ``load``'s work
WANTED: set = set()

_F32 = np.dtype(np.float32)
_ROW_DTYPES = (_F32, np.dtype(np.float64))


def load(ops=None) -> None:
    """Compile (or load from numba's disk cache) the loops of ``ops`` (default: ``WANTED``)
    and publish them in ``LOOPS`` / ``ROW_LOOPS``. Imports numba: run it where a compile
    may run (the compile thread)."""
    for op in list(WANTED if ops is None else ops):
        for step in load_steps(op):
            step()


def load_steps(op: str) -> list:
    """The load of ``op``'s loops as steps, each one compile of one signature (~0.1-0.3 s
    on a machine without numba's cache, a few ms with it), the last one publishing them:
    the compile thread runs each as its own job, so an exit waits for one compile at
    most. Empty when they are loaded, or ``op`` has none."""
    if op in ROW_OPS and (op, _F32) not in ROW_LOOPS:
        steps = [
            functools.partial(_compile, f"{op}_rows_f{dtype.itemsize * 8}", ro, (1, 1), dtype, 1)
            for dtype in _ROW_DTYPES
            for ro in (False, True)
        ]
        return [*steps, functools.partial(_publish_rows, op)]
    if op in LOOP_OPS and op not in LOOPS:
        steps = [
            functools.partial(_compile, f"{op}_f32_loop", ro, (1,), _F32, 1) for ro in (False, True)
        ]
        steps.append(functools.partial(_compile, f"{op}_f32_inplace", False, (1,), _F32, 0))
        return [*steps, functools.partial(_publish_map, op)]
    return []


def _compile(name: str, read_only: bool, shape: tuple, dtype: np.dtype, outs: int) -> None:
    """Compile (or load) the loop ``name`` of ``tier_loops`` for one signature: its input
    of ``dtype`` and ``len(shape)`` dims (read-only or not), then ``outs`` 1-D output."""
    from . import tier_loops  # numba, and the math library's compiled functions

    x = np.zeros(shape, dtype)
    x.flags.writeable = not read_only
    getattr(tier_loops, name)(x, *(np.empty(1, dtype) for _ in range(outs)))


def _publish_rows(op: str) -> None:
    from . import tier_loops

    for dtype in _ROW_DTYPES:
        ROW_LOOPS[(op, dtype)] = getattr(tier_loops, f"{op}_rows_f{dtype.itemsize * 8}")


def _publish_map(op: str) -> None:
    from . import tier_loops

    LOOPS[op] = (getattr(tier_loops, f"{op}_f32_loop"), getattr(tier_loops, f"{op}_f32_inplace"))


def run_loop(op: str, x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``op`` of the float32 array ``x`` by its loop, into ``out`` when it is contiguous and
    of ``x``'s shape, else into a new array."""
    loop, inplace = LOOPS[op]
    if out is x and x.flags.c_contiguous:  # the tier writes over a dying operand's buffer
        inplace(x.reshape(-1))
        return x
    if not (x.flags.c_contiguous and x.flags.aligned):
        x = np.ascontiguousarray(x)  # (an unaligned array would be a new type: compiled)
    if (
        out is None
        or out.shape != x.shape
        or out.dtype != _F32
        or not out.flags.c_contiguous
        or np.may_share_memory(x, out)  # another view of the same memory: not in place
    ):
        out = np.empty(x.shape, _F32)
    loop(x.reshape(-1), out.reshape(-1))
    return out


def trailing(axes: tuple, ndim: int) -> int:
    """How many dims ``axes`` are when they are the last of ``ndim`` in order (0 when not,
    or none): the rows ``run_rows`` reduces."""
    k = len(axes)
    return k if k and tuple(axes) == tuple(range(ndim - k, ndim)) else 0


def run_rows(op: str, x: np.ndarray, k: int, out: np.ndarray | None = None) -> np.ndarray | None:
    """``op`` ("max", "min" or "sum") over the last ``k`` dims of the float array ``x`` by its loop
    (None: no loop loaded for this dtype, or ``x`` is not C-ordered and aligned, or a row
    is empty: numpy's way), into ``out`` when it is a C-ordered array of the result's shape
    and dtype apart from ``x`` (the tier's destination), else into a new array."""
    loop = ROW_LOOPS.get((op, x.dtype))
    if loop is None:
        if x.dtype in _ROW_DTYPES:
            WANTED.add(op)  # loaded in the background (``engine.tiers``)
        return None
    n = math.prod(x.shape[x.ndim - k :])
    if not n or not x.flags.c_contiguous or not x.flags.aligned:
        return None
    shape = x.shape[: x.ndim - k]
    if (
        out is None
        or out.shape != shape
        or out.dtype != x.dtype
        or not (out.flags.c_contiguous and out.flags.aligned and out.flags.writeable)
        or np.may_share_memory(x, out)
    ):
        out = np.empty(shape, x.dtype)
    loop(x.reshape(-1, n), out.reshape(-1))
    return out
