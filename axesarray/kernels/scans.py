"""Running sums and products along one dim (``x.cumsum(name)``, ``x.cumprod(name)``) by
compiled loops instead of numpy's call.

numpy's ``add.accumulate`` takes ~2.3 ns an element along any dim (one add at a time).
The loops of ``scan_loops`` run the running values of the other dims side by side:
along a middle dim, the inner dim's values in vector registers (131k float32 along
``T`` of ``(32, 64, 64)``: 14 us, numpy 310); along the last dim, eight rows in turn
(84 us, numpy 310); a single row at numpy's speed. Each add rounds in the output dtype in
numpy's order, so the values are numpy's bit for bit.

The planner asks ``plan`` for each call step (``engine.planner``): a ``Scan`` when the call
is ``np.cumsum``/``np.cumprod`` along one dim, without other arguments, of an input whose
dims before and after that dim each merge into one stride, of bool, integer or float32/64
values, into a C-ordered output of numpy's accumulate dtype. ``load`` compiles its loop
for an input's dtype and writeability (numba's disk cache: once per machine) where the
schedule's kernels compile (``engine.tiers.compile_schedule``); ``run`` answers False
(numpy's call runs) until then, and for storage that is not a plain aligned 1-D array or
that may overlap the output. This module imports numba only inside ``load``.
"""

from __future__ import annotations

import attrs
import numpy as np

from ..core.dtypes import scan_dtype
from ..core.strided import contiguous_strides, merge_dims

__all__ = ["Scan", "plan", "load", "run", "LOOPS", "STATS"]

# the numpy functions the loops compute -> whether it is a product
_FUNCS = {np.cumsum: False, np.cumprod: True}
# (loop name, input dtype, output dtype, input read-only) -> the compiled loop, filled by
# ``load`` (keys are only ever added, so a reader that found one may use it)
LOOPS: dict = {}
STATS = {"scans": 0}  # the runs a loop answered
_INNER_MIN = 8  # an inner dim this long vectorizes: ``scan_inner``, else ``scan_rows``


@attrs.frozen
class Scan:
    """A planned running sum or product: ``loop`` of ``scan_loops`` over the input read at
    ``x_at`` (its offset, then its outer, along and inner strides, in elements) into the
    output from ``out_at``, ``lengths`` (outer, along, inner) elements."""

    prod: bool
    loop: str  # "scan_inner" or "scan_rows"
    x_dtype: np.dtype
    out_dtype: np.dtype
    x_at: tuple[int, int, int, int]
    out_at: int
    lengths: tuple[int, int, int]


def _loops_take(dtype: np.dtype) -> bool:
    """Bool, integers, float32 and float64 (float16 rounds each add through float32;
    complex and the rest: numpy's call)."""
    return dtype.kind in "biu" or (dtype.kind == "f" and dtype.itemsize in (4, 8))


def plan(fn, x, out) -> Scan | None:
    """The ``Scan`` of the call ``fn`` from the kernel leaf ``x`` (its one operand) into
    the kernel leaf ``out`` (its C-ordered result), or None: numpy's call."""
    func = getattr(fn, "func", None)
    prod = _FUNCS.get(func)
    if prod is None or getattr(fn, "kwargs", None) != () or not _loops_take(x.dtype):
        return None
    view, dst = x.view, out.view
    if view.blocks is not None or dst.blocks is not None or 0 in view.shape:
        return None
    if dst.strides != contiguous_strides(dst.shape) or out.dtype != scan_dtype(func, x.dtype):
        return None
    # the dims after the scanned one as one dim, then those before it: (outer, along, inner)
    d, n = fn.axis, view.ndim
    after = merge_dims(view, tuple(range(d + 1, n)), d + 1)
    three = None if after is None else merge_dims(after, tuple(range(d)), 0)
    if three is None:
        return None
    (n0, n1, n2), (s0, s1, s2) = three.shape, three.strides
    return Scan(
        prod,
        "scan_inner" if n2 >= _INNER_MIN else "scan_rows",
        x.dtype,
        out.dtype,
        (view.offset, s0, s1, s2),
        dst.offset,
        (n0, n1, n2),
    )


def load(scan: Scan, read_only: bool) -> None:
    """Compile (or load from numba's disk cache) the loop of ``scan`` for an input of its
    dtype, read-only or not, and publish it in ``LOOPS``. Imports numba: run it where
    kernels compile."""
    key = (scan.loop, scan.x_dtype, scan.out_dtype, read_only)
    if key in LOOPS:
        return
    from . import scan_loops

    loop = getattr(scan_loops, scan.loop)
    x = np.zeros(1, scan.x_dtype)
    x.flags.writeable = not read_only
    loop(x, 0, 0, 0, 0, np.zeros(1, scan.out_dtype), 0, 1, 1, 1, scan.prod)
    LOOPS[key] = loop


def run(scan: Scan, x, out) -> bool:
    """Run ``scan`` from the storage ``x`` into the storage ``out``: False (nothing
    written) when its loop is not loaded for ``x``, a storage is not a plain aligned 1-D
    array of the planned dtype (another would compile a new signature here), or the two
    may overlap."""
    if type(x) is not np.ndarray or type(out) is not np.ndarray:
        return False
    loop = LOOPS.get((scan.loop, x.dtype, out.dtype, not x.flags.writeable))
    if (
        loop is None
        or x.dtype != scan.x_dtype
        or out.dtype != scan.out_dtype
        or x.ndim != 1
        or out.ndim != 1
        or not (x.flags.c_contiguous and x.flags.aligned)
        or not (out.flags.c_contiguous and out.flags.aligned and out.flags.writeable)
        or np.may_share_memory(x, out)
    ):
        return False
    at, s0, s1, s2 = scan.x_at
    n0, n1, n2 = scan.lengths
    loop(x, at, s0, s1, s2, out, scan.out_at, n0, n1, n2, scan.prod)
    STATS["scans"] += 1
    return True
