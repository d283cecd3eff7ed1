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
"""

from __future__ import annotations

import numpy as np

__all__ = ["LOOPS", "WANTED", "LOOP_OPS", "load", "run_loop"]

LOOP_OPS = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid")
# op -> (loop(x, out), loop(x) in place) over 1-D contiguous float32 arrays, filled by
# ``load`` (keys are only ever added, so a reader that found one may use it)
LOOPS: dict = {}
# float32 ops the tier computed without a loop (``tier_eval``): ``load``'s work
WANTED: set = set()

_F32 = np.dtype(np.float32)


def load(ops=None) -> None:
    """Compile (or load from numba's disk cache) the loops of ``ops`` (default: ``WANTED``)
    and publish them in ``LOOPS``. Imports numba: run it where a compile may run (the
    compile thread)."""
    from . import tier_loops  # numba, and the math library's compiled functions

    for op in list(WANTED if ops is None else ops):
        if op in LOOPS or op not in LOOP_OPS:
            continue
        loop = getattr(tier_loops, f"{op}_f32_loop")
        inplace = getattr(tier_loops, f"{op}_f32_inplace")
        x = np.zeros(1, _F32)
        loop(x, np.empty_like(x))  # compiles the one signature the tier calls
        inplace(x)
        LOOPS[op] = (loop, inplace)


def run_loop(op: str, x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``op`` of the float32 array ``x`` by its loop, into ``out`` when it is contiguous and
    of ``x``'s shape, else into a new array."""
    loop, inplace = LOOPS[op]
    if out is x and x.flags.c_contiguous:  # the tier writes over a dying operand's buffer
        inplace(x.reshape(-1))
        return x
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
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
